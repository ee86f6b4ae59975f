/* SPDX-License-Identifier: MIT */
/* ops-binary.cu - add, sub, mul and div: a op b with b broadcast to a's
 * shape (b's index is a's modulo b's extent in every dimension).
 */
#include "ops-common.cuh"

template <int op>
__device__ __forceinline__ float apply(float x, float y)
{
	switch (op) {
	case LOOM_OP_ADD:
		return x + y;
	case LOOM_OP_SUB:
		return x - y;
	case LOOM_OP_MUL:
		return x * y;
	default:
		return x / y;
	}
}

/* flat: every tensor packed and b's shape a prefix of a's, so b's element
 * is the flat index modulo b's size (no index arithmetic per dimension). */
template <int op, bool flat>
__global__ void binary_kernel(tview dst, tview a, tview b, int64_t n)
{
	const int64_t nb_el = view_nelements(b);

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t i0, i1, i2, i3;
		float x, y, r;

		if (flat) {
			x = load_row(a.data, a, i);
			y = load_row(b.data, b, nb_el == n ? i : i % nb_el);
		} else {
			unravel(i, dst.ne, &i0, &i1, &i2, &i3);
			x = load_at(a, i0, i1, i2, i3);
			y = load_at(b, i0 % b.ne[0], i1 % b.ne[1],
				    i2 % b.ne[2], i3 % b.ne[3]);
		}

		r = apply<op>(x, y);
		if (flat)
			store_row(dst.data, dst, i, r);
		else
			store_row(row_ptr(dst, i1, i2, i3), dst, i0, r);
	}
}

/* All F32, packed, 16-byte aligned, sizes multiples of 4: four values per
 * load and store, and b's index (same size, or a repeated block such as
 * a bias row) found once per four. */
template <int op>
__global__ void binary_f32x4_kernel(float4 *dst, const float4 *a,
				    const float4 *b, int64_t n4, int64_t nb4)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
	     i < n4; i += (int64_t)gridDim.x * blockDim.x) {
		float4 x = a[i], y = b[nb4 == n4 ? i : i % nb4], r;

		r.x = apply<op>(x.x, y.x);
		r.y = apply<op>(x.y, y.y);
		r.z = apply<op>(x.z, y.z);
		r.w = apply<op>(x.w, y.w);
		dst[i] = r;
	}
}

static bool aligned16(const void *p)
{
	return ((uintptr_t)p & 15) == 0;
}

/* True when b's shape equals a's up to some dimension and is 1 after. */
static bool prefix_shape(const tview &b, const tview &a)
{
	int d = 0;

	while (d < 4 && b.ne[d] == a.ne[d])
		d++;
	for (; d < 4; d++)
		if (b.ne[d] != 1)
			return false;
	return true;
}

template <int op>
static void launch(const struct cuda_backend *be, const tview &dst,
		   const tview &a, const tview &b, int64_t n, bool flat)
{
	int64_t nb_el = view_nelements(b);

	if (flat && dst.type == LOOM_TYPE_F32 && a.type == LOOM_TYPE_F32 &&
	    b.type == LOOM_TYPE_F32 && n % 4 == 0 && nb_el % 4 == 0 &&
	    aligned16(dst.data) && aligned16(a.data) && aligned16(b.data)) {
		binary_f32x4_kernel<op><<<grid_for(n / 4), OPS_BLOCK, 0,
					   be->stream>>>(
			(float4 *)dst.data, (const float4 *)a.data,
			(const float4 *)b.data, n / 4, nb_el / 4);
		return;
	}
	if (flat)
		binary_kernel<op, true><<<grid_for(n), OPS_BLOCK, 0,
					  be->stream>>>(dst, a, b, n);
	else
		binary_kernel<op, false><<<grid_for(n), OPS_BLOCK, 0,
					   be->stream>>>(dst, a, b, n);
}

extern "C" int cuda_op_binary(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]),
	      b = make_view(t->src[1]);
	int64_t n = view_nelements(dst);
	bool flat = view_is_flat(dst) && view_is_flat(a) && view_is_flat(b) &&
		    prefix_shape(b, a);

	switch (t->op) {
	case LOOM_OP_ADD:
		launch<LOOM_OP_ADD>(be, dst, a, b, n, flat);
		break;
	case LOOM_OP_SUB:
		launch<LOOM_OP_SUB>(be, dst, a, b, n, flat);
		break;
	case LOOM_OP_MUL:
		launch<LOOM_OP_MUL>(be, dst, a, b, n, flat);
		break;
	default:
		launch<LOOM_OP_DIV>(be, dst, a, b, n, flat);
		break;
	}
	return launch_status(be, loom_op_name(t->op));
}
