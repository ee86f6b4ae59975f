/* SPDX-License-Identifier: MIT */
/* abi.c - the rule that says whether a plugin built against one ABI
 * version loads into a core of another, and which descriptor fields a
 * plugin of its version has.  Which slots a plugin filled is
 * its tables' sizes' business (buffer.c), not this one's. */
#include "config.h"

#include <stdio.h>

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
