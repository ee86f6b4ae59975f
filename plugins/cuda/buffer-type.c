/* SPDX-License-Identifier: MIT */
/* buffer-type.c - the CUDA plugin's buffer types: one per device (its
 * memory) and one of pinned host memory; they allocate the buffers of
 * buffer.c.
 */
#include <stdlib.h>

#include "cuda-plugin.h"

static const char *dev_buft_name(loom_buffer_type_t *buft)
{
	struct cuda_dev *cd = loom_buffer_type_context(buft);

	return cd->name;
}

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
	status = loom_buffer_new(buft, cd ? &cuda_dev_buffer_iface :
					    &cuda_host_buffer_iface,
				 cb, size, out);
	if (status)
		goto err_free_mem;
	return LOOM_OK;

err_free_mem:
	cuda_buffer_free_mem(cb);
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

const struct loom_buffer_type_iface cuda_dev_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = dev_buft_name,
	.alloc_buffer = dev_buft_alloc,
	.get_alignment = buft_alignment,
};

static bool host_buft_is_host(loom_buffer_type_t *buft)
{
	return true;
}

const struct loom_buffer_type_iface cuda_host_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = host_buft_name,
	.alloc_buffer = host_buft_alloc,
	.get_alignment = buft_alignment,
	.is_host = host_buft_is_host,
};
