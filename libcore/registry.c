/* SPDX-License-Identifier: MIT */
/* registry.c - the records of every candidate plugin, registration (the
 * descriptor, score, init and the checks of what init returns), device
 * priority order and unloading.  Finding files is loader.c's job. */
#define _GNU_SOURCE
#include "config.h"

#include <assert.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-private.h"

/* Locks, in the order they are taken:
 *
 *   load_lock      serialises loading and unloading: the thread that holds
 *                  it is the only one that writes the records, and it
 *                  reads them without the registry lock.  Held across calls
 *                  into plugins (dlopen, a plugin's init, its methods) and
 *                  the log callback; a call back into the loader from
 *                  there is refused (loom__load_begin), never waited for.
 *   lock           the registry lock: the records (plugins[] and their
 *                  fields) and the search path.  Held only while they are
 *                  read or written, never across a call out of the core
 *                  (a plugin's method, dlopen or dlclose, the log
 *                  callback), so no path takes it twice: it is a plain
 *                  mutex.  Nothing else is locked while it is held.
 *
 * Calls in flight (inflight.c) are counted without either: an unload
 * waits for them with load_lock held and the registry lock free. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
/* Set while this thread loads or unloads: a plugin's init or ELF
 * constructor calling back into the loader is refused. */
static _Thread_local bool in_load;
static struct loom__plugin **plugins;
static size_t n_plugins, cap_plugins;
static size_t next_seq, next_init;

static _Thread_local char missing[256];

/* Regs made while a plugin's init runs on this thread. */
#define MAX_MADE 16
static _Thread_local bool in_init;
static _Thread_local loom_reg_t *made[MAX_MADE];
static _Thread_local size_t n_made;

static const char *const proc_names[LOOM__PROC_COUNT] = {
#define X_(name) [LOOM__PROC_##name] = LOOM_PROC_##name,
	LOOM_PROC_MAP(X_)
#undef X_
};

const char *loom__proc_name(enum loom__proc p)
{
	return (unsigned)p < LOOM__PROC_COUNT ? proc_names[p] : "";
}

/* Whether this thread holds the registry lock (taking it twice is a bug
 * of the core's: see the lock order above). */
static _Thread_local bool held;

void loom__registry_lock(void)
{
	assert(!held);
	pthread_mutex_lock(&lock);
	held = true;
}

void loom__registry_unlock(void)
{
	held = false;
	pthread_mutex_unlock(&lock);
}

int loom__load_begin(const char *who)
{
	if (in_load)
		return loom_error_set(LOOM_E_STATE,
				      "%s: called while this thread loads or "
				      "unloads plugins (from a plugin's init "
				      "or constructor)",
				      who);
	/* An unload, here or on another thread, waits for calls in flight
	 * with the load lock held: from inside a call (a log callback run
	 * inside one too), that wait would never end. */
	if (loom__in_call())
		return loom_error_set(LOOM_E_STATE,
				      "%s: called from inside a call into a "
				      "plugin or a log callback",
				      who);
	pthread_mutex_lock(&load_lock);
	in_load = true;
	return LOOM_OK;
}

void loom__load_end(void)
{
	in_load = false;
	pthread_mutex_unlock(&load_lock);
}

void loom__reg_ref(loom_reg_t *reg, enum loom__ref what)
{
	__atomic_add_fetch(&reg->refs[what], 1, __ATOMIC_RELAXED);
}

void loom__reg_unref(loom_reg_t *reg, enum loom__ref what)
{
	/* Release: what the freeing thread read of reg's objects happens
	 * before an unload that sees the count fall frees them. */
	__atomic_sub_fetch(&reg->refs[what], 1, __ATOMIC_RELEASE);
}

int loom__missing_method(const char *kind, const char *name,
			 const char *slot)
{
	if (name)
		snprintf(missing, sizeof(missing),
			 "%s '%s': missing required method %s", kind, name,
			 slot);
	else
		snprintf(missing, sizeof(missing),
			 "%s: missing required method %s", kind, slot);
	return loom_error_set(LOOM_E_PLUGIN, "%s", missing);
}

void loom__reg_made(loom_reg_t *reg)
{
	if (in_init && n_made < MAX_MADE)
		made[n_made++] = reg;
}

/* Frees the regs an init made but did not hand back registered. */
static void free_made(void)
{
	for (size_t i = 0; i < n_made; i++)
		if (loom__reg_live(made[i]) && !made[i]->registered)
			loom__reg_destroy(made[i]);
	n_made = 0;
}

void loom__missing_reset(void)
{
	missing[0] = '\0';
}

const char *loom__missing_last(void)
{
	return missing[0] ? missing : NULL;
}

const char *loom_plugin_state_name(enum loom_plugin_state state)
{
	switch (state) {
	case LOOM_PLUGIN_LOADED:
		return "loaded";
	case LOOM_PLUGIN_EXCLUDED:
		return "excluded";
	case LOOM_PLUGIN_NOT_APPLICABLE:
		return "not-applicable";
	case LOOM_PLUGIN_FAILED:
		return "failed";
	case LOOM_PLUGIN_SKIPPED:
		return "skipped";
	}
	return "unknown";
}

/* ------------------------------------------------------------------------
 * Records.
 */

/* Makes room for one more record (caller holds the registry lock). */
static bool plugins_grow(void)
{
	if (n_plugins == cap_plugins) {
		size_t cap = cap_plugins ? 2 * cap_plugins : 16;
		struct loom__plugin **v = realloc(plugins, cap * sizeof(*v));

		if (!v)
			return false;
		plugins = v;
		cap_plugins = cap;
	}
	return true;
}

/* Frees a record (not its reg, nor its library). */
static void record_free(struct loom__plugin *p)
{
	free(p->name);
	free(p->file);
	free(p->version);
	free(p->reason);
	free(p);
}

struct loom__plugin *loom__plugin_add(const char *name, const char *file)
{
	struct loom__plugin *p = calloc(1, sizeof(*p));

	if (!p)
		return NULL;
	p->name = strdup(name ? name : "");
	p->file = strdup(file ? file : "");
	p->reason = strdup("");
	if (!p->name || !p->file || !p->reason) {
		record_free(p);
		return NULL;
	}
	p->state = LOOM_PLUGIN_FAILED;
	p->priority = -1;
	loom__registry_lock();
	if (plugins_grow()) {
		p->seq = next_seq++;
		plugins[n_plugins++] = p;
	} else {
		record_free(p);
		p = NULL;
	}
	loom__registry_unlock();
	return p;
}

void loom__plugin_set(struct loom__plugin *p, enum loom_plugin_state state,
		      int status, const char *fmt, ...)
{
	char buf[1024];
	char *reason;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	reason = strdup(buf);
	loom__registry_lock();
	p->state = state;
	p->status = status;
	if (reason) {
		free(p->reason);
		p->reason = reason;
	}
	loom__registry_unlock();
	if (state == LOOM_PLUGIN_LOADED)
		loom_log(LOOM_LOG_INFO, "plugin %s: loaded from %s", p->name,
			 p->file);
	else if (!*p->name) /* a directory of the search path */
		loom_log(state == LOOM_PLUGIN_FAILED ? LOOM_LOG_WARN
						     : LOOM_LOG_INFO,
			 "%s: %s", p->file, p->reason);
	else
		loom_log(state == LOOM_PLUGIN_FAILED ? LOOM_LOG_WARN
						     : LOOM_LOG_INFO,
			 "plugin %s (%s): %s: %s", p->name, p->file,
			 loom_plugin_state_name(state), p->reason);
}

int loom__plugin_error(const struct loom__plugin *p)
{
	int st = p->status ? p->status : LOOM_E_PLUGIN;

	return loom_error_set(st, "plugin '%s' (%s): %s", p->name, p->file,
			      p->reason);
}

struct loom__plugin *loom__plugin_by_index(size_t i)
{
	return i < n_plugins ? plugins[i] : NULL;
}

struct loom__plugin *loom__plugin_loaded(const char *name)
{
	for (size_t i = 0; i < n_plugins; i++)
		if (plugins[i]->state == LOOM_PLUGIN_LOADED &&
		    strcmp(plugins[i]->name, name) == 0)
			return plugins[i];
	return NULL;
}

loom_reg_t *loom__reg_find(const char *name)
{
	struct loom__plugin *p;
	loom_reg_t *reg;

	if (!name)
		return NULL;

	loom__registry_lock();
	p = loom__plugin_loaded(name);
	reg = p ? p->reg : NULL;
	loom__registry_unlock();
	return reg;
}

/* ------------------------------------------------------------------------
 * Registration.
 */

int loom__plugin_check_desc(struct loom__plugin *p,
			    const struct loom_plugin_desc *desc,
			    bool name_from_file)
{
	struct loom__plugin *other;
	char why[160];

	if (loom__abi_check(desc->abi_major, desc->abi_minor, LOOM_ABI_MAJOR,
			    LOOM_ABI_MINOR, why, sizeof(why))) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_ABI, "%s", why);
		return p->status;
	}
	if (!desc->name || !*desc->name) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "descriptor has no name");
		return p->status;
	}
	if (desc->version) {
		char *v = strdup(desc->version);

		loom__registry_lock();
		if (v) {
			free(p->version);
			p->version = v;
		}
		loom__registry_unlock();
	}
	if (name_from_file && strcmp(desc->name, p->name) != 0) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "descriptor name '%s' differs from the file "
				 "name '%s'",
				 desc->name, p->name);
		return p->status;
	}
	if (!name_from_file) {
		char *n = strdup(desc->name);

		loom__registry_lock();
		if (n) {
			free(p->name);
			p->name = n;
		}
		loom__registry_unlock();
	}
	if (!desc->init) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "missing required method init");
		return p->status;
	}
	other = loom__plugin_loaded(desc->name);
	if (other) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "duplicate name: '%s' is already loaded "
				 "from %s",
				 desc->name, other->file);
		return p->status;
	}
	loom__registry_lock();
	p->desc = desc;
	p->flags = loom__desc_flags(desc);
	loom__registry_unlock();
	return LOOM_OK;
}

int loom__plugin_score(struct loom__plugin *p)
{
	const char *why = NULL;
	int score = p->desc->score ? p->desc->score(&why) : 1;

	loom__registry_lock();
	p->score = score < 0 ? 0 : score;
	loom__registry_unlock();
	if (p->score == 0) {
		if (!why || !*why)
			why = "not applicable on this machine";
		loom__plugin_set(p, LOOM_PLUGIN_NOT_APPLICABLE,
				 LOOM_E_NOT_APPLICABLE, "%s", why);
		return p->status;
	}
	return LOOM_OK;
}

/* Calls the reg's free method, then frees every wrapper it owns. */
void loom__reg_destroy(loom_reg_t *reg)
{
	if (!loom__reg_live(reg))
		return;
	if (reg->iface.free)
		reg->iface.free(reg);
	while (reg->devs) {
		struct loom_dev *d = reg->devs;

		reg->devs = d->next;
		loom__handle_take(d, LOOM__KIND_DEV);
		free(d);
	}
	while (reg->bufts) {
		struct loom_buffer_type *b = reg->bufts;

		reg->bufts = b->next;
		loom__handle_take(b, LOOM__KIND_BUFT);
		free(b);
	}
	loom__handle_take(reg, LOOM__KIND_REG);
	free(reg);
}

/* Checks what a plugin's init returned, its name and every device, with
 * what the plugin says unclamped (inside a call).  Returns LOOM_OK, or
 * LOOM_E_PLUGIN with the reason in why (n bytes). */
static int check_devs(struct loom__plugin *p, loom_reg_t *reg, char *why,
		      size_t n)
{
	const char *name = loom__reg_plugin_name(reg);
	size_t n_devs;

	if (!name || strcmp(name, p->desc->name) != 0) {
		snprintf(why, n, "reg name '%s' differs from descriptor name "
			 "'%s'", name ? name : "(null)", p->desc->name);
		return LOOM_E_PLUGIN;
	}
	n_devs = loom__reg_plugin_dev_count(reg);
	if (n_devs > LOOM__MAX_DEVS) {
		snprintf(why, n, "reports %zu devices", n_devs);
		return LOOM_E_PLUGIN;
	}
	for (size_t i = 0; i < n_devs; i++) {
		loom_dev_t *dev = loom__reg_plugin_dev(reg, i);
		const char *dev_name;
		unsigned type;
		int rank;

		if (!loom__dev_live(dev) || dev->reg != reg) {
			snprintf(why, n, "device %zu is not a device made for "
				 "this plugin", i);
			return LOOM_E_PLUGIN;
		}
		dev_name = loom__dev_plugin_name(dev);
		if (!dev_name) {
			snprintf(why, n, "device %zu has no name", i);
			return LOOM_E_PLUGIN;
		}
		type = loom__dev_plugin_type(dev);
		if (type > LOOM_DEV_TYPE_META) {
			snprintf(why, n, "device '%s' has unknown type %u",
				 dev_name, type);
			return LOOM_E_PLUGIN;
		}
		rank = loom__dev_plugin_rank(dev);
		if (!loom__dev_rank_valid(rank)) {
			snprintf(why, n, "device '%s' has unknown rank %d",
				 dev_name, rank);
			return LOOM_E_PLUGIN;
		}
		/* A buffer type the plugin makes on first use may have been
		 * refused just now: that is the reason. */
		if (!loom__buft_live(loom__dev_plugin_buffer_type(dev))) {
			const char *miss = loom__missing_last();

			if (miss)
				snprintf(why, n, "%s", miss);
			else
				snprintf(why, n, "device '%s' has no buffer "
					 "type", dev_name);
			return LOOM_E_PLUGIN;
		}
	}
	return LOOM_OK;
}

static int check_reg(struct loom__plugin *p, loom_reg_t *reg)
{
	char why[512];
	int st;

	if (!loom__reg_enter(reg))
		return LOOM_E_PLUGIN;
	st = check_devs(p, reg, why, sizeof(why));
	loom__call_end();
	if (st)
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, st, "%s", why);
	return st;
}

int loom__plugin_init(struct loom__plugin *p)
{
	loom_reg_t *reg = NULL;
	const char *miss;
	int st;

	loom__clear_error();
	loom__missing_reset();
	n_made = 0;
	in_init = true;
	/* Init runs without the registry lock, as every call into a plugin
	 * does: a thread it starts and waits for may read the registry.
	 * This thread's calls back into the loader are refused
	 * (loom__load_begin). */
	st = p->desc->init(&reg);
	in_init = false;
	miss = loom__missing_last();
	if (miss) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN, "%s",
				 miss);
		goto err_destroy;
	}
	if (st == LOOM_E_NOT_APPLICABLE) {
		loom__plugin_set(p, LOOM_PLUGIN_NOT_APPLICABLE, st, "%s",
				 *loom_error_message() ? loom_error_message()
						    : loom_strerror(st));
		goto err_destroy;
	}
	if (st) {
		if (st > 0)
			st = LOOM_E_PLUGIN;
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, st,
				 "init failed: %s",
				 *loom_error_message() ? loom_error_message()
						    : loom_strerror(st));
		goto err_destroy;
	}
	if (!loom__reg_live(reg)) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "init returned no reg");
		reg = NULL;
		goto err_destroy;
	}
	if (reg->registered) {
		loom__plugin_set(p, LOOM_PLUGIN_FAILED, LOOM_E_PLUGIN,
				 "init returned a reg already registered");
		reg = NULL;
		goto err_destroy;
	}
	st = check_reg(p, reg);
	if (st)
		goto err_destroy;
	/* Not registered yet: each asks the plugin. */
	for (int i = 0; i < LOOM__PROC_COUNT; i++)
		reg->procs[i] = loom__reg_proc(reg, i);
	reg->registered = true;
	loom__registry_lock();
	p->reg = reg;
	p->init_order = ++next_init;
	loom__registry_unlock();
	free_made();
	loom__plugin_set(p, LOOM_PLUGIN_LOADED, LOOM_OK, "%s", "");
	return LOOM_OK;

err_destroy:
	if (loom__reg_live(reg) && !reg->registered) {
		bool listed = false;

		for (size_t i = 0; i < n_made; i++)
			listed |= made[i] == reg;
		if (!listed)
			loom__reg_destroy(reg);
	}
	free_made();
	return p->status;
}

int loom_load_static(const struct loom_plugin_desc *desc,
			 loom_reg_t **out)
{
	struct loom__plugin *p;
	int st;

	if (out)
		*out = NULL;
	if (!desc)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_load_static: desc is NULL");
	st = loom__load_begin("loom_load_static");
	if (st)
		return st;
	p = loom__plugin_add(desc->name ? desc->name : "(unnamed)",
			     "(static)");
	if (!p) {
		st = loom_error_set(LOOM_E_NOMEM, "out of memory");
		goto out_unlock;
	}
	st = loom__plugin_check_desc(p, desc, false);
	if (!st)
		st = loom__plugin_score(p);
	if (!st)
		st = loom__plugin_init(p);
	if (st)
		st = loom__plugin_error(p);
	else if (out)
		*out = p->reg;
out_unlock:
	loom__load_end();
	return st;
}

/* ------------------------------------------------------------------------
 * Priority order.  Devices: their plugin's place in LOOM_BACKENDS when it
 * is given, then higher rank, then type (GPU, IGPU, ACCEL, CPU, composed
 * devices last), then the order plugins were found in and each plugin's
 * own order.
 * Plugins: by their first device in that order, plugins without devices
 * after the others.
 */

/* Where a device type sorts: GPUs first, composed devices last. */
static int type_order(enum loom_dev_type type)
{
	switch (type) {
	case LOOM_DEV_TYPE_GPU:
		return 0;
	case LOOM_DEV_TYPE_IGPU:
		return 1;
	case LOOM_DEV_TYPE_ACCEL:
		return 2;
	case LOOM_DEV_TYPE_CPU:
		return 3;
	case LOOM_DEV_TYPE_META:
		return 4;
	}
	return 2;
}

/* A device, or a plugin by its first device, with what it sorts by. */
struct ranked {
	loom_reg_t *reg;
	loom_dev_t *dev;  /* NULL for a plugin without devices */
	long priority;    /* index in LOOM_BACKENDS; unlisted after */
	int rank;         /* enum loom_dev_rank; -1 without devices */
	int type;         /* type_order; 5 without devices */
	size_t seq;       /* the order its plugin was found in */
	size_t index;     /* the device's index in its plugin */
};

static int cmp_ranked(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->priority != y->priority)
		return x->priority < y->priority ? -1 : 1;
	if (x->rank != y->rank)
		return x->rank > y->rank ? -1 : 1;
	if (x->type != y->type)
		return x->type < y->type ? -1 : 1;
	if (x->seq != y->seq)
		return x->seq < y->seq ? -1 : 1;
	return x->index < y->index ? -1 : x->index > y->index;
}

/* A loaded plugin, as the registry lock saw it. */
struct loaded {
	loom_reg_t *reg;
	long priority;    /* index in LOOM_BACKENDS; unlisted after */
	size_t seq;
};

static void rank_dev(struct ranked *r, const struct loaded *l,
		     loom_dev_t *dev, size_t index)
{
	r->reg = l->reg;
	r->dev = dev;
	r->priority = l->priority;
	r->rank = dev ? (int)loom_dev_rank(dev) : -1;
	r->type = dev ? type_order(loom_dev_type(dev)) : 5;
	r->seq = l->seq;
	r->index = index;
}

/* The loaded plugins, in record order: a malloc'ed array of *n entries
 * (NULL and 0 when there are none, or no memory for them).  Taken under
 * the registry lock; what they are asked for next is asked without it. */
static struct loaded *loaded_list(size_t *n)
{
	struct loaded *v;
	size_t k = 0;

	loom__registry_lock();
	v = malloc((n_plugins ? n_plugins : 1) * sizeof(*v));
	for (size_t i = 0; v && i < n_plugins; i++) {
		const struct loom__plugin *p = plugins[i];

		if (p->state != LOOM_PLUGIN_LOADED)
			continue;
		v[k].reg = p->reg;
		v[k].priority = p->priority < 0 ? 1L << 30 : p->priority;
		v[k++].seq = p->seq;
	}
	loom__registry_unlock();
	*n = k;
	return v;
}

/* The loaded plugins' devices in priority order, or with plugins_only,
 * one entry per loaded plugin (its first device) in plugin order.
 * Returns a malloc'ed array of *n entries: NULL and 0 when there are
 * none, or no memory for them.  Caller holds calls (loom__calls_hold),
 * not the registry lock: the devices are asked through their plugins. */
static struct ranked *ranked_list(bool plugins_only, size_t *n)
{
	struct ranked *v = NULL;
	size_t cap = 0, k = 0, n_loaded;
	struct loaded *loaded = loaded_list(&n_loaded);

	*n = 0;
	for (size_t i = 0; i < n_loaded; i++) {
		loom_reg_t *reg = loaded[i].reg;
		size_t nd, first = k;

		nd = loom_reg_dev_count(reg);
		if (cap - k < nd + 1) {
			size_t want = 2 * cap + nd + 16;
			struct ranked *w = realloc(v, want * sizeof(*w));

			if (!w) {
				free(v);
				free(loaded);
				return NULL;
			}
			v = w;
			cap = want;
		}
		for (size_t d = 0; d < nd; d++) {
			loom_dev_t *dev = loom_reg_dev(reg, d);
			struct ranked r;

			if (!dev)
				continue;
			rank_dev(&r, &loaded[i], dev, d);
			if (!plugins_only || k == first)
				v[k++] = r;
			else if (cmp_ranked(&r, &v[first]) < 0)
				v[first] = r;
		}
		if (k == first && plugins_only)
			rank_dev(&v[k++], &loaded[i], NULL, 0);
	}
	free(loaded);
	if (k)
		qsort(v, k, sizeof(*v), cmp_ranked);
	*n = k;
	return v;
}

size_t loom_reg_count(void)
{
	size_t n = 0;

	loom__registry_lock();
	for (size_t i = 0; i < n_plugins; i++)
		n += plugins[i]->state == LOOM_PLUGIN_LOADED;
	loom__registry_unlock();
	return n;
}

loom_reg_t *loom_reg_get(size_t i)
{
	struct ranked *v;
	loom_reg_t *reg = NULL;
	size_t n;

	if (!loom__calls_hold())
		return NULL;
	v = ranked_list(true, &n);
	if (v && i < n)
		reg = v[i].reg;
	free(v);
	loom__call_end();
	return reg;
}

loom_reg_t *loom_reg_by_name(const char *name)
{
	return loom__reg_find(name);
}

const char *loom_reg_version(loom_reg_t *reg)
{
	const char *v = NULL;

	loom__registry_lock();
	for (size_t i = 0; i < n_plugins; i++)
		if (plugins[i]->reg == reg &&
		    plugins[i]->state == LOOM_PLUGIN_LOADED)
			v = plugins[i]->version;
	loom__registry_unlock();
	return v ? v : "";
}

/* Walks devices in priority order; stops when fn returns true and
 * returns that device. */
static loom_dev_t *walk_devs(bool (*fn)(loom_dev_t *dev, size_t idx,
					 const void *arg),
			     const void *arg, size_t *count)
{
	struct ranked *v;
	loom_dev_t *found = NULL;
	size_t n = 0, idx = 0;

	/* Devices go through the plugins' methods: none is unloaded while
	 * they are walked. */
	if (!loom__calls_hold()) {
		if (count)
			*count = 0;
		return NULL;
	}
	v = ranked_list(false, &n);
	for (; v && idx < n; idx++) {
		if (fn && fn(v[idx].dev, idx, arg)) {
			found = v[idx].dev;
			break;
		}
	}
	free(v);
	loom__call_end();
	if (count)
		*count = idx;
	return found;
}

static bool match_index(loom_dev_t *dev, size_t idx, const void *arg)
{
	return idx == *(const size_t *)arg;
}

static bool match_name(loom_dev_t *dev, size_t idx, const void *arg)
{
	return strcmp(loom_dev_name(dev), arg) == 0;
}

static bool match_type(loom_dev_t *dev, size_t idx, const void *arg)
{
	return loom_dev_type(dev) == *(const enum loom_dev_type *)arg;
}

size_t loom_dev_count(void)
{
	size_t n;

	walk_devs(NULL, NULL, &n);
	return n;
}

loom_dev_t *loom_dev_get(size_t i)
{
	return walk_devs(match_index, &i, NULL);
}

loom_dev_t *loom_dev_by_name(const char *name)
{
	return name ? walk_devs(match_name, name, NULL) : NULL;
}

loom_dev_t *loom_dev_by_type(enum loom_dev_type type)
{
	if ((unsigned)type > LOOM_DEV_TYPE_META) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_dev_by_type: invalid device type %d",
			       (int)type);
		return NULL;
	}
	return walk_devs(match_type, &type, NULL);
}

/* ------------------------------------------------------------------------
 * What the loader did.
 */

size_t loom_plugin_count(void)
{
	size_t n;

	loom__registry_lock();
	n = n_plugins;
	loom__registry_unlock();
	return n;
}

int loom_plugin_info(size_t i, struct loom_plugin_info *out)
{
	const struct loom__plugin *p;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_plugin_info: out is NULL");
	loom__registry_lock();
	if (i >= n_plugins) {
		loom__registry_unlock();
		return loom_error_set(LOOM_E_RANGE,
				      "loom_plugin_info: no record %zu", i);
	}
	p = plugins[i];
	out->name = p->name;
	out->file = p->file;
	out->version = p->version;
	out->state = p->state;
	out->reason = p->reason;
	out->score = p->score;
	loom__registry_unlock();
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * Unloading.
 */

static const char *const ref_names[LOOM__REF_COUNT][2] = {
	[LOOM__REF_BUFFER] = { "buffer", "buffers" },
	[LOOM__REF_BACKEND] = { "backend", "backends" },
	[LOOM__REF_EVENT] = { "event", "events" },
};

/* Appends "2 buffers and 1 backend of plugin 'cpu'" to buf for a plugin
 * whose objects are still alive; returns how many there are. */
static size_t describe_refs(const struct loom__plugin *p, char *buf,
			    size_t size, size_t *len)
{
	size_t refs[LOOM__REF_COUNT], total = 0, kinds = 0, done = 0;

	for (int k = 0; k < LOOM__REF_COUNT; k++) {
		refs[k] = __atomic_load_n(&p->reg->refs[k], __ATOMIC_ACQUIRE);
		total += refs[k];
		kinds += refs[k] != 0;
	}
	if (!total)
		return 0;
	for (int k = 0; k < LOOM__REF_COUNT; k++) {
		if (!refs[k])
			continue;
		done++;
		*len += (size_t)snprintf(
			buf + *len, size - *len, "%s%zu %s",
			done == 1 ? (*len ? "; " : "")
				  : done == kinds ? " and " : ", ",
			refs[k], ref_names[k][refs[k] != 1]);
		if (*len >= size)
			*len = size - 1;
	}
	*len += (size_t)snprintf(buf + *len, size - *len, " of plugin '%s'",
				 p->name);
	if (*len >= size)
		*len = size - 1;
	return total;
}

/* LOOM_E_BUSY, naming them, while objects made from any plugin are
 * alive (the loading thread's view: it alone writes the records). */
static int check_refs(void)
{
	char busy[1024] = "";
	size_t len = 0, total = 0;

	for (size_t i = 0; i < n_plugins; i++)
		if (plugins[i]->reg)
			total += describe_refs(plugins[i], busy, sizeof(busy),
					       &len);
	if (!total)
		return LOOM_OK;
	return loom_error_set(LOOM_E_BUSY, "loom_unload_all: %s %s still alive",
			      busy, total == 1 ? "is" : "are");
}

/* Takes every record out of the registry (readers see none from then
 * on), then, without the registry lock, destroys the regs, latest init
 * first (a plugin that composes the others' devices goes before them),
 * closes the libraries and frees the records. */
static void unregister_all(void)
{
	struct loom__plugin **v;
	size_t n;

	loom__registry_lock();
	v = plugins;
	n = n_plugins;
	plugins = NULL;
	n_plugins = cap_plugins = 0;
	next_seq = next_init = 0;
	loom__registry_unlock();
	for (;;) {
		struct loom__plugin *last = NULL;

		for (size_t i = 0; i < n; i++)
			if (v[i]->reg &&
			    (!last || v[i]->init_order > last->init_order))
				last = v[i];
		if (!last)
			break;
		last->reg->registered = false;
		loom__reg_destroy(last->reg);
		last->reg = NULL;
	}
	for (size_t i = n; i-- > 0;) {
		if (v[i]->dl)
			dlclose(v[i]->dl);
		record_free(v[i]);
	}
	free(v);
}

int loom_unload_all(void)
{
	int st;

	st = loom__load_begin("loom_unload_all");
	if (st)
		return st;
	/* Refused, and nothing unloaded, while the application still holds
	 * something a plugin made: its code must stay mapped. */
	st = check_refs();
	if (st)
		goto out_unlock;
	/* Calls under way on other threads (a device's name or memory)
	 * finish first, and no new one starts; they may read the registry
	 * meanwhile.  One of them may have made an object since. */
	loom__calls_close();
	st = check_refs();
	if (st)
		goto out_open;
	unregister_all();
	loom__loader_reset();
out_open:
	loom__calls_open();
out_unlock:
	loom__load_end();
	return st;
}
