/* SPDX-License-Identifier: MIT */
/* device.c - the CUDA plugin's devices: their description, memory and
 * capabilities, peer access between them, and what they run (the op
 * table is compute.c's).
 */
#include <stdio.h>

#include "cuda-plugin.h"

/* Finds which devices can reach another directly.  Only asks; creates no
 * context, so loading the plugin stays cheap. */
void cuda_find_peers(struct cuda_reg *reg)
{
	for (int i = 0; i < reg->n_dev; i++) {
		for (int j = 0; j < reg->n_dev; j++) {
			int can = 0;

			if (i != j &&
			    cudaDeviceCanAccessPeer(&can, reg->devs[i].id,
						    reg->devs[j].id) ==
				    cudaSuccess && can)
				reg->devs[i].peer = true;
			(void)cudaGetLastError();
		}
	}
}

/* Lets `to` read and write the memory of `from` directly, the first time
 * a copy between the pair is queued: enabling costs a context on both
 * devices, so pairs that never exchange data never pay for it.  A pair
 * that cannot be enabled still copies, staged by the runtime. */
void cuda_enable_peer(struct cuda_dev *from, struct cuda_dev *to)
{
	struct cuda_reg *reg = from->reg;
	int can = 0;
	cudaError_t err;

	pthread_mutex_lock(&reg->lock);
	if (reg->peer_tried[to->id][from->id])
		goto out_unlock;
	reg->peer_tried[to->id][from->id] = true;
	if (cudaDeviceCanAccessPeer(&can, to->id, from->id) != cudaSuccess ||
	    !can) {
		(void)cudaGetLastError();
		goto out_unlock;
	}
	if (cuda_use_dev(to) != LOOM_OK)
		goto out_unlock;
	err = cudaDeviceEnablePeerAccess(from->id, 0);
	if (err != cudaSuccess && err != cudaErrorPeerAccessAlreadyEnabled)
		loom_log(LOOM_LOG_INFO, "%s: no peer access %s -> %s: %s",
			 LOOM_GPU_NAME, to->name, from->name,
			 cudaGetErrorString(err));
	(void)cudaGetLastError();
out_unlock:
	pthread_mutex_unlock(&reg->lock);
}

static const char *dev_name(loom_dev_t *dev)
{
	struct cuda_dev *cd = loom_dev_context(dev);

	return cd->name;
}

static const char *dev_description(loom_dev_t *dev)
{
	struct cuda_dev *cd = loom_dev_context(dev);

	return cd->description;
}

static void dev_memory(loom_dev_t *dev, size_t *free_mem, size_t *total)
{
	struct cuda_dev *cd = loom_dev_context(dev);

	*free_mem = 0;
	*total = 0;
	if (cuda_use_dev(cd) != LOOM_OK || cudaMemGetInfo(free_mem, total) !=
					      cudaSuccess)
		(void)cudaGetLastError();
}

static enum loom_dev_type dev_type(loom_dev_t *dev)
{
	return LOOM_DEV_TYPE_GPU;
}

static enum loom_dev_rank dev_rank(loom_dev_t *dev)
{
	return LOOM_DEV_RANK_PRIMARY;
}

static uint32_t dev_caps(loom_dev_t *dev)
{
	struct cuda_dev *cd = loom_dev_context(dev);
	uint32_t caps = LOOM_DEV_CAP_ASYNC | LOOM_DEV_CAP_HOST_BUFFER |
			LOOM_DEV_CAP_EVENTS;

	if (cd->peer)
		caps |= LOOM_DEV_CAP_PEER_COPY;
	return caps;
}

static loom_buffer_type_t *dev_buffer_type(loom_dev_t *dev)
{
	struct cuda_dev *cd = loom_dev_context(dev);

	return cd->buft;
}

static bool dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	return cuda_supports_op(op);
}

static bool dev_supports_buft(loom_dev_t *dev, loom_buffer_type_t *buft)
{
	struct cuda_dev *cd = loom_dev_context(dev);

	return buft == cd->buft;
}

static const struct loom_dev_iface dev_iface = {
	.size = sizeof(struct loom_dev_iface),
	.get_name = dev_name,
	.get_description = dev_description,
	.get_memory = dev_memory,
	.get_type = dev_type,
	.get_caps = dev_caps,
	.init_backend = cuda_dev_init_backend,
	.get_buffer_type = dev_buffer_type,
	.supports_op = dev_supports_op,
	.supports_buft = dev_supports_buft,
	.event_new = cuda_dev_event_new,
	.event_free = cuda_dev_event_free,
	.event_synchronize = cuda_dev_event_synchronize,
	.get_rank = dev_rank,
};

int cuda_init_dev(struct cuda_reg *reg, int i)
{
	struct cuda_dev *cd = &reg->devs[i];
	struct cudaDeviceProp prop;
	int status;

	cd->reg = reg;
	cd->id = i;
	snprintf(cd->name, sizeof(cd->name), "%s%d", LOOM_GPU_NAME, i);
	if (cudaGetDeviceProperties(&prop, i) == cudaSuccess) {
		cd->cc = prop.major * 10 + prop.minor;
		snprintf(cd->description, sizeof(cd->description),
			 "%.200s (compute %d.%d, %d SMs, %zu MiB)", prop.name,
			 prop.major, prop.minor, prop.multiProcessorCount,
			 (size_t)(prop.totalGlobalMem >> 20));
	} else {
		(void)cudaGetLastError();
		snprintf(cd->description, sizeof(cd->description),
			 "%s device %d", LOOM_GPU_VENDOR, i);
	}
	status = loom_dev_new(reg->reg, &dev_iface, cd, &cd->dev);
	if (status)
		return status;
	return loom_buffer_type_new(reg->reg, cd->dev, &cuda_dev_buft_iface, cd,
			     &cd->buft);
}
