/* SPDX-License-Identifier: MIT */
/* app-devices.h - the devices as loom-run and loom-bench model name them:
 * a --devices list looked up with a hint for a CPU device the CPU plugin
 * was not asked to make, and the second device a split by layers needs.
 */
#ifndef LOOM_TOOLS_APP_DEVICES_H
#define LOOM_TOOLS_APP_DEVICES_H

#include <stddef.h>

#include <loom/loom-backend.h>

/* The devices of a comma-separated list, at most max of them, into
 * devs[0..*n).  An unknown name (with, for cpuN, how LOOM_CPU_DEVICES
 * makes it), a name given twice, an empty list or one too long is an
 * error with its message set (loom_error_message()). */
int app_devices_parse(const char *list, loom_dev_t **devs, size_t max,
		      size_t *n);

/* The first CPU device that is not dev, or NULL. */
loom_dev_t *app_devices_other_cpu(loom_dev_t *dev);

/* The second device of a split by layers (--gpu-layers): the one named
 * (named may be NULL; app_devices_parse() made it differ from first),
 * else a CPU device other than first; NULL with the message set, saying
 * how to get one, when there is none. */
loom_dev_t *app_devices_second(loom_dev_t *first, loom_dev_t *named);

#endif
