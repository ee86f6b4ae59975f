/* SPDX-License-Identifier: MIT */
/* meta.h - the meta plugin's internal types: meta devices, split states
 * with their per-device slices, meta buffers and the per-tensor records
 * that tensors reach through handles.  Nothing here leaves the plugin.
 */
#ifndef LOOM_META_H
#define LOOM_META_H

#include "loom/loom-plugin.h"

#include <pthread.h>

#define META_MAX_DEVS 16      /* members in this process */
#define META_MAX_MEMBERS 64   /* members of every rank of a world */
#define META_MAX_SEG LOOM_SPLIT_MAX_SEGMENTS

/* A split state with its slices.  For SPLIT(d) the axis is cut into
 * n_seg segments, and segment s gives len[s][J] elements to member J, in
 * member order over the whole world (rank 0's members first; without a
 * world, this process's); a member holds its pieces of every segment one
 * after the other.  Every rank computes the same state, so that their
 * decisions agree.  MIRRORED and PARTIAL tensors are whole on every
 * member. */
struct meta_state {
	enum loom_split_state state;
	int n_seg;
	int64_t len[META_MAX_SEG][META_MAX_MEMBERS];
};

/* The world of a meta device spanning ranks (see meta-world.c): every
 * rank's meta device holds its own members, and the slices are cut over
 * all members of all ranks.  Rank r's members are [first[r], first[r+1])
 * of the world's member order. */
struct meta_world {
	loom_reg_t *reg;          /* the world's plugin */
	loom_world_allreduce_fn allreduce;
	loom_world_bcast_fn bcast;
	loom_world_gather_fn gather; /* NULL: one bcast per rank instead */
	int rank, n_ranks;
	int *first;               /* n_ranks + 1 entries */
	/* Every member's plugin offers "allreduce_world": it reduces across
	 * the ranks by itself (NCCL), and MPI stays off the data path. */
	loom_allreduce_world_fn plugin_reduce;
	uint64_t digest;          /* the same on every rank */
};

struct meta_dev {
	loom_dev_t *dev;      /* the registered device */
	loom_buffer_type_t *buft;
	/* The weight buffer type ("weight_buffer_type"): its buffers keep
	 * each member's slices in that member's weight buffer type.  NULL
	 * when every member's is its plain buffer type. */
	loom_buffer_type_t *wbuft;
	int n;
	loom_dev_t *members[META_MAX_DEVS];
	loom_split_fn split;
	void *userdata;
	float ratios[META_MAX_DEVS];
	bool has_ratios;
	enum loom_type reduce_type;
	size_t bf16_min_bytes;
	bool force_fallback;
	/* With a world: n_all members over all ranks, this process's from
	 * global index first on, and every member's ratio (1 without
	 * ratios).  Without one, n_all = n and first = 0. */
	struct meta_world *world;
	int n_all, first;
	float ratios_all[META_MAX_MEMBERS];
	char name[LOOM_MAX_NAME];
	char wname[LOOM_MAX_NAME + 8];
	char *desc;
	size_t max_align;
	size_t min_max_size;
};

/* What the meta device knows of a tensor placed in a meta buffer or of a
 * node the meta backend computes: a record, which its owner (the buffer,
 * or the plan of the graph) keeps and frees, and which the tensor reaches
 * through a handle in t->state (see loom-plugin.h), never a pointer.
 * dev_t[j] is the tensor's counterpart on member j (NULL when that device
 * holds nothing of it).
 *
 * raw is the state as computed; synced the state a reader sees, which is
 * raw until an allreduce of a PARTIAL value is due and MIRRORED from then
 * on.  A leaf's two are the same. */
struct meta_tensor {
	struct meta_dev *md;
	struct meta_state raw;
	struct meta_state synced;
	struct loom_tensor *dev_t[META_MAX_DEVS];
	/* PARTIAL nodes a device skipped hold zero there. */
	bool zero[META_MAX_DEVS];
	/* For tensors placed in a meta buffer: the buffer, its handle for
	 * the record, the member buffers of a compute buffer's tensor
	 * (weights share their meta buffer's chunks), the bytes each slice
	 * takes, the byte offset in the meta buffer, and whether the slices
	 * still wait for memory. */
	struct meta_buffer *owner;
	loom_state_t handle;
	loom_buffer_t *dev_buf[META_MAX_DEVS];
	size_t bytes[META_MAX_DEVS];
	size_t offs;
	bool pending;
	struct meta_tensor *next; /* in its owner's list */
};

/* One member buffer per device holding slices placed together. */
struct meta_chunk {
	loom_buffer_t *buf[META_MAX_DEVS];
	struct meta_chunk *next;
};

/* A meta buffer: no memory of its own.  Weights' slices wait until their
 * data is first touched, then all that wait get one buffer per device
 * (a chunk) sized for exactly those slices; a compute buffer's inputs get
 * member buffers of their own, reused when a graph is placed again. */
struct meta_buffer {
	struct meta_dev *md;
	/* the members' buffer types its slices live in: their weight
	 * buffer types for a buffer of md->wbuft, else their own */
	loom_buffer_type_t *dbuft[META_MAX_DEVS];
	size_t size;
	void *fake_base;
	loom_ctx_t *ctx;        /* descriptors of the slices */
	pthread_mutex_t lock;
	loom_state_scope_t *scope; /* the handles of its records */
	struct meta_tensor *tensors;
	struct meta_chunk *chunks;
	size_t dev_bytes[META_MAX_DEVS];
	/* Over a world: a digest of the leaves placed since the ranks last
	 * compared theirs (names, types, shapes, states), and their count. */
	uint64_t digest;
	size_t n_unagreed;
};

/* meta-plugin.c */
struct meta_dev *meta_dev_of(loom_dev_t *dev);

/* The default split policy (meta-policy.c): loom_meta_split_default. */
int meta_split_default(const struct loom_tensor *t, struct loom_split *out,
		       void *userdata);

/* meta-state.c */
void meta_state_whole(struct meta_state *st, enum loom_split_state state);
/* Elements of the split axis local member j holds, over all segments. */
int64_t meta_state_dev_len(const struct meta_state *st,
			   const struct meta_dev *md, int j);
/* Where local member j's piece of segment s starts within the segment. */
int64_t meta_state_dev_start(const struct meta_state *st,
			     const struct meta_dev *md, int s, int j);
/* Elements of segment s, over every member of the world. */
int64_t meta_state_seg_len(const struct meta_state *st,
			   const struct meta_dev *md, int s);
bool meta_state_same_slices(const struct meta_state *a,
			    const struct meta_state *b,
			    const struct meta_dev *md);
const char *meta_state_name(enum loom_split_state s);
/* Cuts units into n shares following the weights w (largest remainder). */
void meta_largest_remainder(int64_t units, const float *w, int n,
			    int64_t *out);
/* A state that cuts n values along axis over the world's members by the
 * device's ratios, in whole units of unit values (the last member takes
 * what is left of n past a whole unit). */
void meta_state_cut(const struct meta_dev *md, enum loom_split_state axis,
		    int64_t n, int64_t unit, struct meta_state *out);

/* meta-split.c */
int meta_split_of(struct meta_dev *md, const struct loom_tensor *t, bool ask,
		  struct meta_state *out);
int64_t meta_axis_bytes(const struct loom_tensor *t, int axis, int64_t pos);
/* Set/get of a tensor of a meta buffer or a computed node, blocking or,
 * with bes (one member backend per device), asynchronous. */
int meta_tensor_set(const struct loom_tensor *t, const void *data,
		    size_t offset, size_t size, loom_backend_t *const *bes);
int meta_tensor_get(const struct loom_tensor *t, void *data, size_t offset,
		    size_t size, loom_backend_t *const *bes);
int meta_tensor_memset(const struct loom_tensor *t, uint8_t value,
		       size_t offset, size_t size);

/* The tag of the meta plugin's handles (loom_state_scope_new). */
extern const char meta_state_tag;

/* meta-buffer.c */
/* Makes md's buffer type and, where a member prefers another buffer
 * type for weights, md's weight buffer type. */
int meta_buft_new(struct meta_dev *md, loom_reg_t *reg);
/* The "weight_buffer_type" entry point: md->wbuft of a meta device. */
loom_buffer_type_t *meta_weight_buffer_type(loom_dev_t *dev);
/* t's record, or NULL (none, another plugin's, or released: *status says
 * which, LOOM_E_NOT_FOUND or LOOM_E_STATE, when not NULL). */
struct meta_tensor *meta_tensor_of(const struct loom_tensor *t, int *status);
/* Device j's descriptor of its slice of t in state st, made in ctx; *out
 * NULL when the slice is empty. */
int meta_slice_new(loom_ctx_t *ctx, struct meta_dev *md,
		   const struct loom_tensor *t, const struct meta_state *st,
		   int j, struct loom_tensor **out);
int meta_tensor_ready(struct meta_tensor *mt);
int meta_tensor_data(const struct loom_tensor *t, struct meta_tensor **out);
int meta_buffer_dev_sizes(loom_buffer_t *buf, size_t *sizes, size_t n);
/* The "meta_tensor_slice" entry point. */
int meta_tensor_slice(const struct loom_tensor *t, size_t j,
		      struct loom_tensor **out);

/* meta-world.c */
/* Joins md (its members and options read, md->n set) to the world of reg:
 * every rank's members and ratios are gathered, and what must agree
 * between ranks is compared; a rank that differs fails the creation on
 * every rank, saying which and how. */
int meta_world_join(struct meta_dev *md, loom_reg_t *reg);
void meta_world_free(struct meta_world *w);
/* Compares a digest of what ranks must agree on (what names it, for the
 * message) across the world; an error on every rank when one differs. */
int meta_world_agree(struct meta_dev *md, uint64_t digest, const char *what);
/* Sums n F32 values in place over the world. */
int meta_world_sum(struct meta_dev *md, float *data, size_t n);
/* Fills in data the pieces other ranks hold of n_rows rows (unit bytes
 * apart) of a split tensor t in state st, each rank having read its own
 * pieces there: every rank ends with the whole rows. */
int meta_world_gather(struct meta_dev *md, const struct loom_tensor *t,
		      const struct meta_state *st, void *data, size_t n_rows,
		      size_t unit);
uint64_t meta_hash(uint64_t h, const void *p, size_t n);

/* meta-backend.c */
int meta_backend_new(struct meta_dev *md, loom_backend_t **out);
int meta_check(loom_dev_t *dev, loom_graph_t *g);
int meta_backend_dev_sizes(loom_backend_t *be, size_t *sizes, size_t n);

#endif
