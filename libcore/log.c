/* SPDX-License-Identifier: MIT */
/* log.c - the log callback and level.  The level comes from LOOM_LOG
 * (none, error, warn, info, debug; default warn), read once, unless the
 * application sets it first. */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "loom-private.h"

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static enum loom_log_level level = LOOM_LOG_WARN;
static loom_log_fn log_fn;
static void *log_userdata;
static _Thread_local bool in_log; /* this thread is in the callback */
/* A LOOM_LOG value that names no level, reported once it can be logged
 * (not from inside level_init, which pthread_once is running). */
static char bad_level[64];
static int bad_level_reported;

static const char *const level_names[] = {
	[LOOM_LOG_NONE] = "none",   [LOOM_LOG_ERROR] = "error",
	[LOOM_LOG_WARN] = "warn",   [LOOM_LOG_INFO] = "info",
	[LOOM_LOG_DEBUG] = "debug",
};

/* Reads LOOM_LOG without going through loom_env_get(), which may log. */
static void level_init(void)
{
	const char *s = loom__getenv_quiet("LOOM_LOG");

	if (!s || !*s)
		return;
	for (size_t i = 0; i < sizeof(level_names) / sizeof(*level_names);
	     i++) {
		if (strcmp(s, level_names[i]) == 0) {
			level = (enum loom_log_level)i;
			return;
		}
	}
	if (strcmp(s, "warning") != 0)
		snprintf(bad_level, sizeof(bad_level), "%s", s);
}

void loom_log_set_callback(loom_log_fn fn, void *userdata)
{
	pthread_mutex_lock(&log_lock);
	log_fn = fn;
	log_userdata = userdata;
	pthread_mutex_unlock(&log_lock);
}

/* A level outside the enum is refused (recorded for loom_error_message()),
 * and the level stays what it was. */
void loom_log_set_level(enum loom_log_level lvl)
{
	pthread_once(&level_once, level_init);
	if ((unsigned)lvl > LOOM_LOG_DEBUG) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_log_set_level: invalid level %d",
			       (int)lvl);
		return;
	}
	__atomic_store_n(&level, lvl, __ATOMIC_RELAXED);
}

enum loom_log_level loom_log_get_level(void)
{
	pthread_once(&level_once, level_init);
	if (bad_level[0] &&
	    !__atomic_exchange_n(&bad_level_reported, 1, __ATOMIC_RELAXED))
		loom_log(LOOM_LOG_WARN,
			 "LOOM_LOG=%s is not a level (none, error, warn, "
			 "info, debug); using warn",
			 bad_level);
	return __atomic_load_n(&level, __ATOMIC_RELAXED);
}

void loom_log(enum loom_log_level lvl, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;
	loom_log_fn fn;
	void *userdata;

	if (lvl == LOOM_LOG_NONE || (unsigned)lvl > loom_log_get_level() ||
	    !fmt || in_log)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	pthread_mutex_lock(&log_lock);
	fn = log_fn;
	userdata = log_userdata;
	pthread_mutex_unlock(&log_lock);
	if (fn) {
		/* What the callback itself logs (an error it raises logs at
		 * debug level) is dropped, not fed back to it without end. */
		in_log = true;
		fn(lvl, msg, userdata);
		in_log = false;
		return;
	}
	fprintf(stderr, "loom: %s: %s\n", level_names[lvl], msg);
}
