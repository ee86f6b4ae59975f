/* ops.c - op constructors: the shape and type rules of every op, and the
 * views.  They only build descriptors; kernels live in the plugins and
 * placement (loom_tensor_init_view) in buffer.c. */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "loom-private.h"

/* A description of t for a message, valid to the end of the statement. */
#define DESC(t) loom__tensor_desc((t), (char[LOOM__DESC_MAX]){ 0 }, \
				  LOOM__DESC_MAX)

/* Records "<op>: <message>" on ctx and returns NULL. */
static struct loom_tensor *bad(loom_ctx_t *ctx, enum loom_op op,
			       const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static struct loom_tensor *bad(loom_ctx_t *ctx, enum loom_op op,
			       const char *fmt, ...)
{
	char msg[384];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	loom__ctx_errorf(ctx, LOOM_E_INVAL, "%s: %s", loom_op_name(op), msg);
	return NULL;
}

/* A source must be there; so must the context. */
static bool have(loom_ctx_t *ctx, enum loom_op op, const char *what,
		 const struct loom_tensor *t)
{
	if (!ctx) {
		loom_error_set(LOOM_E_INVAL, "%s: ctx is NULL",
			       loom_op_name(op));
		return false;
	}
	if (!t) {
		bad(ctx, op, "%s is NULL", what);
		return false;
	}
	return true;
}

static bool is_float(enum loom_type type)
{
	return type == LOOM_TYPE_F32 || type == LOOM_TYPE_F16 ||
	       type == LOOM_TYPE_BF16;
}

/* The check of every elementwise and row op: a is there and is f32, f16
 * or bf16. */
static bool have_float(loom_ctx_t *ctx, enum loom_op op,
		       const struct loom_tensor *a)
{
	if (!have(ctx, op, "a", a))
		return false;
	if (!is_float(a->type)) {
		bad(ctx, op, "a %s must be f32, f16 or bf16", DESC(a));
		return false;
	}
	return true;
}

/* Rows of dimension 0 lie next to each other (what kernels that walk a
 * row need). */
static bool rows_packed(const struct loom_tensor *t)
{
	return t->nb[0] == loom_type_size(t->type);
}

static void set_f32(struct loom_tensor *t, int i, float v)
{
	memcpy(&t->op_params[i], &v, sizeof(v));
}

/* Names a view after the tensor it shows ("cache_k (view)"), so that
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

/* A view of a tensor that is already placed gets its data now, as it
 * would at placement. */
static struct loom_tensor *view_data(loom_ctx_t *ctx, struct loom_tensor *t)
{
	if (loom__tensor_in_live_buffer(t->view_src) &&
	    loom_tensor_init_view(t))
		return bad(ctx, t->op, "%s: %s", t->name, loom_error_message());
	return t;
}

/* A new node of op with a contiguous result. */
static struct loom_tensor *new_node(loom_ctx_t *ctx, enum loom_op op,
				    enum loom_type type,
				    const int64_t ne[LOOM_MAX_DIMS],
				    struct loom_tensor *s0,
				    struct loom_tensor *s1,
				    struct loom_tensor *s2)
{
	struct loom_tensor *t;

	t = loom__new_tensor(ctx, loom_op_name(op), type, ne);
	if (!t)
		return NULL;
	t->op = op;
	t->src[0] = s0;
	t->src[1] = s1;
	t->src[2] = s2;
	return t;
}

/* A node whose result is dst itself seen through a view (copy, set_rows):
 * same type, sizes and strides. */
static struct loom_tensor *new_dst_view(loom_ctx_t *ctx, enum loom_op op,
					struct loom_tensor *dst)
{
	struct loom_tensor *t;

	t = loom__new_tensor(ctx, loom_op_name(op), dst->type, dst->ne);
	if (!t)
		return NULL;
	t->op = op;
	memcpy(t->nb, dst->nb, sizeof(t->nb));
	t->view_src = loom__owner(dst);
	t->view_offs = dst->view_offs;
	name_after(t, dst, op == LOOM_OP_COPY ? " (copy)" : " (set rows)");
	return view_data(ctx, t);
}

/* ------------------------------------------------------------------------
 * Elementwise and row ops.
 */
static struct loom_tensor *binary(loom_ctx_t *ctx, enum loom_op op,
				  struct loom_tensor *a,
				  struct loom_tensor *b)
{
	if (!have(ctx, op, "a", a) || !have(ctx, op, "b", b))
		return NULL;
	if (!is_float(a->type) || !is_float(b->type))
		return bad(ctx, op,
			   "a %s and b %s must be f32, f16 or bf16",
			   DESC(a), DESC(b));
	if (!loom_tensor_can_repeat(b, a))
		return bad(ctx, op, "b %s cannot be broadcast to a %s",
			   DESC(b), DESC(a));
	return new_node(ctx, op, LOOM_TYPE_F32, a->ne, a, b, NULL);
}

struct loom_tensor *loom_add(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return binary(ctx, LOOM_OP_ADD, a, b);
}

struct loom_tensor *loom_sub(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return binary(ctx, LOOM_OP_SUB, a, b);
}

struct loom_tensor *loom_mul(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return binary(ctx, LOOM_OP_MUL, a, b);
}

struct loom_tensor *loom_div(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	return binary(ctx, LOOM_OP_DIV, a, b);
}

static struct loom_tensor *unary(loom_ctx_t *ctx, enum loom_op op,
				 struct loom_tensor *a)
{
	if (!have_float(ctx, op, a))
		return NULL;
	return new_node(ctx, op, LOOM_TYPE_F32, a->ne, a, NULL, NULL);
}

struct loom_tensor *loom_scale(loom_ctx_t *ctx, struct loom_tensor *a,
			       float s)
{
	struct loom_tensor *t = unary(ctx, LOOM_OP_SCALE, a);

	if (t)
		set_f32(t, 0, s);
	return t;
}

struct loom_tensor *loom_silu(loom_ctx_t *ctx, struct loom_tensor *a)
{
	return unary(ctx, LOOM_OP_SILU, a);
}

struct loom_tensor *loom_gelu(loom_ctx_t *ctx, struct loom_tensor *a)
{
	return unary(ctx, LOOM_OP_GELU, a);
}

static struct loom_tensor *norm(loom_ctx_t *ctx, enum loom_op op,
				struct loom_tensor *a, float eps)
{
	struct loom_tensor *t;

	if (!have(ctx, op, "a", a))
		return NULL;
	if (!(eps >= 0.0f) || isinf(eps))
		return bad(ctx, op, "eps %g must be finite and >= 0",
			   (double)eps);
	t = unary(ctx, op, a);
	if (t)
		set_f32(t, 0, eps);
	return t;
}

struct loom_tensor *loom_rms_norm(loom_ctx_t *ctx, struct loom_tensor *a,
				  float eps)
{
	return norm(ctx, LOOM_OP_RMS_NORM, a, eps);
}

struct loom_tensor *loom_norm(loom_ctx_t *ctx, struct loom_tensor *a,
			      float eps)
{
	return norm(ctx, LOOM_OP_NORM, a, eps);
}

struct loom_tensor *loom_soft_max(loom_ctx_t *ctx, struct loom_tensor *a,
				  struct loom_tensor *mask, float scale)
{
	const enum loom_op op = LOOM_OP_SOFT_MAX;
	struct loom_tensor *t;

	if (!have_float(ctx, op, a))
		return NULL;
	if (mask) {
		if (mask->type != LOOM_TYPE_F32 && mask->type != LOOM_TYPE_F16)
			return bad(ctx, op, "mask %s must be f32 or f16",
				   DESC(mask));
		if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] ||
		    mask->ne[2] == 0 || mask->ne[3] == 0 ||
		    a->ne[2] % mask->ne[2] || a->ne[3] % mask->ne[3])
			return bad(ctx, op,
				   "mask %s does not fit a %s (needs ne0 "
				   "equal, ne1 >= a's, ne2 and ne3 "
				   "broadcastable)",
				   DESC(mask), DESC(a));
		if (!rows_packed(mask))
			return bad(ctx, op, "mask %s rows are not packed",
				   DESC(mask));
	}
	t = new_node(ctx, op, LOOM_TYPE_F32, a->ne, a, mask, NULL);
	if (t)
		set_f32(t, 0, scale);
	return t;
}

struct loom_tensor *loom_rope(loom_ctx_t *ctx, struct loom_tensor *a,
			      struct loom_tensor *pos, int n_dims,
			      enum loom_rope_mode mode, float freq_base,
			      float freq_scale)
{
	const enum loom_op op = LOOM_OP_ROPE;
	struct loom_tensor *t;

	if (!have_float(ctx, op, a) || !have(ctx, op, "pos", pos))
		return NULL;
	if (a->ne[3] != 1)
		return bad(ctx, op,
			   "a %s must be [head_dim, n_head, n_tokens, 1]",
			   DESC(a));
	if (pos->type != LOOM_TYPE_I32 || loom_tensor_n_dims(pos) != 1 ||
	    pos->ne[0] != a->ne[2])
		return bad(ctx, op,
			   "pos %s must be i32 [n_tokens = %lld] for a %s",
			   DESC(pos), (long long)a->ne[2], DESC(a));
	if (n_dims <= 0 || n_dims % 2 || n_dims > a->ne[0])
		return bad(ctx, op,
			   "n_dims %d must be even, > 0 and <= head_dim "
			   "%lld", n_dims, (long long)a->ne[0]);
	if (mode != LOOM_ROPE_NORMAL && mode != LOOM_ROPE_NEOX)
		return bad(ctx, op, "unknown mode %d", (int)mode);
	if (!(freq_base > 0.0f) || isinf(freq_base) || !isfinite(freq_scale))
		return bad(ctx, op,
			   "freq_base %g must be finite and > 0, freq_scale "
			   "%g finite", (double)freq_base, (double)freq_scale);
	t = new_node(ctx, op, LOOM_TYPE_F32, a->ne, a, pos, NULL);
	if (!t)
		return NULL;
	t->op_params[0] = n_dims;
	t->op_params[1] = (int32_t)mode;
	set_f32(t, 2, freq_base);
	set_f32(t, 3, freq_scale);
	return t;
}

/* ------------------------------------------------------------------------
 * Matrix products and rows.
 */
static bool matrix_type(enum loom_type type)
{
	return is_float(type) || loom_type_is_quantized(type);
}

struct loom_tensor *loom_mul_mat(loom_ctx_t *ctx, struct loom_tensor *a,
				 struct loom_tensor *b)
{
	const enum loom_op op = LOOM_OP_MUL_MAT;
	int64_t ne[LOOM_MAX_DIMS];

	if (!have(ctx, op, "a", a) || !have(ctx, op, "b", b))
		return NULL;
	if (!matrix_type(a->type) || !is_float(b->type))
		return bad(ctx, op,
			   "a %s must be f32, f16, bf16 or q8_0 and b %s "
			   "f32, f16 or bf16", DESC(a), DESC(b));
	if (a->ne[0] != b->ne[0])
		return bad(ctx, op, "a %s and b %s differ in K (ne0)",
			   DESC(a), DESC(b));
	if (a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] ||
	    b->ne[3] % a->ne[3])
		return bad(ctx, op,
			   "a %s cannot be broadcast over b %s (b's ne2, ne3 "
			   "must be multiples of a's)", DESC(a), DESC(b));
	if (!rows_packed(a) || !rows_packed(b))
		return bad(ctx, op,
			   "rows of a %s and b %s must be packed (dimension "
			   "0 contiguous)", DESC(a), DESC(b));
	ne[0] = a->ne[1];
	ne[1] = b->ne[1];
	ne[2] = b->ne[2];
	ne[3] = b->ne[3];
	return new_node(ctx, op, LOOM_TYPE_F32, ne, a, b, NULL);
}

struct loom_tensor *loom_mul_mat_id(loom_ctx_t *ctx, struct loom_tensor *as,
				    struct loom_tensor *b,
				    struct loom_tensor *ids)
{
	const enum loom_op op = LOOM_OP_MUL_MAT_ID;
	int64_t ne[LOOM_MAX_DIMS];

	if (!have(ctx, op, "as", as) || !have(ctx, op, "b", b) ||
	    !have(ctx, op, "ids", ids))
		return NULL;
	if (!matrix_type(as->type) || !is_float(b->type) ||
	    ids->type != LOOM_TYPE_I32)
		return bad(ctx, op,
			   "as %s must be f32, f16, bf16 or q8_0, b %s f32, "
			   "f16 or bf16 and ids %s i32",
			   DESC(as), DESC(b), DESC(ids));
	if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 ||
	    ids->ne[3] != 1)
		return bad(ctx, op,
			   "as %s must be 3D, b %s 3D and ids %s 2D",
			   DESC(as), DESC(b), DESC(ids));
	if (as->ne[0] != b->ne[0])
		return bad(ctx, op, "as %s and b %s differ in K (ne0)",
			   DESC(as), DESC(b));
	if (ids->ne[1] != b->ne[2])
		return bad(ctx, op,
			   "ids %s and b %s differ in the number of tokens",
			   DESC(ids), DESC(b));
	if (b->ne[1] != 1 && b->ne[1] != ids->ne[0])
		return bad(ctx, op, "b %s ne1 must be 1 or n_used = %lld",
			   DESC(b), (long long)ids->ne[0]);
	if (!rows_packed(as) || !rows_packed(b))
		return bad(ctx, op,
			   "rows of as %s and b %s must be packed",
			   DESC(as), DESC(b));
	ne[0] = as->ne[1];
	ne[1] = ids->ne[0];
	ne[2] = ids->ne[1];
	ne[3] = 1;
	return new_node(ctx, op, LOOM_TYPE_F32, ne, as, b, ids);
}

struct loom_tensor *loom_get_rows(loom_ctx_t *ctx, struct loom_tensor *a,
				  struct loom_tensor *ids)
{
	const enum loom_op op = LOOM_OP_GET_ROWS;
	int64_t ne[LOOM_MAX_DIMS];

	if (!have(ctx, op, "a", a) || !have(ctx, op, "ids", ids))
		return NULL;
	if (ids->type != LOOM_TYPE_I32)
		return bad(ctx, op, "ids %s must be i32", DESC(ids));
	if (ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3] ||
	    ids->ne[3] != 1)
		return bad(ctx, op,
			   "ids %s must be [n, %lld, %lld] for a %s",
			   DESC(ids), (long long)a->ne[2],
			   (long long)a->ne[3], DESC(a));
	ne[0] = a->ne[0];
	ne[1] = ids->ne[0];
	ne[2] = a->ne[2];
	ne[3] = a->ne[3];
	return new_node(ctx, op, LOOM_TYPE_F32, ne, a, ids, NULL);
}

struct loom_tensor *loom_set_rows(loom_ctx_t *ctx, struct loom_tensor *dst,
				  struct loom_tensor *values,
				  struct loom_tensor *ids)
{
	const enum loom_op op = LOOM_OP_SET_ROWS;
	struct loom_tensor *t;

	if (!have(ctx, op, "dst", dst) || !have(ctx, op, "values", values) ||
	    !have(ctx, op, "ids", ids))
		return NULL;
	if (!matrix_type(dst->type) || values->type != LOOM_TYPE_F32 ||
	    ids->type != LOOM_TYPE_I32)
		return bad(ctx, op,
			   "dst %s must be f32, f16, bf16 or q8_0, values %s "
			   "f32 and ids %s i32",
			   DESC(dst), DESC(values), DESC(ids));
	if (values->ne[0] != dst->ne[0] || values->ne[2] != dst->ne[2] ||
	    values->ne[3] != dst->ne[3])
		return bad(ctx, op,
			   "values %s must match dst %s in ne0, ne2 and ne3",
			   DESC(values), DESC(dst));
	if (ids->ne[0] != values->ne[1] || ids->ne[1] != values->ne[2] ||
	    ids->ne[2] != values->ne[3] || ids->ne[3] != 1)
		return bad(ctx, op,
			   "ids %s must be [%lld, %lld, %lld] for values %s",
			   DESC(ids), (long long)values->ne[1],
			   (long long)values->ne[2],
			   (long long)values->ne[3], DESC(values));
	if (!rows_packed(dst))
		return bad(ctx, op, "rows of dst %s must be packed",
			   DESC(dst));
	t = new_dst_view(ctx, op, dst);
	if (!t)
		return NULL;
	t->src[0] = dst;
	t->src[1] = values;
	t->src[2] = ids;
	return t;
}

/* ------------------------------------------------------------------------
 * Copies, concatenation, reductions.
 */
static bool convertible(enum loom_type from, enum loom_type to)
{
	if (from == to)
		return true;
	return matrix_type(from) && matrix_type(to);
}

struct loom_tensor *loom_copy(loom_ctx_t *ctx, struct loom_tensor *a,
			     struct loom_tensor *b)
{
	const enum loom_op op = LOOM_OP_COPY;
	struct loom_tensor *t;

	if (!have(ctx, op, "a", a) || !have(ctx, op, "b", b))
		return NULL;
	if (loom_tensor_n_elements(a) != loom_tensor_n_elements(b))
		return bad(ctx, op, "a %s and b %s differ in element count",
			   DESC(a), DESC(b));
	if (!convertible(a->type, b->type))
		return bad(ctx, op, "cannot convert a %s to b %s", DESC(a),
			   DESC(b));
	t = new_dst_view(ctx, op, b);
	if (!t)
		return NULL;
	t->src[0] = a;
	t->src[1] = b;
	return t;
}

struct loom_tensor *loom_cont(loom_ctx_t *ctx, struct loom_tensor *a)
{
	const enum loom_op op = LOOM_OP_CONT;

	if (!have(ctx, op, "a", a))
		return NULL;
	if (loom_type_is_quantized(a->type) && !rows_packed(a))
		return bad(ctx, op, "a %s: quantized blocks are not packed",
			   DESC(a));
	return new_node(ctx, op, a->type, a->ne, a, NULL, NULL);
}

struct loom_tensor *loom_concat(loom_ctx_t *ctx, struct loom_tensor *a,
				struct loom_tensor *b, int dim)
{
	const enum loom_op op = LOOM_OP_CONCAT;
	int64_t ne[LOOM_MAX_DIMS];
	struct loom_tensor *t;

	if (!have(ctx, op, "a", a) || !have(ctx, op, "b", b))
		return NULL;
	if (dim < 0 || dim >= LOOM_MAX_DIMS)
		return bad(ctx, op, "dim %d is not in 0..3", dim);
	if (a->type != b->type)
		return bad(ctx, op, "a %s and b %s differ in type", DESC(a),
			   DESC(b));
	for (int i = 0; i < LOOM_MAX_DIMS; i++) {
		if (i != dim && a->ne[i] != b->ne[i])
			return bad(ctx, op,
				   "a %s and b %s differ in ne%d (concat "
				   "along %d)", DESC(a), DESC(b), i, dim);
		ne[i] = a->ne[i];
	}
	if (__builtin_add_overflow(a->ne[dim], b->ne[dim], &ne[dim]))
		return bad(ctx, op, "a %s and b %s together are too large",
			   DESC(a), DESC(b));
	t = new_node(ctx, op, a->type, ne, a, b, NULL);
	if (t)
		t->op_params[0] = dim;
	return t;
}

struct loom_tensor *loom_sum_rows(loom_ctx_t *ctx, struct loom_tensor *a)
{
	const enum loom_op op = LOOM_OP_SUM_ROWS;
	int64_t ne[LOOM_MAX_DIMS];

	if (!have_float(ctx, op, a))
		return NULL;
	memcpy(ne, a->ne, sizeof(ne));
	ne[0] = 1;
	return new_node(ctx, op, LOOM_TYPE_F32, ne, a, NULL, NULL);
}

struct loom_tensor *loom_argmax(loom_ctx_t *ctx, struct loom_tensor *a)
{
	const enum loom_op op = LOOM_OP_ARGMAX;
	int64_t ne[LOOM_MAX_DIMS] = { 1, 1, 1, 1 };

	if (!have_float(ctx, op, a))
		return NULL;
	if (a->ne[2] != 1 || a->ne[3] != 1 || a->ne[0] < 1)
		return bad(ctx, op, "a %s must be 2D with ne0 >= 1", DESC(a));
	ne[0] = a->ne[1];
	return new_node(ctx, op, LOOM_TYPE_I32, ne, a, NULL, NULL);
}

struct loom_tensor *loom_top_k(loom_ctx_t *ctx, struct loom_tensor *a, int k)
{
	const enum loom_op op = LOOM_OP_TOP_K;
	int64_t ne[LOOM_MAX_DIMS];
	struct loom_tensor *t;

	if (!have_float(ctx, op, a))
		return NULL;
	if (k < 1 || k > a->ne[0])
		return bad(ctx, op, "k = %d must be in 1..ne0 of a %s", k,
			   DESC(a));
	memcpy(ne, a->ne, sizeof(ne));
	ne[0] = k;
	t = new_node(ctx, op, LOOM_TYPE_I32, ne, a, NULL, NULL);
	if (t)
		t->op_params[0] = k;
	return t;
}

/* ------------------------------------------------------------------------
 * Views.  A view's view_src is the tensor that owns the data (never
 * another view) and view_offs its byte offset there.  Data comes from
 * loom_tensor_init_view(): now when the owner is placed, else when it is.
 */
static struct loom_tensor *new_view(loom_ctx_t *ctx, enum loom_op op,
				    struct loom_tensor *a,
				    const int64_t ne[LOOM_MAX_DIMS],
				    const size_t nb[LOOM_MAX_DIMS],
				    size_t offset)
{
	struct loom_tensor *owner = loom__owner(a);
	struct loom_tensor probe = { .type = a->type };
	size_t offs, span, have_bytes;
	struct loom_tensor *t;

	memcpy(probe.ne, ne, sizeof(probe.ne));
	memcpy(probe.nb, nb, sizeof(probe.nb));
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (ne[i] < 0)
			return bad(ctx, op, "negative size ne%d = %lld of a "
				   "view of %s", i, (long long)ne[i], DESC(a));
	if (ne[0] % loom_type_block_size(a->type))
		return bad(ctx, op,
			   "ne0 = %lld is not a whole number of %s blocks",
			   (long long)ne[0], loom_type_name(a->type));
	span = loom_tensor_n_bytes(&probe);
	have_bytes = loom_tensor_n_bytes(owner);
	if (__builtin_add_overflow(a->view_offs, offset, &offs) ||
	    offs > have_bytes || span > have_bytes - offs)
		return bad(ctx, op,
			   "view %s at offset %zu (%zu bytes) is outside "
			   "the %zu bytes of %s",
			   DESC(&probe), offset, span, have_bytes,
			   DESC(owner));
	t = loom__new_tensor(ctx, loom_op_name(op), a->type, ne);
	if (!t)
		return NULL;
	t->op = op;
	memcpy(t->nb, nb, sizeof(t->nb));
	t->src[0] = a;
	t->view_src = owner;
	t->view_offs = offs;
	name_after(t, a, op == LOOM_OP_VIEW      ? " (view)" :
			 op == LOOM_OP_RESHAPE   ? " (reshaped)" :
			 op == LOOM_OP_PERMUTE   ? " (permuted)" :
						   " (transposed)");
	return view_data(ctx, t);
}

struct loom_tensor *loom_view_4d(loom_ctx_t *ctx, struct loom_tensor *a,
				 int64_t ne0, int64_t ne1, int64_t ne2,
				 int64_t ne3, size_t nb1, size_t nb2,
				 size_t nb3, size_t offset)
{
	const int64_t ne[] = { ne0, ne1, ne2, ne3 };
	size_t nb[LOOM_MAX_DIMS];

	if (!have(ctx, LOOM_OP_VIEW, "a", a))
		return NULL;
	nb[0] = loom_type_size(a->type);
	nb[1] = nb1;
	nb[2] = nb2;
	nb[3] = nb3;
	return new_view(ctx, LOOM_OP_VIEW, a, ne, nb, offset);
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
	size_t nb1;

	if (!have(ctx, LOOM_OP_VIEW, "a", a))
		return NULL;
	nb1 = loom_type_row_size(a->type, ne0);
	return loom_view_4d(ctx, a, ne0, 1, 1, 1, nb1, nb1, nb1, offset);
}

struct loom_tensor *loom_reshape_4d(loom_ctx_t *ctx, struct loom_tensor *a,
				    int64_t ne0, int64_t ne1, int64_t ne2,
				    int64_t ne3)
{
	const enum loom_op op = LOOM_OP_RESHAPE;
	struct loom_tensor probe;
	int64_t count = 1;
	bool big = false;

	if (!have(ctx, op, "a", a))
		return NULL;
	if (!loom_tensor_is_contiguous(a))
		return bad(ctx, op, "a %s is not contiguous", DESC(a));
	probe = (struct loom_tensor){ .type = a->type,
				      .ne = { ne0, ne1, ne2, ne3 } };
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (probe.ne[i] < 0)
			return bad(ctx, op, "negative size in %s",
				   DESC(&probe));
	if (ne0 % loom_type_block_size(a->type))
		return bad(ctx, op,
			   "ne0 = %lld is not a whole number of %s blocks",
			   (long long)ne0, loom_type_name(a->type));
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		big |= __builtin_mul_overflow(count, probe.ne[i], &count);
	if (big || count != loom_tensor_n_elements(a))
		return bad(ctx, op, "%s and a %s differ in element count",
			   DESC(&probe), DESC(a));
	loom__tensor_set_contiguous(&probe);
	return new_view(ctx, op, a, probe.ne, probe.nb, 0);
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

static struct loom_tensor *permute(loom_ctx_t *ctx, enum loom_op op,
				   struct loom_tensor *a, const int axes[4])
{
	int64_t ne[LOOM_MAX_DIMS];
	size_t nb[LOOM_MAX_DIMS];
	unsigned seen = 0;
	struct loom_tensor *t;

	if (!have(ctx, op, "a", a))
		return NULL;
	for (int i = 0; i < LOOM_MAX_DIMS; i++) {
		if (axes[i] < 0 || axes[i] >= LOOM_MAX_DIMS ||
		    (seen & (1u << axes[i])))
			return bad(ctx, op,
				   "axes (%d, %d, %d, %d) are not a "
				   "permutation of 0..3",
				   axes[0], axes[1], axes[2], axes[3]);
		seen |= 1u << axes[i];
		ne[axes[i]] = a->ne[i];
		nb[axes[i]] = a->nb[i];
	}
	if (loom_type_is_quantized(a->type) && axes[0] != 0)
		return bad(ctx, op,
			   "dimension 0 of quantized a %s cannot move",
			   DESC(a));
	t = new_view(ctx, op, a, ne, nb, 0);
	if (t)
		memcpy(t->op_params, axes, 4 * sizeof(axes[0]));
	return t;
}

struct loom_tensor *loom_permute(loom_ctx_t *ctx, struct loom_tensor *a,
				 int axis0, int axis1, int axis2, int axis3)
{
	const int axes[4] = { axis0, axis1, axis2, axis3 };

	return permute(ctx, LOOM_OP_PERMUTE, a, axes);
}

struct loom_tensor *loom_transpose(loom_ctx_t *ctx, struct loom_tensor *a)
{
	const int axes[4] = { 1, 0, 2, 3 };

	return permute(ctx, LOOM_OP_TRANSPOSE, a, axes);
}
