/* SPDX-License-Identifier: MIT */
/* ops-softmax.cu - softmax(a * scale + mask) over dimension 0, one block
 * per row.  The mask row is a's row index, broadcast over dimensions 2
 * and 3.
 */
#include "ops-common.cuh"

__global__ void softmax_kernel(tview dst, tview a, tview mask, bool has_mask,
			       float scale, int64_t nrows)
{
	__shared__ float shm[OPS_BLOCK];
	const int64_t ne0 = a.ne[0];

	for (int64_t r = blockIdx.x; r < nrows; r += gridDim.x) {
		int64_t i1, i2, i3;

		row_index(r, a.ne, &i1, &i2, &i3);
		const char *x = row_ptr(a, i1, i2, i3);
		const char *m = has_mask ?
			row_ptr(mask, i1, i2 % mask.ne[2], i3 % mask.ne[3]) :
			NULL;
		char *y = row_ptr(dst, i1, i2, i3);
		float mx = -INFINITY, sum = 0.0f;

		for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
			float v = load_row(x, a, i) * scale;

			if (m)
				v += load_row(m, mask, i);
			mx = fmaxf(mx, v);
		}
		mx = block_max(mx, shm);
		for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x) {
			float v = load_row(x, a, i) * scale;

			if (m)
				v += load_row(m, mask, i);
			v = mx == -INFINITY ? 0.0f : expf(v - mx);
			store_row(y, dst, i, v);
			sum += v;
		}
		sum = block_sum(sum, shm);
		float inv = sum > 0.0f ? 1.0f / sum : 0.0f;

		/* Each thread rescales the values it wrote itself. */
		for (int64_t i = threadIdx.x; i < ne0; i += blockDim.x)
			*(float *)(y + i * dst.nb[0]) *= inv;
	}
}

extern "C" int cuda_op_softmax(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]), mask = {};
	int64_t rows = view_nrows(a);
	float scale = loom_tensor_op_param_f32(t, 0);

	if (t->src[1])
		mask = make_view(t->src[1]);
	softmax_kernel<<<grid_for(rows, 1), OPS_BLOCK, 0, be->stream>>>(
		dst, a, mask, t->src[1] != NULL, scale, rows);
	return launch_status(be, loom_op_name(t->op));
}
