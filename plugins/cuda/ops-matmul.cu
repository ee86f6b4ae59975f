/* SPDX-License-Identifier: MIT */
/* ops-matmul.cu - mul_mat and mul_mat_id.  Large products go to the BLAS
 * (cuBLAS, or hipBLAS for HIP) with F16/BF16 weights on tensor cores and
 * b converted to the weight's type.  Quantized weights are dequantized
 * slab by slab (Q8_0 to F16, the others to BF16) for the BLAS, or, for up
 * to CUDA_MMV_MAX_COLS columns, read directly by the GEMV (ops-mmv.cu).
 * A GQA broadcast (several batches of b per matrix of a) is one BLAS call.
 * An F32 b bound for F16 is scaled by a power of two chosen on the device
 * from its largest finite magnitude, so activations above F16's range
 * (65504) do not become inf; the GEMM's alpha undoes the scale.
 * Without a BLAS (or with LOOM_CUDA_GEMM=own) the plugin's own tiled GEMM
 * runs instead.  mul_mat_id: a GEMV per pair for a few tokens, tokens
 * grouped by expert for more (ops-moe.cu), else a dot product per value.
 */
#include "ops-common.cuh"

/* ------------------------------------------------------------------------
 * Dot products: one block per output value.  Serves single columns (any
 * weight type, Q8_0 without dequantizing) and mul_mat_id.
 */
#define DOT_BLOCK 128

enum { DOT_MUL_MAT, DOT_MUL_MAT_ID };

__global__ void dot_kernel(tview dst, tview a, tview b, tview ids, int mode,
			   int64_t n_out)
{
	__shared__ float shm[DOT_BLOCK];
	const int64_t K = a.ne[0];
	const bool q8_f32 = a.type == LOOM_TYPE_Q8_0 &&
			    a.nb[0] == sizeof(struct loom_block_q8_0) &&
			    b.type == LOOM_TYPE_F32 && b.nb[0] == sizeof(float);

	for (int64_t o = blockIdx.x; o < n_out; o += gridDim.x) {
		int64_t m, j1, j2, j3;
		const char *x, *y;
		bool ok = true;

		unravel(o, dst.ne, &m, &j1, &j2, &j3);
		if (mode == DOT_MUL_MAT) {
			int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];

			x = row_ptr(a, m, j2 / r2, j3 / r3);
			y = row_ptr(b, j1, j2, j3);
		} else {
			/* dst [M, n_used, n_tokens]: slot j1 of token j2. */
			int32_t e = *(const int32_t *)(ids.data +
						       j1 * ids.nb[0] +
						       j2 * ids.nb[1]);

			ok = e >= 0 && e < a.ne[2];
			x = row_ptr(a, m, ok ? e : 0, 0);
			y = row_ptr(b, j1 % b.ne[1], j2, 0);
		}
		float acc = 0.0f;

		if (!ok) {
			/* An expert id out of range gives zeros. */
		} else if (q8_f32) {
			/* A thread per block: its scale once, 32 products. */
			const struct loom_block_q8_0 *blk =
				(const struct loom_block_q8_0 *)x;
			const float *yv = (const float *)y;

			for (int64_t kb = threadIdx.x; kb < K / LOOM_QK8_0;
			     kb += blockDim.x) {
				const float *yb = yv + kb * LOOM_QK8_0;
				float s = 0.0f;

#pragma unroll
				for (int j = 0; j < LOOM_QK8_0; j++)
					s += (float)blk[kb].qs[j] * yb[j];
				acc += half_to_float(blk[kb].d) * s;
			}
		} else {
			for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
				acc += load_row(x, a, k) * load_row(y, b, k);
		}
		acc = block_sum(acc, shm);
		if (threadIdx.x == 0)
			store_row(row_ptr(dst, j1, j2, j3), dst, m, acc);
	}
}

static int mul_mat_dot(struct cuda_backend *be, const tview &dst,
		       const tview &a, const tview &b, const tview &ids,
		       int mode)
{
	int64_t n = view_nelements(dst);

	dot_kernel<<<grid_for(n, 1), DOT_BLOCK, 0, be->stream>>>(dst, a, b,
								 ids, mode, n);
	return launch_status(be, mode == DOT_MUL_MAT ? "mul_mat" :
						       "mul_mat_id");
}

/* ------------------------------------------------------------------------
 * The plugin's own GEMM: 64x64 output tiles, 16-deep slices of K staged in
 * shared memory as float, 4x4 outputs per thread.  Reads every weight type
 * and any row strides.
 */
#define GEMM_TM 64
#define GEMM_TN 64
#define GEMM_TK 16
#define GEMM_THREADS 256

__global__ void gemm_kernel(tview dst, tview a, tview b)
{
	__shared__ float as[GEMM_TK][GEMM_TM + 1];
	__shared__ float bs[GEMM_TK][GEMM_TN + 1];
	const int64_t M = a.ne[1], N = b.ne[1], K = a.ne[0];
	const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
	const int64_t batches = dst.ne[2] * dst.ne[3];
	const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
	const int64_t m0 = (int64_t)blockIdx.x * GEMM_TM;

	for (int64_t z = blockIdx.z; z < batches; z += gridDim.z) {
		const int64_t i2 = z % dst.ne[2], i3 = z / dst.ne[2];

		for (int64_t n0 = (int64_t)blockIdx.y * GEMM_TN; n0 < N;
		     n0 += (int64_t)gridDim.y * GEMM_TN) {
			float acc[4][4] = {};

			for (int64_t k0 = 0; k0 < K; k0 += GEMM_TK) {
				for (int l = threadIdx.x; l < GEMM_TK * GEMM_TM;
				     l += GEMM_THREADS) {
					int kk = l % GEMM_TK, mm = l / GEMM_TK;
					int64_t m = m0 + mm, k = k0 + kk;

					as[kk][mm] = m < M && k < K ?
						load_row(row_ptr(a, m, i2 / r2,
								 i3 / r3),
							 a, k) : 0.0f;
				}
				for (int l = threadIdx.x; l < GEMM_TK * GEMM_TN;
				     l += GEMM_THREADS) {
					int kk = l % GEMM_TK, nn = l / GEMM_TK;
					int64_t n = n0 + nn, k = k0 + kk;

					bs[kk][nn] = n < N && k < K ?
						load_row(row_ptr(b, n, i2, i3),
							 b, k) : 0.0f;
				}
				__syncthreads();
				for (int kk = 0; kk < GEMM_TK; kk++) {
					float av[4], bv[4];

					for (int i = 0; i < 4; i++) {
						av[i] = as[kk][tx + 16 * i];
						bv[i] = bs[kk][ty + 16 * i];
					}
					for (int i = 0; i < 4; i++) {
						for (int j = 0; j < 4; j++)
							acc[i][j] +=
								av[i] * bv[j];
					}
				}
				__syncthreads();
			}
			for (int j = 0; j < 4; j++) {
				int64_t n = n0 + ty + 16 * j;

				if (n >= N)
					continue;
				char *y = row_ptr(dst, n, i2, i3);

				for (int i = 0; i < 4; i++) {
					int64_t m = m0 + tx + 16 * i;

					if (m < M)
						store_row(y, dst, m,
							  acc[i][j]);
				}
			}
		}
	}
}

static int mul_mat_own(struct cuda_backend *be, const tview &dst,
		       const tview &a, const tview &b)
{
	int64_t gx = (a.ne[1] + GEMM_TM - 1) / GEMM_TM;
	int64_t gy = (b.ne[1] + GEMM_TN - 1) / GEMM_TN;
	int64_t gz = dst.ne[2] * dst.ne[3];
	dim3 grid((unsigned int)gx,
		  (unsigned int)(gy < OPS_MAX_BLOCKS ? gy : OPS_MAX_BLOCKS),
		  (unsigned int)(gz < OPS_MAX_BLOCKS ? gz : OPS_MAX_BLOCKS));

	if (gx > INT32_MAX)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "%s: mul_mat: %lld rows is too many",
				      be->name, (long long)a.ne[1]);
	gemm_kernel<<<grid, GEMM_THREADS, 0, be->stream>>>(dst, a, b);
	return launch_status(be, "mul_mat");
}

/* ------------------------------------------------------------------------
 * BLAS.
 */
#ifdef LOOM_HAVE_BLAS

/* cuBLAS's recommended workspace on Hopper.  A workspace of our own means
 * cuBLAS allocates nothing while a CUDA graph is captured. */
#define BLAS_WORKSPACE ((size_t)32 << 20)

extern "C" int cuda_blas_create(struct cuda_backend *be)
{
	cublasHandle_t h;

	if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS)
		return loom_error_set(LOOM_E_DEVICE,
				      "%s: cannot create a BLAS handle",
				      be->name);
	if (cublasSetStream(h, be->stream) != CUBLAS_STATUS_SUCCESS) {
		cublasDestroy(h);
		return loom_error_set(LOOM_E_DEVICE,
				      "%s: cannot set the BLAS stream",
				      be->name);
	}
#ifndef LOOM_HIP
	cudaError_t err = cudaMalloc(&be->blas_workspace, BLAS_WORKSPACE);

	if (err != cudaSuccess) {
		be->blas_workspace = NULL;
		cublasDestroy(h);
		return cuda_error(err, "cannot allocate the BLAS workspace");
	}
	/* After cublasSetStream, which resets the workspace. */
	if (cublasSetWorkspace(h, be->blas_workspace, BLAS_WORKSPACE) !=
	    CUBLAS_STATUS_SUCCESS) {
		cudaFree(be->blas_workspace);
		be->blas_workspace = NULL;
		cublasDestroy(h);
		return loom_error_set(LOOM_E_DEVICE,
				      "%s: cannot set the BLAS workspace",
				      be->name);
	}
#endif
	be->blas = (void *)h;
	return LOOM_OK;
}

extern "C" void cuda_blas_destroy(struct cuda_backend *be)
{
	if (be->blas)
		cublasDestroy((cublasHandle_t)be->blas);
	be->blas = NULL;
	if (be->blas_workspace)
		cudaFree(be->blas_workspace);
	be->blas_workspace = NULL;
}

static cudaDataType blas_type(int type)
{
	switch (type) {
	case LOOM_TYPE_F16:
		return CUDA_R_16F;
	case LOOM_TYPE_BF16:
		return CUDA_R_16BF;
	default:
		return CUDA_R_32F;
	}
}

int cuda_gemm_type(int a_type)
{
	switch (a_type) {
	case LOOM_TYPE_F16:
	case LOOM_TYPE_Q8_0:
		return LOOM_TYPE_F16;
	case LOOM_TYPE_F32:
		return LOOM_TYPE_F32;
	default:
		return LOOM_TYPE_BF16;
	}
}

/* A GEMM operand: a matrix of rows of K elements, ld elements apart, with
 * strides of dimensions 2 and 3, in elements. */
struct operand {
	const char *data;
	int64_t ld, s2, s3;
};

static bool fits_int(int64_t v)
{
	return v >= 0 && v <= INT32_MAX;
}

static int blas_failed(const struct cuda_backend *be, cublasStatus_t st)
{
	return loom_error_set(LOOM_E_DEVICE, "%s: mul_mat: BLAS status %d",
			      be->name, (int)st);
}

static int set_pointer_mode(struct cuda_backend *be, bool on_device)
{
	if (cublasSetPointerMode((cublasHandle_t)be->blas,
				 on_device ? CUBLAS_POINTER_MODE_DEVICE :
					     CUBLAS_POINTER_MODE_HOST) !=
	    CUBLAS_STATUS_SUCCESS)
		return loom_error_set(LOOM_E_DEVICE, "%s: mul_mat: cannot set "
				      "the BLAS pointer mode", be->name);
	return LOOM_OK;
}

int cuda_gemm(struct cuda_backend *be, int gt, int64_t M, int64_t N,
	      int64_t K, const void *A, int64_t lda, int64_t sa,
	      const void *B, int64_t ldb, int64_t sb, void *C, int64_t ldc,
	      int64_t sc, int64_t batch, const float *alpha,
	      const float *beta, bool on_device)
{
	cublasHandle_t h = (cublasHandle_t)be->blas;
	cublasStatus_t st;
	int status;

	if (!fits_int(M) || !fits_int(N) || !fits_int(K) || !fits_int(lda) ||
	    !fits_int(ldb) || !fits_int(ldc) || !fits_int(batch))
		return loom_error_set(LOOM_E_UNSUPPORTED, "%s: mul_mat: sizes "
				      "past the BLAS's int", be->name);
	if (batch == 0 || M == 0 || N == 0)
		return LOOM_OK;
	status = set_pointer_mode(be, on_device);
	if (status)
		return status;
	if (batch == 1)
		st = cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N,
				  (int)K, alpha, A, blas_type(gt), (int)lda, B,
				  blas_type(gt), (int)ldb, beta, C, CUDA_R_32F,
				  (int)ldc, CUBLAS_COMPUTE_32F,
				  CUBLAS_GEMM_DEFAULT);
	else
		st = cublasGemmStridedBatchedEx(
			h, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N, (int)K,
			alpha, A, blas_type(gt), (int)lda, sa, B,
			blas_type(gt), (int)ldb, sb, beta, C, CUDA_R_32F,
			(int)ldc, sc, (int)batch, CUBLAS_COMPUTE_32F,
			CUBLAS_GEMM_DEFAULT);
	return st == CUBLAS_STATUS_SUCCESS ? LOOM_OK : blas_failed(be, st);
}

/* Largest finite |x| of a contiguous F32 array, as the bits of a
 * non-negative float (which order as integers), into *amax (zeroed first). */
__global__ void amax_kernel(const float *x, int64_t n, unsigned int *amax)
{
	__shared__ float shm[OPS_BLOCK];
	float m = 0.0f;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		float v = fabsf(x[i]);

		if (v <= 3.0e38f) /* finite: NaN and inf pass through */
			m = fmaxf(m, v);
	}
	m = block_max(m, shm);
	if (threadIdx.x == 0)
		atomicMax(amax, __float_as_uint(m));
}

__global__ void to_f16_scaled_kernel(const float *x, int64_t n,
				     const unsigned int *amax, uint16_t *y,
				     float *alpha_beta)
{
	const float scale = f16_scale(*amax);

	if (blockIdx.x == 0 && threadIdx.x == 0) {
		alpha_beta[0] = scale;
		alpha_beta[1] = 0.0f;
	}
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x)
		y[i] = float_to_half(x[i] / scale);
}

/* Converts a contiguous F32 b to F16 in scratch, scaled into range; the
 * alpha and beta to pass (device pointers) land in *alpha_beta. */
static int to_f16_scaled(struct cuda_backend *be, const tview &v,
			 struct operand *op, float **alpha_beta)
{
	int64_t n = view_nelements(v);
	void *tmp = cuda_scratch(be, CUDA_SCRATCH_B, (size_t)n * 2);
	char *small = (char *)cuda_scratch(be, CUDA_SCRATCH_SCALE, 64);
	cudaError_t err;

	if (!tmp || !small)
		return LOOM_E_NOMEM;
	err = cudaMemsetAsync(small, 0, sizeof(unsigned int), be->stream);
	if (err != cudaSuccess)
		return cuda_error(err, "memset");
	amax_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(
		(const float *)v.data, n, (unsigned int *)small);
	to_f16_scaled_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(
		(const float *)v.data, n, (const unsigned int *)small,
		(uint16_t *)tmp, (float *)(small + 16));
	*alpha_beta = (float *)(small + 16);
	op->data = (const char *)tmp;
	op->ld = v.ne[0];
	op->s2 = v.ne[0] * v.ne[1];
	op->s3 = op->s2 * v.ne[2];
	return launch_status(be, "mul_mat: scale b");
}

/* Uses v as is when it already has type and a layout the BLAS reads;
 * otherwise converts it into scratch slot. */
static int prepare(struct cuda_backend *be, const tview &v, int type,
		   int slot, struct operand *op)
{
	int64_t es = (int64_t)loom_type_size((enum loom_type)type);

	if (v.type == type && v.nb[0] == es && v.nb[1] % es == 0 &&
	    v.nb[2] % es == 0 && v.nb[3] % es == 0 && v.nb[1] / es >= v.ne[0] &&
	    fits_int(v.nb[1] / es)) {
		op->data = v.data;
		op->ld = v.nb[1] / es;
		op->s2 = v.nb[2] / es;
		op->s3 = v.nb[3] / es;
		return LOOM_OK;
	}
	void *tmp = cuda_scratch(be, slot, (size_t)(view_nelements(v) * es));

	if (!tmp)
		return LOOM_E_NOMEM;
	int status = cuda_convert_contig(be, v, type, tmp);

	if (status)
		return status;
	op->data = (const char *)tmp;
	op->ld = v.ne[0];
	op->s2 = v.ne[0] * v.ne[1];
	op->s3 = op->s2 * v.ne[2];
	return LOOM_OK;
}

/* Dequantizing: a thread per 32 values, written as F16 (Q8_0) or BF16
 * (the others) with 16-byte stores. */
template <int T, bool BF>
__global__ void dequant_rows_kernel(const char *mat, int64_t nb1,
				    int64_t nb0, int64_t K, int64_t m0,
				    int64_t n_units, uint16_t *dst)
{
	const int64_t per_row = K / 32;
	constexpr int UPB = qtraits<T>::blck / 32;

	for (int64_t u = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	     u < n_units; u += (int64_t)gridDim.x * blockDim.x) {
		const int64_t r = u / per_row, kb = u % per_row;
		const uint8_t *blk = (const uint8_t *)mat + (m0 + r) * nb1 +
				     kb / UPB * nb0;
		float y[32];
		uint32_t w[16];

		quant_unit<T>(blk, (int)(kb % UPB), y);
#pragma unroll
		for (int j = 0; j < 16; j++) {
			uint32_t lo = BF ? float_to_bf16(y[2 * j]) :
					   float_to_half(y[2 * j]);
			uint32_t hi = BF ? float_to_bf16(y[2 * j + 1]) :
					   float_to_half(y[2 * j + 1]);

			w[j] = lo | hi << 16;
		}
		int4 *o = (int4 *)(dst + r * K + kb * 32);

#pragma unroll
		for (int j = 0; j < 4; j++)
			o[j] = make_int4((int)w[4 * j], (int)w[4 * j + 1],
					 (int)w[4 * j + 2], (int)w[4 * j + 3]);
	}
}

int cuda_rows_to(struct cuda_backend *be, const tview &a, const char *mat,
		 int64_t m0, int64_t rows, int gt, void *dst)
{
	const int64_t K = a.ne[0], n = rows * K / 32;
	const unsigned int grid = grid_for(n);
	uint16_t *d = (uint16_t *)dst;

	if (!loom_type_is_quantized((enum loom_type)a.type)) {
		tview sub = a;

		sub.data = (char *)mat + m0 * a.nb[1];
		sub.ne[1] = rows;
		sub.ne[2] = 1;
		sub.ne[3] = 1;
		return cuda_convert_contig(be, sub, gt, dst);
	}
	if (gt != cuda_gemm_type(a.type) || K % 32)
		return loom_error_set(LOOM_E_INVAL, "%s: mul_mat: cannot "
				      "dequantize %s to %s", be->name,
				      loom_type_name((enum loom_type)a.type),
				      loom_type_name((enum loom_type)gt));
	switch (a.type) {
#define DEQUANT_(name)                                                     \
	case LOOM_TYPE_##name:                                             \
		dequant_rows_kernel<LOOM_TYPE_##name,                      \
				    LOOM_TYPE_##name != LOOM_TYPE_Q8_0>    \
			<<<grid, OPS_BLOCK, 0, be->stream>>>(              \
				mat, a.nb[1], a.nb[0], K, m0, n, d);       \
		break;
		CUDA_QUANT_TYPES(DEQUANT_)
#undef DEQUANT_
	default:
		return loom_error_set(LOOM_E_UNSUPPORTED, "%s: mul_mat: no "
				      "decoder for %s", be->name,
				      loom_type_name((enum loom_type)a.type));
	}
	return launch_status(be, "mul_mat: dequantize");
}

/* Dequantized weights are staged in slabs of rows of at most this many
 * bytes, so a large matrix (a vocabulary's) needs no copy of its size. */
#define DEQUANT_SLAB ((size_t)256 << 20)

/* The batched GEMM's pointer arrays: batch z uses matrix z / r2 of a. */
__global__ void gemm_ptrs_kernel(const char *a, int64_t sa, int64_t r2,
				 const char *b, int64_t sb, char *c,
				 int64_t sc, int64_t n, const void **pa,
				 const void **pb, void **pc)
{
	for (int64_t z = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; z < n;
	     z += (int64_t)gridDim.x * blockDim.x) {
		pa[z] = a + z / r2 * sa;
		pb[z] = b + z * sb;
		pc[z] = c + z * sc;
	}
}

/* The leading dimension of r consecutive batches of n columns (ld apart,
 * batches s2 apart) read as one matrix of r n columns, or 0 when they do
 * not form one. */
static int64_t merged_ld(int64_t n, int64_t ld, int64_t s2, int64_t rows)
{
	int64_t m = n == 1 ? s2 : s2 == n * ld ? ld : 0;

	return m >= rows && fits_int(m) ? m : 0;
}

struct gemm_job {
	int gt;
	int64_t M, N, K, ges;
	struct operand A, B;
	char *C;
	int64_t ldc, sc2, sc3;
	const float *alpha, *beta;
	bool on_device;
};

/* One batch i3 of dimension 3 where A2 > 1 matrices of a each serve r2
 * consecutive batches of b (the GQA broadcast): one GEMM over the merged
 * columns when b's and dst's batches line up, else one pointer-array
 * batched GEMM over all of dimension 2. */
static int gemm_broadcast(struct cuda_backend *be, const struct gemm_job *j,
			  const char *a3, const char *b3, char *c3,
			  int64_t A2, int64_t B2, int64_t r2)
{
	const int64_t ges = j->ges;
	int64_t ldb = merged_ld(j->N, j->B.ld, j->B.s2, j->K);
	int64_t ldc = merged_ld(j->N, j->ldc, j->sc2, j->M);
	cublasStatus_t st;

	if (ldb && ldc && fits_int(r2 * j->N)) {
		cuda_note_path(be, CUDA_PATH_GQA_MERGED);
		return cuda_gemm(be, j->gt, j->M, r2 * j->N, j->K, a3, j->A.ld,
				 j->A.s2, b3, ldb, r2 * j->B.s2, c3, ldc,
				 r2 * j->sc2, A2, j->alpha, j->beta,
				 j->on_device);
	}
	void **ptrs = (void **)cuda_scratch(be, CUDA_SCRATCH_PTRS,
					    3 * (size_t)B2 * sizeof(void *));
	int status;

	if (!ptrs)
		return LOOM_E_NOMEM;
	gemm_ptrs_kernel<<<grid_for(B2), OPS_BLOCK, 0, be->stream>>>(
		a3, j->A.s2 * ges, r2, b3, j->B.s2 * ges, c3, j->sc2 * 4, B2,
		(const void **)ptrs, (const void **)(ptrs + B2), ptrs + 2 * B2);
	status = launch_status(be, "mul_mat: pointers");
	if (!status)
		status = set_pointer_mode(be, j->on_device);
	if (status)
		return status;
	cuda_note_path(be, CUDA_PATH_GQA_PTRS);
	st = cublasGemmBatchedEx((cublasHandle_t)be->blas, CUBLAS_OP_T,
				 CUBLAS_OP_N, (int)j->M, (int)j->N, (int)j->K,
				 j->alpha, (const void *const *)ptrs,
				 blas_type(j->gt), (int)j->A.ld,
				 (const void *const *)(ptrs + B2),
				 blas_type(j->gt), (int)j->B.ld, j->beta,
				 ptrs + 2 * B2, CUDA_R_32F, (int)j->ldc,
				 (int)B2, CUBLAS_COMPUTE_32F,
				 CUBLAS_GEMM_DEFAULT);
	return st == CUBLAS_STATUS_SUCCESS ? LOOM_OK : blas_failed(be, st);
}

/* Quantized a: each matrix of a dequantized slab by slab, each slab times
 * the batches of b it serves. */
static int gemm_dequant(struct cuda_backend *be, const struct gemm_job *j,
			const tview &a, int64_t B2, int64_t B3)
{
	const int64_t A2 = a.ne[2], A3 = a.ne[3], r2 = B2 / A2, r3 = B3 / A3;
	const int64_t row_bytes = j->K * j->ges;
	int64_t ms = (int64_t)(DEQUANT_SLAB / (size_t)row_bytes);
	void *slab;

	ms = ms < 1 ? 1 : ms > j->M ? j->M : ms;
	slab = cuda_scratch(be, CUDA_SCRATCH_A, (size_t)(ms * row_bytes));
	if (!slab)
		return LOOM_E_NOMEM;
	cuda_note_path(be, CUDA_PATH_DEQUANT_BLAS);
	for (int64_t j3 = 0; j3 < A3; j3++)
	for (int64_t j2 = 0; j2 < A2; j2++) {
		const char *mat = a.data + j2 * a.nb[2] + j3 * a.nb[3];

		for (int64_t m0 = 0; m0 < j->M; m0 += ms) {
			int64_t mh = j->M - m0 < ms ? j->M - m0 : ms;
			int st = cuda_rows_to(be, a, mat, m0, mh, j->gt, slab);

			for (int64_t i3 = j3 * r3; !st && i3 < (j3 + 1) * r3;
			     i3++)
				st = cuda_gemm(
					be, j->gt, mh, j->N, j->K, slab, j->K,
					0, j->B.data + (i3 * j->B.s3 +
							j2 * r2 * j->B.s2) *
							       j->ges,
					j->B.ld, j->B.s2,
					j->C + (i3 * j->sc3 + j2 * r2 * j->sc2 +
						m0) * 4,
					j->ldc, j->sc2, r2, j->alpha, j->beta,
					j->on_device);
			if (st)
				return st;
		}
	}
	return LOOM_OK;
}

/* dst = a^T b per batch, in column-major terms: a is K x M with leading
 * dimension lda, b is K x N, dst is M x N.  Returns LOOM_E_DECLINED when
 * the sizes do not fit the BLAS's int arguments. */
static int mul_mat_blas(struct cuda_backend *be, const tview &dst,
			const tview &a, const tview &b)
{
	const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1];
	const int64_t A2 = a.ne[2], B2 = b.ne[2], B3 = b.ne[3];
	const int64_t r2 = B2 / A2, r3 = B3 / a.ne[3];
	static const float one_zero[2] = { 1.0f, 0.0f };
	struct gemm_job j;
	float *scaled = NULL;
	int status;

	j.gt = cuda_gemm_type(a.type);
	j.ges = (int64_t)loom_type_size((enum loom_type)j.gt);
	j.M = M;
	j.N = N;
	j.K = K;
	j.C = dst.data;
	j.ldc = dst.nb[1] / 4;
	j.sc2 = dst.nb[2] / 4;
	j.sc3 = dst.nb[3] / 4;
	if (!fits_int(K) || !fits_int(M) || !fits_int(N) || !fits_int(B2) ||
	    dst.nb[0] != 4 || dst.nb[1] % 4 || dst.nb[2] % 4 ||
	    dst.nb[3] % 4 || j.ldc < M || !fits_int(j.ldc))
		return LOOM_E_DECLINED;
	if (j.gt == LOOM_TYPE_F16 && b.type == LOOM_TYPE_F32 &&
	    view_is_flat(b))
		status = to_f16_scaled(be, b, &j.B, &scaled);
	else
		status = prepare(be, b, j.gt, CUDA_SCRATCH_B, &j.B);
	if (status)
		return status;
	j.alpha = scaled ? scaled : &one_zero[0];
	j.beta = scaled ? scaled + 1 : &one_zero[1];
	j.on_device = scaled != NULL;
	if (loom_type_is_quantized((enum loom_type)a.type))
		return gemm_dequant(be, &j, a, B2, B3);
	status = prepare(be, a, j.gt, CUDA_SCRATCH_A, &j.A);
	if (status)
		return status;
	for (int64_t i3 = 0; i3 < B3; i3++) {
		const char *a3 = j.A.data + (i3 / r3) * j.A.s3 * j.ges;
		const char *b3 = j.B.data + i3 * j.B.s3 * j.ges;
		char *c3 = dst.data + i3 * j.sc3 * 4;

		/* One call over all of dimension 2: a not broadcast, or
		 * broadcast from a single matrix. */
		if (r2 == 1 || A2 == 1)
			status = cuda_gemm(be, j.gt, M, N, K, a3, j.A.ld,
					   A2 == 1 ? 0 : j.A.s2, b3, j.B.ld,
					   j.B.s2, c3, j.ldc, j.sc2, B2,
					   j.alpha, j.beta, j.on_device);
		else
			status = gemm_broadcast(be, &j, a3, b3, c3, A2, B2, r2);
		if (status)
			return status;
	}
	return LOOM_OK;
}

#endif /* LOOM_HAVE_BLAS */

extern "C" int cuda_op_mul_mat(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]),
	      b = make_view(t->src[1]), none = {};
	int64_t N = b.ne[1];
	bool quant = loom_type_is_quantized((enum loom_type)a.type);
	int status;

	if (a.ne[2] == 0 || a.ne[3] == 0 || b.ne[2] % a.ne[2] ||
	    b.ne[3] % a.ne[3])
		return loom_error_set(LOOM_E_INVAL,
				      "%s: mul_mat: b does not broadcast a",
				      be->name);
	/* Decode: quantized weights read once by the GEMV (and float ones
	 * when the BLAS is not used). */
	if ((quant && N <= CUDA_MMV_MAX_COLS) || (be->own_gemm && N == 1)) {
		status = cuda_mmv(be, dst, a, b, none, CUDA_MMV_MAT);
		if (status != LOOM_E_DECLINED)
			return status;
	}
#ifdef LOOM_HAVE_BLAS
	if (!be->own_gemm) {
		status = mul_mat_blas(be, dst, a, b);
		if (status != LOOM_E_DECLINED)
			return status;
	}
#endif
	if (N <= 2)
		return mul_mat_dot(be, dst, a, b, none, DOT_MUL_MAT);
	return mul_mat_own(be, dst, a, b);
}

extern "C" int cuda_op_mul_mat_id(struct cuda_backend *be,
				  struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]),
	      b = make_view(t->src[1]), ids = make_view(t->src[2]);
	int64_t pairs = dst.ne[1] * dst.ne[2];
	int status;

	if (pairs <= CUDA_MOE_MMV_PAIRS) {
		status = cuda_mmv(be, dst, a, b, ids, CUDA_MMV_ID);
		if (status != LOOM_E_DECLINED)
			return status;
	}
#ifdef LOOM_HAVE_BLAS
	if (!be->own_gemm) {
		status = cuda_moe_grouped(be, dst, a, b, ids);
		if (status != LOOM_E_DECLINED)
			return status;
	}
#endif
	cuda_note_path(be, CUDA_PATH_MOE_DOT);
	return mul_mat_dot(be, dst, a, b, ids, DOT_MUL_MAT_ID);
}
