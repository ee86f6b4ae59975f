/* ops-binary.cu - add, sub, mul and div: a op b with b broadcast to a's
 * shape (b's index is a's modulo b's extent in every dimension).
 */
#include "ops-common.cuh"

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

		switch (op) {
		case LOOM_OP_ADD:
			r = x + y;
			break;
		case LOOM_OP_SUB:
			r = x - y;
			break;
		case LOOM_OP_MUL:
			r = x * y;
			break;
		default:
			r = x / y;
			break;
		}
		if (flat)
			store_row(dst.data, dst, i, r);
		else
			store_row(row_ptr(dst, i1, i2, i3), dst, i0, r);
	}
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
