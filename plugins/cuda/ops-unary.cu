/* SPDX-License-Identifier: MIT */
/* ops-unary.cu - scale, silu and gelu (tanh approximation), elementwise
 * from any float type into F32.
 */
#include "ops-common.cuh"

__device__ __forceinline__ float unary(int op, float x, float s)
{
	const float k = 0.7978845608028654f; /* sqrt(2 / pi) */

	switch (op) {
	case LOOM_OP_SCALE:
		return x * s;
	case LOOM_OP_SILU:
		return x / (1.0f + expf(-x));
	default:
		return 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x)));
	}
}

/* F32 in and out, packed, 16-byte aligned: four values per access. */
__global__ void unary_f32x4_kernel(float4 *dst, const float4 *a, int op,
				   float s, int64_t n4)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	     i < n4; i += (int64_t)gridDim.x * blockDim.x) {
		float4 x = a[i], r;

		r.x = unary(op, x.x, s);
		r.y = unary(op, x.y, s);
		r.z = unary(op, x.z, s);
		r.w = unary(op, x.w, s);
		dst[i] = r;
	}
}

/* flat: dst and a packed, so the flat index addresses both. */
__global__ void unary_kernel(tview dst, tview a, int op, float s, bool flat,
			     int64_t n)
{
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
		r = unary(op, x, s);
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

	if (flat && a.type == LOOM_TYPE_F32 && dst.type == LOOM_TYPE_F32 &&
	    n % 4 == 0 && ((uintptr_t)dst.data & 15) == 0 &&
	    ((uintptr_t)a.data & 15) == 0) {
		unary_f32x4_kernel<<<grid_for(n / 4), OPS_BLOCK, 0,
				     be->stream>>>((float4 *)dst.data,
						   (const float4 *)a.data,
						   t->op, s, n / 4);
		return launch_status(be, loom_op_name(t->op));
	}
	unary_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(dst, a, t->op,
								s, flat, n);
	return launch_status(be, loom_op_name(t->op));
}
