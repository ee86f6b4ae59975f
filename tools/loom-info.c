/* SPDX-License-Identifier: MIT */
/* loom-info.c - what the loader found and why: the search path, every
 * candidate plugin file with its state and reason, every device with its
 * memory, capabilities and entry points, and the world (rank and size)
 * under an MPI launcher.  Uses only the public API. */
#include "config.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom-backend.h>

static const char *const proc_names[] = {
#define X_(name) LOOM_PROC_##name,
	LOOM_PROC_MAP(X_)
#undef X_
};

static const struct {
	uint32_t bit;
	const char *name;
} cap_names[] = {
	{ LOOM_DEV_CAP_ASYNC, "async" },
	{ LOOM_DEV_CAP_HOST_BUFFER, "host-buffer" },
	{ LOOM_DEV_CAP_EVENTS, "events" },
	{ LOOM_DEV_CAP_PEER_COPY, "peer-copy" },
};

#define N_OF(a) (sizeof(a) / sizeof(*(a)))

/* The warnings and errors the library logged while loading: environment
 * mistakes and the like, which the report shows (a user running loom-info
 * is asking what went wrong).  Kept in order as logged; warnings_shown()
 * picks which to print. */
static struct {
	char **v;
	size_t n, cap;
} warnings;

static void warning_add(const char *msg)
{
	char *s = strdup(msg), **v;

	if (!s)
		return;
	if (warnings.n == warnings.cap) {
		size_t cap = warnings.cap ? 2 * warnings.cap : 16;

		v = realloc(warnings.v, cap * sizeof(*v));
		if (!v) {
			free(s);
			return;
		}
		warnings.v = v;
		warnings.cap = cap;
	}
	warnings.v[warnings.n++] = s;
}

/* Warnings and errors go into the report; info and debug (when LOOM_LOG
 * asks for them) to stderr as they come. */
static void on_log(enum loom_log_level level, const char *msg, void *data)
{
	if (level <= LOOM_LOG_WARN)
		warning_add(msg);
	else
		fprintf(stderr, "loom: %s: %s\n",
			level == LOOM_LOG_INFO ? "info" : "debug", msg);
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Orders warnings by text, then by when they came. */
static int cmp_warning(const void *a, const void *b)
{
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	int c = strcmp(warnings.v[i], warnings.v[j]);

	return c ? c : (i > j) - (i < j);
}

/* Which warnings to print, each once, in the order they came: not a
 * repeat of an earlier one, nor of a failed plugin's line in the plugin
 * table.  Sorting both makes it n log n (one run had 4000 search
 * directories, each with a warning and a record).  The caller frees the
 * result; NULL when there is no memory (then every warning shows). */
static bool *warnings_shown(void)
{
	size_t n = loom_plugin_count(), n_failed = 0;
	bool *show = malloc((warnings.n ? warnings.n : 1) * sizeof(*show));
	size_t *order = malloc((warnings.n ? warnings.n : 1) *
			       sizeof(*order));
	char **failed = calloc(n ? n : 1, sizeof(*failed));

	if (!show || !order || !failed)
		goto err;
	for (size_t i = 0; i < n; i++) {
		struct loom_plugin_info p;
		char buf[1200];

		if (loom_plugin_info(i, &p) || p.state != LOOM_PLUGIN_FAILED)
			continue;
		if (*p.name)
			snprintf(buf, sizeof(buf), "plugin %s (%s): %s: %s",
				 p.name, p.file,
				 loom_plugin_state_name(p.state), p.reason);
		else /* a directory of the search path */
			snprintf(buf, sizeof(buf), "%s: %s", p.file,
				 p.reason);
		failed[n_failed] = strdup(buf);
		if (!failed[n_failed++])
			goto err;
	}
	qsort(failed, n_failed, sizeof(*failed), cmp_str);
	for (size_t i = 0; i < warnings.n; i++)
		order[i] = i;
	qsort(order, warnings.n, sizeof(*order), cmp_warning);
	for (size_t k = 0; k < warnings.n; k++) {
		const char *w = warnings.v[order[k]];

		show[order[k]] =
			(k == 0 || strcmp(warnings.v[order[k - 1]], w)) &&
			!bsearch(&w, failed, n_failed, sizeof(*failed),
				 cmp_str);
	}
	goto out;
err:
	free(show);
	show = NULL;
out:
	for (size_t i = 0; failed && i < n_failed; i++)
		free(failed[i]);
	free(failed);
	free(order);
	return show;
}

/* Why no device came out of loading, in one sentence; NULL when there are
 * devices. */
static const char *why_no_device(char *buf, size_t len)
{
	size_t n = loom_plugin_count(), files = 0, loaded = 0, excluded = 0;
	int used = 0;

	if (loom_dev_count())
		return NULL;
	/* Records without a plugin name are directories that could not be
	 * read; they have their own line above. */
	for (size_t i = 0; i < n; i++) {
		struct loom_plugin_info p;

		if (loom_plugin_info(i, &p) || !*p.name)
			continue;
		files++;
		loaded += p.state == LOOM_PLUGIN_LOADED;
		excluded += p.state == LOOM_PLUGIN_EXCLUDED;
	}
	if (files == 0)
		return "no plugin file in the search path";
	if (excluded == files)
		return "LOOM_BACKENDS excludes every plugin file found";
	if (loaded == 0)
		return "no plugin loaded (each file's reason is above)";
	used = snprintf(buf, len, "the loaded plugins have no devices:");
	for (size_t i = 0; i < loom_reg_count() && used > 0 &&
			   (size_t)used < len; i++)
		used += snprintf(buf + used, len - (size_t)used, "%s%s",
				 i ? ", " : " ", loom_reg_name(loom_reg_get(i)));
	if (loom_reg_by_name("meta") && used > 0 && (size_t)used < len)
		snprintf(buf + used, len - (size_t)used,
			 " (meta composes the devices LOOM_META_DEVICES "
			 "names, else two or more GPUs)");
	return buf;
}

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: loom-info [--json] [--help] [--version]\n"
		"\n"
		"Shows where Loom looks for plugins, what it did with every\n"
		"candidate file and why, the devices the loaded plugins\n"
		"bring, and the warnings the library logged while loading.\n"
		"\n"
		"  -j, --json      print one JSON object instead of text\n"
		"  -h, --help      print this help\n"
		"  -V, --version   print the version and exit\n"
		"\n"
		"Environment:\n"
		"  LOOM_PLUGIN_PATH         directories searched first "
		"(colon-separated)\n"
		"  LOOM_PLUGIN_SYSTEM_PATH  replaces the installed plugin "
		"directory\n"
		"  LOOM_BACKENDS            \"a,b\" loads only those, in that "
		"order;\n"
		"                           \"^a,b\" loads all but those\n"
		"  LOOM_LOG                 none, error, warn (default), info, "
		"debug\n"
		"  and those the plugins read: LOOM_CPU_DEVICES, "
		"LOOM_CPU_THREADS,\n"
		"  LOOM_META_DEVICES, LOOM_CUDA_ALLREDUCE (see loom(7)).\n"
		"\n"
		"Exits with status 1 when a backend named in LOOM_BACKENDS\n"
		"cannot be loaded, 2 on a bad option.\n");
}

/* Formats n bytes with binary units ("15.6 GiB"). */
static const char *human(size_t n, char *buf, size_t len)
{
	static const char *const units[] = { "B",   "KiB", "MiB",
					     "GiB", "TiB", "PiB" };
	double v = (double)n;
	size_t u = 0;

	while (v >= 1024.0 && u + 1 < N_OF(units)) {
		v /= 1024.0;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%zu B", n);
	else
		snprintf(buf, len, "%.1f %s", v, units[u]);
	return buf;
}

/* ------------------------------------------------------------------------
 * JSON.
 */

/* The length of the well-formed UTF-8 sequence at s (RFC 3629: no
 * overlong forms, no surrogates, nothing past U+10FFFF), or 0. */
static int utf8_len(const unsigned char *s)
{
	unsigned char lo = 0x80, hi = 0xbf;
	int n;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		n = 2;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		n = 3;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		n = 4;
	else
		return 0;
	if (s[0] == 0xe0)
		lo = 0xa0;
	else if (s[0] == 0xed)
		hi = 0x9f;
	else if (s[0] == 0xf0)
		lo = 0x90;
	else if (s[0] == 0xf4)
		hi = 0x8f;
	if (s[1] < lo || s[1] > hi)
		return 0;
	for (int i = 2; i < n; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return n;
}

/* Writes s as a JSON string.  File names and plugin messages are bytes,
 * not always UTF-8: a byte that does not start a well-formed sequence
 * becomes U+FFFD, so that the output is always valid JSON. */
static void json_str(const char *s)
{
	putchar('"');
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;
		int n = utf8_len((const unsigned char *)s);

		if (n == 0) {
			fputs("\\ufffd", stdout);
			continue;
		}
		if (n > 1) {
			fwrite(s, 1, (size_t)n, stdout);
			s += n - 1;
			continue;
		}
		switch (c) {
		case '"':
			fputs("\\\"", stdout);
			break;
		case '\\':
			fputs("\\\\", stdout);
			break;
		case '\n':
			fputs("\\n", stdout);
			break;
		case '\t':
			fputs("\\t", stdout);
			break;
		default:
			if (c < 0x20)
				printf("\\u%04x", c);
			else
				putchar(c);
		}
	}
	putchar('"');
}

static void json_nullable(const char *s)
{
	if (s)
		json_str(s);
	else
		fputs("null", stdout);
}

/* The name/value list a plugin's "get_features" entry point gives, or
 * NULL when it has none. */
static const struct loom_feature *features_of(loom_reg_t *reg)
{
	loom_get_features_fn fn = (loom_get_features_fn)loom_reg_proc_address(
		reg, LOOM_PROC_GET_FEATURES);

	return fn ? fn(reg) : NULL;
}

/* The world this process is a rank of: the first plugin offering
 * "world" (the mpi plugin, under mpirun); NULL when there is none. */
static loom_reg_t *world_of(struct loom_world *w)
{
	for (size_t i = 0; i < loom_reg_count(); i++) {
		loom_reg_t *reg = loom_reg_get(i);
		loom_world_fn fn;

		*(void **)&fn = loom_reg_proc_address(reg, LOOM_PROC_WORLD);
		w->size = sizeof(*w);
		if (fn && fn(reg, w) == LOOM_OK)
			return reg;
	}
	return NULL;
}

static void json_world(void)
{
	struct loom_world w;
	loom_reg_t *reg = world_of(&w);

	fputs(",\n \"world\": ", stdout);
	if (!reg) {
		fputs("null", stdout);
		return;
	}
	fputs("{\"plugin\": ", stdout);
	json_str(loom_reg_name(reg));
	printf(", \"rank\": %d, \"size\": %d, \"local_rank\": %d, "
	       "\"local_size\": %d}", w.rank, w.n_ranks, w.local_rank,
	       w.n_local);
}

/* error: why loading failed (LOOM_BACKENDS), or NULL. */
static void print_json(const char *error)
{
	bool *show;
	size_t n;

	fputs("{\"error\": ", stdout);
	json_nullable(error);
	fputs(",\n \"plugins\": [", stdout);
	n = loom_plugin_count();
	for (size_t i = 0; i < n; i++) {
		struct loom_plugin_info p;

		if (loom_plugin_info(i, &p))
			continue;
		fputs(i ? ",\n  {" : "\n  {", stdout);
		fputs("\"name\": ", stdout);
		json_str(p.name);
		fputs(", \"file\": ", stdout);
		json_str(p.file);
		fputs(", \"state\": ", stdout);
		json_str(loom_plugin_state_name(p.state));
		fputs(", \"reason\": ", stdout);
		json_str(p.reason);
		fputs(", \"version\": ", stdout);
		json_nullable(p.version);
		printf(", \"score\": %d}", p.score);
	}
	fputs(n ? "\n ],\n \"devices\": [" : "],\n \"devices\": [", stdout);
	n = loom_dev_count();
	for (size_t i = 0; i < n; i++) {
		loom_dev_t *dev = loom_dev_get(i);
		loom_reg_t *reg = loom_dev_reg(dev);
		uint32_t caps = loom_dev_caps(dev);
		size_t free_, total;
		bool first = true;

		loom_dev_memory(dev, &free_, &total);
		fputs(i ? ",\n  {" : "\n  {", stdout);
		fputs("\"name\": ", stdout);
		json_str(loom_dev_name(dev));
		fputs(", \"type\": ", stdout);
		json_str(loom_dev_type_name(loom_dev_type(dev)));
		fputs(", \"rank\": ", stdout);
		json_str(loom_dev_rank_name(loom_dev_rank(dev)));
		fputs(", \"plugin\": ", stdout);
		json_str(loom_reg_name(reg));
		printf(", \"memory_total\": %zu, \"memory_free\": %zu", total,
		       free_);
		fputs(", \"description\": ", stdout);
		json_str(loom_dev_description(dev));
		fputs(", \"caps\": [", stdout);
		for (size_t c = 0; c < N_OF(cap_names); c++) {
			if (!(caps & cap_names[c].bit))
				continue;
			fputs(first ? "" : ", ", stdout);
			json_str(cap_names[c].name);
			first = false;
		}
		fputs("], \"entry_points\": [", stdout);
		first = true;
		for (size_t p = 0; p < N_OF(proc_names); p++) {
			if (!loom_reg_proc_address(reg, proc_names[p]))
				continue;
			fputs(first ? "" : ", ", stdout);
			json_str(proc_names[p]);
			first = false;
		}
		fputs("], \"features\": {", stdout);
		first = true;
		for (const struct loom_feature *f = features_of(reg);
		     f && f->name; f++) {
			fputs(first ? "" : ", ", stdout);
			json_str(f->name);
			fputs(": ", stdout);
			json_str(f->value ? f->value : "");
			first = false;
		}
		fputs("}}", stdout);
	}
	fputs(n ? "\n ],\n \"search_path\": [" : "],\n \"search_path\": [",
	      stdout);
	n = loom_search_path_count();
	for (size_t i = 0; i < n; i++) {
		fputs(i ? ", " : "", stdout);
		json_str(loom_search_path(i));
	}
	fputs("]", stdout);
	json_world();
	fputs(",\n \"warnings\": [", stdout);
	n = 0;
	show = warnings_shown();
	for (size_t i = 0; i < warnings.n; i++) {
		if (show && !show[i])
			continue;
		fputs(n++ ? ", " : "", stdout);
		json_str(warnings.v[i]);
	}
	fputs("]}\n", stdout);
	free(show);
}

/* ------------------------------------------------------------------------
 * Text.
 */

static void print_plugins(void)
{
	size_t n = loom_plugin_count();
	int wname = 4, wstate = 5, wver = 7;

	printf("Plugin files:\n");
	if (n == 0) {
		printf("  (none found)\n\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		struct loom_plugin_info p;
		int l;

		if (loom_plugin_info(i, &p))
			continue;
		l = (int)strlen(p.name);
		wname = l > wname ? l : wname;
		l = (int)strlen(loom_plugin_state_name(p.state));
		wstate = l > wstate ? l : wstate;
		l = p.version ? (int)strlen(p.version) : 1;
		wver = l > wver ? l : wver;
	}
	printf("  %-*s  %-*s  %-*s  %5s  %s\n", wname, "NAME", wstate,
	       "STATE", wver, "VERSION", "SCORE", "FILE");
	for (size_t i = 0; i < n; i++) {
		struct loom_plugin_info p;

		if (loom_plugin_info(i, &p))
			continue;
		/* A search directory's record has no plugin name. */
		printf("  %-*s  %-*s  %-*s  %5d  %s\n", wname,
		       *p.name ? p.name : "-", wstate,
		       loom_plugin_state_name(p.state), wver,
		       p.version ? p.version : "-", p.score, p.file);
		if (p.reason && *p.reason)
			printf("  %*s  %s\n", wname + wstate + wver + 11, "",
			       p.reason);
	}
	printf("\n");
}

static void print_devices(void)
{
	size_t n = loom_dev_count();

	printf("Devices (in priority order):\n");
	if (n == 0) {
		printf("  (none: see the warnings)\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		loom_dev_t *dev = loom_dev_get(i);
		loom_reg_t *reg = loom_dev_reg(dev);
		uint32_t caps = loom_dev_caps(dev);
		char b1[32], b2[32];
		size_t free_, total;
		bool any = false;

		loom_dev_memory(dev, &free_, &total);
		printf("  %s\n", loom_dev_name(dev));
		printf("    %-14s %s\n", "type:",
		       loom_dev_type_name(loom_dev_type(dev)));
		printf("    %-14s %s\n", "rank:",
		       loom_dev_rank_name(loom_dev_rank(dev)));
		printf("    %-14s %s %s\n", "plugin:", loom_reg_name(reg),
		       loom_reg_version(reg));
		printf("    %-14s %s\n", "description:",
		       loom_dev_description(dev));
		if (total)
			printf("    %-14s %s free of %s\n", "memory:",
			       human(free_, b1, sizeof(b1)),
			       human(total, b2, sizeof(b2)));
		else
			printf("    %-14s unknown\n", "memory:");
		printf("    %-14s", "capabilities:");
		for (size_t c = 0; c < N_OF(cap_names); c++) {
			if (!(caps & cap_names[c].bit))
				continue;
			printf("%s%s", any ? ", " : " ", cap_names[c].name);
			any = true;
		}
		printf("%s\n", any ? "" : " none");
		printf("    %-14s", "entry points:");
		any = false;
		for (size_t p = 0; p < N_OF(proc_names); p++) {
			if (!loom_reg_proc_address(reg, proc_names[p]))
				continue;
			printf("%s%s", any ? ", " : " ", proc_names[p]);
			any = true;
		}
		printf("%s\n", any ? "" : " none");
		if (loom_reg_proc_address(reg, LOOM_PROC_GET_FEATURES)) {
			const struct loom_feature *f = features_of(reg);

			printf("    %-14s", "features:");
			any = false;
			for (; f && f->name; f++) {
				printf("%s%s=%s", any ? ", " : " ", f->name,
				       f->value ? f->value : "");
				any = true;
			}
			printf("%s\n", any ? "" : " none");
		}
	}
}

static void print_world(void)
{
	struct loom_world w;
	loom_reg_t *reg = world_of(&w);

	printf("\nWorld:\n");
	if (!reg) {
		printf("  none (this process alone: not started by an MPI "
		       "launcher, or no mpi plugin)\n");
		return;
	}
	printf("  rank %d of %d (%d of %d on this host), plugin %s\n",
	       w.rank, w.n_ranks, w.local_rank, w.n_local,
	       loom_reg_name(reg));
}

static void print_warnings(void)
{
	bool any = false, *show = warnings_shown();

	for (size_t i = 0; i < warnings.n; i++) {
		if (show && !show[i])
			continue;
		if (!any)
			printf("\nWarnings:\n");
		printf("  %s\n", warnings.v[i]);
		any = true;
	}
	free(show);
}

static void print_text(void)
{
	size_t n = loom_search_path_count();

	printf("Search path:\n");
	for (size_t i = 0; i < n; i++)
		printf("  %zu. %s\n", i + 1, loom_search_path(i));
	printf("\n");
	print_plugins();
	print_devices();
	print_world();
	print_warnings();
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	bool json = false;
	char *why = NULL, nodev[512];
	const char *nodev_why;
	int c, st;

	while ((c = getopt_long(argc, argv, "jhV", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("loom-info (Loom) %s\n", PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "loom-info: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}

	/* Warnings are part of the report (unless LOOM_LOG silences them). */
	loom_log_set_callback(on_log, NULL);
	st = loom_load_all();
	nodev_why = why_no_device(nodev, sizeof(nodev));
	if (nodev_why) {
		char msg[sizeof(nodev) + 16];

		snprintf(msg, sizeof(msg), "no device: %s", nodev_why);
		warning_add(msg);
	}
	/* loom_error_message() is per thread and later calls may replace it. */
	if (st)
		why = strdup(loom_error_message());

	if (st && (!why || !*why)) {
		free(why);
		why = strdup(loom_strerror(st));
	}

	if (json)
		print_json(st ? (why ? why : "") : NULL);
	else
		print_text();
	/* The report first, whole, so that the error gets a line of its
	 * own even when stdout and stderr go to one file. */
	fflush(stdout);
	if (st)
		fprintf(stderr, "loom-info: error: %s\n", why ? why : "");
	free(why);
	if (loom_unload_all()) {
		fprintf(stderr, "loom-info: error: %s\n", loom_error_message());
		st = LOOM_E_BUSY;
	}
	loom_log_set_callback(NULL, NULL);
	for (size_t i = 0; i < warnings.n; i++)
		free(warnings.v[i]);
	free(warnings.v);
	return st ? 1 : 0;
}
