/* SPDX-License-Identifier: MIT */
/* test-loader-abi.c - part of test-loader: the ABI version rule, device
 * ranks, requested backends, secure execution, reloading, asynchronous
 * events, and loading from several threads. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <grp.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include <loom/loom-plugin.h>

#include "backend-private.h" /* loom__abi_check, compiled in */
#include "fake-plugin.h"
#include "loader-cases.h"

/* ------------------------------------------------------------------------
 * The ABI version rule and device ranks.
 */

/* The rule itself, for cores of other versions than this one: a plugin
 * built against 1.1 is refused by a 1.0 core, naming both versions; a 1.0
 * plugin loads into a 1.1 core. */
void test_abi_rule(void)
{
	static const struct {
		uint32_t major, minor, core_major, core_minor;
		const char *why; /* NULL: loads */
	} cases[] = {
		{ 1, 1, 1, 0, "ABI mismatch: plugin ABI 1.1, libloom ABI 1.0 "
			      "(the plugin needs a newer libloom)" },
		{ 1, 0, 1, 1, NULL },
		{ 1, 1, 1, 1, NULL },
		{ 1, 0, 1, 0, NULL },
		{ 1, 7, 1, 9, NULL },
		{ 1, 4294967295u, 1, 1,
		  "ABI mismatch: plugin ABI 1.4294967295, libloom ABI 1.1 "
		  "(the plugin needs a newer libloom)" },
		{ 2, 0, 1, 1, "ABI mismatch: plugin ABI 2.0, libloom ABI 1.1" },
		{ 0, 1, 1, 1, "ABI mismatch: plugin ABI 0.1, libloom ABI 1.1" },
		{ 1, 0, 2, 5, "ABI mismatch: plugin ABI 1.0, libloom ABI 2.5" },
	};

	/* This core is 1.2: ranks are the first slot appended to 1.0, the
	 * descriptor's size and flags the fields appended to it. */
	g_assert_cmpuint(LOOM_ABI_MAJOR, ==, 1);
	g_assert_cmpuint(LOOM_ABI_MINOR, ==, 2);
	g_assert_cmpuint(offsetof(struct loom_dev_iface, get_rank), ==,
			 offsetof(struct loom_dev_iface, event_synchronize) +
				 sizeof(void *));
	g_assert_cmpuint(offsetof(struct loom_plugin_desc, size), ==,
			 offsetof(struct loom_plugin_desc, score) +
				 sizeof(void *));
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		char why[160] = "";
		int st = loom__abi_check(cases[i].major, cases[i].minor,
					 cases[i].core_major,
					 cases[i].core_minor, why,
					 sizeof(why));

		g_assert_cmpint(st, ==, cases[i].why ? LOOM_E_ABI : LOOM_OK);
		g_assert_cmpstr(why, ==, cases[i].why ? cases[i].why : "");
	}
}

/* A descriptor's bytes against what its version declares: the check
 * reads no byte past the size it is given. */
enum { SIZE_V1_0 = -1, SIZE_V1_2 = -2, SIZE_WHOLE = -3 };

void test_abi_desc_size(void)
{
	static const struct {
		uint32_t major, minor;
		int size_field; /* SIZE_WHOLE: sizeof */
		int size;       /* bytes given, or one of SIZE_* */
		const char *why; /* NULL: passes */
	} cases[] = {
		{ 1, 0, 0, SIZE_V1_0, NULL },
		{ 1, 1, 0, SIZE_V1_0, NULL },
		{ 1, 2, SIZE_WHOLE, SIZE_WHOLE, NULL },
		{ 1, 2, SIZE_V1_2, SIZE_V1_2, NULL },
		{ 1, 2, 0, SIZE_WHOLE, "descriptor says it is 0 bytes" },
		{ 1, 2, 4096, SIZE_WHOLE, "descriptor says it is 4096 bytes" },
		{ 1, 2, 0, SIZE_V1_0, "is shorter than plugin ABI 1.2's" },
		{ 2, 0, 0, 8, NULL }, /* the version rule refuses these */
		{ 1, 3, 0, 8, NULL },
		{ 1, 1, 0, 16, "descriptor of 16 bytes is shorter than plugin "
			       "ABI 1.1's" },
		{ 1, 1, 0, 2, "descriptor of 2 bytes cannot hold its ABI "
			      "version (8 bytes)" },
	};
	const size_t v1_0 = offsetof(struct loom_plugin_desc, size);
	const size_t v1_2 = offsetof(struct loom_plugin_desc, flags) +
			    sizeof(uint32_t);

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct loom_plugin_desc d = { 0 };
		int sz = cases[i].size, zf = cases[i].size_field;
		size_t size = sz == SIZE_V1_0 ? v1_0 : sz == SIZE_V1_2 ? v1_2 :
			      sz == SIZE_WHOLE ? sizeof(d) : (size_t)sz;
		char why[160] = "";
		guint8 *bytes;
		int st;

		d.abi_major = cases[i].major;
		d.abi_minor = cases[i].minor;
		d.size = zf == SIZE_WHOLE ? sizeof(d) :
			 zf == SIZE_V1_2 ? v1_2 : (uint32_t)zf;
		/* Exactly size bytes, so that a read past them is one for
		 * ASan and valgrind. */
		bytes = g_memdup2(&d, size);
		st = loom__desc_size_check(bytes, size, why, sizeof(why));
		g_assert_cmpint(st, ==, cases[i].why ? LOOM_E_PLUGIN : LOOM_OK);
		if (cases[i].why && !strstr(why, cases[i].why))
			g_error("case %zu: '%s' lacks '%s'", i, why,
				cases[i].why);
		g_free(bytes);
	}
}

/* The same rule in this core, through the loader: a descriptor one minor
 * newer is refused before its init runs; one of minor 0 loads. */
void test_abi_static(struct fixture *f, gconstpointer data)
{
	struct loom_plugin_desc desc = fake_static_desc;
	loom_reg_t *reg = (loom_reg_t *)1;
	char *want;

	desc.abi_minor = LOOM_ABI_MINOR + 1;
	g_assert_cmpint(loom_load_static(&desc, &reg), ==, LOOM_E_ABI);
	g_assert_null(reg);
	want = g_strdup_printf("plugin 'static' ((static)): ABI mismatch: "
			       "plugin ABI 1.%u, libloom ABI 1.%u (the plugin "
			       "needs a newer libloom)",
			       LOOM_ABI_MINOR + 1, LOOM_ABI_MINOR);
	g_assert_cmpstr(loom_error_message(), ==, want);
	g_free(want);
	g_assert_null(loom_dev_by_name("static0"));

	desc.abi_minor = 0;
	g_assert_cmpint(loom_load_static(&desc, &reg), ==, LOOM_OK);
	g_assert_true(reg == loom_reg_by_name("static"));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* A plugin built against ABI 1.0: loaded, its device table shorter than
 * this core's, so its rank is the default, whatever lies past the end of
 * its table (here a get_rank that would say primary). */
void test_abi_old_plugin(struct fixture *f, gconstpointer data)
{
	static const char *const ties[] = { "old0", "good0" };
	static const char *const ranked[] = { "cpu0", "old0", "good0" };
	struct loom_plugin_info info;
	char *path = path_in(f->dir, "old");

	add_plugin(f->dir, "old");
	add_plugin(f->dir, "good");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "old", LOOM_PLUGIN_LOADED, "");
	info = find_record(path);
	g_assert_cmpstr(info.version, ==, "1.2.3");
	g_assert_cmpint(loom_dev_rank(loom_dev_by_name("old0")), ==,
			LOOM_DEV_RANK_NONE);
	g_assert_cmpint(loom_dev_type(loom_dev_by_name("old0")), ==,
			LOOM_DEV_TYPE_GPU);
	/* Both unranked: the GPU before the CPU. */
	assert_dev_order(ties, 2);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	/* Loom's CPU plugin, primary, comes before the 1.0 GPU. */
	add_built(f->dir, "plugins/cpu", "cpu");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(ranked, 3);
	g_free(path);
}

/* The default order: rank first, then type (GPU, IGPU, ACCEL, CPU,
 * META), then the order plugins were found in; LOOM_BACKENDS before
 * all of them. */
void test_rank_order(struct fixture *f, gconstpointer data)
{
	static const char *const want[] = {
		"pgpu0", /* primary GPU */
		"cpu0",  /* primary CPU: Loom's own */
		"migpu0", /* marginal IGPU */
		"fgpu0", /* no rank: GPU, ACCEL, CPU, META */
		"acme0",
		"good0",
		"fmeta0",
	};
	static const char *const regs[] = {
		"pgpu", "cpu", "migpu", "fgpu", "acme", "good", "fmeta",
	};
	static const char *const listed[] = { "acme0", "fgpu0", "cpu0" };
	static const enum loom_dev_rank ranks[] = {
		LOOM_DEV_RANK_PRIMARY, LOOM_DEV_RANK_PRIMARY,
		LOOM_DEV_RANK_MARGINAL, LOOM_DEV_RANK_NONE, LOOM_DEV_RANK_NONE,
		LOOM_DEV_RANK_NONE, LOOM_DEV_RANK_NONE,
	};

	/* Found in name order: acme, cpu, fgpu, fmeta, good, migpu, pgpu. */
	add_built(f->dir, "tests/acme", "acme");
	add_built(f->dir, "plugins/cpu", "cpu");
	add_plugin(f->dir, "fgpu");
	add_plugin(f->dir, "fmeta");
	add_plugin(f->dir, "good");
	add_plugin(f->dir, "migpu");
	add_plugin(f->dir, "pgpu");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(want, G_N_ELEMENTS(want));
	for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
		loom_dev_t *dev = loom_dev_get(i);

		g_assert_cmpint(loom_dev_rank(dev), ==, ranks[i]);
		g_assert_cmpstr(loom_reg_name(loom_reg_get(i)), ==, regs[i]);
	}
	g_assert_null(loom_reg_get(G_N_ELEMENTS(regs)));
	g_assert_true(loom_dev_by_type(LOOM_DEV_TYPE_GPU) ==
		      loom_dev_by_name("pgpu0"));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	/* LOOM_BACKENDS is the user's order, ranks or not. */
	setenv("LOOM_BACKENDS", "acme,fgpu,cpu", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(listed, G_N_ELEMENTS(listed));
}

/* A third-party plugin with two ops and no rank (an ACCEL device) never
 * takes device 0 from the CPU or from a GPU. */
void test_rank_third_party(struct fixture *f, gconstpointer data)
{
	static const char *const with_cpu[] = { "cpu0", "acme0" };
	static const char *const with_gpu[] = { "fgpu0", "acme0" };
	char *cpu;

	add_built(f->dir, "tests/acme", "acme");
	add_built(f->dir, "plugins/cpu", "cpu");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(with_cpu, 2);
	g_assert_cmpint(loom_dev_rank(loom_dev_get(0)), ==,
			LOOM_DEV_RANK_PRIMARY);
	g_assert_cmpint(loom_dev_rank(loom_dev_by_name("acme0")), ==,
			LOOM_DEV_RANK_NONE);
	g_assert_cmpint(loom_dev_type(loom_dev_by_name("acme0")), ==,
			LOOM_DEV_TYPE_ACCEL);
	g_assert_true(loom_reg_get(0) == loom_reg_by_name("cpu"));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	/* A GPU that declares no rank still comes first by its type. */
	cpu = path_in(f->dir, "cpu");
	g_assert_cmpint(g_unlink(cpu), ==, 0);
	g_free(cpu);
	add_plugin(f->dir, "fgpu");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(with_gpu, 2);
}

/* A composed device is as good as its weakest member: the meta device
 * over two CPU partitions is primary, over acme and a CPU it is not.
 * Either way it comes after its members of that rank. */
void test_rank_meta(struct fixture *f, gconstpointer data)
{
	static const char *const cpus[] = { "cpu0", "cpu1", "meta0" };
	static const char *const mixed[] = { "cpu0", "cpu1", "acme0",
					     "meta0" };

	add_built(f->dir, "plugins/cpu", "cpu");
	add_built(f->dir, "plugins/meta", "meta");
	setenv("LOOM_CPU_DEVICES", "2", 1);
	setenv("LOOM_META_DEVICES", "cpu0,cpu1", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(cpus, 3);
	g_assert_cmpint(loom_dev_rank(loom_dev_by_name("meta0")), ==,
			LOOM_DEV_RANK_PRIMARY);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	add_built(f->dir, "tests/acme", "acme");
	setenv("LOOM_META_DEVICES", "acme0,cpu1", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(mixed, 4);
	g_assert_cmpint(loom_dev_rank(loom_dev_by_name("meta0")), ==,
			LOOM_DEV_RANK_NONE);
	unsetenv("LOOM_CPU_DEVICES");
	unsetenv("LOOM_META_DEVICES");
}

/* A rank that is none of the four is refused, naming it; the names. */
void test_rank_bad(struct fixture *f, gconstpointer data)
{
	add_plugin(f->dir, "badrank");
	add_plugin(f->dir, "good");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "badrank", LOOM_PLUGIN_FAILED,
		      "device 'badrank0' has unknown rank 7");
	g_assert_null(loom_dev_by_name("badrank0"));
	g_assert_nonnull(loom_dev_by_name("good0"));

	g_assert_cmpstr(loom_dev_rank_name(LOOM_DEV_RANK_NONE), ==, "none");
	g_assert_cmpstr(loom_dev_rank_name(LOOM_DEV_RANK_MARGINAL), ==,
			"marginal");
	g_assert_cmpstr(loom_dev_rank_name(LOOM_DEV_RANK_SECONDARY), ==,
			"secondary");
	g_assert_cmpstr(loom_dev_rank_name(LOOM_DEV_RANK_PRIMARY), ==,
			"primary");
	g_assert_cmpstr(loom_dev_rank_name((enum loom_dev_rank)7), ==,
			"unknown");
	/* Not a device: the default, no crash. */
	g_assert_cmpint(loom_dev_rank(NULL), ==, LOOM_DEV_RANK_NONE);
	g_assert_cmpint(loom_dev_rank((loom_dev_t *)&f), ==,
			LOOM_DEV_RANK_NONE);
}

void test_requested(struct fixture *f, gconstpointer data)
{
	char *want;
	char *initfail = path_in(f->dir, "initfail");

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "initfail");
	add_plugin(f->dir, "score0");
	setenv("LOOM_BACKENDS", "nosuch,good", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_E_NOT_FOUND);
	want = g_strdup_printf("LOOM_BACKENDS: backend 'nosuch' not found in "
			       "%s (found: good, initfail, score0)",
			       f->dir);
	g_assert_cmpstr(loom_error_message(), ==, want);
	g_free(want);
	/* The others load all the same; a second call says it again. */
	g_assert_nonnull(loom_dev_by_name("good0"));
	g_assert_cmpint(loom_load_all(), ==, LOOM_E_NOT_FOUND);
	g_assert_nonnull(strstr(loom_error_message(), "'nosuch' not found"));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	setenv("LOOM_BACKENDS", "initfail", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_E_DEVICE);
	want = g_strdup_printf("LOOM_BACKENDS: backend 'initfail' cannot be "
			       "loaded: init failed: fake device did not "
			       "answer (%s)",
			       initfail);
	g_assert_cmpstr(loom_error_message(), ==, want);
	g_free(want);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	setenv("LOOM_BACKENDS", "score0", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_E_NOT_APPLICABLE);
	g_assert_nonnull(strstr(loom_error_message(), "no fake hardware here"));
	loom_unload_all();

	/* With no plugin at all, it says so. */
	setenv("LOOM_PLUGIN_PATH", f->dir2, 1);
	setenv("LOOM_BACKENDS", "nosuch", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_E_NOT_FOUND);
	want = g_strdup_printf("LOOM_BACKENDS: backend 'nosuch' not found in "
			       "%s (found no plugins)",
			       f->dir2);
	g_assert_cmpstr(loom_error_message(), ==, want);
	g_free(want);
	g_free(initfail);
}

void test_secure(struct fixture *f, gconstpointer data)
{
	char *notice;

	add_plugin(f->dir, "good");
	setenv("LOOM_BACKENDS", "nosuch", 1);
	setenv("LOOM_CPU_THREADS", "3", 1);
	/* The notice is a warning: it shows at the default level. */
	loom_log_set_level(LOOM_LOG_WARN);
	pretend_secure = 1;

	g_assert_null(loom_env_get("LOOM_CPU_THREADS"));
	g_assert_null(loom_env_get("LOOM_PLUGIN_PATH"));
	notice = g_strdup_printf("%d secure execution: ignoring every "
				 "LOOM_* variable (LOOM_CPU_THREADS is set)\n",
				 (int)LOOM_LOG_WARN);
	g_assert_cmpstr(logged->str, ==, notice);
	g_free(notice);
	/* LOOM_BACKENDS and LOOM_PLUGIN_PATH are ignored. */
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_cmpuint(loom_search_path_count(), ==, 1);
	g_assert_cmpstr(loom_search_path(0), ==, loom_plugin_dir());
	g_assert_null(loom_reg_by_name("good"));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	pretend_secure = 0;
	g_assert_cmpstr(loom_env_get("LOOM_CPU_THREADS"), ==, "3");
	unsetenv("LOOM_BACKENDS");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_nonnull(loom_reg_by_name("good"));
	unsetenv("LOOM_CPU_THREADS");
	loom_log_set_level(LOOM_LOG_WARN);
}

void test_reload(struct fixture *f, gconstpointer data)
{
	add_plugin(f->dir, "good");
	add_plugin(f->dir, "fgpu");
	add_plugin(f->dir, "initfail");
	for (int i = 0; i < 20; i++) {
		g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
		g_assert_cmpuint(loom_reg_count(), ==, 2);
		g_assert_cmpuint(loom_dev_count(), ==, 2);
		g_assert_cmpuint(loom_plugin_count(), >=, 3);
		g_assert_cmpint(loom_load_static(&fake_static_desc, NULL),
				==, LOOM_OK);
		g_assert_cmpuint(loom_dev_count(), ==, 3);
		g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
		g_assert_cmpuint(loom_plugin_count(), ==, 0);
		g_assert_cmpuint(loom_dev_count(), ==, 0);
		g_assert_null(loom_dev_by_name("good0"));
	}
}

/* The plugin's own async and event methods are used when it has them;
 * events of another plugin are waited for on the host. */
void test_async_events(struct fixture *f, gconstpointer data)
{
	struct fake_control *ctl;
	loom_dev_t *good, *gpu;
	loom_backend_t *be, *be_gpu;
	loom_event_t *ev, *ev_gpu;
	loom_buffer_t *buf;
	loom_ctx_t *ctx;
	struct loom_tensor *a, *b;
	float in[8], out[8];

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "fgpu");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	good = loom_dev_by_name("good0");
	gpu = loom_dev_by_name("fgpu0");
	g_assert_nonnull(good);
	g_assert_nonnull(gpu);
	ctl = ((fake_control_fn)loom_reg_proc_address(loom_dev_reg(good),
						       FAKE_CONTROL))();
	g_assert_cmpuint(loom_dev_caps(good), ==,
			 LOOM_DEV_CAP_ASYNC | LOOM_DEV_CAP_EVENTS);
	g_assert_cmpuint(loom_dev_caps(gpu), ==, 0);

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 8);
	b = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 8);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(good),
					       &buf),
			==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(good, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(gpu, NULL, &be_gpu), ==,
			LOOM_OK);
	for (int i = 0; i < 8; i++)
		in[i] = 1.0f / (float)(i + 1);

	g_assert_cmpint(loom_backend_tensor_set_async(be, a, in, 0,
						      sizeof(in)),
			==, LOOM_OK);
	g_assert_cmpint(ctl->n_set_async, ==, 1);
	/* No 2D async entry point: a loop of the plugin's 1D async copies. */
	g_assert_cmpint(loom_backend_tensor_set_2d_async(be, b, in, 0, 8, 4, 8,
							 8),
			==, LOOM_OK);
	g_assert_cmpint(ctl->n_set_async, ==, 5);
	g_assert_cmpint(loom_backend_tensor_copy_async(be, be, a, b), ==,
			LOOM_OK);
	g_assert_cmpint(ctl->n_cpy_async, ==, 1);
	ctl->decline_copy = 1;
	g_assert_cmpint(loom_backend_tensor_copy_async(be, be, a, b), ==,
			LOOM_OK);
	g_assert_cmpint(ctl->n_cpy_async, ==, 1);
	ctl->decline_copy = 0;
	g_assert_cmpint(loom_backend_tensor_get_async(be, b, out, 0,
						      sizeof(out)),
			==, LOOM_OK);
	g_assert_cmpint(ctl->n_get_async, ==, 1);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));

	/* Real events on good0, emulated ones on fgpu0. */
	g_assert_cmpint(loom_event_new(good, &ev), ==, LOOM_OK);
	g_assert_cmpint(ctl->n_event_new, ==, 1);
	g_assert_cmpint(loom_event_record(ev, be), ==, LOOM_OK);
	g_assert_cmpint(ctl->n_event_record, ==, 1);
	g_assert_cmpint(loom_event_wait(be, ev), ==, LOOM_OK);
	g_assert_cmpint(ctl->n_event_wait, ==, 1);
	g_assert_cmpint(loom_event_wait(be_gpu, ev), ==, LOOM_OK);
	g_assert_cmpint(ctl->n_event_wait, ==, 1);
	g_assert_cmpint(ctl->n_event_sync, ==, 1);
	g_assert_cmpint(loom_event_synchronize(ev), ==, LOOM_OK);
	g_assert_cmpint(ctl->n_event_sync, ==, 2);
	g_assert_cmpint(loom_event_record(ev, be_gpu), ==, LOOM_E_INVAL);

	g_assert_cmpint(loom_event_new(gpu, &ev_gpu), ==, LOOM_OK);
	g_assert_cmpint(loom_event_record(ev_gpu, be_gpu), ==, LOOM_OK);
	g_assert_cmpint(loom_event_wait(be, ev_gpu), ==, LOOM_OK);
	g_assert_cmpint(ctl->n_event_wait, ==, 1);
	g_assert_cmpint(loom_event_synchronize(ev_gpu), ==, LOOM_OK);
	loom_event_free(ev_gpu);
	loom_event_free(ev);
	g_assert_cmpint(ctl->n_event_free, ==, 1);

	loom_backend_free(be);
	loom_backend_free(be_gpu);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

static gpointer load_in_thread(gpointer data)
{
	for (int i = 0; i < 50; i++) {
		if (loom_load_all() != LOOM_OK || !loom_dev_by_name("good0") ||
		    loom_dev_count() != 2)
			return GINT_TO_POINTER(1);
	}
	return GINT_TO_POINTER(0);
}

/* Threads loading at once register each plugin once. */
void test_threads(struct fixture *f, gconstpointer data)
{
	GThread *threads[4];

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "fgpu");
	for (size_t i = 0; i < G_N_ELEMENTS(threads); i++)
		threads[i] = g_thread_new("load", load_in_thread, NULL);
	for (size_t i = 0; i < G_N_ELEMENTS(threads); i++)
		g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(threads[i])), ==,
				0);
	g_assert_cmpuint(loom_reg_count(), ==, 2);
	g_assert_cmpuint(loom_plugin_count(), ==, 2);
}

/* Loading on one thread while others enumerate plugins and devices:
 * every record and device seen is whole, and counts only grow. */
struct enum_state {
	gint done;
	gint failed;
};

static gpointer enumerate_in_thread(gpointer data)
{
	struct enum_state *es = data;
	size_t last_devs = 0, last_plugins = 0;

	while (!g_atomic_int_get(&es->done)) {
		size_t nd = loom_dev_count(), np = loom_plugin_count();

		if (nd < last_devs || np < last_plugins)
			g_atomic_int_set(&es->failed, 1);
		last_devs = nd;
		last_plugins = np;
		for (size_t i = 0; i < np; i++) {
			struct loom_plugin_info info;

			if (loom_plugin_info(i, &info) != LOOM_OK ||
			    !info.name || !info.file || !info.reason ||
			    strlen(info.file) == 0)
				g_atomic_int_set(&es->failed, 1);
		}
		for (size_t i = 0; i < nd; i++) {
			loom_dev_t *dev = loom_dev_get(i);

			/* A device may be added between count and get, so
			 * NULL is only wrong for the ones counted before. */
			if (dev && strcmp(loom_dev_name(dev), "(null)") == 0)
				g_atomic_int_set(&es->failed, 1);
			if (dev && !loom_dev_reg(dev))
				g_atomic_int_set(&es->failed, 1);
		}
		loom_dev_by_name("good0");
		loom_reg_count();
	}
	return NULL;
}

void test_enumerate_while_loading(struct fixture *f,
					 gconstpointer data)
{
	struct enum_state es = { 0 };
	GThread *threads[3];
	char *good = path_in(f->dir, "good");
	char *fgpu = path_in(f->dir, "fgpu");

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "fgpu");
	for (size_t i = 0; i < G_N_ELEMENTS(threads); i++)
		threads[i] = g_thread_new("enumerate", enumerate_in_thread,
					  &es);
	for (int round = 0; round < 3; round++) {
		g_assert_cmpint(loom_load_path(good, NULL), ==, LOOM_OK);
		g_assert_cmpint(loom_load_path(fgpu, NULL), ==, LOOM_OK);
		g_assert_cmpint(loom_load_static(&fake_static_desc, NULL),
				==, LOOM_OK);
		/* Loading again only adds records that say why not. */
		for (int i = 0; i < 20; i++)
			g_assert_cmpint(loom_load_path(good, NULL), ==,
					LOOM_E_PLUGIN);
		g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
		g_assert_cmpuint(loom_dev_count(), ==, 3);
		/* Unloading while others enumerate is not allowed (the API
		 * hands out pointers), so pause them around it. */
		g_atomic_int_set(&es.done, 1);
		for (size_t i = 0; i < G_N_ELEMENTS(threads); i++)
			g_thread_join(threads[i]);
		g_assert_cmpint(g_atomic_int_get(&es.failed), ==, 0);
		g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
		g_atomic_int_set(&es.done, 0);
		for (size_t i = 0; i < G_N_ELEMENTS(threads); i++)
			threads[i] = g_thread_new("enumerate",
						  enumerate_in_thread, &es);
	}
	g_atomic_int_set(&es.done, 1);
	for (size_t i = 0; i < G_N_ELEMENTS(threads); i++)
		g_thread_join(threads[i]);
	g_assert_cmpint(g_atomic_int_get(&es.failed), ==, 0);
	g_free(good);
	g_free(fgpu);
}
