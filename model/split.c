/* SPDX-License-Identifier: MIT */
/* split.c - the split policy of meta devices for the model library's
 * decoders: each tensor's cut (by outputs, by inputs, the cache by heads,
 * or whole) and the unit it keeps whole come from the role table of
 * arch.h, not from matching names.
 */
#include "model.h"
#include "arch.h"

#include <string.h>

void model_split_state_init(const struct llama_hparams *hp,
			    struct model_split_state *out)
{
	memset(out, 0, sizeof(*out));
	llama_meta_model(hp, &out->shape);
	out->fused_up = hp->fused_up;
}

/* FFN slices are whole blocks of the largest block size the width allows
 * (a K-quant's 256, else Q8_0's 32), so that the cuts of up/gate and of
 * down agree whatever the weight types. */
static int64_t ffn_unit(int64_t n_ff)
{
	if (n_ff % LOOM_QK_K == 0)
		return LOOM_QK_K;
	return n_ff % LOOM_QK8_0 == 0 ? LOOM_QK8_0 : 1;
}

/* The KV heads of one attention unit: the fewest that divide n_head_kv
 * and whose GQA groups are whole blocks of 256 values (else 32) with at
 * least 8 units to share, so that the output projection's cut, which the
 * meta device makes a whole number of its type's blocks, meets the cuts
 * of q, k, v and the cache whatever the types (two heads of 128 for a
 * Llama-7B shape). */
static int64_t kv_unit(const struct loom_meta_model *m, int64_t hd,
		       int64_t group)
{
	static const int64_t blocks[] = { LOOM_QK_K, LOOM_QK8_0 };
	int64_t n_kv = m->n_head_kv;

	for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
		for (int64_t u = 1; u <= n_kv / 8; u++)
			if (n_kv % u == 0 && u * hd * group % blocks[b] == 0)
				return u;
	return 1;
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
		out->granularity = ffn_unit(n);
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
	/* One KV head: attention whole on every member (a member without
	 * the head would leave the q/k norms a cut inside a row). */
	if (st->shape.n_head_kv == 1 &&
	    (ti->cut == CUT_CACHE || unit == UNIT_HEAD || unit == UNIT_GROUP)) {
		out->state = LOOM_SPLIT_MIRRORED;
		out->granularity = 1;
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
