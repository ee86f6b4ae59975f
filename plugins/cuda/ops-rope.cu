/* SPDX-License-Identifier: MIT */
/* ops-rope.cu - rotary position embedding, NORMAL (adjacent pairs) and
 * NEOX (pairs n_dims/2 apart) modes; one thread per output value.  The
 * angles are computed in double, as on the CPU.
 */
#include "ops-common.cuh"

__global__ void rope_kernel(tview dst, tview a, const int32_t *pos,
			    int64_t pos_stride, int n_dims, bool neox,
			    float freq_base, float freq_scale, int64_t n)
{
	const int half = n_dims / 2;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t i0, i1, i2, i3;

		unravel(i, dst.ne, &i0, &i1, &i2, &i3);
		const char *x = row_ptr(a, i1, i2, i3);
		char *y = row_ptr(dst, i1, i2, i3);

		if (i0 >= n_dims) {
			store_row(y, dst, i0, load_row(x, a, i0));
			continue;
		}
		int64_t p, j0, j1;
		bool second;

		if (neox) {
			p = i0 % half;
			j0 = p;
			j1 = p + half;
			second = i0 >= half;
		} else {
			p = i0 / 2;
			j0 = 2 * p;
			j1 = 2 * p + 1;
			second = i0 & 1;
		}
		/* In double, as the CPU computes it: at position 1e5 a float
		 * angle is off by ~4e-3 radians. */
		double freq = (double)freq_scale *
			      pow((double)freq_base, -2.0 * (double)p / n_dims);
		double sd, cd;

		sincos((double)pos[i2 * pos_stride] * freq, &sd, &cd);
		float c = (float)cd, s = (float)sd;
		float x0 = load_row(x, a, j0), x1 = load_row(x, a, j1);

		store_row(y, dst, i0,
			  second ? x0 * s + x1 * c : x0 * c - x1 * s);
	}
}

extern "C" int cuda_op_rope(struct cuda_backend *be, struct loom_tensor *t)
{
	const struct loom_tensor *pos = t->src[1];
	tview dst = make_view(t), a = make_view(t->src[0]);
	int64_t n = view_nelements(dst);
	int n_dims = loom_tensor_op_param_i32(t, 0);

	if (n_dims < 0 || n_dims > a.ne[0] || n_dims % 2)
		return loom_error_set(LOOM_E_INVAL, "%s: rope: bad n_dims %d",
				      be->name, n_dims);
	rope_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(
		dst, a, (const int32_t *)pos->data,
		(int64_t)(pos->nb[0] / sizeof(int32_t)), n_dims,
		loom_tensor_op_param_i32(t, 1) == LOOM_ROPE_NEOX,
		loom_tensor_op_param_f32(t, 2), loom_tensor_op_param_f32(t, 3), n);
	return launch_status(be, loom_op_name(t->op));
}
