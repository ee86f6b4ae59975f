/* SPDX-License-Identifier: MIT */
/* split.c - the split policy of meta devices for the model library's
 * decoders: each tensor's cut (by outputs, by inputs, the cache by heads,
 * or whole) and the unit it keeps whole come from the role table of
 * arch.h, not from matching names.
 */
#include "model.h"
#include "arch.h"
#include "gguf.h"

#include <string.h>

/* The least common multiple of two block sizes (1, 32 or 256 in Loom's
 * types; a size of 0 counts as 1). */
static int64_t block_lcm(int64_t a, int64_t b)
{
	int64_t x, y;

	a = a > 1 ? a : 1;
	b = b > 1 ? b : 1;
	for (x = a, y = b; y;) {
		int64_t r = x % y;

		x = y;
		y = r;
	}
	return a / x * b;
}

void model_split_state_init(const struct llama_hparams *hp,
			    const struct gguf *g,
			    struct model_split_state *out)
{
	memset(out, 0, sizeof(*out));
	llama_meta_model(hp, &out->shape);
	out->fused_up = hp->fused_up;
	out->fused_qkv = hp->fused_qkv;
	out->ff_block = loom_type_block_size(hp->wtype);
	if (!g)
		return;
	/* The file's own types: every tensor cut along n_ff by its inputs
	 * (ffn_down, in any layer) keeps whole blocks. */
	out->ff_block = 1;
	for (size_t i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor_get(g, i);
		int64_t il;
		enum model_tensor r = model_tensor_role(t->name, &il);
		enum loom_type type;

		if (r == MT_COUNT || model_tensor_infos[r].unit != UNIT_FF ||
		    model_tensor_infos[r].cut != CUT_IN ||
		    gguf_tensor_loom_type(t, &type))
			continue;
		out->ff_block = block_lcm(out->ff_block,
					  loom_type_block_size(type));
	}
}

/* FFN slices are whole 32-value rows and whole blocks of the types cut
 * by their inputs (st->ff_block), so that the cuts of up/gate and of
 * down agree: an F32 or Q8_0 FFN of 2816 is cut 1408 and 1408, where
 * blocks of 256 would give 1536 and 1280. */
static int64_t ffn_unit(const struct model_split_state *st, int64_t n_ff)
{
	int64_t u = block_lcm(st->ff_block, LOOM_QK8_0);

	if (n_ff % u == 0)
		return u;
	return st->ff_block > 1 && n_ff % st->ff_block == 0 ? st->ff_block : 1;
}

/* The KV heads of one attention unit: whole blocks of a GQA group with
 * at least 8 units to share (two heads of 128 for a Llama-7B shape). */
static int64_t kv_unit(const struct loom_meta_model *m, int64_t hd,
		       int64_t group)
{
	return loom_meta_head_unit(m->n_head_kv, hd * group, 8);
}

/* The granularity of unit u along an axis of n values. */
static void set_unit(const struct model_split_state *st, enum model_unit u,
		     int64_t n, struct loom_split *out)
{
	const struct loom_meta_model *m = &st->shape;
	int64_t hd = m->head_dim > 0 ? m->head_dim : 1;
	int64_t group = m->n_head_kv > 0 ? m->n_head / m->n_head_kv : 1;

	if (group < 1)
		group = 1;
	switch (u) {
	case UNIT_ANY:
		out->granularity = 1;
		break;
	case UNIT_HEAD:
		out->granularity = hd * kv_unit(m, hd, group);
		break;
	case UNIT_GROUP:
		out->granularity = hd * group * kv_unit(m, hd, group);
		break;
	case UNIT_FF:
		out->granularity = ffn_unit(st, n);
		break;
	}
}

int model_split(const struct loom_tensor *t, struct loom_split *out,
		void *userdata)
{
	const struct model_split_state *st = userdata;
	const struct model_tensor_info *ti;
	enum model_unit unit;
	enum model_tensor r;
	int64_t il;

	if (!t || !out || !st)
		return loom_error_set(LOOM_E_INVAL, "model_split: NULL "
				      "argument");
	memset(out, 0, sizeof(*out));
	r = model_tensor_role(t->name, &il);
	if (r == MT_COUNT)
		return loom_error_set(LOOM_E_INVAL, "model_split: tensor '%s' "
				      "is none of the model's", t->name);
	ti = &model_tensor_infos[r];
	unit = ti->unit;
	/* One KV head (multi-query attention): the head cannot be shared,
	 * so k, v, their norm and the cache are whole on every member, and
	 * the query heads are cut, a whole number of heads per member, with
	 * the output projection's inputs.  Each member reads the one K and
	 * V its heads need, and none is left a cut inside a head's norm.
	 * A fused projection keeps attention whole. */
	if (st->shape.n_head_kv == 1 &&
	    (ti->cut == CUT_CACHE || unit == UNIT_HEAD || unit == UNIT_GROUP)) {
		int64_t hd = st->shape.head_dim > 0 ? st->shape.head_dim : 1;
		int64_t u = st->fused_qkv || st->shape.n_head < 2 ? 0 :
			    loom_meta_head_unit(st->shape.n_head, hd, 2);

		out->state = LOOM_SPLIT_MIRRORED;
		out->granularity = 1;
		if (unit != UNIT_GROUP || !u)
			return LOOM_OK;
		out->state = ti->cut == CUT_IN ||
					     loom_tensor_n_dims(t) == 1 ?
				     LOOM_SPLIT_DIM0 : LOOM_SPLIT_DIM1;
		out->granularity = hd * u;
		return LOOM_OK;
	}
	/* A fused ffn_up (gate, then up) stays whole, as attn_qkv does: a
	 * device's slice of either would not hold whole heads or the gate
	 * and up of the same rows.  The attention's output and down still
	 * cut the work. */
	switch (r == MT_FFN_UP && st->fused_up ? CUT_MIRROR : ti->cut) {
	case CUT_MIRROR:
		out->state = LOOM_SPLIT_MIRRORED;
		out->granularity = 1;
		break;
	case CUT_OUT:
		/* A bias is cut as its matrix's outputs. */
		out->state = loom_tensor_n_dims(t) == 1 ? LOOM_SPLIT_DIM0 :
							  LOOM_SPLIT_DIM1;
		set_unit(st, unit, t->ne[out->state == LOOM_SPLIT_DIM0 ? 0 : 1],
			 out);
		break;
	case CUT_IN:
		out->state = LOOM_SPLIT_DIM0;
		set_unit(st, unit, t->ne[0], out);
		break;
	case CUT_CACHE:
		/* [.., .., n_head_kv]: whole units of heads. */
		out->state = LOOM_SPLIT_DIM2;
		out->granularity = kv_unit(&st->shape,
					   st->shape.head_dim > 0 ?
					   st->shape.head_dim : 1,
					   st->shape.n_head_kv > 0 &&
					   st->shape.n_head >= st->shape.n_head_kv ?
					   st->shape.n_head / st->shape.n_head_kv : 1);
		break;
	}
	return LOOM_OK;
}
