/* SPDX-License-Identifier: MIT */
/* meta-plan.c - the plan of a meta graph: the split state of every node
 * (by the rules of meta-rules.c), the cut at each needed allreduce, and
 * the per-device graphs of slice-shaped tensors.  Running a plan is
 * meta-backend.c's job.
 */
#include "meta-plan.h"
#include "meta-rules.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the tensor -> record map ---- */

static size_t hash_ptr(const void *p, size_t cap)
{
	uintptr_t x = (uintptr_t)p;

	x ^= x >> 17;
	x *= 0xed5ad4bbu;
	x ^= x >> 11;
	return (size_t)x & (cap - 1);
}

static struct meta_tensor *map_get(struct meta_plan *pl,
				   const struct loom_tensor *t)
{
	for (size_t i = hash_ptr(t, pl->map_cap);; i = (i + 1) &
						     (pl->map_cap - 1)) {
		if (pl->map[i].key == t)
			return pl->map[i].mt;
		if (!pl->map[i].key)
			return NULL;
	}
}

static void map_put(struct meta_plan *pl, const struct loom_tensor *t,
		    struct meta_tensor *mt)
{
	size_t i = hash_ptr(t, pl->map_cap);

	while (pl->map[i].key && pl->map[i].key != t)
		i = (i + 1) & (pl->map_cap - 1);
	pl->map[i].key = t;
	pl->map[i].mt = mt;
}

static struct meta_tensor *new_record(struct meta_plan *pl)
{
	struct meta_tensor *mt = calloc(1, sizeof(*mt));

	if (!mt)
		return NULL;
	mt->md = pl->md;
	mt->next = pl->records;
	pl->records = mt;
	return mt;
}

void meta_plan_free(struct meta_plan *pl)
{
	struct meta_tensor *mt, *next;

	if (!pl)
		return;
	meta_plan_unpublish(pl);
	for (int j = 0; j < pl->md->n; j++) {
		loom_buffer_free(pl->zbuf[j]);
		loom_ctx_free(pl->zctx[j]);
		loom_ctx_free(pl->ctx[j]);
	}
	for (int p = 0; p < pl->n_pieces; p++)
		free(pl->pieces[p].reduce);
	free(pl->pieces);
	free(pl->pending);
	free(pl->leaves);
	for (mt = pl->records; mt; mt = next) {
		next = mt->next;
		free(mt);
	}
	free(pl->map);
	free(pl);
}

/* ---- messages ---- */

static int no_rule(const struct loom_tensor *t, struct meta_tensor *const *s,
		   const enum loom_split_state *seen, int n_src,
		   const char *why)
{
	char buf[512];
	size_t len = 0;

	buf[0] = 0;
	for (int i = 0; i < n_src && len < sizeof(buf); i++) {
		if (!s[i])
			continue;
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s %s",
					len ? ", " : "",
					t->src[i]->name[0] ? t->src[i]->name
							   : "(unnamed)",
					meta_state_name(seen[i]));
	}
	return loom_error_set(LOOM_E_UNSUPPORTED,
			      "meta: no rule for %s '%s' with sources %s%s%s",
			      loom_op_name(t->op), t->name, buf,
			      why ? ": " : "", why ? why : "");
}

/* ---- sources ---- */

/* Remembers a leaf's handle, so that a cached plan can tell whether the
 * leaf still has the record it was planned with. */
static int note_leaf(struct meta_plan *pl, const struct loom_tensor *t)
{
	if (pl->n_leaves == pl->cap_leaves) {
		size_t cap = pl->cap_leaves ? 2 * pl->cap_leaves : 16;
		struct meta_leaf *l = realloc(pl->leaves, cap * sizeof(*l));

		if (!l)
			return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
		pl->leaves = l;
		pl->cap_leaves = cap;
	}
	pl->leaves[pl->n_leaves].t = t;
	pl->leaves[pl->n_leaves].h = t->state;
	pl->n_leaves++;
	return LOOM_OK;
}

/* The record of a graph leaf: its meta buffer's, or, where the emitter
 * allows a leaf in no meta buffer, what the split callback makes of it. */
static int leaf_record(struct meta_plan *pl, const struct loom_tensor *t,
		       struct meta_tensor **out)
{
	struct meta_tensor *mt = meta_tensor_of(t, NULL);
	int rc;

	if (mt && mt->md == pl->md && mt->owner) {
		rc = note_leaf(pl, t);
		if (!rc)
			rc = pl->em->leaf(pl, t, mt);
		*out = mt;
		return rc;
	}
	if (mt || t->op != LOOM_OP_NONE)
		return loom_error_set(LOOM_E_INVAL,
				      "meta: %s is not in a buffer of meta "
				      "device %s", t->name, pl->md->name);
	rc = pl->em->leaf(pl, t, NULL);
	if (rc)
		return rc;
	mt = new_record(pl);
	if (!mt)
		return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
	rc = meta_split_of(pl->md, t, t->flags & LOOM_TENSOR_WEIGHT,
			   &mt->raw);
	if (rc)
		return rc;
	mt->synced = mt->raw;
	for (int j = 0; j < pl->md->n; j++) {
		rc = meta_slice_new(pl->ctx[j], pl->md, t, &mt->raw, j,
				    &mt->dev_t[j]);
		if (rc)
			return rc;
	}
	*out = mt;
	return LOOM_OK;
}

static int record_of(struct meta_plan *pl, const struct loom_tensor *t,
		     struct meta_tensor **out)
{
	struct meta_tensor *mt = map_get(pl, t);
	int rc;

	if (mt) {
		*out = mt;
		return LOOM_OK;
	}
	rc = leaf_record(pl, t, &mt);
	if (rc)
		return rc;
	map_put(pl, t, mt);
	*out = mt;
	return LOOM_OK;
}

static struct loom_tensor *make_view(loom_ctx_t *ctx, struct loom_tensor *base,
				     struct loom_tensor *dep,
				     const int64_t *ne, const size_t *nb,
				     size_t offs, const char *name);

static int sync_src(struct meta_plan *pl, const struct loom_tensor *t,
		    struct meta_tensor *mt);

/* A view of a PARTIAL node: the node is reduced once, so that no region
 * is summed twice through two views; devices that skipped the node view
 * its zero-filled summand. */
static int sync_view(struct meta_plan *pl, const struct loom_tensor *t,
		     struct meta_tensor *mt, struct meta_tensor *rmt)
{
	int rc = sync_src(pl, t->view_src, rmt);

	if (rc)
		return rc;
	for (int j = 0; j < pl->md->n; j++) {
		if (!mt->zero[j] && mt->dev_t[j])
			continue;
		mt->dev_t[j] = make_view(pl->ctx[j], rmt->dev_t[j], NULL,
					 t->ne, t->nb, t->view_offs, t->name);
		if (!mt->dev_t[j])
			return loom_error_set(LOOM_E_INVAL, "meta: %s: %s",
					      t->name,
					      loom_ctx_error(pl->ctx[j]));
		mt->zero[j] = false;
	}
	return LOOM_OK;
}

/* A new entry at the end of the allreduces due before the next piece. */
static struct meta_reduce *pending_add(struct meta_plan *pl)
{
	struct meta_reduce *r;

	if (pl->n_pending == pl->cap_pending) {
		int cap = pl->cap_pending ? 2 * pl->cap_pending : 8;

		r = realloc(pl->pending, (size_t)cap * sizeof(*r));
		if (!r)
			return NULL;
		pl->pending = r;
		pl->cap_pending = cap;
	}
	r = &pl->pending[pl->n_pending++];
	memset(r, 0, sizeof(*r));
	return r;
}

/* Queues the allreduce of node t; devices that hold no summand of it
 * get a zero-filled one. */
static int queue_reduce(struct meta_plan *pl, const struct loom_tensor *t,
			struct meta_tensor *mt)
{
	struct meta_reduce *r = pending_add(pl);

	if (!r)
		return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
	r->mt = mt;
	r->t = (struct loom_tensor *)t;
	for (int j = 0; j < pl->md->n; j++) {
		struct loom_tensor *z;

		if (!mt->zero[j] && mt->dev_t[j])
			continue;
		r->zfill[j] = true;
		if (!pl->zctx[j] && loom_ctx_new(0, &pl->zctx[j]))
			return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
		z = loom_tensor_new(pl->zctx[j], t->type, LOOM_MAX_DIMS, t->ne);
		if (!z)
			return loom_error_set(LOOM_E_INVAL, "meta: %s",
					      loom_ctx_error(pl->zctx[j]));
		loom_tensor_set_name(z, t->name);
		mt->dev_t[j] = z;
		mt->zero[j] = false;
	}
	return LOOM_OK;
}

/* Makes src's value whole before its consumer runs: queues an allreduce
 * and records the tensor's synced state as MIRRORED from here on. */
static int sync_src(struct meta_plan *pl, const struct loom_tensor *t,
		    struct meta_tensor *mt)
{
	struct meta_tensor *rmt = NULL;
	int rc;

	if (mt->synced.state != LOOM_SPLIT_PARTIAL)
		return LOOM_OK;
	if (t->view_src && t->view_src->op != LOOM_OP_NONE)
		rmt = map_get(pl, t->view_src);
	if (rmt)
		rc = sync_view(pl, t, mt, rmt);
	else if (t->op == LOOM_OP_NONE)
		rc = loom_error_set(LOOM_E_UNSUPPORTED,
				    "meta: PARTIAL leaf %s would need an "
				    "allreduce in place", t->name);
	else
		rc = queue_reduce(pl, t, mt);
	if (!rc)
		meta_state_whole(&mt->synced, LOOM_SPLIT_MIRRORED);
	return rc;
}

/* ---- per-device tensors ---- */

/* A view of base (a per-device tensor) with its own shape and strides at
 * byte offset offs of base's data; dep is the node it must follow. */
static struct loom_tensor *make_view(loom_ctx_t *ctx, struct loom_tensor *base,
				     struct loom_tensor *dep,
				     const int64_t *ne, const size_t *nb,
				     size_t offs, const char *name)
{
	struct loom_tensor *srcs[LOOM_MAX_SRC] = { dep ? dep : base };
	struct loom_tensor *v;

	v = loom_tensor_new_op(ctx, LOOM_OP_VIEW, base->type, ne, srcs, NULL);
	if (!v)
		return NULL;
	memcpy(v->nb, nb, sizeof(v->nb));
	if (base->view_src) {
		v->view_src = base->view_src;
		v->view_offs = base->view_offs + offs;
	} else {
		v->view_src = base;
		v->view_offs = offs;
	}
	loom_tensor_set_name(v, name);
	if (v->view_src->data)
		loom_tensor_init_view(v);
	return v;
}

/* Device j's part along dim d, as ref cuts it, of the whole tensor src
 * that device holds (a MIRRORED source meeting a split one).  A source of
 * size 1 there broadcasts and is used whole.  *out NULL: an empty part. */
static int slice_src(struct meta_plan *pl, int j, const struct loom_tensor *t,
		     struct loom_tensor *src, int d,
		     const struct meta_state *ref, struct loom_tensor **out)
{
	int64_t ne[LOOM_MAX_DIMS], start = 0, len;
	size_t offs;

	*out = src;
	if (!src || src->ne[d] == 1)
		return LOOM_OK;
	if (ref->n_seg != 1)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "meta: %s: a MIRRORED source cannot "
				      "meet a split of several segments",
				      t->name);
	start = meta_state_dev_start(ref, pl->md, 0, j);
	len = ref->len[0][pl->md->first + j];
	if (len == 0) {
		*out = NULL;
		return LOOM_OK;
	}
	if (start + len > src->ne[d])
		return loom_error_set(LOOM_E_INVAL,
				      "meta: %s: source %s is too short along "
				      "dimension %d for the split", t->name,
				      src->name, d);
	if (d == 0 && loom_type_block_size(src->type) > 1 &&
	    (start % loom_type_block_size(src->type) ||
	     len % loom_type_block_size(src->type)))
		return loom_error_set(LOOM_E_INVAL,
				      "meta: %s: slice of %s along dimension "
				      "0 is off its block size", t->name,
				      src->name);
	memcpy(ne, src->ne, sizeof(ne));
	ne[d] = len;
	offs = (size_t)meta_axis_bytes(src, d, start);
	*out = make_view(pl->ctx[j], src, NULL, ne, src->nb, offs, src->name);
	if (!*out)
		return loom_error_set(LOOM_E_INVAL, "meta: %s",
				      loom_ctx_error(pl->ctx[j]));
	return LOOM_OK;
}

/* rope of device j's part [o, o + len) of dimension 0, pairs (2i, 2i+1)
 * whole: the rotation of global pair i = o/2 + i' is pos * scale *
 * base^(-2i/n_dims), which is the local rope with n' = the rotating values
 * here, base' = base^(n'/n_dims) and scale' = scale * base^(-o/n_dims). */
static struct loom_tensor *rope_part(loom_ctx_t *c, const struct loom_tensor *t,
				     struct loom_tensor **s, int64_t o,
				     int64_t len)
{
	int n_dims = loom_tensor_op_param_i32(t, 0);
	double base = loom_tensor_op_param_f32(t, 2);
	double scale = loom_tensor_op_param_f32(t, 3);
	int64_t nl = n_dims - o;

	if (nl > len)
		nl = len;
	if (nl <= 0)
		return loom_scale(c, s[0], 1.0f);
	return loom_rope(c, s[0], s[1], (int)nl, LOOM_ROPE_NORMAL,
			 (float)pow(base, (double)nl / n_dims),
			 (float)(scale * pow(base, -(double)o / n_dims)));
}

/* ---- views ---- */

/* Where a view of a split root lies along the root's split axis a:
 * unit_a and unit_up are the bytes of one step along a and along the
 * dimension above it; the view starts o_out steps up, axis_off bytes into
 * the axis and lower bytes below it; E is the view's dimension that
 * carries the split, spanning span bytes. */
struct view_geo {
	int a, E;
	size_t unit_a, unit_up, o_out, lower, axis_off, span;
};

static int view_geometry(const struct loom_tensor *t,
			 const struct loom_tensor *root, int a, size_t offs,
			 struct view_geo *g)
{
	size_t o_in;

	g->a = a;
	g->E = -1;
	g->unit_a = a == 0 ? root->nb[0] : root->nb[a];
	g->unit_up = a < 3 ? root->nb[a + 1] : loom_tensor_n_bytes(root);
	if (!loom_tensor_is_contiguous(root))
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "meta: view %s of a non-contiguous split "
				      "tensor %s", t->name, root->name);
	if (g->unit_a == 0 || g->unit_up == 0)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "meta: view %s of the empty split tensor "
				      "%s", t->name, root->name);
	g->o_out = offs / g->unit_up;
	o_in = offs % g->unit_up;
	g->lower = o_in % g->unit_a;
	g->axis_off = o_in - g->lower;
	for (int k = 0; k < LOOM_MAX_DIMS; k++)
		if (t->ne[k] > 1 && t->nb[k] < g->unit_up &&
		    (g->E < 0 || t->nb[k] > t->nb[g->E]))
			g->E = k;
	if (g->E < 0 || (t->nb[g->E] < g->unit_a && g->lower != 0))
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "meta: view %s does not keep the split "
				      "dimension %d of %s whole", t->name, a,
				      root->name);
	g->span = t->nb[g->E] * (size_t)t->ne[g->E];
	return LOOM_OK;
}

/* The root's segments [*s0, *s1) the view covers: whole ones, or an
 * error. */
static int view_segments(const struct meta_dev *md,
			 const struct loom_tensor *t,
			 const struct loom_tensor *root,
			 const struct meta_state *rs,
			 const struct view_geo *g, int *s0, int *s1)
{
	size_t seg_b[META_MAX_SEG], pos = 0, cover = 0;

	for (int s = 0; s < rs->n_seg; s++)
		seg_b[s] = (size_t)meta_axis_bytes(
			root, g->a, meta_state_seg_len(rs, md, s));
	for (*s0 = 0; *s0 < rs->n_seg && pos < g->axis_off; (*s0)++)
		pos += seg_b[*s0];
	for (*s1 = *s0; *s1 < rs->n_seg && cover < g->span; (*s1)++)
		cover += seg_b[*s1];
	if (pos != g->axis_off || cover != g->span || *s1 == *s0)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "meta: view %s cuts %s (%s) inside a "
				      "slice", t->name, root->name,
				      meta_state_name(rs->state));
	return LOOM_OK;
}

/* The view's state: split along E, every member's slices of segments
 * [s0, s1) counted in the view's steps, so that all ranks agree. */
static int view_state(const struct meta_dev *md, const struct loom_tensor *t,
		      const struct loom_tensor *root,
		      const struct meta_state *rs, const struct view_geo *g,
		      int s0, int s1, struct meta_state *out)
{
	memset(out, 0, sizeof(*out));
	out->state = (enum loom_split_state)g->E;
	out->n_seg = s1 - s0;
	for (int s = s0; s < s1; s++) {
		for (int k = 0; k < md->n_all; k++) {
			size_t b = (size_t)meta_axis_bytes(root, g->a,
							   rs->len[s][k]);

			if (b % t->nb[g->E])
				return loom_error_set(
					LOOM_E_UNSUPPORTED,
					"meta: view %s: a slice of %s is not "
					"a whole number of its dimension %d",
					t->name, root->name, g->E);
			out->len[s - s0][k] = (int64_t)(b / t->nb[g->E]);
		}
	}
	return LOOM_OK;
}

/* Device j's shape, strides and offset of the view in its part of the
 * root. */
static int view_on_dev(const struct meta_dev *md, const struct loom_tensor *t,
		       const struct loom_tensor *root,
		       const struct meta_state *rs, const struct view_geo *g,
		       const struct meta_state *vs, int s0, int j,
		       int64_t *ne, size_t *nb, size_t *offs)
{
	int64_t before = 0, total = 0;
	size_t up_j;

	for (int s = 0; s < rs->n_seg; s++)
		total += rs->len[s][md->first + j];
	for (int s = 0; s < s0; s++)
		before += rs->len[s][md->first + j];
	up_j = (size_t)meta_axis_bytes(root, g->a, total);
	memcpy(ne, t->ne, sizeof(t->ne));
	ne[g->E] = 0;
	for (int s = 0; s < vs->n_seg; s++)
		ne[g->E] += vs->len[s][md->first + j];
	for (int k = 0; k < LOOM_MAX_DIMS; k++) {
		nb[k] = t->nb[k];
		if (t->nb[k] < g->unit_up)
			continue;
		if (t->nb[k] % g->unit_up && t->ne[k] > 1)
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "meta: view %s: stride %zu does "
					      "not fit the split of %s",
					      t->name, t->nb[k], root->name);
		nb[k] = t->nb[k] / g->unit_up * up_j;
	}
	*offs = g->o_out * up_j + (size_t)meta_axis_bytes(root, g->a, before) +
		g->lower;
	return LOOM_OK;
}

/* Maps a view of a split tensor onto the devices: which dimension of the
 * view carries the split, and each device's shape, strides and offset
 * into its part of the root.  See doc/meta.md: the axis is mapped through the
 * shape change, and a view may select whole segments. */
static int map_view(struct meta_plan *pl, const struct loom_tensor *t,
		    const struct loom_tensor *root,
		    const struct meta_state *rs, size_t offs,
		    struct meta_state *out, int64_t ne_j[][LOOM_MAX_DIMS],
		    size_t nb_j[][LOOM_MAX_DIMS], size_t *offs_j)
{
	const struct meta_dev *md = pl->md;
	struct view_geo g = { 0 };
	int s0, s1, rc;

	rc = view_geometry(t, root, (int)rs->state, offs, &g);
	if (!rc)
		rc = view_segments(md, t, root, rs, &g, &s0, &s1);
	if (!rc)
		rc = view_state(md, t, root, rs, &g, s0, s1, out);
	for (int j = 0; !rc && j < md->n; j++)
		rc = view_on_dev(md, t, root, rs, &g, out, s0, j, ne_j[j],
				 nb_j[j], &offs_j[j]);
	return rc;
}

static int plan_view(struct meta_plan *pl, const struct loom_tensor *t,
		     struct meta_tensor *mt)
{
	const struct loom_tensor *root = t;
	struct meta_tensor *rmt, *dep = NULL;
	int64_t ne_j[META_MAX_DEVS][LOOM_MAX_DIMS];
	size_t nb_j[META_MAX_DEVS][LOOM_MAX_DIMS], offs_j[META_MAX_DEVS];
	size_t offs = 0;
	int n = pl->md->n, rc;

	while (root->view_src) {
		offs += root->view_offs;
		root = root->view_src;
	}
	rc = record_of(pl, root, &rmt);
	if (rc)
		return rc;
	if (t->src[0]) {
		rc = record_of(pl, t->src[0], &dep);
		if (rc)
			return rc;
	}
	if (!meta_is_split(rmt->synced.state)) {
		mt->raw = rmt->synced;
		for (int j = 0; j < n; j++) {
			memcpy(ne_j[j], t->ne, sizeof(t->ne));
			memcpy(nb_j[j], t->nb, sizeof(t->nb));
			offs_j[j] = offs;
			mt->zero[j] = rmt->zero[j];
		}
	} else {
		rc = map_view(pl, t, root, &rmt->synced, offs, &mt->raw, ne_j,
			      nb_j, offs_j);
		if (rc)
			return rc;
	}
	mt->synced = mt->raw;
	for (int j = 0; j < n; j++) {
		struct loom_tensor *base = rmt->dev_t[j];

		if (!base || mt->zero[j])
			continue;
		if (meta_is_split(mt->raw.state) &&
		    meta_state_dev_len(&mt->raw, pl->md, j) == 0)
			continue;
		mt->dev_t[j] = make_view(pl->ctx[j], base,
					 dep ? dep->dev_t[j] : NULL, ne_j[j],
					 nb_j[j], offs_j[j], t->name);
		if (!mt->dev_t[j])
			return loom_error_set(LOOM_E_INVAL, "meta: view %s: %s",
					      t->name,
					      loom_ctx_error(pl->ctx[j]));
	}
	return LOOM_OK;
}

/* ---- pieces ---- */

static int new_piece(struct meta_plan *pl)
{
	struct meta_piece *p;

	if (pl->n_pieces == pl->cap_pieces) {
		int cap = pl->cap_pieces ? 2 * pl->cap_pieces : 8;

		p = realloc(pl->pieces, (size_t)cap * sizeof(*p));
		if (!p)
			return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
		pl->pieces = p;
		pl->cap_pieces = cap;
	}
	p = &pl->pieces[pl->n_pieces++];
	memset(p, 0, sizeof(*p));
	p->n_reduce = pl->n_pending;
	p->reduce = pl->pending;
	pl->pending = NULL;
	pl->n_pending = pl->cap_pending = 0;
	return pl->em->piece(pl, p);
}

/* Hands device j's node to the emitter, starting a new piece when
 * allreduces are due first. */
static int emit(struct meta_plan *pl, int j, struct loom_tensor *dt)
{
	int rc;

	if (pl->n_pending) {
		rc = new_piece(pl);
		if (rc)
			return rc;
	}
	rc = pl->em->node(pl, j, dt);
	if (!rc)
		pl->pieces[pl->n_pieces - 1].n_nodes[j]++;
	return rc;
}

/* Device j's node when some source is empty there: a PARTIAL result is
 * zero (or the other summand), anything else must be empty too. */
static int build_with_empty(struct meta_plan *pl, const struct loom_tensor *t,
			    struct meta_tensor *mt, int j,
			    struct loom_tensor **s, struct loom_tensor **out)
{
	*out = NULL;
	if (meta_is_split(mt->raw.state) &&
	    meta_state_dev_len(&mt->raw, pl->md, j) == 0)
		return LOOM_OK;
	if (mt->raw.state != LOOM_SPLIT_PARTIAL)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "meta: %s '%s' needs a slice that is "
				      "empty on device %d",
				      loom_op_name(t->op), t->name, j);
	if ((t->op == LOOM_OP_ADD || t->op == LOOM_OP_SUB) &&
	    (s[0] || s[1])) {
		float f = !s[0] && t->op == LOOM_OP_SUB ? -1.0f : 1.0f;

		*out = loom_scale(pl->ctx[j], s[0] ? s[0] : s[1], f);
		if (!*out)
			return loom_error_set(LOOM_E_INVAL, "meta: %s",
					      loom_ctx_error(pl->ctx[j]));
		return LOOM_OK;
	}
	if (t->op == LOOM_OP_CONCAT)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "meta: concat '%s' of a PARTIAL value "
				      "that device %d skipped", t->name, j);
	mt->zero[j] = true;
	return LOOM_OK;
}

/* True when two sources split on one dimension are cut differently. */
static bool slices_differ(struct meta_tensor *const *s, int n_src,
			  const struct meta_dev *md)
{
	for (int i = 0; i < n_src; i++)
		for (int k = i + 1; k < n_src; k++)
			if (s[i] && s[k] && meta_is_split(s[i]->synced.state) &&
			    s[i]->synced.state == s[k]->synced.state &&
			    !meta_state_same_slices(&s[i]->synced,
						    &s[k]->synced, md))
				return true;
	return false;
}

/* The records of t's sources into s (by position), their states as
 * first seen into seen, and one past the last source into *n_src. */
static int gather_sources(struct meta_plan *pl, const struct loom_tensor *t,
			  struct meta_tensor **s, enum loom_split_state *seen,
			  int *n_src)
{
	int rc;

	*n_src = 0;
	for (int i = 0; i < LOOM_MAX_SRC; i++) {
		if (!t->src[i])
			continue;
		rc = record_of(pl, t->src[i], &s[i]);
		if (rc)
			return rc;
		seen[i] = s[i]->synced.state;
		*n_src = i + 1;
	}
	if (!s[0])
		return loom_error_set(LOOM_E_INVAL, "meta: node %s has no "
				      "source", t->name);
	return LOOM_OK;
}

/* Step 1: t's split state.  The rule of its op on its sources' states;
 * where none holds, the PARTIAL sources are made whole (their allreduces
 * queued) and the rule asked again. */
static int decide_state(struct meta_plan *pl, const struct loom_tensor *t,
			struct meta_tensor **s, const enum loom_split_state *seen,
			int n_src, struct meta_rule *r)
{
	bool any_p = false;
	int rc;

	if (meta_rule_find(t, s, r, pl->md))
		return LOOM_OK;
	for (int i = 0; i < n_src; i++) {
		if (s[i] && s[i]->synced.state == LOOM_SPLIT_PARTIAL) {
			rc = sync_src(pl, t->src[i], s[i]);
			if (rc)
				return rc;
			any_p = true;
		}
	}
	if (any_p && meta_rule_find(t, s, r, pl->md))
		return LOOM_OK;
	return no_rule(t, s, seen, n_src,
		       slices_differ(s, n_src, pl->md)
			       ? "the sources are cut at different places "
				 "(see the split callback's granularities)"
			       : NULL);
}

/* Device j's sources of t, cut where the rule says; *empty when one of
 * them is empty there. */
static int dev_sources(struct meta_plan *pl, const struct loom_tensor *t,
		       struct meta_tensor **s, int n_src,
		       const struct meta_rule *r, int j,
		       struct loom_tensor **ds, bool *empty)
{
	int rc;

	*empty = false;
	for (int i = 0; i < n_src; i++) {
		if (!s[i])
			continue;
		ds[i] = s[i]->zero[j] ? NULL : s[i]->dev_t[j];
		if (ds[i] && r->slice_dim[i] >= 0) {
			rc = slice_src(pl, j, t, ds[i], r->slice_dim[i],
				       r->slice_ref[i], &ds[i]);
			if (rc)
				return rc;
		}
		if (!ds[i])
			*empty = true;
	}
	return LOOM_OK;
}

/* Device j's node of t from its sources ds, checked against the length
 * the split gives device j. */
static int build_dev_node(struct meta_plan *pl, const struct loom_tensor *t,
			  const struct meta_state *st, int j,
			  struct loom_tensor **ds, struct loom_tensor **out)
{
	loom_ctx_t *c = pl->ctx[j];
	struct loom_tensor *dt;

	if (t->op == LOOM_OP_ROPE && st->state == LOOM_SPLIT_DIM0)
		dt = rope_part(c, t, ds, meta_state_dev_start(st, pl->md, 0, j),
			       st->len[0][pl->md->first + j]);
	else
		dt = loom_op_new(c, t->op, ds, t->op_params);
	if (!dt)
		return loom_error_set(LOOM_E_INVAL,
				      "meta: %s '%s' on device %d: %s",
				      loom_op_name(t->op), t->name, j,
				      loom_ctx_error(c));
	if (meta_is_split(st->state) &&
	    dt->ne[st->state] != meta_state_dev_len(st, pl->md, j))
		return loom_error_set(
			LOOM_E_INVAL,
			"meta: %s '%s': device %d has %lld along dimension "
			"%d, the split says %lld", loom_op_name(t->op), t->name,
			j, (long long)dt->ne[st->state], (int)st->state,
			(long long)meta_state_dev_len(st, pl->md, j));
	*out = dt;
	return LOOM_OK;
}

/* Step 2: device j's node of t (NULL where device j has nothing of it). */
static int plan_dev_node(struct meta_plan *pl, const struct loom_tensor *t,
			 struct meta_tensor *mt, struct meta_tensor **s,
			 int n_src, const struct meta_rule *r, int j,
			 struct loom_tensor **out)
{
	struct loom_tensor *ds[LOOM_MAX_SRC] = { 0 };
	bool empty;
	int rc;

	*out = NULL;
	rc = dev_sources(pl, t, s, n_src, r, j, ds, &empty);
	if (rc)
		return rc;
	if (empty)
		return build_with_empty(pl, t, mt, j, ds, out);
	if (meta_is_split(mt->raw.state) &&
	    meta_state_dev_len(&mt->raw, pl->md, j) == 0)
		return LOOM_OK;
	return build_dev_node(pl, t, &mt->raw, j, ds, out);
}

/* Step 3: hands every device's node of t to the emitter, named as t and
 * an output where t is one. */
static int emit_all(struct meta_plan *pl, const struct loom_tensor *t,
		    struct meta_tensor *mt)
{
	int rc;

	for (int j = 0; j < pl->md->n; j++) {
		struct loom_tensor *dt = mt->dev_t[j];

		if (!dt)
			continue;
		if (!loom_op_is_view(t->op))
			loom_tensor_set_name(dt, t->name);
		dt->flags |= t->flags & LOOM_TENSOR_OUTPUT;
		rc = emit(pl, j, dt);
		if (rc)
			return rc;
	}
	return LOOM_OK;
}

/* Plans node t: its split state, every device's node, their emission. */
static int plan_node(struct meta_plan *pl, struct loom_tensor *t)
{
	struct meta_tensor *s[LOOM_MAX_SRC] = { 0 }, *mt;
	enum loom_split_state seen[LOOM_MAX_SRC] = { 0 };
	struct meta_rule r;
	int n_src, rc;

	mt = new_record(pl);
	if (!mt)
		return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
	if (loom_op_is_view(t->op)) {
		rc = plan_view(pl, t, mt);
	} else {
		rc = gather_sources(pl, t, s, seen, &n_src);
		if (!rc)
			rc = decide_state(pl, t, s, seen, n_src, &r);
		if (!rc) {
			mt->raw = r.out;
			mt->synced = r.out;
		}
		for (int j = 0; !rc && j < pl->md->n; j++)
			rc = plan_dev_node(pl, t, mt, s, n_src, &r, j,
					   &mt->dev_t[j]);
	}
	if (!rc)
		rc = emit_all(pl, t, mt);
	if (!rc)
		map_put(pl, t, mt);
	return rc;
}

/* ---- emitters ---- */

/* The real planning's leaf: in a meta buffer, with memory for its slices. */
static int graphs_leaf(struct meta_plan *pl, const struct loom_tensor *t,
		       struct meta_tensor *mt)
{
	if (!mt)
		return loom_error_set(LOOM_E_INVAL,
				      "meta: %s is not in a buffer of meta "
				      "device %s", t->name, pl->md->name);
	return meta_tensor_ready(mt);
}

static int graphs_piece(struct meta_plan *pl, struct meta_piece *p)
{
	int rc;

	for (int j = 0; j < pl->md->n; j++) {
		if (!pl->full[j]) {
			rc = loom_graph_new(pl->ctx[j], &pl->full[j]);
			if (rc)
				return rc;
		}
		rc = loom_graph_new(pl->ctx[j], &p->g[j]);
		if (rc)
			return rc;
	}
	return LOOM_OK;
}

static int graphs_node(struct meta_plan *pl, int j, struct loom_tensor *dt)
{
	int rc = loom_graph_add_node(pl->full[j], dt);

	if (!rc)
		rc = loom_graph_add_node(pl->pieces[pl->n_pieces - 1].g[j], dt);
	return rc;
}

/* Gives the zero-filled summands their memory. */
static int graphs_finish(struct meta_plan *pl)
{
	struct meta_dev *md = pl->md;
	int rc;

	for (int j = 0; j < md->n; j++) {
		loom_buffer_type_t *buft = loom_dev_buffer_type(md->members[j]);

		if (!pl->zctx[j])
			continue;
		rc = loom_ctx_alloc_tensors(pl->zctx[j], buft, &pl->zbuf[j]);
		if (rc)
			return rc;
	}
	return LOOM_OK;
}

const struct meta_emitter meta_emit_graphs = {
	.leaf = graphs_leaf,
	.piece = graphs_piece,
	.node = graphs_node,
	.finish = graphs_finish,
};

static int nothing_leaf(struct meta_plan *pl, const struct loom_tensor *t,
			struct meta_tensor *mt)
{
	return LOOM_OK;
}

static int nothing_piece(struct meta_plan *pl, struct meta_piece *p)
{
	return LOOM_OK;
}

static int nothing_node(struct meta_plan *pl, int j, struct loom_tensor *dt)
{
	return LOOM_OK;
}

static int nothing_finish(struct meta_plan *pl)
{
	return LOOM_OK;
}

const struct meta_emitter meta_emit_nothing = {
	.leaf = nothing_leaf,
	.piece = nothing_piece,
	.node = nothing_node,
	.finish = nothing_finish,
};

/* ---- plans ---- */

int meta_plan_build(struct meta_dev *md, loom_graph_t *g,
		    const struct meta_emitter *em, struct meta_plan **out)
{
	struct meta_plan *pl;
	size_t n_nodes = loom_graph_n_nodes(g);
	int rc;

	pl = calloc(1, sizeof(*pl));
	if (!pl)
		return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
	pl->md = md;
	pl->g = g;
	pl->version = loom_graph_version(g);
	pl->em = em;
	pl->map_cap = 64;
	while (pl->map_cap < 2 * (n_nodes + loom_graph_n_leaves(g)) + 64)
		pl->map_cap *= 2;
	pl->map = calloc(pl->map_cap, sizeof(*pl->map));
	if (!pl->map) {
		rc = loom_error_set(LOOM_E_NOMEM, "meta: no memory");
		goto err_free;
	}
	for (int j = 0; j < md->n; j++) {
		rc = loom_ctx_new(0, &pl->ctx[j]);
		if (rc)
			goto err_free;
	}
	rc = new_piece(pl);
	if (rc)
		goto err_free;
	for (size_t i = 0; i < n_nodes; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		if (t->op == LOOM_OP_NONE)
			continue;
		rc = plan_node(pl, t);
		if (rc)
			goto err_free;
	}
	rc = em->finish(pl);
	if (rc)
		goto err_free;
	*out = pl;
	return LOOM_OK;

err_free:
	meta_plan_free(pl);
	return rc;
}

bool meta_plan_leaves_valid(const struct meta_plan *pl)
{
	for (size_t i = 0; i < pl->n_leaves; i++) {
		const struct meta_leaf *l = &pl->leaves[i];
		void *mt;

		if (l->t->state != l->h ||
		    loom_state_get(l->h, &meta_state_tag, &mt))
			return false;
	}
	return true;
}

int meta_plan_publish(struct meta_plan *pl)
{
	int rc;

	if (pl->pub)
		return LOOM_OK;
	rc = loom_state_scope_new(&meta_state_tag, &pl->pub);
	if (rc)
		return rc;
	for (size_t i = 0; i < pl->map_cap; i++) {
		struct loom_tensor *t = (struct loom_tensor *)pl->map[i].key;
		loom_state_t h;

		if (!t || t->op == LOOM_OP_NONE)
			continue;
		rc = loom_state_new(pl->pub, pl->map[i].mt, &h);
		if (rc) {
			meta_plan_unpublish(pl);
			return rc;
		}
		t->state = h;
	}
	return LOOM_OK;
}

void meta_plan_unpublish(struct meta_plan *pl)
{
	loom_state_scope_free(pl->pub);
	pl->pub = NULL;
}
