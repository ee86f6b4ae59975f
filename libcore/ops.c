/* SPDX-License-Identifier: MIT */
/* ops.c - op constructors: each fills in a node and builds it when its
 * op's rule (rules.c) holds.  They only build descriptors; kernels live in
 * the plugins and placement (loom_tensor_init_view) in buffer.c. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "loom-private.h"

/* Records "<op>: <message>" on ctx and returns NULL. */
static struct loom_tensor *bad(loom_ctx_t *ctx, enum loom_op op,
			       const char *msg)
{
	loom__ctx_errorf(ctx, LOOM_E_INVAL, "%s: %s", loom_op_name(op), msg);
	return NULL;
}

static void set_f32(struct loom_tensor *t, int i, float v)
{
	memcpy(&t->op_params[i], &v, sizeof(v));
}

/* Names a view after the tensor it shows ("<name> (view)"), so that
 * messages about it say what it is; unnamed sources leave it unnamed. */
static void name_after(struct loom_tensor *t, const struct loom_tensor *src,
		       const char *suffix)
{
	size_t n = strnlen(src->name, LOOM_MAX_NAME - 1);
	size_t m = strlen(suffix);

	if (!n)
		return;
	if (n + m > LOOM_MAX_NAME - 1)
		n = LOOM_MAX_NAME - 1 - m;
	memcpy(t->name, src->name, n);
	memcpy(t->name + n, suffix, m + 1);
}

/* Builds the node that probe describes (op, sources, op_params; sizes,
 * strides and view_src for a view) once its op's rule holds; a result
 * that views another tensor is named after named with suffix, and gets
 * its data now when that tensor is already placed.  A mistake returns
 * NULL with a message on ctx.  A NULL source keeps the message ctx
 * already holds: a chain of calls reports its first mistake. */
static struct loom_tensor *make(loom_ctx_t *ctx,
				const struct loom_tensor *probe,
				const struct loom_tensor *named,
				const char *suffix)
{
	const char *op = loom_op_name(probe->op);
	struct loom__op_result r;
	struct loom_tensor *t;
	char msg[384];

	if (!ctx) {
		loom_error_set(LOOM_E_INVAL, "%s: ctx is NULL", op);
		return NULL;
	}
	if (loom__op_rule(probe, &r, msg, sizeof(msg))) {
		if (r.missing && loom_ctx_error(ctx)[0]) {
			loom_error_set(LOOM_E_INVAL, "%s", loom_ctx_error(ctx));
			return NULL;
		}
		return bad(ctx, probe->op, msg);
	}
	t = loom__new_tensor(ctx, op, r.type, r.ne);
	if (!t)
		return NULL;
	t->op = probe->op;
	memcpy(t->src, probe->src, sizeof(t->src));
	memcpy(t->op_params, probe->op_params, sizeof(t->op_params));
	memcpy(t->nb, r.nb, sizeof(t->nb));
	t->view_src = r.view_src;
	t->view_offs = r.view_offs;
	if (!t->view_src)
		return t;
	if (named)
		name_after(t, named, suffix);
	if (loom__tensor_in_live_buffer(t->view_src) &&
	    loom_tensor_init_view(t)) {
		snprintf(msg, sizeof(msg), "%s: %s", t->name,
			 loom_error_message());
		return bad(ctx, t->op, msg);
	}
	return t;
}

/* A node of op over the sources and parameters probe holds; a result
 * that views or writes a source is named after it. */
static struct loom_tensor *make_op(loom_ctx_t *ctx,
				   const struct loom_tensor *probe)
{
	int target = loom_op_target_src(probe->op);

	return make(ctx, probe, target >= 0 ? probe->src[target] : NULL,
		    loom__op_suffix(probe->op));
}

/* A node of op over up to three sources, with nothing more to set. */
static struct loom_tensor *node(loom_ctx_t *ctx, enum loom_op op,
				struct loom_tensor *s0,
				struct loom_tensor *s1,
				struct loom_tensor *s2)
{
	struct loom_tensor p = { .op = op, .src = { s0, s1, s2 } };

	return make_op(ctx, &p);
}

struct loom_tensor *loom_op_new(loom_ctx_t *ctx, enum loom_op op,
				struct loom_tensor *const *srcs,
				const int32_t *params)
{
	struct loom_tensor p = { .op = op };

	if ((unsigned)op >= LOOM_OP_COUNT || loom_op_is_view(op) ||
	    op == LOOM_OP_NONE) {
		loom__ctx_errorf(ctx, LOOM_E_INVAL, "loom_op_new: %s has no "
				 "generic constructor", loom_op_name(op));
		return NULL;
	}
	if (srcs)
		memcpy(p.src, srcs, sizeof(p.src));
	if (params)
		memcpy(p.op_params, params, sizeof(p.op_params));
	return make_op(ctx, &p);
}

/* ------------------------------------------------------------------------
 * Elementwise and row ops.
 */
struct loom_tensor *loom_add(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return node(ctx, LOOM_OP_ADD, a, b, NULL);
}

struct loom_tensor *loom_sub(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return node(ctx, LOOM_OP_SUB, a, b, NULL);
}

struct loom_tensor *loom_mul(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return node(ctx, LOOM_OP_MUL, a, b, NULL);
}

struct loom_tensor *loom_div(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return node(ctx, LOOM_OP_DIV, a, b, NULL);
}

/* A node of op over a with one f32 parameter. */
static struct loom_tensor *node_f32(loom_ctx_t *ctx, enum loom_op op,
				    struct loom_tensor *a,
				    struct loom_tensor *b, float v)
{
	struct loom_tensor p = { .op = op, .src = { a, b } };

	set_f32(&p, 0, v);
	return make_op(ctx, &p);
}

struct loom_tensor *loom_scale(loom_ctx_t *ctx, struct loom_tensor *a,
			       float s)
{
	return node_f32(ctx, LOOM_OP_SCALE, a, NULL, s);
}

struct loom_tensor *loom_silu(loom_ctx_t *ctx, struct loom_tensor *a)
{
	return node(ctx, LOOM_OP_SILU, a, NULL, NULL);
}

struct loom_tensor *loom_gelu(loom_ctx_t *ctx, struct loom_tensor *a)
{
	return node(ctx, LOOM_OP_GELU, a, NULL, NULL);
}

struct loom_tensor *loom_rms_norm(loom_ctx_t *ctx, struct loom_tensor *a,
				  float eps)
{
	return node_f32(ctx, LOOM_OP_RMS_NORM, a, NULL, eps);
}

struct loom_tensor *loom_norm(loom_ctx_t *ctx, struct loom_tensor *a,
			      float eps)
{
	return node_f32(ctx, LOOM_OP_NORM, a, NULL, eps);
}

struct loom_tensor *loom_soft_max(loom_ctx_t *ctx, struct loom_tensor *a,
				  struct loom_tensor *mask, float scale)
{
	return node_f32(ctx, LOOM_OP_SOFT_MAX, a, mask, scale);
}

struct loom_tensor *loom_rope(loom_ctx_t *ctx, struct loom_tensor *a,
			      struct loom_tensor *pos, int n_dims,
			      enum loom_rope_mode mode, float freq_base,
			      float freq_scale)
{
	struct loom_tensor p = { .op = LOOM_OP_ROPE, .src = { a, pos } };

	p.op_params[0] = n_dims;
	p.op_params[1] = (int32_t)mode;
	set_f32(&p, 2, freq_base);
	set_f32(&p, 3, freq_scale);
	return make_op(ctx, &p);
}

struct loom_tensor *loom_soft_max_sinks(loom_ctx_t *ctx,
					struct loom_tensor *a,
					struct loom_tensor *mask,
					struct loom_tensor *sinks, float scale)
{
	struct loom_tensor p = { .op = LOOM_OP_SOFT_MAX_SINKS,
				 .src = { a, mask, sinks } };

	set_f32(&p, 0, scale);
	return make_op(ctx, &p);
}

struct loom_tensor *loom_rope_yarn(loom_ctx_t *ctx, struct loom_tensor *a,
				   struct loom_tensor *pos, int n_dims,
				   enum loom_rope_mode mode, float freq_base,
				   float freq_scale, int n_ctx_orig,
				   float ext_factor, float attn_factor,
				   float beta_fast, float beta_slow)
{
	struct loom_tensor p = { .op = LOOM_OP_ROPE_YARN, .src = { a, pos } };

	p.op_params[0] = n_dims;
	p.op_params[1] = (int32_t)mode;
	set_f32(&p, 2, freq_base);
	set_f32(&p, 3, freq_scale);
	p.op_params[4] = n_ctx_orig;
	set_f32(&p, 5, ext_factor);
	set_f32(&p, 6, attn_factor);
	set_f32(&p, 7, beta_fast);
	set_f32(&p, 8, beta_slow);
	return make_op(ctx, &p);
}

struct loom_tensor *loom_swiglu_oai(loom_ctx_t *ctx, struct loom_tensor *gate,
				    struct loom_tensor *up, float alpha,
				    float limit)
{
	struct loom_tensor p = { .op = LOOM_OP_SWIGLU_OAI,
				 .src = { gate, up } };

	set_f32(&p, 0, alpha);
	set_f32(&p, 1, limit);
	return make_op(ctx, &p);
}

/* ------------------------------------------------------------------------
 * Matrix products and rows.
 */
struct loom_tensor *loom_mul_mat(loom_ctx_t *ctx, struct loom_tensor *a,
				 struct loom_tensor *b)
{
	return node(ctx, LOOM_OP_MUL_MAT, a, b, NULL);
}

struct loom_tensor *loom_add_id(loom_ctx_t *ctx, struct loom_tensor *a,
				struct loom_tensor *biases,
				struct loom_tensor *ids)
{
	return node(ctx, LOOM_OP_ADD_ID, a, biases, ids);
}

struct loom_tensor *loom_mul_mat_id(loom_ctx_t *ctx, struct loom_tensor *as,
				    struct loom_tensor *b,
				    struct loom_tensor *ids)
{
	return node(ctx, LOOM_OP_MUL_MAT_ID, as, b, ids);
}

struct loom_tensor *loom_get_rows(loom_ctx_t *ctx, struct loom_tensor *a,
				  struct loom_tensor *ids)
{
	return node(ctx, LOOM_OP_GET_ROWS, a, ids, NULL);
}

struct loom_tensor *loom_set_rows(loom_ctx_t *ctx, struct loom_tensor *dst,
				  struct loom_tensor *values,
				  struct loom_tensor *ids)
{
	return node(ctx, LOOM_OP_SET_ROWS, dst, values, ids);
}

/* ------------------------------------------------------------------------
 * Copies, concatenation, reductions.
 */
struct loom_tensor *loom_copy(loom_ctx_t *ctx, struct loom_tensor *a,
			      struct loom_tensor *b)
{
	return node(ctx, LOOM_OP_COPY, a, b, NULL);
}

struct loom_tensor *loom_cont(loom_ctx_t *ctx, struct loom_tensor *a)
{
	return node(ctx, LOOM_OP_CONT, a, NULL, NULL);
}

struct loom_tensor *loom_concat(loom_ctx_t *ctx, struct loom_tensor *a,
				struct loom_tensor *b, int dim)
{
	struct loom_tensor p = { .op = LOOM_OP_CONCAT, .src = { a, b } };

	p.op_params[0] = dim;
	return make_op(ctx, &p);
}

struct loom_tensor *loom_sum_rows(loom_ctx_t *ctx, struct loom_tensor *a)
{
	return node(ctx, LOOM_OP_SUM_ROWS, a, NULL, NULL);
}

struct loom_tensor *loom_argmax(loom_ctx_t *ctx, struct loom_tensor *a)
{
	return node(ctx, LOOM_OP_ARGMAX, a, NULL, NULL);
}

struct loom_tensor *loom_top_k(loom_ctx_t *ctx, struct loom_tensor *a, int k)
{
	struct loom_tensor p = { .op = LOOM_OP_TOP_K, .src = { a } };

	p.op_params[0] = k;
	return make_op(ctx, &p);
}

/* ------------------------------------------------------------------------
 * Views.  A view's view_src is the tensor that owns the data (never
 * another view) and view_offs its byte offset there.  Data comes from
 * loom_tensor_init_view(): now when the owner is placed, else when it is.
 */
/* A view op of a whose result the rule works out from a (and, for a
 * reshape, from ne). */
static struct loom_tensor *view_of(loom_ctx_t *ctx, enum loom_op op,
				   struct loom_tensor *a,
				   const int64_t ne[LOOM_MAX_DIMS],
				   const int axes[4])
{
	struct loom_tensor p = { .op = op, .src = { a } };

	if (ne)
		memcpy(p.ne, ne, sizeof(p.ne));
	if (axes)
		memcpy(p.op_params, axes, 4 * sizeof(axes[0]));
	return make_op(ctx, &p);
}

struct loom_tensor *loom_view_4d(loom_ctx_t *ctx, struct loom_tensor *a,
				 int64_t ne0, int64_t ne1, int64_t ne2,
				 int64_t ne3, size_t nb1, size_t nb2,
				 size_t nb3, size_t offset)
{
	struct loom_tensor p = { .op = LOOM_OP_VIEW, .src = { a },
				 .ne = { ne0, ne1, ne2, ne3 } };

	if (a) {
		p.type = a->type;
		p.nb[0] = loom_type_size(a->type);
		p.nb[1] = nb1;
		p.nb[2] = nb2;
		p.nb[3] = nb3;
		p.view_src = loom__owner(a);
		/* An offset past any owner's bytes is refused as outside. */
		if (__builtin_add_overflow(a->view_offs, offset, &p.view_offs))
			p.view_offs = SIZE_MAX;
	}
	return make_op(ctx, &p);
}

struct loom_tensor *loom_view_3d(loom_ctx_t *ctx, struct loom_tensor *a,
				 int64_t ne0, int64_t ne1, int64_t ne2,
				 size_t nb1, size_t nb2, size_t offset)
{
	return loom_view_4d(ctx, a, ne0, ne1, ne2, 1, nb1, nb2,
			    nb2 * (size_t)(ne2 > 0 ? ne2 : 0), offset);
}

struct loom_tensor *loom_view_2d(loom_ctx_t *ctx, struct loom_tensor *a,
				 int64_t ne0, int64_t ne1, size_t nb1,
				 size_t offset)
{
	size_t nb2 = nb1 * (size_t)(ne1 > 0 ? ne1 : 0);

	return loom_view_4d(ctx, a, ne0, ne1, 1, 1, nb1, nb2, nb2, offset);
}

struct loom_tensor *loom_view_1d(loom_ctx_t *ctx, struct loom_tensor *a,
				 int64_t ne0, size_t offset)
{
	size_t nb1 = a ? loom_type_row_size(a->type, ne0) : 0;

	return loom_view_4d(ctx, a, ne0, 1, 1, 1, nb1, nb1, nb1, offset);
}

struct loom_tensor *loom_reshape_4d(loom_ctx_t *ctx, struct loom_tensor *a,
				    int64_t ne0, int64_t ne1, int64_t ne2,
				    int64_t ne3)
{
	const int64_t ne[LOOM_MAX_DIMS] = { ne0, ne1, ne2, ne3 };

	return view_of(ctx, LOOM_OP_RESHAPE, a, ne, NULL);
}

struct loom_tensor *loom_reshape_3d(loom_ctx_t *ctx, struct loom_tensor *a,
				    int64_t ne0, int64_t ne1, int64_t ne2)
{
	return loom_reshape_4d(ctx, a, ne0, ne1, ne2, 1);
}

struct loom_tensor *loom_reshape_2d(loom_ctx_t *ctx, struct loom_tensor *a,
				    int64_t ne0, int64_t ne1)
{
	return loom_reshape_4d(ctx, a, ne0, ne1, 1, 1);
}

struct loom_tensor *loom_reshape_1d(loom_ctx_t *ctx, struct loom_tensor *a,
				    int64_t ne0)
{
	return loom_reshape_4d(ctx, a, ne0, 1, 1, 1);
}

struct loom_tensor *loom_permute(loom_ctx_t *ctx, struct loom_tensor *a,
				 int axis0, int axis1, int axis2, int axis3)
{
	const int axes[4] = { axis0, axis1, axis2, axis3 };

	return view_of(ctx, LOOM_OP_PERMUTE, a, NULL, axes);
}

struct loom_tensor *loom_transpose(loom_ctx_t *ctx, struct loom_tensor *a)
{
	const int axes[4] = { 1, 0, 2, 3 };

	return view_of(ctx, LOOM_OP_TRANSPOSE, a, NULL, axes);
}
