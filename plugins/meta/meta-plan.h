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

struct meta_plan {
	struct meta_dev *md;
	loom_graph_t *g;
	uint64_t version;
	bool dry;
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
	size_t map_cap;
	struct map_entry *map;
	/* P tensors waiting to be reduced before the next piece */
	int n_pending, cap_pending;
	struct meta_reduce *pending;
};

/* Builds (dry: only checks) the plan of g on md.  The per-device graphs
 * get their memory later, from meta_backend's allocators.  The caller
 * frees *out with meta_plan_free(). */
int meta_plan_build(struct meta_dev *md, loom_graph_t *g, bool dry,
		    struct meta_plan **out);
void meta_plan_free(struct meta_plan *pl);
/* Points every node's extra at its record (after the plan ran). */
void meta_plan_publish(struct meta_plan *pl);

#endif
