/* SPDX-License-Identifier: MIT */
/* ops-norm.cu - rms_norm and norm over dimension 0, one block per row.
 */
#include "ops-common.cuh"

__global__ void norm_kernel(tview dst, tview a, bool rms, float eps,
			    int64_t nrows)
{
	__shared__ float shm[OPS_BLOCK];
	const int64_t ne0 = a.ne[0];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		int64_t i1, i2, i3;

		row_index(r, a.ne, &i1, &i2, &i3);
		const char *x = row_ptr(a, i1, i2, i3);
		char *y = row_ptr(dst, i1, i2, i3);
		float mean = 0.0f, acc = 0.0f;

		if (!rms) {
			for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x)
				acc += load_row(x, a, i);
			mean = block_sum(acc, shm) / (float)ne0;
			acc = 0.0f;
		}
		for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
			float v = load_row(x, a, i) - mean;

			acc += v * v;
		}
		float scale = rsqrtf(block_sum(acc, shm) / (float)ne0 + eps);

		for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x)
			store_row(y, dst, i,
				  (load_row(x, a, i) - mean) * scale);
	}
}

extern "C" int cuda_op_norm(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]);
	int64_t rows = view_nrows(a);
	float eps = loom_tensor_op_param_f32(t, 0);

	norm_kernel<<<grid_for(rows, 1), OPS_BLOCK, 0, be->stream>>>(
		dst, a, t->op == LOOM_OP_RMS_NORM, eps, rows);
	return launch_status(be, loom_op_name(t->op));
}
