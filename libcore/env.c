/* SPDX-License-Identifier: MIT */
/* env.c - reading LOOM_* variables.  In a secure-execution process
 * (setuid, file capabilities) every one of them is ignored, and that is
 * logged once. */
#define _GNU_SOURCE
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#ifdef HAVE_GETAUXVAL
#include <sys/auxv.h>
#endif

#include "loom-private.h"

static int secure_logged;

/* Like secure_getenv(): NULL when the process runs with elevated
 * privileges. */
static const char *env_secure(const char *name)
{
#ifdef HAVE_SECURE_GETENV
	return secure_getenv(name);
#else
#ifdef HAVE_GETAUXVAL
	if (getauxval(AT_SECURE))
		return NULL;
#endif
	return getenv(name);
#endif
}

const char *loom__getenv_quiet(const char *name)
{
	if (!name)
		return NULL;
	return env_secure(name);
}

const char *loom_env_get(const char *name)
{
	const char *v;

	if (!name)
		return NULL;
	v = env_secure(name);
	if (v || !getenv(name))
		return v;
	/* Set, but hidden from us: secure execution. */
	if (!__atomic_exchange_n(&secure_logged, 1, __ATOMIC_RELAXED))
		loom_log(LOOM_LOG_WARN,
			 "secure execution: ignoring every LOOM_* variable "
			 "(%s is set)",
			 name);
	return NULL;
}
