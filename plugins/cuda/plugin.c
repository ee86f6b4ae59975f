/* SPDX-License-Identifier: MIT */
/* plugin.c - the CUDA plugin's entry: its descriptor, whether it applies
 * (probe and score), the registry entry with its entry points, and init,
 * which makes the devices (device.c) and the host buffer type
 * (buffer-type.c).  Built for HIP too, through cuda-compat.h.
 */
#include <stdio.h>
#include <string.h>

#include "cuda-plugin.h"

#define PLUGIN_VERSION "0.1.0"

static struct cuda_reg g_reg;

bool cuda_reg_is_ours(loom_reg_t *reg)
{
	return reg && reg == g_reg.reg;
}

int cuda_error(cudaError_t err, const char *what)
{
	int status = LOOM_E_DEVICE;

	if (err == cudaSuccess)
		return LOOM_OK;
	if (err == cudaErrorMemoryAllocation)
		status = LOOM_E_NOMEM;
	/* Clear the sticky last error so the next call starts clean. */
	(void)cudaGetLastError();
	return loom_error_set(status, "%s: %s: %s", LOOM_GPU_NAME, what,
			      cudaGetErrorString(err));
}

int cuda_use_dev(const struct cuda_dev *cd)
{
	return cuda_error(cudaSetDevice(cd->id), "cannot select the device");
}

/* For release paths, which cannot fail: a failure is logged, not lost. */
void cuda_warn_on(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		return;
	loom_log(LOOM_LOG_WARN, "%s: %s: %s", LOOM_GPU_NAME, what,
		 cudaGetErrorString(err));
	(void)cudaGetLastError();
}

/* ------------------------------------------------------------------------
 * Applicability.  Runs before init; the runtime reports a missing driver
 * (no libcuda) or device as an error code, which we only translate.
 */
static int probe_status = 1; /* 1: not probed yet */
static int probe_count;
static char probe_why[128];

/* Counts the devices once.  No device and no driver (the runtime's stub
 * or an old driver) are the expected reasons; any other failure is named. */

static int probe(void)
{
	cudaError_t err;
	int n = 0;

	if (probe_status != 1)
		return probe_status;
	err = cudaGetDeviceCount(&n);
	(void)cudaGetLastError();
	if (err == cudaErrorNoDevice || (err == cudaSuccess && n <= 0)) {
		probe_status = LOOM_E_NOT_FOUND;
		snprintf(probe_why, sizeof(probe_why), "no %s device",
			 LOOM_GPU_VENDOR);
	} else if (err == cudaErrorInsufficientDriver
#ifndef LOOM_HIP
		   || err == cudaErrorStubLibrary
#endif
		   ) {
		probe_status = LOOM_E_NOT_APPLICABLE;
		snprintf(probe_why, sizeof(probe_why), "no %s driver",
			 LOOM_GPU_VENDOR);
	} else if (err != cudaSuccess) {
		probe_status = LOOM_E_NOT_APPLICABLE;
		snprintf(probe_why, sizeof(probe_why), "%s runtime failed: %s",
			 LOOM_GPU_VENDOR, cudaGetErrorString(err));
	} else {
		probe_status = LOOM_OK;
	}
	probe_count = err == cudaSuccess && n > 0 ? n : 0;
	if (probe_count > CUDA_MAX_DEVICES)
		probe_count = CUDA_MAX_DEVICES;
	return probe_status;
}

static int cuda_score(const char **why)
{
	if (probe() == LOOM_OK)
		return 100;
	*why = probe_why;
	return 0;
}

/* ------------------------------------------------------------------------
 * Registry entry and entry points.
 */
/* ------------------------------------------------------------------------
 * The registry entry and its entry points.
 */
static const char *reg_name(loom_reg_t *reg)
{
	return LOOM_GPU_NAME;
}

static size_t reg_dev_count(loom_reg_t *reg)
{
	return (size_t)g_reg.n_dev;
}

static loom_dev_t *reg_dev(loom_reg_t *reg, size_t i)
{
	return i < (size_t)g_reg.n_dev ? g_reg.devs[i].dev : NULL;
}

static loom_buffer_type_t *host_buffer_type(loom_dev_t *dev)
{
	return g_reg.host_buft;
}

static const struct loom_feature *get_features(loom_reg_t *reg)
{
	return g_reg.features;
}

static void *reg_proc_address(loom_reg_t *reg, const char *name)
{
	if (!strcmp(name, LOOM_PROC_SET_TENSOR_2D))
		return (void *)(loom_set_tensor_2d_fn)cuda_set_tensor_2d;
	if (!strcmp(name, LOOM_PROC_GET_TENSOR_2D))
		return (void *)(loom_get_tensor_2d_fn)cuda_get_tensor_2d;
	if (!strcmp(name, LOOM_PROC_SET_TENSOR_2D_ASYNC))
		return (void *)(loom_set_tensor_2d_async_fn)cuda_set_tensor_2d_async;
	if (!strcmp(name, LOOM_PROC_GET_TENSOR_2D_ASYNC))
		return (void *)(loom_get_tensor_2d_async_fn)cuda_get_tensor_2d_async;
	if (!strcmp(name, LOOM_PROC_HOST_BUFFER_TYPE))
		return (void *)(loom_host_buffer_type_fn)host_buffer_type;
	if (!strcmp(name, LOOM_PROC_GET_FEATURES))
		return (void *)(loom_get_features_fn)get_features;
#ifdef LOOM_HAVE_NCCL
	if (!strcmp(name, LOOM_PROC_ALLREDUCE))
		return (void *)(loom_allreduce_fn)cuda_allreduce;
	if (!strcmp(name, LOOM_PROC_ALLREDUCE_WORLD) && cuda_nccl_enabled())
		return (void *)(loom_allreduce_world_fn)cuda_allreduce_world;
	if (!strcmp(name, LOOM_PROC_ALLREDUCE_WORLD_PREPARE) &&
	    cuda_nccl_enabled())
		return (void *)(loom_allreduce_world_prepare_fn)
			cuda_allreduce_world_prepare;
#endif
	return NULL;
}

static void reg_free(loom_reg_t *reg)
{
	cuda_allreduce_free(&g_reg);
	pthread_mutex_destroy(&g_reg.lock);
	memset(&g_reg, 0, sizeof(g_reg));
}

static const struct loom_reg_iface reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = reg_name,
	.get_dev_count = reg_dev_count,
	.get_dev = reg_dev,
	.get_proc_address = reg_proc_address,
	.free = reg_free,
};

static int cuda_init(loom_reg_t **out)
{
	int status;

	memset(&g_reg, 0, sizeof(g_reg));
	pthread_mutex_init(&g_reg.lock, NULL);
	status = loom_reg_new(&reg_iface, &g_reg, &g_reg.reg);
	if (status)
		return status;
	/* Without a driver or device the plugin loads with no devices. */
	if (probe() == LOOM_OK)
		g_reg.n_dev = probe_count;
	for (int i = 0; i < g_reg.n_dev; i++) {
		status = cuda_init_dev(&g_reg, i);
		if (status) {
			g_reg.n_dev = i;
			return status;
		}
	}
	status = loom_buffer_type_new(g_reg.reg, NULL, &cuda_host_buft_iface,
				      &g_reg, &g_reg.host_buft);
	if (status)
		return status;
	cuda_find_peers(&g_reg);
	cuda_init_features(&g_reg);
	*out = g_reg.reg;
	return LOOM_OK;
}

LOOM_PLUGIN_DEFINE(LOOM_GPU_NAME, PLUGIN_VERSION, cuda_init, cuda_score);
