/* SPDX-License-Identifier: MIT */
/* ops-rows.c - get_rows (gather rows of any type by index into F32) and
 * set_rows (scatter F32 rows by index into F32, F16, BF16 or Q8_0).
 * Indices out of range are skipped: the row is left as it was (set) or
 * zero (get).
 */
#include "cpu-ops.h"

static int32_t read_id(const struct loom_tensor *ids, int64_t i0, int64_t i1,
		       int64_t i2)
{
	int32_t id;

	memcpy(&id, (const char *)ids->data + i0 * ids->nb[0] +
		     (i1 % ids->ne[1]) * ids->nb[1] +
		     (i2 % ids->ne[2]) * ids->nb[2], sizeof(id));
	return id;
}

void cpu_op_get_rows(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *ids = dst->src[1];
	int64_t ne0 = dst->ne[0];
	int64_t r, r0, r1;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		int32_t id;
		const char *src;
		float *d;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		id = read_id(ids, i1, i2, i3);
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 0));
		if (id < 0 || id >= a->ne[1]) {
			memset(d, 0, ne0 * sizeof(float));
			cpu_row_put(dst, i1, i2, i3, d);
			continue;
		}
		src = cpu_row_ptr(a, id, i2 % a->ne[2], i3 % a->ne[3]);
		if (a->type == dst->type && !loom_type_is_quantized(a->type)) {
			/* Same storage: move the bytes (exact for I32). */
			size_t es = loom_type_size(a->type);
			char *o = cpu_row_ptr(dst, i1, i2, i3);
			int64_t i;

			if (a->nb[0] == es && dst->nb[0] == es) {
				memcpy(o, src, ne0 * es);
				continue;
			}
			for (i = 0; i < ne0; i++)
				memcpy(o + i * dst->nb[0], src + i * a->nb[0],
				       es);
			continue;
		}
		cpu_load_f32(a->type, src, a->nb[0], d, ne0);
		cpu_row_put(dst, i1, i2, i3, d);
	}
}

void cpu_op_set_rows(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *v = dst->src[1];
	const struct loom_tensor *ids = dst->src[2];
	int64_t ne0 = v->ne[0];
	int64_t r, r0, r1;

	/* The node views the destination: write through the node itself. */
	cpu_split_rows(task, loom_tensor_n_rows(v), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		int32_t id;
		const float *x;

		cpu_row_coords(v, r, &i1, &i2, &i3);
		id = read_id(ids, i1, i2, i3);
		if (id < 0 || id >= dst->ne[1])
			continue;
		x = cpu_row_f32(v, i1, i2, i3, cpu_scratch(task, dst, 0));
		cpu_store_f32(dst->type,
			      cpu_row_ptr(dst, id, i2 % dst->ne[2],
					  i3 % dst->ne[3]),
			      dst->nb[0], x, ne0);
	}
}
