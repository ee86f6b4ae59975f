/* SPDX-License-Identifier: MIT */
/* meta-world.c - a meta device across the ranks of a world (the mpi
 * plugin's entry points): joining it, comparing what the ranks must agree
 * on, and the host-memory collectives a meta device needs besides its
 * allreduce (a sum, and gathering the pieces of a split tensor that other
 * ranks hold).  The allreduce itself is meta-backend.c's.
 */
#include "meta.h"

#include <stdlib.h>
#include <string.h>

#define HASH_SEED 0xcbf29ce484222325ull

/* FNV-1a over n bytes, continuing from h. */
uint64_t meta_hash(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* What a rank says of itself when it joins, as F32 values that a sum of
 * zeros and one of them leaves exact: its member count, their ratios,
 * and digests of what must be the same everywhere, each in four 16-bit
 * pieces.  A zero reduce digest means "no plugin reduce". */
enum {
	F_N,
	F_RATIOS,
	F_OPTS = F_RATIOS + META_MAX_DEVS,
	F_MODEL = F_OPTS + 4,
	F_REDUCE = F_MODEL + 4,
	F_COUNT = F_REDUCE + 4,
};

static void put_digest(float *f, uint64_t d)
{
	for (int i = 0; i < 4; i++)
		f[i] = (float)((d >> (16 * i)) & 0xffff);
}

/* Every rank's k values, rank r's at all[r * k]: a sum over the world
 * of rows that are zero but for each rank's own.  The caller frees *out. */
static int gather_rows(struct meta_world *w, const float *mine, size_t k,
		       float **out)
{
	size_t n = (size_t)w->n_ranks * k;
	float *all = calloc(n ? n : 1, sizeof(*all));
	int rc;

	if (!all)
		return loom_error_set(LOOM_E_NOMEM, "meta: world: no memory");
	memcpy(all + (size_t)w->rank * k, mine, k * sizeof(*all));
	rc = w->allreduce(w->reg, all, n, LOOM_TYPE_F32);
	if (rc) {
		free(all);
		return rc;
	}
	*out = all;
	return LOOM_OK;
}

/* The options every rank must give alike. */
static uint64_t opts_digest(const struct meta_dev *md)
{
	uint64_t h = HASH_SEED, b = md->bf16_min_bytes;
	int32_t v[3] = { md->has_ratios, (int32_t)md->reduce_type,
			 md->force_fallback };

	h = meta_hash(h, v, sizeof(v));
	return meta_hash(h, &b, sizeof(b));
}

/* The shape the default split policy cuts by; other callbacks' userdata
 * is theirs (the weights' digest catches their differences). */
static uint64_t model_digest(const struct meta_dev *md)
{
	uint64_t h = HASH_SEED;

	if (md->split != meta_split_default)
		return meta_hash(h, "custom split", 12);
	if (!md->userdata)
		return meta_hash(h, "no model", 8);
	return meta_hash(h, md->userdata, sizeof(struct loom_meta_model));
}

/* The plugin all of this rank's members come from when it reduces across
 * ranks by itself ("allreduce_world"), as a digest of its name; 0 when
 * they do not (mixed plugins, or none offers it). */
static uint64_t reduce_digest(const struct meta_dev *md,
			      loom_allreduce_world_fn *fn)
{
	loom_reg_t *reg = loom_dev_reg(md->members[0]);
	const char *name;

	*fn = NULL;
	for (int j = 1; j < md->n; j++)
		if (loom_dev_reg(md->members[j]) != reg)
			return 0;
	*(void **)fn = loom_reg_proc_address(reg, LOOM_PROC_ALLREDUCE_WORLD);
	if (!*fn)
		return 0;
	name = loom_reg_name(reg);
	return meta_hash(HASH_SEED, name, strlen(name)) | 1;
}

/* The first rank whose row differs from rank 0's in field f (4 values),
 * or -1. */
static int differs(const struct meta_world *w, const float *all, int f)
{
	for (int r = 1; r < w->n_ranks; r++)
		if (memcmp(all + (size_t)r * F_COUNT + f, all + f,
			   4 * sizeof(*all)))
			return r;
	return -1;
}

/* Reads the gathered rows into md: the layout of members over the ranks
 * and every member's ratio.  The same on every rank, errors included. */
static int lay_out_world(struct meta_dev *md, const float *all)
{
	struct meta_world *w = md->world;
	int r, n_all = 0;

	for (r = 0; r < w->n_ranks; r++) {
		const float *row = all + (size_t)r * F_COUNT;
		int n = (int)row[F_N];

		w->first[r] = n_all;
		if (n < 1 || n > META_MAX_DEVS)
			return loom_error_set(LOOM_E_INVAL, "meta: world: "
					      "rank %d says it has %d members",
					      r, n);
		if (n_all + n > META_MAX_MEMBERS)
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "meta: world: more than %d "
					      "members over %d ranks",
					      META_MAX_MEMBERS, w->n_ranks);
		for (int j = 0; j < n; j++)
			md->ratios_all[n_all + j] = row[F_RATIOS + j];
		n_all += n;
	}
	w->first[w->n_ranks] = n_all;
	md->n_all = n_all;
	md->first = w->first[w->rank];
	return LOOM_OK;
}

/* Says which rank differs from rank 0 and in what, on every rank. */
static int check_agreement(struct meta_dev *md, const float *all)
{
	struct meta_world *w = md->world;
	double sum = 0;
	int r;

	r = differs(w, all, F_OPTS);
	if (r > 0)
		return loom_error_set(LOOM_E_INVAL, "meta: world: rank %d's "
				      "options differ from rank 0's (reduce "
				      "type, BF16 threshold, fallback, or "
				      "ratios given on some ranks only)", r);
	r = differs(w, all, F_MODEL);
	if (r > 0)
		return loom_error_set(LOOM_E_INVAL, "meta: world: rank %d's "
				      "model shape (the split policy's heads) "
				      "differs from rank 0's", r);
	for (int k = 0; k < md->n_all; k++)
		sum += md->ratios_all[k];
	if (!(sum > 0))
		return loom_error_set(LOOM_E_INVAL, "meta: world: the ratios "
				      "of all ranks sum to zero");
	return LOOM_OK;
}

/* What the plugin that reduces across the ranks needs (its
 * communicators), made now on every rank at once rather than in the first
 * compute; when it declines (on every rank alike: it compares their
 * verdicts), the meta device's own reduce runs instead. */
static int prepare_plugin_reduce(struct meta_dev *md)
{
	struct meta_world *w = md->world;
	loom_allreduce_world_prepare_fn prep;
	struct loom_world_group grp = {
		.size = sizeof(grp),
		.world = w->reg,
		.n_members = md->n_all,
		.first = md->first,
		.key = w->digest,
	};
	int rc;

	*(void **)&prep = loom_reg_proc_address(
		loom_dev_reg(md->members[0]), LOOM_PROC_ALLREDUCE_WORLD_PREPARE);
	if (!prep)
		return LOOM_OK;
	rc = prep(md->members, (size_t)md->n, &grp);
	if (rc == LOOM_E_DECLINED) {
		w->plugin_reduce = NULL;
		rc = LOOM_OK;
	}
	return rc;
}

int meta_world_join(struct meta_dev *md, loom_reg_t *reg)
{
	struct meta_world *w = calloc(1, sizeof(*w));
	struct loom_world info = { .size = sizeof(info) };
	float mine[F_COUNT] = { 0 }, *all = NULL;
	loom_world_fn world;
	loom_allreduce_world_fn fn;
	uint64_t red;
	int rc;

	if (!w)
		return loom_error_set(LOOM_E_NOMEM, "meta: world: no memory");
	md->world = w;
	w->reg = reg;
	*(void **)&world = loom_reg_proc_address(reg, LOOM_PROC_WORLD);
	*(void **)&w->allreduce = loom_reg_proc_address(
		reg, LOOM_PROC_WORLD_ALLREDUCE);
	*(void **)&w->bcast = loom_reg_proc_address(reg, LOOM_PROC_WORLD_BCAST);
	*(void **)&w->gather = loom_reg_proc_address(reg,
						     LOOM_PROC_WORLD_GATHER);
	if (!world || !w->allreduce || !w->bcast)
		return loom_error_set(LOOM_E_UNSUPPORTED, "meta: world: "
				      "plugin %s has no world entry points",
				      loom_reg_name(reg));
	rc = world(reg, &info);
	if (rc)
		return rc;
	if (info.n_ranks < 1 || info.rank < 0 || info.rank >= info.n_ranks)
		return loom_error_set(LOOM_E_INVAL, "meta: world: rank %d of "
				      "%d", info.rank, info.n_ranks);
	w->rank = info.rank;
	w->n_ranks = info.n_ranks;
	w->first = calloc((size_t)w->n_ranks + 1, sizeof(*w->first));
	if (!w->first)
		return loom_error_set(LOOM_E_NOMEM, "meta: world: no memory");

	mine[F_N] = (float)md->n;
	for (int j = 0; j < md->n; j++)
		mine[F_RATIOS + j] = md->has_ratios ? md->ratios[j] : 1.0f;
	put_digest(mine + F_OPTS, opts_digest(md));
	put_digest(mine + F_MODEL, model_digest(md));
	red = reduce_digest(md, &fn);
	put_digest(mine + F_REDUCE, red);
	rc = gather_rows(w, mine, F_COUNT, &all);
	if (rc)
		return rc;
	rc = lay_out_world(md, all);
	if (!rc)
		rc = check_agreement(md, all);
	if (rc)
		goto out;
	/* The plugin reduces across ranks only when every rank's members
	 * come from the same plugin that can. */
	w->plugin_reduce = red && differs(w, all, F_REDUCE) < 0 ? fn : NULL;
	w->digest = meta_hash(HASH_SEED, all,
			      (size_t)w->n_ranks * F_COUNT * sizeof(*all));
	if (w->plugin_reduce)
		rc = prepare_plugin_reduce(md);
out:
	free(all);
	return rc;
}

void meta_world_free(struct meta_world *w)
{
	if (!w)
		return;
	free(w->first);
	free(w);
}

int meta_world_agree(struct meta_dev *md, uint64_t digest, const char *what)
{
	struct meta_world *w = md->world;
	float mine[4], *all = NULL;
	int rc;

	put_digest(mine, digest);
	rc = gather_rows(w, mine, 4, &all);
	if (rc)
		return rc;
	for (int r = 1; r < w->n_ranks; r++) {
		if (memcmp(all + (size_t)r * 4, all, 4 * sizeof(*all)))
			rc = loom_error_set(LOOM_E_INVAL, "meta: %s: rank %d's "
					    "%s differ from rank 0's",
					    md->name, r, what);
		if (rc)
			break;
	}
	free(all);
	return rc;
}

int meta_world_sum(struct meta_dev *md, float *data, size_t n)
{
	return md->world->allreduce(md->world->reg, data, n, LOOM_TYPE_F32);
}

/* Bytes per row of the split that rank r holds of segment s, and where
 * they start in a row of the whole tensor. */
static void rank_piece(const struct meta_dev *md, const struct loom_tensor *t,
		       const struct meta_state *st, int s, int r,
		       int64_t seg_start, size_t *off, size_t *bytes)
{
	const struct meta_world *w = md->world;
	int axis = (int)st->state;
	int64_t start = seg_start, len = 0;

	for (int k = 0; k < w->first[r]; k++)
		start += st->len[s][k];
	for (int k = w->first[r]; k < w->first[r + 1]; k++)
		len += st->len[s][k];
	*off = (size_t)meta_axis_bytes(t, axis, start);
	*bytes = (size_t)meta_axis_bytes(t, axis, len);
}

/* Copies rank r's pieces of rows [0, n_rows) between data and the packed
 * buf (pack: into buf); returns the packed bytes. */
static size_t pack(const struct meta_dev *md, const struct loom_tensor *t,
		   const struct meta_state *st, int r, uint8_t *data,
		   size_t n_rows, size_t unit, uint8_t *buf, bool into)
{
	int64_t seg_start = 0;
	size_t used = 0;

	for (int s = 0; s < st->n_seg; s++) {
		size_t off, bytes;

		rank_piece(md, t, st, s, r, seg_start, &off, &bytes);
		for (size_t i = 0; buf && i < n_rows; i++) {
			uint8_t *h = data + i * unit + off;

			if (into)
				memcpy(buf + used + i * bytes, h, bytes);
			else
				memcpy(h, buf + used + i * bytes, bytes);
		}
		used += bytes * n_rows;
		seg_start += meta_state_seg_len(st, md, s);
	}
	return used;
}

/* Every rank's pieces into data on every rank: one "world_gather" of
 * the packed pieces (or, from a world that has none, one "world_bcast"
 * per rank), then each rank's unpacked into its place. */
int meta_world_gather(struct meta_dev *md, const struct loom_tensor *t,
		      const struct meta_state *st, void *data, size_t n_rows,
		      size_t unit)
{
	struct meta_world *w = md->world;
	size_t total = 0, *sizes, *offs;
	uint8_t *buf;
	int rc = LOOM_OK;

	sizes = calloc(2 * (size_t)w->n_ranks, sizeof(*sizes));
	if (!sizes)
		return loom_error_set(LOOM_E_NOMEM, "get of %s: no memory",
				      t->name);
	offs = sizes + w->n_ranks;
	for (int r = 0; r < w->n_ranks; r++) {
		sizes[r] = pack(md, t, st, r, data, n_rows, unit, NULL, true);
		offs[r] = total;
		total += sizes[r];
	}
	buf = malloc(total ? total : 1);
	if (!buf) {
		free(sizes);
		return loom_error_set(LOOM_E_NOMEM, "get of %s: no memory",
				      t->name);
	}
	pack(md, t, st, w->rank, data, n_rows, unit, buf + offs[w->rank],
	     true);
	if (w->gather)
		rc = w->gather(w->reg, buf + offs[w->rank], buf, sizes, -1);
	for (int r = 0; !w->gather && r < w->n_ranks && !rc; r++)
		if (sizes[r])
			rc = w->bcast(w->reg, buf + offs[r], sizes[r], r);
	for (int r = 0; r < w->n_ranks && !rc; r++)
		if (r != w->rank && sizes[r])
			pack(md, t, st, r, data, n_rows, unit, buf + offs[r],
			     false);
	free(buf);
	free(sizes);
	return rc;
}
