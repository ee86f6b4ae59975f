/* SPDX-License-Identifier: MIT */
/* plugin.c - the CUDA plugin's descriptor, registry entry, devices, buffer
 * types, buffers, backends (streams), events and entry points.  Kernels
 * live in ops-*.cu, graph dispatch in compute.c, the allreduce in
 * allreduce.c.  Built for HIP too, through cuda-compat.h.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-plugin.h"

#define PLUGIN_VERSION "0.1.0"

static struct cuda_reg g_reg;

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
static void warn_on(cudaError_t err, const char *what)
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
 * Buffers.  Device buffers hold cudaMalloc memory; host buffers pinned
 * memory from cudaMallocHost.
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
/* Selects cd and waits for everything queued on it. */
static int drain(const struct cuda_dev *cd)
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
	st = drain(dev);
	if (st)
		return st;
	return sync_legacy(cudaMemcpyAsync(dst, src, size, cudaMemcpyDefault,
					   0), "copy");
}

/* Frees cb's memory: device memory, or pinned host memory (no device). */
static void free_mem(struct cuda_buffer *cb)
{
	if (cb->dev) {
		/* Queued kernels may still use it. */
		if (drain(cb->dev) == LOOM_OK)
			warn_on(cudaFree(cb->ptr), "cannot free device memory");
	} else {
		warn_on(cudaFreeHost(cb->ptr), "cannot free pinned memory");
	}
}

static void buffer_free(loom_buffer_t *buf)
{
	struct cuda_buffer *cb = loom_buffer_context(buf);

	free_mem(cb);
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
	int st = drain(cb->dev);

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
static struct cuda_dev *buffer_dev(const struct loom_tensor *t)
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
	if (cuda_tensor_on_device(&g_reg, src)) {
		struct cuda_dev *sdev = buffer_dev(src);

		if (sdev == cb->dev)
			return copy_sync(cb->dev, dst->data, src->data, size);
		/* Both devices' queued work comes first. */
		st = drain(sdev);
		if (!st)
			st = drain(cb->dev);
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
	int st = drain(cb->dev);

	if (st)
		return st;
	return sync_legacy(cudaMemsetAsync(cb->ptr, value, cb->size, 0),
			   "clear");
}

static const struct loom_buffer_iface dev_buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buffer_free,
	.get_base = buffer_get_base,
	.memset_tensor = dev_buffer_memset,
	.set_tensor = dev_buffer_set,
	.get_tensor = dev_buffer_get,
	.copy_tensor = dev_buffer_cpy,
	.clear = dev_buffer_clear,
};

static const char *dev_buft_name(loom_buffer_type_t *buft)
{
	struct cuda_dev *cd = loom_buffer_type_context(buft);

	return cd->name;
}

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

static const struct loom_buffer_iface host_buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buffer_free,
	.get_base = buffer_get_base,
	.memset_tensor = host_buffer_memset,
	.set_tensor = host_buffer_set,
	.get_tensor = host_buffer_get,
	.clear = host_buffer_clear,
};

static const char *host_buft_name(loom_buffer_type_t *buft)
{
	return LOOM_GPU_NAME "_host";
}

/* Allocates a buffer of buft: size bytes of cd's memory, or of pinned
 * host memory when cd is NULL.  A zero-byte buffer still gets a real
 * address. */
static int buffer_alloc(loom_buffer_type_t *buft, struct cuda_dev *cd,
			size_t size, loom_buffer_t **out)
{
	struct cuda_buffer *cb;
	cudaError_t err;
	int status;

	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	cb->dev = cd;
	cb->size = size;
	if (cd) {
		status = cuda_use_dev(cd);
		if (status)
			goto err_free_cb;
		err = cudaMalloc(&cb->ptr, size ? size : 1);
	} else {
		err = cudaMallocHost(&cb->ptr, size ? size : 1);
	}
	if (err != cudaSuccess) {
		status = loom_error_set(!cd || err == cudaErrorMemoryAllocation ?
						LOOM_E_NOMEM : LOOM_E_DEVICE,
					"%s: cannot %s %zu bytes: %s",
					cd ? cd->name : host_buft_name(buft),
					cd ? "allocate" : "pin", size,
					cudaGetErrorString(err));
		(void)cudaGetLastError();
		goto err_free_cb;
	}
	status = loom_buffer_new(buft, cd ? &dev_buffer_iface :
					    &host_buffer_iface,
				 cb, size, out);
	if (status)
		goto err_free_mem;
	return LOOM_OK;

err_free_mem:
	free_mem(cb);
err_free_cb:
	free(cb);
	return status;
}

static int dev_buft_alloc(loom_buffer_type_t *buft, size_t size,
			  loom_buffer_t **out)
{
	return buffer_alloc(buft, loom_buffer_type_context(buft), size, out);
}

static int host_buft_alloc(loom_buffer_type_t *buft, size_t size,
			   loom_buffer_t **out)
{
	return buffer_alloc(buft, NULL, size, out);
}

static size_t buft_alignment(loom_buffer_type_t *buft)
{
	return CUDA_BUFFER_ALIGN;
}

static const struct loom_buffer_type_iface dev_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = dev_buft_name,
	.alloc_buffer = dev_buft_alloc,
	.get_alignment = buft_alignment,
};

static bool host_buft_is_host(loom_buffer_type_t *buft)
{
	return true;
}

static const struct loom_buffer_type_iface host_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = host_buft_name,
	.alloc_buffer = host_buft_alloc,
	.get_alignment = buft_alignment,
	.is_host = host_buft_is_host,
};

/* ------------------------------------------------------------------------
 * 2D copies: one cudaMemcpy2D for n_copies rows when the strides allow,
 * else a loop of 1D copies.
 */
#define MAX_PITCH ((size_t)INT32_MAX) /* cudaDevAttrMaxPitch on every GPU */

static bool pitch_ok(size_t size, size_t n_copies, size_t stride_tensor,
		     size_t stride_data)
{
	return n_copies > 1 && stride_tensor >= size && stride_data >= size &&
	       stride_tensor <= MAX_PITCH && stride_data <= MAX_PITCH;
}

/* Copies n_copies rows of size bytes between tensor memory at tdata and
 * host memory at data (into the tensor when set), each side with its own
 * stride, on stream; waits for it unless async. */
static int copy_2d(struct cuda_buffer *cb, cudaStream_t stream, bool async,
		   bool set, char *tdata, size_t stride_tensor, void *data,
		   size_t stride_data, size_t size, size_t n_copies)
{
	char *dst = set ? tdata : data;
	const char *src = set ? data : tdata;
	size_t dpitch = set ? stride_tensor : stride_data;
	size_t spitch = set ? stride_data : stride_tensor;
	cudaError_t err = cudaSuccess;
	int st;

	if (size == 0 || n_copies == 0)
		return LOOM_OK;
	if (!cb->dev) {
		/* Pinned host buffer (blocking calls only): the CPU copies. */
		for (size_t i = 0; i < n_copies; i++)
			memcpy(dst + i * dpitch, src + i * spitch, size);
		return LOOM_OK;
	}
	/* The blocking form is ordered after the device's queued work. */
	st = async ? cuda_use_dev(cb->dev) : drain(cb->dev);
	if (st)
		return st;
	if (pitch_ok(size, n_copies, dpitch, spitch)) {
		err = cudaMemcpy2DAsync(dst, dpitch, src, spitch, size,
					n_copies, cudaMemcpyDefault, stream);
	} else {
		for (size_t i = 0; i < n_copies && err == cudaSuccess; i++)
			err = cudaMemcpyAsync(dst + i * dpitch, src + i * spitch,
					      size, cudaMemcpyDefault, stream);
	}
	if (err == cudaSuccess && !async)
		err = cudaStreamSynchronize(stream);
	return cuda_error(err, "2D copy");
}

static int set_tensor_2d(loom_buffer_t *buf, struct loom_tensor *t,
			 const void *data, size_t offset, size_t size,
			 size_t n_copies, size_t stride_tensor,
			 size_t stride_data)
{
	return copy_2d(loom_buffer_context(buf), 0, false, true,
		       (char *)t->data + offset, stride_tensor, (void *)data,
		       stride_data, size, n_copies);
}

static int get_tensor_2d(loom_buffer_t *buf, const struct loom_tensor *t,
			 void *data, size_t offset, size_t size,
			 size_t n_copies, size_t stride_tensor,
			 size_t stride_data)
{
	return copy_2d(loom_buffer_context(buf), 0, false, false,
		       (char *)t->data + offset, stride_tensor, data,
		       stride_data, size, n_copies);
}

static int backend_synchronize(loom_backend_t *be);
static void enable_peer(struct cuda_dev *from, struct cuda_dev *to);

/* The async forms copy on the backend's stream; a tensor outside our
 * device memory takes the blocking path once the stream has drained.  t
 * is written only when set (it comes from set_tensor_2d_async then). */
static int copy_2d_async(loom_backend_t *be, const struct loom_tensor *t,
			 bool set, void *data, size_t offset, size_t size,
			 size_t n_copies, size_t stride_tensor,
			 size_t stride_data)
{
	struct cuda_backend *cbe = loom_backend_context(be);
	int st;

	if (cuda_tensor_on_device(&g_reg, t))
		return copy_2d(loom_buffer_context(t->buffer), cbe->stream,
			       true, set, (char *)t->data + offset,
			       stride_tensor, data, stride_data, size,
			       n_copies);
	st = backend_synchronize(be);
	if (st)
		return st;
	if (set)
		return loom_tensor_set_2d((struct loom_tensor *)t, data, offset,
					  size, n_copies, stride_tensor,
					  stride_data);
	return loom_tensor_get_2d(t, data, offset, size, n_copies,
				  stride_tensor, stride_data);
}

static int set_tensor_2d_async(loom_backend_t *be, struct loom_tensor *t,
			       const void *data, size_t offset, size_t size,
			       size_t n_copies, size_t stride_tensor,
			       size_t stride_data)
{
	return copy_2d_async(be, t, true, (void *)data, offset, size,
			     n_copies, stride_tensor, stride_data);
}

static int get_tensor_2d_async(loom_backend_t *be,
			       const struct loom_tensor *t, void *data,
			       size_t offset, size_t size, size_t n_copies,
			       size_t stride_tensor, size_t stride_data)
{
	return copy_2d_async(be, t, false, data, offset, size, n_copies,
			     stride_tensor, stride_data);
}

/* ------------------------------------------------------------------------
 * Backends: one non-blocking stream each.
 */
void *cuda_scratch(struct cuda_backend *be, int slot, size_t size)
{
	cudaError_t err;
	size_t want;

	if (size <= be->scratch_size[slot])
		return be->scratch[slot];
	if (be->capturing) {
		/* A captured graph would keep the old block's address. */
		be->capture_broken = true;
		loom_error_set(LOOM_E_STATE, "%s: scratch cannot grow while "
			       "a graph is captured", be->dev->name);
		return NULL;
	}
	be->scratch_gen++;
	/* Work still in flight may use the old block. */
	err = cudaStreamSynchronize(be->stream);
	if (err != cudaSuccess) {
		cuda_error(err, "synchronize");
		return NULL;
	}
	warn_on(cudaFree(be->scratch[slot]), "cannot free scratch memory");
	be->scratch[slot] = NULL;
	be->scratch_size[slot] = 0;
	want = size + size / 4;
	err = cudaMalloc(&be->scratch[slot], want);
	if (err != cudaSuccess) {
		loom_error_set(LOOM_E_NOMEM,
			       "%s: cannot allocate %zu bytes of scratch: %s",
			       be->dev->name, want, cudaGetErrorString(err));
		(void)cudaGetLastError();
		be->scratch[slot] = NULL;
		return NULL;
	}
	be->scratch_size[slot] = want;
	return be->scratch[slot];
}

int32_t *cuda_host_small(struct cuda_backend *be, size_t n)
{
	cudaError_t err;

	if (n <= be->host_small_n)
		return be->host_small;
	err = cudaStreamSynchronize(be->stream);
	if (err != cudaSuccess) {
		cuda_error(err, "synchronize");
		return NULL;
	}
	warn_on(cudaFreeHost(be->host_small), "cannot free pinned memory");
	be->host_small = NULL;
	be->host_small_n = 0;
	err = cudaMallocHost((void **)&be->host_small, n * sizeof(int32_t));
	if (err != cudaSuccess) {
		loom_error_set(LOOM_E_NOMEM, "%s: cannot pin %zu bytes: %s",
			       be->dev->name, n * sizeof(int32_t),
			       cudaGetErrorString(err));
		(void)cudaGetLastError();
		be->host_small = NULL;
		return NULL;
	}
	be->host_small_n = n;
	return be->host_small;
}

void cuda_note_path(struct cuda_backend *be, enum cuda_path p)
{
	static const char *const names[CUDA_PATH_COUNT] = {
		[CUDA_PATH_MMV_Q] = "gemv-quantized (dp4a)",
		[CUDA_PATH_MMV_F] = "gemv-float",
		[CUDA_PATH_DEQUANT_BLAS] = "dequantize-blas",
		[CUDA_PATH_GQA_MERGED] = "broadcast-merged",
		[CUDA_PATH_GQA_PTRS] = "broadcast-pointer-array",
		[CUDA_PATH_MOE_GROUPED] = "experts-grouped",
		[CUDA_PATH_MOE_DOT] = "experts-dot",
		[CUDA_PATH_GRAPH_CAPTURE] = "graph-capture",
		[CUDA_PATH_GRAPH_UPDATE] = "graph-update",
		[CUDA_PATH_GRAPH_REPLAY] = "graph-replay",
	};

	if (be->paths_noted & (1u << p))
		return;
	be->paths_noted |= 1u << p;
	loom_log(LOOM_LOG_INFO, "%s: path %s", be->name, names[p]);
}

static const char *backend_name(loom_backend_t *be)
{
	struct cuda_backend *cbe = loom_backend_context(be);

	return cbe->name;
}

static void backend_free(loom_backend_t *be)
{
	struct cuda_backend *cbe = loom_backend_context(be);

	if (cuda_use_dev(cbe->dev) == LOOM_OK) {
		warn_on(cudaStreamSynchronize(cbe->stream), "synchronize");
		cuda_graphs_free(cbe);
		warn_on(cudaFreeHost(cbe->host_small),
			"cannot free pinned memory");
		for (int i = 0; i < CUDA_SCRATCH_COUNT; i++)
			warn_on(cudaFree(cbe->scratch[i]),
				"cannot free scratch memory");
#ifdef LOOM_HAVE_BLAS
		cuda_blas_destroy(cbe);
#endif
		warn_on(cudaEventDestroy(cbe->copy_done),
			"cannot destroy an event");
		warn_on(cudaStreamDestroy(cbe->stream),
			"cannot destroy a stream");
	}
	free(cbe);
}

/* Async transfers are 2D ones of a single row. */
static int backend_set_async(loom_backend_t *be, struct loom_tensor *t,
			     const void *data, size_t offset, size_t size)
{
	return set_tensor_2d_async(be, t, data, offset, size, 1, size, size);
}

static int backend_get_async(loom_backend_t *be, const struct loom_tensor *t,
			     void *data, size_t offset, size_t size)
{
	return get_tensor_2d_async(be, t, data, offset, size, 1, size, size);
}

bool cuda_backend_is_ours(loom_backend_t *be)
{
	return loom_dev_reg(loom_backend_device(be)) == g_reg.reg;
}

/* Copies between two of our devices without blocking the host: the source
 * stream waits for the destination's earlier work, copies, and the
 * destination stream waits for the copy.  A source outside be_src's
 * device is declined (the core then copies blocking): the peer copy names
 * the devices, and its stream must order the source's writes. */
static int backend_cpy_async(loom_backend_t *be_src, loom_backend_t *be_dst,
			     const struct loom_tensor *src,
			     struct loom_tensor *dst)
{
	struct cuda_backend *s, *d;
	size_t size = loom_tensor_n_bytes(src);
	cudaError_t err;
	int st;

	if (!cuda_backend_is_ours(be_src) ||
	    !cuda_backend_is_ours(be_dst) ||
	    !cuda_tensor_on_device(&g_reg, src) ||
	    !cuda_tensor_on_device(&g_reg, dst) || size != loom_tensor_n_bytes(dst))
		return LOOM_E_DECLINED;
	s = loom_backend_context(be_src);
	d = loom_backend_context(be_dst);
	if (buffer_dev(src) != s->dev || buffer_dev(dst) != d->dev)
		return LOOM_E_DECLINED;
	if (size == 0)
		return LOOM_OK;
	if (s == d) {
		st = cuda_use_dev(s->dev);
		if (st)
			return st;
		err = cudaMemcpyAsync(dst->data, src->data, size,
				      cudaMemcpyDefault, s->stream);
		return cuda_error(err, "copy");
	}
	if (s->dev != d->dev)
		enable_peer(s->dev, d->dev);
	st = cuda_use_dev(d->dev);
	if (st)
		return st;
	err = cudaEventRecord(d->copy_done, d->stream);
	if (err != cudaSuccess)
		return cuda_error(err, "event record");
	st = cuda_use_dev(s->dev);
	if (st)
		return st;
	err = cudaStreamWaitEvent(s->stream, d->copy_done, 0);
	if (err != cudaSuccess)
		return cuda_error(err, "stream wait");
	if (s->dev == d->dev)
		err = cudaMemcpyAsync(dst->data, src->data, size,
				      cudaMemcpyDefault, s->stream);
	else
		err = cudaMemcpyPeerAsync(dst->data, d->dev->id, src->data,
					  s->dev->id, size, s->stream);
	if (err != cudaSuccess)
		return cuda_error(err, "peer copy");
	err = cudaEventRecord(s->copy_done, s->stream);
	if (err != cudaSuccess)
		return cuda_error(err, "event record");
	st = cuda_use_dev(d->dev);
	if (st)
		return st;
	err = cudaStreamWaitEvent(d->stream, s->copy_done, 0);
	return cuda_error(err, "stream wait");
}

static int backend_synchronize(loom_backend_t *be)
{
	struct cuda_backend *cbe = loom_backend_context(be);
	int st = cuda_use_dev(cbe->dev);

	if (st)
		return st;
	return cuda_error(cudaStreamSynchronize(cbe->stream), "synchronize");
}

static int backend_graph_compute(loom_backend_t *be, loom_graph_t *g)
{
	return cuda_graph_compute(loom_backend_context(be), g);
}

static int backend_event_record(loom_backend_t *be, loom_event_t *ev)
{
	struct cuda_backend *cbe = loom_backend_context(be);
	int st = cuda_use_dev(cbe->dev);

	if (st)
		return st;
	return cuda_error(cudaEventRecord((cudaEvent_t)loom_event_context(ev),
					  cbe->stream), "event record");
}

static int backend_event_wait(loom_backend_t *be, loom_event_t *ev)
{
	struct cuda_backend *cbe = loom_backend_context(be);
	int st = cuda_use_dev(cbe->dev);

	if (st)
		return st;
	return cuda_error(cudaStreamWaitEvent(cbe->stream,
					      (cudaEvent_t)loom_event_context(ev),
					      0), "event wait");
}

static const struct loom_backend_iface backend_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = backend_name,
	.free = backend_free,
	.set_tensor_async = backend_set_async,
	.get_tensor_async = backend_get_async,
	.copy_tensor_async = backend_cpy_async,
	.synchronize = backend_synchronize,
	.graph_compute = backend_graph_compute,
	.event_record = backend_event_record,
	.event_wait = backend_event_wait,
};

/* ------------------------------------------------------------------------
 * Devices.
 */
/* Finds which devices can reach another directly.  Only asks; creates no
 * context, so loading the plugin stays cheap. */
static void find_peers(struct cuda_reg *reg)
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
static void enable_peer(struct cuda_dev *from, struct cuda_dev *to)
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

/* True when CUDA graphs are asked off: LOOM_CUDA_GRAPH=off (or 0), or
 * "graph=off" in params. */
static bool graphs_off(const char *params)
{
	const char *env = loom_env_get("LOOM_CUDA_GRAPH");

#if defined(LOOM_HIP) || CUDART_VERSION < 12000
	(void)env;
	(void)params;
	return true; /* see capture.c */
#else
	return (env && (!strcmp(env, "off") || !strcmp(env, "0"))) ||
	       (params && strstr(params, "graph=off"));
#endif
}

/* params may hold "gemm=own" to use the plugin's own GEMM kernel instead
 * of the BLAS (LOOM_CUDA_GEMM=own does the same for every backend), and
 * "graph=off" to enqueue every graph node by node (LOOM_CUDA_GRAPH=off). */
static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	struct cuda_dev *cd = loom_dev_context(dev);
	struct cuda_backend *cbe;
	const char *env = loom_env_get("LOOM_CUDA_GEMM");
	cudaError_t err;
	int status;

	cbe = calloc(1, sizeof(*cbe));
	if (!cbe)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	cbe->dev = cd;
	snprintf(cbe->name, sizeof(cbe->name), "%s", cd->name);
#ifdef LOOM_HAVE_BLAS
	cbe->own_gemm = (env && strcmp(env, "own") == 0) ||
			(params && strstr(params, "gemm=own"));
#else
	(void)env;
	cbe->own_gemm = true;
#endif
	status = cuda_use_dev(cd);
	if (status)
		goto err_free_cbe;
	err = cudaStreamCreateWithFlags(&cbe->stream, cudaStreamNonBlocking);
	if (err != cudaSuccess) {
		status = cuda_error(err, "cannot create a stream");
		goto err_free_cbe;
	}
	err = cudaEventCreateWithFlags(&cbe->copy_done,
				       cudaEventDisableTiming);
	if (err != cudaSuccess) {
		status = cuda_error(err, "cannot create an event");
		goto err_free_stream;
	}
#ifdef LOOM_HAVE_BLAS
	status = cuda_blas_create(cbe);
	if (status)
		goto err_free_event;
#endif
	if (!graphs_off(params)) {
		status = cuda_graphs_new(cbe);
		if (status)
			goto err_free_blas;
	}
	status = loom_backend_new(dev, &backend_iface, cbe, out);
	if (status)
		goto err_free_graphs;
	return LOOM_OK;

err_free_graphs:
	cuda_graphs_free(cbe);
err_free_blas:
#ifdef LOOM_HAVE_BLAS
	cuda_blas_destroy(cbe);
err_free_event:
#endif
	cudaEventDestroy(cbe->copy_done);
err_free_stream:
	cudaStreamDestroy(cbe->stream);
err_free_cbe:
	free(cbe);
	return status;
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

static int dev_event_new(loom_dev_t *dev, loom_event_t *ev)
{
	struct cuda_dev *cd = loom_dev_context(dev);
	cudaEvent_t e;
	cudaError_t err;
	int st = cuda_use_dev(cd);

	if (st)
		return st;
	err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
	if (err != cudaSuccess)
		return cuda_error(err, "cannot create an event");
	loom_event_set_context(ev, (void *)e);
	return LOOM_OK;
}

static void dev_event_free(loom_dev_t *dev, loom_event_t *ev)
{
	struct cuda_dev *cd = loom_dev_context(dev);

	if (cuda_use_dev(cd) == LOOM_OK)
		warn_on(cudaEventDestroy((cudaEvent_t)loom_event_context(ev)),
			"cannot destroy an event");
}

static int dev_event_synchronize(loom_dev_t *dev, loom_event_t *ev)
{
	cudaError_t err;

	err = cudaEventSynchronize((cudaEvent_t)loom_event_context(ev));
	return cuda_error(err, "event sync");
}

static const struct loom_dev_iface dev_iface = {
	.size = sizeof(struct loom_dev_iface),
	.get_name = dev_name,
	.get_description = dev_description,
	.get_memory = dev_memory,
	.get_type = dev_type,
	.get_caps = dev_caps,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_buffer_type,
	.supports_op = dev_supports_op,
	.supports_buft = dev_supports_buft,
	.event_new = dev_event_new,
	.event_free = dev_event_free,
	.event_synchronize = dev_event_synchronize,
	.get_rank = dev_rank,
};

/* ------------------------------------------------------------------------
 * Registry entry and entry points.
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
		return (void *)(loom_set_tensor_2d_fn)set_tensor_2d;
	if (!strcmp(name, LOOM_PROC_GET_TENSOR_2D))
		return (void *)(loom_get_tensor_2d_fn)get_tensor_2d;
	if (!strcmp(name, LOOM_PROC_SET_TENSOR_2D_ASYNC))
		return (void *)(loom_set_tensor_2d_async_fn)set_tensor_2d_async;
	if (!strcmp(name, LOOM_PROC_GET_TENSOR_2D_ASYNC))
		return (void *)(loom_get_tensor_2d_async_fn)get_tensor_2d_async;
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

static void add_feature(struct cuda_reg *reg, const char *name,
			const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Appends a name/value pair to the "get_features" list. */
static void add_feature(struct cuda_reg *reg, const char *name,
			const char *fmt, ...)
{
	int n = 0;
	va_list ap;

	while (reg->features[n].name)
		n++;
	if (n >= CUDA_MAX_FEATURES)
		return;
	snprintf(reg->feature_text[n][0], sizeof(reg->feature_text[n][0]),
		 "%s", name);
	va_start(ap, fmt);
	vsnprintf(reg->feature_text[n][1], sizeof(reg->feature_text[n][1]),
		  fmt, ap);
	va_end(ap);
	reg->features[n].name = reg->feature_text[n][0];
	reg->features[n].value = reg->feature_text[n][1];
}

static int dev_attr(int id, enum cudaDeviceAttr attr)
{
	int v = 0;

	if (cudaDeviceGetAttribute(&v, attr, id) != cudaSuccess) {
		(void)cudaGetLastError();
		v = 0;
	}
	return v;
}

/* Dense BF16 tensor-core FLOPs per SM per clock, for the peak figure. */
static int bf16_flops_per_clock(int cc)
{
#ifdef LOOM_HIP
	return 0;
#else
	switch (cc / 10) {
	case 8:
		return cc == 80 ? 2048 : 1024;
	case 9:
		return 4096;
	case 10:
		return 8192;
	default:
		return 0;
	}
#endif
}

/* What loom-info and loom-bench show: versions, what was built in, and
 * each device's memory bandwidth and BF16 peak (at the boost clock). */
static void init_features(struct cuda_reg *reg)
{
	int v = 0;

	memset(reg->features, 0, sizeof(reg->features));
	if (cudaRuntimeGetVersion(&v) == cudaSuccess)
		add_feature(reg, "runtime", "%d", v);
	v = 0;
	if (cudaDriverGetVersion(&v) == cudaSuccess)
		add_feature(reg, "driver", "%d", v);
	(void)cudaGetLastError();
#ifdef LOOM_GPU_ARCHS
	add_feature(reg, "archs", "%s", LOOM_GPU_ARCHS);
#endif
#ifdef LOOM_HAVE_BLAS
	add_feature(reg, "blas", "%s", LOOM_GPU_BLAS);
#else
	add_feature(reg, "blas", "none (own GEMM kernel)");
#endif
#ifdef LOOM_HAVE_NCCL
	add_feature(reg, "allreduce", "%s %d.%d.%d", LOOM_GPU_CCL, NCCL_MAJOR,
		    NCCL_MINOR, NCCL_PATCH);
#else
	add_feature(reg, "allreduce", "none");
#endif
	for (int i = 0; i < reg->n_dev; i++) {
		struct cuda_dev *cd = &reg->devs[i];
		char name[48];
		double mem_khz = dev_attr(cd->id, cudaDevAttrMemoryClockRate);
		double bus = dev_attr(cd->id, cudaDevAttrGlobalMemoryBusWidth);
		double khz = dev_attr(cd->id, cudaDevAttrClockRate);
		double sms = dev_attr(cd->id, cudaDevAttrMultiProcessorCount);
		int per_clock = bf16_flops_per_clock(cd->cc);

		if (mem_khz > 0 && bus > 0) {
			snprintf(name, sizeof(name), "%s.mem_bandwidth_gbs",
				 cd->name);
			add_feature(reg, name, "%.0f",
				    2.0 * mem_khz * 1e3 * bus / 8 / 1e9);
		}
		if (khz > 0) {
			snprintf(name, sizeof(name), "%s.clock_mhz", cd->name);
			add_feature(reg, name, "%.0f", khz / 1e3);
		}
		if (per_clock && khz > 0 && sms > 0) {
			snprintf(name, sizeof(name), "%s.peak_bf16_tflops",
				 cd->name);
			add_feature(reg, name, "%.0f",
				    sms * khz * 1e3 * per_clock / 1e12);
		}
	}
}

static int init_dev(struct cuda_reg *reg, int i)
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
	return loom_buffer_type_new(reg->reg, cd->dev, &dev_buft_iface, cd,
			     &cd->buft);
}

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
		status = init_dev(&g_reg, i);
		if (status) {
			g_reg.n_dev = i;
			return status;
		}
	}
	status = loom_buffer_type_new(g_reg.reg, NULL, &host_buft_iface, &g_reg,
			       &g_reg.host_buft);
	if (status)
		return status;
	find_peers(&g_reg);
	init_features(&g_reg);
	*out = g_reg.reg;
	return LOOM_OK;
}

LOOM_PLUGIN_DEFINE(LOOM_GPU_NAME, PLUGIN_VERSION, cuda_init, cuda_score);
