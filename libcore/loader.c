/* SPDX-License-Identifier: MIT */
/* loader.c - finding plugin files and opening them: the search path,
 * LOOM_BACKENDS, variants by score, and the reason kept for every file.
 * Registration itself (descriptor, init, checks) lives in registry.c. */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend-private.h"

#ifndef LOOM_PLUGINDIR
#define LOOM_PLUGINDIR "/usr/local/lib/loom-1/plugins"
#endif

#define EXCLUDED_REASON "excluded by LOOM_BACKENDS"

/* The search path: written under the registry lock, read by the loading
 * thread without it (only loading threads write it, one at a time). */
static char **search_dirs;
static size_t n_search;
static bool search_built;
/* What loom_load_all did: the loading thread's, under the load lock. */
static bool loaded_all;
static int load_all_status;
static char *load_all_msg;

const char *loom_plugin_dir(void)
{
	return LOOM_PLUGINDIR;
}

/* ------------------------------------------------------------------------
 * Small string lists.
 */

struct strv {
	char **v;
	size_t n, cap;
};

static int strv_push(struct strv *s, const char *str, size_t len)
{
	char *copy;

	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		char **v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return LOOM_E_NOMEM;
		s->v = v;
		s->cap = cap;
	}
	copy = strndup(str, len);
	if (!copy)
		return LOOM_E_NOMEM;
	s->v[s->n++] = copy;
	return LOOM_OK;
}

static bool strv_has(const struct strv *s, const char *str)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->v[i], str) == 0)
			return true;
	return false;
}

static void strv_free(struct strv *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->v[i]);
	free(s->v);
	memset(s, 0, sizeof(*s));
}

/* Splits str at sep, dropping empty items and surrounding blanks. */
static int strv_split(struct strv *s, const char *str, char sep)
{
	while (str && *str) {
		const char *end = strchr(str, sep);
		size_t len = end ? (size_t)(end - str) : strlen(str);
		const char *a = str, *b = str + len;

		while (a < b && (*a == ' ' || *a == '\t'))
			a++;
		while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
			b--;
		if (b > a && strv_push(s, a, (size_t)(b - a)))
			return LOOM_E_NOMEM;
		str = end ? end + 1 : NULL;
	}
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * The search path: LOOM_PLUGIN_PATH, then the installed directory, or
 * what LOOM_PLUGIN_SYSTEM_PATH says instead of it (empty: none), so that
 * a build tree's tests never see an installed copy.
 */

static int build_search_path(void)
{
	struct strv s = { 0 };
	const char *sys;
	bool built;

	loom__registry_lock();
	built = search_built;
	loom__registry_unlock();
	if (built)
		return LOOM_OK;
	if (strv_split(&s, loom_env_get("LOOM_PLUGIN_PATH"), ':'))
		goto err_nomem;
	sys = loom_env_get("LOOM_PLUGIN_SYSTEM_PATH");
	if (sys ? strv_split(&s, sys, ':') :
		  strv_push(&s, LOOM_PLUGINDIR, strlen(LOOM_PLUGINDIR)))
		goto err_nomem;
	/* A directory named twice is searched once, at its first place. */
	for (size_t i = 0; i < s.n; i++) {
		for (size_t j = i + 1; j < s.n;) {
			if (strcmp(s.v[i], s.v[j]) == 0) {
				free(s.v[j]);
				memmove(&s.v[j], &s.v[j + 1],
					(s.n - j - 1) * sizeof(*s.v));
				s.n--;
			} else {
				j++;
			}
		}
	}
	/* Another thread may have built it meanwhile: the first one stays. */
	loom__registry_lock();
	if (!search_built) {
		search_dirs = s.v;
		n_search = s.n;
		search_built = true;
		s.v = NULL;
		s.n = 0;
	}
	loom__registry_unlock();
	strv_free(&s);
	return LOOM_OK;

err_nomem:
	strv_free(&s);
	return loom_error_set(LOOM_E_NOMEM, "out of memory");
}

void loom__loader_reset(void)
{
	loom__registry_lock();
	for (size_t i = 0; i < n_search; i++)
		free(search_dirs[i]);
	free(search_dirs);
	search_dirs = NULL;
	n_search = 0;
	search_built = false;
	loom__registry_unlock();
	loaded_all = false;
	load_all_status = LOOM_OK;
	free(load_all_msg);
	load_all_msg = NULL;
}

size_t loom_search_path_count(void)
{
	size_t n;

	build_search_path();
	loom__registry_lock();
	n = n_search;
	loom__registry_unlock();
	return n;
}

const char *loom_search_path(size_t i)
{
	const char *d = NULL;

	build_search_path();
	loom__registry_lock();
	if (i < n_search)
		d = search_dirs[i];
	loom__registry_unlock();
	return d;
}

/* ------------------------------------------------------------------------
 * LOOM_BACKENDS: "a,b" loads only those, in that priority order; "^a,b"
 * loads all but those.
 */

struct selection {
	enum { SEL_ALL, SEL_ONLY, SEL_EXCEPT } mode;
	struct strv names;
};

static int parse_selection(struct selection *sel)
{
	const char *env = loom_env_get("LOOM_BACKENDS");

	memset(sel, 0, sizeof(*sel));
	while (env && (*env == ' ' || *env == '\t'))
		env++;
	if (!env || !*env)
		return LOOM_OK;
	sel->mode = SEL_ONLY;
	if (*env == '^') {
		sel->mode = SEL_EXCEPT;
		env++;
	}
	if (strv_split(&sel->names, env, ','))
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	if (sel->mode == SEL_ONLY && sel->names.n == 0)
		sel->mode = SEL_ALL;
	return LOOM_OK;
}

/* True when name is selected; *priority is its place in an "only" list. */
static bool selected(const struct selection *sel, const char *name,
		     int *priority)
{
	*priority = -1;
	switch (sel->mode) {
	case SEL_ALL:
		return true;
	case SEL_EXCEPT:
		return !strv_has(&sel->names, name);
	case SEL_ONLY:
		for (size_t i = 0; i < sel->names.n; i++) {
			if (strcmp(sel->names.v[i], name) == 0) {
				*priority = (int)i;
				return true;
			}
		}
		return false;
	}
	return false;
}

/* ------------------------------------------------------------------------
 * Opening one file.
 */

/* The plugin name of a file called loom-<name>.so or
 * loom-<name>-<variant>.so, or NULL (caller frees). */
static char *name_of_file(const char *file)
{
	size_t len = strlen(file), n;

	if (len <= 8 || strncmp(file, "loom-", 5) != 0 ||
	    strcmp(file + len - 3, ".so") != 0)
		return NULL;
	n = strcspn(file + 5, "-");
	if (n > len - 8)
		n = len - 8;
	if (n == 0)
		return NULL;
	return strndup(file + 5, n);
}

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');

	return s ? s + 1 : path;
}

/* Turns dlopen's message into the reason a user reads. */
static void explain_dlerror(struct loom__plugin *p, const char *err)
{
	size_t flen = strlen(p->file);
	const char *s;

	if (!err)
		err = "unknown error";
	s = strstr(err, ": cannot open shared object file");
	if (s) {
		size_t n = (size_t)(s - err);

		if (n == flen && strncmp(err, p->file, n) == 0)
			loom__plugin_set(p, LOOM_PLUGIN_FAILED,
					 LOOM_E_NOT_FOUND, "not found");
		else
			loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
					 "missing library %.*s", (int)n, err);
		return;
	}
	s = strstr(err, "version `LOOM_");
	if (s && strstr(s, "' not found")) {
		s += strlen("version `");
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_ABI,
				 "needs a newer libloom (%.*s)",
				 (int)strcspn(s, "'"), s);
		return;
	}
	s = strstr(err, "undefined symbol: ");
	if (s) {
		s += strlen("undefined symbol: ");
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "undefined symbol %.*s",
				 (int)strcspn(s, " ,"), s);
		return;
	}
	if (strncmp(err, p->file, flen) == 0 &&
	    strncmp(err + flen, ": ", 2) == 0)
		err += flen + 2;
	if (strstr(err, "invalid ELF header") ||
	    strstr(err, "file too short") ||
	    strstr(err, "ELF load command") || strstr(err, "ET_DYN"))
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "not a shared library (%s)", err);
	else
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "cannot load: %s", err);
}

/* Records on p why path could not be opened (errno err), prefixed by
 * what; a symbolic link that leads nowhere says where it points. */
static int explain_errno(struct loom__plugin *p, const char *path, int err,
			 const char *what)
{
	char target[PATH_MAX];
	struct stat sb;
	ssize_t len;

	switch (err) {
	case ENOENT:
		if (lstat(path, &sb) == 0 && S_ISLNK(sb.st_mode)) {
			len = readlink(path, target, sizeof(target) - 1);
			target[len > 0 ? len : 0] = '\0';
			loom__plugin_set(p, LOOM_PLUGIN_FAILED,
					 LOOM_E_NOT_FOUND,
					 "%sdangling symbolic link to %s",
					 what, target);
			break;
		}
		/* fall through */
	case ENOTDIR:
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_NOT_FOUND,
				 "%snot found", what);
		break;
	case ELOOP:
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_IO,
				 "%ssymbolic link loop", what);
		break;
	case EACCES:
	case EPERM:
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_IO,
				 "%spermission denied", what);
		break;
	default:
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_IO,
				 "%scannot open: %s", what, strerror(err));
		break;
	}
	return p->status;
}

static bool read_fd(void *ctx, uint64_t off, void *buf, size_t n)
{
	int fd = *(const int *)ctx;
	char *b = buf;

	while (n) {
		ssize_t r = pread(fd, b, n, (off_t)off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return false;
		b += r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
	return true;
}

/* Checks p->file is a readable regular file holding a shared object for
 * this machine that is whole, before dlopen maps it: the dynamic loader
 * faults on a truncated file.  O_NONBLOCK: a FIFO must not hang us. */
static int check_file(struct loom__plugin *p)
{
	char why[256];
	struct stat sb;
	int fd, st = LOOM_OK;

	fd = open(p->file, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd < 0)
		return explain_errno(p, p->file, errno, "");
	if (fstat(fd, &sb) != 0) {
		st = explain_errno(p, p->file, errno, "");
	} else if (S_ISDIR(sb.st_mode)) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "is a directory");
		st = p->status;
	} else if (!S_ISREG(sb.st_mode)) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "not a regular file");
		st = p->status;
	} else if (loom__elf_check(read_fd, &fd, (uint64_t)sb.st_size, why,
				   sizeof(why))) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN, "%s",
				 why);
		st = p->status;
	}
	close(fd);
	return st;
}

/* Checks that the descriptor's symbol is as large as the fields its ABI
 * version has, by its size in the symbol table; a symbol whose size is
 * not known is read as declared. */
static int check_desc_size(struct loom__plugin *p, const void *desc)
{
#ifdef __GLIBC__ /* dladdr1 */
	const ElfW(Sym) *sym = NULL;
	Dl_info info;
	char why[160];

	if (!dladdr1(desc, &info, (void **)&sym, RTLD_DL_SYMENT) || !sym ||
	    info.dli_saddr != desc)
		return LOOM_OK;
	if (loom__desc_size_check(desc, (size_t)sym->st_size, why,
				  sizeof(why))) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN, "%s",
				 why);
		return p->status;
	}
#endif
	return LOOM_OK;
}

/* Opens p->file and reads its descriptor; no plugin code runs except the
 * object's own constructors. */
static int open_plugin(struct loom__plugin *p, bool name_from_file)
{
	const struct loom_plugin_desc *desc;
	int st;

	if (check_file(p))
		return p->status;
	dlerror();
	p->dl = dlopen(p->file, RTLD_NOW | RTLD_LOCAL);
	if (!p->dl) {
		explain_dlerror(p, dlerror());
		return p->status;
	}
	desc = dlsym(p->dl, LOOM_PLUGIN_SYMBOL);
	if (!desc) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "not a loom plugin: no %s symbol",
				 LOOM_PLUGIN_SYMBOL);
		goto err_close;
	}
	if (check_desc_size(p, desc))
		goto err_close;
	st = loom__plugin_check_desc(p, desc, name_from_file);
	if (!st)
		st = loom__plugin_score(p);
	if (st)
		goto err_close;
	return LOOM_OK;

err_close:
	dlclose(p->dl);
	p->dl = NULL;
	return p->status;
}

static int init_plugin(struct loom__plugin *p)
{
	int st = loom__plugin_init(p);

	if (st && p->dl) {
		dlclose(p->dl);
		p->dl = NULL;
	}
	return st;
}

int loom_load_path(const char *path, loom_reg_t **out)
{
	struct loom__plugin *p;
	char *name, *file;
	bool from_file;
	int st;

	if (out)
		*out = NULL;
	if (!path || !*path)
		return loom_error_set(LOOM_E_INVAL, "loom_load_path: no path");
	/* dlopen searches the library path for a name without a slash. */
	if (!strchr(path, '/')) {
		if (asprintf(&file, "./%s", path) < 0)
			return loom_error_set(LOOM_E_NOMEM, "out of memory");
	} else {
		file = strdup(path);
		if (!file)
			return loom_error_set(LOOM_E_NOMEM, "out of memory");
	}
	name = name_of_file(base_name(file));
	from_file = name != NULL;
	st = loom__load_begin("loom_load_path");
	if (st) {
		free(name);
		free(file);
		return st;
	}
	p = loom__plugin_add(name ? name : base_name(file), file);
	free(name);
	free(file);
	if (!p) {
		st = loom_error_set(LOOM_E_NOMEM, "out of memory");
		goto out_unlock;
	}
	st = open_plugin(p, from_file);
	if (!st)
		st = init_plugin(p);
	if (st)
		st = loom__plugin_error(p);
	else if (out)
		*out = p->reg;
out_unlock:
	loom__load_end();
	return st;
}

/* ------------------------------------------------------------------------
 * Scanning the search path.
 */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The candidate files of dir, in name order: every entry named like a
 * plugin, whatever it is, so that a directory or a dangling link of that
 * name gets a record saying so.  A directory that cannot be read gets a
 * record of its own, with no plugin name. */
static int scan_dir(const char *dir, struct strv *files)
{
	struct dirent *de;
	DIR *d = opendir(dir);

	if (!d) {
		int err = errno;
		struct loom__plugin *p = loom__plugin_add("", dir);

		if (!p)
			return loom_error_set(LOOM_E_NOMEM, "out of memory");
		/* The installed directory is missing where Loom runs from
		 * its build tree: nothing is broken. */
		if (err == ENOENT && strcmp(dir, LOOM_PLUGINDIR) == 0)
			loom__plugin_set(p, LOOM_PLUGIN_NOT_APPLICABLE,
					 LOOM_E_NOT_FOUND, "plugin directory: "
					 "not found (not installed)");
		else
			explain_errno(p, dir, err, "plugin directory: ");
		loom_log(LOOM_LOG_DEBUG, "%s: %s", dir, p->reason);
		return LOOM_OK;
	}
	while ((de = readdir(d))) {
		char *name = name_of_file(de->d_name);

		if (!name)
			continue;
		free(name);
		if (strv_push(files, de->d_name, strlen(de->d_name)))
			goto err_nomem;
	}
	closedir(d);
	if (files->n) /* an empty directory may have no array at all */
		qsort(files->v, files->n, sizeof(*files->v), cmp_str);
	return LOOM_OK;

err_nomem:
	closedir(d);
	return loom_error_set(LOOM_E_NOMEM, "out of memory");
}

/* The plugin names resolved in earlier directories, each by which record
 * (the best variant opened, else the first file), and the records of
 * later directories they override.  Those get their reason once the
 * variants are initialised, so that it names the variant that loaded. */
struct resolved {
	struct strv names;
	struct loom__plugin **by;
	struct loom__plugin **over;
	size_t *over_by; /* index in names of what overrides over[i] */
	size_t n_over, cap_over;
};

/* The index in r->names of name, or r->names.n. */
static size_t resolved_index(const struct resolved *r, const char *name)
{
	size_t i;

	for (i = 0; i < r->names.n; i++)
		if (strcmp(r->names.v[i], name) == 0)
			break;
	return i;
}

static int resolve(struct resolved *r, const char *name,
		   struct loom__plugin *by)
{
	struct loom__plugin **v = realloc(r->by, (r->names.n + 1) *
							 sizeof(*v));

	if (!v)
		return LOOM_E_NOMEM;
	r->by = v;
	if (strv_push(&r->names, name, strlen(name)))
		return LOOM_E_NOMEM;
	r->by[r->names.n - 1] = by;
	return LOOM_OK;
}

static int add_override(struct resolved *r, struct loom__plugin *p,
			size_t by)
{
	if (r->n_over == r->cap_over) {
		size_t cap = r->cap_over ? 2 * r->cap_over : 8;
		struct loom__plugin **v = realloc(r->over, cap * sizeof(*v));
		size_t *w;

		if (!v)
			return LOOM_E_NOMEM;
		r->over = v;
		w = realloc(r->over_by, cap * sizeof(*w));
		if (!w)
			return LOOM_E_NOMEM;
		r->over_by = w;
		r->cap_over = cap;
	}
	r->over[r->n_over] = p;
	r->over_by[r->n_over++] = by;
	return LOOM_OK;
}

/* After init: a name whose best variant failed is resolved by the one
 * that loaded in its place; every overridden record names it. */
static void name_overrides(struct resolved *r, struct loom__plugin *best,
			   struct loom__plugin *chosen)
{
	for (size_t i = 0; i < r->names.n; i++)
		if (r->by[i] == best)
			r->by[i] = chosen;
}

static void set_override_reasons(const struct resolved *r)
{
	for (size_t i = 0; i < r->n_over; i++)
		loom__plugin_set(r->over[i], LOOM_PLUGIN_SKIPPED, LOOM_OK,
				 "overridden by %s",
				 r->by[r->over_by[i]]->file);
}

static void resolved_free(struct resolved *r)
{
	strv_free(&r->names);
	free(r->by);
	free(r->over);
	free(r->over_by);
	memset(r, 0, sizeof(*r));
}

/* One name's opened variants, best score first, not yet initialised. */
struct group {
	struct loom__plugin **v;
	size_t n;
	struct loom__plugin *chosen; /* after init_group, or NULL */
};

/* Closes opened variants that will not be initialised for want of
 * memory. */
static void close_variants(struct loom__plugin *const *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		dlclose(v[i]->dl);
		v[i]->dl = NULL;
		loom__plugin_set(v[i], LOOM_PLUGIN_FAILED, LOOM_E_NOMEM,
				 "out of memory");
	}
}

/* The variants of one name opened so far, best first. */
struct variants {
	struct loom__plugin *v[64];
	size_t n;
};

/* What becomes of p, one file of a name: excluded by the selection,
 * overridden by a name resolved before (res index over), a duplicate of
 * a plugin loaded before (dup), or opened and placed among the variants
 * in score order, after equal scores. */
static int sort_variant(struct loom__plugin *p, bool sel_ok, size_t over,
			const struct loom__plugin *dup,
			struct resolved *res, struct variants *vs)
{
	size_t j;

	if (!sel_ok) {
		loom__plugin_set(p, LOOM_PLUGIN_EXCLUDED, LOOM_OK,
				 EXCLUDED_REASON);
		return LOOM_OK;
	}
	if (over < res->names.n) {
		/* The reason comes with set_override_reasons(). */
		loom__plugin_set(p, LOOM_PLUGIN_SKIPPED, LOOM_OK,
				 "overridden");
		return add_override(res, p, over);
	}
	if (dup) {
		loom__plugin_set(p, LOOM_PLUGIN_SKIPPED, LOOM_OK,
				 "duplicate name: '%s' is already loaded "
				 "from %s", p->name, dup->file);
		return LOOM_OK;
	}
	if (open_plugin(p, true))
		return LOOM_OK;
	if (vs->n == LOOM__N_OF(vs->v)) {
		dlclose(p->dl);
		p->dl = NULL;
		loom__plugin_set(p, LOOM_PLUGIN_SKIPPED, LOOM_OK,
				 "too many variants");
		return LOOM_OK;
	}
	for (j = vs->n++; j > 0 && vs->v[j - 1]->score < p->score; j--)
		vs->v[j] = vs->v[j - 1];
	vs->v[j] = p;
	return LOOM_OK;
}

/* Records the file of dir named file as a plugin of name (in *out). */
static int add_file(const char *dir, const char *file, const char *name,
		    struct loom__plugin **out)
{
	char *path;

	if (asprintf(&path, "%s/%s", dir, file) < 0)
		return LOOM_E_NOMEM;
	*out = loom__plugin_add(name, path);
	free(path);
	return *out ? LOOM_OK : LOOM_E_NOMEM;
}

/* Records every file of one name in one directory, opens the selected
 * ones and keeps them in *out, best first (ties in file name order). */
static int load_group(const char *dir, const struct strv *files,
		      const char *name, const struct selection *sel,
		      struct resolved *res, struct group *out)
{
	struct variants vs = { .n = 0 };
	size_t over = resolved_index(res, name);
	struct loom__plugin *dup = loom__plugin_loaded(name);
	struct loom__plugin *first = NULL, *p;
	int priority;
	bool sel_ok = selected(sel, name, &priority);

	out->v = NULL;
	out->n = 0;
	out->chosen = NULL;
	for (size_t i = 0; i < files->n; i++) {
		char *fname = name_of_file(files->v[i]);
		bool mine = fname && strcmp(fname, name) == 0;

		free(fname);
		if (!mine)
			continue;
		if (add_file(dir, files->v[i], name, &p))
			goto err_nomem;
		loom__registry_lock();
		p->priority = priority;
		loom__registry_unlock();
		if (!first)
			first = p;
		if (sort_variant(p, sel_ok, over, dup, res, &vs))
			goto err_nomem;
	}
	if (sel_ok && over == res->names.n && first &&
	    resolve(res, name, vs.n ? vs.v[0] : first))
		goto err_nomem;
	if (vs.n) {
		out->v = malloc(vs.n * sizeof(*out->v));
		if (!out->v)
			goto err_nomem;
		memcpy(out->v, vs.v, vs.n * sizeof(*out->v));
		out->n = vs.n;
	}
	return LOOM_OK;

err_nomem:
	close_variants(vs.v, vs.n);
	return loom_error_set(LOOM_E_NOMEM, "out of memory");
}

/* Initialises the best variant of g; when its init fails, the next best,
 * and so on (not when it finds no hardware: the others would not either).
 * The ones after the winner are closed. */
static void init_group(struct group *g)
{
	/* The variant that loaded, or that found no hardware. */
	struct loom__plugin *chosen = NULL;

	g->chosen = NULL;

	for (size_t i = 0; i < g->n; i++) {
		struct loom__plugin *p = g->v[i];

		if (chosen) {
			dlclose(p->dl);
			p->dl = NULL;
			loom__plugin_set(p, LOOM_PLUGIN_SKIPPED, LOOM_OK,
					 "variant %s scores higher",
					 base_name(chosen->file));
		} else if (!init_plugin(p) || p->state != LOOM_PLUGIN_FAILED) {
			chosen = p;
		} else if (i + 1 < g->n) {
			loom_log(LOOM_LOG_INFO, "plugin %s: %s; trying the "
				 "next variant, %s", p->file, p->reason,
				 base_name(g->v[i + 1]->file));
		}
	}
	g->chosen = chosen;
}

/* Appends " (found: a, b)" to buf at *len: the names of the plugins that
 * were found, so that a misspelt name is easy to put right. */
static void append_found(char *buf, size_t size, size_t *len)
{
	struct strv seen = { 0 };
	const struct loom__plugin *p;

	for (size_t i = 0; (p = loom__plugin_by_index(i)); i++) {
		/* A search directory's record has no name. */
		if (!*p->name || strv_has(&seen, p->name))
			continue;
		if (strv_push(&seen, p->name, strlen(p->name)))
			break;
		if (*len < size)
			*len += (size_t)snprintf(buf + *len, size - *len,
						 "%s%s",
						 seen.n == 1 ? " (found: " :
							       ", ",
						 p->name);
	}
	if (*len < size)
		*len += (size_t)snprintf(buf + *len, size - *len, "%s",
					 seen.n ? ")" : " (found no plugins)");
	strv_free(&seen);
}

/* After loading: every name LOOM_BACKENDS asks for must be loaded. */
static int check_requested(const struct selection *sel, char **msg)
{
	char buf[2048] = "";
	size_t len = 0;
	int st = LOOM_OK;

	if (sel->mode != SEL_ONLY)
		return LOOM_OK;
	for (size_t i = 0; i < sel->names.n; i++) {
		const char *name = sel->names.v[i];
		const struct loom__plugin *why = NULL;
		int one;

		if (loom__plugin_loaded(name))
			continue;
		for (size_t j = 0; (why = loom__plugin_by_index(j)); j++)
			if (strcmp(why->name, name) == 0 &&
			    why->state != LOOM_PLUGIN_SKIPPED &&
			    why->state != LOOM_PLUGIN_EXCLUDED)
				break;
		if (why) {
			one = why->status ? why->status : LOOM_E_PLUGIN;
			len += (size_t)snprintf(
				buf + len, sizeof(buf) - len,
				"%sLOOM_BACKENDS: backend '%s' cannot be "
				"loaded: %s (%s)",
				len ? "; " : "", name, why->reason, why->file);
		} else {
			one = LOOM_E_NOT_FOUND;
			len += (size_t)snprintf(
				buf + len, sizeof(buf) - len,
				"%sLOOM_BACKENDS: backend '%s' not found in ",
				len ? "; " : "", name);
			for (size_t d = 0; d < n_search && len < sizeof(buf);
			     d++)
				len += (size_t)snprintf(buf + len,
							sizeof(buf) - len,
							"%s%s", d ? ":" : "",
							search_dirs[d]);
			append_found(buf, sizeof(buf), &len);
		}
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
		if (!st)
			st = one;
	}
	if (st) {
		*msg = strdup(buf);
		loom_error_set(st, "%s", buf);
	}
	return st;
}

/* The groups opened, waiting for their init. */
struct pending {
	struct group *v;
	size_t n, cap;
};

/* Keeps g among the pending groups; without memory, closes it. */
static int pending_push(struct pending *pd, struct group *g)
{
	if (pd->n == pd->cap) {
		size_t cap = pd->cap ? 2 * pd->cap : 8;
		void *v = realloc(pd->v, cap * sizeof(*pd->v));

		if (!v) {
			close_variants(g->v, g->n);
			free(g->v);
			return loom_error_set(LOOM_E_NOMEM, "out of memory");
		}
		pd->v = v;
		pd->cap = cap;
	}
	pd->v[pd->n++] = *g;
	return LOOM_OK;
}

/* Opens the plugins of one search directory, a group per name (the first
 * directory that has a name wins it; see resolve()). */
static int load_dir(const char *dir, const struct selection *sel,
		    struct resolved *res, struct pending *pd)
{
	struct strv files = { 0 };
	struct strv seen = { 0 };
	int st = scan_dir(dir, &files);

	for (size_t i = 0; i < files.n && !st; i++) {
		char *name = name_of_file(files.v[i]);
		struct group g;

		if (!name || strv_has(&seen, name)) {
			free(name);
			continue;
		}
		st = strv_push(&seen, name, strlen(name));
		if (!st)
			st = load_group(dir, &files, name, sel, res, &g);
		free(name);
		if (!st && g.n)
			st = pending_push(pd, &g);
	}
	strv_free(&seen);
	strv_free(&files);
	return st;
}

/* Initialises the winners; plugins that compose other plugins' devices
 * last, since their init looks those devices up.  Then each name is
 * resolved by the variant that loaded, and the groups go. */
static void init_pending(struct pending *pd, struct resolved *res)
{
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < pd->n; i++) {
			bool composes = loom__plugin_composes(pd->v[i].v[0]);

			if (composes == (pass == 1))
				init_group(&pd->v[i]);
		}
	}
	for (size_t i = 0; i < pd->n; i++) {
		if (pd->v[i].chosen)
			name_overrides(res, pd->v[i].v[0], pd->v[i].chosen);
		free(pd->v[i].v);
	}
	free(pd->v);
	set_override_reasons(res);
	resolved_free(res);
}

/* Loads every plugin of the search path once; the status (and message)
 * of that one time are kept for later calls. */
static int load_all_once(void)
{
	struct selection sel;
	struct resolved res = { 0 };
	struct pending pd = { 0 };
	char *msg = NULL;
	int st;

	st = build_search_path();
	if (st)
		return st;
	st = parse_selection(&sel);
	if (st)
		return st;
	for (size_t d = 0; d < n_search && !st; d++)
		st = load_dir(search_dirs[d], &sel, &res, &pd);
	init_pending(&pd, &res);
	if (!st)
		st = check_requested(&sel, &msg);
	strv_free(&sel.names);
	loaded_all = true;
	load_all_status = st;
	free(load_all_msg);
	load_all_msg = msg;
	if (!st)
		loom_log(LOOM_LOG_DEBUG, "loaded %zu plugins, %zu devices",
			 loom_reg_count(), loom_dev_count());
	return st;
}

int loom_load_all(void)
{
	int st = loom__load_begin("loom_load_all");

	if (st)
		return st;
	if (!loaded_all) {
		st = load_all_once();
	} else if ((st = load_all_status)) {
		loom_error_set(st, "%s", load_all_msg ? load_all_msg : "");
	}
	loom__load_end();
	return st;
}
