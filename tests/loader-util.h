/* SPDX-License-Identifier: MIT */
/* loader-util.h - what the loader tests share: the interposed secure
 * execution switch, the log capture, and a hermetic plugin directory per
 * test (tests/loader-util.c). */
#ifndef LOOM_TESTS_LOADER_UTIL_H
#define LOOM_TESTS_LOADER_UTIL_H

#include <stdbool.h>
#include <stddef.h>

#include <glib.h>

#include <loom/loom-plugin.h>

extern const struct loom_plugin_desc fake_static_desc;

/* Nonzero: secure_getenv() and getauxval(AT_SECURE) answer as in a
 * secure-execution process. */
extern int pretend_secure;

/* What libloom logged since the fixture's setup. */
extern GString *logged;
void capture_log(enum loom_log_level level, const char *msg, void *userdata);

struct fixture {
	char *dir;   /* LOOM_PLUGIN_PATH for the test */
	char *dir2;  /* a second directory, when needed */
	char *marker;
};

const char *fake_libs(void);
void link_plugin(const char *dir, const char *libs, const char *name);
void add_plugin(const char *dir, const char *name);
void add_built(const char *dir, const char *subdir, const char *name);
char *path_in(const char *dir, const char *name);
void fixture_setup(struct fixture *f, gconstpointer data);
void remove_dir(const char *dir);
void fixture_teardown(struct fixture *f, gconstpointer data);
struct loom_plugin_info find_record(const char *path);
void assert_record(const char *dir, const char *name,
		   enum loom_plugin_state state, const char *reason);
bool marked(const struct fixture *f, const char *name);

/* The devices, in this order, and no more. */
void assert_dev_order(const char *const *want, size_t n);
/* Runs the built loom-info with one argument (or none): its exit status,
 * its output and errors in *out and *err. */
int run_info(const char *arg, char **out, char **err);

#endif
