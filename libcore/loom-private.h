/* loom-private.h - names shared between files of the core (loom__*).
 * Nothing here is part of the API; plugins never see it. */
#ifndef LOOM_PRIVATE_H
#define LOOM_PRIVATE_H

#include "loom/loom-plugin.h"

#include <stdarg.h>

/* ---- status, log, env (status.c, log.c, env.c) ---- */

/* ---- tensors, contexts, graphs (tensor.c, ops.c, graph.c, galloc.c) ---- */

/* ---- buffers, backends, devices, registry, loader ---- */

#endif
