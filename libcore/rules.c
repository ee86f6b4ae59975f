/* SPDX-License-Identifier: MIT */
/* rules.c - the table of ops and the rule of every op: what its sources
 * and parameters must be and what result they give.  The op constructors (ops.c) build nodes from
 * these rules and the graph validator (validate.c) checks nodes against
 * them, so that no node a kernel sees can break a rule a constructor keeps. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "loom-private.h"

/* A description of t for a message, valid to the end of the statement. */
#define DESC(t) loom__tensor_desc((t), (char[LOOM__DESC_MAX]){ 0 }, \
				  LOOM__DESC_MAX)

/* One rule being applied: the node, its result, where a mistake is told. */
struct rule {
	const struct loom_tensor *t;
	struct loom__op_result *r;
	char *msg;
	size_t n;
};

static int fail(struct rule *rl, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static int fail(struct rule *rl, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(rl->msg, rl->n, fmt, ap);
	va_end(ap);
	return LOOM_E_INVAL;
}

/* Source i of the node, which must be there; what names it in messages. */
static int need(struct rule *rl, int i, const char *what)
{
	if (rl->t->src[i])
		return LOOM_OK;
	rl->r->missing = true;
	return fail(rl, "%s is NULL", what);
}

static bool is_float(enum loom_type type)
{
	return type == LOOM_TYPE_F32 || type == LOOM_TYPE_F16 ||
	       type == LOOM_TYPE_BF16;
}

static bool matrix_type(enum loom_type type)
{
	return is_float(type) || loom_type_is_quantized(type);
}

static bool convertible(enum loom_type from, enum loom_type to)
{
	return from == to || (matrix_type(from) && matrix_type(to));
}

/* Rows of dimension 0 lie next to each other (what kernels that walk a
 * row need). */
static bool rows_packed(const struct loom_tensor *t)
{
	return t->nb[0] == loom_type_size(t->type);
}

static float param_f32(const struct loom_tensor *t, int i)
{
	return loom_tensor_op_param_f32(t, i);
}

/* The check of every elementwise and row op: a is there and is f32, f16
 * or bf16. */
static int need_float(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0];

	if (need(rl, 0, "a"))
		return LOOM_E_INVAL;
	if (!is_float(a->type))
		return fail(rl, "a %s must be f32, f16 or bf16", DESC(a));
	return LOOM_OK;
}

/* The result is a new contiguous tensor of type and ne. */
static int result(struct rule *rl, enum loom_type type,
		  const int64_t ne[LOOM_MAX_DIMS])
{
	struct loom_tensor probe = { .type = type };

	memcpy(probe.ne, ne, sizeof(probe.ne));
	loom__tensor_set_contiguous(&probe);
	rl->r->type = type;
	memcpy(rl->r->ne, ne, sizeof(rl->r->ne));
	memcpy(rl->r->nb, probe.nb, sizeof(rl->r->nb));
	rl->r->view_src = NULL;
	rl->r->view_offs = 0;
	return LOOM_OK;
}

/* The result is dst itself, seen through a view (copy, set_rows). */
static int result_dst(struct rule *rl, struct loom_tensor *dst)
{
	rl->r->type = dst->type;
	memcpy(rl->r->ne, dst->ne, sizeof(rl->r->ne));
	memcpy(rl->r->nb, dst->nb, sizeof(rl->r->nb));
	rl->r->view_src = loom__owner(dst);
	rl->r->view_offs = dst->view_offs;
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * Elementwise and row ops.
 */
static int rule_binary(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0], *b = rl->t->src[1];

	if (need(rl, 0, "a") || need(rl, 1, "b"))
		return LOOM_E_INVAL;
	if (!is_float(a->type) || !is_float(b->type))
		return fail(rl, "a %s and b %s must be f32, f16 or bf16",
			    DESC(a), DESC(b));
	if (!loom_tensor_can_repeat(b, a))
		return fail(rl, "b %s cannot be broadcast to a %s", DESC(b),
			    DESC(a));
	return result(rl, LOOM_TYPE_F32, a->ne);
}

static int rule_unary(struct rule *rl)
{
	if (need_float(rl))
		return LOOM_E_INVAL;
	return result(rl, LOOM_TYPE_F32, rl->t->src[0]->ne);
}

static int rule_norm(struct rule *rl)
{
	float eps = param_f32(rl->t, 0);

	if (need(rl, 0, "a"))
		return LOOM_E_INVAL;
	if (!(eps >= 0.0f) || isinf(eps))
		return fail(rl, "eps %g must be finite and >= 0", (double)eps);
	return rule_unary(rl);
}

static int rule_soft_max(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0], *mask = rl->t->src[1];

	if (need_float(rl))
		return LOOM_E_INVAL;
	if (mask) {
		if (mask->type != LOOM_TYPE_F32 && mask->type != LOOM_TYPE_F16)
			return fail(rl, "mask %s must be f32 or f16",
				    DESC(mask));
		if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] ||
		    mask->ne[2] == 0 || mask->ne[3] == 0 ||
		    a->ne[2] % mask->ne[2] || a->ne[3] % mask->ne[3])
			return fail(rl,
				    "mask %s does not fit a %s (needs ne0 "
				    "equal, ne1 >= a's, ne2 and ne3 "
				    "broadcastable)", DESC(mask), DESC(a));
		if (!rows_packed(mask))
			return fail(rl, "mask %s rows are not packed",
				    DESC(mask));
	}
	return result(rl, LOOM_TYPE_F32, a->ne);
}

/* soft_max_sinks: soft_max's rule, and one F32 sink per head (a's
 * dimension 2). */
static int rule_soft_max_sinks(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0], *sinks = rl->t->src[2];

	if (rule_soft_max(rl) || need(rl, 2, "sinks"))
		return LOOM_E_INVAL;
	if (sinks->type != LOOM_TYPE_F32 || loom_tensor_n_dims(sinks) != 1 ||
	    sinks->ne[0] != a->ne[2])
		return fail(rl, "sinks %s must be f32 [n_head = %lld] for a %s",
			    DESC(sinks), (long long)a->ne[2], DESC(a));
	return LOOM_OK;
}

static int rule_rope(struct rule *rl)
{
	const struct loom_tensor *t = rl->t, *a = t->src[0], *pos = t->src[1];
	int n_dims = t->op_params[0], mode = t->op_params[1];
	float freq_base = param_f32(t, 2), freq_scale = param_f32(t, 3);

	if (need_float(rl) || need(rl, 1, "pos"))
		return LOOM_E_INVAL;
	if (a->ne[3] != 1)
		return fail(rl, "a %s must be [head_dim, n_head, n_tokens, 1]",
			    DESC(a));
	if (pos->type != LOOM_TYPE_I32 || loom_tensor_n_dims(pos) != 1 ||
	    pos->ne[0] != a->ne[2])
		return fail(rl, "pos %s must be i32 [n_tokens = %lld] for a %s",
			    DESC(pos), (long long)a->ne[2], DESC(a));
	if (n_dims <= 0 || n_dims % 2 || n_dims > a->ne[0])
		return fail(rl,
			    "n_dims %d must be even, > 0 and <= head_dim %lld",
			    n_dims, (long long)a->ne[0]);
	if (mode != LOOM_ROPE_NORMAL && mode != LOOM_ROPE_NEOX)
		return fail(rl, "unknown mode %d", mode);
	if (!(freq_base > 0.0f) || isinf(freq_base) || !isfinite(freq_scale))
		return fail(rl,
			    "freq_base %g must be finite and > 0, freq_scale "
			    "%g finite", (double)freq_base,
			    (double)freq_scale);
	return result(rl, LOOM_TYPE_F32, a->ne);
}

/* rope_yarn: rope's rule, and the parameters of the extension. */
static int rule_rope_yarn(struct rule *rl)
{
	const struct loom_tensor *t = rl->t;
	int n_ctx_orig = t->op_params[4];
	float fscale = param_f32(t, 3), ext = param_f32(t, 5);
	float attn = param_f32(t, 6), fast = param_f32(t, 7);
	float slow = param_f32(t, 8);

	if (rule_rope(rl))
		return LOOM_E_INVAL;
	if (n_ctx_orig <= 0)
		return fail(rl, "n_ctx_orig %d must be > 0", n_ctx_orig);
	if (!isfinite(ext) || !isfinite(attn))
		return fail(rl, "ext_factor %g and attn_factor %g must be "
			    "finite", (double)ext, (double)attn);
	if (!(fast > 0.0f) || !(slow > 0.0f) || isinf(fast) || isinf(slow))
		return fail(rl, "beta_fast %g and beta_slow %g must be finite "
			    "and > 0", (double)fast, (double)slow);
	if (ext != 0.0f && !(fscale > 0.0f))
		return fail(rl, "freq_scale %g must be > 0 where ext_factor "
			    "is not 0", (double)fscale);
	return LOOM_OK;
}

static int rule_swiglu_oai(struct rule *rl)
{
	const struct loom_tensor *g = rl->t->src[0], *u = rl->t->src[1];
	float alpha = param_f32(rl->t, 0), limit = param_f32(rl->t, 1);

	if (need(rl, 0, "gate") || need(rl, 1, "up"))
		return LOOM_E_INVAL;
	if (!is_float(g->type) || !is_float(u->type))
		return fail(rl, "gate %s and up %s must be f32, f16 or bf16",
			    DESC(g), DESC(u));
	if (!loom_tensor_same_shape(g, u))
		return fail(rl, "gate %s and up %s differ in shape", DESC(g),
			    DESC(u));
	if (!isfinite(alpha) || !(limit > 0.0f))
		return fail(rl, "alpha %g must be finite and limit %g > 0",
			    (double)alpha, (double)limit);
	return result(rl, LOOM_TYPE_F32, g->ne);
}

/* ------------------------------------------------------------------------
 * Matrix products and rows.
 */
static int rule_mul_mat(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0], *b = rl->t->src[1];
	int64_t ne[LOOM_MAX_DIMS];

	if (need(rl, 0, "a") || need(rl, 1, "b"))
		return LOOM_E_INVAL;
	if (!matrix_type(a->type) || !is_float(b->type))
		return fail(rl,
			    "a %s must be f32, f16, bf16 or q8_0 and b %s "
			    "f32, f16 or bf16", DESC(a), DESC(b));
	if (a->ne[0] != b->ne[0])
		return fail(rl, "a %s and b %s differ in K (ne0)", DESC(a),
			    DESC(b));
	if (a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] ||
	    b->ne[3] % a->ne[3])
		return fail(rl,
			    "a %s cannot be broadcast over b %s (b's ne2, ne3 "
			    "must be multiples of a's)", DESC(a), DESC(b));
	if (!rows_packed(a) || !rows_packed(b))
		return fail(rl,
			    "rows of a %s and b %s must be packed (dimension "
			    "0 contiguous)", DESC(a), DESC(b));
	ne[0] = a->ne[1];
	ne[1] = b->ne[1];
	ne[2] = b->ne[2];
	ne[3] = b->ne[3];
	return result(rl, LOOM_TYPE_F32, ne);
}

static int rule_mul_mat_id(struct rule *rl)
{
	const struct loom_tensor *as = rl->t->src[0], *b = rl->t->src[1];
	const struct loom_tensor *ids = rl->t->src[2];
	int64_t ne[LOOM_MAX_DIMS];

	if (need(rl, 0, "as") || need(rl, 1, "b") || need(rl, 2, "ids"))
		return LOOM_E_INVAL;
	if (!matrix_type(as->type) || !is_float(b->type) ||
	    ids->type != LOOM_TYPE_I32)
		return fail(rl,
			    "as %s must be f32, f16, bf16 or q8_0, b %s f32, "
			    "f16 or bf16 and ids %s i32", DESC(as), DESC(b),
			    DESC(ids));
	if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 ||
	    ids->ne[3] != 1)
		return fail(rl, "as %s must be 3D, b %s 3D and ids %s 2D",
			    DESC(as), DESC(b), DESC(ids));
	if (as->ne[0] != b->ne[0])
		return fail(rl, "as %s and b %s differ in K (ne0)", DESC(as),
			    DESC(b));
	if (ids->ne[1] != b->ne[2])
		return fail(rl,
			    "ids %s and b %s differ in the number of tokens",
			    DESC(ids), DESC(b));
	if (b->ne[1] != 1 && b->ne[1] != ids->ne[0])
		return fail(rl, "b %s ne1 must be 1 or n_used = %lld",
			    DESC(b), (long long)ids->ne[0]);
	if (!rows_packed(as) || !rows_packed(b))
		return fail(rl, "rows of as %s and b %s must be packed",
			    DESC(as), DESC(b));
	ne[0] = as->ne[1];
	ne[1] = ids->ne[0];
	ne[2] = ids->ne[1];
	ne[3] = 1;
	return result(rl, LOOM_TYPE_F32, ne);
}

static int rule_add_id(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0], *b = rl->t->src[1];
	const struct loom_tensor *ids = rl->t->src[2];

	if (need(rl, 0, "a") || need(rl, 1, "biases") || need(rl, 2, "ids"))
		return LOOM_E_INVAL;
	if (!is_float(a->type) || !is_float(b->type) ||
	    ids->type != LOOM_TYPE_I32)
		return fail(rl, "a %s and biases %s must be f32, f16 or bf16 "
			    "and ids %s i32", DESC(a), DESC(b), DESC(ids));
	if (a->ne[3] != 1 || b->ne[2] != 1 || b->ne[3] != 1 ||
	    ids->ne[2] != 1 || ids->ne[3] != 1)
		return fail(rl, "a %s must be 3D, biases %s and ids %s 2D",
			    DESC(a), DESC(b), DESC(ids));
	if (b->ne[0] != a->ne[0] || ids->ne[0] != a->ne[1] ||
	    ids->ne[1] != a->ne[2])
		return fail(rl,
			    "biases %s must be [%lld, n_expert] and ids %s "
			    "[%lld, %lld] for a %s", DESC(b),
			    (long long)a->ne[0], DESC(ids),
			    (long long)a->ne[1], (long long)a->ne[2], DESC(a));
	return result(rl, LOOM_TYPE_F32, a->ne);
}

static int rule_get_rows(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0], *ids = rl->t->src[1];
	int64_t ne[LOOM_MAX_DIMS];

	if (need(rl, 0, "a") || need(rl, 1, "ids"))
		return LOOM_E_INVAL;
	if (ids->type != LOOM_TYPE_I32)
		return fail(rl, "ids %s must be i32", DESC(ids));
	if (ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3] ||
	    ids->ne[3] != 1)
		return fail(rl, "ids %s must be [n, %lld, %lld] for a %s",
			    DESC(ids), (long long)a->ne[2],
			    (long long)a->ne[3], DESC(a));
	ne[0] = a->ne[0];
	ne[1] = ids->ne[0];
	ne[2] = a->ne[2];
	ne[3] = a->ne[3];
	return result(rl, LOOM_TYPE_F32, ne);
}

static int rule_set_rows(struct rule *rl)
{
	struct loom_tensor *dst = rl->t->src[0];
	const struct loom_tensor *values = rl->t->src[1], *ids = rl->t->src[2];

	if (need(rl, 0, "dst") || need(rl, 1, "values") ||
	    need(rl, 2, "ids"))
		return LOOM_E_INVAL;
	if (!matrix_type(dst->type) || values->type != LOOM_TYPE_F32 ||
	    ids->type != LOOM_TYPE_I32)
		return fail(rl,
			    "dst %s must be f32, f16, bf16 or q8_0, values %s "
			    "f32 and ids %s i32", DESC(dst), DESC(values),
			    DESC(ids));
	if (values->ne[0] != dst->ne[0] || values->ne[2] != dst->ne[2] ||
	    values->ne[3] != dst->ne[3])
		return fail(rl, "values %s must match dst %s in ne0, ne2 and "
			    "ne3", DESC(values), DESC(dst));
	if (ids->ne[0] != values->ne[1] || ids->ne[1] != values->ne[2] ||
	    ids->ne[2] != values->ne[3] || ids->ne[3] != 1)
		return fail(rl,
			    "ids %s must be [%lld, %lld, %lld] for values %s",
			    DESC(ids), (long long)values->ne[1],
			    (long long)values->ne[2],
			    (long long)values->ne[3], DESC(values));
	if (!rows_packed(dst))
		return fail(rl, "rows of dst %s must be packed", DESC(dst));
	return result_dst(rl, dst);
}

/* ------------------------------------------------------------------------
 * Copies, concatenation, reductions.
 */

/* True when a and b share bytes.  Placed in one buffer their addresses
 * say so; before placement, views of one owner say so by their offsets.
 * The very same bytes read as the same type are no overlap: that copy
 * changes nothing (as loom_tensor_copy also allows). */
static bool overlap(const struct loom_tensor *a, const struct loom_tensor *b)
{
	size_t na = loom_tensor_n_bytes(a), nb = loom_tensor_n_bytes(b);
	uintptr_t sa, sb;

	if (!na || !nb)
		return false;
	if (a->data && b->data) {
		if (a->buffer != b->buffer)
			return false;
		sa = (uintptr_t)a->data;
		sb = (uintptr_t)b->data;
	} else {
		if (loom__owner((struct loom_tensor *)a) !=
		    loom__owner((struct loom_tensor *)b))
			return false;
		sa = a->view_offs;
		sb = b->view_offs;
	}
	if (sa == sb && a->type == b->type &&
	    !memcmp(a->ne, b->ne, sizeof(a->ne)) &&
	    !memcmp(a->nb, b->nb, sizeof(a->nb)))
		return false;
	return sa < sb + nb && sb < sa + na;
}

static const char *name_of(const struct loom_tensor *t)
{
	return t->name[0] ? t->name : "(unnamed)";
}

static int rule_copy(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0];
	struct loom_tensor *b = rl->t->src[1];

	if (need(rl, 0, "a") || need(rl, 1, "b"))
		return LOOM_E_INVAL;
	if (loom_tensor_n_elements(a) != loom_tensor_n_elements(b))
		return fail(rl, "a %s and b %s differ in element count",
			    DESC(a), DESC(b));
	if (!convertible(a->type, b->type))
		return fail(rl, "cannot convert a %s to b %s", DESC(a),
			    DESC(b));
	if (overlap(a, b))
		return fail(rl, "'%s' and '%s' overlap in their buffer",
			    name_of(a), name_of(b));
	return result_dst(rl, b);
}

static int rule_cont(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0];

	if (need(rl, 0, "a"))
		return LOOM_E_INVAL;
	if (loom_type_is_quantized(a->type) && !rows_packed(a))
		return fail(rl, "a %s: quantized blocks are not packed",
			    DESC(a));
	return result(rl, a->type, a->ne);
}

static int rule_concat(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0], *b = rl->t->src[1];
	int dim = rl->t->op_params[0];
	int64_t ne[LOOM_MAX_DIMS];

	if (need(rl, 0, "a") || need(rl, 1, "b"))
		return LOOM_E_INVAL;
	if (dim < 0 || dim >= LOOM_MAX_DIMS)
		return fail(rl, "dim %d is not in 0..3", dim);
	if (a->type != b->type)
		return fail(rl, "a %s and b %s differ in type", DESC(a),
			    DESC(b));
	for (int i = 0; i < LOOM_MAX_DIMS; i++) {
		if (i != dim && a->ne[i] != b->ne[i])
			return fail(rl,
				    "a %s and b %s differ in ne%d (concat "
				    "along %d)", DESC(a), DESC(b), i, dim);
		ne[i] = a->ne[i];
	}
	if (__builtin_add_overflow(a->ne[dim], b->ne[dim], &ne[dim]))
		return fail(rl, "a %s and b %s together are too large",
			    DESC(a), DESC(b));
	return result(rl, a->type, ne);
}

static int rule_sum_rows(struct rule *rl)
{
	int64_t ne[LOOM_MAX_DIMS];

	if (need_float(rl))
		return LOOM_E_INVAL;
	memcpy(ne, rl->t->src[0]->ne, sizeof(ne));
	ne[0] = 1;
	return result(rl, LOOM_TYPE_F32, ne);
}

static int rule_argmax(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0];
	int64_t ne[LOOM_MAX_DIMS] = { 1, 1, 1, 1 };

	if (need_float(rl))
		return LOOM_E_INVAL;
	if (a->ne[2] != 1 || a->ne[3] != 1 || a->ne[0] < 1)
		return fail(rl, "a %s must be 2D with ne0 >= 1", DESC(a));
	ne[0] = a->ne[1];
	return result(rl, LOOM_TYPE_I32, ne);
}

static int rule_top_k(struct rule *rl)
{
	const struct loom_tensor *a = rl->t->src[0];
	int k = rl->t->op_params[0];
	int64_t ne[LOOM_MAX_DIMS];

	if (need_float(rl))
		return LOOM_E_INVAL;
	if (k < 1 || k > a->ne[0])
		return fail(rl, "k = %d must be in 1..ne0 of a %s", k,
			    DESC(a));
	memcpy(ne, a->ne, sizeof(ne));
	ne[0] = k;
	return result(rl, LOOM_TYPE_I32, ne);
}

/* ------------------------------------------------------------------------
 * Views.  A view's view_src is the tensor that owns the data (never
 * another view) and view_offs its byte offset there.  Every view op ends
 * in view_within, which checks the sizes, the strides and the bytes.
 */

/* The result is the view r describes, of the owner r->view_src: sizes
 * not negative, dimension 0 whole blocks, the offset and strides on
 * element (block) boundaries, and every byte inside the owner's. */
static int view_within(struct rule *rl)
{
	struct loom__op_result *r = rl->r;
	const struct loom_tensor *owner = r->view_src;
	struct loom_tensor probe = { .type = r->type };
	size_t span, have_bytes, unit = loom_type_size(r->type);

	memcpy(probe.ne, r->ne, sizeof(probe.ne));
	memcpy(probe.nb, r->nb, sizeof(probe.nb));
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (r->ne[i] < 0)
			return fail(rl, "negative size ne%d = %lld of a view "
				    "of %s", i, (long long)r->ne[i],
				    DESC(owner));
	if (r->ne[0] % loom_type_block_size(r->type))
		return fail(rl,
			    "ne0 = %lld is not a whole number of %s blocks",
			    (long long)r->ne[0], loom_type_name(r->type));
	if (r->view_offs % unit)
		return fail(rl,
			    "view %s at offset %zu is not on a boundary of "
			    "its %zu-byte %s %s", DESC(&probe), r->view_offs,
			    unit, loom_type_name(r->type),
			    loom_type_is_quantized(r->type) ? "blocks"
							    : "elements");
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (r->ne[i] > 1 && r->nb[i] % unit)
			return fail(rl,
				    "view %s: stride nb%d = %zu is not a "
				    "multiple of its %zu-byte %s %s",
				    DESC(&probe), i, r->nb[i], unit,
				    loom_type_name(r->type),
				    loom_type_is_quantized(r->type)
					    ? "blocks"
					    : "elements");
	if (loom_type_is_quantized(r->type) && r->nb[0] != unit)
		return fail(rl, "view %s: quantized blocks are not packed",
			    DESC(&probe));
	span = loom_tensor_n_bytes(&probe);
	have_bytes = loom_tensor_n_bytes(owner);
	if (r->view_offs > have_bytes || span > have_bytes - r->view_offs)
		return fail(rl,
			    "view %s at offset %zu (%zu bytes) is outside "
			    "the %zu bytes of %s", DESC(&probe), r->view_offs,
			    span, have_bytes, DESC(owner));
	return LOOM_OK;
}

/* VIEW: sizes, strides and offset are the node's own; it views its
 * view_src, which src[0] need not be (a rewritten graph may make a view
 * depend on the node that writes the bytes it shows). */
static int rule_view(struct rule *rl)
{
	const struct loom_tensor *t = rl->t;
	struct loom__op_result *r = rl->r;

	if (need(rl, 0, "a"))
		return LOOM_E_INVAL;
	if (!t->view_src || t->view_src->view_src)
		return fail(rl, "a view must name the tensor that owns its "
			    "data as view_src");
	r->type = t->view_src->type;
	if (t->type != r->type)
		return fail(rl, "a view of %s cannot be %s",
			    DESC(t->view_src), loom_type_name(t->type));
	memcpy(r->ne, t->ne, sizeof(r->ne));
	memcpy(r->nb, t->nb, sizeof(r->nb));
	r->view_src = t->view_src;
	r->view_offs = t->view_offs;
	return view_within(rl);
}

static int rule_reshape(struct rule *rl)
{
	const struct loom_tensor *t = rl->t;
	struct loom_tensor *a = t->src[0];
	struct loom__op_result *r = rl->r;
	struct loom_tensor probe;
	int64_t count = 1;
	bool big = false;

	if (need(rl, 0, "a"))
		return LOOM_E_INVAL;
	if (!loom_tensor_is_contiguous(a))
		return fail(rl, "a %s is not contiguous", DESC(a));
	probe = (struct loom_tensor){ .type = a->type };
	memcpy(probe.ne, t->ne, sizeof(probe.ne));
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (probe.ne[i] < 0)
			return fail(rl, "negative size in %s", DESC(&probe));
	if (probe.ne[0] % loom_type_block_size(a->type))
		return fail(rl,
			    "ne0 = %lld is not a whole number of %s blocks",
			    (long long)probe.ne[0], loom_type_name(a->type));
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		big |= __builtin_mul_overflow(count, probe.ne[i], &count);
	if (big || count != loom_tensor_n_elements(a))
		return fail(rl, "%s and a %s differ in element count",
			    DESC(&probe), DESC(a));
	loom__tensor_set_contiguous(&probe);
	r->type = a->type;
	memcpy(r->ne, probe.ne, sizeof(r->ne));
	memcpy(r->nb, probe.nb, sizeof(r->nb));
	r->view_src = loom__owner(a);
	r->view_offs = a->view_offs;
	return view_within(rl);
}

/* PERMUTE takes its axes from op_params; TRANSPOSE's are fixed. */
static int rule_permute(struct rule *rl)
{
	static const int swap01[4] = { 1, 0, 2, 3 };
	const struct loom_tensor *t = rl->t;
	struct loom_tensor *a = t->src[0];
	const int *axes = t->op == LOOM_OP_TRANSPOSE ? swap01 : t->op_params;
	struct loom__op_result *r = rl->r;
	unsigned seen = 0;

	if (need(rl, 0, "a"))
		return LOOM_E_INVAL;
	for (int i = 0; i < LOOM_MAX_DIMS; i++) {
		if (axes[i] < 0 || axes[i] >= LOOM_MAX_DIMS ||
		    (seen & (1u << axes[i])))
			return fail(rl,
				    "axes (%d, %d, %d, %d) are not a "
				    "permutation of 0..3",
				    axes[0], axes[1], axes[2], axes[3]);
		seen |= 1u << axes[i];
		r->ne[axes[i]] = a->ne[i];
		r->nb[axes[i]] = a->nb[i];
	}
	if (loom_type_is_quantized(a->type) && axes[0] != 0)
		return fail(rl, "dimension 0 of quantized a %s cannot move",
			    DESC(a));
	r->type = a->type;
	r->view_src = loom__owner(a);
	r->view_offs = a->view_offs;
	return view_within(rl);
}

/* A tensor without an op is what it is. */
static int rule_none(struct rule *rl)
{
	const struct loom_tensor *t = rl->t;

	rl->r->type = t->type;
	memcpy(rl->r->ne, t->ne, sizeof(rl->r->ne));
	memcpy(rl->r->nb, t->nb, sizeof(rl->r->nb));
	rl->r->view_src = t->view_src;
	rl->r->view_offs = t->view_offs;
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * The table of ops: one row per op, the one place that says what an op
 * is.  The constructors (ops.c), the validator (validate.c), raw nodes
 * (tensor.c) and, through loom_op_flags and loom_op_split_rule, the
 * plugins read it.  A new op is one LOOM_OP_MAP entry in loom.h, one
 * row here and one kernel per plugin (doc/ops.md).
 */
struct op_row {
	int (*rule)(struct rule *rl);  /* the shape and type rule */
	uint32_t flags;                /* LOOM_OPF_* */
	int8_t n_src;                  /* the most sources it reads */
	int8_t target;                 /* the source the result's bytes are */
	const char *suffix;            /* a result named after that source */
	enum loom_split_rule split;
};

#define VIEW_ROW(rule_, suffix_)                                             \
	{ rule_, LOOM_OPF_NO_KERNEL | LOOM_OPF_VIEW, 1, 0, suffix_,          \
	  LOOM_SPLIT_RULE_VIEW }

static const struct op_row op_table[LOOM_OP_COUNT] = {
	[LOOM_OP_NONE] = { rule_none, LOOM_OPF_NO_KERNEL, 0, -1, NULL,
			   LOOM_SPLIT_RULE_NONE },
	[LOOM_OP_ADD] = { rule_binary, LOOM_OPF_ADDITIVE, 2, -1, NULL,
			  LOOM_SPLIT_RULE_ELEMENTWISE },
	[LOOM_OP_SUB] = { rule_binary, LOOM_OPF_ADDITIVE, 2, -1, NULL,
			  LOOM_SPLIT_RULE_ELEMENTWISE },
	[LOOM_OP_MUL] = { rule_binary, LOOM_OPF_LINEAR0 | LOOM_OPF_LINEAR1, 2,
			  -1, NULL, LOOM_SPLIT_RULE_ELEMENTWISE },
	[LOOM_OP_DIV] = { rule_binary, LOOM_OPF_LINEAR0, 2, -1, NULL,
			  LOOM_SPLIT_RULE_ELEMENTWISE },
	[LOOM_OP_SCALE] = { rule_unary, LOOM_OPF_LINEAR0, 1, -1, NULL,
			    LOOM_SPLIT_RULE_MAP },
	[LOOM_OP_SILU] = { rule_unary, 0, 1, -1, NULL, LOOM_SPLIT_RULE_MAP },
	[LOOM_OP_GELU] = { rule_unary, 0, 1, -1, NULL, LOOM_SPLIT_RULE_MAP },
	[LOOM_OP_RMS_NORM] = { rule_norm, 0, 1, -1, NULL,
			       LOOM_SPLIT_RULE_ROWS },
	[LOOM_OP_NORM] = { rule_norm, 0, 1, -1, NULL, LOOM_SPLIT_RULE_ROWS },
	[LOOM_OP_SOFT_MAX] = { rule_soft_max, 0, 2, -1, NULL,
			       LOOM_SPLIT_RULE_SOFT_MAX },
	[LOOM_OP_ROPE] = { rule_rope, 0, 2, -1, NULL, LOOM_SPLIT_RULE_ROPE },
	[LOOM_OP_MUL_MAT] = { rule_mul_mat,
			      LOOM_OPF_LINEAR0 | LOOM_OPF_LINEAR1, 2, -1, NULL,
			      LOOM_SPLIT_RULE_MUL_MAT },
	[LOOM_OP_MUL_MAT_ID] = { rule_mul_mat_id,
				 LOOM_OPF_LINEAR0 | LOOM_OPF_LINEAR1, 3, -1,
				 NULL, LOOM_SPLIT_RULE_MUL_MAT },
	[LOOM_OP_GET_ROWS] = { rule_get_rows, LOOM_OPF_LINEAR0, 2, -1, NULL,
			       LOOM_SPLIT_RULE_GET_ROWS },
	[LOOM_OP_SET_ROWS] = { rule_set_rows, LOOM_OPF_IN_PLACE, 3, 0,
			       " (set rows)", LOOM_SPLIT_RULE_WRITE },
	[LOOM_OP_COPY] = { rule_copy, LOOM_OPF_IN_PLACE, 2, 1, " (copy)",
			   LOOM_SPLIT_RULE_WRITE },
	[LOOM_OP_CONT] = { rule_cont, LOOM_OPF_LINEAR0, 1, -1, NULL,
			   LOOM_SPLIT_RULE_MAP },
	[LOOM_OP_CONCAT] = { rule_concat, LOOM_OPF_ADDITIVE, 2, -1, NULL,
			     LOOM_SPLIT_RULE_CONCAT },
	[LOOM_OP_SUM_ROWS] = { rule_sum_rows, LOOM_OPF_LINEAR0, 1, -1, NULL,
			       LOOM_SPLIT_RULE_ROWS },
	[LOOM_OP_ARGMAX] = { rule_argmax, 0, 1, -1, NULL,
			     LOOM_SPLIT_RULE_ARGMAX },
	[LOOM_OP_TOP_K] = { rule_top_k, 0, 1, -1, NULL, LOOM_SPLIT_RULE_ROWS },
	[LOOM_OP_VIEW] = VIEW_ROW(rule_view, " (view)"),
	[LOOM_OP_RESHAPE] = VIEW_ROW(rule_reshape, " (reshaped)"),
	[LOOM_OP_PERMUTE] = VIEW_ROW(rule_permute, " (permuted)"),
	[LOOM_OP_TRANSPOSE] = VIEW_ROW(rule_permute, " (transposed)"),
	[LOOM_OP_SOFT_MAX_SINKS] = { rule_soft_max_sinks, 0, 3, -1, NULL,
				     LOOM_SPLIT_RULE_SOFT_MAX },
	[LOOM_OP_ROPE_YARN] = { rule_rope_yarn, 0, 2, -1, NULL,
				LOOM_SPLIT_RULE_ROPE },
	[LOOM_OP_SWIGLU_OAI] = { rule_swiglu_oai, 0, 2, -1, NULL,
				 LOOM_SPLIT_RULE_ELEMENTWISE },
	[LOOM_OP_ADD_ID] = { rule_add_id, LOOM_OPF_ADDITIVE, 3, -1, NULL,
			     LOOM_SPLIT_RULE_ADD_ID },
};

static const char *const op_names[LOOM_OP_COUNT] = {
#define X_(name_, str) [LOOM_OP_##name_] = str,
	LOOM_OP_MAP(X_)
#undef X_
};

static const struct op_row *row_of(enum loom_op op)
{
	return (unsigned)op < LOOM_OP_COUNT ? &op_table[op] : NULL;
}

const char *loom_op_name(enum loom_op op)
{
	return row_of(op) ? op_names[op] : "unknown";
}

uint32_t loom_op_flags(enum loom_op op)
{
	return row_of(op) ? row_of(op)->flags : 0;
}

bool loom_op_is_view(enum loom_op op)
{
	return loom_op_flags(op) & LOOM_OPF_VIEW;
}

int loom_op_n_src(enum loom_op op)
{
	return row_of(op) ? row_of(op)->n_src : 0;
}

int loom_op_target_src(enum loom_op op)
{
	return row_of(op) ? row_of(op)->target : -1;
}

const char *loom__op_suffix(enum loom_op op)
{
	return row_of(op) ? row_of(op)->suffix : NULL;
}

enum loom_split_rule loom_op_split_rule(enum loom_op op)
{
	return row_of(op) ? row_of(op)->split : LOOM_SPLIT_RULE_NONE;
}

int loom__op_rule(const struct loom_tensor *t, struct loom__op_result *r,
		  char *msg, size_t n)
{
	struct rule rl = { .t = t, .r = r, .msg = msg, .n = n };

	memset(r, 0, sizeof(*r));
	if (n)
		msg[0] = '\0';
	if (!row_of(t->op))
		return fail(&rl, "unknown op %d", (int)t->op);
	return op_table[t->op].rule(&rl);
}
