/* SPDX-License-Identifier: MIT */
/* sched.c - one graph over several backends: each node goes to a backend,
 * the graph is cut into pieces of consecutive nodes on one backend, the
 * inputs a piece reads from another device are copied once per compute
 * and destination backend, and each backend's memory for all its pieces
 * comes from one graph allocator of its own.  Plans are kept per graph
 * shape, so a graph built again the same way is not planned again.
 *
 * The caller's graph is never edited: each piece runs on shadows of the
 * caller's nodes (copies of their descriptors whose sources are the
 * plan's own tensors), the caller's leaves are read through proxies, and
 * the caller's tensors are placed where their shadows and proxies are, so
 * results are read from them as after any compute.  Because a plan names
 * no tensor of the caller's, it serves any graph of the same shape.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend-private.h"
#include "loom-private.h"

#include <loom/loom-plugin.h>

/* Plans kept, the least recently used one going first. */
#define SCHED_PLANS 4

/* An input copied into a backend's memory before a piece runs. */
struct sched_copy {
	struct loom_tensor *from; /* the plan's tensor holding the data */
	struct loom_tensor *to;   /* in the destination backend's memory */
	int src_be;    /* backend whose compute memory holds from; -1: none */
	int src_piece; /* piece that computes from; -1: ready at the start */
	int piece;     /* the first piece that reads to */
};

struct sched_piece {
	int be;                 /* index into the scheduler's backends */
	loom_graph_t *g;        /* what the backend computes */
	size_t copy0, n_copies; /* its input copies in plan.copies */
	loom_event_t *done;     /* after its compute (devices with events) */
	loom_event_t *copied;   /* after its asynchronous input copies */
};

/* A tensor of the caller's graph the plan stands in for: a leaf read
 * through a proxy, or a node the caller placed itself. */
struct sched_ext {
	struct loom_tensor *t; /* the proxy, or the node's shadow */
	size_t index;          /* among the graph's leaves, or nodes */
	bool node;
};

struct sched_plan {
	uint64_t *key;          /* the shape it was made for */
	size_t n_key;
	loom_graph_t *g;        /* the graph it is bound to, and its version */
	uint64_t version;
	uint64_t used;          /* for least-recently-used eviction */
	loom_ctx_t *ctx;        /* shadows, proxies, copies */
	size_t n_nodes;
	struct loom_tensor **shadow; /* per node; NULL for views */
	int *node_be;                /* per node; -1 for views */
	struct sched_piece *pieces;
	size_t n_pieces;
	struct sched_copy *copies;
	size_t n_copies, cap_copies;
	bool *issued;                /* per copy, during a compute */
	struct sched_ext *ext;
	size_t n_ext, cap_ext;
	loom_graph_t **alloc_g;      /* per backend: its memory plan */
	size_t copy_bytes;
};

struct loom_sched {
	loom_backend_t **be;
	size_t n_be;
	loom_galloc_t **ga;          /* per backend, shared by the plans */
	struct sched_plan *plans[SCHED_PLANS];
	struct sched_plan *cur;      /* the one placed in the allocators */
	bool callers_placed;         /* and its graph's tensors where it is */
	uint64_t tick;
	struct loom__ptrmap leaves;  /* leaf -> index + 1, of the last key */
	uint64_t *key;               /* the last graph's shape */
	size_t n_key, cap_key;
	/* During a compute, per backend: the last piece launched, the last
	 * known to be done, and an event to wait for before the next. */
	int *launched, *finished;
	loom_event_t **guard;
	struct loom_sched_stats st;
	bool debug;
	bool busy; /* a reserve, alloc or compute is under way (atomic) */
};

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static loom_dev_t *dev_of(const loom_sched_t *s, int j)
{
	return loom_backend_device(s->be[j]);
}

/* ------------------------------------------------------------------------
 * Plans.
 */
static void plan_free(struct sched_plan *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->n_pieces; i++) {
		loom_event_free(p->pieces[i].done);
		loom_event_free(p->pieces[i].copied);
	}
	loom_ctx_free(p->ctx);
	free(p->key);
	free(p->shadow);
	free(p->node_be);
	free(p->pieces);
	free(p->copies);
	free(p->issued);
	free(p->ext);
	free(p->alloc_g);
	free(p);
}

static void destroy(loom_sched_t *s);

int loom_sched_new(loom_backend_t *const *backends, size_t n,
		   loom_sched_t **out)
{
	const char *dbg = loom_env_get("LOOM_SCHED_DEBUG");
	loom_sched_t *s;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL, "loom_sched_new: out is "
				      "NULL");
	*out = NULL;
	if (!backends || n == 0)
		return loom_error_set(LOOM_E_INVAL, "loom_sched_new: no "
				      "backends");
	for (size_t i = 0; i < n; i++) {
		if (!loom_backend_device(backends[i]))
			return loom_error_set(LOOM_E_INVAL, "loom_sched_new: "
					      "backend %zu is not a live "
					      "backend", i);
		for (size_t k = 0; k < i; k++)
			if (backends[k] == backends[i])
				return loom_error_set(
					LOOM_E_INVAL, "loom_sched_new: backend "
					"%zu ('%s') is also backend %zu", i,
					loom_backend_name(backends[i]), k);
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	s->be = malloc(n * sizeof(*s->be));
	s->ga = calloc(n, sizeof(*s->ga));
	s->launched = calloc(n, sizeof(*s->launched));
	s->finished = calloc(n, sizeof(*s->finished));
	s->guard = calloc(n, sizeof(*s->guard));
	if (!s->be || !s->ga || !s->launched || !s->finished || !s->guard) {
		st = loom_error_set(LOOM_E_NOMEM, "out of memory");
		goto err_free;
	}
	memcpy(s->be, backends, n * sizeof(*s->be));
	s->n_be = n;
	for (size_t j = 0; j < n; j++) {
		st = loom_galloc_new(loom_dev_buffer_type(dev_of(s, (int)j)),
				     &s->ga[j]);
		if (st)
			goto err_free;
	}
	s->debug = dbg && *dbg && strcmp(dbg, "0") != 0;
	st = loom__handle_add(s, LOOM__KIND_SCHED);
	if (st)
		goto err_free;
	*out = s;
	return LOOM_OK;

err_free:
	destroy(s);
	return st;
}

static bool live(const loom_sched_t *s)
{
	return loom__handle_live(s, LOOM__KIND_SCHED);
}

void loom_sched_free(loom_sched_t *s)
{
	if (!s)
		return;
	if (!live(s)) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_sched_free: %p is not a live scheduler "
			       "(freed already?)",
			       (void *)s);
		return;
	}
	/* Claimed for good: a call under way on another thread refuses
	 * the free. */
	if (!loom__claim(&s->busy)) {
		loom_error_set(LOOM_E_BUSY, "loom_sched_free: the scheduler "
			       "is busy with a call on another thread");
		return;
	}
	loom__handle_take(s, LOOM__KIND_SCHED);
	destroy(s);
}

static void destroy(loom_sched_t *s)
{
	for (int k = 0; k < SCHED_PLANS; k++)
		plan_free(s->plans[k]);
	for (size_t j = 0; s->ga && j < s->n_be; j++)
		loom_galloc_free(s->ga[j]);
	loom__ptrmap_free(&s->leaves);
	free(s->key);
	free(s->be);
	free(s->ga);
	free(s->launched);
	free(s->finished);
	free(s->guard);
	free(s);
}

/* ------------------------------------------------------------------------
 * Where tensors are.
 */

/* True when buf is compute memory of this scheduler's allocators. */
static bool ours(const loom_sched_t *s, const loom_buffer_t *buf)
{
	for (size_t j = 0; j < s->n_be; j++)
		if (loom__galloc_owns(s->ga[j], buf))
			return true;
	return false;
}

/* True when t's memory is the caller's (weights, caches, a buffer the
 * application placed it in), not ours to place.  A tensor in a freed
 * buffer is not placed. */
static bool caller_placed(const loom_sched_t *s, struct loom_tensor *t)
{
	struct loom_tensor *o = loom__owner(t);

	return o->data && loom__buffer_live(o->buffer) && !ours(s, o->buffer);
}

/* The backend whose device holds t's memory (placed by the caller), or
 * -1: the device whose own memory it is, else one that can use it. */
static int placed_on(const loom_sched_t *s, struct loom_tensor *t)
{
	struct loom_tensor *o = loom__owner(t);
	loom_buffer_type_t *buft;

	if (!caller_placed(s, o))
		return -1;
	buft = loom_buffer_get_type(o->buffer);
	for (size_t j = 0; j < s->n_be; j++)
		if (loom_dev_buffer_type(dev_of(s, (int)j)) == buft)
			return (int)j;
	for (size_t j = 0; j < s->n_be; j++)
		if (loom_dev_supports_buft(dev_of(s, (int)j), buft))
			return (int)j;
	return -1;
}

static bool is_weight(const loom_sched_t *s, struct loom_tensor *t)
{
	struct loom_tensor *o = loom__owner(t);

	return caller_placed(s, o) &&
	       ((o->flags & LOOM_TENSOR_WEIGHT) ||
		loom_buffer_usage(o->buffer) == LOOM_BUFFER_USAGE_WEIGHTS);
}

/* An op that only reinterprets its source, as opposed to one whose result
 * is a view of the tensor it writes (copy, set_rows). */
static bool pure_view(const struct loom_tensor *t)
{
	return loom_op_is_view(t->op);
}

/* ------------------------------------------------------------------------
 * The shape of a graph: every field planning reads, with sources named by
 * position, so that two graphs built the same way have the same key.
 */
static int key_push(loom_sched_t *s, uint64_t w)
{
	if (s->n_key == s->cap_key) {
		size_t cap = s->cap_key ? 2 * s->cap_key : 1024;
		uint64_t *k = realloc(s->key, cap * sizeof(*k));

		if (!k)
			return LOOM_E_NOMEM;
		s->key = k;
		s->cap_key = cap;
	}
	s->key[s->n_key++] = w;
	return LOOM_OK;
}

/* Where a caller's tensor is, as a plan sees it: not placed (or placed by
 * us, which is the same), or in a buffer of some type and usage. */
static int key_place(loom_sched_t *s, struct loom_tensor *t)
{
	struct loom_tensor *o = loom__owner(t);

	if (!caller_placed(s, o))
		return key_push(s, 0);
	return key_push(s, (uint64_t)(uintptr_t)loom_buffer_get_type(
					   o->buffer)) ||
	       key_push(s, (uint64_t)loom_buffer_usage(o->buffer) + 1);
}

static int key_tensor(loom_sched_t *s, const struct loom_tensor *t)
{
	int st = key_push(s, (uint64_t)t->type | (uint64_t)t->op << 16 |
			     (uint64_t)t->flags << 32);

	for (int d = 0; !st && d < LOOM_MAX_DIMS; d++)
		st = key_push(s, (uint64_t)t->ne[d]) ||
		     key_push(s, (uint64_t)t->nb[d]);
	for (int k = 0; !st && k < LOOM_MAX_OP_PARAMS; k += 2)
		st = key_push(s, (uint64_t)(uint32_t)t->op_params[k] |
				 (uint64_t)(uint32_t)t->op_params[k + 1]
					 << 32);
	return st ? st : key_push(s, (uint64_t)t->view_offs);
}

/* A source as a word: 0 none, 2i+1 node i, 2j+2 leaf j. */
static int key_ref(loom_sched_t *s, loom_graph_t *g, struct loom_tensor *x,
		   uint64_t *out)
{
	long i;
	int *j;

	*out = 0;
	if (!x)
		return LOOM_OK;
	i = loom__graph_find(g, x);
	if (i >= 0) {
		*out = 2 * (uint64_t)i + 1;
		return LOOM_OK;
	}
	j = loom__ptrmap_find(&s->leaves, x);
	if (!j)
		return loom_error_set(LOOM_E_INVAL, "loom_sched: node reads "
				      "'%s', which is not in the graph",
				      x->name);
	*out = 2 * (uint64_t)(*j - 1) + 2;
	return LOOM_OK;
}

/* Fills s->key with g's shape and s->leaves with its leaves' indices. */
static int make_key(loom_sched_t *s, loom_graph_t *g)
{
	size_t n = loom_graph_n_nodes(g), nl = loom_graph_n_leaves(g);
	int st = LOOM_OK;

	s->n_key = 0;
	loom__ptrmap_clear(&s->leaves);
	st = key_push(s, n) || key_push(s, nl) ? LOOM_E_NOMEM : LOOM_OK;
	for (size_t j = 0; !st && j < nl; j++) {
		struct loom_tensor *t = loom_graph_leaf(g, j);

		st = loom__ptrmap_put(&s->leaves, t, (int)j + 1);
		if (!st)
			st = key_tensor(s, t);
		if (!st)
			st = key_place(s, t);
	}
	for (size_t i = 0; !st && i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);
		uint64_t w;

		st = key_tensor(s, t);
		for (int k = 0; !st && k < LOOM__N_INPUTS; k++) {
			st = key_ref(s, g, loom__tensor_input(t, k), &w);
			if (!st)
				st = key_push(s, w);
		}
		/* A node the caller placed is a fact of the shape too. */
		if (!st && !t->view_src)
			st = key_place(s, t);
	}
	if (st == LOOM_E_NOMEM)
		return loom_error_set(st, "loom_sched: out of memory");
	return st;
}

/* ------------------------------------------------------------------------
 * Planning: assignment, then pieces, shadows, proxies and copies.
 */
struct build {
	loom_sched_t *s;
	struct sched_plan *p;
	loom_graph_t *g;
	uint8_t *sup;                /* per node and backend: 0 unknown, 1 no,
				      * 2 yes */
	int *node_piece;
	struct loom__ptrmap *memo;   /* per piece: caller tensor -> made */
	struct loom__ptrmap *copied; /* per backend: caller tensor -> made */
	struct loom__ptrmap leaf_be; /* unplaced leaf -> its backend + 1 */
	struct loom__ptrmap proxy;   /* leaf -> made */
	struct loom__ptrmap is_copy; /* copies' tensors */
	struct loom_tensor **made;
	size_t n_made, cap_made;
	int st;                      /* the first failure */
};

/* supports_op of node i on backend j, asked once per plan. */
static bool supports(struct build *b, size_t i, int j)
{
	uint8_t *v = &b->sup[i * b->s->n_be + (size_t)j];

	if (!*v) {
		*v = loom_backend_supports_op(b->s->be[j],
					      loom_graph_node(b->g, i)) ? 2 : 1;
		b->s->st.n_supports_op++;
	}
	return *v == 2;
}

static long node_index(const struct build *b, const struct loom_tensor *t)
{
	return loom__graph_find(b->g, t);
}

/* The tensor whose memory x is, past views computed by the graph. */
static struct loom_tensor *past_views(const struct build *b,
				      struct loom_tensor *x)
{
	while (x && pure_view(x) && node_index(b, x) >= 0 && x->view_src)
		x = x->view_src;
	return x;
}

/* True when backend j can read x where it is now, with no copy. */
static bool readable(const struct build *b, struct loom_tensor *x, int j)
{
	long i;

	x = past_views(b, x);
	if (!x)
		return true;
	i = node_index(b, x);
	if (i >= 0)
		return b->p->node_be[i] == j;
	if (!caller_placed(b->s, x))
		return true; /* placed with the backend that reads it first */
	return loom_dev_supports_buft(dev_of(b->s, j), loom_buffer_get_type(
					      loom__owner(x)->buffer));
}

static int unsupported(struct build *b, const struct loom_tensor *t,
		       const char *why)
{
	return loom_error_set(LOOM_E_UNSUPPORTED, "loom_sched: no backend "
			      "runs node '%s' (%s)%s", t->name,
			      loom_op_name(t->op), why);
}

/* Node i's backend when it writes into another tensor: where that tensor
 * is; -2 when it may go anywhere, -1 with the error set when nothing can
 * run it there. */
static int assign_writer(struct build *b, size_t i, const char **why)
{
	struct loom_tensor *t = loom_graph_node(b->g, i);
	struct loom_tensor *d = past_views(b, t->view_src);
	long k = node_index(b, d);
	int j0;

	if (k >= 0) {
		int j = b->p->node_be[k];

		if (j >= 0 && supports(b, i, j)) {
			*why = "writes into a result of this backend";
			return j;
		}
		b->st = unsupported(b, t, " where the tensor it writes is");
		return -1;
	}
	if (!caller_placed(b->s, d))
		return -2;
	j0 = placed_on(b->s, d);
	if (j0 >= 0 && supports(b, i, j0)) {
		*why = "writes into memory of this device";
		return j0;
	}
	for (size_t j = 0; j < b->s->n_be; j++)
		if (readable(b, d, (int)j) && supports(b, i, (int)j)) {
			*why = "writes into memory this device can use";
			return (int)j;
		}
	b->st = loom_error_set(LOOM_E_UNSUPPORTED, "loom_sched: no backend "
			       "runs node '%s' (%s) in the memory of '%s', "
			       "which it writes", t->name, loom_op_name(t->op),
			       loom__owner(d)->name);
	return -1;
}

/* Bytes of t's inputs backend j reads in place. */
static size_t bytes_here(const struct build *b, struct loom_tensor *t, int j)
{
	size_t sum = 0;

	for (int k = 0; k < LOOM__N_INPUTS; k++) {
		struct loom_tensor *x = loom__tensor_input(t, k);

		if (x && readable(b, x, j))
			sum += loom_tensor_n_bytes(x);
	}
	return sum;
}

/* Chooses node i's backend (prev: the last node's); *why says which rule
 * decided.  -1 with b->st set when none can run it. */
static int assign(struct build *b, size_t i, int prev, const char **why)
{
	struct loom_tensor *t = loom_graph_node(b->g, i);
	size_t best_bytes = 0;
	int best = -1;

	if (t->view_src) {
		int j = assign_writer(b, i, why);

		if (j != -2)
			return j;
	}
	/* A node that uses a weight runs where the weight lives. */
	for (int k = 0; k < LOOM_MAX_SRC; k++) {
		struct loom_tensor *x = past_views(b, t->src[k]);
		int j;

		if (!x || node_index(b, x) >= 0 || !is_weight(b->s, x))
			continue;
		j = placed_on(b->s, x);
		if (j >= 0 && supports(b, i, j)) {
			*why = "uses a weight of this device";
			return j;
		}
	}
	/* Else the first that supports it and reads every input in place. */
	for (size_t j = 0; j < b->s->n_be; j++) {
		bool all = true;

		if (!supports(b, i, (int)j))
			continue;
		for (int k = 0; k < LOOM__N_INPUTS && all; k++)
			all = readable(b, loom__tensor_input(t, k), (int)j);
		if (all) {
			*why = "first that supports it and reads its inputs";
			return (int)j;
		}
	}
	/* Else the one that holds most of its inputs; on a tie the last
	 * node's backend (no new piece), then the first in the list. */
	for (size_t j = 0; j < b->s->n_be; j++) {
		size_t n;

		if (!supports(b, i, (int)j))
			continue;
		n = bytes_here(b, t, (int)j);
		if (best < 0 || n > best_bytes ||
		    (n == best_bytes && (int)j == prev && best != prev)) {
			best = (int)j;
			best_bytes = n;
		}
	}
	if (best >= 0) {
		*why = "holds most of its inputs (others copied)";
		return best;
	}
	b->st = unsupported(b, t, "");
	return -1;
}

static struct loom_tensor *made_put(struct build *b, struct loom__ptrmap *m,
				    const struct loom_tensor *x,
				    struct loom_tensor *to)
{
	if (!to)
		return NULL;
	if (b->n_made == b->cap_made) {
		size_t cap = b->cap_made ? 2 * b->cap_made : 256;
		struct loom_tensor **v = realloc(b->made, cap * sizeof(*v));

		if (!v)
			return NULL;
		b->made = v;
		b->cap_made = cap;
	}
	b->made[b->n_made] = to;
	if (loom__ptrmap_put(m, x, (int)b->n_made++))
		return NULL;
	return to;
}

static struct loom_tensor *made_get(struct build *b,
				    const struct loom__ptrmap *m,
				    const struct loom_tensor *x)
{
	int *v = loom__ptrmap_find(m, x);

	return v ? b->made[*v] : NULL;
}

/* A descriptor like t's in the plan's context: same type, shape,
 * strides, op and parameters, not placed, sources left to the caller. */
static struct loom_tensor *clone(struct sched_plan *p,
				 const struct loom_tensor *t)
{
	struct loom_tensor *c = loom_tensor_new(p->ctx, t->type, 4, t->ne);

	if (!c)
		return NULL;
	c->op = t->op;
	c->flags = t->flags;
	memcpy(c->nb, t->nb, sizeof(c->nb));
	memcpy(c->op_params, t->op_params, sizeof(c->op_params));
	c->view_offs = t->view_offs;
	memcpy(c->name, t->name, sizeof(c->name));
	return c;
}

/* A tensor of t's type, shape and strides that owns its memory. */
static struct loom_tensor *clone_leaf(struct sched_plan *p,
				      const struct loom_tensor *t)
{
	struct loom_tensor *c = clone(p, t);

	if (c) {
		c->op = LOOM_OP_NONE;
		c->view_offs = 0;
		memset(c->op_params, 0, sizeof(c->op_params));
	}
	return c;
}

static int add_to(struct build *b, loom_graph_t *g, struct loom_tensor *t)
{
	int st = loom_graph_add_node(g, t);

	if (st && !b->st)
		b->st = st;
	return st;
}

static int ext_push(struct sched_plan *p, struct loom_tensor *t,
		    size_t index, bool node)
{
	if (p->n_ext == p->cap_ext) {
		size_t cap = p->cap_ext ? 2 * p->cap_ext : 64;
		struct sched_ext *v = realloc(p->ext, cap * sizeof(*v));

		if (!v)
			return LOOM_E_NOMEM;
		p->ext = v;
		p->cap_ext = cap;
	}
	p->ext[p->n_ext++] = (struct sched_ext){ t, index, node };
	return LOOM_OK;
}

/* The plan's stand-in for the caller's leaf x, made once. */
static struct loom_tensor *proxy_of(struct build *b, struct loom_tensor *x)
{
	struct loom_tensor *px = made_get(b, &b->proxy, x);
	int *j;

	if (px)
		return px;
	j = loom__ptrmap_find(&b->s->leaves, x);
	px = clone_leaf(b->p, x);
	if (!j || !px || ext_push(b->p, px, (size_t)(*j - 1), false))
		return NULL;
	return made_put(b, &b->proxy, x, px);
}

/* Keeps from alive in backend sb's memory until the pieces planned so far
 * have run: a reader in its memory plan (never computed). */
static int keep_alive(struct build *b, int sb, struct loom_tensor *from)
{
	int64_t one = 1;
	struct loom_tensor *k = loom_tensor_new(b->p->ctx, LOOM_TYPE_F32, 1,
						&one);

	if (!k)
		return LOOM_E_NOMEM;
	k->op = LOOM_OP_SCALE;
	k->src[0] = from;
	return add_to(b, b->p->alloc_g[sb], k);
}

/* What piece pc reads for x, which lives elsewhere: a copy in its
 * backend's memory, made once per compute however many pieces of that
 * backend read it.  from holds the data, in backend sb's compute memory
 * (or -1) and computed by piece sp (or -1: ready at the start). */
static struct loom_tensor *copy_in(struct build *b, size_t pc,
				   struct loom_tensor *x,
				   struct loom_tensor *from, int sb, int sp)
{
	struct sched_plan *p = b->p;
	int be = p->pieces[pc].be;
	struct loom_tensor *to = made_get(b, &b->copied[be], x);
	struct sched_copy *c;

	if (to)
		return to;
	to = clone_leaf(p, x);
	if (!to)
		return NULL;
	to->flags = 0;
	if (p->n_copies == p->cap_copies) {
		size_t cap = p->cap_copies ? 2 * p->cap_copies : 16;
		struct sched_copy *v = realloc(p->copies, cap * sizeof(*v));

		if (!v)
			return NULL;
		p->copies = v;
		p->cap_copies = cap;
	}
	c = &p->copies[p->n_copies++];
	*c = (struct sched_copy){ from, to, sb, sp, (int)pc };
	p->copy_bytes += loom_tensor_n_bytes(x);
	if (loom__ptrmap_put(&b->is_copy, to, 1) ||
	    (sb >= 0 && keep_alive(b, sb, from)))
		return NULL;
	if (b->s->debug)
		fprintf(stderr, "loom sched: copy %s%s%s (%zu bytes) %s -> %s "
			"before piece %zu\n", x->name[0] ? "'" : "a ",
			x->name[0] ? x->name : loom_op_name(x->op),
			x->name[0] ? "'" : " result", loom_tensor_n_bytes(x),
			sb >= 0 ? loom_backend_name(b->s->be[sb]) : "caller",
			loom_backend_name(b->s->be[be]), pc);
	return made_put(b, &b->copied[be], x, to);
}

/* The tensor piece pc reads for the caller's tensor x. */
static struct loom_tensor *map_input(struct build *b, size_t pc,
				     struct loom_tensor *x)
{
	struct sched_plan *p = b->p;
	int be = p->pieces[pc].be;
	struct loom_tensor *to;
	long i;

	if (!x)
		return NULL;
	to = made_get(b, &b->memo[pc], x);
	if (to)
		return to;
	i = node_index(b, x);
	if (i >= 0 && pure_view(x)) {
		/* Views cost nothing: each piece makes its own. */
		struct loom_tensor *src = map_input(b, pc, x->view_src);

		to = src ? clone(p, x) : NULL;
		if (!to)
			return NULL;
		to->view_src = src;
		for (int k = 0; k < LOOM_MAX_SRC; k++) {
			if (!x->src[k])
				continue;
			to->src[k] = x->src[k] == x->view_src ?
					     src : map_input(b, pc, x->src[k]);
			if (!to->src[k])
				return NULL;
		}
		if (add_to(b, p->pieces[pc].g, to))
			return NULL;
	} else if (i >= 0 && p->node_be[i] == be) {
		to = p->shadow[i];
	} else if (i >= 0) {
		to = copy_in(b, pc, x, p->shadow[i], p->node_be[i],
			     b->node_piece[i]);
	} else {
		struct loom_tensor *px = proxy_of(b, x);
		int *owner;

		if (!px)
			return NULL;
		if (caller_placed(b->s, x)) {
			to = readable(b, x, be) ? px :
			     copy_in(b, pc, x, px, -1, -1);
		} else if (!(owner = loom__ptrmap_find(&b->leaf_be, x))) {
			/* An input the first backend that reads it places;
			 * the others read copies. */
			if (loom__ptrmap_put(&b->leaf_be, x, be + 1))
				return NULL;
			to = px;
		} else {
			to = *owner - 1 == be ? px :
			     copy_in(b, pc, x, px, *owner - 1, -1);
		}
	}
	return made_put(b, &b->memo[pc], x, to);
}

/* Node i's shadow gets its sources in piece pc and joins the piece. */
static int build_node(struct build *b, size_t pc, size_t i)
{
	struct sched_plan *p = b->p;
	struct loom_tensor *t = loom_graph_node(b->g, i);
	struct loom_tensor *sh = p->shadow[i];

	for (int k = 0; k < LOOM_MAX_SRC; k++) {
		if (!t->src[k])
			continue;
		sh->src[k] = map_input(b, pc, t->src[k]);
		if (!sh->src[k])
			goto err;
	}
	if (t->view_src) {
		struct loom_tensor *o;

		/* copy and set_rows write into their destination, one of
		 * the sources: that very memory, never a copy of it. */
		for (int k = 0; k < LOOM_MAX_SRC; k++)
			if (t->src[k] == t->view_src)
				sh->view_src = sh->src[k];
		if (!sh->view_src)
			sh->view_src = map_input(b, pc, t->view_src);
		if (!sh->view_src)
			goto err;
		for (o = sh->view_src; o->view_src; o = o->view_src)
			;
		if (loom__ptrmap_find(&b->is_copy, o))
			return b->st = unsupported(b, t, " in the memory it "
						   "writes");
	} else if (caller_placed(b->s, t) &&
		   ext_push(p, sh, i, true)) {
		goto err;
	}
	if (add_to(b, p->pieces[pc].g, sh))
		goto err;
	return LOOM_OK;

err:
	if (!b->st)
		b->st = loom_error_set(LOOM_E_NOMEM, "loom_sched: out of "
				       "memory while planning");
	return b->st;
}

/* Piece pc in its backend's memory plan: its copies first, all written
 * before it runs (memory from the piece's start to their last reader),
 * then its nodes. */
static int plan_memory(struct build *b, size_t pc)
{
	struct sched_piece *pi = &b->p->pieces[pc];
	loom_graph_t *ag = b->p->alloc_g[pi->be];

	for (size_t k = 0; k < pi->n_copies; k++)
		if (add_to(b, ag, b->p->copies[pi->copy0 + k].to))
			return b->st;
	for (size_t i = 0; i < loom_graph_n_nodes(pi->g); i++)
		if (add_to(b, ag, loom_graph_node(pi->g, i)))
			return b->st;
	return LOOM_OK;
}

static void build_free(struct build *b)
{
	for (size_t pc = 0; b->memo && pc < b->p->n_pieces; pc++)
		loom__ptrmap_free(&b->memo[pc]);
	for (size_t j = 0; b->copied && j < b->s->n_be; j++)
		loom__ptrmap_free(&b->copied[j]);
	loom__ptrmap_free(&b->leaf_be);
	loom__ptrmap_free(&b->proxy);
	loom__ptrmap_free(&b->is_copy);
	free(b->memo);
	free(b->copied);
	free(b->made);
	free(b->sup);
	free(b->node_piece);
}

/* Events mark each piece's end on devices that have them, so copies
 * wait for the piece they read, not for the whole device. */
static int make_events(loom_sched_t *s, struct sched_plan *p)
{
	for (size_t pc = 0; pc < p->n_pieces; pc++) {
		struct sched_piece *pi = &p->pieces[pc];
		loom_dev_t *dev = dev_of(s, pi->be);
		int st;

		if (!(loom_dev_caps(dev) & LOOM_DEV_CAP_EVENTS))
			continue;
		st = loom_event_new(dev, &pi->done);
		if (!st)
			st = loom_event_new(dev, &pi->copied);
		if (st)
			return st;
	}
	return LOOM_OK;
}

/* Names an out-of-memory met while planning. */
static int plan_nomem(void)
{
	return loom_error_set(LOOM_E_NOMEM, "loom_sched: out of memory while "
			      "planning");
}

/* The arrays of a plan of n nodes and of its build, zeroed. */
static int plan_arrays(loom_sched_t *s, struct sched_plan *p,
		       struct build *b, size_t n)
{
	size_t n1 = n ? n : 1;

	p->n_nodes = n;
	p->key = malloc(s->n_key * sizeof(*p->key));
	p->shadow = calloc(n1, sizeof(*p->shadow));
	p->node_be = calloc(n1, sizeof(*p->node_be));
	p->pieces = calloc(n1, sizeof(*p->pieces));
	p->alloc_g = calloc(s->n_be, sizeof(*p->alloc_g));
	b->node_piece = calloc(n1, sizeof(*b->node_piece));
	b->sup = calloc(n1 * s->n_be, 1);
	b->copied = calloc(s->n_be, sizeof(*b->copied));
	if (loom_ctx_new(0, &p->ctx) || !p->key || !p->shadow ||
	    !p->node_be || !p->pieces || !p->alloc_g || !b->node_piece ||
	    !b->sup || !b->copied)
		return plan_nomem();
	memcpy(p->key, s->key, s->n_key * sizeof(*p->key));
	p->n_key = s->n_key;
	return LOOM_OK;
}

/* Gives each node of the graph its backend, in node order (views go
 * with what reads them), and cuts the pieces where the backend changes. */
static int assign_nodes(struct build *b)
{
	loom_sched_t *s = b->s;
	struct sched_plan *p = b->p;
	int last = -1;

	for (size_t i = 0; i < p->n_nodes; i++) {
		struct loom_tensor *t = loom_graph_node(b->g, i);
		const char *why = "";
		int j;

		b->node_piece[i] = -1;
		if (pure_view(t)) {
			p->node_be[i] = -1;
			continue;
		}
		j = assign(b, i, last, &why);
		if (j < 0)
			return b->st;
		p->node_be[i] = j;
		if (j != last) {
			p->pieces[p->n_pieces++].be = j;
			last = j;
		}
		b->node_piece[i] = (int)p->n_pieces - 1;
		if (s->debug)
			fprintf(stderr, "loom sched: node %-4zu %-24s %-10s -> "
				"%-8s (%s)\n", i, t->name,
				loom_op_name(t->op),
				loom_backend_name(s->be[j]), why);
	}
	return LOOM_OK;
}

/* Builds piece pc: its sources, copies, graph and memory plan. */
static int build_piece(struct build *b, size_t pc)
{
	struct sched_plan *p = b->p;
	struct sched_piece *pi = &p->pieces[pc];
	int st;

	pi->copy0 = p->n_copies;
	if ((st = loom_graph_new(p->ctx, &pi->g)))
		return st;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (b->node_piece[i] == (int)pc &&
		    (st = build_node(b, pc, i)))
			return st;
	pi->n_copies = p->n_copies - pi->copy0;
	return plan_memory(b, pc);
}

/* Builds every piece, once the nodes are assigned: shadows first (so
 * that later pieces can name them), then each piece. */
static int build_pieces(struct build *b)
{
	loom_sched_t *s = b->s;
	struct sched_plan *p = b->p;
	int st;

	b->memo = calloc(p->n_pieces ? p->n_pieces : 1, sizeof(*b->memo));
	if (!b->memo)
		return plan_nomem();
	for (size_t j = 0; j < s->n_be; j++)
		if ((st = loom_graph_new(p->ctx, &p->alloc_g[j])))
			return st;
	for (size_t i = 0; i < p->n_nodes; i++)
		if (b->node_piece[i] >= 0 &&
		    !(p->shadow[i] = clone(p, loom_graph_node(b->g, i))))
			return plan_nomem();
	for (size_t pc = 0; pc < p->n_pieces; pc++)
		if ((st = build_piece(b, pc)))
			return st;
	p->issued = calloc(p->n_copies ? p->n_copies : 1, sizeof(*p->issued));
	if (!p->issued)
		return plan_nomem();
	return make_events(s, p);
}

/* Assigns every node of g, cuts the pieces and builds their graphs and
 * memory plans.  s->key and s->leaves are g's. */
static int plan_new(loom_sched_t *s, loom_graph_t *g,
		    struct sched_plan **out)
{
	struct sched_plan *p = calloc(1, sizeof(*p));
	struct build b = { .s = s, .p = p, .g = g };
	double t0 = now_s();
	int st;

	if (!p)
		return loom_error_set(LOOM_E_NOMEM, "loom_sched: out of memory");
	st = plan_arrays(s, p, &b, loom_graph_n_nodes(g));
	if (!st)
		st = assign_nodes(&b);
	if (!st)
		st = build_pieces(&b);
	build_free(&b);
	if (st) {
		plan_free(p);
		return st;
	}
	if (s->debug)
		fprintf(stderr, "loom sched: %zu nodes, %zu pieces, %zu copies "
			"(%zu bytes) per compute\n", p->n_nodes, p->n_pieces,
			p->n_copies, p->copy_bytes);
	s->st.n_plans++;
	s->st.plan_s += now_s() - t0;
	*out = p;
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * Binding a plan to a graph, and placing it.
 */

/* Gives t the data of the caller's x (a mirror, not a placement of its
 * own: the memory and the plugin's state are x's). */
static void mirror(struct loom_tensor *t, const struct loom_tensor *x)
{
	t->data = x->data;
	t->buffer = x->buffer;
	t->state = x->state;
}

/* Puts the caller's t where the plan's sh is. */
static int place_at(struct loom_tensor *t, const struct loom_tensor *sh)
{
	if (t->data == sh->data && t->buffer == sh->buffer)
		return LOOM_OK;
	if (!sh->data || !sh->buffer)
		return loom_error_set(LOOM_E_STATE, "loom_sched: '%s' was not "
				      "placed", sh->name);
	return loom_tensor_place(t, sh->buffer,
				 (size_t)((char *)sh->data -
					  (char *)loom_buffer_base(sh->buffer)));
}

/* The caller's tensor an ext entry stands for, in p's graph. */
static struct loom_tensor *ext_target(const struct sched_plan *p,
				      const struct sched_ext *e)
{
	return e->node ? loom_graph_node(p->g, e->index)
		       : loom_graph_leaf(p->g, e->index);
}

/* Proxies and shadows of what the caller placed take its place again (it
 * may have moved since). */
static void mirror_ext(loom_sched_t *s, struct sched_plan *p)
{
	for (size_t k = 0; k < p->n_ext; k++) {
		struct sched_ext *e = &p->ext[k];
		struct loom_tensor *x = ext_target(p, e);

		if (e->node || caller_placed(s, x))
			mirror(e->t, x);
	}
}

/* Names follow the caller's graph of the moment (plugins may read them:
 * a composed device splits weights by name). */
static void refresh_names(struct sched_plan *p)
{
	for (size_t k = 0; k < p->n_ext; k++)
		memcpy(p->ext[k].t->name, ext_target(p, &p->ext[k])->name,
		       LOOM_MAX_NAME);
	for (size_t i = 0; i < p->n_nodes; i++)
		if (p->shadow[i])
			memcpy(p->shadow[i]->name,
			       loom_graph_node(p->g, i)->name, LOOM_MAX_NAME);
}

/* The plan's tensors in its backends' memory. */
static int alloc_plan(loom_sched_t *s, struct sched_plan *p)
{
	int st;

	mirror_ext(s, p);
	for (size_t j = 0; j < s->n_be; j++) {
		if (!loom_graph_n_nodes(p->alloc_g[j]))
			continue;
		st = loom_galloc_alloc_graph(s->ga[j], p->alloc_g[j]);
		if (st)
			return st;
	}
	return LOOM_OK;
}

/* The caller's inputs where their proxies are, its nodes where their
 * shadows are, its views over them. */
static int place_caller(loom_sched_t *s, struct sched_plan *p)
{
	int st;

	for (size_t k = 0; k < p->n_ext; k++) {
		struct sched_ext *e = &p->ext[k];
		struct loom_tensor *x = ext_target(p, e);

		if (!e->node && !caller_placed(s, x) &&
		    (st = place_at(x, e->t)))
			return st;
	}
	for (size_t i = 0; i < p->n_nodes; i++) {
		struct loom_tensor *t = loom_graph_node(p->g, i);
		struct loom_tensor *v = t->view_src;

		if (v) {
			if (v->data && (t->buffer != v->buffer ||
					(char *)t->data !=
						(char *)v->data + t->view_offs))
				st = loom_tensor_init_view(t);
			else
				st = LOOM_OK;
		} else {
			st = caller_placed(s, t) ? LOOM_OK :
			     place_at(t, p->shadow[i]);
		}
		if (st)
			return st;
	}
	return LOOM_OK;
}

/* The plan bound to g at this version, or NULL. */
static struct sched_plan *find_bound(loom_sched_t *s, loom_graph_t *g,
				     uint64_t version)
{
	for (int k = 0; k < SCHED_PLANS; k++)
		if (s->plans[k] && s->plans[k]->g == g &&
		    s->plans[k]->version == version)
			return s->plans[k];
	return NULL;
}

/* A plan made for a graph of g's shape, or NULL (in *out); makes
 * s->key g's. */
static int find_by_shape(loom_sched_t *s, loom_graph_t *g,
			 struct sched_plan **out)
{
	int st = make_key(s, g);

	*out = NULL;
	if (st)
		return st;
	for (int k = 0; k < SCHED_PLANS; k++) {
		struct sched_plan *q = s->plans[k];

		if (q && q->n_key == s->n_key &&
		    !memcmp(q->key, s->key, s->n_key * sizeof(*s->key))) {
			s->st.n_reused++;
			if (s->debug)
				fprintf(stderr, "loom sched: a graph of a "
					"shape planned before: plan reused\n");
			*out = q;
			break;
		}
	}
	return LOOM_OK;
}

/* Plans g anew (s->key is g's) in a free slot, or in the one used
 * longest ago, whose plan goes. */
static int plan_in_slot(loom_sched_t *s, loom_graph_t *g,
			struct sched_plan **out)
{
	int st, slot = 0;

	for (int k = 0; k < SCHED_PLANS; k++) {
		if (!s->plans[k]) {
			slot = k;
			break;
		}
		if (s->plans[k]->used < s->plans[slot]->used)
			slot = k;
	}
	st = plan_new(s, g, out);
	if (st)
		return st;
	if (s->plans[slot] == s->cur)
		s->cur = NULL;
	plan_free(s->plans[slot]);
	s->plans[slot] = *out;
	return LOOM_OK;
}

/* Places p's memory and the caller's tensors.  The plan's memory is
 * placed still when it was the last one placed; the caller's tensors,
 * when the graph is that one too. */
static int place_plan(loom_sched_t *s, struct sched_plan *p)
{
	int st;

	if (s->cur != p) {
		s->cur = NULL;
		st = alloc_plan(s, p);
		if (st)
			return st;
		s->cur = p;
		s->callers_placed = false;
	}
	if (!s->callers_placed) {
		st = place_caller(s, p);
		if (st)
			return st;
		s->callers_placed = true;
	}
	return LOOM_OK;
}

/* The plan for g: the one bound to it, one made for its shape (bound to
 * it now), or a new one.  With alloc, its memory is placed too. */
static int bind(loom_sched_t *s, loom_graph_t *g, bool alloc)
{
	uint64_t version = loom_graph_version(g);
	struct sched_plan *p;
	int st;

	if (alloc && s->cur && s->callers_placed && s->cur->g == g &&
	    s->cur->version == version)
		return LOOM_OK;
	p = find_bound(s, g, version);
	if (!p && (st = find_by_shape(s, g, &p)))
		return st;
	if (!p && (st = plan_in_slot(s, g, &p)))
		return st;
	if (p->g != g || p->version != version) {
		p->g = g;
		p->version = version;
		refresh_names(p);
		s->callers_placed = false;
	}
	p->used = ++s->tick;
	return alloc ? place_plan(s, p) : LOOM_OK;
}

/* Checks s and g and claims s for one call (who names it). */
static int claim(loom_sched_t *s, loom_graph_t *g, const char *who)
{
	if (!live(s) || !g)
		return loom_error_set(LOOM_E_INVAL, "%s: no live scheduler, or "
				      "the graph is NULL", who);
	if (!loom__claim(&s->busy))
		return loom_error_set(LOOM_E_BUSY, "%s: the scheduler is busy "
				      "with a call on another thread (calls "
				      "on one scheduler must not overlap)",
				      who);
	return LOOM_OK;
}

static int reserve(loom_sched_t *s, loom_graph_t *g)
{
	struct sched_plan *p = NULL;
	int st;

	st = bind(s, g, false);
	for (int k = 0; !st && k < SCHED_PLANS; k++)
		if (s->plans[k] && s->plans[k]->g == g)
			p = s->plans[k];
	/* What the caller placed is not ours to size. */
	if (!st && p)
		mirror_ext(s, p);
	for (size_t j = 0; !st && p && j < s->n_be; j++)
		if (loom_graph_n_nodes(p->alloc_g[j]))
			st = loom_galloc_reserve(s->ga[j], p->alloc_g[j]);
	/* A buffer that grew has moved what was placed in it. */
	s->cur = NULL;
	return st;
}

int loom_sched_reserve(loom_sched_t *s, loom_graph_t *g)
{
	int st = claim(s, g, "loom_sched_reserve");

	if (st)
		return st;
	st = reserve(s, g);
	loom__unclaim(&s->busy);
	return st;
}

int loom_sched_alloc_graph(loom_sched_t *s, loom_graph_t *g)
{
	int st = claim(s, g, "loom_sched_alloc_graph");

	if (st)
		return st;
	st = bind(s, g, true);
	loom__unclaim(&s->busy);
	return st;
}

/* ------------------------------------------------------------------------
 * Running.
 */

/* True when a copy from backend a to backend b can be queued on b's
 * stream behind an event of a: both devices have events and asynchronous
 * copies, and come from one plugin. */
static bool can_queue(const loom_sched_t *s, int a, int b)
{
	uint32_t need = LOOM_DEV_CAP_EVENTS | LOOM_DEV_CAP_ASYNC;
	loom_dev_t *da, *db;

	if (a < 0)
		return false;
	da = dev_of(s, a);
	db = dev_of(s, b);
	return (loom_dev_caps(da) & need) == need &&
	       (loom_dev_caps(db) & need) == need &&
	       loom_dev_reg(da) == loom_dev_reg(db);
}

/* Blocks until piece sp is done. */
static int wait_piece(loom_sched_t *s, struct sched_plan *p, int sp)
{
	struct sched_piece *pi = &p->pieces[sp];
	double t0 = now_s();
	int st;

	if (s->finished[pi->be] >= sp)
		return LOOM_OK;
	if (pi->done) {
		st = loom_event_synchronize(pi->done);
		if (!st)
			s->finished[pi->be] = sp;
	} else {
		st = loom_backend_synchronize(s->be[pi->be]);
		if (!st)
			s->finished[pi->be] = s->launched[pi->be];
	}
	s->st.wait_s += now_s() - t0;
	return st;
}

/* Makes copy c, or leaves it for later (returns 1) when it would wait for
 * the piece on backend busy (early: the next piece is not launched yet).
 * Queued copies mark their piece's copied event as due (*queued). */
static int issue(loom_sched_t *s, struct sched_plan *p, size_t ci,
		 int busy, bool early, bool *queued)
{
	struct sched_copy *c = &p->copies[ci];
	int dst = p->pieces[c->piece].be, st;
	bool pending = c->src_piece >= 0 &&
		       s->finished[c->src_be] < c->src_piece;
	double t0;

	if (can_queue(s, c->src_be, dst)) {
		if (pending && (st = loom_event_wait(s->be[dst],
						     p->pieces[c->src_piece]
							     .done)))
			return st;
		st = loom_backend_tensor_copy_async(s->be[c->src_be],
						    s->be[dst], c->from, c->to);
		if (st)
			return st;
		/* The source's backend must not reuse that memory before
		 * the copy has read it. */
		s->guard[c->src_be] = p->pieces[c->piece].copied;
		*queued = true;
	} else {
		if (pending && early && c->src_be == busy)
			return 1;
		if (pending && (st = wait_piece(s, p, c->src_piece)))
			return st;
		/* The destination's memory may have been another tensor's
		 * in a piece of that backend still running. */
		if (s->launched[dst] > s->finished[dst] &&
		    (st = wait_piece(s, p, s->launched[dst])))
			return st;
		t0 = now_s();
		st = loom_tensor_copy(c->from, c->to);
		s->st.copy_s += now_s() - t0;
		if (st)
			return st;
	}
	p->issued[ci] = true;
	if (early)
		s->st.n_copies_early++;
	return LOOM_OK;
}

/* The copies of piece pc not made yet: all of them (before it runs), or
 * those that need not wait for the piece running now (early). */
static int issue_piece(loom_sched_t *s, struct sched_plan *p, size_t pc,
		       int busy, bool early)
{
	struct sched_piece *pi = &p->pieces[pc];
	bool queued = false;
	int st = LOOM_OK;

	for (size_t k = 0; k < pi->n_copies && st <= 0; k++) {
		size_t ci = pi->copy0 + k;

		/* A copy left for later (1) does not hold up the others. */
		st = p->issued[ci] ? LOOM_OK :
		     issue(s, p, ci, busy, early, &queued);
		if (st > 0)
			st = LOOM_OK;
		else if (st < 0)
			break;
	}
	if (!st && queued && pi->copied)
		st = loom_event_record(pi->copied, s->be[pi->be]);
	return st;
}

static int launch(loom_sched_t *s, struct sched_plan *p, size_t pc)
{
	struct sched_piece *pi = &p->pieces[pc];
	loom_backend_t *be = s->be[pi->be];
	int st = LOOM_OK;

	if (s->guard[pi->be]) {
		st = loom_event_wait(be, s->guard[pi->be]);
		s->guard[pi->be] = NULL;
	}
	if (!st)
		st = loom_backend_graph_compute_async(be, pi->g);
	if (st)
		return st;
	s->launched[pi->be] = (int)pc;
	if (pi->done)
		st = loom_event_record(pi->done, be);
	return st;
}

static int compute(loom_sched_t *s, loom_graph_t *g)
{
	struct sched_plan *p;
	int st, st2;

	st = bind(s, g, true);
	if (st)
		return st;
	p = s->cur;
	mirror_ext(s, p);
	memset(p->issued, 0, (p->n_copies ? p->n_copies : 1) *
				     sizeof(*p->issued));
	for (size_t j = 0; j < s->n_be; j++) {
		s->launched[j] = s->finished[j] = -1;
		s->guard[j] = NULL;
	}
	/* Each piece's inputs, then the piece; while it runs, the next
	 * piece's inputs that do not wait for it. */
	for (size_t pc = 0; !st && pc < p->n_pieces; pc++) {
		st = issue_piece(s, p, pc, -1, false);
		if (!st)
			st = launch(s, p, pc);
		if (!st && pc + 1 < p->n_pieces)
			st = issue_piece(s, p, pc + 1, p->pieces[pc].be, true);
	}
	for (size_t j = 0; j < s->n_be; j++)
		if ((st2 = loom_backend_synchronize(s->be[j])) && !st)
			st = st2;
	if (!st)
		s->st.n_computes++;
	return st;
}

int loom_sched_compute(loom_sched_t *s, loom_graph_t *g)
{
	int st = claim(s, g, "loom_sched_compute");

	if (st)
		return st;
	st = compute(s, g);
	loom__unclaim(&s->busy);
	return st;
}

/* ------------------------------------------------------------------------
 * What the last plan is.
 */
static const struct sched_plan *last_plan(const loom_sched_t *s)
{
	const struct sched_plan *p = NULL;

	for (int k = 0; live(s) && k < SCHED_PLANS; k++)
		if (s->plans[k] && (!p || s->plans[k]->used > p->used))
			p = s->plans[k];
	return p;
}

size_t loom_sched_n_pieces(const loom_sched_t *s)
{
	const struct sched_plan *p = last_plan(s);

	return p ? p->n_pieces : 0;
}

size_t loom_sched_n_copies(const loom_sched_t *s)
{
	const struct sched_plan *p = last_plan(s);

	return p ? p->n_copies : 0;
}

uint64_t loom_sched_n_plans(const loom_sched_t *s)
{
	return live(s) ? s->st.n_plans : 0;
}

loom_backend_t *loom_sched_node_backend(const loom_sched_t *s,
					const struct loom_tensor *node)
{
	const struct sched_plan *p = last_plan(s);
	long i;

	if (!p || !node || !p->g)
		return NULL;
	i = loom__graph_find(p->g, node);
	if (i < 0 || (size_t)i >= p->n_nodes || p->node_be[i] < 0)
		return NULL;
	return s->be[p->node_be[i]];
}

size_t loom_sched_buffer_size(const loom_sched_t *s, size_t i)
{
	if (!live(s) || i >= s->n_be)
		return 0;
	return loom_galloc_buffer_size(s->ga[i]);
}

int loom_sched_get_stats(const loom_sched_t *s, struct loom_sched_stats *out)
{
	struct loom_sched_stats v;
	const struct sched_plan *p;
	size_t n;

	if (!live(s) || !out || out->size == 0)
		return loom_error_set(LOOM_E_INVAL, "loom_sched_get_stats: "
				      "no live scheduler, or stats is NULL, "
				      "or its size is not set");
	v = s->st;
	p = last_plan(s);
	v.n_pieces = p ? p->n_pieces : 0;
	v.n_copies = p ? p->n_copies : 0;
	v.copy_bytes = p ? p->copy_bytes : 0;
	n = out->size < sizeof(v) ? out->size : sizeof(v);
	v.size = (uint32_t)n;
	memcpy(out, &v, n);
	return LOOM_OK;
}
