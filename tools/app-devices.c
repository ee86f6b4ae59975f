/* SPDX-License-Identifier: MIT */
/* app-devices.c - the devices as loom-run and loom-bench model name them
 * (see app-devices.h): one set of rules and messages for both tools.
 */
#include "app-devices.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom-backend.h>

/* The error for a name that is no device; a CPU device beyond those the
 * CPU plugin made says how LOOM_CPU_DEVICES makes it. */
static int no_device(const char *name)
{
	loom_reg_t *cpu = loom_reg_by_name("cpu");
	const char *env = loom_env_get("LOOM_CPU_DEVICES");
	size_t n = cpu ? loom_reg_dev_count(cpu) : 0;
	char *end;
	long idx;

	/* LOOM_CPU_DEVICES makes at most 1024. */
	if (!cpu || strncmp(name, "cpu", 3) || name[3] < '0' ||
	    name[3] > '9' || (idx = strtol(name + 3, &end, 10)) > 1023 ||
	    *end)
		return loom_error_set(LOOM_E_NOT_FOUND, "no device '%s' (see "
				      "loom-info)", name);
	if (!env || !*env)
		return loom_error_set(LOOM_E_NOT_FOUND, "no device '%s': the "
				      "CPU is one device, cpu0, unless "
				      "LOOM_CPU_DEVICES=N splits it into N "
				      "(cpu0 to cpu%ld with "
				      "LOOM_CPU_DEVICES=%ld)", name, idx,
				      idx + 1);
	return loom_error_set(LOOM_E_NOT_FOUND, "no device '%s': "
			      "LOOM_CPU_DEVICES=%s makes %zu CPU device%s "
			      "(cpu0%s%s)", name, env, n, n == 1 ? "" : "s",
			      n > 1 ? " to " : "",
			      n > 1 ? loom_dev_name(loom_reg_dev(cpu, n - 1))
				    : "");
}

int app_devices_parse(const char *list, loom_dev_t **devs, size_t max,
		      size_t *n)
{
	char *copy = strdup(list), *name, *save = NULL;
	int ret = LOOM_OK;

	*n = 0;
	if (!copy)
		return loom_error_set(LOOM_E_NOMEM, "no memory");
	for (name = strtok_r(copy, ",", &save); name && !ret;
	     name = strtok_r(NULL, ",", &save)) {
		loom_dev_t *dev = loom_dev_by_name(name);

		if (!dev) {
			ret = no_device(name);
			break;
		}
		for (size_t i = 0; i < *n && !ret; i++)
			if (devs[i] == dev)
				ret = loom_error_set(
					LOOM_E_INVAL, "%s is named twice: each "
					"device takes its own part of the "
					"model%s", name,
					loom_dev_type(dev) ==
							LOOM_DEV_TYPE_CPU
						? " (LOOM_CPU_DEVICES=2 splits "
						  "the CPU into cpu0 and cpu1)"
						: "");
		if (!ret && *n == max)
			ret = loom_error_set(LOOM_E_RANGE, "more than %zu "
					     "devices", max);
		if (!ret)
			devs[(*n)++] = dev;
	}
	free(copy);
	if (!ret && !*n)
		ret = loom_error_set(LOOM_E_INVAL, "no device named");
	return ret;
}

loom_dev_t *app_devices_other_cpu(loom_dev_t *dev)
{
	for (size_t i = 0; i < loom_dev_count(); i++) {
		loom_dev_t *d = loom_dev_get(i);

		if (d != dev && loom_dev_type(d) == LOOM_DEV_TYPE_CPU)
			return d;
	}
	return NULL;
}

loom_dev_t *app_devices_second(loom_dev_t *first, loom_dev_t *named)
{
	loom_dev_t *rest = named ? named : app_devices_other_cpu(first);

	if (rest)
		return rest;
	if (loom_dev_type(first) == LOOM_DEV_TYPE_CPU)
		loom_error_set(LOOM_E_NOT_FOUND, "no second device besides "
			       "%s (LOOM_CPU_DEVICES=2 splits the CPU: "
			       "--devices cpu0,cpu1)",
			       loom_dev_name(first));
	else
		loom_error_set(LOOM_E_NOT_FOUND, "no second device besides "
			       "%s (name one: --devices %s,cpu0)", loom_dev_name(first),
			       loom_dev_name(first));
	return NULL;
}
