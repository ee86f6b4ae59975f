/* SPDX-License-Identifier: MIT */
/* sched.c - one graph over several backends: each node goes to a backend,
 * the graph is cut into pieces of consecutive nodes on one backend, the
 * inputs a piece reads from another device are copied once per compute,
 * and each piece's memory comes from a graph allocator of its backend.
 *
 * The caller's graph is never edited: each piece runs on shadows of the
 * caller's nodes (copies of their descriptors whose sources point at the
 * piece's own tensors), and the caller's nodes are placed where their
 * shadows are, so results are read from them as after any compute.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-private.h"
#include "loom-private.h"

#include <loom/loom-plugin.h>

/* An input copied into a piece's memory before the piece runs. */
struct sched_copy {
	struct loom_tensor *from; /* where the data is (placed) */
	struct loom_tensor *to;   /* a leaf of the piece */
};

struct sched_piece {
	size_t be;                /* index into the scheduler's backends */
	loom_graph_t *g;          /* the piece's shadows, in order */
	loom_galloc_t *ga;
	size_t copy0, n_copies;   /* its copies in plan.copies */
};

struct sched_plan {
	loom_graph_t *g;          /* the caller's graph, and its version */
	uint64_t version;
	loom_ctx_t *ctx;          /* shadows, copies and aliases */
	struct sched_piece *pieces;
	size_t n_pieces;
	struct sched_copy *copies;
	size_t n_copies, cap_copies;
	/* Results of earlier pieces read in place by a later piece on the
	 * same backend: .to is placed over .from once that is placed. */
	struct sched_copy *aliases;
	size_t n_aliases, cap_aliases;
	struct loom__ptrmap leaf_be;  /* unplaced input -> its backend + 1 */
	struct loom_tensor **shadow; /* per caller node */
	int *node_be;                /* per caller node; -1 for views */
	int *node_piece;
	struct loom__ptrmap index;   /* caller node -> its index + 1 */
	/* Per piece: caller tensor -> shadow/copy/alias already made for it
	 * (the int is an index into made[]). */
	struct loom__ptrmap *memo;
	struct loom_tensor **made;
	size_t n_made, cap_made;
};

struct loom_sched {
	loom_backend_t **be;
	size_t n_be;
	struct sched_plan plan;   /* the last graph planned */
	bool planned, allocated;
	uint64_t n_plans;
	bool debug;
};

static void plan_free(struct sched_plan *p)
{
	for (size_t i = 0; i < p->n_pieces; i++)
		loom_galloc_free(p->pieces[i].ga);
	for (size_t i = 0; p->memo && i < p->n_pieces; i++)
		loom__ptrmap_free(&p->memo[i]);
	loom__ptrmap_free(&p->index);
	loom__ptrmap_free(&p->leaf_be);
	loom_ctx_free(p->ctx);
	free(p->pieces);
	free(p->copies);
	free(p->aliases);
	free(p->shadow);
	free(p->node_be);
	free(p->node_piece);
	free(p->memo);
	free(p->made);
	memset(p, 0, sizeof(*p));
}

int loom_sched_new(loom_backend_t *const *backends, size_t n,
		   loom_sched_t **out)
{
	loom_sched_t *s;
	const char *dbg = loom_env_get("LOOM_SCHED_DEBUG");

	if (!out || !backends || n == 0)
		return loom_error_set(LOOM_E_INVAL, "loom_sched_new: no "
				      "backends");
	*out = NULL;
	for (size_t i = 0; i < n; i++)
		if (!backends[i])
			return loom_error_set(LOOM_E_INVAL, "loom_sched_new: "
					      "backend %zu is NULL", i);
	s = calloc(1, sizeof(*s));
	if (!s || !(s->be = malloc(n * sizeof(*s->be)))) {
		free(s);
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	}
	memcpy(s->be, backends, n * sizeof(*s->be));
	s->n_be = n;
	s->debug = dbg && *dbg && strcmp(dbg, "0") != 0;
	*out = s;
	return LOOM_OK;
}

void loom_sched_free(loom_sched_t *s)
{
	if (!s)
		return;
	plan_free(&s->plan);
	free(s->be);
	free(s);
}

static loom_dev_t *dev_of(const loom_sched_t *s, size_t j)
{
	return loom_backend_device(s->be[j]);
}

/* The backend whose device holds t's memory, or -1. */
static int placed_on(const loom_sched_t *s, const struct loom_tensor *t)
{
	const struct loom_tensor *b = t;

	while (b->view_src)
		b = b->view_src;
	if (!b->buffer)
		return -1;
	/* The device whose own memory it is, else one that can use it. */
	for (size_t j = 0; j < s->n_be; j++)
		if (loom_dev_buffer_type(dev_of(s, j)) ==
		    loom_buffer_get_type(b->buffer))
			return (int)j;
	for (size_t j = 0; j < s->n_be; j++)
		if (loom_dev_supports_buft(dev_of(s, j),
					   loom_buffer_get_type(b->buffer)))
			return (int)j;
	return -1;
}

static bool is_weight(const struct loom_tensor *t)
{
	while (t->view_src)
		t = t->view_src;
	return t->buffer && ((t->flags & LOOM_TENSOR_WEIGHT) ||
			     loom_buffer_usage(t->buffer) ==
				     LOOM_BUFFER_USAGE_WEIGHTS);
}

/* An op that only reinterprets its source, as opposed to one whose result
 * is a view of the tensor it writes (copy, set_rows). */
static bool pure_view(const struct loom_tensor *t)
{
	return loom_op_is_view(t->op);
}

static int node_index(const struct sched_plan *p, const struct loom_tensor *t)
{
	int *v = loom__ptrmap_find(&p->index, t);

	return v ? *v - 1 : -1;
}

/* True when backend j can read x where it is now, with no copy. */
static bool readable(const loom_sched_t *s, const struct sched_plan *p,
		     struct loom_tensor *x, size_t j)
{
	int i;

	while (x && pure_view(x) && node_index(p, x) >= 0)
		x = x->view_src;
	if (!x)
		return true;
	i = node_index(p, x);
	if (i >= 0)
		return p->node_be[i] == (int)j;
	return !x->buffer && !x->view_src ? true :
	       loom_dev_supports_buft(dev_of(s, j),
				      loom_buffer_get_type(x->buffer));
}

/* Chooses node i's backend; *why says which rule decided. */
static int assign(loom_sched_t *s, struct sched_plan *p, size_t i,
		  const char **why)
{
	struct loom_tensor *t = loom_graph_node(p->g, i);
	int first = -1;

	/* A node that writes into a tensor runs where that tensor lives. */
	if (t->view_src && !pure_view(t) && t->view_src->buffer) {
		int j = placed_on(s, t->view_src);

		if (j >= 0 && loom_backend_supports_op(s->be[j], t)) {
			*why = "writes into memory of this device";
			return j;
		}
	}
	/* A node that uses a weight runs where the weight lives. */
	for (int k = 0; k < LOOM_MAX_SRC; k++) {
		struct loom_tensor *x = t->src[k];
		int j;

		if (!x || node_index(p, x) >= 0 || !is_weight(x))
			continue;
		j = placed_on(s, x);
		if (j >= 0 && loom_backend_supports_op(s->be[j], t)) {
			*why = "uses a weight of this device";
			return j;
		}
	}
	/* Else the first backend that supports it, preferring one that
	 * reads every input where it is. */
	for (size_t j = 0; j < s->n_be; j++) {
		bool all = true;

		if (!loom_backend_supports_op(s->be[j], t))
			continue;
		if (first < 0)
			first = (int)j;
		for (int k = 0; k < LOOM__N_INPUTS && all; k++)
			all = readable(s, p, loom__tensor_input(t, k), j);
		if (all) {
			*why = "first that supports it and reads its inputs";
			return (int)j;
		}
	}
	*why = "first that supports it (inputs copied)";
	return first;
}

/* Remembers what tensor x maps to in piece pc. */
static int memo_put(struct sched_plan *p, size_t pc, struct loom_tensor *x,
		    struct loom_tensor *to)
{
	if (p->n_made == p->cap_made) {
		size_t cap = p->cap_made ? 2 * p->cap_made : 64;
		struct loom_tensor **m = realloc(p->made, cap * sizeof(*m));

		if (!m)
			return LOOM_E_NOMEM;
		p->made = m;
		p->cap_made = cap;
	}
	p->made[p->n_made] = to;
	return loom__ptrmap_put(&p->memo[pc], x, (int)p->n_made++);
}

static struct loom_tensor *memo_get(struct sched_plan *p, size_t pc,
				    const struct loom_tensor *x)
{
	int *v = loom__ptrmap_find(&p->memo[pc], x);

	return v ? p->made[*v] : NULL;
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
	snprintf(c->name, sizeof(c->name), "%s", t->name);
	return c;
}

/* Appends (from, to) to a list of pairs. */
static int push_pair(struct sched_copy **v, size_t *n, size_t *cap,
		     struct loom_tensor *from, struct loom_tensor *to)
{
	if (*n == *cap) {
		size_t c = *cap ? 2 * *cap : 16;
		struct sched_copy *nv = realloc(*v, c * sizeof(*nv));

		if (!nv)
			return LOOM_E_NOMEM;
		*v = nv;
		*cap = c;
	}
	(*v)[*n].from = from;
	(*v)[*n].to = to;
	(*n)++;
	return LOOM_OK;
}

static struct loom_tensor *map_input(loom_sched_t *s, struct sched_plan *p,
				     size_t pc, struct loom_tensor *x);

/* What piece pc reads for tensor x that lives elsewhere: a copy of it
 * (made once per piece, filled before the piece runs).  A tensor that is
 * not contiguous is copied whole from its base and viewed again. */
static struct loom_tensor *copy_in(loom_sched_t *s, struct sched_plan *p,
				   size_t pc, struct loom_tensor *x,
				   struct loom_tensor *from)
{
	struct loom_tensor *c;

	if (!loom_tensor_is_contiguous(x) && x->view_src) {
		struct loom_tensor *base = map_input(s, p, pc, x->view_src);

		if (!base || !(c = clone(p, x)))
			return NULL;
		c->view_src = base;
		c->src[0] = base;
		c->op = LOOM_OP_VIEW;
		return c;
	}
	c = clone(p, x);
	if (!c)
		return NULL;
	c->op = LOOM_OP_NONE;
	c->flags = 0;
	c->view_offs = 0;
	/* Contiguous strides for the copy. */
	c->nb[0] = loom_type_size(x->type);
	c->nb[1] = loom_type_row_size(x->type, x->ne[0]);
	c->nb[2] = c->nb[1] * x->ne[1];
	c->nb[3] = c->nb[2] * x->ne[2];
	if (push_pair(&p->copies, &p->n_copies, &p->cap_copies, from, c))
		return NULL;
	return c;
}

/* The tensor piece pc reads for the caller's tensor x. */
static struct loom_tensor *map_input(loom_sched_t *s, struct sched_plan *p,
				     size_t pc, struct loom_tensor *x)
{
	struct sched_piece *piece = &p->pieces[pc];
	struct loom_tensor *to;
	int i;

	if (!x)
		return NULL;
	to = memo_get(p, pc, x);
	if (to)
		return to;
	i = node_index(p, x);
	if (i >= 0 && pure_view(x)) {
		/* Views cost nothing: each piece makes its own. */
		struct loom_tensor *src = map_input(s, p, pc, x->view_src);

		to = src ? clone(p, x) : NULL;
		if (!to)
			return NULL;
		to->view_src = src;
		for (int k = 0; k < LOOM_MAX_SRC; k++)
			to->src[k] = x->src[k] == x->view_src ? src :
				     map_input(s, p, pc, x->src[k]);
	} else if (i >= 0 && p->node_piece[i] == (int)pc) {
		to = p->shadow[i];
	} else if (i >= 0) {
		/* Made by an earlier piece: read in place on the same
		 * backend, else copied. */
		struct loom_tensor *sh = p->shadow[i];

		sh->flags |= LOOM_TENSOR_OUTPUT;
		if (p->node_be[i] == (int)piece->be) {
			to = clone(p, x);
			if (!to)
				return NULL;
			to->op = LOOM_OP_NONE;
			if (push_pair(&p->aliases, &p->n_aliases,
				      &p->cap_aliases, sh, to))
				return NULL;
		} else {
			to = copy_in(s, p, pc, x, sh);
		}
	} else if (!x->buffer && !x->view_src) {
		/* An input the allocator of the first backend that reads it
		 * places; other backends read copies. */
		int *owner = loom__ptrmap_find(&p->leaf_be, x);

		if (!owner) {
			if (loom__ptrmap_put(&p->leaf_be, x,
					     (int)piece->be + 1))
				return NULL;
			to = x;
		} else if (*owner - 1 == (int)piece->be) {
			to = x;
		} else {
			to = copy_in(s, p, pc, x, x);
		}
	} else if (readable(s, p, x, piece->be)) {
		to = x;
	} else {
		to = copy_in(s, p, pc, x, x);
	}
	if (!to || memo_put(p, pc, x, to))
		return NULL;
	return to;
}

static int plan_error(struct sched_plan *p, int st, const char *what)
{
	plan_free(p);
	return st ? st : loom_error_set(LOOM_E_NOMEM, "loom_sched: %s: out "
					"of memory", what);
}

/* Assigns every node, cuts the pieces and builds their shadow graphs. */
static int plan(loom_sched_t *s, loom_graph_t *g)
{
	struct sched_plan *p = &s->plan;
	size_t n = loom_graph_n_nodes(g);
	int st, last = -1;

	plan_free(p);
	s->planned = s->allocated = false;
	p->g = g;
	p->version = loom_graph_version(g);
	p->shadow = calloc(n ? n : 1, sizeof(*p->shadow));
	p->node_be = calloc(n ? n : 1, sizeof(*p->node_be));
	p->node_piece = calloc(n ? n : 1, sizeof(*p->node_piece));
	p->pieces = calloc(n ? n : 1, sizeof(*p->pieces));
	st = loom_ctx_new(0, &p->ctx);
	if (st || !p->shadow || !p->node_be || !p->node_piece || !p->pieces)
		return plan_error(p, st, "plan");
	for (size_t i = 0; i < n; i++)
		if (loom__ptrmap_put(&p->index, loom_graph_node(g, i),
				     (int)i + 1))
			return plan_error(p, 0, "plan");

	/* Backends, in node order; views are placed with what reads them. */
	for (size_t i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);
		const char *why = "";
		int j;

		p->node_piece[i] = -1;
		if (pure_view(t)) {
			p->node_be[i] = -1;
			continue;
		}
		j = assign(s, p, i, &why);
		if (j < 0) {
			st = loom_error_set(LOOM_E_UNSUPPORTED, "loom_sched: no "
					    "backend runs node '%s' (%s)",
					    t->name, loom_op_name(t->op));
			return plan_error(p, st, "plan");
		}
		p->node_be[i] = j;
		if (j != last) {
			p->pieces[p->n_pieces++].be = (size_t)j;
			last = j;
		}
		p->node_piece[i] = (int)p->n_pieces - 1;
		if (s->debug)
			fprintf(stderr, "loom sched: node %-4zu %-20s %-10s -> "
				"%-8s (%s)\n", i, t->name,
				loom_op_name(t->op),
				loom_backend_name(s->be[j]), why);
	}
	p->memo = calloc(p->n_pieces ? p->n_pieces : 1, sizeof(*p->memo));
	if (!p->memo)
		return plan_error(p, 0, "plan");
	/* Shadows first (so that later pieces can name them), then each
	 * piece's sources, copies and graph. */
	for (size_t i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		if (p->node_piece[i] < 0)
			continue;
		p->shadow[i] = clone(p, t);
		if (!p->shadow[i])
			return plan_error(p, 0, "plan");
	}
	for (size_t pc = 0; pc < p->n_pieces; pc++) {
		struct sched_piece *piece = &p->pieces[pc];

		piece->copy0 = p->n_copies;
		st = loom_graph_new(p->ctx, &piece->g);
		if (st)
			return plan_error(p, st, "plan");
		for (size_t i = 0; i < n; i++) {
			struct loom_tensor *t = loom_graph_node(g, i);
			struct loom_tensor *sh = p->shadow[i];

			if (p->node_piece[i] != (int)pc)
				continue;
			for (int k = 0; k < LOOM_MAX_SRC; k++) {
				if (!t->src[k])
					continue;
				sh->src[k] = map_input(s, p, pc, t->src[k]);
				if (!sh->src[k])
					return plan_error(p, 0, "plan");
			}
			if (t->view_src) {
				/* copy and set_rows write into their
				 * destination, which is one of the sources. */
				for (int k = 0; k < LOOM_MAX_SRC; k++)
					if (t->src[k] == t->view_src)
						sh->view_src = sh->src[k];
				if (!sh->view_src)
					sh->view_src = map_input(s, p, pc,
								 t->view_src);
			}
			if (t->data && !t->view_src) {
				sh->data = t->data; /* placed by the caller */
				sh->buffer = t->buffer;
			}
			st = loom_graph_expand(piece->g, sh);
			if (st)
				return plan_error(p, st, "plan");
		}
		piece->n_copies = p->n_copies - piece->copy0;
	}
	s->n_plans++;
	s->planned = true;
	return LOOM_OK;
}

/* Places alias a over the shadow sh it stands for. */
static int place_alias(struct loom_tensor *sh, struct loom_tensor *a)
{
	if (!sh->data || !sh->buffer)
		return loom_error_set(LOOM_E_STATE, "loom_sched: '%s' was not "
				      "placed", sh->name);
	return loom_tensor_place(a, sh->buffer,
				 (size_t)((char *)sh->data -
					  (char *)loom_buffer_base(sh->buffer)));
}

/* Gives the caller's node the place of its shadow. */
static int place_caller(struct loom_tensor *t, struct loom_tensor *sh)
{
	if (t->view_src)
		return t->data ? LOOM_OK : loom_tensor_init_view(t);
	if (t->data)
		return LOOM_OK;
	return loom_tensor_place(t, sh->buffer,
				 (size_t)((char *)sh->data -
					  (char *)loom_buffer_base(sh->buffer)));
}

static int alloc_plan(loom_sched_t *s)
{
	struct sched_plan *p = &s->plan;
	size_t n = loom_graph_n_nodes(p->g);
	int st;

	for (size_t pc = 0; pc < p->n_pieces; pc++) {
		struct sched_piece *piece = &p->pieces[pc];

		/* Aliases of earlier pieces' results take their place. */
		for (size_t i = 0; i < p->n_aliases; i++) {
			struct sched_copy *a = &p->aliases[i];

			if (!a->to->data && a->from->data &&
			    (st = place_alias(a->from, a->to)))
				return st;
		}
		if (!piece->ga) {
			st = loom_galloc_new(loom_dev_buffer_type(
						     dev_of(s, piece->be)),
					     &piece->ga);
			if (st)
				return st;
		}
		st = loom_galloc_alloc_graph(piece->ga, piece->g);
		if (st)
			return st;
	}
	for (size_t i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(p->g, i);

		if (p->shadow[i] && (st = place_caller(t, p->shadow[i])))
			return st;
	}
	for (size_t i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(p->g, i);

		if (!p->shadow[i] && !t->data && t->view_src &&
		    t->view_src->data && (st = loom_tensor_init_view(t)))
			return st;
	}
	s->allocated = true;
	return LOOM_OK;
}

static bool plan_is_for(const loom_sched_t *s, loom_graph_t *g)
{
	return s->planned && s->plan.g == g &&
	       s->plan.version == loom_graph_version(g);
}

int loom_sched_reserve(loom_sched_t *s, loom_graph_t *g)
{
	int st;

	if (!s || !g)
		return loom_error_set(LOOM_E_INVAL, "loom_sched_reserve: "
				      "scheduler or graph is NULL");
	if (plan_is_for(s, g))
		return LOOM_OK;
	st = plan(s, g);
	for (size_t pc = 0; !st && pc < s->plan.n_pieces; pc++) {
		struct sched_piece *piece = &s->plan.pieces[pc];

		st = loom_galloc_new(loom_dev_buffer_type(dev_of(s, piece->be)),
				     &piece->ga);
		if (!st)
			st = loom_galloc_reserve(piece->ga, piece->g);
	}
	return st;
}

int loom_sched_alloc_graph(loom_sched_t *s, loom_graph_t *g)
{
	int st;

	if (!s || !g)
		return loom_error_set(LOOM_E_INVAL, "loom_sched_alloc_graph: "
				      "scheduler or graph is NULL");
	if (plan_is_for(s, g) && s->allocated)
		return LOOM_OK;
	if (!plan_is_for(s, g) && (st = plan(s, g)))
		return st;
	st = alloc_plan(s);
	if (st)
		s->planned = false;
	return st;
}

int loom_sched_compute(loom_sched_t *s, loom_graph_t *g)
{
	struct sched_plan *p;
	int st = loom_sched_alloc_graph(s, g);

	if (st)
		return st;
	p = &s->plan;
	for (size_t pc = 0; pc < p->n_pieces; pc++) {
		struct sched_piece *piece = &p->pieces[pc];

		if (piece->n_copies) {
			/* What earlier pieces wrote must be done first. */
			for (size_t j = 0; j < s->n_be; j++)
				if ((st = loom_backend_synchronize(s->be[j])))
					return st;
			for (size_t c = 0; c < piece->n_copies; c++) {
				struct sched_copy *cp =
					&p->copies[piece->copy0 + c];

				st = loom_tensor_copy(cp->from, cp->to);
				if (st)
					return st;
			}
		}
		st = loom_backend_graph_compute_async(s->be[piece->be],
						      piece->g);
		if (st)
			return st;
	}
	for (size_t j = 0; j < s->n_be; j++)
		if ((st = loom_backend_synchronize(s->be[j])))
			return st;
	return LOOM_OK;
}

size_t loom_sched_n_pieces(const loom_sched_t *s)
{
	return s && s->planned ? s->plan.n_pieces : 0;
}

size_t loom_sched_n_copies(const loom_sched_t *s)
{
	return s && s->planned ? s->plan.n_copies : 0;
}

uint64_t loom_sched_n_plans(const loom_sched_t *s)
{
	return s ? s->n_plans : 0;
}

loom_backend_t *loom_sched_node_backend(const loom_sched_t *s,
					const struct loom_tensor *node)
{
	int i;

	if (!s || !s->planned || !node)
		return NULL;
	i = node_index(&s->plan, node);
	if (i < 0 || s->plan.node_be[i] < 0)
		return NULL;
	return s->be[s->plan.node_be[i]];
}

size_t loom_sched_buffer_size(const loom_sched_t *s, size_t i)
{
	size_t sum = 0;

	if (!s || !s->planned)
		return 0;
	for (size_t pc = 0; pc < s->plan.n_pieces; pc++)
		if (s->plan.pieces[pc].be == i && s->plan.pieces[pc].ga)
			sum += loom_galloc_buffer_size(s->plan.pieces[pc].ga);
	return sum;
}
