/* ops-unary.cu - scale, silu and gelu (tanh approximation), elementwise
 * from any float type into F32.
 */
#include "ops-common.cuh"

/* flat: dst and a packed, so the flat index addresses both. */
__global__ void unary_kernel(tview dst, tview a, int op, float s, bool flat,
			     int64_t n)
{
	const float k = 0.7978845608028654f; /* sqrt(2 / pi) */

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t i0 = i, i1 = 0, i2 = 0, i3 = 0;
		float x, r;

		if (flat) {
			x = load_row(a.data, a, i);
		} else {
			unravel(i, dst.ne, &i0, &i1, &i2, &i3);
			x = load_at(a, i0, i1, i2, i3);
		}

		switch (op) {
		case LOOM_OP_SCALE:
			r = x * s;
			break;
		case LOOM_OP_SILU:
			r = x / (1.0f + expf(-x));
			break;
		default:
			r = 0.5f * x *
			    (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
			break;
		}
		/* flat: row (0, 0, 0) holds every element. */
		store_row(row_ptr(dst, i1, i2, i3), dst, i0, r);
	}
}

extern "C" int cuda_op_unary(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]);
	int64_t n = view_nelements(dst);
	float s = t->op == LOOM_OP_SCALE ? loom_tensor_op_param_f32(t, 0) : 0.0f;

	bool flat = view_is_flat(dst) && view_is_flat(a);

	unary_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(dst, a, t->op,
								s, flat, n);
	return launch_status(be, loom_op_name(t->op));
}
