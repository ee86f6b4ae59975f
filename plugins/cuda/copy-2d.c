/* SPDX-License-Identifier: MIT */
/* copy-2d.c - the CUDA plugin's 2D copies between tensors and host
 * memory (blocking and on a backend's stream): one cudaMemcpy2D for
 * n_copies rows when the strides allow, else a loop of 1D copies.
 */
#include <string.h>

#include "cuda-plugin.h"

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
	st = async ? cuda_use_dev(cb->dev) : cuda_drain(cb->dev);
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

int cuda_set_tensor_2d(loom_buffer_t *buf, struct loom_tensor *t,
		       const void *data, size_t offset, size_t size,
		       size_t n_copies, size_t stride_tensor,
		       size_t stride_data)
{
	return copy_2d(loom_buffer_context(buf), 0, false, true,
		       (char *)t->data + offset, stride_tensor, (void *)data,
		       stride_data, size, n_copies);
}

int cuda_get_tensor_2d(loom_buffer_t *buf, const struct loom_tensor *t,
		       void *data, size_t offset, size_t size,
		       size_t n_copies, size_t stride_tensor,
		       size_t stride_data)
{
	return copy_2d(loom_buffer_context(buf), 0, false, false,
		       (char *)t->data + offset, stride_tensor, data,
		       stride_data, size, n_copies);
}

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

	if (cuda_tensor_on_device(cbe->dev->reg, t))
		return copy_2d(loom_buffer_context(t->buffer), cbe->stream,
			       true, set, (char *)t->data + offset,
			       stride_tensor, data, stride_data, size,
			       n_copies);
	st = cuda_backend_synchronize(be);
	if (st)
		return st;
	if (set)
		return loom_tensor_set_2d((struct loom_tensor *)t, data, offset,
					  size, n_copies, stride_tensor,
					  stride_data);
	return loom_tensor_get_2d(t, data, offset, size, n_copies,
				  stride_tensor, stride_data);
}

int cuda_set_tensor_2d_async(loom_backend_t *be, struct loom_tensor *t,
			     const void *data, size_t offset, size_t size,
			     size_t n_copies, size_t stride_tensor,
			     size_t stride_data)
{
	return copy_2d_async(be, t, true, (void *)data, offset, size,
			     n_copies, stride_tensor, stride_data);
}

int cuda_get_tensor_2d_async(loom_backend_t *be,
			     const struct loom_tensor *t, void *data,
			     size_t offset, size_t size, size_t n_copies,
			     size_t stride_tensor, size_t stride_data)
{
	return copy_2d_async(be, t, false, data, offset, size, n_copies,
			     stride_tensor, stride_data);
}
