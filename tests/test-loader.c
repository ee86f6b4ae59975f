/* SPDX-License-Identifier: MIT */
/* test-loader.c - the plugin loader and the backend interfaces: every
 * broken fake plugin with the exact state and reason a user sees,
 * LOOM_BACKENDS, variants, the ABI version rule, device ranks and order,
 * secure execution, unloading, and the checks the core makes before data
 * reaches a plugin (caller errors never abort). */
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

extern const struct loom_plugin_desc fake_static_desc;

/* ------------------------------------------------------------------------
 * Secure execution, interposed: libloom's calls to secure_getenv() and
 * getauxval() resolve to these definitions in the executable.
 */
static int pretend_secure;

__attribute__((visibility("default"))) char *
secure_getenv(const char *name)
{
	return pretend_secure ? NULL : getenv(name);
}

__attribute__((visibility("default"))) unsigned long
getauxval(unsigned long type)
{
	static unsigned long (*real)(unsigned long);

	if (type == AT_SECURE && pretend_secure)
		return 1;
	if (!real)
		real = (unsigned long (*)(unsigned long))dlsym(RTLD_NEXT,
							     "getauxval");
	return real ? real(type) : 0;
}

/* ------------------------------------------------------------------------
 * Log capture.
 */
static GString *logged;

static void capture_log(enum loom_log_level level, const char *msg,
			void *userdata)
{
	g_string_append_printf(logged, "%d %s\n", (int)level, msg);
}

/* ------------------------------------------------------------------------
 * A hermetic plugin directory per test.
 */
struct fixture {
	char *dir;   /* LOOM_PLUGIN_PATH for the test */
	char *dir2;  /* a second directory, when needed */
	char *marker;
};

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

/* Puts plugin `name` built in directory libs into dir (a symlink). */
static void link_plugin(const char *dir, const char *libs, const char *name)
{
	char *file = g_strdup_printf("loom-%s.so", name);
	char *target = g_build_filename(libs, file, NULL);
	char *link = g_build_filename(dir, file, NULL);

	g_assert_true(g_file_test(target, G_FILE_TEST_EXISTS));
	g_assert_cmpint(symlink(target, link), ==, 0);
	g_free(file);
	g_free(target);
	g_free(link);
}

/* Puts fake plugin `name` into dir. */
static void add_plugin(const char *dir, const char *name)
{
	link_plugin(dir, fake_libs(), name);
}

/* Puts a plugin of the build tree into dir: `name` built in `subdir`
 * ("plugins/cpu", "tests/acme"). */
static void add_built(const char *dir, const char *subdir, const char *name)
{
	const char *b = g_getenv("LOOM_TEST_BUILDDIR");
	char *libs = g_build_filename(b ? b : ".", subdir, ".libs", NULL);

	link_plugin(dir, libs, name);
	g_free(libs);
}

static char *path_in(const char *dir, const char *name)
{
	char *file = g_strdup_printf("loom-%s.so", name);
	char *path = g_build_filename(dir, file, NULL);

	g_free(file);
	return path;
}

static void fixture_setup(struct fixture *f, gconstpointer data)
{
	GError *err = NULL;

	f->dir = g_dir_make_tmp("loom-loader-XXXXXX", &err);
	g_assert_no_error(err);
	f->dir2 = g_dir_make_tmp("loom-loader-XXXXXX", &err);
	g_assert_no_error(err);
	f->marker = g_build_filename(f->dir2, "marker", NULL);
	setenv("LOOM_PLUGIN_PATH", f->dir, 1);
	unsetenv("LOOM_BACKENDS");
	setenv("LOOM_TEST_MARKER", f->marker, 1);
	logged = g_string_new("");
	loom_log_set_callback(capture_log, NULL);
	pretend_secure = 0;
}

static void remove_dir(const char *dir)
{
	GDir *d = g_dir_open(dir, 0, NULL);
	const char *name;

	if (!d)
		return;
	while ((name = g_dir_read_name(d))) {
		char *p = g_build_filename(dir, name, NULL);

		g_unlink(p);
		g_free(p);
	}
	g_dir_close(d);
	g_rmdir(dir);
}

static void fixture_teardown(struct fixture *f, gconstpointer data)
{
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	pretend_secure = 0;
	loom_log_set_callback(NULL, NULL);
	g_string_free(logged, TRUE);
	logged = NULL;
	unsetenv("LOOM_PLUGIN_PATH");
	unsetenv("LOOM_BACKENDS");
	unsetenv("LOOM_TEST_MARKER");
	remove_dir(f->dir);
	remove_dir(f->dir2);
	g_free(f->dir);
	g_free(f->dir2);
	g_free(f->marker);
}

/* The record of file `path`; fails the test when there is none. */
static struct loom_plugin_info find_record(const char *path)
{
	struct loom_plugin_info info;
	size_t n = loom_plugin_count();

	for (size_t i = 0; i < n; i++) {
		g_assert_cmpint(loom_plugin_info(i, &info), ==, LOOM_OK);
		if (strcmp(info.file, path) == 0)
			return info;
	}
	g_error("no record for %s", path);
	return info;
}

static void assert_record(const char *dir, const char *name,
			  enum loom_plugin_state state, const char *reason)
{
	char *path = path_in(dir, name);
	struct loom_plugin_info info = find_record(path);

	g_assert_cmpstr(loom_plugin_state_name(info.state), ==,
			loom_plugin_state_name(state));
	g_assert_cmpstr(info.reason, ==, reason);
	g_free(path);
}

/* Whether the marker file says plugin `name` was opened. */
static bool marked(const struct fixture *f, const char *name)
{
	char *text = NULL;
	bool found = false;

	if (g_file_get_contents(f->marker, &text, NULL, NULL)) {
		char **lines = g_strsplit(text, "\n", -1);

		for (char **l = lines; *l; l++)
			found |= strcmp(*l, name) == 0;
		g_strfreev(lines);
	}
	g_free(text);
	return found;
}

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

static void assert_dev_order(const char *const *want, size_t n)
{
	g_assert_cmpuint(loom_dev_count(), ==, n);
	for (size_t i = 0; i < n; i++)
		g_assert_cmpstr(loom_dev_name(loom_dev_get(i)), ==, want[i]);
	g_assert_null(loom_dev_get(n));
}

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
 * The ABI version rule and device ranks.
 */

/* The rule itself, for cores of other versions than this one: a plugin
 * built against 1.1 is refused by a 1.0 core, naming both versions; a 1.0
 * plugin loads into a 1.1 core. */
static void test_abi_rule(void)
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

static void test_abi_desc_size(void)
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
static void test_abi_static(struct fixture *f, gconstpointer data)
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
static void test_abi_old_plugin(struct fixture *f, gconstpointer data)
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
static void test_rank_order(struct fixture *f, gconstpointer data)
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
static void test_rank_third_party(struct fixture *f, gconstpointer data)
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
static void test_rank_meta(struct fixture *f, gconstpointer data)
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
static void test_rank_bad(struct fixture *f, gconstpointer data)
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

static void test_requested(struct fixture *f, gconstpointer data)
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

static void test_secure(struct fixture *f, gconstpointer data)
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

static void test_reload(struct fixture *f, gconstpointer data)
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
static void test_async_events(struct fixture *f, gconstpointer data)
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
static void test_threads(struct fixture *f, gconstpointer data)
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

static void test_enumerate_while_loading(struct fixture *f,
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

/* ------------------------------------------------------------------------
 * loom-info, run as a user would.
 */

static int run_info(const char *arg, char **out, char **err)
{
	const char *b = g_getenv("LOOM_TEST_BUILDDIR");
	char *tool = g_build_filename(b ? b : ".", "tools", "loom-info", NULL);
	char *argv[] = { tool, (char *)arg, NULL };
	GError *error = NULL;
	int status;

	g_assert_true(g_spawn_sync(NULL, argv, NULL, G_SPAWN_DEFAULT, NULL,
				   NULL, out, err, &status, &error));
	g_assert_no_error(error);
	g_free(tool);
	g_assert_true(WIFEXITED(status));
	return WEXITSTATUS(status);
}

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

/* ------------------------------------------------------------------------
 * Files that are not whole plugins for this machine: refused before
 * dlopen maps them (a truncated file would fault there), each with its
 * reason, and the good plugin loads beside them.
 */

/* The built CPU plugin's bytes, or NULL (the test then skips). */
static guint8 *cpu_plugin(gsize *len)
{
	const char *b = g_getenv("LOOM_TEST_BUILDDIR");
	char *file = g_build_filename(b ? b : ".", "plugins", "cpu", ".libs",
				      "loom-cpu.so", NULL);
	gchar *data = NULL;

	if (!g_file_get_contents(file, &data, len, NULL))
		data = NULL;
	g_free(file);
	return (guint8 *)data;
}

static void write_plugin(const char *dir, const char *name,
			 const void *data, gsize len)
{
	char *path = path_in(dir, name);

	g_assert_true(g_file_set_contents(path, data, (gssize)len, NULL));
	g_free(path);
}

/* What the loader must say of the first cut bytes of a whole plugin of
 * full bytes, worked out from that plugin's own headers: the first table
 * or segment, in file-header order, that the cut leaves incomplete. */
static char *truncated_reason(const guint8 *data, gsize cut)
{
	ElfW(Ehdr) eh;

	memcpy(&eh, data, sizeof(eh));
	if (cut < sizeof(eh))
		return g_strdup_printf("truncated: the ELF header needs %zu "
				       "bytes, the file has %zu",
				       sizeof(eh), (size_t)cut);
	if (eh.e_phoff + (gsize)eh.e_phnum * sizeof(ElfW(Phdr)) > cut)
		return g_strdup_printf("truncated: program headers at 0x%llx "
				       "end past the end of the file (%zu "
				       "bytes)",
				       (unsigned long long)eh.e_phoff,
				       (size_t)cut);
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		ElfW(Phdr) ph;

		memcpy(&ph, data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_filesz && ph.p_offset + ph.p_filesz > cut)
			return g_strdup_printf(
				"truncated: segment at 0x%llx (0x%llx bytes) "
				"ends past the end of the file (%zu bytes)",
				(unsigned long long)ph.p_offset,
				(unsigned long long)ph.p_filesz, (size_t)cut);
	}
	if (eh.e_shoff + (gsize)eh.e_shnum * sizeof(ElfW(Shdr)) > cut)
		return g_strdup_printf("truncated: section headers at 0x%llx "
				       "end past the end of the file (%zu "
				       "bytes)",
				       (unsigned long long)eh.e_shoff,
				       (size_t)cut);
	return NULL;
}

/* An offset inside the last segment with bytes in the file, from the
 * plugin's own headers (where it lies depends on the plugin's size). */
static gsize last_segment_middle(const guint8 *data)
{
	ElfW(Ehdr) eh;
	gsize mid = 0;

	memcpy(&eh, data, sizeof(eh));
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		ElfW(Phdr) ph;

		memcpy(&ph, data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_filesz && ph.p_offset + ph.p_filesz / 2 > mid)
			mid = ph.p_offset + ph.p_filesz / 2;
	}
	return mid;
}

static void test_elf(struct fixture *f, gconstpointer data)
{
	gsize len;
	guint8 *cpu = cpu_plugin(&len);
	gsize cuts[] = { 10, 64, 4096, 16384, 0, 0 };
	const char *kinds[] = { "the ELF header", "program headers",
				"segment", "segment", "segment",
				"section headers" };
	char *reasons[G_N_ELEMENTS(cuts)];
	char *out, *err;
	guint8 *copy;

	if (!cpu) {
		g_test_skip("the CPU plugin is not built");
		return;
	}
	cuts[4] = last_segment_middle(cpu);
	add_plugin(f->dir, "good");
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
		gsize cut = cuts[i] ? cuts[i] : len - 1;
		char *name = g_strdup_printf("cut%zu", (size_t)cut);

		g_assert_cmpuint(cut, <, len);
		write_plugin(f->dir, name, cpu, cut);
		reasons[i] = truncated_reason(cpu, cut);
		/* Each cut is caught by the check it is meant to test. */
		g_assert_nonnull(reasons[i]);
		g_assert_nonnull(strstr(reasons[i], kinds[i]));
		g_free(name);
	}
	/* Another machine, another class, another ELF type, not ELF. */
	copy = g_memdup2(cpu, len);
#if defined(__aarch64__)
	copy[18] = EM_X86_64;
#else
	copy[18] = EM_AARCH64;
#endif
	copy[19] = 0;
	write_plugin(f->dir, "machine", copy, len);
	memcpy(copy, cpu, len);
	copy[EI_CLASS] = ELFCLASS32;
	write_plugin(f->dir, "class32", copy, len);
	memcpy(copy, cpu, len);
	copy[16] = ET_EXEC;
	copy[17] = 0;
	write_plugin(f->dir, "exec", copy, len);
	write_plugin(f->dir, "x", "not a plugin\n", 13);
	/* Control: the whole file, copied, loads. */
	write_plugin(f->dir, "cpu", cpu, len);

	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "cpu", LOOM_PLUGIN_LOADED, "");
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
		gsize cut = cuts[i] ? cuts[i] : len - 1;
		char *name = g_strdup_printf("cut%zu", (size_t)cut);

		assert_record(f->dir, name, LOOM_PLUGIN_FAILED, reasons[i]);
		g_free(name);
	}
	assert_record(f->dir, "exec", LOOM_PLUGIN_FAILED,
		      "not a shared library (ELF type 2)");
	assert_record(f->dir, "x", LOOM_PLUGIN_FAILED, "not an ELF file");
#if defined(__x86_64__) && defined(__LP64__)
	assert_record(f->dir, "machine", LOOM_PLUGIN_FAILED,
		      "wrong architecture: aarch64 (64-bit, little-endian); "
		      "libloom is x86-64 (64-bit, little-endian)");
	assert_record(f->dir, "class32", LOOM_PLUGIN_FAILED,
		      "wrong architecture: x86-64 (32-bit, little-endian); "
		      "libloom is x86-64 (64-bit, little-endian)");
#else
	{
		char *path = path_in(f->dir, "machine");

		g_assert_true(g_str_has_prefix(find_record(path).reason,
					       "wrong architecture: "));
		g_free(path);
	}
#endif
	loom_unload_all();

	/* loom-info lives through them all and shows why. */
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 0);
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++)
		g_assert_nonnull(strstr(out, reasons[i]));
	g_assert_nonnull(strstr(out, "not an ELF file"));
	g_free(out);
	g_free(err);
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++)
		g_free(reasons[i]);
	g_free(copy);
	g_free(cpu);
}

/* One field of a whole plugin's headers changed, each as dlopen would
 * trust it; the file is otherwise good.  Worked out from the plugin's
 * own headers (the build decides its layout). */
struct elf_image {
	guint8 *data;
	gsize len;
	ElfW(Ehdr) *eh;
};

/* Program header i, or the first of type (and with flag, when not 0):
 * its index into *index. */
static ElfW(Phdr) *elf_phdr(const struct elf_image *im, uint32_t type,
			    uint32_t flag, unsigned *index)
{
	for (unsigned i = 0; i < im->eh->e_phnum; i++) {
		ElfW(Phdr) *ph = (ElfW(Phdr) *)(im->data + im->eh->e_phoff) + i;

		if (ph->p_type == type && (!flag || (ph->p_flags & flag))) {
			*index = i;
			return ph;
		}
	}
	g_error("the CPU plugin has no segment of type %u", type);
	return NULL;
}

/* The dynamic entry of tag (the first), found in the file. */
static ElfW(Dyn) *elf_dyn(const struct elf_image *im, int64_t tag)
{
	unsigned i;
	ElfW(Phdr) *dyn = elf_phdr(im, PT_DYNAMIC, 0, &i);
	ElfW(Dyn) *d = (ElfW(Dyn) *)(im->data + dyn->p_offset);

	for (gsize k = 0; k < dyn->p_filesz / sizeof(*d); k++)
		if (d[k].d_tag == tag)
			return &d[k];
	g_error("the CPU plugin has no dynamic entry %lld", (long long)tag);
	return NULL;
}

/* Changes one field of im (a copy of the plugin) and returns the reason
 * the loader must give (the caller frees it). */
typedef char *(*elf_break_fn)(struct elf_image *im);

static char *break_memsz(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_LOAD, PF_W, &i);

	ph->p_memsz = 1;
	return g_strdup_printf("malformed: segment %u (PT_LOAD) holds 0x%llx "
			       "bytes of the file in 0x1 bytes of memory", i,
			       (unsigned long long)ph->p_filesz);
}

static char *break_align(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_LOAD, PF_W, &i);

	ph->p_align = 3 * (uint64_t)sysconf(_SC_PAGESIZE);
	return g_strdup_printf("malformed: segment %u (PT_LOAD) is aligned to "
			       "0x%llx, not a power of two that is a multiple "
			       "of the page (0x%llx)", i,
			       (unsigned long long)ph->p_align,
			       (unsigned long long)sysconf(_SC_PAGESIZE));
}

static char *break_congruence(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_LOAD, PF_X, &i);

	ph->p_offset += 8;
	return g_strdup_printf("malformed: segment %u (PT_LOAD) at address "
			       "0x%llx and file offset 0x%llx: they differ "
			       "modulo its alignment 0x%llx", i,
			       (unsigned long long)ph->p_vaddr,
			       (unsigned long long)ph->p_offset,
			       (unsigned long long)ph->p_align);
}

/* The writable segment moved onto the one before it. */
static char *break_overlap(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *w = elf_phdr(im, PT_LOAD, PF_W, &i), *prev = w - 1;

	g_assert_cmpuint(prev->p_type, ==, PT_LOAD);
	w->p_vaddr = prev->p_vaddr + prev->p_memsz - 0x10;
	w->p_offset = w->p_vaddr % w->p_align +
		      w->p_offset / w->p_align * w->p_align;
	return g_strdup_printf("malformed: segment %u (PT_LOAD) at 0x%llx "
			       "starts before the loadable segment before it "
			       "ends (0x%llx)", i,
			       (unsigned long long)w->p_vaddr,
			       (unsigned long long)(prev->p_vaddr +
						    prev->p_memsz));
}

static char *break_dynamic_outside(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_DYNAMIC, 0, &i);

	ph->p_vaddr = 0x40000000;
	return g_strdup_printf("malformed: segment %u (PT_DYNAMIC) at "
			       "0x40000000 (0x%llx bytes) lies outside the "
			       "loadable segments", i,
			       (unsigned long long)ph->p_memsz);
}

static char *break_dynamic_size(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_DYNAMIC, 0, &i);

	ph->p_filesz -= 4;
	ph->p_memsz -= 4;
	return g_strdup_printf("malformed: the dynamic section is 0x%llx "
			       "bytes, not whole entries of %zu",
			       (unsigned long long)ph->p_filesz,
			       sizeof(ElfW(Dyn)));
}

static char *break_tls(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_TLS, 0, &i);

	ph->p_memsz = ph->p_filesz - 1;
	return g_strdup_printf("malformed: segment %u (PT_TLS) holds 0x%llx "
			       "bytes of the file in 0x%llx bytes of memory",
			       i, (unsigned long long)ph->p_filesz,
			       (unsigned long long)ph->p_memsz);
}

static char *break_note(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_NOTE, 0, &i);

	ph->p_vaddr += 0x40000000;
	return g_strdup_printf("malformed: segment %u (PT_NOTE) at 0x%llx "
			       "(0x%llx bytes) lies outside the loadable "
			       "segments", i, (unsigned long long)ph->p_vaddr,
			       (unsigned long long)ph->p_memsz);
}

/* Every DT_NULL of the section (it is padded with them) made another
 * entry. */
static char *break_dt_null(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *dyn = elf_phdr(im, PT_DYNAMIC, 0, &i);
	ElfW(Dyn) *d = (ElfW(Dyn) *)(im->data + dyn->p_offset);

	for (gsize k = 0; k < dyn->p_filesz / sizeof(*d); k++)
		if (d[k].d_tag == DT_NULL)
			d[k].d_tag = DT_DEBUG;
	return g_strdup("malformed: the dynamic section has no DT_NULL at "
			"its end");
}

static char *break_strtab(struct elf_image *im)
{
	ElfW(Dyn) *d = elf_dyn(im, DT_STRTAB);

	d->d_un.d_ptr = 0x40000000;
	return g_strdup_printf("malformed: DT_STRTAB at 0x40000000 (%llu "
			       "bytes) lies outside the loadable segments",
			       (unsigned long long)
				       elf_dyn(im, DT_STRSZ)->d_un.d_val);
}

static char *break_relaent(struct elf_image *im)
{
	elf_dyn(im, DT_RELAENT)->d_un.d_val = 0;
	return g_strdup_printf("malformed: DT_RELAENT is 0, not %zu",
			       sizeof(ElfW(Rela)));
}

static char *break_pltrel(struct elf_image *im)
{
	elf_dyn(im, DT_PLTREL)->d_un.d_val = DT_STRTAB;
	return g_strdup_printf("malformed: DT_PLTREL is %d, neither DT_REL "
			       "nor DT_RELA", DT_STRTAB);
}

static char *break_needed(struct elf_image *im)
{
	uint64_t strsz = elf_dyn(im, DT_STRSZ)->d_un.d_val;

	elf_dyn(im, DT_NEEDED)->d_un.d_val = strsz;
	return g_strdup_printf("malformed: DT_NEEDED names the string at "
			       "%llu, past the string table's %llu bytes",
			       (unsigned long long)strsz,
			       (unsigned long long)strsz);
}

static char *break_strsz(struct elf_image *im)
{
	uint64_t *strsz = &elf_dyn(im, DT_STRSZ)->d_un.d_val;

	/* The table's last byte is then the last of its last name. */
	*strsz -= 1;
	return g_strdup_printf("malformed: the string table (%llu bytes) "
			       "does not end with a NUL",
			       (unsigned long long)*strsz);
}

static void test_elf_fields(struct fixture *f, gconstpointer data)
{
	static const struct {
		const char *name;
		elf_break_fn fn;
	} cases[] = {
		{ "memsz", break_memsz },
		{ "align", break_align },
		{ "congruence", break_congruence },
		{ "overlap", break_overlap },
		{ "dynamic-outside", break_dynamic_outside },
		{ "dynamic-size", break_dynamic_size },
		{ "tls", break_tls },
		{ "note", break_note },
		{ "dt-null", break_dt_null },
		{ "strtab", break_strtab },
		{ "relaent", break_relaent },
		{ "pltrel", break_pltrel },
		{ "needed", break_needed },
		{ "strsz", break_strsz },
	};
	char *reasons[G_N_ELEMENTS(cases)];
	gsize len;
	guint8 *cpu = cpu_plugin(&len);
	char *out, *err;

	if (!cpu) {
		g_test_skip("the CPU plugin is not built");
		return;
	}
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct elf_image im = { g_memdup2(cpu, len), len, NULL };

		im.eh = (ElfW(Ehdr) *)im.data;
		reasons[i] = cases[i].fn(&im);
		write_plugin(f->dir, cases[i].name, im.data, len);
		g_free(im.data);
	}
	write_plugin(f->dir, "cpu", cpu, len);

	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "cpu", LOOM_PLUGIN_LOADED, "");
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
		assert_record(f->dir, cases[i].name, LOOM_PLUGIN_FAILED,
			      reasons[i]);
	loom_unload_all();

	/* loom-info lives through them all and shows why. */
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 0);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_assert_nonnull(strstr(out, reasons[i]));
		g_free(reasons[i]);
	}
	g_free(out);
	g_free(err);
	g_free(cpu);
}

/* Entries named like plugins that are no files, and search directories
 * that cannot be read: each has a record with its reason. */
static void test_entries(struct fixture *f, gconstpointer data)
{
	char *missing = g_build_filename(f->dir2, "missing", NULL);
	char *loopdir = g_build_filename(f->dir2, "loop", NULL);
	char *path = g_strdup_printf("%s:%s:%s", f->dir, missing, loopdir);
	char *dang = path_in(f->dir, "dang");
	char *loop = path_in(f->dir, "loop");
	char *dir = path_in(f->dir, "dir");
	char *out, *err, *want;

	add_plugin(f->dir, "good");
	g_assert_cmpint(symlink("/nonexistent/loom-x.so", dang), ==, 0);
	g_assert_cmpint(symlink(loop, loop), ==, 0);
	g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
	g_assert_cmpint(symlink(loopdir, loopdir), ==, 0);
	setenv("LOOM_PLUGIN_PATH", path, 1);

	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "dang", LOOM_PLUGIN_FAILED,
		      "dangling symbolic link to /nonexistent/loom-x.so");
	assert_record(f->dir, "loop", LOOM_PLUGIN_FAILED,
		      "symbolic link loop");
	assert_record(f->dir, "dir", LOOM_PLUGIN_FAILED, "is a directory");
	{
		struct loom_plugin_info info = find_record(missing);

		g_assert_cmpstr(info.name, ==, "");
		g_assert_cmpint(info.state, ==, LOOM_PLUGIN_FAILED);
		g_assert_cmpstr(info.reason, ==, "plugin directory: not found");
		info = find_record(loopdir);
		g_assert_cmpint(info.state, ==, LOOM_PLUGIN_FAILED);
		g_assert_cmpstr(info.reason, ==,
				"plugin directory: symbolic link loop");
	}
	/* An explicit path says the same as a search. */
	g_assert_cmpint(loom_load_path(dang, NULL), ==, LOOM_E_NOT_FOUND);
	want = g_strdup_printf("plugin 'dang' (%s): dangling symbolic link to "
			       "/nonexistent/loom-x.so",
			       dang);
	g_assert_cmpstr(loom_error_message(), ==, want);
	g_free(want);
	loom_unload_all();

	g_assert_cmpint(run_info("--json", &out, &err), ==, 0);
	want = g_strdup_printf("{\"name\": \"\", \"file\": \"%s\", "
			       "\"state\": \"failed\", \"reason\": "
			       "\"plugin directory: not found\"",
			       missing);
	g_assert_nonnull(strstr(out, want));
	g_free(want);
	want = g_strdup_printf("{\"name\": \"dir\", \"file\": \"%s\", "
			       "\"state\": \"failed\", \"reason\": "
			       "\"is a directory\"",
			       dir);
	g_assert_nonnull(strstr(out, want));
	g_free(want);
	g_free(out);
	g_free(err);
	g_assert_cmpint(g_rmdir(dir), ==, 0);
	g_free(missing);
	g_free(loopdir);
	g_free(path);
	g_free(dang);
	g_free(loop);
	g_free(dir);
}

/* Whether the nobody user may read and enter path: asked by a child
 * that gives up root, since root's own access() says yes to anything. */
static gboolean nobody_reaches(const char *path)
{
	const uid_t nobody = 65534;
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setgid(nobody) != 0 ||
		    setuid(nobody) != 0)
			_exit(2);
		_exit(access(path, R_OK | X_OK) == 0 ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return FALSE;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A file and a search directory that cannot be read: "permission
 * denied", not "not found".  Root reads through mode 000, so as root the
 * test runs in a child that gives up root for the nobody user. */
static void test_unreadable(struct fixture *f, gconstpointer data)
{
	char *sub = g_build_filename(f->dir, "locked", NULL);
	char *path = g_strdup_printf("%s:%s", f->dir, sub);
	char *secret = path_in(f->dir, "secret");
	gsize len;
	guint8 *cpu;

	if (geteuid() == 0 && !g_test_subprocess()) {
		/* Asked here: a skip inside the child would read as a
		 * failure. */
		if (!nobody_reaches(fake_libs())) {
			g_test_skip("the build tree is not readable by nobody");
			goto out;
		}
		g_test_trap_subprocess(NULL, 0,
				       G_TEST_SUBPROCESS_INHERIT_STDERR);
		g_test_trap_assert_passed();
		goto out;
	}
	cpu = cpu_plugin(&len);
	if (!cpu) {
		g_test_skip("the CPU plugin is not built");
		goto out;
	}
	if (geteuid() == 0) {
		const uid_t nobody = 65534;

		g_assert_cmpint(chown(f->dir, nobody, nobody), ==, 0);
		g_assert_cmpint(chown(f->dir2, nobody, nobody), ==, 0);
		g_assert_cmpint(setgroups(0, NULL), ==, 0);
		g_assert_cmpint(setgid(nobody), ==, 0);
		g_assert_cmpint(setuid(nobody), ==, 0);
	}
	if (access(fake_libs(), R_OK | X_OK) != 0) {
		g_test_skip("the build tree is not readable by nobody");
		g_free(cpu);
		goto out;
	}
	add_plugin(f->dir, "good");
	write_plugin(f->dir, "secret", cpu, len);
	g_free(cpu);
	g_assert_cmpint(chmod(secret, 0), ==, 0);
	g_assert_cmpint(g_mkdir(sub, 0), ==, 0);
	if (access(secret, R_OK) == 0) {
		g_test_skip("mode 000 does not stop reads here");
		goto out_rmdir;
	}
	setenv("LOOM_PLUGIN_PATH", path, 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "secret", LOOM_PLUGIN_FAILED,
		      "permission denied");
	g_assert_cmpstr(find_record(sub).reason, ==,
			"plugin directory: permission denied");
out_rmdir:
	g_assert_cmpint(g_rmdir(sub), ==, 0);
out:
	g_free(sub);
	g_free(path);
	g_free(secret);
}

/* ------------------------------------------------------------------------
 * Interfaces: constructors check required slots and copy at most size.
 */

static const char *t_name(loom_reg_t *reg)
{
	return "tables";
}

static size_t t_count(loom_reg_t *reg)
{
	return 0;
}

static loom_dev_t *t_dev(loom_reg_t *reg, size_t i)
{
	return NULL;
}

static void *t_proc(loom_reg_t *reg, const char *name)
{
	return (void *)t_proc;
}

static void test_tables(void)
{
	struct loom_reg_iface ri = {
		.size = sizeof(ri),
		.get_name = t_name,
		.get_dev_count = t_count,
	};
	struct loom_dev_iface di = { .size = sizeof(di) };
	struct loom_buffer_type_iface bi = { .size = 0 };
	loom_reg_t *reg = (loom_reg_t *)1;
	loom_dev_t *dev = (loom_dev_t *)1;
	loom_buffer_type_t *buft = (loom_buffer_type_t *)1;

	g_assert_cmpint(loom_reg_new(&ri, NULL, &reg), ==, LOOM_E_PLUGIN);
	g_assert_null(reg);
	g_assert_cmpstr(loom_error_message(), ==,
			"reg 'tables': missing required method get_dev");
	g_assert_cmpint(loom_reg_new(NULL, NULL, &reg), ==, LOOM_E_INVAL);

	/* A table from an older plugin: slots past size read NULL. */
	ri.get_dev = t_dev;
	ri.get_proc_address = t_proc;
	ri.size = offsetof(struct loom_reg_iface, get_proc_address);
	g_assert_cmpint(loom_reg_new(&ri, NULL, &reg), ==, LOOM_OK);
	g_assert_null(loom_reg_proc_address(reg, "anything"));

	g_assert_cmpint(loom_dev_new(reg, &di, NULL, &dev), ==, LOOM_E_PLUGIN);
	g_assert_null(dev);
	g_assert_cmpstr(loom_error_message(), ==,
			"device: missing required method get_name");
	g_assert_cmpint(loom_buffer_type_new(reg, NULL, &bi, NULL, &buft), ==,
			LOOM_E_PLUGIN);
	g_assert_null(buft);
	g_assert_nonnull(strstr(loom_error_message(), "interface size 0"));
	g_assert_cmpint(loom_dev_new(NULL, &di, NULL, &dev), ==, LOOM_E_INVAL);

	/* The reg was never registered; it is the test's to forget.  Load
	 * and unload to make sure the registry does not know it. */
	g_assert_cmpuint(loom_reg_count(), ==, 0);
	free(reg);
}

/* ------------------------------------------------------------------------
 * Data crossing the interface (the statically registered fake device).
 */

struct data_fixture {
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	struct fake_control *ctl;
	loom_ctx_t *ctx;
};

static void data_setup(struct data_fixture *d, gconstpointer unused)
{
	fake_control_fn fn;

	logged = g_string_new("");
	loom_log_set_callback(capture_log, NULL);
	g_assert_cmpint(loom_load_static(&fake_static_desc, &d->reg), ==,
			LOOM_OK);
	d->dev = loom_dev_by_name("static0");
	g_assert_nonnull(d->dev);
	d->buft = loom_dev_buffer_type(d->dev);
	g_assert_nonnull(d->buft);
	fn = (fake_control_fn)loom_reg_proc_address(d->reg, FAKE_CONTROL);
	g_assert_nonnull(fn);
	d->ctl = fn();
	g_assert_cmpint(loom_ctx_new(0, &d->ctx), ==, LOOM_OK);
}

static void data_teardown(struct data_fixture *d, gconstpointer unused)
{
	loom_ctx_free(d->ctx);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	loom_log_set_callback(NULL, NULL);
	g_string_free(logged, TRUE);
	logged = NULL;
}

static void test_buffers(struct data_fixture *d, gconstpointer unused)
{
	loom_buffer_t *buf = (loom_buffer_t *)1;

	g_assert_cmpstr(loom_buffer_type_name(d->buft), ==, "static_host");
	g_assert_cmpuint(loom_buffer_type_alignment(d->buft), ==, 32);
	g_assert_cmpuint(loom_buffer_type_max_size(d->buft), ==, (size_t)1 << 30);
	g_assert_true(loom_buffer_type_is_host(d->buft));
	g_assert_true(loom_buffer_type_device(d->buft) == d->dev);
	g_assert_true(loom_dev_supports_buft(d->dev, d->buft));

	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 100, &buf), ==,
			LOOM_OK);
	g_assert_cmpuint(loom_buffer_size(buf), ==, 100);
	g_assert_nonnull(loom_buffer_base(buf));
	g_assert_true(loom_buffer_get_type(buf) == d->buft);
	g_assert_cmpint(loom_buffer_clear(buf, 7), ==, LOOM_OK);
	g_assert_cmpint(((uint8_t *)loom_buffer_base(buf))[99], ==, 7);
	loom_buffer_set_usage(buf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_buffer_usage(buf), ==, LOOM_BUFFER_USAGE_WEIGHTS);
	loom_buffer_free(buf);
	loom_buffer_free(NULL);

	/* Larger than the type allows: refused before the plugin runs. */
	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, (size_t)2 << 30, &buf),
			==, LOOM_E_NOMEM);
	g_assert_null(buf);
	/* A plugin returning less than asked is caught. */
	d->ctl->short_alloc = 1;
	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 100, &buf), ==,
			LOOM_E_PLUGIN);
	g_assert_null(buf);
	g_assert_cmpstr(loom_error_message(), ==,
			"buffer type 'static_host': asked for 100 bytes, got "
			"a buffer of 99 bytes");
	d->ctl->short_alloc = 0;
	/* A non-power-of-two alignment is replaced, with a warning. */
	d->ctl->bad_align = 1;
	g_assert_cmpuint(loom_buffer_type_alignment(d->buft), ==, 64);
	g_assert_nonnull(strstr(logged->str, "not a power of two"));
	d->ctl->bad_align = 0;

	g_assert_cmpint(loom_buffer_type_alloc_buffer(NULL, 1, &buf), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 1, NULL), ==,
			LOOM_E_INVAL);
}

static void test_set_get(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *t = loom_tensor_new_1d(d->ctx, LOOM_TYPE_F32, 16);
	struct loom_tensor *u = loom_tensor_new_1d(d->ctx, LOOM_TYPE_F32, 16);
	loom_buffer_t *buf;
	float in[16], out[16];
	size_t nb;

	for (int i = 0; i < 16; i++)
		in[i] = (float)i * 0.5f;
	loom_tensor_set_name(t, "t");
	/* Unplaced. */
	g_assert_cmpint(loom_tensor_set(t, in, 0, 4), ==, LOOM_E_STATE);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_tensor_set: tensor 't' is not placed in a "
			"buffer");
	g_assert_cmpint(loom_tensor_get(t, out, 0, 4), ==, LOOM_E_STATE);
	g_assert_cmpint(loom_tensor_set(NULL, in, 0, 4), ==, LOOM_E_INVAL);

	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 256, &buf), ==,
			LOOM_OK);
	/* Misaligned, and too far. */
	g_assert_cmpint(loom_tensor_place(t, buf, 4), ==, LOOM_E_ALIGN);
	g_assert_null(t->data);
	g_assert_cmpint(loom_tensor_place(t, buf, 224), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_place(t, buf, SIZE_MAX - 31), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_place(t, buf, 0), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_place(u, buf, 64), ==, LOOM_OK);
	g_assert_true(t->buffer == buf);
	g_assert_cmpint(d->ctl->n_init_tensor, ==, 2);

	nb = loom_tensor_n_bytes(t);
	g_assert_cmpuint(nb, ==, sizeof(in));
	g_assert_cmpint(loom_tensor_set(t, in, 0, nb), ==, LOOM_OK);
	memset(out, 0, sizeof(out));
	g_assert_cmpint(loom_tensor_get(t, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	/* Bounds: past the end, and offsets that overflow. */
	g_assert_cmpint(loom_tensor_set(t, in, 4, nb), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_get(t, out, nb + 1, 0), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set(t, in, SIZE_MAX, 2), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_get(t, out, 8, SIZE_MAX - 4), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set(t, NULL, 0, 4), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_set(t, NULL, 0, 0), ==, LOOM_OK);

	/* memset through the plugin's method. */
	g_assert_cmpint(loom_tensor_memset(t, 0, 8, 8), ==, LOOM_OK);
	g_assert_cmpint(d->ctl->n_memset, ==, 1);
	g_assert_cmpint(loom_tensor_get(t, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpfloat(out[1], ==, in[1]);
	g_assert_cmpfloat(out[2], ==, 0.0f);
	g_assert_cmpfloat(out[3], ==, 0.0f);
	g_assert_cmpfloat(out[4], ==, in[4]);
	g_assert_cmpint(loom_tensor_memset(t, 0, 8, nb), ==, LOOM_E_RANGE);

	/* Copy: through the plugin, declined (staged), and sizes that
	 * differ. */
	g_assert_cmpint(loom_tensor_set(t, in, 0, nb), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_copy(t, u), ==, LOOM_OK);
	g_assert_cmpint(d->ctl->n_copy, ==, 1);
	memset(out, 0, sizeof(out));
	g_assert_cmpint(loom_tensor_get(u, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	d->ctl->decline_copy = 1;
	g_assert_cmpint(loom_tensor_memset(u, 0, 0, nb), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_copy(t, u), ==, LOOM_OK);
	g_assert_cmpint(d->ctl->n_copy, ==, 1);
	g_assert_cmpint(loom_tensor_get(u, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	{
		struct loom_tensor *small =
			loom_tensor_new_1d(d->ctx, LOOM_TYPE_F32, 8);

		g_assert_cmpint(loom_tensor_place(small, buf, 128), ==,
				LOOM_OK);
		g_assert_cmpint(loom_tensor_copy(t, small), ==, LOOM_E_INVAL);
	}
	g_assert_cmpint(loom_tensor_copy(NULL, u), ==, LOOM_E_INVAL);
	loom_buffer_free(buf);
}

/* set_2d/get_2d against a plain reference, through the plugin's entry
 * point (dst on the static fake) and through the core's loop. */
static void test_2d(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *t = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 8, 6);
	loom_buffer_t *buf;
	uint8_t host[6 * 40], back[6 * 40], ref[8 * 6 * 4];
	size_t nb;

	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &buf), ==,
			LOOM_OK);
	nb = loom_tensor_n_bytes(t);
	g_assert_cmpuint(nb, ==, sizeof(ref));
	for (size_t i = 0; i < sizeof(host); i++)
		host[i] = (uint8_t)(i * 7 + 3);
	memset(ref, 0, sizeof(ref));
	g_assert_cmpint(loom_tensor_memset(t, 0, 0, nb), ==, LOOM_OK);
	/* Rows of 12 bytes from offset 4, tensor stride 32, host stride 40. */
	for (size_t r = 0; r < 6; r++)
		memcpy(ref + 4 + r * 32, host + r * 40, 12);
	g_assert_cmpint(loom_tensor_set_2d(t, host, 4, 12, 6, 32, 40), ==,
			LOOM_OK);
	g_assert_cmpint(d->ctl->n_set_2d, ==, 1);
	g_assert_cmpint(loom_tensor_get(t, back, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(ref, nb, back, nb);
	memset(back, 0xee, sizeof(back));
	g_assert_cmpint(loom_tensor_get_2d(t, back, 4, 12, 6, 32, 40), ==,
			LOOM_OK);
	g_assert_cmpint(d->ctl->n_get_2d, ==, 1);
	for (size_t r = 0; r < 6; r++)
		g_assert_cmpmem(back + r * 40, 12, host + r * 40, 12);

	/* Out of bounds by one byte in the last row; overlapping rows;
	 * strides that overflow; NULL data; nothing to copy. */
	g_assert_cmpint(loom_tensor_set_2d(t, host, 21, 12, 6, 32, 40), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set_2d(t, host, 0, 33, 2, 32, 40), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_get_2d(t, back, 0, 12, 2, 32, 8), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_get_2d(t, back, 0, 1, 3, SIZE_MAX / 2, 1),
			==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set_2d(t, NULL, 0, 4, 2, 32, 4), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_set_2d(t, host, 0, 4, 0, 32, 4), ==,
			LOOM_OK);
	g_assert_cmpint(d->ctl->n_set_2d, ==, 1);
	g_assert_cmpint(d->ctl->n_get_2d, ==, 1);
	loom_buffer_free(buf);
}

static void test_views_alloc(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *a = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 4, 3);
	struct loom_tensor *b = loom_tensor_new_1d(d->ctx, LOOM_TYPE_F16, 5);
	struct loom_tensor *v = loom_view_1d(d->ctx, a, 4, 16);
	loom_buffer_t *buf, *again;
	float row[4] = { 1, 2, 3, 4 }, out[4];

	g_assert_nonnull(v);
	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &buf), ==,
			LOOM_OK);
	g_assert_nonnull(buf);
	g_assert_true(a->buffer == buf && b->buffer == buf &&
		      v->buffer == buf);
	g_assert_true((char *)v->data == (char *)a->data + 16);
	g_assert_cmpuint(((uintptr_t)b->data - (uintptr_t)a->data) % 32, ==, 0);
	g_assert_cmpuint(loom_buffer_size(buf), ==, 64 + 10);
	/* A write through the view lands in its source. */
	g_assert_cmpint(loom_tensor_set(v, row, 0, sizeof(row)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(a, out, 16, sizeof(out)), ==, LOOM_OK);
	g_assert_cmpmem(row, sizeof(row), out, sizeof(out));
	/* Nothing left to place. */
	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &again), ==,
			LOOM_OK);
	g_assert_null(again);
	/* Views are placed with init_view, not place. */
	g_assert_cmpint(loom_tensor_place(v, buf, 0), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_init_view(a), ==, LOOM_E_INVAL);
	loom_buffer_free(buf);
	{
		loom_ctx_t *ctx;
		struct loom_tensor *big, *w;

		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
		big = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 1 << 15, 1 << 14);
		g_assert_nonnull(big);
		g_assert_cmpint(loom_ctx_alloc_tensors(ctx, d->buft, &again),
				==, LOOM_E_NOMEM);
		g_assert_nonnull(strstr(loom_error_message(), "more than"));
		g_assert_null(big->data);
		w = loom_view_1d(ctx, big, 4, 0);
		g_assert_cmpint(loom_tensor_init_view(w), ==, LOOM_E_STATE);
		loom_ctx_free(ctx);
	}
}

static void test_backend(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *t = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 4, 4);
	struct loom_tensor *u = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 4, 4);
	loom_backend_t *be;
	loom_event_t *ev;
	loom_buffer_t *buf, *buf2;
	loom_graph_t *g;
	float in[16], out[16];

	for (int i = 0; i < 16; i++)
		in[i] = (float)(i * i) - 3.0f;
	g_assert_cmpint(loom_dev_init_backend(d->dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpstr(loom_backend_name(be), ==, "static");
	g_assert_true(loom_backend_device(be) == d->dev);
	g_assert_false(loom_backend_supports_op(be, t));
	g_assert_cmpint(loom_backend_set_n_threads(be, 2), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_cmpint(loom_backend_set_n_threads(be, 0), ==, LOOM_E_INVAL);

	/* Unplaced, then the async fallbacks (synchronize, then blocking). */
	g_assert_cmpint(loom_backend_tensor_set_async(be, t, in, 0, 4), ==,
			LOOM_E_STATE);
	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &buf), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_set_async(be, t, in, 0,
						      sizeof(in)),
			==, LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_set_async(be, t, in, 4,
						      sizeof(in)),
			==, LOOM_E_RANGE);
	g_assert_cmpint(loom_backend_tensor_copy_async(be, be, t, u), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_get_2d_async(be, u, out, 0, 8, 4,
							 16, 8),
			==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	for (int r = 0; r < 4; r++)
		g_assert_cmpmem(out + 2 * r, 8, in + 4 * r, 8);
	g_assert_cmpint(loom_backend_tensor_get_async(be, u, out, 0,
						      sizeof(out)),
			==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	g_assert_cmpint(loom_backend_tensor_set_2d_async(be, t, in, 60, 8, 1,
							 0, 0),
			==, LOOM_E_RANGE);

	/* Emulated events. */
	g_assert_cmpint(loom_event_new(d->dev, &ev), ==, LOOM_OK);
	g_assert_true(loom_event_device(ev) == d->dev);
	g_assert_cmpint(loom_event_record(ev, be), ==, LOOM_OK);
	g_assert_cmpint(loom_event_wait(be, ev), ==, LOOM_OK);
	g_assert_cmpint(loom_event_synchronize(ev), ==, LOOM_OK);
	loom_event_free(ev);
	g_assert_cmpint(loom_event_record(NULL, be), ==, LOOM_E_INVAL);

	/* Graphs: unplaced nodes are refused before the plugin sees them. */
	g_assert_cmpint(loom_graph_new(d->ctx, &g), ==, LOOM_OK);
	{
		struct loom_tensor *sum = loom_add(d->ctx, t, u);

		g_assert_nonnull(sum);
		g_assert_cmpint(loom_graph_expand(g, sum), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
				LOOM_E_STATE);
		g_assert_cmpint(d->ctl->n_compute, ==, 0);
		g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft,
						       &buf2),
				==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
				LOOM_OK);
		g_assert_cmpint(d->ctl->n_compute, ==, 1);
		loom_buffer_free(buf2);
	}
	g_assert_cmpint(loom_backend_graph_compute(be, NULL), ==, LOOM_E_INVAL);
	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_backend_free(NULL);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);

#define F(path, fn)                                                          \
	g_test_add(path, struct fixture, NULL, fixture_setup, fn,           \
		   fixture_teardown)
#define D(path, fn)                                                          \
	g_test_add(path, struct data_fixture, NULL, data_setup, fn,         \
		   data_teardown)
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
	g_test_add_func("/iface/tables", test_tables);
	D("/iface/buffers", test_buffers);
	D("/iface/set-get", test_set_get);
	D("/iface/2d", test_2d);
	D("/iface/views-alloc", test_views_alloc);
	D("/iface/backend", test_backend);
	return g_test_run();
}
