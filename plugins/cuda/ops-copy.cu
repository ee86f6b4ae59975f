/* SPDX-License-Identifier: MIT */
/* ops-copy.cu - copy and cont (any layout, F32/F16/BF16/Q8_0 converted
 * among themselves, any type to itself), concat, and the conversions other
 * files need: a tensor to a contiguous float type, F32 <-> BF16.
 */
#include "ops-common.cuh"

/* Copies one block (or element) of size bytes; both sides are at least
 * 2-byte aligned (Q8_0 blocks are 34 bytes). */
__device__ __forceinline__ void copy_unit(char *dst, const char *src,
					  int size)
{
	switch (size) {
	case 4:
		*(uint32_t *)dst = *(const uint32_t *)src;
		break;
	case 2:
		*(uint16_t *)dst = *(const uint16_t *)src;
		break;
	default:
		for (int j = 0; j < size / 2; j++)
			((uint16_t *)dst)[j] = ((const uint16_t *)src)[j];
		break;
	}
}

/* The address of unit u (in dimension-0 units of blck) of v's logical
 * order. */
__device__ __forceinline__ char *unit_ptr(const tview &v, int64_t u,
					  int blck)
{
	int64_t ne[4] = { v.ne[0] / blck, v.ne[1], v.ne[2], v.ne[3] };
	int64_t i0, i1, i2, i3;

	unravel(u, ne, &i0, &i1, &i2, &i3);
	return row_ptr(v, i1, i2, i3) + i0 * v.nb[0];
}

__global__ void copy_same_kernel(tview dst, tview src, int blck, int size,
				 int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		copy_unit(unit_ptr(dst, i, blck), unit_ptr(src, i, blck), size);
}

/* A packed copy of n 16-byte units: what cudaMemcpyAsync does between
 * two places in device memory, at a higher share of the memory's
 * bandwidth (two units in flight per thread). */
__global__ void copy_16_kernel(uint4 *dst, const uint4 *src, int64_t n)
{
	int64_t step = (int64_t)gridDim.x * blockDim.x;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += 2 * step) {
		uint4 x = src[i];

		if (i + step < n) {
			uint4 y = src[i + step];

			dst[i + step] = y;
		}
		dst[i] = x;
	}
}

/* Element-wise conversion into a non-quantized type; flat when both are
 * packed. */
__global__ void convert_kernel(tview dst, tview src, bool flat, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t i0, i1, i2, i3, j0, j1, j2, j3;

		if (flat) {
			store_row(dst.data, dst, i, load_row(src.data, src, i));
			continue;
		}
		unravel(i, src.ne, &i0, &i1, &i2, &i3);
		unravel(i, dst.ne, &j0, &j1, &j2, &j3);
		store_row(row_ptr(dst, j1, j2, j3), dst, j0,
			  load_at(src, i0, i1, i2, i3));
	}
}

/* Quantization into Q8_0: one thread per destination block. */
__global__ void quantize_kernel(tview dst, tview src, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float tmp[LOOM_QK8_0];

		for (int j = 0; j < LOOM_QK8_0; j++) {
			int64_t i0, i1, i2, i3;

			unravel(i * LOOM_QK8_0 + j, src.ne, &i0, &i1, &i2, &i3);
			tmp[j] = load_at(src, i0, i1, i2, i3);
		}
		quantize_q8_0(tmp, (struct loom_block_q8_0 *)unit_ptr(
					   dst, i, LOOM_QK8_0));
	}
}

/* Copies src into dst (same element count) converting type and layout. */
static int copy_view(const struct cuda_backend *be, const tview &dst,
		     const tview &src)
{
	int64_t n = view_nelements(src);
	int sb = (int)loom_type_block_size((enum loom_type)src.type);
	int db = (int)loom_type_block_size((enum loom_type)dst.type);

	if (n == 0)
		return LOOM_OK;
	if (src.ne[0] % sb || dst.ne[0] % db)
		return loom_error_set(LOOM_E_INVAL,
				      "%s: copy: rows do not fill whole blocks",
				      be->name);
	bool flat = view_is_flat(src) && view_is_flat(dst);

	if (src.type == dst.type && flat) {
		size_t bytes = (size_t)(n / sb) *
			       loom_type_size((enum loom_type)src.type);
		cudaError_t err;

		if (((uintptr_t)dst.data | (uintptr_t)src.data | bytes) %
		    16 == 0) {
			int64_t n16 = (int64_t)(bytes / 16);

			copy_16_kernel<<<grid_for((n16 + 1) / 2), OPS_BLOCK, 0,
					 be->stream>>>((uint4 *)dst.data,
						       (const uint4 *)src.data,
						       n16);
			return launch_status(be, "copy");
		}
		err = cudaMemcpyAsync(dst.data, src.data, bytes,
				      cudaMemcpyDefault, be->stream);
		return cuda_error(err, "copy");
	}
	if (src.type == dst.type) {
		int size = (int)loom_type_size((enum loom_type)src.type);

		copy_same_kernel<<<grid_for(n / sb), OPS_BLOCK, 0,
				   be->stream>>>(dst, src, sb, size, n / sb);
	} else if (dst.type == LOOM_TYPE_Q8_0) {
		quantize_kernel<<<grid_for(n / db), OPS_BLOCK, 0, be->stream>>>(
			dst, src, n / db);
	} else {
		convert_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(
			dst, src, flat, n);
	}
	return launch_status(be, "copy");
}

extern "C" int cuda_op_copy(struct cuda_backend *be, struct loom_tensor *t)
{
	return copy_view(be, make_view(t), make_view(t->src[0]));
}

int cuda_convert_contig(const struct cuda_backend *be, const tview &v,
			int type, void *dst)
{
	tview d;
	size_t es = loom_type_size((enum loom_type)type);

	d.data = (char *)dst;
	d.type = type;
	for (int i = 0; i < 4; i++)
		d.ne[i] = v.ne[i];
	d.nb[0] = (int64_t)es;
	for (int i = 1; i < 4; i++)
		d.nb[i] = d.nb[i - 1] * d.ne[i - 1];
	return copy_view(be, d, v);
}

/* concat in units of blocks along dimension 0. */
__global__ void concat_kernel(tview dst, tview a, tview b, int dim, int blck,
			      int size, int64_t n)
{
	int64_t ne[4] = { dst.ne[0] / blck, dst.ne[1], dst.ne[2], dst.ne[3] };
	int64_t na = dim == 0 ? a.ne[0] / blck : a.ne[dim];

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t idx[4];

		unravel(i, ne, &idx[0], &idx[1], &idx[2], &idx[3]);
		char *y = row_ptr(dst, idx[1], idx[2], idx[3]) +
			  idx[0] * dst.nb[0];
		const tview *s = &a;

		if (idx[dim] >= na) {
			idx[dim] -= na;
			s = &b;
		}
		copy_unit(y, row_ptr(*s, idx[1], idx[2], idx[3]) +
				     idx[0] * s->nb[0], size);
	}
}

extern "C" int cuda_op_concat(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]),
	      b = make_view(t->src[1]);
	int dim = loom_tensor_op_param_i32(t, 0);
	int blck = (int)loom_type_block_size(t->type);
	int size = (int)loom_type_size(t->type);
	int64_t n;

	if (dim < 0 || dim > 3 || dst.ne[0] % blck || a.ne[0] % blck)
		return loom_error_set(LOOM_E_INVAL, "%s: concat: bad dim %d",
				      be->name, dim);
	n = view_nelements(dst) / blck;
	concat_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(
		dst, a, b, dim, blck, size, n);
	return launch_status(be, "concat");
}

__global__ void f32_to_bf16_kernel(const float *src, uint16_t *dst, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		dst[i] = float_to_bf16(src[i]);
}

__global__ void bf16_to_f32_kernel(const uint16_t *src, float *dst, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		dst[i] = bf16_to_float(src[i]);
}

extern "C" int cuda_f32_to_bf16(cudaStream_t stream, const float *src,
				uint16_t *dst, int64_t n)
{
	f32_to_bf16_kernel<<<grid_for(n), OPS_BLOCK, 0, stream>>>(src, dst, n);
	return cuda_error(cudaGetLastError(), "bf16 convert");
}

extern "C" int cuda_bf16_to_f32(cudaStream_t stream, const uint16_t *src,
				float *dst, int64_t n)
{
	bf16_to_f32_kernel<<<grid_for(n), OPS_BLOCK, 0, stream>>>(src, dst, n);
	return cuda_error(cudaGetLastError(), "bf16 convert");
}
