/* SPDX-License-Identifier: MIT */
/* ops-rope.c - rotary position embedding, normal (adjacent pairs) and
 * neox (pairs half a rotation apart).  The angles of a token are computed
 * once, in double, and reused for all its heads.  rope_yarn mixes each
 * pair's frequency with its interpolation and scales the rotation.
 */
#define _GNU_SOURCE
#include <math.h>

#include "cpu-ops.h"

/* Pair i's frequency under YaRN (loom.h, loom_rope_yarn), and in *mscale
 * the factor of cosine and sine. */
static void yarn_freqs(const struct loom_tensor *dst, double *freq,
		       double *mscale)
{
	int n_dims = loom_tensor_op_param_i32(dst, 0);
	double base = loom_tensor_op_param_f32(dst, 2);
	double fscale = loom_tensor_op_param_f32(dst, 3);
	double n_ctx = loom_tensor_op_param_i32(dst, 4);
	double ext = loom_tensor_op_param_f32(dst, 5);
	double fast = loom_tensor_op_param_f32(dst, 7);
	double slow = loom_tensor_op_param_f32(dst, 8);
	double k = n_dims / (2.0 * log(base));
	double lo = floor(k * log(n_ctx / (fast * 2.0 * M_PI)));
	double hi = ceil(k * log(n_ctx / (slow * 2.0 * M_PI)));
	double span;

	lo = lo > 0.0 ? lo : 0.0;
	hi = hi < n_dims - 1 ? hi : n_dims - 1;
	span = hi - lo > 0.001 ? hi - lo : 0.001;
	*mscale = loom_tensor_op_param_f32(dst, 6);
	if (ext != 0.0)
		*mscale *= 1.0 + 0.1 * log(1.0 / fscale);
	for (int64_t i = 0; i < n_dims / 2; i++) {
		double y = (i - lo) / span;
		double mix = ext * (1.0 - (y < 0.0 ? 0.0 : y > 1.0 ? 1.0 : y));

		freq[i] = pow(base, -2.0 * i / n_dims) *
			  (fscale * (1.0 - mix) + mix);
	}
}

void cpu_op_rope(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *pos = dst->src[1];
	int n_dims = loom_tensor_op_param_i32(dst, 0);
	int mode = loom_tensor_op_param_i32(dst, 1);
	double base = loom_tensor_op_param_f32(dst, 2);
	double fscale = loom_tensor_op_param_f32(dst, 3);
	int64_t half = n_dims / 2;
	int64_t cached = -1;
	float *cs = cpu_scratch(task, dst, 2);
	float *sn = cs + half;
	/* Each pair's frequency, once per node (half doubles fit in a
	 * scratch row of at least n_dims floats). */
	double *freq = (double *)cpu_scratch(task, dst, 3);
	double mscale = 1.0;
	int64_t r, r0, r1, i;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	if (r0 < r1 && dst->op == LOOM_OP_ROPE_YARN)
		yarn_freqs(dst, freq, &mscale);
	else if (r0 < r1)
		for (i = 0; i < half; i++)
			freq[i] = fscale * pow(base, -2.0 * i / n_dims);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *x;
		float *d;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		if (i2 != cached) {
			int32_t p;

			memcpy(&p, (const char *)pos->data + i2 * pos->nb[0],
			       sizeof(p));
			for (i = 0; i < half; i++) {
				double s, c;

				sincos(p * freq[i], &s, &c);
				cs[i] = (float)(c * mscale);
				sn[i] = (float)(s * mscale);
			}
			cached = i2;
		}
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 1));
		if (mode == LOOM_ROPE_NEOX) {
			for (i = 0; i < half; i++) {
				float x0 = x[i], x1 = x[i + half];

				d[i] = x0 * cs[i] - x1 * sn[i];
				d[i + half] = x0 * sn[i] + x1 * cs[i];
			}
		} else {
			for (i = 0; i < half; i++) {
				float x0 = x[2 * i], x1 = x[2 * i + 1];

				d[2 * i] = x0 * cs[i] - x1 * sn[i];
				d[2 * i + 1] = x0 * sn[i] + x1 * cs[i];
			}
		}
		for (i = n_dims; i < dst->ne[0]; i++)
			d[i] = x[i];
		cpu_row_put(dst, i1, i2, i3, d);
	}
}
