/* SPDX-License-Identifier: MIT */
/* meta-policy.c - the default split policy: the usual transformer
 * tensors by name (META.md, "Composition"), for meta devices whose caller
 * gives no policy of its own and for loom_meta_split_default(), which
 * reaches it through the plugin's "split_default" entry point.
 */
#include "meta.h"

#include <string.h>

static bool has(const char *name, const char *part)
{
	return strstr(name, part) != NULL;
}

static void set_split(struct loom_split *out, enum loom_split_state state,
		      int64_t granularity)
{
	out->state = state;
	out->granularity = granularity > 1 ? granularity : 1;
}

/* A head size to keep whole when the model is not given: the largest of
 * 128 and 64 that divides n, else 1. */
static int64_t guess_head(int64_t n)
{
	if (n % 128 == 0)
		return 128;
	if (n % 64 == 0)
		return 64;
	return 1;
}

/* FFN slices are whole blocks of the largest block size the hidden size
 * allows (a K-quant's 256, else Q8_0's 32), so that the up/gate
 * (dimension 1) and down (dimension 0) cuts agree whatever the weight
 * types. */
static int64_t ffn_granularity(int64_t n_ff)
{
	if (n_ff % LOOM_QK_K == 0)
		return LOOM_QK_K;
	return n_ff % LOOM_QK8_0 == 0 ? LOOM_QK8_0 : 1;
}

/* What the policy knows of the model: the head size, the query heads
 * per key/value head and the key/value heads of a split unit (1, 1 and 1
 * without a model). */
struct shape {
	const struct loom_meta_model *m;
	int64_t hd, group, unit;
};

/* The fused q, k, v projection: whole heads, in three segments when the
 * model's head counts say where q, k and v lie. */
static void split_qkv(const struct loom_tensor *t, const struct shape *sh,
		      struct loom_split *out)
{
	const struct loom_meta_model *m = sh->m;
	int64_t hd = m ? sh->hd : guess_head(t->ne[1]);

	set_split(out, LOOM_SPLIT_DIM1, m ? hd * sh->unit : hd);
	if (m && m->n_head > 0 && m->n_head_kv > 0 &&
	    t->ne[1] == hd * (m->n_head + 2 * m->n_head_kv)) {
		out->n_segments = 3;
		out->segments[0] = hd * m->n_head;
		out->segments[1] = hd * m->n_head_kv;
		out->segments[2] = hd * m->n_head_kv;
	}
}

/* Attention's projections: q, k, v by columns (whole GQA groups for q,
 * whole heads for k and v), the output by rows.  False for other names. */
static bool split_attn(const struct loom_tensor *t, const struct shape *sh,
		       struct loom_split *out)
{
	const char *name = t->name;
	bool m = sh->m != NULL;

	/* One KV head (multi-query attention): the head cannot be shared, so
	 * k, v and the cache are whole on every member and the query heads
	 * are cut, with the output's inputs (a member without the head would
	 * leave the k norm and the cache nothing to cut).  A fused
	 * projection keeps attention whole. */
	if (m && sh->m->n_head_kv == 1) {
		int64_t u = sh->m->n_head < 2 ? 0 :
			    loom_meta_head_unit(sh->m->n_head, sh->hd, 2);

		if (u && !has(name, "attn_qkv") && has(name, "attn_q")) {
			set_split(out, LOOM_SPLIT_DIM1, u * sh->hd);
			return true;
		}
		if (u && has(name, "attn_output")) {
			set_split(out, LOOM_SPLIT_DIM0, u * sh->hd);
			return true;
		}
		if (has(name, "attn_qkv") || has(name, "attn_q") ||
		    has(name, "attn_k") || has(name, "attn_v") ||
		    has(name, "attn_output")) {
			set_split(out, LOOM_SPLIT_MIRRORED, 1);
			return true;
		}
	}
	if (has(name, "attn_qkv"))
		split_qkv(t, sh, out);
	else if (has(name, "attn_q"))
		set_split(out, LOOM_SPLIT_DIM1,
			  m ? sh->unit * sh->hd * sh->group :
			      guess_head(t->ne[1]));
	else if (has(name, "attn_k") || has(name, "attn_v"))
		set_split(out, LOOM_SPLIT_DIM1,
			  m ? sh->unit * sh->hd : guess_head(t->ne[1]));
	else if (has(name, "attn_output"))
		set_split(out, LOOM_SPLIT_DIM0,
			  m ? sh->unit * sh->hd * sh->group :
			      guess_head(t->ne[0]));
	else
		return false;
	return true;
}

/* The KV cache by heads, wherever its layout keeps them. */
static void split_cache(const struct loom_tensor *t, const struct shape *sh,
			struct loom_split *out)
{
	int64_t hkv = sh->m ? sh->m->n_head_kv : 0, hd = sh->hd, u = sh->unit;

	if (hkv == 1)
		set_split(out, LOOM_SPLIT_MIRRORED, 1); /* as attention */
	else if (hkv > 1 && t->ne[2] == hkv)
		set_split(out, LOOM_SPLIT_DIM2, u);
	else if (hkv > 1 && t->ne[1] == hkv && t->ne[0] == hd)
		set_split(out, LOOM_SPLIT_DIM1, u);
	else if (hkv > 0 && t->ne[0] == hd * hkv)
		set_split(out, LOOM_SPLIT_DIM0, u * hd);
	else if (hkv > 0 && t->ne[1] == hd * hkv)
		set_split(out, LOOM_SPLIT_DIM1, u * hd);
	else if (!sh->m && t->ne[2] > 1)
		set_split(out, LOOM_SPLIT_DIM2, 1);
	else if (!sh->m)
		set_split(out, LOOM_SPLIT_DIM0, guess_head(t->ne[0]));
	else
		set_split(out, LOOM_SPLIT_MIRRORED, 1);
}

/* The default policy (loom_meta_split_default in loom-backend.h).
 * Granularities: q and the attention output by whole GQA groups
 * (head_dim * n_head / n_head_kv), k and v by whole heads, so that device
 * j holds the query heads of its key/value heads, in units of as many
 * heads as make whole blocks (loom_meta_head_unit); with one KV head, q
 * and the output by whole query heads, k, v and the cache whole; FFN by
 * whole blocks when n_ff allows. */
int meta_split_default(const struct loom_tensor *t, struct loom_split *out,
		       void *userdata)
{
	struct shape sh = { .m = userdata, .hd = 1, .group = 1, .unit = 1 };
	const char *name;

	if (!t || !out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_meta_split_default: NULL "
				      "argument");
	memset(out, 0, sizeof(*out));
	name = t->name;
	if (sh.m && sh.m->head_dim > 0) {
		sh.hd = sh.m->head_dim;
		if (sh.m->n_head > 0 && sh.m->n_head_kv > 0 &&
		    sh.m->n_head % sh.m->n_head_kv == 0)
			sh.group = sh.m->n_head / sh.m->n_head_kv;
		if (sh.m->n_head_kv > 0)
			sh.unit = loom_meta_head_unit(sh.m->n_head_kv,
						      sh.hd * sh.group, 8);
	}

	if (has(name, "norm") || has(name, "ffn_gate_inp"))
		set_split(out, LOOM_SPLIT_MIRRORED, 1);
	else if (split_attn(t, &sh, out))
		;
	else if (has(name, "ffn_up") || has(name, "ffn_gate"))
		set_split(out, LOOM_SPLIT_DIM1, ffn_granularity(t->ne[1]));
	else if (has(name, "ffn_down"))
		set_split(out, LOOM_SPLIT_DIM0, ffn_granularity(t->ne[0]));
	else if (has(name, "cache_k") || has(name, "cache_v"))
		split_cache(t, &sh, out);
	else if (!strcmp(name, "output") || !strcmp(name, "output.weight"))
		set_split(out, LOOM_SPLIT_DIM1, 1);
	else
		set_split(out, LOOM_SPLIT_MIRRORED, 1);
	return LOOM_OK;
}
