/* SPDX-License-Identifier: MIT */
/* ops-moe.cu - mul_mat_id for many tokens: the (slot, token) pairs are
 * grouped by expert on the device, their activations gathered into one
 * matrix per expert, and each expert used runs one BLAS GEMM over its
 * tokens (its weights read once, dequantized first when quantized); the
 * results are scattered back to their slots.  The host reads the group
 * sizes back, so this waits for the stream and is never captured into a
 * CUDA graph.  A few tokens take the GEMV instead (ops-mmv.cu).
 */
#include "ops-common.cuh"

#ifdef LOOM_HAVE_BLAS

/* Experts routed in shared memory by one block. */
#define MOE_MAX_EXPERTS 4096
#define MOE_ROUTE_THREADS 1024

/* off[e] .. off[e + 1] are expert e's columns; pos[p] is pair p's column
 * (p = t n_used + slot), or -1 for an id out of range. */
__global__ void moe_route_kernel(tview ids, int n_expert, int64_t n_used,
				 int64_t n_pairs, int32_t *off, int32_t *pos)
{
	extern __shared__ int32_t counts[]; /* [2 n_expert] */
	int32_t *cursor = counts + n_expert;

	for (int i = threadIdx.x; i < n_expert; i += blockDim.x)
		counts[i] = 0;
	__syncthreads();
	for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
		int32_t e = *(const int32_t *)(ids.data + p % n_used * ids.nb[0] +
					       p / n_used * ids.nb[1]);

		if (e >= 0 && e < n_expert)
			atomicAdd(&counts[e], 1);
	}
	__syncthreads();
	if (threadIdx.x == 0) {
		int32_t sum = 0;

		for (int i = 0; i < n_expert; i++) {
			off[i] = sum;
			cursor[i] = sum;
			sum += counts[i];
		}
		off[n_expert] = sum;
	}
	__syncthreads();
	for (int64_t p = threadIdx.x; p < n_pairs; p += blockDim.x) {
		int32_t e = *(const int32_t *)(ids.data + p % n_used * ids.nb[0] +
					       p / n_used * ids.nb[1]);

		pos[p] = e >= 0 && e < n_expert ? atomicAdd(&cursor[e], 1) : -1;
	}
}

/* Largest finite |x| over b (any layout), as the bits of a float. */
__global__ void moe_amax_kernel(tview b, int64_t n, unsigned int *amax)
{
	__shared__ float shm[OPS_BLOCK];
	float m = 0.0f;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t i0, i1, i2, i3;

		unravel(i, b.ne, &i0, &i1, &i2, &i3);
		float v = fabsf(load_at(b, i0, i1, i2, i3));

		if (v <= 3.0e38f)
			m = fmaxf(m, v);
	}
	m = block_max(m, shm);
	if (threadIdx.x == 0)
		atomicMax(amax, __float_as_uint(m));
}

/* x[:, pos[p]] = b[:, slot % B1, t] in type gt (F16 divided by the scale
 * from *amax, whose alpha and beta go to alpha_beta; amax NULL: none). */
__global__ void moe_gather_kernel(tview b, const int32_t *pos, int64_t n_used,
				  int64_t n_pairs, int gt, void *x,
				  const unsigned int *amax, float *alpha_beta)
{
	const int64_t K = b.ne[0], n = n_pairs * K;
	const float scale = amax ? f16_scale(*amax) : 1.0f;

	if (amax && blockIdx.x == 0 && threadIdx.x == 0) {
		alpha_beta[0] = scale;
		alpha_beta[1] = 0.0f;
	}
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t p = i / K, k = i % K;
		const int32_t c = pos[p];

		if (c < 0)
			continue;
		float v = load_at(b, k, p % n_used % b.ne[1], p / n_used, 0);
		int64_t o = (int64_t)c * K + k;

		if (gt == LOOM_TYPE_F32)
			((float *)x)[o] = v;
		else if (gt == LOOM_TYPE_F16)
			((uint16_t *)x)[o] = float_to_half(v / scale);
		else
			((uint16_t *)x)[o] = float_to_bf16(v);
	}
}

/* dst[:, slot, t] = c[:, pos[p]], or zeros for an id out of range. */
__global__ void moe_scatter_kernel(tview dst, const float *c,
				   const int32_t *pos, int64_t n_used,
				   int64_t n_pairs)
{
	const int64_t M = dst.ne[0], n = n_pairs * M;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		const int64_t p = i / M, m = i % M;
		const int32_t col = pos[p];

		store_row(row_ptr(dst, p % n_used, p / n_used, 0), dst, m,
			  col >= 0 ? c[(int64_t)col * M + m] : 0.0f);
	}
}

/* True when expert matrices of a can go to the BLAS as they are. */
static bool blas_reads(const tview &a, int gt, int64_t *lda)
{
	int64_t es = (int64_t)loom_type_size((enum loom_type)gt);

	if (a.type != gt || a.nb[0] != es || a.nb[1] % es ||
	    a.nb[1] / es < a.ne[0] || a.nb[1] / es > INT32_MAX)
		return false;
	*lda = a.nb[1] / es;
	return true;
}

/* The grouped path's operands and scratch. */
struct moe_job {
	int64_t K, M, n_expert, n_used, n_pairs;
	int gt;
	int64_t ges;              /* bytes of an element of type gt */
	const float *alpha, *beta; /* the GEMMs' (device when amax) */
	unsigned int *amax;        /* b's largest magnitude, for F16 */
	float *alpha_beta;
	int32_t *off, *pos, *host; /* groups' offsets, pairs' columns */
	void *x;                   /* b's columns gathered by expert */
	float *c;                  /* the products, by expert */
};

/* What the grouped path covers: a few experts, sizes within the BLAS's
 * int and the scratch's size_t. */
static bool moe_fits(const tview &a, const moe_job &j)
{
	return j.n_expert >= 1 && j.n_expert <= MOE_MAX_EXPERTS &&
	       a.ne[3] == 1 && j.n_pairs <= INT32_MAX && j.K <= INT32_MAX &&
	       j.M <= INT32_MAX && j.n_pairs * j.K <= INT64_MAX / 4 &&
	       j.n_pairs * j.M <= INT64_MAX / 4 &&
	       !(loom_type_is_quantized((enum loom_type)a.type) && j.K % 32);
}

/* For F16: b's largest magnitude on the device, and alpha and beta read
 * from there (the gather scales b into range). */
static int moe_scale_b(struct cuda_backend *be, const tview &b, moe_job *j)
{
	char *small = (char *)cuda_scratch(be, CUDA_SCRATCH_SCALE, 64);
	cudaError_t err;

	if (!small)
		return LOOM_E_NOMEM;
	j->amax = (unsigned int *)small;
	j->alpha_beta = (float *)(small + 16);
	err = cudaMemsetAsync(small, 0, sizeof(unsigned int), be->stream);
	if (err != cudaSuccess)
		return cuda_error(err, "memset");
	moe_amax_kernel<<<grid_for(view_nelements(b)), OPS_BLOCK, 0,
			  be->stream>>>(b, view_nelements(b), j->amax);
	j->alpha = j->alpha_beta;
	j->beta = j->alpha_beta + 1;
	return LOOM_OK;
}

/* Routes the pairs to their experts, gathers b's columns by expert and
 * reads the groups' offsets back to the host. */
static int moe_route(struct cuda_backend *be, const tview &b,
		     const tview &ids, moe_job *j)
{
	int status;
	cudaError_t err;

	moe_route_kernel<<<1, MOE_ROUTE_THREADS,
			   2 * (size_t)j->n_expert * sizeof(int32_t),
			   be->stream>>>(ids, (int)j->n_expert, j->n_used,
					 j->n_pairs, j->off, j->pos);
	if (j->gt == LOOM_TYPE_F16) {
		status = moe_scale_b(be, b, j);
		if (status)
			return status;
	}
	moe_gather_kernel<<<grid_for(j->n_pairs * j->K), OPS_BLOCK, 0,
			    be->stream>>>(b, j->pos, j->n_used, j->n_pairs,
					  j->gt, j->x, j->amax, j->alpha_beta);
	status = launch_status(be, "mul_mat_id: route");
	if (status)
		return status;
	err = cudaMemcpyAsync(j->host, j->off, (size_t)(j->n_expert + 1) * 4,
			      cudaMemcpyDefault, be->stream);
	if (err == cudaSuccess)
		err = cudaStreamSynchronize(be->stream);
	if (err != cudaSuccess)
		return cuda_error(err, "mul_mat_id: reading the groups");
	return LOOM_OK;
}

/* One GEMM per expert with columns: its matrix as the BLAS reads it (a
 * itself, or dequantized or converted into a slab). */
static int moe_gemms(struct cuda_backend *be, const tview &a,
		     const moe_job &j)
{
	int64_t lda = j.K;
	const bool direct = blas_reads(a, j.gt, &lda);
	void *slab = NULL;
	int status;

	if (!direct) {
		slab = cuda_scratch(be, CUDA_SCRATCH_A,
				    (size_t)(j.M * j.K * j.ges));
		if (!slab)
			return LOOM_E_NOMEM;
	}
	for (int64_t e = 0; e < j.n_expert; e++) {
		const int64_t first = j.host[e], cnt = j.host[e + 1] - first;
		const char *mat = a.data + e * a.nb[2];

		if (cnt <= 0)
			continue;
		if (first < 0 || first + cnt > j.n_pairs)
			return loom_error_set(LOOM_E_DEVICE, "%s: mul_mat_id: "
					      "routing gave expert %lld "
					      "columns %lld..%lld of %lld",
					      be->name, (long long)e,
					      (long long)first,
					      (long long)(first + cnt),
					      (long long)j.n_pairs);
		if (!direct) {
			status = cuda_rows_to(be, a, mat, 0, j.M, j.gt, slab);
			if (status)
				return status;
			mat = (const char *)slab;
		}
		status = cuda_gemm(be, j.gt, j.M, cnt, j.K, mat,
				   direct ? lda : j.K, 0,
				   (const char *)j.x + first * j.K * j.ges,
				   j.K, 0, j.c + first * j.M, j.M, 0, 1,
				   j.alpha, j.beta, j.amax != NULL);
		if (status)
			return status;
	}
	return LOOM_OK;
}

int cuda_moe_grouped(struct cuda_backend *be, const tview &dst,
		     const tview &a, const tview &b, const tview &ids)
{
	static const float one_zero[2] = { 1.0f, 0.0f };
	moe_job j = {};
	int status;

	j.K = a.ne[0];
	j.M = a.ne[1];
	j.n_expert = a.ne[2];
	j.n_used = dst.ne[1];
	j.n_pairs = j.n_used * dst.ne[2];
	j.gt = cuda_gemm_type(a.type);
	j.ges = (int64_t)loom_type_size((enum loom_type)j.gt);
	j.alpha = &one_zero[0];
	j.beta = &one_zero[1];
	if (!moe_fits(a, j))
		return LOOM_E_DECLINED;
	if (be->capturing) {
		/* The host reads the groups back: nothing to replay. */
		be->capture_broken = true;
		return loom_error_set(LOOM_E_UNSUPPORTED, "%s: mul_mat_id: "
				      "grouped experts cannot be captured",
				      be->name);
	}
	j.off = (int32_t *)cuda_scratch(
		be, CUDA_SCRATCH_ROUTE,
		(size_t)(j.n_expert + 1 + j.n_pairs) * sizeof(int32_t));
	j.x = cuda_scratch(be, CUDA_SCRATCH_B,
			   (size_t)(j.n_pairs * j.K * j.ges));
	j.c = (float *)cuda_scratch(be, CUDA_SCRATCH_C,
				    (size_t)(j.n_pairs * j.M) * sizeof(float));
	j.host = cuda_host_small(be, (size_t)j.n_expert + 1);
	if (!j.off || !j.x || !j.c || !j.host)
		return LOOM_E_NOMEM;
	j.pos = j.off + j.n_expert + 1;
	status = moe_route(be, b, ids, &j);
	if (status)
		return status;
	cuda_note_path(be, CUDA_PATH_MOE_GROUPED);
	status = moe_gemms(be, a, j);
	if (status)
		return status;
	moe_scatter_kernel<<<grid_for(j.n_pairs * j.M), OPS_BLOCK, 0,
			     be->stream>>>(dst, j.c, j.pos, j.n_used,
					   j.n_pairs);
	return launch_status(be, "mul_mat_id: scatter");
}

#endif /* LOOM_HAVE_BLAS */
