/* SPDX-License-Identifier: MIT */
/* abi.c - the rule that says whether a plugin built against one ABI
 * version loads into a core of another, whether its descriptor holds
 * what its version promises, and which descriptor fields a plugin of its
 * version has.  Which slots a plugin filled is its tables' sizes'
 * business (buffer.c), not this one's. */
#include "config.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "backend-private.h"

int loom__abi_check(uint32_t major, uint32_t minor, uint32_t core_major,
		    uint32_t core_minor, char *why, size_t n)
{
	if (major == core_major && minor <= core_minor)
		return LOOM_OK;
	if (major == core_major)
		snprintf(why, n,
			 "ABI mismatch: plugin ABI %u.%u, libloom ABI %u.%u "
			 "(the plugin needs a newer libloom)",
			 (unsigned)major, (unsigned)minor,
			 (unsigned)core_major, (unsigned)core_minor);
	else
		snprintf(why, n,
			 "ABI mismatch: plugin ABI %u.%u, libloom ABI %u.%u",
			 (unsigned)major, (unsigned)minor,
			 (unsigned)core_major, (unsigned)core_minor);
	return LOOM_E_ABI;
}

uint32_t loom__desc_flags(const struct loom_plugin_desc *desc)
{
	return desc && desc->abi_minor >= 2 ? desc->flags : 0;
}

int loom__desc_size_check(const void *desc, size_t size, char *why, size_t n)
{
	const size_t version = offsetof(struct loom_plugin_desc, name);
	const size_t v1_0 = offsetof(struct loom_plugin_desc, size);
	const size_t v1_2 = offsetof(struct loom_plugin_desc, flags) +
			    sizeof(uint32_t);
	struct loom_plugin_desc d;
	size_t need;

	if (size < version) {
		snprintf(why, n, "descriptor of %zu bytes cannot hold its ABI "
			 "version (%zu bytes)", size, version);
		return LOOM_E_PLUGIN;
	}
	memcpy(&d, desc, version);
	/* Another version is refused by the version rule, saying so. */
	if (d.abi_major != LOOM_ABI_MAJOR || d.abi_minor > LOOM_ABI_MINOR)
		return LOOM_OK;
	need = d.abi_minor < 2 ? v1_0 : v1_2;
	if (size < need) {
		snprintf(why, n, "descriptor of %zu bytes is shorter than "
			 "plugin ABI %u.%u's (%zu bytes)", size,
			 (unsigned)d.abi_major, (unsigned)d.abi_minor, need);
		return LOOM_E_PLUGIN;
	}
	if (d.abi_minor < 2)
		return LOOM_OK;
	memcpy(&d.size, (const char *)desc + v1_0, sizeof(d.size));
	if (d.size < need || d.size > size) {
		snprintf(why, n, "descriptor says it is %u bytes; it has %zu "
			 "(at least %zu)", (unsigned)d.size, size, need);
		return LOOM_E_PLUGIN;
	}
	return LOOM_OK;
}
