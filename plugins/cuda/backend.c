/* SPDX-License-Identifier: MIT */
/* backend.c - the CUDA plugin's backends: one non-blocking stream each,
 * with its scratch memory, its transfers and copies, and graph compute
 * (compute.c, capture.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda-plugin.h"

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
		be->capture_grow = true;
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
	cuda_warn_on(cudaFree(be->scratch[slot]),
		     "cannot free scratch memory");
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
	cuda_warn_on(cudaFreeHost(be->host_small),
		     "cannot free pinned memory");
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
		cuda_warn_on(cudaStreamSynchronize(cbe->stream),
			     "synchronize");
		cuda_graphs_free(cbe);
		cuda_warn_on(cudaFreeHost(cbe->host_small),
			     "cannot free pinned memory");
		for (int i = 0; i < CUDA_SCRATCH_COUNT; i++)
			cuda_warn_on(cudaFree(cbe->scratch[i]),
				     "cannot free scratch memory");
#ifdef LOOM_HAVE_BLAS
		cuda_blas_destroy(cbe);
#endif
		cuda_warn_on(cudaEventDestroy(cbe->copy_done),
			     "cannot destroy an event");
		cuda_warn_on(cudaStreamDestroy(cbe->stream),
			     "cannot destroy a stream");
	}
	free(cbe);
}

/* Async transfers are 2D ones of a single row. */
static int backend_set_async(loom_backend_t *be, struct loom_tensor *t,
			     const void *data, size_t offset, size_t size)
{
	return cuda_set_tensor_2d_async(be, t, data, offset, size, 1, size,
					size);
}

static int backend_get_async(loom_backend_t *be, const struct loom_tensor *t,
			     void *data, size_t offset, size_t size)
{
	return cuda_get_tensor_2d_async(be, t, data, offset, size, 1, size,
					size);
}

bool cuda_backend_is_ours(loom_backend_t *be)
{
	return cuda_reg_is_ours(loom_dev_reg(loom_backend_device(be)));
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

	if (!cuda_backend_is_ours(be_src) || !cuda_backend_is_ours(be_dst))
		return LOOM_E_DECLINED;
	s = loom_backend_context(be_src);
	d = loom_backend_context(be_dst);
	if (!cuda_tensor_on_device(s->dev->reg, src) ||
	    !cuda_tensor_on_device(s->dev->reg, dst) ||
	    size != loom_tensor_n_bytes(dst))
		return LOOM_E_DECLINED;
	if (cuda_buffer_dev(src) != s->dev || cuda_buffer_dev(dst) != d->dev)
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
		cuda_enable_peer(s->dev, d->dev);
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

int cuda_backend_synchronize(loom_backend_t *be)
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

static const struct loom_backend_iface backend_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = backend_name,
	.free = backend_free,
	.set_tensor_async = backend_set_async,
	.get_tensor_async = backend_get_async,
	.copy_tensor_async = backend_cpy_async,
	.synchronize = cuda_backend_synchronize,
	.graph_compute = backend_graph_compute,
	.event_record = cuda_backend_event_record,
	.event_wait = cuda_backend_event_wait,
};

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
int cuda_dev_init_backend(loom_dev_t *dev, const char *params,
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
