/* SPDX-License-Identifier: MIT */
/* test-ownership.c - the core's ownership rules under hostile use: freed
 * and foreign handles, unloading under live objects, plugins calling back
 * into the loader, half-built wrappers, and the ABI numbers plugins see. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include <loom/loom-plugin.h>

#include "fake-plugin.h"

extern const struct loom_plugin_desc fake_static_desc;

#define REENTER_MSG(who)                                                    \
	who ": called while this thread loads or unloads plugins (from a "  \
	    "plugin's init or constructor)"

/* ------------------------------------------------------------------------
 * The statically linked fake plugin, loaded for each test that needs it.
 */
struct fixture {
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	struct fake_control *ctl;
	loom_ctx_t *ctx;
	char *dir; /* a plugin directory of the test's own */
};

static void static_setup(struct fixture *f, gconstpointer unused)
{
	fake_control_fn fn;

	memset(f, 0, sizeof(*f));
	g_assert_cmpint(loom_load_static(&fake_static_desc, &f->reg), ==,
			LOOM_OK);
	f->dev = loom_dev_by_name("static0");
	g_assert_nonnull(f->dev);
	f->buft = loom_dev_buffer_type(f->dev);
	g_assert_nonnull(f->buft);
	fn = (fake_control_fn)loom_reg_proc_address(f->reg, FAKE_CONTROL);
	g_assert_nonnull(fn);
	f->ctl = fn();
	g_assert_cmpint(loom_ctx_new(0, &f->ctx), ==, LOOM_OK);
}

static void static_teardown(struct fixture *f, gconstpointer unused)
{
	loom_ctx_free(f->ctx);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

static struct loom_tensor *new_f32(loom_ctx_t *ctx, int64_t n,
				   const char *name)
{
	struct loom_tensor *t = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, n);

	g_assert_nonnull(t);
	loom_tensor_set_name(t, name);
	return t;
}

static void assert_error_has(const char *part)
{
	if (!strstr(loom_error_message(), part))
		g_error("error message '%s' lacks '%s'", loom_error_message(),
			part);
}

/* ------------------------------------------------------------------------
 * Freed handles are refused by the table of live handles: no read of
 * freed memory (ASan, valgrind), no double free.
 */
static void test_freed_buffer(struct fixture *f, gconstpointer unused)
{
	struct loom_tensor *t = new_f32(f->ctx, 8, "w");
	float data[8] = { 1 };
	loom_buffer_t *buf;

	g_assert_cmpint(loom_ctx_alloc_tensors(f->ctx, f->buft, &buf), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_set(t, data, 0, sizeof(data)), ==,
			LOOM_OK);
	loom_buffer_free(buf);

	g_assert_cmpint(loom_tensor_set(t, data, 0, sizeof(data)), ==,
			LOOM_E_STATE);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_tensor_set: tensor 'w' has a freed or foreign "
			"buffer");
	g_assert_cmpint(loom_tensor_get(t, data, 0, sizeof(data)), ==,
			LOOM_E_STATE);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_tensor_get: tensor 'w' has a freed or foreign "
			"buffer");
	g_assert_cmpuint(f->ctl->n_set, ==, 1);
	g_assert_cmpuint(f->ctl->n_get, ==, 0);
	g_assert_cmpuint(loom_buffer_size(buf), ==, 0);
	g_assert_null(loom_buffer_base(buf));
	g_assert_null(loom_buffer_get_type(buf));
	g_assert_cmpint(loom_buffer_clear(buf, 0), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_place(t, buf, 0), ==, LOOM_E_INVAL);

	/* A second free is refused with a message, not a double free. */
	loom_buffer_free(buf);
	assert_error_has("is not a live buffer (freed already?)");
}

static void test_freed_backend_event(struct fixture *f, gconstpointer unused)
{
	loom_backend_t *be;
	loom_event_t *ev;

	g_assert_cmpint(loom_dev_init_backend(f->dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_event_new(f->dev, &ev), ==, LOOM_OK);
	g_assert_cmpint(loom_event_record(ev, be), ==, LOOM_OK);
	loom_event_free(ev);
	loom_backend_free(be);

	g_assert_cmpstr(loom_backend_name(be), ==, "(null)");
	g_assert_null(loom_backend_device(be));
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_backend_synchronize: no backend");
	loom_backend_free(be);
	assert_error_has("is not a live backend (freed already?)");

	g_assert_null(loom_event_device(ev));
	g_assert_cmpint(loom_event_synchronize(ev), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_event_synchronize: no live event");
	loom_event_free(ev);
	assert_error_has("is not a live event (freed already?)");
}

static void test_freed_ctx_galloc(struct fixture *f, gconstpointer unused)
{
	loom_galloc_t *ga;
	loom_ctx_t *ctx;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	loom_ctx_free(ctx);
	loom_ctx_free(ctx);
	assert_error_has("is not a live context (freed already?)");
	g_assert_cmpstr(loom_ctx_error(ctx), ==, "");
	g_assert_null(loom_ctx_first_tensor(ctx));
	g_assert_null(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 4));
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_tensor_new: no live context");

	g_assert_cmpint(loom_galloc_new(f->buft, &ga), ==, LOOM_OK);
	loom_galloc_free(ga);
	loom_galloc_free(ga);
	assert_error_has("is not a live graph allocator (freed already?)");
	g_assert_cmpuint(loom_galloc_buffer_size(ga), ==, 0);
	g_assert_null(loom_galloc_buffer(ga));
}

/* A graph y = x + x of the test's context, placed in a buffer of the
 * fake plugin (freed by the caller). */
static loom_graph_t *add_graph(struct fixture *f, loom_buffer_t **buf)
{
	struct loom_tensor *x = new_f32(f->ctx, 16, "x");
	loom_graph_t *g;

	g_assert_cmpint(loom_graph_new(f->ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, loom_add(f->ctx, x, x)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(f->ctx, f->buft, buf), ==,
			LOOM_OK);
	return g;
}

static void test_freed_sched(struct fixture *f, gconstpointer unused)
{
	struct loom_sched_stats stats = { .size = sizeof(stats) };
	loom_buffer_t *buf;
	loom_graph_t *g = add_graph(f, &buf);
	loom_backend_t *be;
	loom_sched_t *s;

	f->ctl->claim_all = 1;
	g_assert_cmpint(loom_dev_init_backend(f->dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_sched_new(&be, 1, &s), ==, LOOM_OK);
	g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_OK);
	g_assert_cmpuint(loom_sched_n_pieces(s), ==, 1);
	loom_sched_free(s);

	loom_sched_free(s);
	assert_error_has("is not a live scheduler (freed already?)");
	g_assert_cmpuint(loom_sched_n_pieces(s), ==, 0);
	g_assert_cmpuint(loom_sched_n_copies(s), ==, 0);
	g_assert_cmpuint(loom_sched_n_plans(s), ==, 0);
	g_assert_cmpuint(loom_sched_buffer_size(s, 0), ==, 0);
	g_assert_null(loom_sched_node_backend(s, loom_graph_node(g, 0)));
	g_assert_cmpint(loom_sched_get_stats(s, &stats), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_sched_reserve(s, g), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_sched_alloc_graph(s, g), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_sched_compute: no live scheduler, or the graph "
			"is NULL");
	loom_backend_free(be);
	loom_buffer_free(buf);
}

/* ------------------------------------------------------------------------
 * Calls on one backend or scheduler do not overlap: made while another
 * is under way (the fake backend's compute calls back into the test),
 * from another thread or the same one, they are refused as busy.
 */
struct overlap {
	loom_backend_t *be;
	loom_sched_t *sched;
	loom_graph_t *g;
	struct loom_tensor *t;
	loom_event_t *ev;
	int n_busy;
};

static void expect_busy(struct overlap *o, int st, const char *who)
{
	g_assert_cmpint(st, ==, LOOM_E_BUSY);
	if (!strstr(loom_error_message(), who) ||
	    !strstr(loom_error_message(), "is busy"))
		g_error("'%s' is not %s's busy message", loom_error_message(),
			who);
	o->n_busy++;
}

static gpointer overlapping_calls(gpointer data)
{
	struct overlap *o = data;
	float v[4] = { 0 };

	if (o->sched) {
		expect_busy(o, loom_sched_compute(o->sched, o->g),
			    "loom_sched_compute");
		expect_busy(o, loom_sched_alloc_graph(o->sched, o->g),
			    "loom_sched_alloc_graph");
		loom_sched_free(o->sched);
		expect_busy(o, LOOM_E_BUSY, "loom_sched_free");
	}
	expect_busy(o, loom_backend_graph_compute(o->be, o->g),
		    "loom_backend_graph_compute");
	expect_busy(o, loom_backend_graph_compute_async(o->be, o->g),
		    "loom_backend_graph_compute");
	expect_busy(o, loom_backend_synchronize(o->be),
		    "loom_backend_synchronize");
	expect_busy(o, loom_backend_tensor_set_async(o->be, o->t, v, 0,
						     sizeof(v)),
		    "loom_backend_tensor_set_async");
	expect_busy(o, loom_backend_tensor_get_2d_async(o->be, o->t, v, 0, 4,
							4, 4, 4),
		    "loom_backend_tensor_get_2d_async");
	expect_busy(o, loom_backend_tensor_copy_async(o->be, o->be, o->t,
						      o->t),
		    "loom_backend_tensor_copy_async");
	expect_busy(o, loom_event_record(o->ev, o->be), "loom_event_record");
	expect_busy(o, loom_event_wait(o->be, o->ev), "loom_event_wait");
	loom_backend_free(o->be);
	expect_busy(o, LOOM_E_BUSY, "loom_backend_free");
	return NULL;
}

static void on_compute(loom_backend_t *be, loom_graph_t *g, void *data)
{
	struct overlap *o = data;

	g_thread_join(g_thread_new("overlap", overlapping_calls, o));
	/* Re-entered on this thread. */
	expect_busy(o, loom_backend_synchronize(be),
		    "loom_backend_synchronize");
}

static void test_backend_busy(struct fixture *f, gconstpointer unused)
{
	loom_buffer_t *buf;
	struct overlap o = { .g = add_graph(f, &buf) };

	o.t = loom_graph_node(o.g, 0);
	f->ctl->claim_all = 1;
	g_assert_cmpint(loom_dev_init_backend(f->dev, NULL, &o.be), ==,
			LOOM_OK);
	g_assert_cmpint(loom_event_new(f->dev, &o.ev), ==, LOOM_OK);
	f->ctl->on_compute = on_compute;
	f->ctl->on_compute_data = &o;

	g_assert_cmpint(loom_backend_graph_compute(o.be, o.g), ==, LOOM_OK);
	g_assert_cmpint(o.n_busy, ==, 10);
	/* The scheduler's own calls are claimed the same way. */
	g_assert_cmpint(loom_sched_new(&o.be, 1, &o.sched), ==, LOOM_OK);
	g_assert_cmpint(loom_sched_compute(o.sched, o.g), ==, LOOM_OK);
	g_assert_cmpint(o.n_busy, ==, 23);

	/* Once the calls end, the backend and scheduler are free again. */
	f->ctl->on_compute = NULL;
	g_assert_cmpint(loom_sched_compute(o.sched, o.g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(o.be, o.g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(o.be), ==, LOOM_OK);
	loom_sched_free(o.sched);
	loom_event_free(o.ev);
	loom_backend_free(o.be);
	g_assert_cmpstr(loom_backend_name(o.be), ==, "(null)");
	loom_buffer_free(buf);
}

/* Devices, regs and buffer types die with their plugin at unload. */
static void test_unloaded_handles(void)
{
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	loom_backend_t *be = (loom_backend_t *)1;

	g_assert_cmpint(loom_load_static(&fake_static_desc, &reg), ==,
			LOOM_OK);
	dev = loom_dev_by_name("static0");
	buft = loom_dev_buffer_type(dev);
	g_assert_cmpstr(loom_dev_name(dev), ==, "static0");
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	g_assert_cmpstr(loom_reg_name(reg), ==, "(null)");
	g_assert_cmpuint(loom_reg_dev_count(reg), ==, 0);
	g_assert_null(loom_reg_context(reg));
	g_assert_cmpstr(loom_dev_name(dev), ==, "(null)");
	g_assert_null(loom_dev_reg(dev));
	g_assert_null(loom_dev_buffer_type(dev));
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==,
			LOOM_E_INVAL);
	g_assert_null(be);
	g_assert_cmpstr(loom_buffer_type_name(buft), ==, "(null)");
	g_assert_null(loom_buffer_type_context(buft));
	g_assert_false(loom_buffer_type_is_host(buft));
}

/* ------------------------------------------------------------------------
 * Live objects keep their plugin loaded.
 */
static void test_unload_busy(struct fixture *f, gconstpointer unused)
{
	loom_buffer_t *a, *b;
	loom_backend_t *be;
	loom_event_t *ev;
	loom_galloc_t *ga;

	g_assert_cmpint(loom_buffer_type_alloc_buffer(f->buft, 64, &a), ==,
			LOOM_OK);
	g_assert_cmpint(loom_buffer_type_alloc_buffer(f->buft, 0, &b), ==,
			LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(f->dev, NULL, &be), ==, LOOM_OK);

	g_assert_cmpint(loom_unload_all(), ==, LOOM_E_BUSY);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_unload_all: 2 buffers and 1 backend of plugin "
			"'static' are still alive");
	/* Nothing was unloaded. */
	g_assert_true(loom_dev_by_name("static0") == f->dev);
	g_assert_cmpstr(loom_backend_name(be), ==, "static");
	g_assert_cmpuint(loom_buffer_size(a), ==, 64);

	loom_buffer_free(a);
	loom_buffer_free(b);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_E_BUSY);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_unload_all: 1 backend of plugin 'static' is "
			"still alive");
	loom_backend_free(be);

	g_assert_cmpint(loom_event_new(f->dev, &ev), ==, LOOM_OK);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_E_BUSY);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_unload_all: 1 event of plugin 'static' is "
			"still alive");
	loom_event_free(ev);

	/* A graph allocator's compute buffer counts too. */
	g_assert_cmpint(loom_galloc_new(f->buft, &ga), ==, LOOM_OK);
	new_f32(f->ctx, 16, "x");
	g_assert_cmpint(loom_buffer_type_alloc_buffer(f->buft, 8, &a), ==,
			LOOM_OK);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_E_BUSY);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_unload_all: 1 buffer of plugin 'static' is "
			"still alive");
	loom_buffer_free(a);
	loom_galloc_free(ga);
}

/* ------------------------------------------------------------------------
 * Plugins calling back into the loader, from init and from an ELF
 * constructor (fake plugins in a directory of the test's own).
 */
static const char *fake_libs(void)
{
	static char *path;

	if (!path) {
		const char *b = g_getenv("LOOM_TEST_BUILDDIR");

		path = g_build_filename(b ? b : ".", "tests", "fake", ".libs",
					NULL);
	}
	return path;
}

static void add_plugin(const char *dir, const char *name)
{
	char *file = g_strdup_printf("loom-%s.so", name);
	char *target = g_build_filename(fake_libs(), file, NULL);
	char *link = g_build_filename(dir, file, NULL);

	g_assert_true(g_file_test(target, G_FILE_TEST_EXISTS));
	g_assert_cmpint(symlink(target, link), ==, 0);
	g_free(file);
	g_free(target);
	g_free(link);
}

/* The failures these tests provoke are expected: keep them off stderr. */
static void quiet_log(enum loom_log_level level, const char *msg,
		      void *userdata)
{
}

static void dir_setup(struct fixture *f, gconstpointer unused)
{
	GError *err = NULL;

	loom_log_set_callback(quiet_log, NULL);
	memset(f, 0, sizeof(*f));
	f->dir = g_dir_make_tmp("loom-ownership-XXXXXX", &err);
	g_assert_no_error(err);
	setenv("LOOM_PLUGIN_PATH", f->dir, 1);
	unsetenv("LOOM_BACKENDS");
	unsetenv("LOOM_TEST_MARKER");
}

static void dir_teardown(struct fixture *f, gconstpointer unused)
{
	GDir *d;
	const char *name;

	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	d = g_dir_open(f->dir, 0, NULL);
	while (d && (name = g_dir_read_name(d))) {
		char *p = g_build_filename(f->dir, name, NULL);

		g_unlink(p);
		g_free(p);
	}
	if (d)
		g_dir_close(d);
	g_rmdir(f->dir);
	g_free(f->dir);
	unsetenv("LOOM_PLUGIN_PATH");
	loom_log_set_callback(NULL, NULL);
}

static struct fake_control *control_of(const char *name)
{
	loom_reg_t *reg = loom_reg_by_name(name);
	fake_control_fn fn;

	g_assert_nonnull(reg);
	fn = (fake_control_fn)loom_reg_proc_address(reg, FAKE_CONTROL);
	g_assert_nonnull(fn);
	return fn();
}

/* How many records of that name are loaded. */
static size_t n_loaded(const char *name)
{
	struct loom_plugin_info info;
	size_t n = 0;

	for (size_t i = 0; i < loom_plugin_count(); i++) {
		g_assert_cmpint(loom_plugin_info(i, &info), ==, LOOM_OK);
		n += strcmp(info.name, name) == 0 &&
		     info.state == LOOM_PLUGIN_LOADED;
	}
	return n;
}

static void test_init_load_all(struct fixture *f, gconstpointer unused)
{
	struct fake_control *ctl;

	add_plugin(f->dir, "initload");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_cmpuint(n_loaded("initload"), ==, 1);
	g_assert_cmpuint(loom_plugin_count(), ==, 1);
	ctl = control_of("initload");
	g_assert_cmpint(ctl->reenter_status, ==, LOOM_E_STATE);
	g_assert_cmpstr(ctl->reenter_msg, ==, REENTER_MSG("loom_load_all"));
}

static void test_init_unload(struct fixture *f, gconstpointer unused)
{
	struct fake_control *ctl;

	add_plugin(f->dir, "initunload");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_cmpuint(n_loaded("initunload"), ==, 1);
	ctl = control_of("initunload");
	g_assert_cmpint(ctl->reenter_status, ==, LOOM_E_STATE);
	g_assert_cmpstr(ctl->reenter_msg, ==,
			REENTER_MSG("loom_unload_all"));
	g_assert_nonnull(loom_dev_by_name("initunload0"));
}

/* Init waits for a thread that reads the registry: no deadlock, and the
 * thread sees the plugin loaded before (good sorts first). */
static void test_init_thread(struct fixture *f, gconstpointer unused)
{
	add_plugin(f->dir, "good");
	add_plugin(f->dir, "initthread");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_cmpuint(n_loaded("initthread"), ==, 1);
	g_assert_cmpuint(control_of("initthread")->reenter_dev_count, ==, 1);
	g_assert_cmpuint(loom_dev_count(), ==, 2);
}

/* A constructor loading everything while the loader is in its dlopen:
 * refused, so "good" (opened just before) is loaded once. */
static void test_ctor_load_all(struct fixture *f, gconstpointer unused)
{
	struct fake_control *ctl;

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "zctor");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_cmpuint(n_loaded("good"), ==, 1);
	g_assert_cmpuint(n_loaded("zctor"), ==, 1);
	g_assert_cmpuint(loom_plugin_count(), ==, 2);
	g_assert_cmpuint(loom_dev_count(), ==, 2);
	ctl = control_of("zctor");
	g_assert_cmpint(ctl->reenter_status, ==, LOOM_E_STATE);
	g_assert_cmpstr(ctl->reenter_msg, ==, REENTER_MSG("loom_load_all"));
}

/* ------------------------------------------------------------------------
 * Half-built wrappers: context set and tables checked before any plugin
 * method runs.
 */
static const char *named_by_context(loom_reg_t *reg)
{
	return loom_reg_context(reg);
}

static const char *buft_named_by_context(loom_buffer_type_t *buft)
{
	return loom_buffer_type_context(buft);
}

static size_t no_devs(loom_reg_t *reg)
{
	return 0;
}

static size_t one_align(loom_buffer_type_t *buft)
{
	return 1;
}

static void test_half_built(struct fixture *f, gconstpointer unused)
{
	static char reg_name[] = "by-context";
	static char buft_name[] = "buft-by-context";
	const struct loom_reg_iface ri = {
		.size = sizeof(ri),
		.get_name = named_by_context,
		.get_dev_count = no_devs,
	};
	const struct loom_buffer_type_iface bi = {
		.size = sizeof(bi),
		.get_name = buft_named_by_context,
		.get_alignment = one_align,
	};
	loom_reg_t *reg = (loom_reg_t *)1;
	loom_buffer_type_t *buft = (loom_buffer_type_t *)1;

	g_assert_cmpint(loom_reg_new(&ri, reg_name, &reg), ==, LOOM_E_PLUGIN);
	g_assert_null(reg);
	g_assert_cmpstr(loom_error_message(), ==,
			"reg 'by-context': missing required method get_dev");
	g_assert_cmpint(loom_buffer_type_new(f->reg, f->dev, &bi, buft_name,
					     &buft),
			==, LOOM_E_PLUGIN);
	g_assert_null(buft);
	g_assert_cmpstr(loom_error_message(), ==,
			"buffer type 'buft-by-context': missing required "
			"method alloc_buffer");
}

/* A buffer type the plugin makes on first use, missing a required slot,
 * fails the plugin at load with that reason. */
static void test_lazy_buft_missing(struct fixture *f, gconstpointer unused)
{
	struct loom_plugin_info info;

	add_plugin(f->dir, "lazybuft");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_cmpuint(loom_plugin_count(), ==, 1);
	g_assert_cmpint(loom_plugin_info(0, &info), ==, LOOM_OK);
	g_assert_cmpint(info.state, ==, LOOM_PLUGIN_FAILED);
	g_assert_cmpstr(info.reason, ==,
			"buffer type 'lazybuft_host': missing required method "
			"alloc_buffer");
	g_assert_null(loom_dev_by_name("lazybuft0"));
}

/* ------------------------------------------------------------------------
 * Small ones.
 */
static void test_huge_alignment(struct fixture *f, gconstpointer unused)
{
	loom_buffer_t *buf = (loom_buffer_t *)1;

	f->ctl->huge_align = 1;
	g_assert_cmpuint(loom_buffer_type_alignment(f->buft), ==,
			 (size_t)1 << 63);
	new_f32(f->ctx, 4, "a");
	new_f32(f->ctx, 4, "b");
	new_f32(f->ctx, 4, "c");
	g_assert_cmpint(loom_ctx_alloc_tensors(f->ctx, f->buft, &buf), ==,
			LOOM_E_NOMEM);
	g_assert_null(buf);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_ctx_alloc_tensors: the tensors' size overflows "
			"with alignment 9223372036854775808");
	g_assert_null(loom_ctx_first_tensor(f->ctx)->buffer);
	f->ctl->huge_align = 0;
}

/* A log callback that unloads, run from inside a call through a buffer
 * type (its bad alignment is logged there): refused, since the unload
 * would free the buffer type under that call. */
static int unload_status;
static char unload_msg[256];

static void unloading_log(enum loom_log_level level, const char *msg,
			  void *userdata)
{
	unload_status = loom_unload_all();
	snprintf(unload_msg, sizeof(unload_msg), "%s", loom_error_message());
}

static void test_unload_in_call(struct fixture *f, gconstpointer unused)
{
	f->ctl->bad_align = 1;
	loom_log_set_callback(unloading_log, NULL);
	g_assert_cmpuint(loom_buffer_type_alignment(f->buft), ==, 64);
	loom_log_set_callback(NULL, NULL);
	f->ctl->bad_align = 0;
	g_assert_cmpint(unload_status, ==, LOOM_E_STATE);
	g_assert_cmpstr(unload_msg, ==,
			"loom_unload_all: called from inside a call into a "
			"plugin or a log callback");
	g_assert_cmpstr(loom_buffer_type_name(f->buft), ==, "static_host");
}

static int n_logged;

static void raising_log(enum loom_log_level level, const char *msg,
			void *userdata)
{
	n_logged++;
	loom_error_set(LOOM_E_IO, "raised by the log callback");
}

static void test_log_reentry(void)
{
	enum loom_log_level old = loom_log_get_level();

	loom_log_set_level(LOOM_LOG_DEBUG);
	loom_log_set_callback(raising_log, NULL);
	g_assert_cmpint(loom_error_set(LOOM_E_RANGE, "the caller's error"), ==,
			LOOM_E_RANGE);
	loom_log_set_callback(NULL, NULL);
	loom_log_set_level(old);
	g_assert_cmpint(n_logged, ==, 1);
	g_assert_cmpstr(loom_error_message(), ==, "the caller's error");
}

/* The numbers and offsets plugins are built against.  Appending is
 * fine; any change below breaks every plugin already built. */
static void test_abi_pins(void)
{
#define OFF(f) offsetof(struct loom_tensor, f)
	static const int ops[] = {
		LOOM_OP_NONE,     LOOM_OP_ADD,      LOOM_OP_SUB,
		LOOM_OP_MUL,      LOOM_OP_DIV,      LOOM_OP_SCALE,
		LOOM_OP_SILU,     LOOM_OP_GELU,     LOOM_OP_RMS_NORM,
		LOOM_OP_NORM,     LOOM_OP_SOFT_MAX, LOOM_OP_ROPE,
		LOOM_OP_MUL_MAT,  LOOM_OP_MUL_MAT_ID, LOOM_OP_GET_ROWS,
		LOOM_OP_SET_ROWS, LOOM_OP_COPY,     LOOM_OP_CONT,
		LOOM_OP_CONCAT,   LOOM_OP_SUM_ROWS, LOOM_OP_ARGMAX,
		LOOM_OP_TOP_K,    LOOM_OP_VIEW,     LOOM_OP_RESHAPE,
		LOOM_OP_PERMUTE,  LOOM_OP_TRANSPOSE,
	};
	static const char *const op_names[] = {
		"none",     "add",      "sub",      "mul",       "div",
		"scale",    "silu",     "gelu",     "rms_norm",  "norm",
		"soft_max", "rope",     "mul_mat",  "mul_mat_id", "get_rows",
		"set_rows", "copy",     "cont",     "concat",    "sum_rows",
		"argmax",   "top_k",    "view",     "reshape",   "permute",
		"transpose",
	};

	for (size_t i = 0; i < G_N_ELEMENTS(ops); i++) {
		g_assert_cmpint(ops[i], ==, (int)i);
		g_assert_cmpstr(loom_op_name(ops[i]), ==, op_names[i]);
	}
	g_assert_cmpint(LOOM_OP_COUNT, >=, 26);

	g_assert_cmpint(LOOM_TYPE_F32, ==, 0);
	g_assert_cmpint(LOOM_TYPE_F16, ==, 1);
	g_assert_cmpint(LOOM_TYPE_BF16, ==, 2);
	g_assert_cmpint(LOOM_TYPE_I32, ==, 3);
	g_assert_cmpint(LOOM_TYPE_Q8_0, ==, 4);
	g_assert_cmpint(LOOM_TYPE_COUNT, >=, 5);

	g_assert_cmpint(LOOM_E_INVAL, ==, -1);
	g_assert_cmpint(LOOM_E_PLUGIN, ==, -8);
	g_assert_cmpint(LOOM_E_DECLINED, ==, -11);
	g_assert_cmpint(LOOM_E_NOT_APPLICABLE, ==, -12);
	g_assert_cmpint(LOOM_E_IO, ==, -13);
	g_assert_cmpint(LOOM_E_BUSY, ==, -14);

	g_assert_cmpint(LOOM_MAX_DIMS, ==, 4);
	g_assert_cmpint(LOOM_MAX_SRC, ==, 6);
	g_assert_cmpint(LOOM_MAX_OP_PARAMS, ==, 16);
	g_assert_cmpint(LOOM_MAX_NAME, ==, 64);
	if (sizeof(void *) != 8 || sizeof(size_t) != 8) {
		g_test_skip("tensor offsets are pinned for 64-bit targets");
		return;
	}
	g_assert_cmpuint(OFF(type), ==, 0);
	g_assert_cmpuint(OFF(op), ==, 4);
	g_assert_cmpuint(OFF(flags), ==, 8);
	g_assert_cmpuint(OFF(ne), ==, 16);
	g_assert_cmpuint(OFF(nb), ==, 48);
	g_assert_cmpuint(OFF(op_params), ==, 80);
	g_assert_cmpuint(OFF(src), ==, 144);
	g_assert_cmpuint(OFF(view_src), ==, 192);
	g_assert_cmpuint(OFF(view_offs), ==, 200);
	g_assert_cmpuint(OFF(data), ==, 208);
	g_assert_cmpuint(OFF(buffer), ==, 216);
	g_assert_cmpuint(OFF(state), ==, 224);
	g_assert_cmpuint(OFF(name), ==, 232);
	g_assert_cmpuint(OFF(reserved), ==, 296);
	g_assert_cmpuint(sizeof(struct loom_tensor), ==, 360);
#undef OFF
}

/* New descriptors have their reserved words zero. */
static void test_reserved_zero(struct fixture *f, gconstpointer unused)
{
	struct loom_tensor *t = new_f32(f->ctx, 4, "r");

	for (size_t i = 0; i < G_N_ELEMENTS(t->reserved); i++)
		g_assert_cmpuint(t->reserved[i], ==, 0);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
#define S(path, fn)                                                          \
	g_test_add("/ownership/" path, struct fixture, NULL, static_setup, \
		   fn, static_teardown)
#define D(path, fn)                                                          \
	g_test_add("/ownership/" path, struct fixture, NULL, dir_setup, fn, \
		   dir_teardown)
	S("freed-buffer", test_freed_buffer);
	S("freed-backend-event", test_freed_backend_event);
	S("freed-ctx-galloc", test_freed_ctx_galloc);
	S("freed-sched", test_freed_sched);
	S("backend-busy", test_backend_busy);
	g_test_add_func("/ownership/unloaded-handles", test_unloaded_handles);
	S("unload-busy", test_unload_busy);
	D("init-load-all", test_init_load_all);
	D("init-unload", test_init_unload);
	D("init-thread", test_init_thread);
	D("ctor-load-all", test_ctor_load_all);
	S("half-built", test_half_built);
	D("lazy-buft-missing", test_lazy_buft_missing);
	S("huge-alignment", test_huge_alignment);
	S("unload-in-call", test_unload_in_call);
	g_test_add_func("/ownership/log-reentry", test_log_reentry);
	g_test_add_func("/ownership/abi-pins", test_abi_pins);
	S("reserved-zero", test_reserved_zero);
	return g_test_run();
}
