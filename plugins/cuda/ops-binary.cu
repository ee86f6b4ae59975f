/* ops-binary.cu - add, sub, mul and div: a op b with b broadcast to a's
 * shape (b's index is a's modulo b's extent in every dimension).
 */
#include "ops-common.cuh"

template <int op>
__global__ void binary_kernel(tview dst, tview a, tview b, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t i0, i1, i2, i3;

		unravel(i, dst.ne, &i0, &i1, &i2, &i3);
		float x = load_at(a, i0, i1, i2, i3);
		float y = load_at(b, i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2],
				  i3 % b.ne[3]);
		float r;

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
		store_row(row_ptr(dst, i1, i2, i3), dst, i0, r);
	}
}

extern "C" int cuda_op_binary(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]),
	      b = make_view(t->src[1]);
	int64_t n = view_nelements(dst);
	unsigned int grid = grid_for(n);

	switch (t->op) {
	case LOOM_OP_ADD:
		binary_kernel<LOOM_OP_ADD><<<grid, OPS_BLOCK, 0, be->stream>>>(
			dst, a, b, n);
		break;
	case LOOM_OP_SUB:
		binary_kernel<LOOM_OP_SUB><<<grid, OPS_BLOCK, 0, be->stream>>>(
			dst, a, b, n);
		break;
	case LOOM_OP_MUL:
		binary_kernel<LOOM_OP_MUL><<<grid, OPS_BLOCK, 0, be->stream>>>(
			dst, a, b, n);
		break;
	default:
		binary_kernel<LOOM_OP_DIV><<<grid, OPS_BLOCK, 0, be->stream>>>(
			dst, a, b, n);
		break;
	}
	return launch_status(be, loom_op_name(t->op));
}
