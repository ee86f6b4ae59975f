/* SPDX-License-Identifier: MIT */
/* ops-unary.c - scale, silu and gelu: one value in, one value out.
 * Packed F32 runs as one flat loop split over the threads; other layouts
 * and storage types go row by row through F32 scratch.
 */
#include "cpu-ops.h"
#include "cpu-simd.h"

static void vec_unary(const struct loom_tensor *dst, float *d, const float *x,
		      int64_t n)
{
	int64_t i;

	switch (dst->op) {
	case LOOM_OP_SCALE: {
		float s = loom_tensor_op_param_f32(dst, 0);

		for (i = 0; i < n; i++)
			d[i] = x[i] * s;
		break;
	}
	case LOOM_OP_SILU:
		i = 0;
#if defined(CPU_HAVE_EXP256)
		for (; i + 8 <= n; i += 8) {
			__m256 v = _mm256_loadu_ps(x + i);

			_mm256_storeu_ps(d + i, _mm256_div_ps(v, _mm256_add_ps(
				_mm256_set1_ps(1.0f), cpu_exp256(_mm256_sub_ps(
					_mm256_setzero_ps(), v)))));
		}
#endif
		for (; i < n; i++)
			d[i] = x[i] / (1.0f + cpu_expf(-x[i]));
		break;
	case LOOM_OP_GELU:
		/* 0.5 (1 + tanh(u)) = 1 / (1 + e^(-2u)), so gelu is
		 * x / (1 + e^(-2u)), silu's form: an infinite x gives an
		 * infinity of its sign, never inf - inf. */
		i = 0;
#if defined(CPU_HAVE_EXP256)
		for (; i + 8 <= n; i += 8) {
			__m256 v = _mm256_loadu_ps(x + i);
			__m256 u = _mm256_mul_ps(_mm256_set1_ps(
				0.7978845608028654f), _mm256_add_ps(v,
				_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(
					0.044715f), v), _mm256_mul_ps(v, v))));

			_mm256_storeu_ps(d + i, _mm256_div_ps(v, _mm256_add_ps(
				_mm256_set1_ps(1.0f), cpu_exp256(_mm256_mul_ps(
					_mm256_set1_ps(-2.0f), u)))));
		}
#endif
		for (; i < n; i++) {
			float v = x[i];
			float u = 0.7978845608028654f *
				  (v + 0.044715f * v * v * v);

			d[i] = v / (1.0f + cpu_expf(-2.0f * u));
		}
		break;
	default:
		break;
	}
}

void cpu_op_unary(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	int64_t r, r0, r1;

	if (cpu_is_f32_contig(a) && cpu_is_f32_contig(dst)) {
		int64_t n = loom_tensor_n_elements(dst);
		int64_t per = ((n + task->nth - 1) / task->nth + 15) & ~15;
		int64_t i0 = per * task->ith;
		int64_t i1 = i0 + per < n ? i0 + per : n;

		if (i0 < i1)
			vec_unary(dst, (float *)dst->data + i0,
				  (const float *)a->data + i0, i1 - i0);
		return;
	}

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *x;
		float *d;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 1));
		vec_unary(dst, d, x, dst->ne[0]);
		cpu_row_put(dst, i1, i2, i3, d);
	}
}
