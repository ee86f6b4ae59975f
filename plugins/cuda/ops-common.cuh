/* SPDX-License-Identifier: MIT */
/* ops-common.cuh - what the kernel files share: a tensor's view as kernels
 * see it, loads and stores of every type through float, index helpers,
 * a block reduction and the launch-error check.  Device code only.
 */
#ifndef LOOM_CUDA_OPS_COMMON_CUH
#define LOOM_CUDA_OPS_COMMON_CUH

#include <math.h>
#include <stdint.h>

#include "cuda-plugin.h"

#ifdef LOOM_HIP
#include <hip/hip_fp16.h>
#else
#include <cuda_fp16.h>
#endif

#define OPS_BLOCK 256
/* Grid-stride loops cover the rest; this keeps grid sizes in range. */
#define OPS_MAX_BLOCKS 65535

/* A tensor as kernels see it, passed by value. */
struct tview {
	char *data;
	int type;
	int64_t ne[4];
	int64_t nb[4];
};

static inline tview make_view(const struct loom_tensor *t)
{
	tview v;

	v.data = (char *)t->data;
	v.type = t->type;
	for (int i = 0; i < 4; i++) {
		v.ne[i] = t->ne[i];
		v.nb[i] = (int64_t)t->nb[i];
	}
	return v;
}

__host__ __device__ static inline int64_t view_nelements(const tview &v)
{
	return v.ne[0] * v.ne[1] * v.ne[2] * v.ne[3];
}

static inline int64_t view_nrows(const tview &v)
{
	return v.ne[1] * v.ne[2] * v.ne[3];
}

/* True when v's elements are packed in logical order, so element i of
 * the flattened tensor is element i of a row starting at v.data.  The
 * stride of a dimension of one element never moves an index, so it may be
 * anything (a transposed row vector is flat). */
static inline bool view_is_flat(const tview &v)
{
	int64_t blck = loom_type_block_size((enum loom_type)v.type);
	int64_t want = (int64_t)loom_type_size((enum loom_type)v.type);

	if (v.nb[0] != want)
		return false;
	want *= v.ne[0] / blck;
	for (int d = 1; d < 4; d++) {
		if (v.ne[d] != 1 && v.nb[d] != want)
			return false;
		want *= v.ne[d];
	}
	return true;
}

static inline unsigned int grid_for(int64_t n, int block = OPS_BLOCK)
{
	int64_t g = (n + block - 1) / block;

	if (g < 1)
		g = 1;
	return (unsigned int)(g < OPS_MAX_BLOCKS ? g : OPS_MAX_BLOCKS);
}

/* Checks the last launch and records a failure for loom_error_message(). */
static inline int launch_status(const struct cuda_backend *be,
				const char *what)
{
	cudaError_t err = cudaGetLastError();

	if (err == cudaSuccess)
		return LOOM_OK;
	return loom_error_set(LOOM_E_DEVICE, "%s: %s: %s", be->name, what,
			      cudaGetErrorString(err));
}

__device__ __forceinline__ float half_to_float(uint16_t h)
{
	return __half2float(__ushort_as_half(h));
}

__device__ __forceinline__ uint16_t float_to_half(float f)
{
	return __half_as_ushort(__float2half_rn(f));
}

__device__ __forceinline__ float bf16_to_float(uint16_t h)
{
	return __uint_as_float((uint32_t)h << 16);
}

/* Round to nearest even; NaN stays a (quiet) NaN. */
__device__ __forceinline__ uint16_t float_to_bf16(float f)
{
	uint32_t u = __float_as_uint(f);

	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40);
	u += 0x7fffu + ((u >> 16) & 1u);
	return (uint16_t)(u >> 16);
}

#include "ops-quant.cuh"

/* Element i0 of v's row at p (p already offset by dimensions 1..3);
 * dimension 0 steps by v.nb[0], per block for the quantized types. */
__device__ __forceinline__ float load_row(const char *p, const tview &v,
					  int64_t i0)
{
	switch (v.type) {
	case LOOM_TYPE_F32:
		return *(const float *)(p + i0 * v.nb[0]);
	case LOOM_TYPE_F16:
		return half_to_float(*(const uint16_t *)(p + i0 * v.nb[0]));
	case LOOM_TYPE_BF16:
		return bf16_to_float(*(const uint16_t *)(p + i0 * v.nb[0]));
	case LOOM_TYPE_I32:
		return (float)*(const int32_t *)(p + i0 * v.nb[0]);
#define LOAD_Q_(name)                                                      \
	case LOOM_TYPE_##name:                                             \
		return quant_value<LOOM_TYPE_##name>(                      \
			(const uint8_t *)p +                               \
				i0 / qtraits<LOOM_TYPE_##name>::blck * v.nb[0], \
			(int)(i0 % qtraits<LOOM_TYPE_##name>::blck));
	CUDA_QUANT_TYPES(LOAD_Q_)
#undef LOAD_Q_
	default:
		return 0.0f;
	}
}

/* Stores x as element i0 of v's row at p (not Q8_0: see quantize). */
__device__ __forceinline__ void store_row(char *p, const tview &v, int64_t i0,
					  float x)
{
	p += i0 * v.nb[0];
	switch (v.type) {
	case LOOM_TYPE_F32:
		*(float *)p = x;
		break;
	case LOOM_TYPE_F16:
		*(uint16_t *)p = float_to_half(x);
		break;
	case LOOM_TYPE_BF16:
		*(uint16_t *)p = float_to_bf16(x);
		break;
	case LOOM_TYPE_I32:
		*(int32_t *)p = (int32_t)x;
		break;
	default:
		break;
	}
}

/* The row (i1, i2, i3) of v. */
__device__ __forceinline__ char *row_ptr(const tview &v, int64_t i1,
					 int64_t i2, int64_t i3)
{
	return v.data + i1 * v.nb[1] + i2 * v.nb[2] + i3 * v.nb[3];
}

__device__ __forceinline__ float load_at(const tview &v, int64_t i0,
					 int64_t i1, int64_t i2, int64_t i3)
{
	return load_row(row_ptr(v, i1, i2, i3), v, i0);
}

/* Splits a flat index over ne (dimension 0 fastest). */
__device__ __forceinline__ void unravel(int64_t i, const int64_t *ne,
					int64_t *i0, int64_t *i1, int64_t *i2,
					int64_t *i3)
{
	*i0 = i % ne[0];
	i /= ne[0];
	*i1 = i % ne[1];
	i /= ne[1];
	*i2 = i % ne[2];
	*i3 = i / ne[2];
}

/* Splits a flat row index over ne[1..3] (dimension 1 fastest). */
__device__ __forceinline__ void row_index(int64_t r, const int64_t *ne,
					  int64_t *i1, int64_t *i2,
					  int64_t *i3)
{
	*i1 = r % ne[1];
	r /= ne[1];
	*i2 = r % ne[2];
	*i3 = r / ne[2];
}

/* Quantizes 32 values into a Q8_0 block as loom_type_convert() does: d is
 * max|x| / 127 rounded to half, q = round(x / d) within +-127, NaN to 0. */
__device__ __forceinline__ void quantize_q8_0(const float *x,
					      struct loom_block_q8_0 *b)
{
	float amax = 0.0f;

	for (int j = 0; j < LOOM_QK8_0; j++)
		amax = fmaxf(amax, fabsf(x[j]));
	uint16_t dh = float_to_half(amax / 127.0f);
	float d = half_to_float(dh);
	float id = d != 0.0f ? 1.0f / d : 0.0f;

	b->d = dh;
	for (int j = 0; j < LOOM_QK8_0; j++) {
		float q = roundf(x[j] * id);

		if (q != q)
			q = 0.0f;
		b->qs[j] = (int8_t)fminf(fmaxf(q, -127.0f), 127.0f);
	}
}

/* Sum over the block (blockDim.x a power of two, at most OPS_BLOCK);
 * every thread gets the result.  Uses shm[OPS_BLOCK]. */
__device__ __forceinline__ float block_sum(float v, float *shm)
{
	shm[threadIdx.x] = v;
	__syncthreads();
	for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			shm[threadIdx.x] += shm[threadIdx.x + s];
		__syncthreads();
	}
	v = shm[0];
	__syncthreads();
	return v;
}

__device__ __forceinline__ float block_max(float v, float *shm)
{
	shm[threadIdx.x] = v;
	__syncthreads();
	for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s)
			shm[threadIdx.x] =
				fmaxf(shm[threadIdx.x], shm[threadIdx.x + s]);
		__syncthreads();
	}
	v = shm[0];
	__syncthreads();
	return v;
}

/* The contiguous copy of v converted to type (F32, F16 or BF16; v of any
 * type but I32) written to dst, on stream.  ops-copy.cu. */
int cuda_convert_contig(const struct cuda_backend *be, const tview &v,
			int type, void *dst);

/* The scale that brings a largest magnitude (as the bits of a
 * non-negative float) under 2^15: a power of two, so dividing by it is
 * exact in F16's normal range.  A GEMM's alpha undoes it. */
__device__ __forceinline__ float f16_scale(unsigned int amax_bits)
{
	float amax = __uint_as_float(amax_bits);

	return amax > 32768.0f ? exp2f(ceilf(log2f(amax / 32768.0f))) : 1.0f;
}

/* ops-mmv.cu: dst = a b for a few columns (CUDA_MMV_MAT: mul_mat with b
 * of at most CUDA_MMV_MAX_COLS columns per batch) or per (slot, token)
 * pair of mul_mat_id (CUDA_MMV_ID, ids as the op's).  Returns
 * LOOM_E_DECLINED for what it does not cover. */
#define CUDA_MMV_MAX_COLS 8
enum { CUDA_MMV_MAT, CUDA_MMV_ID };
int cuda_mmv(struct cuda_backend *be, const tview &dst, const tview &a,
	     const tview &b, const tview &ids, int mode);

#ifdef LOOM_HAVE_BLAS
/* ops-matmul.cu, for ops-moe.cu. */

/* The type a's values take in the BLAS: F16 for F16 and Q8_0, BF16 for
 * BF16 and the other quantized types, else F32. */
int cuda_gemm_type(int a_type);

/* Rows m0 .. m0 + rows - 1 of the matrix of a (a's type, its strides) at
 * mat, dequantized or converted to type gt, packed, into dst. */
int cuda_rows_to(struct cuda_backend *be, const tview &a, const char *mat,
		 int64_t m0, int64_t rows, int gt, void *dst);

/* C = A^T B per batch (column-major: A is K x M, B is K x N, C is M x N
 * F32), A and B of type gt, strides in elements.  alpha and beta point
 * to the device when on_device, else to the host. */
int cuda_gemm(struct cuda_backend *be, int gt, int64_t M, int64_t N,
	      int64_t K, const void *A, int64_t lda, int64_t sa,
	      const void *B, int64_t ldb, int64_t sb, void *C, int64_t ldc,
	      int64_t sc, int64_t batch, const float *alpha,
	      const float *beta, bool on_device);

/* ops-moe.cu: mul_mat_id with tokens grouped by expert; declines what it
 * does not cover. */
int cuda_moe_grouped(struct cuda_backend *be, const tview &dst,
		     const tview &a, const tview &b, const tview &ids);
#endif

#endif /* LOOM_CUDA_OPS_COMMON_CUH */
