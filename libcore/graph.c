/* SPDX-License-Identifier: MIT */
/* graph.c - compute graphs: nodes in dependency order and the leaves they
 * read, built without recursion so that deep models cannot overflow the
 * stack; and the address map the core shares for visited sets. */
#include "config.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "loom-private.h"

/* ------------------------------------------------------------------------
 * Address map.
 */
static size_t ptr_hash(const void *p, size_t mask)
{
	uint64_t x = (uint64_t)(uintptr_t)p;

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return (size_t)x & mask;
}

static size_t slot_of(const struct loom__ptrmap *m, const void *key)
{
	size_t mask = m->cap - 1;
	size_t i = ptr_hash(key, mask);

	while (m->keys[i] && m->keys[i] != key)
		i = (i + 1) & mask;
	return i;
}

int *loom__ptrmap_find(const struct loom__ptrmap *m, const void *key)
{
	size_t i;

	if (!m->cap)
		return NULL;
	i = slot_of(m, key);
	return m->keys[i] ? &m->vals[i] : NULL;
}

static int ptrmap_grow(struct loom__ptrmap *m)
{
	struct loom__ptrmap bigger = { .cap = m->cap ? 2 * m->cap : 64 };

	bigger.keys = calloc(bigger.cap, sizeof(*bigger.keys));
	bigger.vals = malloc(bigger.cap * sizeof(*bigger.vals));
	if (!bigger.keys || !bigger.vals) {
		free(bigger.keys);
		free(bigger.vals);
		return LOOM_E_NOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->keys[i]) {
			size_t j = slot_of(&bigger, m->keys[i]);

			bigger.keys[j] = m->keys[i];
			bigger.vals[j] = m->vals[i];
		}
	}
	bigger.n = m->n;
	free(m->keys);
	free(m->vals);
	*m = bigger;
	return LOOM_OK;
}

int loom__ptrmap_put(struct loom__ptrmap *m, const void *key, int val)
{
	size_t i;

	if (2 * (m->n + 1) > m->cap && ptrmap_grow(m))
		return LOOM_E_NOMEM;
	i = slot_of(m, key);
	if (!m->keys[i]) {
		m->keys[i] = key;
		m->n++;
	}
	m->vals[i] = val;
	return LOOM_OK;
}

void loom__ptrmap_clear(struct loom__ptrmap *m)
{
	if (m->cap)
		memset(m->keys, 0, m->cap * sizeof(*m->keys));
	m->n = 0;
}

void loom__ptrmap_free(struct loom__ptrmap *m)
{
	free(m->keys);
	free(m->vals);
	memset(m, 0, sizeof(*m));
}

/* ------------------------------------------------------------------------
 * Graphs.
 */

/* What the visited map says of a tensor: a node's index in the graph
 * (>= 0), or one of these. */
enum { IS_LEAF = -1, ON_STACK = -2 };

struct tensor_list {
	struct loom_tensor **v;
	int n;
	int cap;
};

/* One pending tensor of the depth-first walk and its next source. */
struct frame {
	struct loom_tensor *t;
	int next;
};

struct loom_graph {
	loom_ctx_t *ctx;
	struct tensor_list nodes;
	struct tensor_list leafs;
	struct loom__ptrmap seen; /* tensor -> node index or IS_LEAF */
	uint64_t version;
	_Atomic uint64_t checked; /* the key of the state last validated */

	struct frame *stack; /* kept between expands */
	int stack_cap;
};

/* Versions come from one counter, so that no two states of any two graphs
 * share one (a cache keyed on a freed graph's address stays safe). */
static _Atomic uint64_t version_counter;

static void bump(loom_graph_t *g)
{
	g->version = atomic_fetch_add(&version_counter, 1) + 1;
}

static int list_push(struct tensor_list *l, struct loom_tensor *t)
{
	if (l->n == l->cap) {
		int cap = l->cap ? 2 * l->cap : 64;
		struct loom_tensor **v;

		v = realloc(l->v, (size_t)cap * sizeof(*v));
		if (!v)
			return LOOM_E_NOMEM;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = t;
	return LOOM_OK;
}

int loom_graph_new(loom_ctx_t *ctx, loom_graph_t **out)
{
	loom_graph_t *g;
	int err;

	if (!out)
		return loom__ctx_errorf(ctx, LOOM_E_INVAL,
					"loom_graph_new: out is NULL");
	*out = NULL;
	if (!ctx)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_graph_new: ctx is NULL");
	g = calloc(1, sizeof(*g));
	if (!g)
		return loom__ctx_errorf(ctx, LOOM_E_NOMEM,
					"loom_graph_new: out of memory");
	g->ctx = ctx;
	bump(g);
	err = loom__ctx_own_graph(ctx, g);
	if (err) {
		free(g);
		return err;
	}
	*out = g;
	return LOOM_OK;
}

void loom__graph_free(loom_graph_t *g)
{
	if (!g)
		return;
	free(g->nodes.v);
	free(g->leafs.v);
	free(g->stack);
	loom__ptrmap_free(&g->seen);
	free(g);
}

struct loom_tensor *loom__tensor_input(struct loom_tensor *t, int i)
{
	if (i < LOOM_MAX_SRC)
		return t->src[i];
	if (i == LOOM_MAX_SRC && t->view_src) {
		for (int j = 0; j < LOOM_MAX_SRC; j++)
			if (t->src[j] == t->view_src)
				return NULL;
		return t->view_src;
	}
	return NULL;
}


static int push_frame(loom_graph_t *g, int *sp, struct loom_tensor *t)
{
	if (*sp == g->stack_cap) {
		int cap = g->stack_cap ? 2 * g->stack_cap : 64;
		struct frame *s = realloc(g->stack,
					  (size_t)cap * sizeof(*s));

		if (!s)
			return LOOM_E_NOMEM;
		g->stack = s;
		g->stack_cap = cap;
	}
	g->stack[*sp] = (struct frame){ .t = t, .next = 0 };
	(*sp)++;
	return LOOM_OK;
}

/* Records t as a node or a leaf of g. */
static int add_seen(loom_graph_t *g, struct loom_tensor *t)
{
	bool leaf = t->op == LOOM_OP_NONE;
	int err;

	err = list_push(leaf ? &g->leafs : &g->nodes, t);
	if (!err)
		err = loom__ptrmap_put(&g->seen, t,
				       leaf ? IS_LEAF : g->nodes.n - 1);
	return err;
}

/* Puts the map back to what the lists hold, after a failed walk. */
static void reseed(loom_graph_t *g)
{
	loom__ptrmap_clear(&g->seen);
	for (int i = 0; i < g->nodes.n; i++)
		loom__ptrmap_put(&g->seen, g->nodes.v[i], i);
	for (int i = 0; i < g->leafs.n; i++)
		loom__ptrmap_put(&g->seen, g->leafs.v[i], IS_LEAF);
}

/* A depth-first walk with an explicit stack: a tensor is emitted once all
 * its inputs are in the graph, so every node follows its sources.  A
 * tensor on the stack is marked, so that a cycle (which only hand-edited
 * sources can make) is reported instead of followed. */
int loom_graph_expand(loom_graph_t *g, struct loom_tensor *t)
{
	int sp = 0, err;
	int n_before;

	if (!g)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_graph_expand: graph is NULL");
	if (!t)
		return loom__ctx_errorf(g->ctx, LOOM_E_INVAL,
					"loom_graph_expand: tensor is NULL "
					"(%s)", loom_error_message());
	if (loom__ptrmap_find(&g->seen, t))
		return LOOM_OK;
	n_before = g->nodes.n + g->leafs.n;
	err = push_frame(g, &sp, t);
	if (!err)
		err = loom__ptrmap_put(&g->seen, t, ON_STACK);
	while (!err && sp > 0) {
		struct frame *f = &g->stack[sp - 1];
		struct loom_tensor *in = NULL;
		int *mark = NULL;

		while (f->next < LOOM__N_INPUTS) {
			in = loom__tensor_input(f->t, f->next++);
			if (in) {
				mark = loom__ptrmap_find(&g->seen, in);
				if (!mark || *mark == ON_STACK)
					break;
			}
			in = NULL;
		}
		if (in && mark) {
			err = loom__ctx_errorf(g->ctx, LOOM_E_INVAL,
					       "loom_graph_expand: tensor "
					       "\"%s\" (%s) depends on itself",
					       in->name, loom_op_name(in->op));
			break;
		}
		if (in) {
			err = push_frame(g, &sp, in);
			if (!err)
				err = loom__ptrmap_put(&g->seen, in, ON_STACK);
			continue;
		}
		sp--;
		err = add_seen(g, f->t);
	}
	if (err) {
		reseed(g);
		if (err == LOOM_E_NOMEM)
			loom__ctx_errorf(g->ctx, err,
					 "loom_graph_expand: out of memory");
	}
	if (g->nodes.n + g->leafs.n != n_before)
		bump(g);
	return err;
}

size_t loom_graph_n_nodes(const loom_graph_t *g)
{
	return g ? (size_t)g->nodes.n : 0;
}

struct loom_tensor *loom_graph_node(const loom_graph_t *g, size_t i)
{
	if (!g || i >= (size_t)g->nodes.n)
		return NULL;
	return g->nodes.v[i];
}

size_t loom_graph_n_leaves(const loom_graph_t *g)
{
	return g ? (size_t)g->leafs.n : 0;
}

struct loom_tensor *loom_graph_leaf(const loom_graph_t *g, size_t i)
{
	if (!g || i >= (size_t)g->leafs.n)
		return NULL;
	return g->leafs.v[i];
}

long loom__graph_find(const loom_graph_t *g, const struct loom_tensor *t)
{
	const int *mark = loom__ptrmap_find(&g->seen, t);

	if (!mark)
		return LOOM__NOT_IN_GRAPH;
	return *mark >= 0 ? *mark : LOOM__GRAPH_LEAF;
}

uint64_t loom__graph_checked(const loom_graph_t *g)
{
	return atomic_load_explicit(&g->checked, memory_order_relaxed);
}

void loom__graph_set_checked(loom_graph_t *g, uint64_t key)
{
	atomic_store_explicit(&g->checked, key, memory_order_relaxed);
}

uint64_t loom_graph_version(const loom_graph_t *g)
{
	return g ? g->version : 0;
}

/* Drops t from the leaves: it has become a node. */
static void remove_leaf(loom_graph_t *g, struct loom_tensor *t)
{
	for (int i = 0; i < g->leafs.n; i++) {
		if (g->leafs.v[i] == t) {
			memmove(&g->leafs.v[i], &g->leafs.v[i + 1],
				(size_t)(g->leafs.n - i - 1) *
					sizeof(g->leafs.v[0]));
			g->leafs.n--;
			return;
		}
	}
}

/* Appends t as a node without walking its sources.  Inputs of t that the
 * graph does not hold become leaves (the graph reads them and no node
 * computes them), until they are added as nodes themselves.  Adding a node
 * twice is a no-op. */
int loom_graph_add_node(loom_graph_t *g, struct loom_tensor *t)
{
	int *seen;
	int err;

	if (!g)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_graph_add_node: graph is NULL");
	if (!t)
		return loom__ctx_errorf(g->ctx, LOOM_E_INVAL,
					"loom_graph_add_node: tensor is NULL");
	seen = loom__ptrmap_find(&g->seen, t);
	if (seen && *seen >= 0)
		return LOOM_OK;
	if (seen)
		remove_leaf(g, t);
	err = list_push(&g->nodes, t);
	if (!err)
		err = loom__ptrmap_put(&g->seen, t, g->nodes.n - 1);
	for (int i = 0; !err && i < LOOM__N_INPUTS; i++) {
		struct loom_tensor *in = loom__tensor_input(t, i);

		if (in && !loom__ptrmap_find(&g->seen, in)) {
			err = list_push(&g->leafs, in);
			if (!err)
				err = loom__ptrmap_put(&g->seen, in, IS_LEAF);
		}
	}
	bump(g);
	if (err)
		return loom__ctx_errorf(g->ctx, err,
					"loom_graph_add_node: out of memory");
	return LOOM_OK;
}
