/* SPDX-License-Identifier: MIT */
/* meta-split.c - slice sizes from a callback's answer and the device
 * ratios (largest remainder), and moving data between the host and the
 * slices of a split tensor.  The states themselves live in meta-state.c,
 * the op rules in meta-rules.c.
 */
#include "meta.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The segments of t along axis the callback's answer sp gives: its own,
 * which must add up to the dimension, or the whole dimension as one. */
static int split_segments(const struct loom_tensor *t, int axis,
			  const struct loom_split *sp, int64_t *seg,
			  int *n_seg)
{
	int64_t sum = 0;

	*n_seg = sp->n_segments;
	if (*n_seg < 0 || *n_seg > META_MAX_SEG)
		return loom_error_set(LOOM_E_INVAL,
				      "split callback gave %d segments for %s "
				      "(at most %d)", *n_seg, t->name,
				      META_MAX_SEG);
	if (*n_seg == 0) {
		*n_seg = 1;
		seg[0] = t->ne[axis];
		return LOOM_OK;
	}
	for (int s = 0; s < *n_seg; s++) {
		seg[s] = sp->segments[s];
		if (seg[s] < 0)
			return loom_error_set(LOOM_E_INVAL,
					      "split callback gave a negative "
					      "segment for %s", t->name);
		if (seg[s] > t->ne[axis] - sum)
			return loom_error_set(LOOM_E_INVAL,
					      "segments of %s add up to more "
					      "than its dimension %d (%lld)",
					      t->name, axis,
					      (long long)t->ne[axis]);
		sum += seg[s];
	}
	if (sum != t->ne[axis])
		return loom_error_set(LOOM_E_INVAL,
				      "segments of %s add up to %lld, not its "
				      "dimension %d (%lld)", t->name,
				      (long long)sum, axis,
				      (long long)t->ne[axis]);
	return LOOM_OK;
}

static int64_t gcd64(int64_t a, int64_t b)
{
	while (b) {
		int64_t r = a % b;

		a = b;
		b = r;
	}
	return a;
}

/* The unit every slice of t along axis is a multiple of: the callback's
 * granularity (whole heads or GQA groups) and, along dimension 0, the
 * type's block: their least common multiple, so that a head of 128 meets
 * a K-quant block of 256 in units of two heads. */
static int slice_granule(const struct loom_tensor *t, int axis,
			 const struct loom_split *sp, int64_t *g_out,
			 int64_t *blck_out)
{
	int64_t g, blck;

	if (sp->granularity < 0)
		return loom_error_set(LOOM_E_INVAL,
				      "split callback gave granularity %lld for "
				      "%s (0 or 1: any)",
				      (long long)sp->granularity, t->name);
	g = sp->granularity > 1 ? sp->granularity : 1;
	blck = axis == 0 ? loom_type_block_size(t->type) : 1;
	if (blck > 1) {
		int64_t m = g / gcd64(g, blck);

		if (m > INT64_MAX / blck)
			return loom_error_set(LOOM_E_INVAL,
					      "split of dimension 0 of %s: "
					      "granularity %lld and the %s "
					      "block size %lld have no common "
					      "multiple in range", t->name,
					      (long long)g,
					      loom_type_name(t->type),
					      (long long)blck);
		g = m * blck;
	}
	*g_out = g;
	*blck_out = blck;
	return LOOM_OK;
}

/* Turns a callback's answer for t into a state with slice sizes. */
static int state_from_split(struct meta_dev *md, const struct loom_tensor *t,
			    const struct loom_split *sp, struct meta_state *out)
{
	int64_t seg[META_MAX_SEG], g = 1, blck = 1;
	int n_seg, axis, rc;

	if ((int)sp->state < LOOM_SPLIT_DIM0 || sp->state > LOOM_SPLIT_PARTIAL)
		return loom_error_set(LOOM_E_INVAL,
				      "split callback gave an unknown state %d "
				      "for %s", (int)sp->state, t->name);
	meta_state_whole(out, sp->state);
	if (sp->state > LOOM_SPLIT_DIM3)
		return LOOM_OK;

	axis = (int)sp->state;
	rc = split_segments(t, axis, sp, seg, &n_seg);
	if (!rc)
		rc = slice_granule(t, axis, sp, &g, &blck);
	if (rc)
		return rc;
	out->n_seg = n_seg;
	for (int s = 0; s < n_seg; s++) {
		if (seg[s] % g != 0)
			return loom_error_set(LOOM_E_INVAL,
					      "split of dimension %d of %s: "
					      "segment of %lld is not a "
					      "multiple of %lld%s", axis,
					      t->name, (long long)seg[s],
					      (long long)g,
					      blck > 1 ? " (the granularity "
					      "and the block size's common "
					      "multiple)" : "");
		meta_largest_remainder(seg[s] / g, md->ratios_all, md->n_all,
				  out->len[s]);
		for (int k = 0; k < md->n_all; k++)
			out->len[s][k] *= g;
	}
	return LOOM_OK;
}

/* Asks the device's split callback for t's state.  A refusal keeps the
 * callback's status and message; anything but LOOM_OK or a negative
 * status is the callback's mistake and becomes LOOM_E_INVAL. */
static int ask_split(struct meta_dev *md, const struct loom_tensor *t,
		     struct loom_split *sp)
{
	int rc;

	/* Empty, so that a refusal without a message is told apart. */
	loom_error_set(LOOM_OK, "%s", "");
	rc = md->split(t, sp, md->userdata);
	if (rc > 0)
		return loom_error_set(LOOM_E_INVAL, "split callback returned "
				      "%d for %s (not a loom status)", rc,
				      t->name);
	if (rc < 0)
		return loom_error_set(rc, "split callback refused %s: %s",
				      t->name, *loom_error_message() ?
				      loom_error_message() : loom_strerror(rc));
	return LOOM_OK;
}

/* t's state with its slice sizes on md: MIRRORED, or when ask is true
 * what md's split callback says of t. */
int meta_split_of(struct meta_dev *md, const struct loom_tensor *t, bool ask,
		  struct meta_state *out)
{
	struct loom_split sp;
	int rc;

	memset(&sp, 0, sizeof(sp));
	sp.state = LOOM_SPLIT_MIRRORED;
	if (ask) {
		rc = ask_split(md, t, &sp);
		if (rc)
			return rc;
	}
	return state_from_split(md, t, &sp, out);
}

/* Bytes of pos elements along axis in t's layout. */
int64_t meta_axis_bytes(const struct loom_tensor *t, int axis, int64_t pos)
{
	if (axis == 0)
		return (int64_t)loom_type_row_size(t->type, pos);
	return pos * (int64_t)t->nb[axis];
}

/* Bytes of one "row" of a split along axis: the stride of the next
 * dimension (the whole tensor for dimension 3). */
static size_t split_unit(const struct loom_tensor *t, int axis)
{
	return axis < 3 ? t->nb[axis + 1] : loom_tensor_n_bytes(t);
}

static int check_rows(const struct loom_tensor *t, int axis, size_t offset,
		      size_t size, size_t unit)
{
	if (!loom_tensor_is_contiguous(t))
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "set/get of %s: a split tensor must be "
				      "contiguous", t->name);
	if (unit == 0 || offset % unit != 0 || size % unit != 0)
		return loom_error_set(LOOM_E_INVAL,
				      "set/get of %s (%s): offset %zu and "
				      "size %zu must fall on row boundaries "
				      "of the split (%zu bytes)", t->name,
				      meta_state_name((enum loom_split_state)
						      axis),
				      offset, size, unit);
	return LOOM_OK;
}

/* Moves data between the host and a split tensor's slices: per local
 * member and segment one 2D copy of n rows.  bes NULL means blocking
 * copies.  A get over a world then fills in the pieces other ranks hold
 * (a collective: every rank gets the same rows). */
static int split_copy(struct meta_tensor *mt, const struct loom_tensor *t,
		      void *data, size_t offset, size_t size,
		      loom_backend_t *const *bes, bool set)
{
	const struct meta_state *st = &mt->synced;
	struct meta_dev *md = mt->md;
	int axis = (int)st->state, n = md->n, rc, failed = LOOM_OK;
	size_t unit = split_unit(t, axis), n_rows, row0;
	int64_t seg_start = 0;

	rc = check_rows(t, axis, offset, size, unit);
	if (rc)
		return rc;
	n_rows = size / unit;
	row0 = offset / unit;
	if (n_rows == 0)
		return LOOM_OK;

	for (int s = 0; s < st->n_seg; s++) {
		for (int j = 0; j < n; j++) {
			struct loom_tensor *dt = mt->dev_t[j];
			int64_t len = st->len[s][md->first + j], dev_pos = 0;
			int64_t host_pos = seg_start +
					   meta_state_dev_start(st, md, s, j);
			size_t dunit, hb, db, sb;
			uint8_t *h;

			if (len == 0 || !dt)
				continue;
			if (!loom_tensor_is_contiguous(dt))
				return loom_error_set(
					LOOM_E_UNSUPPORTED,
					"set/get of %s: its slices are views "
					"(make it contiguous with cont)",
					t->name);
			for (int s2 = 0; s2 < s; s2++)
				dev_pos += st->len[s2][md->first + j];
			dunit = split_unit(dt, axis);
			hb = (size_t)meta_axis_bytes(t, axis, host_pos);
			db = (size_t)meta_axis_bytes(dt, axis, dev_pos);
			sb = (size_t)meta_axis_bytes(t, axis, len);
			h = (uint8_t *)data + hb;
			if (set && bes)
				rc = loom_backend_tensor_set_2d_async(
					bes[j], dt, h, row0 * dunit + db, sb,
					n_rows, dunit, unit);
			else if (set)
				rc = loom_tensor_set_2d(dt, h,
							row0 * dunit + db, sb,
							n_rows, dunit, unit);
			else if (bes)
				rc = loom_backend_tensor_get_2d_async(
					bes[j], dt, h, row0 * dunit + db, sb,
					n_rows, dunit, unit);
			else
				rc = loom_tensor_get_2d(dt, h,
							row0 * dunit + db, sb,
							n_rows, dunit, unit);
			if (rc && (set || !md->world))
				return rc;
			if (rc && !failed)
				failed = rc;
		}
		seg_start += meta_state_seg_len(st, md, s);
	}
	if (set || !md->world)
		return LOOM_OK;
	/* A rank whose own read failed still takes part, so that none
	 * waits for it. */
	for (int j = 0; bes && j < n; j++) {
		rc = loom_backend_synchronize(bes[j]);
		if (rc && !failed)
			failed = rc;
	}
	rc = meta_world_gather(md, t, st, data, n_rows, unit);
	return failed ? failed : rc;
}

int meta_tensor_set(const struct loom_tensor *t, const void *data,
		    size_t offset, size_t size, loom_backend_t *const *bes)
{
	struct meta_tensor *mt;
	bool first;
	int rc;

	rc = meta_tensor_data(t, &mt);
	if (rc)
		return rc;
	if (mt->synced.state <= LOOM_SPLIT_DIM3)
		return split_copy(mt, t, (void *)data, offset, size, bes, true);

	/* A PARTIAL value is its sum: the world's first member holds it,
	 * the others zero. */
	first = mt->md->first == 0;
	for (int j = 0; j < mt->md->n; j++) {
		struct loom_tensor *dt = mt->dev_t[j];

		if (!dt)
			continue;
		if (mt->synced.state == LOOM_SPLIT_PARTIAL && !first) {
			if (bes)
				loom_backend_synchronize(bes[j]);
			rc = loom_tensor_memset(dt, 0, offset, size);
		} else if (bes) {
			rc = loom_backend_tensor_set_async(bes[j], dt, data,
							   offset, size);
		} else {
			rc = loom_tensor_set(dt, data, offset, size);
		}
		if (rc)
			return rc;
		mt->zero[j] = false;
		first = false;
	}
	return LOOM_OK;
}

/* Fills bytes of a tensor of a meta buffer with value: the whole tensor
 * (a KV cache cleared) is every member's slice filled whole, where no
 * staged block could fall on the split's rows; a part is staged and set
 * like any data (its rows whole). */
int meta_tensor_memset(const struct loom_tensor *t, uint8_t value,
		       size_t offset, size_t size)
{
	struct meta_tensor *mt;
	void *tmp;
	int rc;

	rc = meta_tensor_data(t, &mt);
	if (rc)
		return rc;
	if (offset == 0 && size == loom_tensor_n_bytes(t) &&
	    (mt->synced.state != LOOM_SPLIT_PARTIAL || value == 0)) {
		for (int j = 0; j < mt->md->n && !rc; j++) {
			struct loom_tensor *dt = mt->dev_t[j];

			if (!dt)
				continue;
			rc = loom_tensor_memset(dt, value, 0,
						loom_tensor_n_bytes(dt));
			mt->zero[j] = false;
		}
		return rc;
	}
	tmp = malloc(size);
	if (!tmp)
		return loom_error_set(LOOM_E_NOMEM, "memset of %s: no memory",
				      t->name);
	memset(tmp, value, size);
	rc = meta_tensor_set(t, tmp, offset, size, NULL);
	free(tmp);
	return rc;
}

/* Returns the sum of a PARTIAL tensor's summands (F32 only). */
static int partial_get(struct meta_tensor *mt, const struct loom_tensor *t,
		       void *data, size_t offset, size_t size,
		       loom_backend_t *const *bes)
{
	float *acc = data, *tmp;
	size_t n_f = size / sizeof(float);
	bool first = true;
	int rc = LOOM_OK;

	if (t->type != LOOM_TYPE_F32 || offset % 4 || size % 4)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "get of PARTIAL %s: only whole F32 "
				      "values can be summed", t->name);
	tmp = malloc(size ? size : 1);
	if (!tmp)
		return loom_error_set(LOOM_E_NOMEM, "get of %s: no memory",
				      t->name);
	for (int j = 0; j < mt->md->n; j++) {
		struct loom_tensor *dt = mt->dev_t[j];

		if (!dt || mt->zero[j])
			continue;
		if (bes)
			loom_backend_synchronize(bes[j]);
		rc = loom_tensor_get(dt, first ? acc : tmp, offset, size);
		if (rc)
			break;
		if (!first)
			for (size_t i = 0; i < n_f; i++)
				acc[i] += tmp[i];
		first = false;
	}
	if (!rc && first)
		memset(data, 0, size);
	free(tmp);
	/* The other ranks' summands; a rank whose own read failed still
	 * takes part, so that none waits for it. */
	if (mt->md->world) {
		int r = meta_world_sum(mt->md, acc, n_f);

		rc = rc ? rc : r;
	}
	return rc;
}

int meta_tensor_get(const struct loom_tensor *t, void *data, size_t offset,
		    size_t size, loom_backend_t *const *bes)
{
	struct meta_tensor *mt;
	int rc;

	rc = meta_tensor_data(t, &mt);
	if (rc)
		return rc;
	if (mt->synced.state <= LOOM_SPLIT_DIM3)
		return split_copy(mt, t, data, offset, size, bes, false);
	if (mt->synced.state == LOOM_SPLIT_PARTIAL)
		return partial_get(mt, t, data, offset, size, bes);
	for (int j = 0; j < mt->md->n; j++) {
		if (!mt->dev_t[j])
			continue;
		if (bes)
			return loom_backend_tensor_get_async(bes[j],
							     mt->dev_t[j],
							     data, offset,
							     size);
		return loom_tensor_get(mt->dev_t[j], data, offset, size);
	}
	return loom_error_set(LOOM_E_STATE, "get of %s: no device holds it",
			      t->name);
}
