/* SPDX-License-Identifier: MIT */
/* ref-ops.h - the op-conformance suite's reference: every op of loom.h
 * written plainly in double precision over dense host arrays.  It knows
 * nothing of devices or buffers and shares no code with the library.
 */
#ifndef LOOM_TEST_REF_OPS_H
#define LOOM_TEST_REF_OPS_H

#include <stdint.h>

/* A dense tensor of doubles, dimension 0 fastest.  Index tensors (ids,
 * positions, results of argmax and top_k) hold integers as doubles. */
struct ref_tensor {
	int64_t ne[4];
	double *data;
};

/* Gives t shape ne and zeroed storage; free it with ref_tensor_free(). */
void ref_tensor_init(struct ref_tensor *t, const int64_t ne[4]);
void ref_tensor_free(struct ref_tensor *t);
int64_t ref_nelements(const struct ref_tensor *t);
/* The element at (i0, i1, i2, i3). */
double *ref_at(const struct ref_tensor *t, int64_t i0, int64_t i1,
	       int64_t i2, int64_t i3);

/* Every function below initializes out (which must not hold storage). */

enum ref_binary_op {
	REF_ADD,
	REF_SUB,
	REF_MUL,
	REF_DIV,
};

/* a op b, with b repeated over a (a->ne[i] a multiple of b->ne[i]). */
void ref_binary(enum ref_binary_op op, const struct ref_tensor *a,
		const struct ref_tensor *b, struct ref_tensor *out);
void ref_scale(const struct ref_tensor *a, double s, struct ref_tensor *out);
void ref_silu(const struct ref_tensor *a, struct ref_tensor *out);
/* The tanh approximation of GELU. */
void ref_gelu(const struct ref_tensor *a, struct ref_tensor *out);
void ref_rms_norm(const struct ref_tensor *a, double eps,
		  struct ref_tensor *out);
void ref_norm(const struct ref_tensor *a, double eps, struct ref_tensor *out);
/* softmax(a * scale + mask) over dimension 0; mask may be NULL, else it
 * has a's ne0, at least a's ne1 rows, and repeats over dimensions 2, 3. */
void ref_soft_max(const struct ref_tensor *a, const struct ref_tensor *mask,
		  double scale, struct ref_tensor *out);
/* mode 0 rotates (x[2i], x[2i+1]); mode 2 (neox) (x[i], x[i + n_dims/2]). */
void ref_rope(const struct ref_tensor *a, const struct ref_tensor *pos,
	      int n_dims, int mode, double freq_base, double freq_scale,
	      struct ref_tensor *out);
/* out[m, n, i2, i3] = sum_k a[k, m, i2 / (B2 / A2), i3 / (B3 / A3)] *
 * b[k, n, i2, i3]: batch i2 of b uses batch i2 / (B2 / A2) of a. */
void ref_mul_mat(const struct ref_tensor *a, const struct ref_tensor *b,
		 struct ref_tensor *out);
/* out[m, e, t] = sum_k as[k, m, ids[e, t]] * b[k, e % B1, t], zero for an
 * id out of range. */
void ref_mul_mat_id(const struct ref_tensor *as, const struct ref_tensor *b,
		    const struct ref_tensor *ids, struct ref_tensor *out);
/* out[i0, j, i2, i3] = a[i0, ids[j, i2, i3], i2 % A2, i3 % A3], zero for
 * an id out of range. */
void ref_get_rows(const struct ref_tensor *a, const struct ref_tensor *ids,
		  struct ref_tensor *out);
/* out = dst with out[i0, ids[j, i2, i3], i2, i3] = values[i0, j, i2, i3]. */
void ref_set_rows(const struct ref_tensor *dst,
		  const struct ref_tensor *values,
		  const struct ref_tensor *ids, struct ref_tensor *out);
/* a's values in logical order, laid out in shape ne. */
void ref_cpy(const struct ref_tensor *a, const int64_t ne[4],
	     struct ref_tensor *out);
void ref_concat(const struct ref_tensor *a, const struct ref_tensor *b,
		int dim, struct ref_tensor *out);
void ref_sum_rows(const struct ref_tensor *a, struct ref_tensor *out);
/* [ne1]: first index of each row's largest value. */
void ref_argmax(const struct ref_tensor *a, struct ref_tensor *out);
/* [k, ne1, ne2, ne3]: indices of the k largest, largest first, lower
 * index first on ties. */
void ref_top_k(const struct ref_tensor *a, int k, struct ref_tensor *out);

/* soft_max with sinks[i2] (one per dimension-2 index; none when sinks is
 * NULL) in each row's denominator. */
void ref_soft_max_sinks(const struct ref_tensor *a,
			const struct ref_tensor *mask,
			const struct ref_tensor *sinks, double scale,
			struct ref_tensor *out);
/* rope with YaRN's extension (loom.h, loom_rope_yarn). */
void ref_rope_yarn(const struct ref_tensor *a, const struct ref_tensor *pos,
		   int n_dims, int mode, double freq_base, double freq_scale,
		   int n_ctx_orig, double ext_factor, double attn_factor,
		   double beta_fast, double beta_slow, struct ref_tensor *out);
/* g sigmoid(alpha g) (u + 1), g = min(gate, limit), u = up in
 * [-limit, limit]. */
void ref_swiglu_oai(const struct ref_tensor *gate, const struct ref_tensor *up,
		    double alpha, double limit, struct ref_tensor *out);
/* out[:, e, t] = a[:, e, t] + biases[:, ids[e, t]], nothing added for an
 * id out of range. */
void ref_add_id(const struct ref_tensor *a, const struct ref_tensor *biases,
		const struct ref_tensor *ids, struct ref_tensor *out);

#endif /* LOOM_TEST_REF_OPS_H */
