/* SPDX-License-Identifier: MIT */
/* ops-run.c - part of the op suite (ops-suite.c): the inputs (leaves, the
 * views the op reads, their seeded values) and running one case on a
 * device against the double-precision reference. */
#define _GNU_SOURCE
#include "ops-suite.h"
#include "ref-ops.h"
#include "test-util.h"
#include "ops-suite-int.h"

#include <loom/loom-backend.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Inputs: leaves, the views the op reads, and their values.
 */

static void leaf_shape(const struct input *in, int64_t ne[4])
{
	memcpy(ne, in->ne, sizeof(in->ne));
	switch (in->layout) {
	case LAYOUT_CONT:
		break;
	case LAYOUT_TRANSPOSE:
		ne[0] = in->ne[1];
		ne[1] = in->ne[0];
		break;
	case LAYOUT_PERMUTE:
		ne[1] = in->ne[2];
		ne[2] = in->ne[1];
		break;
	case LAYOUT_PAD:
		ne[0] += loom_type_is_quantized(in->type) ?
				 loom_type_block_size(in->type) : 3;
		ne[1] += 1;
		break;
	case LAYOUT_RESHAPE:
		ne[0] = in->ne[0] * in->ne[1];
		ne[1] = in->ne[2];
		ne[2] = in->ne[3];
		ne[3] = 1;
		break;
	}
}

/* Where element i of the view lies in the leaf (layout_ne0 is the
 * view's ne0). */
static void leaf_index(enum layout layout, int64_t layout_ne0,
		       const int64_t i[4], int64_t j[4])
{
	memcpy(j, i, 4 * sizeof(*i));
	switch (layout) {
	case LAYOUT_CONT:
		break;
	case LAYOUT_TRANSPOSE:
		j[0] = i[1];
		j[1] = i[0];
		break;
	case LAYOUT_PERMUTE:
		j[1] = i[2];
		j[2] = i[1];
		break;
	case LAYOUT_PAD:
		j[1] = i[1] + 1;
		break;
	case LAYOUT_RESHAPE:
		j[0] = i[0] + i[1] * layout_ne0;
		j[1] = i[2];
		j[2] = i[3];
		j[3] = 0;
		break;
	}
}

static struct loom_tensor *make_view(loom_ctx_t *ctx, struct loom_tensor *leaf,
				     const struct input *in)
{
	switch (in->layout) {
	case LAYOUT_CONT:
		return leaf;
	case LAYOUT_TRANSPOSE:
		return loom_transpose(ctx, leaf);
	case LAYOUT_PERMUTE:
		return loom_permute(ctx, leaf, 0, 2, 1, 3);
	case LAYOUT_PAD:
		/* Each view constructor for the dims it can express. */
		if (in->ne[1] == 1 && in->ne[2] == 1 && in->ne[3] == 1)
			return loom_view_1d(ctx, leaf, in->ne[0],
					    leaf->nb[1]);
		if (in->ne[2] == 1 && in->ne[3] == 1)
			return loom_view_2d(ctx, leaf, in->ne[0], in->ne[1],
					    leaf->nb[1], leaf->nb[1]);
		if (in->ne[3] == 1)
			return loom_view_3d(ctx, leaf, in->ne[0], in->ne[1],
					    in->ne[2], leaf->nb[1],
					    leaf->nb[2], leaf->nb[1]);
		return loom_view_4d(ctx, leaf, in->ne[0], in->ne[1], in->ne[2],
				    in->ne[3], leaf->nb[1], leaf->nb[2],
				    leaf->nb[3], leaf->nb[1]);
	case LAYOUT_RESHAPE:
		return loom_reshape_4d(ctx, leaf, in->ne[0], in->ne[1],
				       in->ne[2], in->ne[3]);
	}
	return NULL;
}

/* Fills one row of ids: uniform in [0, range), or with distinct values
 * (the first n entries of a shuffled 0 .. range - 1). */
static void fill_ids_row(int32_t *p, int64_t n, const struct input *in,
			 struct loom_test_rng *rng)
{
	int32_t *perm;

	if (in->fill != FILL_DISTINCT) {
		for (int64_t i = 0; i < n; i++)
			p[i] = (int32_t)loom_test_rng_int(rng, in->range);
		return;
	}
	perm = loom_test_malloc(sizeof(int32_t) * (size_t)in->range);
	for (int64_t i = 0; i < in->range; i++)
		perm[i] = (int32_t)i;
	for (int64_t i = 0; i < n; i++) {
		int64_t j = i + loom_test_rng_int(rng, in->range - i);
		int32_t tmp = perm[i];

		perm[i] = perm[j];
		perm[j] = tmp;
		p[i] = perm[i];
	}
	free(perm);
}

/* Fills a placed leaf as the input asks. */
static int fill_leaf(struct loom_tensor *leaf, const struct input *in,
		     struct loom_test_rng *rng)
{
	int64_t n = loom_tensor_n_elements(leaf);
	int64_t row = leaf->ne[0];
	int32_t *ids;
	float *v;
	int st;

	if (in->fill == FILL_UNIFORM)
		return loom_test_fill_uniform(leaf, rng, in->lo, in->hi);
	if (leaf->type == LOOM_TYPE_I32) {
		ids = loom_test_malloc(sizeof(int32_t) * (size_t)n);
		for (int64_t r = 0; r < n / row; r++)
			fill_ids_row(ids + r * row, row, in, rng);
		st = loom_test_set_i32(leaf, ids);
		free(ids);
		return st;
	}
	v = loom_test_malloc(sizeof(float) * (size_t)n);
	for (int64_t i = 0; i < n; i++) {
		int64_t i0 = i % row, i1 = (i / row) % leaf->ne[1];

		if (in->fill == FILL_NAN &&
		    loom_test_rng_uniform(rng, 0, 3) < 2)
			v[i] = NAN;
		else if (in->fill == FILL_TIES || in->fill == FILL_NAN)
			v[i] = floorf((float)loom_test_rng_uniform(rng, 0, 5));
		else if (i0 > i1 + row / 2)
			v[i] = -INFINITY;
		else
			v[i] = (float)loom_test_rng_uniform(rng, -1, 0);
	}
	st = loom_test_set_f32(leaf, v);
	free(v);
	return st;
}

/* The values the op sees through input in, from its leaf's values. */
void view_values(const struct input *in, const struct ref_tensor *leaf,
			struct ref_tensor *out)
{
	ref_tensor_init(out, in->ne);
	for (int64_t i3 = 0; i3 < in->ne[3]; i3++)
	for (int64_t i2 = 0; i2 < in->ne[2]; i2++)
	for (int64_t i1 = 0; i1 < in->ne[1]; i1++)
	for (int64_t i0 = 0; i0 < in->ne[0]; i0++) {
		int64_t i[4] = { i0, i1, i2, i3 }, j[4];

		leaf_index(in->layout, in->ne[0], i, j);
		*ref_at(out, i0, i1, i2, i3) =
			*ref_at(leaf, j[0], j[1], j[2], j[3]);
	}
}

/* The reverse: writes view values into the leaf's values. */
static void scatter_view(const struct input *in, const struct ref_tensor *view,
			 struct ref_tensor *leaf)
{
	for (int64_t i3 = 0; i3 < in->ne[3]; i3++)
	for (int64_t i2 = 0; i2 < in->ne[2]; i2++)
	for (int64_t i1 = 0; i1 < in->ne[1]; i1++)
	for (int64_t i0 = 0; i0 < in->ne[0]; i0++) {
		int64_t i[4] = { i0, i1, i2, i3 }, j[4];

		leaf_index(in->layout, in->ne[0], i, j);
		*ref_at(leaf, j[0], j[1], j[2], j[3]) =
			*ref_at(view, i0, i1, i2, i3);
	}
}


/* ------------------------------------------------------------------------
 * Running a case.
 */

static struct loom_tensor *build_op(loom_ctx_t *ctx, const struct op_case *c,
				    struct loom_tensor **s)
{
	if (c->graph)
		return c->graph->build(ctx, c, s);
	switch (c->op) {
	case LOOM_OP_ADD:
		return loom_add(ctx, s[0], s[1]);
	case LOOM_OP_SUB:
		return loom_sub(ctx, s[0], s[1]);
	case LOOM_OP_MUL:
		return loom_mul(ctx, s[0], s[1]);
	case LOOM_OP_DIV:
		return loom_div(ctx, s[0], s[1]);
	case LOOM_OP_SCALE:
		return loom_scale(ctx, s[0], (float)c->fp[0]);
	case LOOM_OP_SILU:
		return loom_silu(ctx, s[0]);
	case LOOM_OP_GELU:
		return loom_gelu(ctx, s[0]);
	case LOOM_OP_RMS_NORM:
		return loom_rms_norm(ctx, s[0], (float)c->fp[0]);
	case LOOM_OP_NORM:
		return loom_norm(ctx, s[0], (float)c->fp[0]);
	case LOOM_OP_SOFT_MAX:
		return loom_soft_max(ctx, s[0], c->n_in > 1 ? s[1] : NULL,
				     (float)c->fp[0]);
	case LOOM_OP_ROPE:
		return loom_rope(ctx, s[0], s[1], c->ip[0],
				 (enum loom_rope_mode)c->ip[1],
				 (float)c->fp[0], (float)c->fp[1]);
	case LOOM_OP_MUL_MAT:
		return loom_mul_mat(ctx, s[0], s[1]);
	case LOOM_OP_MUL_MAT_ID:
		return loom_mul_mat_id(ctx, s[0], s[1], s[2]);
	case LOOM_OP_GET_ROWS:
		return loom_get_rows(ctx, s[0], s[1]);
	case LOOM_OP_SET_ROWS:
		return loom_set_rows(ctx, s[0], s[1], s[2]);
	case LOOM_OP_COPY:
		return loom_copy(ctx, s[0], s[1]);
	case LOOM_OP_CONT:
		return loom_cont(ctx, s[0]);
	case LOOM_OP_CONCAT:
		return loom_concat(ctx, s[0], s[1], c->ip[0]);
	case LOOM_OP_SUM_ROWS:
		return loom_sum_rows(ctx, s[0]);
	case LOOM_OP_ARGMAX:
		return loom_argmax(ctx, s[0]);
	case LOOM_OP_TOP_K:
		return loom_top_k(ctx, s[0], c->ip[0]);
	case LOOM_OP_SOFT_MAX_SINKS:
		return loom_soft_max_sinks(ctx, s[0],
					   c->n_in > 2 ? s[1] : NULL,
					   s[c->n_in - 1], (float)c->fp[0]);
	case LOOM_OP_ROPE_YARN:
		return loom_rope_yarn(ctx, s[0], s[1], c->ip[0],
				      (enum loom_rope_mode)c->ip[1],
				      (float)c->fp[0], (float)c->fp[1],
				      c->ip[2], (float)c->fp[2],
				      (float)c->fp[3], (float)c->fp[4],
				      (float)c->fp[5]);
	case LOOM_OP_SWIGLU_OAI:
		return loom_swiglu_oai(ctx, s[0], s[1], (float)c->fp[0],
				       (float)c->fp[1]);
	case LOOM_OP_ADD_ID:
		return loom_add_id(ctx, s[0], s[1], s[2]);
	default:
		return NULL;
	}
}

/* The reference result from the inputs' values r[] (as the op sees them);
 * for ops that write into an input, leaf holds that input's leaf values. */
static void reference(const struct op_case *c, struct ref_tensor *r,
		      const struct ref_tensor *leaf, struct ref_tensor *out)
{
	struct ref_tensor tmp;

	if (c->graph) {
		c->graph->reference(c, r, out);
		return;
	}
	switch (c->op) {
	case LOOM_OP_ADD:
		ref_binary(REF_ADD, &r[0], &r[1], out);
		break;
	case LOOM_OP_SUB:
		ref_binary(REF_SUB, &r[0], &r[1], out);
		break;
	case LOOM_OP_MUL:
		ref_binary(REF_MUL, &r[0], &r[1], out);
		break;
	case LOOM_OP_DIV:
		ref_binary(REF_DIV, &r[0], &r[1], out);
		break;
	case LOOM_OP_SCALE:
		ref_scale(&r[0], (float)c->fp[0], out);
		break;
	case LOOM_OP_SILU:
		ref_silu(&r[0], out);
		break;
	case LOOM_OP_GELU:
		ref_gelu(&r[0], out);
		break;
	case LOOM_OP_RMS_NORM:
		ref_rms_norm(&r[0], (float)c->fp[0], out);
		break;
	case LOOM_OP_NORM:
		ref_norm(&r[0], (float)c->fp[0], out);
		break;
	case LOOM_OP_SOFT_MAX:
		ref_soft_max(&r[0], c->n_in > 1 ? &r[1] : NULL,
			     (float)c->fp[0], out);
		break;
	case LOOM_OP_ROPE:
		ref_rope(&r[0], &r[1], c->ip[0], c->ip[1], (float)c->fp[0],
			 (float)c->fp[1], out);
		break;
	case LOOM_OP_MUL_MAT:
		ref_mul_mat(&r[0], &r[1], out);
		break;
	case LOOM_OP_MUL_MAT_ID:
		ref_mul_mat_id(&r[0], &r[1], &r[2], out);
		break;
	case LOOM_OP_GET_ROWS:
		ref_get_rows(&r[0], &r[1], out);
		break;
	case LOOM_OP_SET_ROWS:
		/* The whole destination: rows not named keep their values. */
		ref_set_rows(&r[0], &r[1], &r[2], &tmp);
		ref_cpy(leaf, leaf->ne, out);
		scatter_view(&c->in[0], &tmp, out);
		ref_tensor_free(&tmp);
		break;
	case LOOM_OP_COPY:
		/* The whole destination leaf, the view overwritten. */
		ref_cpy(&r[0], c->in[1].ne, &tmp);
		ref_cpy(leaf, leaf->ne, out);
		scatter_view(&c->in[1], &tmp, out);
		ref_tensor_free(&tmp);
		break;
	case LOOM_OP_CONT:
		ref_cpy(&r[0], r[0].ne, out);
		break;
	case LOOM_OP_CONCAT:
		ref_concat(&r[0], &r[1], c->ip[0], out);
		break;
	case LOOM_OP_SUM_ROWS:
		ref_sum_rows(&r[0], out);
		break;
	case LOOM_OP_ARGMAX:
		ref_argmax(&r[0], out);
		break;
	case LOOM_OP_TOP_K:
		ref_top_k(&r[0], c->ip[0], out);
		break;
	case LOOM_OP_SOFT_MAX_SINKS:
		ref_soft_max_sinks(&r[0], c->n_in > 2 ? &r[1] : NULL,
				   &r[c->n_in - 1], (float)c->fp[0], out);
		break;
	case LOOM_OP_ROPE_YARN:
		ref_rope_yarn(&r[0], &r[1], c->ip[0], c->ip[1],
			      (float)c->fp[0], (float)c->fp[1], c->ip[2],
			      (float)c->fp[2], (float)c->fp[3],
			      (float)c->fp[4], (float)c->fp[5], out);
		break;
	case LOOM_OP_SWIGLU_OAI:
		ref_swiglu_oai(&r[0], &r[1], (float)c->fp[0],
			       (float)c->fp[1], out);
		break;
	case LOOM_OP_ADD_ID:
		ref_add_id(&r[0], &r[1], &r[2], out);
		break;
	default:
		assert(!"unreachable");
	}
}

static enum loom_type result_type(const struct op_case *c)
{
	switch (c->op) {
	case LOOM_OP_ARGMAX:
	case LOOM_OP_TOP_K:
		return LOOM_TYPE_I32;
	case LOOM_OP_CONT:
	case LOOM_OP_CONCAT:
		return c->in[0].type;
	case LOOM_OP_COPY:
		return c->in[1].type;
	case LOOM_OP_SET_ROWS:
		return c->in[0].type;
	default:
		return LOOM_TYPE_F32;
	}
}

/* A short description of a node for skip messages. */
static char *describe_node(const struct loom_tensor *t)
{
	char s[512] = "";

	str_append(s, sizeof(s), "%s(", loom_op_name(t->op));
	for (int i = 0; i < LOOM_MAX_SRC && t->src[i]; i++)
		str_append(s, sizeof(s), "%s%s[%" PRId64 ",%" PRId64 ",%"
			   PRId64 ",%" PRId64 "]%s", i ? ", " : "",
			   loom_type_name(t->src[i]->type),
			   t->src[i]->ne[0], t->src[i]->ne[1],
			   t->src[i]->ne[2], t->src[i]->ne[3],
			   loom_tensor_is_contiguous(t->src[i]) ? "" :
			   " strided");
	str_append(s, sizeof(s), ") -> %s", loom_type_name(t->type));
	return loom_test_strdup_printf("%s", s);
}

/* Compares out with ref exactly (max_nmse 0): every element equal. */
static void compare_exact(const struct op_case *c, const char *dev,
			  const struct ref_tensor *ref, const double *out)
{
	int64_t n = ref_nelements(ref);
	int64_t wrong = 0;

	for (int64_t i = 0; i < n; i++) {
		if (out[i] == ref->data[i] ||
		    (isnan(out[i]) && isnan(ref->data[i])))
			continue;
		if (wrong++ < 8)
			ops_message("%s %s/%s: element %" PRId64
				    " is %.9g, expected %.9g", dev,
				    case_op_name(c), c->name, i, out[i],
				    ref->data[i]);
	}
	if (!wrong)
		return;
	ops_message("%s %s/%s: %" PRId64 " of %" PRId64
		    " elements differ (exact compare; NMSE %.3g)", dev,
		    case_op_name(c), c->name, wrong, n,
		    loom_test_nmse(ref->data, out, n));
	ops_fail();
}

/* NMSE averages: one wrong element among thousands can hide under it,
 * so no element may be off by more than OUTLIER_SIGMAS times the RMS
 * error that max_nmse allows. */
#define OUTLIER_SIGMAS 10

/* Compares out with ref: exactly when max_nmse is 0, else by NMSE and
 * the largest error.  On a mismatch, says where and fails the test. */
static void compare(const struct op_case *c, const char *dev,
		    const struct ref_tensor *ref, const double *out)
{
	int64_t n = ref_nelements(ref), worst = 0;
	double nmse, sum = 0, max_err = 0, limit;
	int shown = 0;

	if (c->max_nmse == NMSE_EXACT) {
		compare_exact(c, dev, ref, out);
		return;
	}
	nmse = loom_test_nmse(ref->data, out, n);
	for (int64_t i = 0; i < n; i++) {
		double e = fabs(out[i] - ref->data[i]);

		if (isfinite(ref->data[i]))
			sum += ref->data[i] * ref->data[i];
		if (out[i] != ref->data[i] && !(e <= max_err)) {
			max_err = e;
			worst = i;
		}
	}
	limit = OUTLIER_SIGMAS * sqrt(c->max_nmse * sum / n);
	ops_message("%s %s/%s: NMSE %.3g (max %.3g), largest error %.3g "
		    "(max %.3g)", dev, case_op_name(c), c->name, nmse,
		    c->max_nmse, max_err, limit);
	if (nmse <= c->max_nmse && max_err <= limit)
		return;
	for (int64_t i = 0; i < n && shown < 8; i++) {
		double d = fabs(out[i] - ref->data[i]);

		if (isnan(d) || d > 1e-3 * (fabs(ref->data[i]) + 1e-3)) {
			ops_message("  element %" PRId64
				    " is %.9g, expected %.9g", i, out[i],
				    ref->data[i]);
			shown++;
		}
	}
	if (nmse > c->max_nmse)
		ops_message("%s %s/%s: NMSE %.3g exceeds %.3g", dev,
			    case_op_name(c), c->name, nmse, c->max_nmse);
	else
		ops_message("%s %s/%s: element %" PRId64 " is "
			    "%.9g, expected %.9g: off by %.3g, more than "
			    "%d times the RMS error NMSE %.3g allows",
			    dev, case_op_name(c), c->name, worst,
			    out[worst], ref->data[worst], max_err,
			    OUTLIER_SIGMAS, c->max_nmse);
	ops_fail();
}

/* Reports a failed call and fails the test; returns true when st failed. */
static bool check_call(int st, const char *what)
{
	if (st == LOOM_OK)
		return false;
	ops_message("%s: %s: %s", what, loom_strerror(st),
		    loom_error_message());
	ops_fail();
	return true;
}

void run_case(const struct op_case *c, struct ops_dev *d)
{
	struct loom_tensor *leaf[MAX_INPUTS] = { 0 };
	struct loom_tensor *src[MAX_INPUTS] = { 0 };
	struct ref_tensor rin[MAX_INPUTS] = { 0 };
	struct ref_tensor rleaf[MAX_INPUTS] = { 0 };
	struct ref_tensor ref = { 0 };
	struct loom_test_rng rng;
	loom_buffer_type_t *buft = loom_dev_buffer_type(d->dev);
	loom_buffer_t *wbuf = NULL;
	loom_galloc_t *ga = NULL;
	loom_graph_t *g;
	loom_ctx_t *ctx;
	struct loom_tensor *out;
	double *outv = NULL;
	char *err = NULL;

	if (d->be_error) {
		ops_message("%s: %s", d->name, d->be_error);
		ops_fail();
		return;
	}
	if (!d->be && check_call(loom_dev_init_backend(d->dev, NULL, &d->be),
				 "loom_dev_init_backend")) {
		d->be_error = loom_test_strdup_printf("no backend: %s",
						      loom_error_message());
		return;
	}
	if (check_call(loom_ctx_new(0, &ctx), "loom_ctx_new"))
		return;

	/* Leaves first, alone in the context, placed in the device's
	 * memory; then the views and the op, placed by the allocator. */
	for (int i = 0; i < c->n_in; i++) {
		int64_t ne[4];

		leaf_shape(&c->in[i], ne);
		leaf[i] = loom_tensor_new(ctx, c->in[i].type, 4, ne);
		if (!leaf[i]) {
			ops_message("loom_tensor_new: %s",
				    loom_ctx_error(ctx));
			ops_fail();
			goto out_free_ctx;
		}
		if (c->in[i].name)
			loom_tensor_set_name(leaf[i], c->in[i].name);
		else
			loom_tensor_set_name_fmt(leaf[i], "in%d", i);
		loom_tensor_set_flags(leaf[i], LOOM_TENSOR_INPUT);
	}
	if (check_call(loom_ctx_alloc_tensors(ctx, buft, &wbuf),
		       "loom_ctx_alloc_tensors"))
		goto out_free_ctx;
	for (int i = 0; i < c->n_in; i++)
		src[i] = make_view(ctx, leaf[i], &c->in[i]);
	out = build_op(ctx, c, src);
	if (!out) {
		ops_message("building %s/%s: %s", case_op_name(c),
			    c->name, loom_ctx_error(ctx));
		ops_fail();
		goto out_free_buf;
	}
	loom_tensor_set_name(out, "out");
	loom_tensor_set_flags(out, LOOM_TENSOR_OUTPUT);
	if (check_call(loom_graph_new(ctx, &g), "loom_graph_new") ||
	    check_call(loom_graph_expand(g, out), "loom_graph_expand"))
		goto out_free_buf;

	for (size_t i = 0; i < loom_graph_n_nodes(g); i++) {
		struct loom_tensor *node = loom_graph_node(g, i);
		char *what, *msg;

		if (loom_op_is_view(node->op) ||
		    loom_dev_supports_op(d->dev, node))
			continue;
		what = describe_node(node);
		msg = loom_test_strdup_printf("%s does not support %s", d->name, what);
		ops_skip(msg);
		free(msg);
		free(what);
		goto out_free_buf;
	}

	if (check_call(loom_galloc_new(buft, &ga), "loom_galloc_new") ||
	    check_call(loom_galloc_alloc_graph(ga, g),
		       "loom_galloc_alloc_graph"))
		goto out_free_galloc;

	loom_test_rng_seed(&rng, c->seed);
	for (int i = 0; i < c->n_in; i++) {
		double *v;

		if (check_call(fill_leaf(leaf[i], &c->in[i], &rng),
			       "filling an input"))
			goto out_free_refs;
		v = loom_test_get_doubles(leaf[i], &err);
		if (!v) {
			ops_message("reading input %d: %s", i, err);
			ops_fail();
			goto out_free_refs;
		}
		rleaf[i].data = v;
		memcpy(rleaf[i].ne, leaf[i]->ne, sizeof(rleaf[i].ne));
		view_values(&c->in[i], &rleaf[i], &rin[i]);
	}

	/* NaN in every byte of a result of its own, so that what the op
	 * fails to write shows.  A meta device's node has no memory before
	 * the meta backend computes it (its slices are made then), so there
	 * is nothing to fill. */
	if (c->result_in < 0 && out->buffer && !out->view_src &&
	    loom_dev_type(d->dev) != LOOM_DEV_TYPE_META &&
	    check_call(loom_tensor_memset(out, 0xff, 0,
					  loom_tensor_n_bytes(out)),
		       "loom_tensor_memset"))
		goto out_free_refs;
	if (check_call(loom_backend_graph_compute(d->be, g),
		       "loom_backend_graph_compute") ||
	    check_call(loom_backend_synchronize(d->be),
		       "loom_backend_synchronize"))
		goto out_free_refs;

	reference(c, rin, c->result_in >= 0 ? &rleaf[c->result_in] : NULL,
		  &ref);
	if (out->type != result_type(c)) {
		ops_message("result type %s, expected %s",
			    loom_type_name(out->type),
			    loom_type_name(result_type(c)));
		ops_fail();
		goto out_free_refs;
	}
	if (c->result_in >= 0) {
		outv = loom_test_get_doubles(leaf[c->result_in], &err);
	} else {
		for (int i = 0; i < 4; i++) {
			if (out->ne[i] == ref.ne[i])
				continue;
			ops_message("result shape [%" PRId64 ",%"
				    PRId64 ",%" PRId64
				    ",%" PRId64 "], expected [%"
				    PRId64 ",%" PRId64
				    ",%" PRId64 ",%"
				    PRId64 "]", out->ne[0],
				    out->ne[1], out->ne[2], out->ne[3],
				    ref.ne[0], ref.ne[1], ref.ne[2],
				    ref.ne[3]);
			ops_fail();
			goto out_free_refs;
		}
		outv = loom_test_get_doubles(out, &err);
	}
	if (!outv) {
		ops_message("reading the result: %s", err);
		ops_fail();
		goto out_free_refs;
	}
	compare(c, d->name, &ref, outv);

out_free_refs:
	free(outv);
	free(err);
	ref_tensor_free(&ref);
	for (int i = 0; i < c->n_in; i++) {
		ref_tensor_free(&rin[i]);
		ref_tensor_free(&rleaf[i]);
	}
out_free_galloc:
	if (ga)
		loom_galloc_free(ga);
out_free_buf:
	loom_buffer_free(wbuf);
out_free_ctx:
	loom_ctx_free(ctx);
}
