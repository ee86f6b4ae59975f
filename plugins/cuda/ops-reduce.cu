/* SPDX-License-Identifier: MIT */
/* ops-reduce.cu - row reductions: sum_rows, argmax (first index on ties)
 * and top_k (largest first, lower index first on ties); one block per row.
 */
#include "ops-common.cuh"

/* True when (v, i) comes before (w, j): larger value, then lower index;
 * NaN ranks after every number (as on the CPU), so a row always has ne0
 * distinct places to give.  j < 0 means "nothing yet". */
__device__ __forceinline__ bool before(float v, int64_t i, float w, int64_t j)
{
	bool vn = v != v, wn = w != w;

	if (i < 0)
		return false;
	if (j < 0)
		return true;
	if (vn != wn)
		return wn;
	if (vn)
		return i < j;
	return v > w || (v == w && i < j);
}

/* The block's first (value, index) in that order; every thread gets it.
 * Uses shv/shi[OPS_BLOCK]. */
__device__ __forceinline__ void block_best(float *v, int64_t *i, float *shv,
					   int64_t *shi)
{
	shv[threadIdx.x] = *v;
	shi[threadIdx.x] = *i;
	__syncthreads();
	for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
		if (threadIdx.x < s &&
		    before(shv[threadIdx.x + s], shi[threadIdx.x + s],
			   shv[threadIdx.x], shi[threadIdx.x])) {
			shv[threadIdx.x] = shv[threadIdx.x + s];
			shi[threadIdx.x] = shi[threadIdx.x + s];
		}
		__syncthreads();
	}
	*v = shv[0];
	*i = shi[0];
	__syncthreads();
}

__global__ void reduce_kernel(tview dst, tview a, int op, int k,
			      int64_t nrows)
{
	__shared__ float shv[OPS_BLOCK];
	__shared__ int64_t shi[OPS_BLOCK];
	const int64_t ne0 = a.ne[0];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		int64_t i1, i2, i3;

		row_index(r, a.ne, &i1, &i2, &i3);
		const char *x = row_ptr(a, i1, i2, i3);
		char *y = row_ptr(dst, i1, i2, i3);

		if (op == LOOM_OP_SUM_ROWS) {
			float acc = 0.0f;

			for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x)
				acc += load_row(x, a, i);
			acc = block_sum(acc, shv);
			if (threadIdx.x == 0)
				*(float *)y = acc; /* element 0 */
			continue;
		}
		if (op == LOOM_OP_ARGMAX) {
			/* dst is [ne1]: row r's result is element r. */
			y = dst.data + r * dst.nb[0];
			k = 1;
		}
		float pv = 0.0f;
		int64_t pi = -1;

		for (int n = 0; n < k; n++) {
			float bv = 0.0f;
			int64_t bi = -1;

			for (int64_t i = threadIdx.x; i < ne0;
			     i += blockDim.x) {
				float v = load_row(x, a, i);

				/* Only what comes after the last pick. */
				if (pi >= 0 && !before(pv, pi, v, i))
					continue;
				if (before(v, i, bv, bi)) {
					bv = v;
					bi = i;
				}
			}
			block_best(&bv, &bi, shv, shi);
			if (threadIdx.x == 0)
				*(int32_t *)(y + n * dst.nb[0]) =
					(int32_t)(bi < 0 ? 0 : bi);
			pv = bv;
			pi = bi;
		}
	}
}

extern "C" int cuda_op_reduce(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]);
	int64_t rows = view_nrows(a);
	int k = t->op == LOOM_OP_TOP_K ? loom_tensor_op_param_i32(t, 0) : 1;

	if (k < 1 || k > a.ne[0])
		return loom_error_set(LOOM_E_INVAL, "%s: top_k: bad k %d",
				      be->name, k);
	reduce_kernel<<<grid_for(rows, 1), OPS_BLOCK, 0, be->stream>>>(
		dst, a, t->op, k, rows);
	return launch_status(be, loom_op_name(t->op));
}
