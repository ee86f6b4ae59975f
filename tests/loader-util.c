/* SPDX-License-Identifier: MIT */
/* loader-util.c - the loader tests' shared helpers: secure execution
 * interposed, log capture, and a hermetic plugin directory per test. */
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

#include "loader-util.h"

/* ------------------------------------------------------------------------
 * Secure execution, interposed: libloom's calls to secure_getenv() and
 * getauxval() resolve to these definitions in the executable.
 */
int pretend_secure;

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
GString *logged;

void capture_log(enum loom_log_level level, const char *msg,
			void *userdata)
{
	g_string_append_printf(logged, "%d %s\n", (int)level, msg);
}

/* ------------------------------------------------------------------------
 * A hermetic plugin directory per test.
 */
const char *fake_libs(void)
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
void link_plugin(const char *dir, const char *libs, const char *name)
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
void add_plugin(const char *dir, const char *name)
{
	link_plugin(dir, fake_libs(), name);
}

/* Puts a plugin of the build tree into dir: `name` built in `subdir`
 * ("plugins/cpu", "tests/acme"). */
void add_built(const char *dir, const char *subdir, const char *name)
{
	const char *b = g_getenv("LOOM_TEST_BUILDDIR");
	char *libs = g_build_filename(b ? b : ".", subdir, ".libs", NULL);

	link_plugin(dir, libs, name);
	g_free(libs);
}

char *path_in(const char *dir, const char *name)
{
	char *file = g_strdup_printf("loom-%s.so", name);
	char *path = g_build_filename(dir, file, NULL);

	g_free(file);
	return path;
}

void fixture_setup(struct fixture *f, gconstpointer data)
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

void remove_dir(const char *dir)
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

void fixture_teardown(struct fixture *f, gconstpointer data)
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
struct loom_plugin_info find_record(const char *path)
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

void assert_record(const char *dir, const char *name,
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
bool marked(const struct fixture *f, const char *name)
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

/* The devices, in this order, and no more. */
void assert_dev_order(const char *const *want, size_t n)
{
	g_assert_cmpuint(loom_dev_count(), ==, n);
	for (size_t i = 0; i < n; i++)
		g_assert_cmpstr(loom_dev_name(loom_dev_get(i)), ==, want[i]);
	g_assert_null(loom_dev_get(n));
}

/* Runs the built loom-info with one argument (or none); its exit status. */
int run_info(const char *arg, char **out, char **err)
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
