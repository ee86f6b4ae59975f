/* SPDX-License-Identifier: MIT */
/* galloc.c - the graph allocator: plans where a graph's intermediates
 * live in one compute buffer, reusing the memory of tensors once their
 * last consumer has run, and places them. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "loom-private.h"

struct loom_galloc {
	loom_buffer_type_t *buft;
	loom_buffer_t *buffer;
	size_t alignment;
	/* Buffers outgrown: their memory is freed, their wrappers kept, so
	 * that tensors an earlier graph placed there are known as ours. */
	struct loom__ptrmap retired;
};

/* A tensor that owns data (never a view) as the plan sees it. */
struct rec {
	struct loom_tensor *t;
	size_t offset;
	size_t size;
	int uses;    /* reads by nodes not yet walked */
	bool ours;   /* without data: the plan places it */
	bool keep;   /* input or output: never reused */
	bool live;   /* holds memory at this point of the walk */
	bool placed; /* has been given memory (once per plan) */
	bool is_node;
};

struct block {
	size_t offset;
	size_t size;
};

/* The plan: records, and a best-fit free list below a moving top. */
struct plan {
	struct loom__ptrmap index; /* owner -> position in recs */
	struct rec *recs;
	int n_recs;
	int cap_recs;

	struct block *blocks; /* free, sorted by offset, below top */
	int n_blocks;
	int cap_blocks;
	size_t top;  /* end of the memory in use */
	size_t high; /* the most top has been */
};

int loom_galloc_new(loom_buffer_type_t *buft, loom_galloc_t **out)
{
	loom_galloc_t *ga;
	size_t align;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_galloc_new: out is NULL");
	*out = NULL;
	if (!buft)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_galloc_new: buffer type is NULL");
	align = loom_buffer_type_alignment(buft);
	if (!align || (align & (align - 1)))
		return loom_error_set(LOOM_E_PLUGIN,
				      "loom_galloc_new: buffer type %s has "
				      "alignment %zu, not a power of two",
				      loom_buffer_type_name(buft), align);
	ga = calloc(1, sizeof(*ga));
	if (!ga)
		return loom_error_set(LOOM_E_NOMEM,
				      "loom_galloc_new: out of memory");
	ga->buft = buft;
	ga->alignment = align;
	if (loom__handle_add(ga, LOOM__KIND_GALLOC)) {
		free(ga);
		return LOOM_E_NOMEM;
	}
	*out = ga;
	return LOOM_OK;
}

static bool live(const loom_galloc_t *ga)
{
	return loom__handle_live(ga, LOOM__KIND_GALLOC);
}

void loom_galloc_free(loom_galloc_t *ga)
{
	if (!ga)
		return;
	if (!loom__handle_take(ga, LOOM__KIND_GALLOC)) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_galloc_free: %p is not a live graph "
			       "allocator (freed already?)",
			       (void *)ga);
		return;
	}
	loom_buffer_free(ga->buffer);
	for (size_t i = 0; i < ga->retired.cap; i++) {
		const void *old = ga->retired.keys[i];

		if (old)
			loom__buffer_forget((loom_buffer_t *)old);
	}
	loom__ptrmap_free(&ga->retired);
	free(ga);
}

/* True when buf is this allocator's buffer, or one it has outgrown. */
static bool is_ours(const loom_galloc_t *ga, const loom_buffer_t *buf)
{
	return buf && (buf == ga->buffer ||
		       loom__ptrmap_find(&ga->retired, buf));
}

bool loom__galloc_owns(const loom_galloc_t *ga, const loom_buffer_t *buf)
{
	return live(ga) && is_ours(ga, buf);
}

size_t loom_galloc_buffer_size(loom_galloc_t *ga)
{
	return live(ga) && ga->buffer ? loom_buffer_size(ga->buffer) : 0;
}

loom_buffer_t *loom_galloc_buffer(loom_galloc_t *ga)
{
	return live(ga) ? ga->buffer : NULL;
}

/* ------------------------------------------------------------------------
 * The free list.
 */
static int block_insert(struct plan *p, int at, size_t offset, size_t size)
{
	if (p->n_blocks == p->cap_blocks) {
		int cap = p->cap_blocks ? 2 * p->cap_blocks : 16;
		struct block *b = realloc(p->blocks, (size_t)cap * sizeof(*b));

		if (!b)
			return LOOM_E_NOMEM;
		p->blocks = b;
		p->cap_blocks = cap;
	}
	memmove(&p->blocks[at + 1], &p->blocks[at],
		(size_t)(p->n_blocks - at) * sizeof(p->blocks[0]));
	p->blocks[at] = (struct block){ .offset = offset, .size = size };
	p->n_blocks++;
	return LOOM_OK;
}

static void block_remove(struct plan *p, int at)
{
	memmove(&p->blocks[at], &p->blocks[at + 1],
		(size_t)(p->n_blocks - at - 1) * sizeof(p->blocks[0]));
	p->n_blocks--;
}

/* Takes the smallest free block that fits; failing that, grows the top
 * (starting inside a free block that ends at the top, if there is one). */
static size_t plan_alloc(struct plan *p, size_t size)
{
	int best = -1;
	size_t offset;

	for (int i = 0; i < p->n_blocks; i++)
		if (p->blocks[i].size >= size &&
		    (best < 0 || p->blocks[i].size < p->blocks[best].size))
			best = i;
	if (best >= 0) {
		offset = p->blocks[best].offset;
		p->blocks[best].offset += size;
		p->blocks[best].size -= size;
		if (!p->blocks[best].size)
			block_remove(p, best);
		return offset;
	}
	if (p->n_blocks) {
		struct block *last = &p->blocks[p->n_blocks - 1];

		if (last->offset + last->size == p->top) {
			p->top = last->offset;
			block_remove(p, p->n_blocks - 1);
		}
	}
	offset = p->top;
	if (__builtin_add_overflow(p->top, size, &p->top))
		p->top = SIZE_MAX;
	if (p->top > p->high)
		p->high = p->top;
	return offset;
}

/* Returns memory, merging it with free neighbours and the top. */
static int plan_free(struct plan *p, size_t offset, size_t size)
{
	int at = 0;

	if (offset + size == p->top) {
		p->top = offset;
		if (p->n_blocks) {
			struct block *last = &p->blocks[p->n_blocks - 1];

			if (last->offset + last->size == p->top) {
				p->top = last->offset;
				block_remove(p, p->n_blocks - 1);
			}
		}
		return LOOM_OK;
	}
	while (at < p->n_blocks && p->blocks[at].offset < offset)
		at++;
	if (at > 0 && p->blocks[at - 1].offset + p->blocks[at - 1].size ==
			      offset) {
		p->blocks[at - 1].size += size;
		if (at < p->n_blocks &&
		    offset + size == p->blocks[at].offset) {
			p->blocks[at - 1].size += p->blocks[at].size;
			block_remove(p, at);
		}
		return LOOM_OK;
	}
	if (at < p->n_blocks && offset + size == p->blocks[at].offset) {
		p->blocks[at].offset = offset;
		p->blocks[at].size += size;
		return LOOM_OK;
	}
	return block_insert(p, at, offset, size);
}

/* ------------------------------------------------------------------------
 * Planning.
 */
static void plan_free_all(struct plan *p)
{
	loom__ptrmap_free(&p->index);
	free(p->recs);
	free(p->blocks);
	memset(p, 0, sizeof(*p));
}

/* The record of the tensor owning t's data, made on first sight.  The
 * plan owns tensors without data and tensors already in this allocator's
 * buffer (placed by an earlier call: the same graph plans the same way, so
 * they stay where they are, and a grown graph cannot overlap them) or in
 * one it has outgrown (placed again in the current one). */
static struct rec *rec_get(loom_galloc_t *ga, struct plan *p,
			   struct loom_tensor *t)
{
	struct loom_tensor *o = loom__owner(t);
	int *at = loom__ptrmap_find(&p->index, o);
	struct rec *r;

	if (at)
		return &p->recs[*at];
	if (p->n_recs == p->cap_recs) {
		int cap = p->cap_recs ? 2 * p->cap_recs : 64;
		struct rec *v = realloc(p->recs, (size_t)cap * sizeof(*v));

		if (!v)
			return NULL;
		p->recs = v;
		p->cap_recs = cap;
	}
	if (loom__ptrmap_put(&p->index, o, p->n_recs))
		return NULL;
	r = &p->recs[p->n_recs++];
	memset(r, 0, sizeof(*r));
	r->t = o;
	r->ours = !o->data || is_ours(ga, o->buffer);
	r->keep = o->flags & (LOOM_TENSOR_INPUT | LOOM_TENSOR_OUTPUT);
	if (r->ours) {
		size_t size = loom_buffer_type_alloc_size(ga->buft, o);
		size_t mask = ga->alignment - 1;

		if (size < loom_tensor_n_bytes(o))
			size = loom_tensor_n_bytes(o);
		if (!size)
			size = 1;
		/* No tensor a constructor made is this large; a hand-made
		 * one saturates, and no buffer type will hold the plan. */
		r->size = size > SIZE_MAX - mask ? SIZE_MAX & ~mask
						 : (size + mask) & ~mask;
	}
	return r;
}

static int plan_place(struct plan *p, struct rec *r)
{
	if (!r->ours || r->placed)
		return LOOM_OK;
	r->offset = plan_alloc(p, r->size);
	r->live = true;
	r->placed = true;
	return LOOM_OK;
}

/* Walks g as it will run: leaves first (they are written before compute,
 * so their memory is theirs from the start), then each node, whose
 * sources are released after it when no later node reads them. */
static int plan_graph(loom_galloc_t *ga, loom_graph_t *g, struct plan *p)
{
	int n_nodes = loom_graph_n_nodes(g);
	int n_leafs = loom_graph_n_leaves(g);
	struct loom__ptrmap read = { 0 }; /* tensors some node reads */
	struct rec *r;
	int err;

	/* Records, reads and pinned owners. */
	for (int i = 0; i < n_leafs; i++)
		if (!rec_get(ga, p, loom_graph_leaf(g, i)))
			goto err_nomem;
	for (int i = 0; i < n_nodes; i++) {
		struct loom_tensor *n = loom_graph_node(g, i);

		r = rec_get(ga, p, n);
		if (!r)
			goto err_nomem;
		if (!n->view_src)
			r->is_node = true;
		if (n->flags & (LOOM_TENSOR_INPUT | LOOM_TENSOR_OUTPUT))
			r->keep = true;
		for (int j = 0; j < LOOM__N_INPUTS; j++) {
			struct loom_tensor *in = loom__tensor_input(n, j);

			if (!in)
				continue;
			r = rec_get(ga, p, in);
			if (!r || loom__ptrmap_put(&read, in, 1))
				goto err_nomem;
			r->uses++;
		}
	}
	/* A view node nobody reads is a result (a reshaped output, a copy
	 * into a tensor of this graph): what it views must stay, as an
	 * ordinary node nobody reads does. */
	for (int i = 0; i < n_nodes; i++) {
		struct loom_tensor *n = loom_graph_node(g, i);

		if (n->view_src && !loom__ptrmap_find(&read, n))
			rec_get(ga, p, n)->keep = true;
	}
	loom__ptrmap_free(&read);

	/* Owners no node computes (leaves, and the view sources of nodes
	 * when those are outside the graph) hold memory from the start. */
	for (int i = 0; i < p->n_recs; i++)
		if (!p->recs[i].is_node)
			plan_place(p, &p->recs[i]);

	for (int i = 0; i < n_nodes; i++) {
		struct loom_tensor *n = loom_graph_node(g, i);

		r = rec_get(ga, p, n);
		plan_place(p, r);
		for (int j = 0; j < LOOM__N_INPUTS; j++) {
			struct loom_tensor *in = loom__tensor_input(n, j);

			if (!in)
				continue;
			r = rec_get(ga, p, in);
			if (--r->uses > 0 || !r->live || r->keep)
				continue;
			err = plan_free(p, r->offset, r->size);
			if (err)
				goto err_nomem;
			r->live = false;
		}
	}
	return LOOM_OK;

err_nomem:
	loom__ptrmap_free(&read);
	return loom_error_set(LOOM_E_NOMEM, "galloc: out of memory");
}

/* Makes the buffer at least size bytes. */
static int ensure_buffer(loom_galloc_t *ga, size_t size)
{
	loom_buffer_t *buf;
	int err;

	if (ga->buffer && loom_buffer_size(ga->buffer) >= size)
		return LOOM_OK;
	if (size > loom_buffer_type_max_size(ga->buft))
		return loom_error_set(LOOM_E_NOMEM,
				      "galloc: the graph needs %zu bytes, more "
				      "than %s can allocate at once (%zu)",
				      size, loom_buffer_type_name(ga->buft),
				      loom_buffer_type_max_size(ga->buft));
	if (ga->buffer) {
		if (loom__ptrmap_put(&ga->retired, ga->buffer, 1))
			return loom_error_set(LOOM_E_NOMEM,
					      "galloc: out of memory");
		loom__buffer_release(ga->buffer);
		ga->buffer = NULL;
	}
	err = loom_buffer_type_alloc_buffer(ga->buft, size, &buf);
	if (err)
		return err;
	loom_buffer_set_usage(buf, LOOM_BUFFER_USAGE_COMPUTE);
	ga->buffer = buf;
	loom_log(LOOM_LOG_DEBUG, "galloc: %s compute buffer of %zu bytes",
		 loom_buffer_type_name(ga->buft), size);
	return LOOM_OK;
}

int loom_galloc_reserve(loom_galloc_t *ga, loom_graph_t *g)
{
	struct plan p = { 0 };
	int err;

	if (!live(ga) || !g)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_galloc_reserve: no live %s",
				      live(ga) ? "graph" : "allocator");
	err = plan_graph(ga, g, &p);
	if (!err)
		err = ensure_buffer(ga, p.high);
	plan_free_all(&p);
	return err;
}

/* A view needs (new) data when it has none or when its owner lives in
 * the compute buffer, where it may just have moved. */
static bool needs_view(loom_galloc_t *ga, struct loom_tensor *v)
{
	struct loom_tensor *o = loom__owner(v);

	return o->data && (!v->data || is_ours(ga, o->buffer));
}

int loom_galloc_alloc_graph(loom_galloc_t *ga, loom_graph_t *g)
{
	struct plan p = { 0 };
	int err;

	if (!live(ga) || !g)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_galloc_alloc_graph: no live %s",
				      live(ga) ? "graph" : "allocator");
	err = plan_graph(ga, g, &p);
	if (err)
		goto out;
	err = ensure_buffer(ga, p.high);
	if (err)
		goto out;
	for (int i = 0; i < p.n_recs && !err; i++)
		if (p.recs[i].ours)
			err = loom_tensor_place(p.recs[i].t, ga->buffer,
						p.recs[i].offset);
	for (size_t i = 0; i < loom_graph_n_nodes(g) && !err; i++) {
		struct loom_tensor *n = loom_graph_node(g, i);

		if (n->view_src && needs_view(ga, n))
			err = loom_tensor_init_view(n);
	}
	for (size_t i = 0; i < loom_graph_n_leaves(g) && !err; i++) {
		struct loom_tensor *l = loom_graph_leaf(g, i);

		if (l->view_src && needs_view(ga, l))
			err = loom_tensor_init_view(l);
	}
out:
	plan_free_all(&p);
	return err;
}
