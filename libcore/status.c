/* SPDX-License-Identifier: MIT */
/* status.c - status names (from LOOM_STATUS_MAP) and the per-thread last
 * error message.  Logging lives in log.c, the environment in env.c. */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "loom-private.h"

#define ERROR_MAX 1024

static _Thread_local char last_error[ERROR_MAX];

const char *loom_strerror(int status)
{
	switch (status) {
#define X_(name, value, text) \
	case LOOM_##name:     \
		return text;
		LOOM_STATUS_MAP(X_)
#undef X_
	}
	return "unknown status";
}

const char *loom_error_message(void)
{
	return last_error;
}

/* Formats into a scratch buffer first, so that a message may quote the
 * previous one (loom_error_set(st, "init: %s", loom_error_message())). */
int loom__vset_error(int status, const char *fmt, va_list ap)
{
	char msg[ERROR_MAX];

	if (fmt)
		vsnprintf(msg, sizeof(msg), fmt, ap);
	else
		snprintf(msg, sizeof(msg), "%s (no message)",
			 loom_strerror(status));
	/* Logged first: an error the log callback raises must not take
	 * the place of this one. */
	loom_log(LOOM_LOG_DEBUG, "%s (%s)", msg, loom_strerror(status));
	memcpy(last_error, msg, sizeof(msg));
	return status;
}

int loom_error_set(int status, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	loom__vset_error(status, fmt, ap);
	va_end(ap);
	return status;
}

void loom__clear_error(void)
{
	last_error[0] = '\0';
}
