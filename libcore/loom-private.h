/* loom-private.h - names shared between files of the core (loom__*).
 * Nothing here is part of the API; plugins never see it. */
#ifndef LOOM_PRIVATE_H
#define LOOM_PRIVATE_H

#include "loom/loom-plugin.h"

#include <stdarg.h>

/* ---- status, log, env (status.c, log.c, env.c) ---- */

/* loom_set_error() with a va_list; returns status. */
int loom__vset_error(int status, const char *fmt, va_list ap);
/* Forgets this thread's last error message. */
void loom__clear_error(void);
/* loom_getenv() without logging (for the log level itself). */
const char *loom__getenv_quiet(const char *name);

/* ---- tensors, contexts, graphs (tensor.c, ops.c, graph.c, galloc.c) ---- */

/* ---- buffers, backends, devices, registry, loader ---- */

#endif
