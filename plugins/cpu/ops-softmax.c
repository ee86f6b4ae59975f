/* SPDX-License-Identifier: MIT */
/* ops-softmax.c - soft_max over dimension 0 of a * scale + mask, the mask
 * broadcast over dimensions 2 and 3; soft_max_sinks adds its head's sink
 * to the denominator.
 */
#include "cpu-ops.h"
#include "cpu-simd.h"

void cpu_op_soft_max(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *mask = dst->src[1];
	const struct loom_tensor *sinks =
		dst->op == LOOM_OP_SOFT_MAX_SINKS ? dst->src[2] : NULL;
	float scale = loom_tensor_op_param_f32(dst, 0);
	int64_t n = dst->ne[0];
	int64_t r, r0, r1, i;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *x;
		float *d;
		float max, sum, sink = -INFINITY;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 2));
		if (mask) {
			const float *m = cpu_row_f32(mask, i1,
						     i2 % mask->ne[2],
						     i3 % mask->ne[3],
						     cpu_scratch(task, dst, 1));

			for (i = 0; i < n; i++)
				d[i] = x[i] * scale + m[i];
		} else {
			for (i = 0; i < n; i++)
				d[i] = x[i] * scale;
		}
		max = cpu_vec_max(d, n);
		if (sinks) {
			memcpy(&sink, (const char *)sinks->data +
				      i2 * sinks->nb[0], sizeof(sink));
			max = sink > max ? sink : max;
		}
		if (max == -INFINITY) {
			/* Everything masked: no weight anywhere. */
			memset(d, 0, n * sizeof(float));
		} else {
			i = 0;
#if defined(CPU_HAVE_EXP256)
			for (; i + 8 <= n; i += 8)
				_mm256_storeu_ps(d + i, cpu_exp256(_mm256_sub_ps(
					_mm256_loadu_ps(d + i),
					_mm256_set1_ps(max))));
#endif
			for (; i < n; i++)
				d[i] = cpu_expf(d[i] - max);
			sum = cpu_vec_sum(d, n);
			if (sinks)
				sum += cpu_expf(sink - max);
			sum = 1.0f / sum;
			for (i = 0; i < n; i++)
				d[i] *= sum;
		}
		cpu_row_put(dst, i1, i2, i3, d);
	}
}
