/* SPDX-License-Identifier: MIT */
/* ops-oai.c - the feed-forward ops of the gpt-oss family: its clamped
 * gated unit (swiglu_oai) and the per-expert bias (add_id).  Attention
 * sinks and YaRN live with soft_max and rope.
 */
#include "cpu-ops.h"

void cpu_op_swiglu_oai(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *gate = dst->src[0], *up = dst->src[1];
	float alpha = loom_tensor_op_param_f32(dst, 0);
	float limit = loom_tensor_op_param_f32(dst, 1);
	int64_t n = dst->ne[0];
	int64_t r, r0, r1, i;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *g, *u;
		float *d;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		g = cpu_row_f32(gate, i1, i2, i3, cpu_scratch(task, dst, 0));
		u = cpu_row_f32(up, i1, i2, i3, cpu_scratch(task, dst, 1));
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 2));
		for (i = 0; i < n; i++) {
			float x = g[i] < limit ? g[i] : limit;
			float y = u[i] < limit ? u[i] : limit;

			y = y > -limit ? y : -limit;
			d[i] = x / (1.0f + cpu_expf(-alpha * x)) * (y + 1.0f);
		}
		cpu_row_put(dst, i1, i2, i3, d);
	}
}

void cpu_op_add_id(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0], *b = dst->src[1];
	const struct loom_tensor *ids = dst->src[2];
	int64_t n = dst->ne[0];
	int64_t r, r0, r1, i;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *x, *y;
		float *d;
		int32_t id;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		memcpy(&id, (const char *)ids->data + i1 * ids->nb[0] +
			    i2 * ids->nb[1], sizeof(id));
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 2));
		if (id < 0 || id >= b->ne[1]) {
			if (d != x)
				memcpy(d, x, n * sizeof(float));
		} else {
			y = cpu_row_f32(b, id, 0, 0, cpu_scratch(task, dst, 1));
			for (i = 0; i < n; i++)
				d[i] = x[i] + y[i];
		}
		cpu_row_put(dst, i1, i2, i3, d);
	}
}
