/* SPDX-License-Identifier: MIT */
/* meta-buffer.c - the meta buffer type and meta buffers.  A meta buffer
 * has no memory of its own: the slices of its tensors live in member
 * buffers sized for those slices only.  Compute nodes get their
 * per-device memory from the meta backend (meta-backend.c).
 */
#include "meta.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char meta_state_tag;

struct meta_tensor *meta_tensor_of(const struct loom_tensor *t, int *status)
{
	void *mt;
	int rc = loom_tensor_state_get(t, &meta_state_tag, &mt);

	if (status)
		*status = rc;
	return mt;
}

static const char *buft_get_name(loom_buffer_type_t *buft)
{
	struct meta_dev *md = loom_buffer_type_context(buft);

	return buft == md->wbuft ? md->wname : md->name;
}

static size_t buft_get_alignment(loom_buffer_type_t *buft)
{
	struct meta_dev *md = loom_buffer_type_context(buft);

	return md->max_align;
}

static size_t buft_get_max_size(loom_buffer_type_t *buft)
{
	struct meta_dev *md = loom_buffer_type_context(buft);

	return md->min_max_size;
}

static void free_record(struct meta_tensor *mt, int n)
{
	for (int j = 0; j < n; j++)
		loom_buffer_free(mt->dev_buf[j]);
	free(mt);
}

static void buffer_free(loom_buffer_t *buf)
{
	struct meta_buffer *mb = loom_buffer_context(buf);
	struct meta_tensor *mt, *next;
	struct meta_chunk *c, *cnext;

	loom_state_scope_free(mb->scope);
	for (mt = mb->tensors; mt; mt = next) {
		next = mt->next;
		free_record(mt, mb->md->n);
	}
	for (c = mb->chunks; c; c = cnext) {
		cnext = c->next;
		for (int j = 0; j < mb->md->n; j++)
			loom_buffer_free(c->buf[j]);
		free(c);
	}
	loom_ctx_free(mb->ctx);
	pthread_mutex_destroy(&mb->lock);
	free(mb);
}

static void *buffer_get_base(loom_buffer_t *buf)
{
	struct meta_buffer *mb = loom_buffer_context(buf);

	return mb->fake_base;
}

static size_t align_up(size_t x, size_t a)
{
	return (x + a - 1) / a * a;
}

/* Gives device j its slice of t: a descriptor and, in a compute buffer, a
 * member buffer of its own; otherwise the slice waits for its chunk. */
static int place_slice(struct meta_buffer *mb, struct meta_tensor *mt,
		       const struct loom_tensor *t, int j, bool own)
{
	struct meta_dev *md = mb->md;
	loom_buffer_type_t *dbuft = mb->dbuft[j];
	struct loom_tensor *dt;
	int rc;

	rc = meta_slice_new(mb->ctx, md, t, &mt->raw, j, &dt);
	if (rc || !dt)
		return rc; /* a zero-sized slice: nothing here */
	mt->dev_t[j] = dt;
	mt->bytes[j] = loom_buffer_type_alloc_size(dbuft, dt);
	if (!own) {
		mt->pending = true;
		return LOOM_OK;
	}
	rc = loom_buffer_type_alloc_buffer(dbuft, mt->bytes[j], &mt->dev_buf[j]);
	if (rc)
		return rc;
	rc = loom_tensor_place(dt, mt->dev_buf[j], 0);
	if (rc)
		return rc;
	mb->dev_bytes[j] += loom_buffer_size(mt->dev_buf[j]);
	return LOOM_OK;
}

int meta_slice_new(loom_ctx_t *ctx, struct meta_dev *md,
		   const struct loom_tensor *t, const struct meta_state *st,
		   int j, struct loom_tensor **out)
{
	struct loom_tensor *dt;
	int64_t ne[LOOM_MAX_DIMS];

	*out = NULL;
	memcpy(ne, t->ne, sizeof(ne));
	if (st->state <= LOOM_SPLIT_DIM3)
		ne[st->state] = meta_state_dev_len(st, md, j);
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		if (ne[d] == 0)
			return LOOM_OK;
	dt = loom_tensor_new(ctx, t->type, LOOM_MAX_DIMS, ne);
	if (!dt)
		return loom_error_set(LOOM_E_NOMEM, "slice of %s: %s", t->name,
				      loom_ctx_error(ctx));
	loom_tensor_set_name(dt, t->name);
	dt->flags = t->flags;
	*out = dt;
	return LOOM_OK;
}

/* Forgets what a record holds in mb's accounts before it is dropped. */
static void unaccount(struct meta_buffer *mb, struct meta_tensor *mt)
{
	for (int j = 0; j < mb->md->n; j++)
		if (mt->dev_buf[j])
			mb->dev_bytes[j] -= loom_buffer_size(mt->dev_buf[j]);
}

/* Walks the waiting slices of mb in placement order: each gets the next
 * offset its device's alignment allows.  With chunk NULL only counts the
 * bytes each device needs into need[]. */
static int lay_out(struct meta_buffer *mb, struct meta_chunk *chunk,
		   size_t *need)
{
	int n = mb->md->n, rc;

	for (int j = 0; j < n; j++)
		need[j] = 0;
	for (struct meta_tensor *mt = mb->tensors; mt; mt = mt->next) {
		if (!mt->pending)
			continue;
		for (int j = 0; j < n; j++) {
			size_t a;

			if (!mt->dev_t[j])
				continue;
			a = loom_buffer_type_alignment(mb->dbuft[j]);
			need[j] = align_up(need[j], a);
			if (chunk) {
				rc = loom_tensor_place(mt->dev_t[j],
						       chunk->buf[j], need[j]);
				if (rc)
					return rc;
			}
			need[j] += mt->bytes[j];
		}
	}
	return LOOM_OK;
}

/* Adds leaf t in state st to mb's digest of what the ranks of a world
 * must place alike. */
static void note_placed(struct meta_buffer *mb, const struct loom_tensor *t,
			const struct meta_state *st)
{
	uint64_t h = mb->n_unagreed ? mb->digest : 0xcbf29ce484222325ull;
	int32_t v[2] = { (int32_t)t->type, (int32_t)st->state };

	h = meta_hash(h, t->name, strlen(t->name) + 1);
	h = meta_hash(h, v, sizeof(v));
	h = meta_hash(h, t->ne, sizeof(t->ne));
	for (int s = 0; s < st->n_seg; s++)
		h = meta_hash(h, st->len[s],
			      (size_t)mb->md->n_all * sizeof(st->len[s][0]));
	mb->digest = h;
	mb->n_unagreed++;
}

/* Gives every waiting slice of mb its memory: one chunk, one buffer per
 * device of exactly the waiting bytes.  Over a world the ranks first
 * compare what they placed (every rank gets here on the same first use):
 * a rank that loaded another model fails them all.  mb->lock is held. */
static int materialize(struct meta_buffer *mb)
{
	int n = mb->md->n, rc = LOOM_OK;
	size_t need[META_MAX_DEVS];
	struct meta_chunk *c;
	bool any = false;

	if (mb->md->world && mb->n_unagreed) {
		mb->n_unagreed = 0;
		rc = meta_world_agree(mb->md, mb->digest, "weights and caches "
				      "(names, types, shapes or splits)");
		if (rc)
			return rc;
	}
	lay_out(mb, NULL, need);
	for (int j = 0; j < n; j++)
		any |= need[j] > 0;
	if (!any)
		return LOOM_OK;
	c = calloc(1, sizeof(*c));
	if (!c)
		return loom_error_set(LOOM_E_NOMEM, "meta buffer: no memory");
	for (int j = 0; j < n && !rc; j++)
		if (need[j])
			rc = loom_buffer_type_alloc_buffer(mb->dbuft[j],
							   need[j], &c->buf[j]);
	if (!rc)
		rc = lay_out(mb, c, need);
	if (rc) {
		for (struct meta_tensor *mt = mb->tensors; mt; mt = mt->next)
			for (int j = 0; j < n && mt->pending; j++)
				if (mt->dev_t[j]) {
					mt->dev_t[j]->data = NULL;
					mt->dev_t[j]->buffer = NULL;
				}
		for (int j = 0; j < n; j++)
			loom_buffer_free(c->buf[j]);
		free(c);
		return rc;
	}
	for (struct meta_tensor *mt = mb->tensors; mt; mt = mt->next)
		mt->pending = false;
	for (int j = 0; j < n; j++)
		if (c->buf[j])
			mb->dev_bytes[j] += loom_buffer_size(c->buf[j]);
	c->next = mb->chunks;
	mb->chunks = c;
	return LOOM_OK;
}

/* Makes sure mt's slices have memory (placing every waiting slice of its
 * buffer when they do not yet). */
int meta_tensor_ready(struct meta_tensor *mt)
{
	struct meta_buffer *mb = mt->owner;
	int rc;

	if (!mt->pending || !mb)
		return LOOM_OK;
	pthread_mutex_lock(&mb->lock);
	rc = materialize(mb);
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

/* An earlier record at the same offset with the same shape and state (a
 * graph allocated again in a compute buffer) is reused; a different one
 * there is dropped. */
static struct meta_tensor *take_old(struct meta_buffer *mb, size_t offs,
				    const struct loom_tensor *t,
				    const struct meta_state *st)
{
	struct meta_tensor **pp = &mb->tensors;

	for (; *pp; pp = &(*pp)->next) {
		struct meta_tensor *mt = *pp;
		struct loom_tensor *dt = NULL;

		if (mt->offs != offs)
			continue;
		for (int j = 0; j < mb->md->n && !dt; j++)
			dt = mt->dev_t[j];
		if (dt && dt->type == t->type &&
		    meta_state_same_slices(&mt->raw, st, mb->md)) {
			bool same = true;

			for (int d = 0; d < LOOM_MAX_DIMS; d++)
				if (mt->raw.state != (enum loom_split_state)d &&
				    dt->ne[d] != t->ne[d])
					same = false;
			if (same)
				return mt;
		}
		*pp = mt->next;
		loom_state_release(mb->scope, mt->handle);
		unaccount(mb, mt);
		free_record(mt, mb->md->n);
		return NULL;
	}
	return NULL;
}

/* Places a leaf (a weight, cache or graph input): its state comes from the
 * device's split callback, or is MIRRORED in a compute buffer.  Nodes and
 * views have nothing to place here. */
static int buffer_init_tensor(loom_buffer_t *buf, struct loom_tensor *t)
{
	struct meta_buffer *mb = loom_buffer_context(buf);
	struct meta_dev *md = mb->md;
	struct meta_tensor *mt;
	struct meta_state st;
	size_t offs = (size_t)((uint8_t *)t->data - (uint8_t *)mb->fake_base);
	bool compute = loom_buffer_usage(buf) == LOOM_BUFFER_USAGE_COMPUTE;
	int rc;

	if (t->view_src || t->op != LOOM_OP_NONE)
		return LOOM_OK;

	rc = meta_split_of(md, t, !compute, &st);
	if (rc)
		return rc;

	pthread_mutex_lock(&mb->lock);
	mt = take_old(mb, offs, t, &st);
	if (mt) {
		t->state = mt->handle;
		pthread_mutex_unlock(&mb->lock);
		return LOOM_OK;
	}
	mt = calloc(1, sizeof(*mt));
	if (!mt) {
		pthread_mutex_unlock(&mb->lock);
		return loom_error_set(LOOM_E_NOMEM, "meta tensor %s: no memory",
				      t->name);
	}
	mt->md = md;
	mt->owner = mb;
	mt->raw = st;
	mt->synced = st;
	mt->offs = offs;
	rc = loom_state_new(mb->scope, mt, &mt->handle);
	for (int j = 0; j < md->n && !rc; j++)
		rc = place_slice(mb, mt, t, j, compute);
	if (rc) {
		loom_state_release(mb->scope, mt->handle);
		unaccount(mb, mt);
		free_record(mt, md->n);
		pthread_mutex_unlock(&mb->lock);
		return rc;
	}
	mt->next = mb->tensors;
	mb->tensors = mt;
	t->state = mt->handle;
	if (md->world && !compute)
		note_placed(mb, t, &st);
	pthread_mutex_unlock(&mb->lock);
	return LOOM_OK;
}

/* The record of t, or of the whole tensor t views at offset 0; *status
 * as meta_tensor_of() says it. */
static struct meta_tensor *record_of(const struct loom_tensor *t, int *status)
{
	struct meta_tensor *mt = meta_tensor_of(t, status);

	if (mt || *status == LOOM_E_STATE)
		return mt;
	if (t->view_src && t->view_offs == 0 &&
	    loom_tensor_same_shape(t, t->view_src) &&
	    t->type == t->view_src->type)
		return meta_tensor_of(t->view_src, status);
	return NULL;
}

/* The record that set/get of t goes through, with its slices' memory
 * ready.  A node before the meta backend computed it, a node whose
 * results a later graph has replaced, or a partial view has none: that is
 * the caller's mistake and an error. */
int meta_tensor_data(const struct loom_tensor *t, struct meta_tensor **out)
{
	int status;
	struct meta_tensor *mt = record_of(t, &status);

	if (!mt && status == LOOM_E_STATE)
		return loom_error_set(LOOM_E_STATE,
				      "%s has no data on the meta device any "
				      "more (the meta backend computed "
				      "another graph since, or its buffer or "
				      "backend was freed)", t->name);
	if (!mt)
		return loom_error_set(LOOM_E_STATE,
				      "%s has no data on the meta device yet "
				      "(a node is readable after the meta "
				      "backend computed it; views other than "
				      "whole ones are not)", t->name);
	*out = mt;
	return meta_tensor_ready(mt);
}

static int buffer_set_tensor(loom_buffer_t *buf, struct loom_tensor *t,
			     const void *data, size_t offset, size_t size)
{
	return meta_tensor_set(t, data, offset, size, NULL);
}

static int buffer_get_tensor(loom_buffer_t *buf, const struct loom_tensor *t,
			     void *data, size_t offset, size_t size)
{
	return meta_tensor_get(t, data, offset, size, NULL);
}

static int buffer_memset_tensor(loom_buffer_t *buf, struct loom_tensor *t,
				uint8_t value, size_t offset, size_t size)
{
	return meta_tensor_memset(t, value, offset, size);
}

static int buffer_clear(loom_buffer_t *buf, uint8_t value)
{
	struct meta_buffer *mb = loom_buffer_context(buf);
	int rc = LOOM_OK;

	pthread_mutex_lock(&mb->lock);
	rc = materialize(mb);
	for (struct meta_tensor *mt = mb->tensors; mt && !rc; mt = mt->next)
		for (int j = 0; j < mb->md->n && !rc; j++)
			if (mt->dev_buf[j])
				rc = loom_buffer_clear(mt->dev_buf[j], value);
	for (struct meta_chunk *c = mb->chunks; c && !rc; c = c->next)
		for (int j = 0; j < mb->md->n && !rc; j++)
			if (c->buf[j])
				rc = loom_buffer_clear(c->buf[j], value);
	pthread_mutex_unlock(&mb->lock);
	return rc;
}

static const struct loom_buffer_iface meta_buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buffer_free,
	.get_base = buffer_get_base,
	.init_tensor = buffer_init_tensor,
	.set_tensor = buffer_set_tensor,
	.get_tensor = buffer_get_tensor,
	.memset_tensor = buffer_memset_tensor,
	.clear = buffer_clear,
};

static int buft_alloc_buffer(loom_buffer_type_t *buft, size_t size,
			     loom_buffer_t **out)
{
	struct meta_dev *md = loom_buffer_type_context(buft);
	struct meta_buffer *mb;
	int rc;

	mb = calloc(1, sizeof(*mb));
	if (!mb)
		return loom_error_set(LOOM_E_NOMEM, "meta buffer: no memory");
	mb->md = md;
	for (int j = 0; j < md->n; j++)
		mb->dbuft[j] = buft == md->wbuft ?
			loom_dev_weight_buffer_type(md->members[j]) :
			loom_dev_buffer_type(md->members[j]);
	mb->size = size;
	/* Never dereferenced: tensors' data pointers only locate them. */
	mb->fake_base = (void *)(uintptr_t)(md->max_align > 4096 ?
					    md->max_align : 4096);
	pthread_mutex_init(&mb->lock, NULL);
	rc = loom_state_scope_new(&meta_state_tag, &mb->scope);
	if (rc)
		goto err_free_mb;
	rc = loom_ctx_new(0, &mb->ctx);
	if (rc)
		goto err_free_scope;
	rc = loom_buffer_new(buft, &meta_buffer_iface, mb, size, out);
	if (rc)
		goto err_free_ctx;
	return LOOM_OK;

err_free_ctx:
	loom_ctx_free(mb->ctx);
err_free_scope:
	loom_state_scope_free(mb->scope);
err_free_mb:
	pthread_mutex_destroy(&mb->lock);
	free(mb);
	return rc;
}

static const struct loom_buffer_type_iface meta_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = buft_get_name,
	.alloc_buffer = buft_alloc_buffer,
	.get_alignment = buft_get_alignment,
	.get_max_size = buft_get_max_size,
};

int meta_buft_new(struct meta_dev *md, loom_reg_t *reg)
{
	bool own = false;
	int rc;

	rc = loom_buffer_type_new(reg, md->dev, &meta_buft_iface, md,
				  &md->buft);
	if (rc)
		return rc;
	for (int j = 0; j < md->n; j++) {
		loom_dev_t *m = md->members[j];
		loom_buffer_type_t *w = loom_dev_weight_buffer_type(m);
		size_t a = w ? loom_buffer_type_alignment(w) : 1;

		if (w && w != loom_dev_buffer_type(m))
			own = true;
		if (a > md->max_align)
			md->max_align = a;
	}
	if (!own)
		return LOOM_OK;
	snprintf(md->wname, sizeof(md->wname), "%s_weights", md->name);
	return loom_buffer_type_new(reg, md->dev, &meta_buft_iface, md,
				    &md->wbuft);
}

loom_buffer_type_t *meta_weight_buffer_type(loom_dev_t *dev)
{
	struct meta_dev *md = meta_dev_of(dev);

	return md ? md->wbuft : NULL;
}

/* Bytes each member device holds for buf (its "meta_buffer_dev_sizes"
 * entry point). */
int meta_buffer_dev_sizes(loom_buffer_t *buf, size_t *sizes, size_t n)
{
	size_t need[META_MAX_DEVS];
	struct meta_buffer *mb;

	if (!buf || !sizes)
		return loom_error_set(LOOM_E_INVAL, "meta_buffer_dev_sizes: "
				      "NULL argument");
	if (!meta_dev_of(loom_buffer_type_device(loom_buffer_get_type(buf))))
		return loom_error_set(LOOM_E_INVAL, "meta_buffer_dev_sizes: "
				      "not a meta buffer");
	mb = loom_buffer_context(buf);
	pthread_mutex_lock(&mb->lock);
	lay_out(mb, NULL, need);
	for (size_t j = 0; j < n; j++)
		sizes[j] = j < (size_t)mb->md->n ? mb->dev_bytes[j] + need[j]
						 : 0;
	pthread_mutex_unlock(&mb->lock);
	return LOOM_OK;
}

/* Member j's slice of t (its "meta_tensor_slice" entry point). */
int meta_tensor_slice(const struct loom_tensor *t, size_t j,
		      struct loom_tensor **out)
{
	struct meta_tensor *mt;
	int rc;

	if (!t || !out)
		return loom_error_set(LOOM_E_INVAL, "meta_tensor_slice: NULL "
				      "argument");
	*out = NULL;
	rc = meta_tensor_data(t, &mt);
	if (rc)
		return rc;
	if (j >= (size_t)mt->md->n)
		return loom_error_set(LOOM_E_INVAL, "meta_tensor_slice: member "
				      "%zu of %s's %d", j, mt->md->name,
				      mt->md->n);
	*out = mt->dev_t[j];
	return LOOM_OK;
}
