/* SPDX-License-Identifier: MIT */
/* ops-norm.c - rms_norm and norm over dimension 0, one row per thread at
 * a time.
 */
#include "cpu-ops.h"

/* The sum of (x[i] - c)^2. */
static float sum_sq(const float *x, float c, int64_t n)
{
	float acc[CPU_LANES] = { 0 };
	float s = 0.0f;
	int64_t i = 0;
	int j;

	for (; i + CPU_LANES <= n; i += CPU_LANES)
		for (j = 0; j < CPU_LANES; j++)
			acc[j] += (x[i + j] - c) * (x[i + j] - c);
	for (; i < n; i++)
		s += (x[i] - c) * (x[i] - c);
	for (j = 0; j < CPU_LANES; j++)
		s += acc[j];
	return s;
}

void cpu_op_norm(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	float eps = loom_tensor_op_param_f32(dst, 0);
	int64_t n = dst->ne[0];
	int64_t r, r0, r1, i;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *x;
		float *d;
		float mean = 0.0f, s;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 1));
		if (dst->op == LOOM_OP_NORM)
			mean = cpu_vec_sum(x, n) / (float)n;
		s = 1.0f / sqrtf(sum_sq(x, mean, n) / (float)n + eps);
		for (i = 0; i < n; i++)
			d[i] = (x[i] - mean) * s;
		cpu_row_put(dst, i1, i2, i3, d);
	}
}
