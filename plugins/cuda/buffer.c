/* SPDX-License-Identifier: MIT */
/* buffer.c - the CUDA plugin's buffers.  Device buffers hold cudaMalloc
 * memory; host buffers pinned memory from cudaMallocHost.
 *
 * The blocking calls (set, get, memset, clear, copy) are ordered after
 * all work queued before them on any backend of the device: backends run
 * on non-blocking streams, which the legacy stream does not wait for, so
 * each blocking call first drains the device, then copies and waits.  A
 * blocking get after an async compute therefore reads the result, and a
 * blocking set never overwrites data a queued kernel still reads.
 * Directions are left to the runtime (cudaMemcpyDefault: unified
 * addressing knows device, pinned and pageable memory apart).
 */
#include <stdlib.h>
#include <string.h>

#include "cuda-plugin.h"

/* Selects cd and waits for everything queued on it. */
int cuda_drain(const struct cuda_dev *cd)
{
	int st = cuda_use_dev(cd);

	if (st)
		return st;
	return cuda_error(cudaDeviceSynchronize(), "synchronize");
}

/* Waits for the legacy stream once err's call succeeded. */
static int sync_legacy(cudaError_t err, const char *what)
{
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(0);
	return cuda_error(err, what);
}

static int copy_sync(const struct cuda_dev *dev, void *dst, const void *src,
		     size_t size)
{
	int st;

	if (size == 0)
		return LOOM_OK;
	st = cuda_drain(dev);
	if (st)
		return st;
	return sync_legacy(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault,
					   0), "copy");
}

/* Frees cb's memory: device memory, or pinned host memory (no device). */
void cuda_buffer_free_mem(struct cuda_buffer *cb)
{
	if (cb->dev) {
		/* Queued kernels may still use it. */
		if (cuda_drain(cb->dev) == LOOM_OK)
			cuda_warn_on(cudaFree(cb->ptr),
				     "cannot free device memory");
	} else {
		cuda_warn_on(cudaFreeHost(cb->ptr),
			     "cannot free pinned memory");
	}
}

static void buffer_free(loom_buffer_t *buf)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);

	cuda_buffer_free_mem(cb);
	free(cb);
}

static void *buffer_get_base(loom_buffer_t *buf)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);

	return cb->ptr;
}

static int dev_buffer_memset(loom_buffer_t *buf, struct loom_tensor *t,
			     uint8_t value, size_t offset, size_t size)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);
	int st = cuda_drain(cb->dev);

	if (st)
		return st;
	return sync_legacy(cudaMemsetAsync((char *)t->data + offset, value,
					   size, 0), "memset");
}

static int dev_buffer_set(loom_buffer_t *buf, struct loom_tensor *t,
			  const void *data, size_t offset, size_t size)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);

	return copy_sync(cb->dev, (char *)t->data + offset, data, size);
}

static int dev_buffer_get(loom_buffer_t *buf, const struct loom_tensor *t,
			  void *data, size_t offset, size_t size)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);

	return copy_sync(cb->dev, data, (const char *)t->data + offset, size);
}

static bool buft_is_ours_device(const struct cuda_reg *reg,
				loom_buffer_type_t *buft)
{
	for (int i = 0; i < reg->n_dev; i++)
		if (reg->devs[i].buft == buft)
			return true;
	return false;
}

bool cuda_tensor_on_device(const struct cuda_reg *reg,
			   const struct loom_tensor *t)
{
	return t->buffer &&
	       buft_is_ours_device(reg, loom_buffer_get_type(t->buffer));
}

/* The device whose memory holds t (a tensor in one of our buffers). */
struct cuda_dev *cuda_buffer_dev(const struct loom_tensor *t)
{
	struct cuda_buffer *cb = loom_buffer_context(t->buffer);

	return cb->dev;
}

/* Copies into this device buffer from another of our device buffers (peer
 * or same device) or from host memory; anything else is declined. */
static int dev_buffer_cpy(loom_buffer_t *buf, const struct loom_tensor *src,
			  struct loom_tensor *dst)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);
	size_t size = loom_tensor_n_bytes(src);
	int st;

	if (size != loom_tensor_n_bytes(dst) || !src->buffer)
		return LOOM_E_DECLINED;
	if (cuda_tensor_on_device(cb->dev->reg, src)) {
		struct cuda_dev *sdev = cuda_buffer_dev(src);

		if (sdev == cb->dev)
			return copy_sync(cb->dev, dst->data, src->data, size);
		/* Both devices' queued work comes first. */
		st = cuda_drain(sdev);
		if (!st)
			st = cuda_drain(cb->dev);
		if (st)
			return st;
		return sync_legacy(cudaMemcpyPeerAsync(dst->data, cb->dev->id,
						       src->data, sdev->id,
						       size, 0), "peer copy");
	}
	if (loom_buffer_type_is_host(loom_buffer_get_type(src->buffer)))
		return copy_sync(cb->dev, dst->data, src->data, size);
	return LOOM_E_DECLINED;
}

static int dev_buffer_clear(loom_buffer_t *buf, uint8_t value)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);
	int st = cuda_drain(cb->dev);

	if (st)
		return st;
	return sync_legacy(cudaMemsetAsync(cb->ptr, value, cb->size, 0),
			   "clear");
}

const struct loom_buffer_iface cuda_dev_buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buffer_free,
	.get_base = buffer_get_base,
	.memset_tensor = dev_buffer_memset,
	.set_tensor = dev_buffer_set,
	.get_tensor = dev_buffer_get,
	.copy_tensor = dev_buffer_cpy,
	.clear = dev_buffer_clear,
};

/* Pinned host memory. */
static int host_buffer_memset(loom_buffer_t *buf, struct loom_tensor *t,
			      uint8_t value, size_t offset, size_t size)
{
	memset((char *)t->data + offset, value, size);
	return LOOM_OK;
}

static int host_buffer_set(loom_buffer_t *buf, struct loom_tensor *t,
			   const void *data, size_t offset, size_t size)
{
	memcpy((char *)t->data + offset, data, size);
	return LOOM_OK;
}

static int host_buffer_get(loom_buffer_t *buf, const struct loom_tensor *t,
			   void *data, size_t offset, size_t size)
{
	memcpy(data, (const char *)t->data + offset, size);
	return LOOM_OK;
}

static int host_buffer_clear(loom_buffer_t *buf, uint8_t value)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);

	memset(cb->ptr, value, cb->size);
	return LOOM_OK;
}

const struct loom_buffer_iface cuda_host_buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buffer_free,
	.get_base = buffer_get_base,
	.memset_tensor = host_buffer_memset,
	.set_tensor = host_buffer_set,
	.get_tensor = host_buffer_get,
	.clear = host_buffer_clear,
};
