/* SPDX-License-Identifier: MIT */
/* tensor.c - contexts (arenas of tensor descriptors, with their last error
 * message), new tensors, and the shape and name helpers of loom.h.  Op
 * constructors live in ops.c, graphs in graph.c. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom-private.h"

#define CTX_ERROR_MAX 512
#define CHUNK_FIRST 64
#define CHUNK_MAX 4096

/* A descriptor and the link to the next one made in the same context.
 * The descriptor comes first, so a tensor pointer is a record pointer. */
struct tensor_rec {
	struct loom_tensor t;
	struct tensor_rec *next;
};

/* Descriptors are carved from chunks that never move. */
struct chunk {
	struct chunk *next;
	size_t used;
	size_t cap;
	struct tensor_rec recs[];
};

struct loom_ctx {
	size_t max_tensors; /* 0: no limit */
	size_t n_tensors;
	struct chunk *chunks; /* newest first */
	struct tensor_rec *first;
	struct tensor_rec *last;

	loom_graph_t **graphs;
	size_t n_graphs;
	size_t cap_graphs;

	char error[CTX_ERROR_MAX];
};

int loom__ctx_errorf(loom_ctx_t *ctx, int status, const char *fmt, ...)
{
	char msg[CTX_ERROR_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (loom__handle_live(ctx, LOOM__KIND_CTX))
		memcpy(ctx->error, msg, sizeof(msg));
	return loom_error_set(status, "%s", msg);
}

int loom_ctx_new(size_t max_tensors, loom_ctx_t **out)
{
	loom_ctx_t *ctx;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_ctx_new: out is NULL");
	*out = NULL;
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx)
		return loom_error_set(LOOM_E_NOMEM,
				      "loom_ctx_new: out of memory");
	ctx->max_tensors = max_tensors;
	if (loom__handle_add(ctx, LOOM__KIND_CTX)) {
		free(ctx);
		return LOOM_E_NOMEM;
	}
	*out = ctx;
	return LOOM_OK;
}

void loom_ctx_free(loom_ctx_t *ctx)
{
	struct chunk *c, *next;

	if (!ctx)
		return;
	if (!loom__handle_take(ctx, LOOM__KIND_CTX)) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_ctx_free: %p is not a live context "
			       "(freed already?)",
			       (void *)ctx);
		return;
	}
	for (size_t i = 0; i < ctx->n_graphs; i++)
		loom__graph_free(ctx->graphs[i]);
	free(ctx->graphs);
	for (c = ctx->chunks; c; c = next) {
		next = c->next;
		free(c);
	}
	free(ctx);
}

const char *loom_ctx_error(const loom_ctx_t *ctx)
{
	return loom__handle_live(ctx, LOOM__KIND_CTX) ? ctx->error : "";
}

void loom_ctx_clear_error(loom_ctx_t *ctx)
{
	if (loom__handle_live(ctx, LOOM__KIND_CTX))
		ctx->error[0] = '\0';
}

int loom__ctx_own_graph(loom_ctx_t *ctx, loom_graph_t *g)
{
	if (ctx->n_graphs == ctx->cap_graphs) {
		size_t cap = ctx->cap_graphs ? 2 * ctx->cap_graphs : 4;
		loom_graph_t **graphs;

		graphs = realloc(ctx->graphs, cap * sizeof(*graphs));
		if (!graphs)
			return loom__ctx_errorf(ctx, LOOM_E_NOMEM,
						"graph: out of memory");
		ctx->graphs = graphs;
		ctx->cap_graphs = cap;
	}
	ctx->graphs[ctx->n_graphs++] = g;
	return LOOM_OK;
}

/* Takes a zeroed descriptor from the newest chunk, adding a chunk (twice
 * the last, up to CHUNK_MAX, never past max_tensors) when it is full. */
static struct loom_tensor *ctx_alloc_tensor(loom_ctx_t *ctx, const char *who)
{
	struct chunk *c;
	struct tensor_rec *rec;

	if (!loom__handle_live(ctx, LOOM__KIND_CTX)) {
		loom_error_set(LOOM_E_INVAL, "%s: no live context", who);
		return NULL;
	}
	c = ctx->chunks;
	if (ctx->max_tensors && ctx->n_tensors >= ctx->max_tensors) {
		loom__ctx_errorf(ctx, LOOM_E_NOMEM,
				 "%s: context is full (%zu tensors)", who,
				 ctx->max_tensors);
		return NULL;
	}
	if (!c || c->used == c->cap) {
		size_t cap = c ? 2 * c->cap : CHUNK_FIRST;

		if (cap > CHUNK_MAX)
			cap = CHUNK_MAX;
		if (ctx->max_tensors && cap > ctx->max_tensors - ctx->n_tensors)
			cap = ctx->max_tensors - ctx->n_tensors;
		c = malloc(sizeof(*c) + cap * sizeof(c->recs[0]));
		if (!c) {
			loom__ctx_errorf(ctx, LOOM_E_NOMEM,
					 "%s: out of memory", who);
			return NULL;
		}
		c->used = 0;
		c->cap = cap;
		c->next = ctx->chunks;
		ctx->chunks = c;
	}
	rec = &c->recs[c->used++];
	memset(rec, 0, sizeof(*rec));
	if (ctx->last)
		ctx->last->next = rec;
	else
		ctx->first = rec;
	ctx->last = rec;
	ctx->n_tensors++;
	return &rec->t;
}

struct loom_tensor *loom_ctx_first_tensor(loom_ctx_t *ctx)
{
	if (!loom__handle_live(ctx, LOOM__KIND_CTX))
		return NULL;
	return ctx->first ? &ctx->first->t : NULL;
}

struct loom_tensor *loom_ctx_next_tensor(loom_ctx_t *ctx,
					 struct loom_tensor *t)
{
	struct tensor_rec *rec = (struct tensor_rec *)t;

	(void)ctx;
	return t && rec->next ? &rec->next->t : NULL;
}

struct loom_tensor *loom_ctx_get_tensor(loom_ctx_t *ctx, const char *name)
{
	if (!ctx || !name)
		return NULL;
	for (struct tensor_rec *r = ctx->first; r; r = r->next)
		if (strcmp(r->t.name, name) == 0)
			return &r->t;
	return NULL;
}

size_t loom_ctx_n_tensors(const loom_ctx_t *ctx)
{
	return ctx ? ctx->n_tensors : 0;
}

/* ------------------------------------------------------------------------
 * New tensors.
 */
void loom__tensor_set_contiguous(struct loom_tensor *t)
{
	t->nb[0] = loom_type_size(t->type);
	t->nb[1] = loom_type_row_size(t->type, t->ne[0]);
	for (int i = 2; i < LOOM_MAX_DIMS; i++)
		t->nb[i] = t->nb[i - 1] * (size_t)t->ne[i - 1];
}

char *loom__tensor_desc(const struct loom_tensor *t, char *buf, size_t n)
{
	if (!t)
		snprintf(buf, n, "NULL");
	else
		snprintf(buf, n, "[%lld, %lld, %lld, %lld] %s",
			 (long long)t->ne[0], (long long)t->ne[1],
			 (long long)t->ne[2], (long long)t->ne[3],
			 loom_type_name(t->type));
	return buf;
}

/* Checks a type and sizes: known type, no negative size, dimension 0 a
 * whole number of blocks, and an element count and a byte size that fit
 * in an int64_t (so loom_tensor_n_elements() and loom_tensor_n_bytes() cannot overflow). */
int loom__tensor_check_shape(loom_ctx_t *ctx, const char *who,
			     enum loom_type type,
			     const int64_t ne[LOOM_MAX_DIMS])
{
	int64_t count = 1;
	size_t bytes;
	bool big;

	if ((unsigned)type >= LOOM_TYPE_COUNT)
		return loom__ctx_errorf(ctx, LOOM_E_INVAL,
					"%s: invalid type %d", who, (int)type);
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (ne[i] < 0)
			return loom__ctx_errorf(ctx, LOOM_E_INVAL,
						"%s: negative size ne%d = %lld",
						who, i, (long long)ne[i]);
	if (ne[0] % loom_type_block_size(type))
		return loom__ctx_errorf(ctx, LOOM_E_INVAL,
					"%s: ne0 = %lld is not a multiple of "
					"the %s block size %lld",
					who, (long long)ne[0],
					loom_type_name(type),
					(long long)loom_type_block_size(type));
	/* loom_type_row_size() is 0 for a row too large for a size_t. */
	bytes = loom_type_row_size(type, ne[0]);
	big = ne[0] > 0 && bytes == 0;
	for (int i = 0; i < LOOM_MAX_DIMS && !big; i++)
		big = __builtin_mul_overflow(count, ne[i], &count) ||
		      (i > 0 && __builtin_mul_overflow(bytes, (size_t)ne[i],
						       &bytes)) ||
		      bytes > (size_t)INT64_MAX;
	if (big)
		return loom__ctx_errorf(ctx, LOOM_E_INVAL,
					"%s: [%lld, %lld, %lld, %lld] is too "
					"large",
					who, (long long)ne[0], (long long)ne[1],
					(long long)ne[2], (long long)ne[3]);
	return LOOM_OK;
}

struct loom_tensor *loom__new_tensor(loom_ctx_t *ctx, const char *who,
				     enum loom_type type,
				     const int64_t ne[LOOM_MAX_DIMS])
{
	struct loom_tensor *t;

	if (loom__tensor_check_shape(ctx, who, type, ne))
		return NULL;
	t = ctx_alloc_tensor(ctx, who);
	if (!t)
		return NULL;
	t->type = type;
	t->op = LOOM_OP_NONE;
	memcpy(t->ne, ne, sizeof(t->ne));
	loom__tensor_set_contiguous(t);
	return t;
}

struct loom_tensor *loom_tensor_new(loom_ctx_t *ctx, enum loom_type type,
				    int n_dims, const int64_t *ne)
{
	int64_t dims[LOOM_MAX_DIMS] = { 1, 1, 1, 1 };

	if (!ctx) {
		loom_error_set(LOOM_E_INVAL, "loom_tensor_new: ctx is NULL");
		return NULL;
	}
	if (n_dims < 1 || n_dims > LOOM_MAX_DIMS || !ne) {
		loom__ctx_errorf(ctx, LOOM_E_INVAL,
				 "loom_tensor_new: n_dims %d (1..%d) or ne "
				 "NULL", n_dims, LOOM_MAX_DIMS);
		return NULL;
	}
	memcpy(dims, ne, (size_t)n_dims * sizeof(*ne));
	return loom__new_tensor(ctx, "loom_tensor_new", type, dims);
}

struct loom_tensor *loom_tensor_new_1d(loom_ctx_t *ctx, enum loom_type type,
				       int64_t ne0)
{
	return loom_tensor_new(ctx, type, 1, &ne0);
}

struct loom_tensor *loom_tensor_new_2d(loom_ctx_t *ctx, enum loom_type type,
				       int64_t ne0, int64_t ne1)
{
	const int64_t ne[] = { ne0, ne1 };

	return loom_tensor_new(ctx, type, 2, ne);
}

struct loom_tensor *loom_tensor_new_3d(loom_ctx_t *ctx, enum loom_type type,
				       int64_t ne0, int64_t ne1, int64_t ne2)
{
	const int64_t ne[] = { ne0, ne1, ne2 };

	return loom_tensor_new(ctx, type, 3, ne);
}

struct loom_tensor *loom_tensor_new_4d(loom_ctx_t *ctx, enum loom_type type,
				       int64_t ne0, int64_t ne1, int64_t ne2,
				       int64_t ne3)
{
	const int64_t ne[] = { ne0, ne1, ne2, ne3 };

	return loom_tensor_new(ctx, type, 4, ne);
}

struct loom_tensor *loom_tensor_dup(loom_ctx_t *ctx,
				    const struct loom_tensor *t)
{
	if (!ctx || !t) {
		loom__ctx_errorf(ctx, LOOM_E_INVAL,
				 "loom_tensor_dup: NULL %s",
				 ctx ? "tensor" : "ctx");
		return NULL;
	}
	return loom__new_tensor(ctx, "loom_tensor_dup", t->type, t->ne);
}

/* A raw node: only the op, the type and the sizes are checked.  Results of
 * view and in-place ops view the source the table of ops names, as the checked
 * constructors' do, so that allocators treat them alike. */
struct loom_tensor *loom_tensor_new_op(loom_ctx_t *ctx, enum loom_op op,
				       enum loom_type type,
				       const int64_t ne[LOOM_MAX_DIMS],
				       struct loom_tensor *const *srcs,
				       const int32_t *params)
{
	struct loom_tensor *t, *dst = NULL;

	if (!ctx || !ne) {
		loom__ctx_errorf(ctx, LOOM_E_INVAL,
				 "loom_tensor_new_op: NULL %s",
				 ctx ? "ne" : "ctx");
		return NULL;
	}
	if ((unsigned)op >= LOOM_OP_COUNT) {
		loom__ctx_errorf(ctx, LOOM_E_INVAL,
				 "loom_tensor_new_op: invalid op %d", (int)op);
		return NULL;
	}
	if (loom_op_target_src(op) >= 0)
		dst = srcs ? srcs[loom_op_target_src(op)] : NULL;
	if (!dst && loom_op_target_src(op) >= 0) {
		/* Without it the result would own memory it only views. */
		loom__ctx_errorf(ctx, LOOM_E_INVAL,
				 "loom_tensor_new_op: %s needs the tensor it "
				 "views or writes as a source",
				 loom_op_name(op));
		return NULL;
	}
	t = loom__new_tensor(ctx, "loom_tensor_new_op", type, ne);
	if (!t)
		return NULL;
	t->op = op;
	if (srcs)
		memcpy(t->src, srcs, sizeof(t->src));
	if (params)
		memcpy(t->op_params, params, sizeof(t->op_params));
	if (dst) {
		t->view_src = loom__owner(dst);
		t->view_offs = dst->view_offs;
	}
	return t;
}

/* ------------------------------------------------------------------------
 * Shapes.
 */
int64_t loom_tensor_n_elements(const struct loom_tensor *t)
{
	if (!t)
		return 0;
	return t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3];
}

int64_t loom_tensor_n_rows(const struct loom_tensor *t)
{
	if (!t)
		return 0;
	return t->ne[1] * t->ne[2] * t->ne[3];
}

/* The last byte is at the sum of (ne[i] - 1) * nb[i] (for quantized
 * types, dimension 0 counts whole blocks).  Strides a caller chose may be
 * huge: a span that does not fit gives SIZE_MAX, which no buffer holds, so
 * every bounds check that uses it fails. */
size_t loom_tensor_n_bytes(const struct loom_tensor *t)
{
	int64_t blck;
	size_t bytes, step;
	bool big;

	if (!t)
		return 0;
	blck = loom_type_block_size(t->type);
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (t->ne[i] <= 0)
			return 0;
	if (blck <= 1) {
		bytes = loom_type_size(t->type);
		big = __builtin_mul_overflow((size_t)(t->ne[0] - 1), t->nb[0],
					     &step) ||
		      __builtin_add_overflow(bytes, step, &bytes);
	} else {
		big = __builtin_mul_overflow((size_t)(t->ne[0] / blck),
					     t->nb[0], &bytes);
	}
	for (int i = 1; i < LOOM_MAX_DIMS && !big; i++)
		big = __builtin_mul_overflow((size_t)(t->ne[i] - 1), t->nb[i],
					     &step) ||
		      __builtin_add_overflow(bytes, step, &bytes);
	return big ? SIZE_MAX : bytes;
}

/* Dimensions of size one may have any stride. */
bool loom_tensor_is_contiguous(const struct loom_tensor *t)
{
	size_t next;

	if (!t)
		return false;
	next = loom_type_size(t->type);
	if (t->nb[0] != next)
		return false;
	next = loom_type_row_size(t->type, t->ne[0]);
	for (int i = 1; i < LOOM_MAX_DIMS; i++) {
		if (t->ne[i] != 1 && t->nb[i] != next)
			return false;
		next *= (size_t)t->ne[i];
	}
	return true;
}

bool loom_tensor_same_shape(const struct loom_tensor *a,
			 const struct loom_tensor *b)
{
	if (!a || !b)
		return false;
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (a->ne[i] != b->ne[i])
			return false;
	return true;
}

bool loom_tensor_can_repeat(const struct loom_tensor *b, const struct loom_tensor *a)
{
	if (!a || !b)
		return false;
	for (int i = 0; i < LOOM_MAX_DIMS; i++) {
		if (b->ne[i] == 0) {
			if (a->ne[i] != 0)
				return false;
		} else if (a->ne[i] % b->ne[i] != 0) {
			return false;
		}
	}
	return true;
}

int loom_tensor_n_dims(const struct loom_tensor *t)
{
	if (!t)
		return 0;
	for (int i = LOOM_MAX_DIMS - 1; i >= 1; i--)
		if (t->ne[i] != 1)
			return i + 1;
	return 1;
}

/* ------------------------------------------------------------------------
 * Names, flags, op parameters.
 */
void loom_tensor_set_name(struct loom_tensor *t, const char *name)
{
	if (!t)
		return;
	snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
}

struct loom_tensor *loom_tensor_set_name_fmt(struct loom_tensor *t, const char *fmt,
				      ...)
{
	va_list ap;

	if (!t || !fmt)
		return t;
	va_start(ap, fmt);
	vsnprintf(t->name, sizeof(t->name), fmt, ap);
	va_end(ap);
	return t;
}

/* Adds flags to t (flags already set stay set). */
void loom_tensor_set_flags(struct loom_tensor *t, uint32_t flags)
{
	if (t)
		t->flags |= flags;
}

float loom_tensor_op_param_f32(const struct loom_tensor *t, int i)
{
	float f;

	if (!t || i < 0 || i >= LOOM_MAX_OP_PARAMS)
		return 0.0f;
	memcpy(&f, &t->op_params[i], sizeof(f));
	return f;
}

int32_t loom_tensor_op_param_i32(const struct loom_tensor *t, int i)
{
	if (!t || i < 0 || i >= LOOM_MAX_OP_PARAMS)
		return 0;
	return t->op_params[i];
}
