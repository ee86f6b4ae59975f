/* SPDX-License-Identifier: MIT */
/* probe.c - the CUDA plugin as the loader sees it, loom-cuda.so.  It asks
 * the driver (libcuda.so.1, opened at run time) whether this machine has
 * a CUDA device, and only then opens the implementation, cuda-impl.so
 * beside it, which links the CUDA runtime, cuBLAS and NCCL.  A machine
 * without a GPU never maps those libraries, so loading every plugin stays
 * cheap for CPU-only users.
 */
#define _GNU_SOURCE /* dladdr */
#include <config.h>

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include <loom/loom-plugin.h>

#define IMPL_FILE "cuda-impl.so"
#define CU_SUCCESS 0
#define CU_ERROR_NO_DEVICE 100

typedef int (*cu_init_fn)(unsigned int flags);
typedef int (*cu_device_get_count_fn)(int *count);
typedef int (*cu_get_error_string_fn)(int err, const char **str);

extern const struct loom_plugin_desc loom_plugin_descriptor;

static char why[192];

/* The driver's own words for err, or its number. */
static const char *driver_error(void *drv, int err)
{
	static char num[32];
	cu_get_error_string_fn str = (cu_get_error_string_fn)dlsym(
		drv, "cuGetErrorString");
	const char *s = NULL;

	if (str && str(err, &s) == CU_SUCCESS && s)
		return s;
	snprintf(num, sizeof(num), "error %d", err);
	return num;
}

static int probe_score(const char **out_why)
{
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	cu_init_fn init;
	cu_device_get_count_fn count;
	int err, n = 0;

	*out_why = why;
	if (!drv) {
		snprintf(why, sizeof(why), "no CUDA driver");
		return 0;
	}
	init = (cu_init_fn)dlsym(drv, "cuInit");
	count = (cu_device_get_count_fn)dlsym(drv, "cuDeviceGetCount");
	if (!init || !count) {
		snprintf(why, sizeof(why), "no CUDA driver (libcuda.so.1 "
			 "lacks cuInit)");
		return 0;
	}
	/* The driver stays open: the runtime uses the same library. */
	err = init(0);
	if (err == CU_SUCCESS)
		err = count(&n);
	if (err == CU_ERROR_NO_DEVICE || (err == CU_SUCCESS && n <= 0)) {
		snprintf(why, sizeof(why), "no CUDA device");
		return 0;
	}
	if (err != CU_SUCCESS) {
		snprintf(why, sizeof(why), "CUDA driver failed: %s",
			 driver_error(drv, err));
		return 0;
	}
	return 100;
}

/* Opens the implementation beside this file and hands over to it; it is
 * never closed (it holds CUDA contexts once it has run). */
static int probe_init(loom_reg_t **out)
{
	const struct loom_plugin_desc *impl;
	const char *slash, *w = NULL;
	char path[PATH_MAX];
	Dl_info info;
	void *h;

	if (!dladdr((const void *)&loom_plugin_descriptor, &info) ||
	    !info.dli_fname || !(slash = strrchr(info.dli_fname, '/')))
		return loom_error_set(LOOM_E_PLUGIN, "cannot find where "
				      "loom-cuda.so was loaded from");
	if (snprintf(path, sizeof(path), "%.*s/%s",
		     (int)(slash - info.dli_fname), info.dli_fname,
		     IMPL_FILE) >= (int)sizeof(path))
		return loom_error_set(LOOM_E_PLUGIN, "path too long");
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return loom_error_set(LOOM_E_PLUGIN, "cannot load %s", dlerror());
	impl = (const struct loom_plugin_desc *)dlsym(h, LOOM_PLUGIN_SYMBOL);
	if (!impl || impl->abi_major != LOOM_ABI_MAJOR ||
	    impl->abi_minor > LOOM_ABI_MINOR || !impl->init ||
	    strcmp(impl->name, loom_plugin_descriptor.name) != 0)
		return loom_error_set(LOOM_E_PLUGIN, "%s is not this "
				      "version's CUDA implementation", path);
	if (impl->score && impl->score(&w) <= 0)
		return loom_error_set(LOOM_E_NOT_APPLICABLE, "%s",
				      w && *w ? w : "not applicable");
	return impl->init(out);
}

LOOM_PLUGIN_DEFINE("cuda", PACKAGE_VERSION, probe_init, probe_score);
