/* SPDX-License-Identifier: MIT */
/* ops-rows.cu - get_rows (rows picked by I32 ids, any source type, into
 * F32) and set_rows (F32 rows written at I32 ids, converted to the
 * destination's type, Q8_0 included).  Ids out of range read as zeros and
 * write nothing.
 */
#include "ops-common.cuh"

__device__ __forceinline__ int32_t id_at(const tview &ids, int64_t i,
					 int64_t j, int64_t k)
{
	return *(const int32_t *)(ids.data + i * ids.nb[0] +
				  (j % ids.ne[1]) * ids.nb[1] +
				  (k % ids.ne[2]) * ids.nb[2]);
}

__global__ void get_rows_kernel(tview dst, tview a, tview ids, int64_t n)
{
	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t i0, i1, i2, i3;

		unravel(i, dst.ne, &i0, &i1, &i2, &i3);
		int32_t r = id_at(ids, i1, i2, i3);
		float v = 0.0f;

		if (r >= 0 && r < a.ne[1])
			v = load_at(a, i0, r, i2 % a.ne[2], i3 % a.ne[3]);
		store_row(row_ptr(dst, i1, i2, i3), dst, i0, v);
	}
}

extern "C" int cuda_op_get_rows(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), a = make_view(t->src[0]),
	      ids = make_view(t->src[1]);
	int64_t n = view_nelements(dst);

	get_rows_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(dst, a, ids,
								   n);
	return launch_status(be, "get_rows");
}

/* One thread per destination block (32 values for Q8_0, else one). */
__global__ void set_rows_kernel(tview dst, tview val, tview ids, int blck,
				int64_t n)
{
	const int64_t units = val.ne[0] / blck;

	for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
	     i += (int64_t)gridDim.x * blockDim.x) {
		int64_t u = i % units, rest = i / units;
		int64_t i1 = rest % val.ne[1];
		int64_t i2 = (rest / val.ne[1]) % val.ne[2];
		int64_t i3 = rest / (val.ne[1] * val.ne[2]);
		int32_t r = id_at(ids, i1, i2, i3);

		if (r < 0 || r >= dst.ne[1])
			continue;
		const char *x = row_ptr(val, i1, i2, i3);
		char *y = row_ptr(dst, r, i2 % dst.ne[2], i3 % dst.ne[3]);

		if (dst.type == LOOM_TYPE_Q8_0) {
			float tmp[LOOM_QK8_0];

			for (int j = 0; j < LOOM_QK8_0; j++)
				tmp[j] = load_row(x, val,
						  u * LOOM_QK8_0 + j);
			quantize_q8_0(tmp, (struct loom_block_q8_0 *)(y +
							      u * dst.nb[0]));
		} else {
			store_row(y, dst, u, load_row(x, val, u));
		}
	}
}

extern "C" int cuda_op_set_rows(struct cuda_backend *be, struct loom_tensor *t)
{
	tview dst = make_view(t), val = make_view(t->src[1]),
	      ids = make_view(t->src[2]);
	int blck = (int)loom_type_block_size(t->type);
	int64_t n;

	if (val.ne[0] % blck)
		return loom_error_set(LOOM_E_INVAL,
				      "%s: set_rows: row of %lld values does "
				      "not fill whole blocks", be->name,
				      (long long)val.ne[0]);
	n = view_nelements(val) / blck;
	set_rows_kernel<<<grid_for(n), OPS_BLOCK, 0, be->stream>>>(
		dst, val, ids, blck, n);
	return launch_status(be, "set_rows");
}
