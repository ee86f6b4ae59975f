/* SPDX-License-Identifier: MIT */
/* meta-backend.c - the meta backend: one member backend per device, the
 * cache of plans, running the pieces on all devices at once, and the
 * allreduce between pieces (a member plugin's entry point, or the generic
 * path through host memory).
 */
#include "meta-plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_MAX_PLANS 4

struct meta_backend {
	struct meta_dev *md;
	loom_backend_t *be[META_MAX_DEVS];
	/* One graph allocator per member, shared by the cached plans: each
	 * plan is placed again when the buffer grew since it was placed
	 * (the generation counts growths). */
	loom_galloc_t *ga[META_MAX_DEVS];
	uint64_t ga_gen[META_MAX_DEVS];
	loom_buffer_t *ga_buf[META_MAX_DEVS];
	size_t ga_size[META_MAX_DEVS];
	struct meta_plan *plans[META_MAX_PLANS];
	uint64_t stamp[META_MAX_PLANS];
	/* The plan whose results the compute memory holds: the one whose
	 * nodes are readable (see meta_plan_publish). */
	struct meta_plan *last;
	uint64_t clock;
	/* The generic allreduce's staging: pinned memory when a member's
	 * plugin offers it (copies to and from it run asynchronously on
	 * every member at once), else malloc'd. */
	loom_buffer_t *pinned;
	size_t pin_failed; /* a size no member could pin */
	float *scratch;
	size_t scratch_n;
	uint16_t *wire;       /* BF16 values sent across a world */
	size_t wire_n;
};

static const char *be_get_name(loom_backend_t *be)
{
	struct meta_backend *mb = loom_backend_context(be);

	return mb->md->name;
}

static void be_free(loom_backend_t *be)
{
	struct meta_backend *mb = loom_backend_context(be);

	for (int i = 0; i < META_MAX_PLANS; i++)
		meta_plan_free(mb->plans[i]);
	for (int j = 0; j < mb->md->n; j++) {
		loom_galloc_free(mb->ga[j]);
		loom_backend_free(mb->be[j]);
	}
	loom_buffer_free(mb->pinned);
	free(mb->scratch);
	free(mb->wire);
	free(mb);
}

static int sync_members(struct meta_backend *mb)
{
	int rc = LOOM_OK;

	for (int j = 0; j < mb->md->n; j++) {
		int r = loom_backend_synchronize(mb->be[j]);

		if (r && !rc)
			rc = r;
	}
	return rc;
}

static int be_synchronize(loom_backend_t *be)
{
	return sync_members(loom_backend_context(be));
}

static int be_set_async(loom_backend_t *be, struct loom_tensor *t,
			const void *data, size_t offset, size_t size)
{
	struct meta_backend *mb = loom_backend_context(be);

	return meta_tensor_set(t, data, offset, size, mb->be);
}

static int be_get_async(loom_backend_t *be, const struct loom_tensor *t,
			void *data, size_t offset, size_t size)
{
	struct meta_backend *mb = loom_backend_context(be);

	return meta_tensor_get(t, data, offset, size, mb->be);
}

/* ---- allreduce ---- */

/* Pinned host memory of at least bytes from the first member that has
 * a host buffer type, or NULL. */
static float *pinned(struct meta_backend *mb, size_t bytes)
{
	if (mb->pinned && loom_buffer_size(mb->pinned) >= bytes)
		return loom_buffer_base(mb->pinned);
	if (mb->pin_failed && bytes >= mb->pin_failed)
		return NULL;
	loom_buffer_free(mb->pinned);
	mb->pinned = NULL;
	for (int j = 0; j < mb->md->n; j++) {
		loom_buffer_type_t *host =
			loom_dev_host_buffer_type(mb->md->members[j]);

		if (host && loom_buffer_type_alloc_buffer(host, bytes,
							  &mb->pinned) ==
				    LOOM_OK)
			return loom_buffer_base(mb->pinned);
		mb->pinned = NULL;
	}
	mb->pin_failed = bytes;
	return NULL;
}

static float *scratch(struct meta_backend *mb, size_t n)
{
	float *pin = pinned(mb, n * sizeof(float));

	if (pin)
		return pin;
	if (mb->scratch_n < n) {
		float *p = realloc(mb->scratch, n * sizeof(float));

		if (!p)
			return NULL;
		mb->scratch = p;
		mb->scratch_n = n;
	}
	return mb->scratch;
}

static float round_bf16(float v)
{
	return loom_bf16_to_f32(loom_f32_to_bf16(v));
}

/* Sums n F32 values at acc over the ranks of md's world, in BF16 on the
 * wire when bf16 is set (half the bytes). */
static int world_sum(struct meta_backend *mb, float *acc, size_t n, bool bf16)
{
	struct meta_world *w = mb->md->world;
	uint16_t *h;
	int rc;

	if (!bf16)
		return w->allreduce(w->reg, acc, n, LOOM_TYPE_F32);
	if (mb->wire_n < n) {
		h = realloc(mb->wire, n * sizeof(*h));
		if (!h)
			return loom_error_set(LOOM_E_NOMEM, "meta: allreduce: "
					      "no memory");
		mb->wire = h;
		mb->wire_n = n;
	}
	h = mb->wire;
	for (size_t i = 0; i < n; i++)
		h[i] = loom_f32_to_bf16(acc[i]);
	rc = w->allreduce(w->reg, h, n, LOOM_TYPE_BF16);
	for (size_t i = 0; !rc && i < n; i++)
		acc[i] = loom_bf16_to_f32(h[i]);
	return rc;
}

/* After a local reduce left the sum on every member: the world's sum of
 * member 0's, written back to every member.  Member 0's own memory is
 * summed in place when it is host memory. */
static int reduce_world(struct meta_backend *mb, struct loom_tensor *const *ts,
			size_t nbytes, bool bf16)
{
	int n_dev = mb->md->n, rc;
	size_t n = nbytes / sizeof(float);
	loom_buffer_t *b0 = ts[0]->buffer;
	bool host = b0 && ts[0]->data &&
		    loom_buffer_type_is_host(loom_buffer_get_type(b0));
	float *acc = host ? ts[0]->data : scratch(mb, n);

	if (!acc)
		return loom_error_set(LOOM_E_NOMEM, "meta: allreduce: no "
				      "memory");
	rc = sync_members(mb);
	if (!rc && !host)
		rc = loom_tensor_get(ts[0], acc, 0, nbytes);
	if (rc)
		return rc;
	rc = world_sum(mb, acc, n, bf16);
	for (int j = host ? 1 : 0; !rc && j < n_dev; j++)
		rc = loom_backend_tensor_set_async(mb->be[j], ts[j], acc, 0,
						   nbytes);
	if (rc)
		return rc;
	return sync_members(mb);
}

/* The generic allreduce, for any mix of plugins: every summand comes to
 * host memory by async copies on all devices at once, is summed in F32
 * (from BF16-rounded summands when asked), over a world summed across
 * the ranks, and goes back to all. */
static int reduce_generic(struct meta_backend *mb,
			  struct loom_tensor *const *ts, size_t nbytes,
			  bool bf16)
{
	int n_dev = mb->md->n, rc;
	size_t n = nbytes / sizeof(float);
	float *host = scratch(mb, n * (size_t)n_dev), *acc = host;

	if (!host)
		return loom_error_set(LOOM_E_NOMEM, "meta: allreduce: no "
				      "memory");
	for (int j = 0; j < n_dev; j++) {
		rc = loom_backend_tensor_get_async(mb->be[j], ts[j],
						   host + n * (size_t)j, 0,
						   nbytes);
		if (rc)
			return rc;
	}
	rc = sync_members(mb);
	if (rc)
		return rc;
	for (int j = 0; j < n_dev; j++) {
		float *v = host + n * (size_t)j;

		if (bf16)
			for (size_t i = 0; i < n; i++)
				v[i] = round_bf16(v[i]);
		if (j)
			for (size_t i = 0; i < n; i++)
				acc[i] += v[i];
	}
	if (mb->md->world) {
		rc = world_sum(mb, acc, n, bf16);
		if (rc)
			return rc;
	}
	for (int j = 0; j < n_dev; j++) {
		rc = loom_backend_tensor_set_async(mb->be[j], ts[j], acc, 0,
						   nbytes);
		if (rc)
			return rc;
	}
	return sync_members(mb);
}

static int allreduce(struct meta_backend *mb, struct meta_reduce *r)
{
	struct meta_dev *md = mb->md;
	struct loom_tensor *ts[META_MAX_DEVS];
	loom_reg_t *reg = loom_dev_reg(md->members[0]);
	size_t nbytes = loom_tensor_n_bytes(r->t);
	bool bf16 = md->reduce_type == LOOM_TYPE_BF16 &&
		    nbytes >= md->bf16_min_bytes;
	struct loom_allreduce_opts o = {
		.size = sizeof(o),
		.reduce_type = bf16 ? LOOM_TYPE_BF16 : LOOM_TYPE_F32,
	};
	int rc;

	for (int j = 0; j < md->n; j++) {
		if (r->zfill[j]) {
			rc = sync_members(mb);
			if (rc)
				return rc;
			break;
		}
	}
	for (int j = 0; j < md->n; j++) {
		ts[j] = r->mt->dev_t[j];
		if (!ts[j] || !loom_tensor_is_contiguous(ts[j]) ||
		    ts[j]->type != LOOM_TYPE_F32)
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "meta: allreduce of %s needs "
					      "contiguous F32 on every device",
					      r->t->name);
		if (r->zfill[j]) {
			rc = loom_tensor_memset(ts[j], 0, 0, nbytes);
			if (rc)
				return rc;
		}
		if (loom_dev_reg(md->members[j]) != reg)
			reg = NULL;
	}
	if (md->world && md->world->plugin_reduce && !md->force_fallback) {
		/* Across the ranks by the plugin itself (NCCL). */
		struct loom_world_group grp = {
			.size = sizeof(grp),
			.world = md->world->reg,
			.n_members = md->n_all,
			.first = md->first,
			.key = md->world->digest,
		};

		rc = md->world->plugin_reduce(mb->be, ts, (size_t)md->n, &o,
					      &grp);
		if (rc != LOOM_E_DECLINED)
			return rc;
	}
	/* One member per rank has no local sum to make: the world's is
	 * all, and no job goes to the member's queue and back first. */
	if (md->world && md->n == 1)
		return reduce_world(mb, ts, nbytes, bf16);
	if (reg && !md->force_fallback) {
		loom_allreduce_fn fn = (loom_allreduce_fn)
			loom_reg_proc_address(reg, LOOM_PROC_ALLREDUCE);

		if (fn) {
			rc = fn(mb->be, ts, (size_t)md->n, &o);
			if (rc == LOOM_OK && md->world)
				return reduce_world(mb, ts, nbytes, bf16);
			if (rc != LOOM_E_DECLINED)
				return rc;
		}
	}
	rc = sync_members(mb);
	if (rc)
		return rc;
	return reduce_generic(mb, ts, nbytes, bf16);
}

/* ---- running a plan ---- */

/* Runs one piece: every device's graph is queued first, so that devices
 * whose backends compute asynchronously work at the same time. */
static int run_piece(struct meta_backend *mb, struct meta_piece *p)
{
	for (int j = 0; j < mb->md->n; j++) {
		int rc;

		if (!p->n_nodes[j])
			continue;
		rc = loom_backend_graph_compute_async(mb->be[j], p->g[j]);
		if (rc)
			return loom_error_set(rc, "meta: device %s: %s",
					      loom_dev_name(mb->md->members[j]),
					      loom_error_message());
	}
	return LOOM_OK;
}

static int run_plan(struct meta_backend *mb, struct meta_plan *pl)
{
	int rc;

	for (int i = 0; i < pl->n_pieces; i++) {
		struct meta_piece *p = &pl->pieces[i];

		for (int k = 0; k < p->n_reduce; k++) {
			rc = allreduce(mb, &p->reduce[k]);
			if (rc)
				return rc;
		}
		rc = run_piece(mb, p);
		if (rc) {
			sync_members(mb);
			return rc;
		}
	}
	return LOOM_OK;
}

/* The cached plan of g, or a new one (the oldest is dropped).  A cached
 * plan whose leaves were placed again since (a buffer freed, a graph
 * allocated anew) is planned again. */
static int get_plan(struct meta_backend *mb, loom_graph_t *g,
		    struct meta_plan **out)
{
	uint64_t version = loom_graph_version(g);
	int victim = 0, rc;

	for (int i = 0; i < META_MAX_PLANS; i++) {
		struct meta_plan *pl = mb->plans[i];

		if (pl && pl->g == g && pl->version == version &&
		    meta_plan_leaves_valid(pl)) {
			mb->stamp[i] = ++mb->clock;
			*out = pl;
			return LOOM_OK;
		}
		if (pl && pl->g == g) {
			victim = i; /* an outdated plan of g goes first */
			break;
		}
		if (!pl || (mb->plans[victim] &&
			    mb->stamp[i] < mb->stamp[victim]))
			victim = i;
	}
	if (mb->plans[victim] == mb->last)
		mb->last = NULL;
	meta_plan_free(mb->plans[victim]);
	mb->plans[victim] = NULL;
	rc = meta_plan_build(mb->md, g, &meta_emit_graphs, &mb->plans[victim]);
	if (rc)
		return rc;
	loom_log(LOOM_LOG_DEBUG, "meta: %s: planned a graph of %zu nodes in "
		 "%d pieces", mb->md->name, loom_graph_n_nodes(g),
		 mb->plans[victim]->n_pieces);
	mb->stamp[victim] = ++mb->clock;
	*out = mb->plans[victim];
	return LOOM_OK;
}

/* Makes sure device j's graph of pl has its memory in the shared
 * allocator's current buffer: placed once, and again (from scratch) when
 * the buffer was replaced since. */
static int place_plan(struct meta_backend *mb, struct meta_plan *pl, int j)
{
	loom_graph_t *full = pl->full[j];
	loom_buffer_t *buf;
	int rc;

	if (pl->placed_in[j] && pl->placed_gen[j] == mb->ga_gen[j])
		return LOOM_OK;
	if (pl->placed_in[j]) {
		for (size_t i = 0; i < loom_graph_n_nodes(full); i++) {
			struct loom_tensor *t = loom_graph_node(full, i);

			if (t->buffer == pl->placed_in[j]) {
				t->data = NULL;
				t->buffer = NULL;
			}
		}
	}
	rc = loom_galloc_alloc_graph(mb->ga[j], full);
	if (rc)
		return rc;
	loom_log(LOOM_LOG_DEBUG, "meta: %s: placed a graph on %s (%zu bytes)",
		 mb->md->name, loom_dev_name(mb->md->members[j]),
		 loom_galloc_buffer_size(mb->ga[j]));
	buf = loom_galloc_buffer(mb->ga[j]);
	if (buf != mb->ga_buf[j] ||
	    loom_galloc_buffer_size(mb->ga[j]) != mb->ga_size[j]) {
		mb->ga_gen[j]++;
		mb->ga_buf[j] = buf;
		mb->ga_size[j] = loom_galloc_buffer_size(mb->ga[j]);
	}
	pl->placed_in[j] = buf;
	pl->placed_gen[j] = mb->ga_gen[j];
	return LOOM_OK;
}

static int be_graph_compute(loom_backend_t *be, loom_graph_t *g)
{
	struct meta_backend *mb = loom_backend_context(be);
	struct meta_plan *pl;
	int rc;

	rc = get_plan(mb, g, &pl);
	if (rc)
		return rc;
	/* Running pl overwrites the compute memory the last plan's results
	 * are in: from here on those nodes read as gone, not as garbage. */
	if (mb->last != pl) {
		if (mb->last)
			meta_plan_unpublish(mb->last);
		mb->last = NULL;
	}
	for (int j = 0; j < mb->md->n; j++) {
		rc = place_plan(mb, pl, j);
		if (rc)
			return rc;
	}
	rc = meta_plan_publish(pl);
	if (rc)
		return rc;
	mb->last = pl;
	rc = run_plan(mb, pl);
	if (rc)
		return rc;
	return be_synchronize(be);
}

static const struct loom_backend_iface meta_backend_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = be_get_name,
	.free = be_free,
	.set_tensor_async = be_set_async,
	.get_tensor_async = be_get_async,
	.synchronize = be_synchronize,
	.graph_compute = be_graph_compute,
};

int meta_backend_new(struct meta_dev *md, loom_backend_t **out)
{
	struct meta_backend *mb;
	int rc;

	mb = calloc(1, sizeof(*mb));
	if (!mb)
		return loom_error_set(LOOM_E_NOMEM, "meta backend: no memory");
	mb->md = md;
	for (int j = 0; j < md->n; j++) {
		loom_buffer_type_t *buft = loom_dev_buffer_type(md->members[j]);

		rc = loom_dev_init_backend(md->members[j], NULL, &mb->be[j]);
		if (!rc)
			rc = loom_galloc_new(buft, &mb->ga[j]);
		if (rc)
			goto err_free;
	}
	rc = loom_backend_new(md->dev, &meta_backend_iface, mb, out);
	if (rc)
		goto err_free;
	return LOOM_OK;

err_free:
	for (int j = 0; j < md->n; j++) {
		loom_galloc_free(mb->ga[j]);
		loom_backend_free(mb->be[j]);
	}
	free(mb);
	return rc;
}

/* The "meta_check" entry point: the planning walk with an emitter that
 * keeps nothing. */
int meta_check(loom_dev_t *dev, loom_graph_t *g)
{
	struct meta_dev *md = meta_dev_of(dev);
	struct meta_plan *pl;
	int rc;

	if (!md)
		return loom_error_set(LOOM_E_INVAL, "meta_check: %s is not a "
				      "meta device",
				      dev ? loom_dev_name(dev) : "(null)");
	if (!g)
		return loom_error_set(LOOM_E_INVAL, "meta_check: no graph");
	rc = meta_plan_build(md, g, &meta_emit_nothing, &pl);
	if (rc)
		return rc;
	meta_plan_free(pl);
	return LOOM_OK;
}

/* Bytes of compute memory each member device holds for be's plans (the
 * "meta_backend_dev_sizes" entry point). */
int meta_backend_dev_sizes(loom_backend_t *be, size_t *sizes, size_t n)
{
	struct meta_backend *mb;

	if (!be || !sizes || !meta_dev_of(loom_backend_device(be)))
		return loom_error_set(LOOM_E_INVAL, "meta_backend_dev_sizes: "
				      "not a meta backend");
	mb = loom_backend_context(be);
	for (size_t j = 0; j < n; j++) {
		sizes[j] = 0;
		if (j >= (size_t)mb->md->n)
			continue;
		sizes[j] = loom_galloc_buffer_size(mb->ga[j]);
		for (int i = 0; i < META_MAX_PLANS; i++) {
			struct meta_plan *pl = mb->plans[i];

			if (pl && pl->zbuf[j])
				sizes[j] += loom_buffer_size(pl->zbuf[j]);
		}
	}
	return LOOM_OK;
}
