/* SPDX-License-Identifier: MIT */
/* ops-matmul.cu - mul_mat and mul_mat_id.  Large products go to the BLAS
 * (cuBLAS, or hipBLAS for HIP) with F16/BF16 weights on tensor cores and
 * b converted to the weight's type; Q8_0 weights are dequantized to F16
 * first, or, for a single column, read directly by a dot-product kernel.
 * An F32 b bound for F16 is scaled by a power of two chosen on the device
 * from its largest finite magnitude, so activations above F16's range
 * (65504) do not become inf; the GEMM's alpha undoes the scale.
 * Without a BLAS (or with LOOM_CUDA_GEMM=own) the plugin's own tiled GEMM
 * runs instead.
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
	be->blas = (void *)h;
	return LOOM_OK;
}

extern "C" void cuda_blas_destroy(struct cuda_backend *be)
{
	if (be->blas)
		cublasDestroy((cublasHandle_t)be->blas);
	be->blas = NULL;
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

/* The scale that brings amax under 2^15 (a power of two: dividing by it
 * is exact for F16's normal range), and the GEMM's alpha and beta. */
__device__ __forceinline__ float f16_scale(unsigned int amax_bits)
{
	float amax = __uint_as_float(amax_bits);

	return amax > 32768.0f ? exp2f(ceilf(log2f(amax / 32768.0f))) : 1.0f;
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

/* dst = a^T b per batch, in column-major terms: a is K x M with leading
 * dimension lda, b is K x N, dst is M x N.  Returns LOOM_E_DECLINED when
 * the sizes do not fit the BLAS's int arguments. */
static int mul_mat_blas(struct cuda_backend *be, const tview &dst,
			const tview &a, const tview &b)
{
	const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1];
	const int64_t A2 = a.ne[2], B2 = b.ne[2], B3 = b.ne[3];
	const int64_t r2 = B2 / A2, r3 = B3 / a.ne[3];
	int gt = a.type == LOOM_TYPE_F16 || a.type == LOOM_TYPE_Q8_0 ?
		LOOM_TYPE_F16 : a.type == LOOM_TYPE_BF16 ? LOOM_TYPE_BF16 :
		LOOM_TYPE_F32;
	int64_t ges = (int64_t)loom_type_size((enum loom_type)gt);
	cublasHandle_t h = (cublasHandle_t)be->blas;
	const float one_zero[2] = { 1.0f, 0.0f };
	const float *alpha = &one_zero[0], *beta = &one_zero[1];
	float *scaled = NULL;
	struct operand A, B;
	int64_t ldc = dst.nb[1] / 4, sc2 = dst.nb[2] / 4, sc3 = dst.nb[3] / 4;
	int status;

	if (!fits_int(K) || !fits_int(M) || !fits_int(N) || !fits_int(B2) ||
	    dst.nb[0] != 4 || dst.nb[1] % 4 || dst.nb[2] % 4 ||
	    dst.nb[3] % 4 || ldc < M || !fits_int(ldc))
		return LOOM_E_DECLINED;
	status = prepare(be, a, gt, CUDA_SCRATCH_A, &A);
	if (status)
		return status;
	if (gt == LOOM_TYPE_F16 && b.type == LOOM_TYPE_F32 && view_is_flat(b))
		status = to_f16_scaled(be, b, &B, &scaled);
	else
		status = prepare(be, b, gt, CUDA_SCRATCH_B, &B);
	if (status)
		return status;
	if (scaled) {
		alpha = scaled;
		beta = scaled + 1;
	}
	if (cublasSetPointerMode(h, scaled ? CUBLAS_POINTER_MODE_DEVICE :
					     CUBLAS_POINTER_MODE_HOST) !=
	    CUBLAS_STATUS_SUCCESS)
		return loom_error_set(LOOM_E_DEVICE, "%s: mul_mat: cannot set "
				      "the BLAS pointer mode", be->name);
	for (int64_t i3 = 0; i3 < B3; i3++) {
		const char *a3 = A.data + (i3 / r3) * A.s3 * ges;
		const char *b3 = B.data + i3 * B.s3 * ges;
		char *c3 = dst.data + i3 * sc3 * 4;
		/* Either one call over all of dimension 2 (a not broadcast,
		 * or broadcast from a single matrix), or one per matrix of a,
		 * each over the r2 columns it serves. */
		int64_t calls = r2 == 1 || A2 == 1 ? 1 : A2;
		int64_t batch = calls == 1 ? B2 : r2;
		int64_t sa = calls == 1 && A2 != 1 ? A.s2 : 0;
		for (int64_t c = 0; c < calls; c++) {
			cublasStatus_t st = cublasGemmStridedBatchedEx(
				h, CUBLAS_OP_T, CUBLAS_OP_N, (int)M, (int)N,
				(int)K, alpha, a3 + c * A.s2 * ges,
				blas_type(gt), (int)A.ld, sa,
				b3 + c * r2 * B.s2 * ges, blas_type(gt),
				(int)B.ld, B.s2, beta,
				c3 + c * r2 * sc2 * 4, CUDA_R_32F, (int)ldc,
				sc2, (int)batch, CUBLAS_COMPUTE_32F,
				CUBLAS_GEMM_DEFAULT);

			if (st != CUBLAS_STATUS_SUCCESS)
				return loom_error_set(LOOM_E_DEVICE,
						      "%s: mul_mat: BLAS "
						      "status %d", be->name,
						      (int)st);
		}
	}
	return LOOM_OK;
}

#endif /* LOOM_HAVE_BLAS */

extern "C" int cuda_op_mul_mat(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]),
	      b = make_view(t->src[1]), none = {};
	int64_t N = b.ne[1];

	if (a.ne[2] == 0 || a.ne[3] == 0 || b.ne[2] % a.ne[2] ||
	    b.ne[3] % a.ne[3])
		return loom_error_set(LOOM_E_INVAL,
				      "%s: mul_mat: b does not broadcast a",
				      be->name);
	if (N == 1 && (a.type == LOOM_TYPE_Q8_0 || be->own_gemm))
		return mul_mat_dot(be, dst, a, b, none, DOT_MUL_MAT);
#ifdef LOOM_HAVE_BLAS
	if (!be->own_gemm) {
		int status = mul_mat_blas(be, dst, a, b);

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

	return mul_mat_dot(be, dst, a, b, ids, DOT_MUL_MAT_ID);
}
