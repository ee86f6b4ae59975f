/* SPDX-License-Identifier: MIT */
/* meta-plan.h - a plan: one meta graph cut into pieces at its allreduces,
 * with one graph per member device for each piece.  Built by meta-plan.c,
 * run by meta-backend.c.
 */
#ifndef LOOM_META_PLAN_H
#define LOOM_META_PLAN_H

#include "meta.h"

/* A P tensor summed across the devices before a piece runs.  zfill[j]:
 * device j held no summand; its tensor is zeroed first. */
struct meta_reduce {
	struct meta_tensor *mt;
	struct loom_tensor *t;  /* the meta tensor, for messages */
	bool zfill[META_MAX_DEVS];
};

struct meta_piece {
	int n_reduce;
	struct meta_reduce *reduce;
	loom_graph_t *g[META_MAX_DEVS];
	int n_nodes[META_MAX_DEVS];
};

struct map_entry {
	const struct loom_tensor *key;
	struct meta_tensor *mt;
};

struct meta_plan;

/* What a walk of a graph hands its results to.  The real planning
 * (meta_emit_graphs) readies the leaves' memory, adds every device's
 * nodes to its graphs and gives the zero-filled summands memory.  The dry
 * run of loom_meta_check (meta_emit_nothing) is the same walk, making the
 * same per-device descriptors and finding the same errors, and keeps
 * nothing. */
struct meta_emitter {
	/* the record of leaf t: mt from a meta buffer of the plan's device,
	 * or NULL when t is in none (LOOM_OK then gives it a record from
	 * the split callback) */
	int (*leaf)(struct meta_plan *pl, const struct loom_tensor *t,
		    struct meta_tensor *mt);
	/* a piece begins */
	int (*piece)(struct meta_plan *pl, struct meta_piece *p);
	/* device j's node dt, in the last piece */
	int (*node)(struct meta_plan *pl, int j, struct loom_tensor *dt);
	/* after the last node */
	int (*finish)(struct meta_plan *pl);
};

extern const struct meta_emitter meta_emit_graphs;
extern const struct meta_emitter meta_emit_nothing;

/* A leaf of a meta buffer, with the handle of its record at planning:
 * a cached plan holds on only while every leaf still has that handle. */
struct meta_leaf {
	const struct loom_tensor *t;
	loom_state_t h;
};

struct meta_plan {
	struct meta_dev *md;
	loom_graph_t *g;
	uint64_t version;
	const struct meta_emitter *em;
	loom_ctx_t *ctx[META_MAX_DEVS];
	loom_ctx_t *zctx[META_MAX_DEVS];     /* zero-filled summands */
	loom_buffer_t *zbuf[META_MAX_DEVS];
	/* Where device j's graph was last placed: the backend's shared
	 * allocator's buffer then, and its generation (see meta-backend.c). */
	loom_buffer_t *placed_in[META_MAX_DEVS];
	uint64_t placed_gen[META_MAX_DEVS];
	loom_graph_t *full[META_MAX_DEVS];
	int n_pieces, cap_pieces;
	struct meta_piece *pieces;
	struct meta_tensor *records;          /* owned records */
	/* The handles that nodes' t->state hold while this plan's results
	 * are the ones in the devices' compute memory (NULL otherwise). */
	loom_state_scope_t *pub;
	size_t n_leaves, cap_leaves;
	struct meta_leaf *leaves;
	size_t map_cap;
	struct map_entry *map;
	/* P tensors waiting to be reduced before the next piece */
	int n_pending, cap_pending;
	struct meta_reduce *pending;
};

/* Walks g on md, handing the results to em.  With meta_emit_graphs the
 * per-device graphs get their memory later, from meta_backend's
 * allocators.  The caller frees *out with meta_plan_free(). */
int meta_plan_build(struct meta_dev *md, loom_graph_t *g,
		    const struct meta_emitter *em, struct meta_plan **out);
/* Frees pl and its records; every handle it published goes stale. */
void meta_plan_free(struct meta_plan *pl);
/* True while every leaf of pl has the record it was planned with. */
bool meta_plan_leaves_valid(const struct meta_plan *pl);
/* Gives every node of g a handle to its record in t->state: pl's results
 * are the readable ones from now on. */
int meta_plan_publish(struct meta_plan *pl);
/* Makes the handles pl published stale (its results are overwritten). */
void meta_plan_unpublish(struct meta_plan *pl);

#endif
