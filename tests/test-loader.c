/* SPDX-License-Identifier: MIT */
/* test-loader.c - the plugin loader and the backend interfaces: every
 * broken fake plugin with the exact state and reason a user sees,
 * LOOM_BACKENDS, variants, the ABI version rule, device ranks and order,
 * secure execution, unloading, and the checks the core makes before data
 * reaches a plugin (caller errors never abort).  This file holds the
 * loading, LOOM_BACKENDS and loom-info cases and main; the others are in
 * test-loader-abi.c, test-loader-elf.c and test-loader-iface.c, the
 * shared helpers in loader-util.c. */
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
 * Loading.
 */

static void test_good(struct fixture *f, gconstpointer data)
{
	struct loom_plugin_info info;
	loom_reg_t *reg;
	loom_dev_t *dev;
	char *path;
	size_t free_, total;

	add_plugin(f->dir, "good");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	reg = loom_reg_by_name("good");
	g_assert_nonnull(reg);
	g_assert_cmpstr(loom_reg_name(reg), ==, "good");
	g_assert_cmpstr(loom_reg_version(reg), ==, "1.2.3");
	g_assert_cmpuint(loom_reg_dev_count(reg), ==, 1);
	dev = loom_dev_by_name("good0");
	g_assert_true(dev == loom_reg_dev(reg, 0));
	g_assert_true(loom_dev_reg(dev) == reg);
	g_assert_cmpstr(loom_dev_description(dev), ==,
			"fake good device for tests");
	g_assert_cmpint(loom_dev_type(dev), ==, LOOM_DEV_TYPE_CPU);
	g_assert_true(loom_dev_by_type(LOOM_DEV_TYPE_CPU) == dev);
	loom_dev_memory(dev, &free_, &total);
	g_assert_cmpuint(total, ==, (size_t)1 << 30);
	g_assert_cmpuint(free_, ==, (size_t)512 << 20);
	/* Entry points: cached ones and unknown names. */
	g_assert_nonnull(loom_reg_proc_address(reg, LOOM_PROC_SET_TENSOR_2D));
	g_assert_nonnull(loom_reg_proc_address(reg, FAKE_CONTROL));
	g_assert_null(loom_reg_proc_address(reg, LOOM_PROC_ALLREDUCE));
	g_assert_null(loom_reg_proc_address(reg, "no_such_entry"));

	path = path_in(f->dir, "good");
	info = find_record(path);
	g_assert_cmpint(info.state, ==, LOOM_PLUGIN_LOADED);
	g_assert_cmpstr(info.reason, ==, "");
	g_assert_cmpstr(info.name, ==, "good");
	g_assert_cmpstr(info.version, ==, "1.2.3");
	g_assert_cmpint(info.score, ==, 1);
	g_free(path);

	/* The search path: LOOM_PLUGIN_PATH, then the installed directory,
	 * which LOOM_PLUGIN_SYSTEM_PATH replaces (the tests set it empty). */
	g_assert_cmpuint(loom_search_path_count(), ==, 1);
	g_assert_cmpstr(loom_search_path(0), ==, f->dir);
	g_assert_null(loom_search_path(1));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	unsetenv("LOOM_PLUGIN_SYSTEM_PATH");
	g_assert_cmpuint(loom_search_path_count(), ==, 2);
	g_assert_cmpstr(loom_search_path(0), ==, f->dir);
	g_assert_cmpstr(loom_search_path(1), ==, loom_plugin_dir());
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	setenv("LOOM_PLUGIN_SYSTEM_PATH", "/nonexistent/a:/nonexistent/b", 1);
	g_assert_cmpuint(loom_search_path_count(), ==, 3);
	g_assert_cmpstr(loom_search_path(2), ==, "/nonexistent/b");
	setenv("LOOM_PLUGIN_SYSTEM_PATH", "", 1);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

static void test_broken(struct fixture *f, gconstpointer data)
{
	static const char *const names[] = {
		"good",     "nodesc", "major", "minor",   "nomethod",
		"initfail", "score0", "undef", "nodep",   "newer",
		"misnamed", "shortdesc",
	};
	char *junk = path_in(f->dir, "junk");

	for (size_t i = 0; i < G_N_ELEMENTS(names); i++)
		add_plugin(f->dir, names[i]);
	g_assert_true(g_file_set_contents(
		junk,
		"This text file is named like a plugin but is no shared\n"
		"object: the loader must say so and carry on with the rest.\n",
		-1, NULL));
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);

	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "nodesc", LOOM_PLUGIN_FAILED,
		      "not a loom plugin: no loom_plugin_descriptor symbol");
	assert_record(f->dir, "major", LOOM_PLUGIN_FAILED,
		      "ABI mismatch: plugin ABI 2.2, libloom ABI 1.2");
	assert_record(f->dir, "shortdesc", LOOM_PLUGIN_FAILED,
		      "descriptor of 2 bytes cannot hold its ABI version (8 "
		      "bytes)");
	assert_record(f->dir, "minor", LOOM_PLUGIN_FAILED,
		      "ABI mismatch: plugin ABI 1.3, libloom ABI 1.2 (the "
		      "plugin needs a newer libloom)");
	assert_record(f->dir, "nomethod", LOOM_PLUGIN_FAILED,
		      "device 'nomethod0': missing required method "
		      "supports_op");
	assert_record(f->dir, "initfail", LOOM_PLUGIN_FAILED,
		      "init failed: fake device did not answer");
	assert_record(f->dir, "score0", LOOM_PLUGIN_NOT_APPLICABLE,
		      "no fake hardware here");
	assert_record(f->dir, "undef", LOOM_PLUGIN_FAILED,
		      "undefined symbol fake_undefined_function");
	assert_record(f->dir, "nodep", LOOM_PLUGIN_FAILED,
		      "missing library libloom-fakedep.so.0");
	assert_record(f->dir, "newer", LOOM_PLUGIN_FAILED,
		      "needs a newer libloom (LOOM_9.9)");
	assert_record(f->dir, "junk", LOOM_PLUGIN_FAILED, "not an ELF file");
	assert_record(f->dir, "misnamed", LOOM_PLUGIN_FAILED,
		      "descriptor name 'other' differs from the file name "
		      "'misnamed'");

	/* Only the good plugin is registered, with its device. */
	g_assert_cmpuint(loom_reg_count(), ==, 1);
	g_assert_nonnull(loom_dev_by_name("good0"));
	g_assert_null(loom_reg_by_name("nomethod"));
	g_assert_null(loom_dev_by_name("nomethod0"));
	g_free(junk);
}

static void test_load_path(struct fixture *f, gconstpointer data)
{
	struct loom_plugin_info info;
	loom_reg_t *reg = NULL;
	char *good = path_in(f->dir, "good");
	char *again = path_in(f->dir2, "good");
	char *nowhere = path_in(f->dir2, "absent");
	char *score0 = path_in(f->dir, "score0");

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "score0");
	add_plugin(f->dir2, "good");
	/* Loads whatever LOOM_BACKENDS says. */
	setenv("LOOM_BACKENDS", "^good", 1);
	g_assert_cmpint(loom_load_path(good, &reg), ==, LOOM_OK);
	g_assert_nonnull(reg);
	g_assert_true(loom_reg_by_name("good") == reg);

	g_assert_cmpint(loom_load_path(again, &reg), ==, LOOM_E_PLUGIN);
	g_assert_null(reg);
	info = find_record(again);
	g_assert_cmpint(info.state, ==, LOOM_PLUGIN_FAILED);
	{
		char *want = g_strdup_printf("duplicate name: 'good' is "
					     "already loaded from %s",
					     good);

		g_assert_cmpstr(info.reason, ==, want);
		g_assert_nonnull(strstr(loom_error_message(), want));
		g_free(want);
	}

	g_assert_cmpint(loom_load_path(nowhere, NULL), ==, LOOM_E_NOT_FOUND);
	info = find_record(nowhere);
	g_assert_cmpstr(info.reason, ==, "not found");

	g_assert_cmpint(loom_load_path(score0, NULL), ==,
			LOOM_E_NOT_APPLICABLE);
	g_assert_nonnull(strstr(loom_error_message(), "no fake hardware here"));
	g_assert_cmpint(loom_load_path(NULL, NULL), ==, LOOM_E_INVAL);
	g_assert_cmpuint(loom_reg_count(), ==, 1);
	g_free(good);
	g_free(again);
	g_free(nowhere);
	g_free(score0);
}

static void test_override(struct fixture *f, gconstpointer data)
{
	char *path = g_strdup_printf("%s:%s", f->dir, f->dir2);
	char *first = path_in(f->dir, "good");
	char *want = g_strdup_printf("overridden by %s", first);
	loom_reg_t *reg;

	add_plugin(f->dir, "good");
	add_plugin(f->dir2, "good");
	add_plugin(f->dir2, "fgpu");
	setenv("LOOM_PLUGIN_PATH", path, 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir2, "good", LOOM_PLUGIN_SKIPPED, want);
	assert_record(f->dir2, "fgpu", LOOM_PLUGIN_LOADED, "");
	g_assert_cmpuint(loom_search_path_count(), ==, 2);

	/* Idempotent: nothing more is loaded or recorded. */
	{
		size_t n = loom_plugin_count();

		g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
		g_assert_cmpuint(loom_plugin_count(), ==, n);
	}
	/* A static plugin of a name already loaded is refused. */
	reg = (loom_reg_t *)1;
	g_assert_cmpint(loom_load_static(&fake_static_desc, &reg), ==,
			LOOM_OK);
	g_assert_nonnull(reg);
	g_assert_cmpint(loom_load_static(&fake_static_desc, &reg), ==,
			LOOM_E_PLUGIN);
	g_assert_null(reg);
	g_assert_nonnull(strstr(loom_error_message(),
				"duplicate name: 'static' is already loaded "
				"from (static)"));
	g_free(path);
	g_free(first);
	g_free(want);
}

static void test_variants(struct fixture *f, gconstpointer data)
{
	struct loom_plugin_info info;
	char *b = path_in(f->dir, "var-b");

	add_plugin(f->dir, "var-a");
	add_plugin(f->dir, "var-b");
	add_plugin(f->dir, "var-c");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "var-a", LOOM_PLUGIN_SKIPPED,
		      "variant loom-var-b.so scores higher");
	assert_record(f->dir, "var-b", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "var-c", LOOM_PLUGIN_NOT_APPLICABLE,
		      "no fake hardware here");
	info = find_record(b);
	g_assert_cmpint(info.score, ==, 5);
	g_assert_cmpstr(info.name, ==, "var");
	g_assert_nonnull(loom_dev_by_name("var0"));
	g_free(b);
}

/* The out-of-tree plugin template loads and makes its device. */
static void test_template(struct fixture *f, gconstpointer data)
{
	add_plugin(f->dir, "my");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "my", LOOM_PLUGIN_LOADED, "");
	g_assert_nonnull(loom_dev_by_name("my0"));
}

/* The best variant's init fails: the next best is loaded in its place,
 * and the rest are skipped for it. */
static void test_variant_fallback(struct fixture *f, gconstpointer data)
{
	struct loom_plugin_info info;
	char *d = path_in(f->dir, "var-d");

	add_plugin(f->dir, "var-a");
	add_plugin(f->dir, "var-b");
	add_plugin(f->dir, "var-d");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "var-d", LOOM_PLUGIN_FAILED,
		      "init failed: fake device did not answer");
	info = find_record(d);
	g_assert_cmpint(info.score, ==, 9);
	assert_record(f->dir, "var-b", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "var-a", LOOM_PLUGIN_SKIPPED,
		      "variant loom-var-b.so scores higher");
	g_assert_nonnull(loom_dev_by_name("var0"));
	g_free(d);
}

/* A later directory's file of a name is overridden by the variant that
 * loaded, not by the best one whose init failed. */
static void test_override_fallback(struct fixture *f, gconstpointer data)
{
	char *path = g_strdup_printf("%s:%s", f->dir, f->dir2);
	char *b = path_in(f->dir, "var-b");
	char *want = g_strdup_printf("overridden by %s", b);

	add_plugin(f->dir, "var-b");
	add_plugin(f->dir, "var-d");
	add_plugin(f->dir2, "var-a");
	add_plugin(f->dir2, "good");
	setenv("LOOM_PLUGIN_PATH", path, 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "var-d", LOOM_PLUGIN_FAILED,
		      "init failed: fake device did not answer");
	assert_record(f->dir, "var-b", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir2, "var-a", LOOM_PLUGIN_SKIPPED, want);
	assert_record(f->dir2, "good", LOOM_PLUGIN_LOADED, "");
	g_free(path);
	g_free(b);
	g_free(want);
}

/* ------------------------------------------------------------------------
 * LOOM_BACKENDS.
 */

static void test_order(struct fixture *f, gconstpointer data)
{
	static const char *const def[] = { "fgpu0", "good0", "fmeta0" };
	static const char *const only[] = { "good0", "fgpu0" };

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "fgpu");
	add_plugin(f->dir, "fmeta");
	/* Default: GPUs, then CPUs, meta last. */
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(def, 3);
	g_assert_true(loom_reg_get(0) == loom_reg_by_name("fgpu"));
	g_assert_null(loom_reg_get(3));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);

	/* An include list loads only those, in its order. */
	setenv("LOOM_BACKENDS", "good , fgpu", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_dev_order(only, 2);
	assert_record(f->dir, "fmeta", LOOM_PLUGIN_EXCLUDED,
		      "excluded by LOOM_BACKENDS");
}

static void test_exclude(struct fixture *f, gconstpointer data)
{
	add_plugin(f->dir, "good");
	add_plugin(f->dir, "fgpu");
	/* Control: loading writes the mark. */
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_true(marked(f, "good"));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	g_unlink(f->marker);
	g_assert_false(marked(f, "good"));

	setenv("LOOM_BACKENDS", "^good", 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_EXCLUDED,
		      "excluded by LOOM_BACKENDS");
	assert_record(f->dir, "fgpu", LOOM_PLUGIN_LOADED, "");
	/* Excluded files are never opened. */
	g_assert_false(marked(f, "good"));
	g_assert_true(marked(f, "fgpu"));
	g_assert_null(loom_dev_by_name("good0"));
	g_assert_nonnull(loom_dev_by_name("fgpu0"));
}


/* ------------------------------------------------------------------------
 * loom-info, run as a user would.
 */

static void test_info(struct fixture *f, gconstpointer data)
{
	char *out, *err, *want;
	const char *pgpu, *good;

	add_plugin(f->dir, "good");
	add_plugin(f->dir, "score0");
	add_plugin(f->dir, "pgpu");
	g_assert_cmpint(run_info("--json", &out, &err), ==, 0);
	/* The rank in each device's entry; the ranked device first. */
	pgpu = strstr(out, "{\"name\": \"pgpu0\", \"type\": \"gpu\", "
			   "\"rank\": \"primary\", ");
	good = strstr(out, "{\"name\": \"good0\"");
	g_assert_nonnull(pgpu);
	g_assert_nonnull(good);
	g_assert_true(pgpu < good);
	want = g_strdup_printf("{\"name\": \"good\", "
			       "\"file\": \"%s/loom-good.so\", "
			       "\"state\": \"loaded\", \"reason\": \"\"",
			       f->dir);
	g_assert_nonnull(strstr(out, want));
	g_assert_nonnull(strstr(out, "\"state\": \"not-applicable\", "
				     "\"reason\": \"no fake hardware here\""));
	g_assert_nonnull(strstr(out, "{\"name\": \"good0\", \"type\": \"cpu\", "
				     "\"rank\": \"none\", "
				     "\"plugin\": \"good\", "
				     "\"memory_total\": 1073741824, "
				     "\"memory_free\": 536870912"));
	g_assert_nonnull(strstr(out, "\"entry_points\": [\"set_tensor_2d\", "
				     "\"get_tensor_2d\"], \"features\": {}"));
	g_assert_nonnull(strstr(out, "\"search_path\": ["));
	g_assert_cmpstr(err, ==, "");
	g_free(want);
	g_free(out);
	g_free(err);

	setenv("LOOM_BACKENDS", "^good", 1);
	g_assert_cmpint(run_info("--json", &out, &err), ==, 0);
	g_assert_nonnull(strstr(out, "\"state\": \"excluded\", "
				     "\"reason\": "
				     "\"excluded by LOOM_BACKENDS\""));
	g_assert_null(strstr(out, "good0"));
	g_free(out);
	g_free(err);

	/* A backend that cannot load: the report, then the reason on a line
	 * of its own on stderr; in JSON also under "error". */
	setenv("LOOM_BACKENDS", "nosuch", 1);
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 1);
	g_assert_true(g_str_has_prefix(err, "loom-info: error: LOOM_BACKENDS: "
					    "backend 'nosuch' not found"));
	g_assert_true(g_str_has_suffix(err, "\n"));
	g_assert_true(strchr(err, '\n') == err + strlen(err) - 1);
	g_assert_nonnull(strstr(out, "Search path:"));
	g_free(out);
	g_free(err);
	g_assert_cmpint(run_info("--json", &out, &err), ==, 1);
	g_assert_true(g_str_has_prefix(out, "{\"error\": \"LOOM_BACKENDS: "
					    "backend 'nosuch' not found"));
	g_assert_true(g_str_has_suffix(out, "}\n"));
	g_assert_true(g_str_has_prefix(err, "loom-info: error: "));
	g_free(out);
	g_free(err);

	/* File names need not be UTF-8; the JSON must be all the same. */
	unsetenv("LOOM_BACKENDS");
	{
		char *target = g_build_filename(fake_libs(), "loom-good.so",
						NULL);
		char *link = g_build_filename(f->dir, "loom-b\xff\xc3.so",
					      NULL);

		g_assert_cmpint(symlink(target, link), ==, 0);
		g_free(target);
		g_free(link);
	}
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 0);
	g_assert_nonnull(strstr(out, "  pgpu0\n    type:          gpu\n"
				     "    rank:          primary\n"));
	g_assert_nonnull(strstr(out, "  good0\n    type:          cpu\n"
				     "    rank:          none\n"));
	g_free(out);
	g_free(err);
	g_assert_cmpint(run_info("--json", &out, &err), ==, 0);
	g_assert_true(g_utf8_validate(out, -1, NULL));
	g_assert_nonnull(strstr(out, "\"name\": \"b\\ufffd\\ufffd\""));
	g_assert_nonnull(strstr(out, "\"error\": null"));
	g_free(out);
	g_free(err);

	/* LOOM_LOG: the default callback writes to stderr from its level. */
	unsetenv("LOOM_BACKENDS");
	setenv("LOOM_LOG", "info", 1);
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 0);
	g_assert_nonnull(strstr(err, "loom: info: plugin good: loaded from "));
	g_assert_null(strstr(err, "loom: debug:"));
	g_free(out);
	g_free(err);
	setenv("LOOM_LOG", "none", 1);
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 0);
	g_assert_cmpstr(err, ==, "");
	g_free(out);
	g_free(err);
	unsetenv("LOOM_LOG");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);

#define F(path, fn)                                                          \
	g_test_add(path, struct fixture, NULL, fixture_setup, fn,           \
		   fixture_teardown)
	F("/loader/good", test_good);
	F("/loader/broken", test_broken);
	F("/loader/load-path", test_load_path);
	F("/loader/override", test_override);
	F("/loader/variants", test_variants);
	F("/loader/variant-fallback", test_variant_fallback);
	F("/loader/override-fallback", test_override_fallback);
	F("/loader/elf", test_elf);
	F("/loader/elf-fields", test_elf_fields);
	F("/loader/entries", test_entries);
	F("/loader/unreadable", test_unreadable);
	F("/loader/template", test_template);
	F("/loader/backends/order", test_order);
	F("/loader/backends/exclude", test_exclude);
	F("/loader/backends/requested", test_requested);
	g_test_add_func("/loader/abi/rule", test_abi_rule);
	g_test_add_func("/loader/abi/desc-size", test_abi_desc_size);
	F("/loader/abi/static", test_abi_static);
	F("/loader/abi/old-plugin", test_abi_old_plugin);
	F("/loader/ranks/order", test_rank_order);
	F("/loader/ranks/third-party", test_rank_third_party);
	F("/loader/ranks/meta", test_rank_meta);
	F("/loader/ranks/bad", test_rank_bad);
	F("/loader/secure", test_secure);
	F("/loader/reload", test_reload);
	F("/loader/loom-info", test_info);
	F("/loader/threads", test_threads);
	F("/loader/enumerate-while-loading", test_enumerate_while_loading);
	F("/iface/async-events", test_async_events);
	add_iface_tests();
	return g_test_run();
}
