/* SPDX-License-Identifier: MIT */
/* ref-ops.c - the op-conformance suite's reference ops in double precision,
 * written for clarity over dense arrays (no strides, no types).  The
 * semantics are those documented in include/loom/loom.h.
 */
#include "ref-ops.h"
#include "test-util.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

void ref_tensor_init(struct ref_tensor *t, const int64_t ne[4])
{
	for (int i = 0; i < 4; i++)
		t->ne[i] = ne[i];
	t->data = loom_test_malloc(sizeof(double) *
				 (size_t)(ref_nelements(t) ? ref_nelements(t) : 1));
}

void ref_tensor_free(struct ref_tensor *t)
{
	free(t->data);
	t->data = NULL;
}

int64_t ref_nelements(const struct ref_tensor *t)
{
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

double *ref_at(const struct ref_tensor *t, int64_t i0, int64_t i1,
	       int64_t i2, int64_t i3)
{
	assert(i0 >= 0 && i0 < t->ne[0] && i1 >= 0 && i1 < t->ne[1] &&
		 i2 >= 0 && i2 < t->ne[2] && i3 >= 0 && i3 < t->ne[3]);
	return &t->data[((i3 * t->ne[2] + i2) * t->ne[1] + i1) * t->ne[0] +
			i0];
}

/* Walks every index of shape ne: for (i3) for (i2) for (i1) for (i0). */
#define FOR_EACH(ne, i0, i1, i2, i3)                                         \
	for (int64_t i3 = 0; i3 < (ne)[3]; i3++)                            \
	for (int64_t i2 = 0; i2 < (ne)[2]; i2++)                            \
	for (int64_t i1 = 0; i1 < (ne)[1]; i1++)                            \
	for (int64_t i0 = 0; i0 < (ne)[0]; i0++)

/* Walks every row (i1, i2, i3) of shape ne. */
#define FOR_EACH_ROW(ne, i1, i2, i3)                                         \
	for (int64_t i3 = 0; i3 < (ne)[3]; i3++)                            \
	for (int64_t i2 = 0; i2 < (ne)[2]; i2++)                            \
	for (int64_t i1 = 0; i1 < (ne)[1]; i1++)

void ref_binary(enum ref_binary_op op, const struct ref_tensor *a,
		const struct ref_tensor *b, struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	FOR_EACH(a->ne, i0, i1, i2, i3) {
		double x = *ref_at(a, i0, i1, i2, i3);
		double y = *ref_at(b, i0 % b->ne[0], i1 % b->ne[1],
				   i2 % b->ne[2], i3 % b->ne[3]);
		double r = 0;

		switch (op) {
		case REF_ADD:
			r = x + y;
			break;
		case REF_SUB:
			r = x - y;
			break;
		case REF_MUL:
			r = x * y;
			break;
		case REF_DIV:
			r = x / y;
			break;
		}
		*ref_at(out, i0, i1, i2, i3) = r;
	}
}

void ref_scale(const struct ref_tensor *a, double s, struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	for (int64_t i = 0; i < ref_nelements(a); i++)
		out->data[i] = a->data[i] * s;
}

void ref_silu(const struct ref_tensor *a, struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	for (int64_t i = 0; i < ref_nelements(a); i++) {
		double x = a->data[i];

		out->data[i] = x / (1 + exp(-x));
	}
}

void ref_gelu(const struct ref_tensor *a, struct ref_tensor *out)
{
	const double c = sqrt(2 / M_PI);

	ref_tensor_init(out, a->ne);
	for (int64_t i = 0; i < ref_nelements(a); i++) {
		double x = a->data[i];

		out->data[i] = 0.5 * x *
			       (1 + tanh(c * (x + 0.044715 * x * x * x)));
	}
}

void ref_rms_norm(const struct ref_tensor *a, double eps,
		  struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	FOR_EACH_ROW(a->ne, i1, i2, i3) {
		double sum = 0, inv;

		for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
			sum += *ref_at(a, i0, i1, i2, i3) *
			       *ref_at(a, i0, i1, i2, i3);
		inv = 1 / sqrt(sum / a->ne[0] + eps);
		for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
			*ref_at(out, i0, i1, i2, i3) =
				*ref_at(a, i0, i1, i2, i3) * inv;
	}
}

void ref_norm(const struct ref_tensor *a, double eps, struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	FOR_EACH_ROW(a->ne, i1, i2, i3) {
		double mean = 0, var = 0, inv;

		for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
			mean += *ref_at(a, i0, i1, i2, i3);
		mean /= a->ne[0];
		for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
			double d = *ref_at(a, i0, i1, i2, i3) - mean;

			var += d * d;
		}
		var /= a->ne[0];
		inv = 1 / sqrt(var + eps);
		for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
			*ref_at(out, i0, i1, i2, i3) =
				(*ref_at(a, i0, i1, i2, i3) - mean) * inv;
	}
}

void ref_soft_max(const struct ref_tensor *a, const struct ref_tensor *mask,
		  double scale, struct ref_tensor *out)
{
	ref_soft_max_sinks(a, mask, NULL, scale, out);
}

void ref_rope(const struct ref_tensor *a, const struct ref_tensor *pos,
	      int n_dims, int mode, double freq_base, double freq_scale,
	      struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	memcpy(out->data, a->data, ref_nelements(a) * sizeof(*a->data));
	/* a is [head_dim, n_head, n_tokens, 1]; token t is at pos[t]. */
	for (int64_t t = 0; t < a->ne[2]; t++)
	for (int64_t h = 0; h < a->ne[1]; h++)
	for (int i = 0; i < n_dims / 2; i++) {
		double theta = pos->data[t] * freq_scale *
			       pow(freq_base, -2.0 * i / n_dims);
		int64_t j0 = mode == 2 ? i : 2 * i;
		int64_t j1 = mode == 2 ? i + n_dims / 2 : 2 * i + 1;
		double x0 = *ref_at(a, j0, h, t, 0);
		double x1 = *ref_at(a, j1, h, t, 0);

		*ref_at(out, j0, h, t, 0) = x0 * cos(theta) - x1 * sin(theta);
		*ref_at(out, j1, h, t, 0) = x0 * sin(theta) + x1 * cos(theta);
	}
}

void ref_mul_mat(const struct ref_tensor *a, const struct ref_tensor *b,
		 struct ref_tensor *out)
{
	int64_t ne[4] = { a->ne[1], b->ne[1], b->ne[2], b->ne[3] };
	int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];

	ref_tensor_init(out, ne);
	FOR_EACH(ne, m, n, i2, i3) {
		double sum = 0;

		for (int64_t k = 0; k < a->ne[0]; k++)
			sum += *ref_at(a, k, m, i2 / r2, i3 / r3) *
			       *ref_at(b, k, n, i2, i3);
		*ref_at(out, m, n, i2, i3) = sum;
	}
}

void ref_mul_mat_id(const struct ref_tensor *as, const struct ref_tensor *b,
		    const struct ref_tensor *ids, struct ref_tensor *out)
{
	int64_t ne[4] = { as->ne[1], ids->ne[0], ids->ne[1], 1 };

	ref_tensor_init(out, ne);
	FOR_EACH(ne, m, e, t, z) {
		int64_t x = (int64_t)*ref_at(ids, e, t, 0, 0);
		double sum = 0;

		/* An expert out of range contributes zeros. */
		for (int64_t k = 0; x >= 0 && x < as->ne[2] &&
				    k < as->ne[0]; k++)
			sum += *ref_at(as, k, m, x, 0) *
			       *ref_at(b, k, e % b->ne[1], t, 0);
		*ref_at(out, m, e, t, 0) = sum;
	}
}

void ref_get_rows(const struct ref_tensor *a, const struct ref_tensor *ids,
		  struct ref_tensor *out)
{
	int64_t ne[4] = { a->ne[0], ids->ne[0], ids->ne[1], ids->ne[2] };

	ref_tensor_init(out, ne);
	FOR_EACH(ne, i0, j, i2, i3) {
		int64_t r = (int64_t)*ref_at(ids, j, i2, i3, 0);

		*ref_at(out, i0, j, i2, i3) = r < 0 || r >= a->ne[1] ? 0 :
			*ref_at(a, i0, r, i2 % a->ne[2], i3 % a->ne[3]);
	}
}

void ref_set_rows(const struct ref_tensor *dst,
		  const struct ref_tensor *values,
		  const struct ref_tensor *ids, struct ref_tensor *out)
{
	ref_tensor_init(out, dst->ne);
	memcpy(out->data, dst->data, ref_nelements(dst) * sizeof(*dst->data));
	FOR_EACH(values->ne, i0, j, i2, i3) {
		int64_t r = (int64_t)*ref_at(ids, j, i2, i3, 0);

		*ref_at(out, i0, r, i2, i3) = *ref_at(values, i0, j, i2, i3);
	}
}

void ref_cpy(const struct ref_tensor *a, const int64_t ne[4],
	     struct ref_tensor *out)
{
	ref_tensor_init(out, ne);
	assert(ref_nelements(out) == ref_nelements(a));
	memcpy(out->data, a->data, ref_nelements(a) * sizeof(*a->data));
}

void ref_concat(const struct ref_tensor *a, const struct ref_tensor *b,
		int dim, struct ref_tensor *out)
{
	int64_t ne[4] = { a->ne[0], a->ne[1], a->ne[2], a->ne[3] };

	ne[dim] += b->ne[dim];
	ref_tensor_init(out, ne);
	FOR_EACH(ne, i0, i1, i2, i3) {
		int64_t i[4] = { i0, i1, i2, i3 };
		const struct ref_tensor *src = a;

		if (i[dim] >= a->ne[dim]) {
			i[dim] -= a->ne[dim];
			src = b;
		}
		*ref_at(out, i0, i1, i2, i3) =
			*ref_at(src, i[0], i[1], i[2], i[3]);
	}
}

void ref_sum_rows(const struct ref_tensor *a, struct ref_tensor *out)
{
	int64_t ne[4] = { 1, a->ne[1], a->ne[2], a->ne[3] };

	ref_tensor_init(out, ne);
	FOR_EACH(a->ne, i0, i1, i2, i3)
		*ref_at(out, 0, i1, i2, i3) += *ref_at(a, i0, i1, i2, i3);
}

/* True when (v, i) ranks before (w, j): larger, then the lower index;
 * NaN after every number. */
static bool ranks_before(double v, int64_t i, double w, int64_t j)
{
	if (isnan(v) != isnan(w))
		return isnan(w);
	if (isnan(v))
		return i < j;
	return v > w || (v == w && i < j);
}

void ref_argmax(const struct ref_tensor *a, struct ref_tensor *out)
{
	int64_t ne[4] = { a->ne[1], 1, 1, 1 };

	ref_tensor_init(out, ne);
	for (int64_t i1 = 0; i1 < a->ne[1]; i1++) {
		int64_t best = 0;

		for (int64_t i0 = 1; i0 < a->ne[0]; i0++)
			if (ranks_before(*ref_at(a, i0, i1, 0, 0), i0,
					 *ref_at(a, best, i1, 0, 0), best))
				best = i0;
		out->data[i1] = best;
	}
}

void ref_top_k(const struct ref_tensor *a, int k, struct ref_tensor *out)
{
	int64_t ne[4] = { k, a->ne[1], a->ne[2], a->ne[3] };
	bool *taken = loom_test_malloc(sizeof(bool) * (size_t)a->ne[0]);

	ref_tensor_init(out, ne);
	FOR_EACH_ROW(a->ne, i1, i2, i3) {
		memset(taken, 0, a->ne[0] * sizeof(*taken));
		for (int j = 0; j < k; j++) {
			int64_t best = -1;

			for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
				if (!taken[i0] &&
				    (best < 0 ||
				     ranks_before(*ref_at(a, i0, i1, i2, i3), i0,
						  *ref_at(a, best, i1, i2, i3),
						  best)))
					best = i0;
			taken[best] = true;
			*ref_at(out, j, i1, i2, i3) = best;
		}
	}
	free(taken);
}

/* ---- the gpt-oss family's ops ---- */

void ref_soft_max_sinks(const struct ref_tensor *a,
			const struct ref_tensor *mask,
			const struct ref_tensor *sinks, double scale,
			struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	FOR_EACH_ROW(a->ne, i1, i2, i3) {
		/* No sink: a logit of -inf, which adds nothing. */
		double sink = sinks ? sinks->data[i2] : -INFINITY;
		double max = sink, sum = 0;

		for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
			double v = *ref_at(a, i0, i1, i2, i3) * scale;

			if (mask)
				v += *ref_at(mask, i0, i1, i2 % mask->ne[2],
					     i3 % mask->ne[3]);
			*ref_at(out, i0, i1, i2, i3) = v;
			if (v > max)
				max = v;
		}
		for (int64_t i0 = 0; i0 < a->ne[0]; i0++)
			sum += exp(*ref_at(out, i0, i1, i2, i3) - max);
		if (sinks)
			sum += exp(sink - max);
		for (int64_t i0 = 0; i0 < a->ne[0]; i0++) {
			double *o = ref_at(out, i0, i1, i2, i3);

			*o = exp(*o - max) / sum;
		}
	}
}

/* The pair whose rotations over n_ctx positions number beta. */
static double yarn_pair(int n_dims, int n_ctx, double beta, double base)
{
	/* turns(i) = n_ctx / (2 pi base^(2i / n_dims)) = beta */
	return n_dims * log(n_ctx / (2 * 3.14159265358979323846 * beta)) /
	       (2 * log(base));
}

void ref_rope_yarn(const struct ref_tensor *a, const struct ref_tensor *pos,
		   int n_dims, int mode, double freq_base, double freq_scale,
		   int n_ctx_orig, double ext_factor, double attn_factor,
		   double beta_fast, double beta_slow, struct ref_tensor *out)
{
	double lo = floor(yarn_pair(n_dims, n_ctx_orig, beta_fast, freq_base));
	double hi = ceil(yarn_pair(n_dims, n_ctx_orig, beta_slow, freq_base));
	double mag = attn_factor;

	lo = fmax(lo, 0);
	hi = fmin(hi, n_dims - 1);
	if (ext_factor != 0)
		mag *= 1 + 0.1 * log(1 / freq_scale);
	ref_tensor_init(out, a->ne);
	memcpy(out->data, a->data, ref_nelements(a) * sizeof(*a->data));
	for (int64_t t = 0; t < a->ne[2]; t++)
	for (int64_t h = 0; h < a->ne[1]; h++)
	for (int i = 0; i < n_dims / 2; i++) {
		double extrap = pos->data[t] * pow(freq_base, -2.0 * i / n_dims);
		double interp = extrap * freq_scale;
		double ramp = 1 - fmin(1, fmax(0, (i - lo) / fmax(0.001,
								  hi - lo)));
		double mix = ramp * ext_factor;
		double theta = interp + (extrap - interp) * mix;
		int64_t j0 = mode == 2 ? i : 2 * i;
		int64_t j1 = mode == 2 ? i + n_dims / 2 : 2 * i + 1;
		double x0 = *ref_at(a, j0, h, t, 0);
		double x1 = *ref_at(a, j1, h, t, 0);
		double c = cos(theta) * mag, s = sin(theta) * mag;

		*ref_at(out, j0, h, t, 0) = x0 * c - x1 * s;
		*ref_at(out, j1, h, t, 0) = x0 * s + x1 * c;
	}
}

void ref_swiglu_oai(const struct ref_tensor *gate, const struct ref_tensor *up,
		    double alpha, double limit, struct ref_tensor *out)
{
	ref_tensor_init(out, gate->ne);
	for (int64_t i = 0; i < ref_nelements(gate); i++) {
		double g = fmin(gate->data[i], limit);
		double u = fmax(-limit, fmin(up->data[i], limit));

		out->data[i] = g / (1 + exp(-alpha * g)) * (u + 1);
	}
}

void ref_add_id(const struct ref_tensor *a, const struct ref_tensor *biases,
		const struct ref_tensor *ids, struct ref_tensor *out)
{
	ref_tensor_init(out, a->ne);
	FOR_EACH(a->ne, i0, e, t, z) {
		int64_t x = (int64_t)*ref_at(ids, e, t, 0, 0);
		double b = x >= 0 && x < biases->ne[1] ?
				   *ref_at(biases, i0, x, 0, 0) : 0;

		*ref_at(out, i0, e, t, z) = *ref_at(a, i0, e, t, z) + b;
	}
}
