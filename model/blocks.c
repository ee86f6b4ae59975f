/* SPDX-License-Identifier: MIT */
/* blocks.c - the blocks every graph builder shares: norms, RoPE (by the
 * op, or from tables with frequency factors), GQA attention over the KV
 * cache with sliding windows, q/k/v separate or fused, the gated FFN
 * (gate and up separate or fused) and the mixture of experts.
 */
#include "decoder-int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct loom_tensor *blk_rms(struct build *b, struct loom_tensor *x,
			    struct loom_tensor *w)
{
	return loom_mul(b->c, loom_rms_norm(b->c, x, b->hp->eps), w);
}

/* Rope from tables of cos and sin per pair and token, made on the host
 * with the file's frequency factors: x [head_dim, n_head, n_tokens] read
 * as pairs (x0, x1) (NORMAL: adjacent; NEOX: the two halves) turned into
 * (x0 cos - x1 sin, x0 sin + x1 cos). */
static struct loom_tensor *rope_table(struct build *b, struct loom_tensor *x,
				      int64_t nh)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	int64_t h2 = hp->head_dim / 2, t = b->n_tokens;
	bool neox = hp->rope_mode == LOOM_ROPE_NEOX;
	size_t step = neox ? (size_t)h2 * sizeof(float) : sizeof(float);
	struct loom_tensor *x4, *x0, *x1, *cs, *sn, *o0, *o1;

	/* A tensor of its own, so that on a meta device the pairs' views
	 * cut it by heads, not inside the projection's slices. */
	x = loom_cont(c, x);
	x4 = neox ? loom_reshape_4d(c, x, h2, 2, nh, t) :
		    loom_reshape_4d(c, x, 2, h2, nh, t);
	if (!x4)
		return NULL;
	x0 = loom_view_4d(c, x4, neox ? h2 : 1, neox ? 1 : h2, nh, t,
			  x4->nb[1], x4->nb[2], x4->nb[3], 0);
	x1 = loom_view_4d(c, x4, neox ? h2 : 1, neox ? 1 : h2, nh, t,
			  x4->nb[1], x4->nb[2], x4->nb[3], step);
	x0 = loom_cont(c, x0);
	x1 = loom_cont(c, x1);
	cs = neox ? loom_reshape_4d(c, b->cos, h2, 1, 1, t) :
		    loom_reshape_4d(c, b->cos, 1, h2, 1, t);
	sn = neox ? loom_reshape_4d(c, b->sin, h2, 1, 1, t) :
		    loom_reshape_4d(c, b->sin, 1, h2, 1, t);
	o0 = loom_sub(c, loom_mul(c, x0, cs), loom_mul(c, x1, sn));
	o1 = loom_add(c, loom_mul(c, x0, sn), loom_mul(c, x1, cs));
	x = loom_concat(c, o0, o1, neox ? 1 : 0);
	return loom_reshape_3d(c, x, hp->head_dim, nh, t);
}

static struct loom_tensor *rope(struct build *b, struct loom_tensor *x,
				int64_t nh, int64_t il)
{
	const struct llama_hparams *hp = b->hp;
	int64_t n_rot = hp->n_rot ? hp->n_rot : hp->head_dim;
	float base, freq_scale;

	if (hp->rope_freqs)
		return rope_table(b, x, nh);
	llama_layer_rope(hp, il, &base, &freq_scale);
	if (hp->yarn_n_ctx)
		/* ext_factor 1, beta_fast 32 and beta_slow 1: llama.cpp's */
		return loom_rope_yarn(b->c, x, b->pos, (int)n_rot,
				      hp->rope_mode, base, freq_scale,
				      (int)hp->yarn_n_ctx, 1.0f,
				      hp->yarn_attn_factor, 32.0f, 1.0f);
	return loom_rope(b->c, x, b->pos, (int)n_rot, hp->rope_mode, base,
			 freq_scale);
}

struct loom_tensor *blk_input(loom_ctx_t *c, enum loom_type type, int n_dims,
			      int64_t ne0, int64_t ne1, const char *name)
{
	int64_t ne[2] = { ne0, ne1 };
	struct loom_tensor *t = loom_tensor_new(c, type, n_dims, ne);

	if (t) {
		loom_tensor_set_name(t, name);
		loom_tensor_set_flags(t, LOOM_TENSOR_INPUT);
	}
	return t;
}

/* The mask layer il reads. */
static struct loom_tensor *layer_mask(struct build *b, int64_t il)
{
	const struct llama_hparams *hp = b->hp;
	bool slides = llama_layer_slides(hp, il);
	struct loom_tensor **mask = slides ? &b->mask_swa : &b->mask;

	if (!*mask)
		*mask = blk_input(b->c, LOOM_TYPE_F32, 2, b->n_kv,
				  b->n_tokens * (hp->n_head / hp->n_head_kv),
				  slides ? "inp_mask_swa" : "inp_mask");
	return *mask;
}

/* q, k and v of layer il's projections of cur, [head_dim, heads,
 * tokens] each: three matrices, or one whose rows hold q, k then v. */
static void project_qkv(struct build *b, int64_t il, struct loom_tensor *cur,
			struct loom_tensor *out[3])
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	int64_t hd = hp->head_dim, t = b->n_tokens;
	int64_t nh[3] = { hp->n_head, hp->n_head_kv, hp->n_head_kv };
	size_t off = 0;
	struct loom_tensor *qkv;

	if (!hp->fused_qkv) {
		for (int i = 0; i < 3; i++) {
			out[i] = loom_mul_mat(c, blk_w(b, il, MT_ATTN_Q + i),
					      cur);
			if (hp->qkv_bias)
				out[i] = loom_add(c, out[i],
						  blk_w(b, il,
							MT_ATTN_Q_BIAS + i));
			out[i] = loom_reshape_3d(c, out[i], hd, nh[i], t);
		}
		return;
	}
	qkv = loom_mul_mat(c, blk_w(b, il, MT_ATTN_QKV), cur);
	for (int i = 0; i < 3; i++) {
		/* Each a segment of the rows (a meta device cuts the matrix
		 * in these three), made whole, then cut into heads. */
		out[i] = qkv ? loom_cont(c, loom_view_2d(c, qkv, hd * nh[i], t,
							 qkv->nb[1], off)) :
			       NULL;
		out[i] = loom_reshape_3d(c, out[i], hd, nh[i], t);
		off += (size_t)(hd * nh[i]) * sizeof(float);
	}
}

/* Self-attention of one layer over the cache window [0, n_kv).  Heads are
 * grouped [head_dim, tokens * group, n_head_kv] so that every query head
 * of a GQA group multiplies its own key/value head without broadcasting. */
struct loom_tensor *blk_attention(struct build *b, int64_t il,
				  struct loom_tensor *cur)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	int64_t hd = hp->head_dim, hkv = hp->n_head_kv, t = b->n_tokens;
	int64_t g = hp->n_head / hp->n_head_kv;
	struct loom_tensor *qkv[3], *q, *k, *v, *ks, *vs, *kq, *kqv;

	project_qkv(b, il, cur, qkv);
	q = qkv[0];
	k = qkv[1];
	v = qkv[2];
	if (hp->qk_norm) {
		q = blk_rms(b, q, blk_w(b, il, MT_ATTN_Q_NORM));
		k = blk_rms(b, k, blk_w(b, il, MT_ATTN_K_NORM));
	}
	q = rope(b, q, hp->n_head, il);
	k = rope(b, k, hkv, il);

	/* New keys into the cache rows of their positions; new values, one
	 * value a row of [1, n_ctx, head_dim, n_head_kv], into the cache
	 * columns of theirs. */
	k = loom_cont(c, loom_permute(c, k, 0, 2, 1, 3));
	v = loom_permute(c, loom_reshape_4d(c, v, 1, hd, hkv, t), 0, 2, 3, 1);
	ks = loom_set_rows(c, blk_w(b, il, MT_CACHE_K), k, b->kv_ids);
	vs = loom_set_rows(c, loom_reshape_4d(c, blk_w(b, il, MT_CACHE_V), 1,
					      hp->n_ctx, hd, hkv),
			   v, b->v_ids);
	if (!ks || !vs)
		return NULL;
	k = loom_view_3d(c, ks, hd, b->n_kv, hkv, ks->nb[1], ks->nb[2], 0);
	v = loom_view_3d(c, vs, b->n_kv, hd, hkv, vs->nb[2], vs->nb[3], 0);

	q = loom_reshape_4d(c, q, hd, g, hkv, t);
	q = loom_cont(c, loom_permute(c, q, 0, 2, 3, 1));
	q = loom_reshape_3d(c, q, hd, t * g, hkv);

	kq = loom_mul_mat(c, k, q);
	if (hp->oai) {
		/* [n_kv, tokens, n_head]: the heads in their order, each
		 * with its sink; the mask's first rows are the tokens'. */
		kq = loom_reshape_3d(c, kq, b->n_kv, t, hp->n_head);
		kq = loom_soft_max_sinks(c, kq, layer_mask(b, il),
					 blk_w(b, il, MT_ATTN_SINKS),
					 llama_attn_scale(hp));
		kq = loom_reshape_3d(c, kq, b->n_kv, t * g, hkv);
	} else {
		kq = loom_soft_max(c, kq, layer_mask(b, il),
				   llama_attn_scale(hp));
	}
	kqv = loom_mul_mat(c, v, kq);
	kqv = loom_reshape_4d(c, kqv, hd, t, g, hkv);
	kqv = loom_cont(c, loom_permute(c, kqv, 0, 3, 1, 2));
	kqv = loom_reshape_2d(c, kqv, hd * hp->n_head, t);
	kqv = loom_mul_mat(c, blk_w(b, il, MT_ATTN_OUT), kqv);
	return hp->oai ? loom_add(c, kqv, blk_w(b, il, MT_ATTN_OUT_BIAS)) : kqv;
}

/* The gated FFN: act(gate) * up, down; gate and up from their own
 * matrices, or the two halves of a fused ffn_up's rows. */
static struct loom_tensor *ffn_dense(struct build *b, int64_t il,
				     struct loom_tensor *cur, bool gelu)
{
	loom_ctx_t *c = b->c;
	int64_t ff = b->hp->n_ff;
	struct loom_tensor *gate, *up;

	up = loom_mul_mat(c, blk_w(b, il, MT_FFN_UP), cur);
	if (b->hp->fused_up) {
		if (!up)
			return NULL;
		gate = loom_cont(c, loom_view_2d(c, up, ff, up->ne[1],
						 up->nb[1], 0));
		up = loom_cont(c, loom_view_2d(c, up, ff, up->ne[1], up->nb[1],
					       (size_t)ff * sizeof(float)));
	} else {
		gate = loom_mul_mat(c, blk_w(b, il, MT_FFN_GATE), cur);
	}
	gate = gelu ? loom_gelu(c, gate) : loom_silu(c, gate);
	return loom_mul_mat(c, blk_w(b, il, MT_FFN_DOWN),
			    loom_mul(c, gate, up));
}

/* Router softmax, top-k experts with renormalized weights, SwiGLU experts
 * through mul_mat_id, then the weighted sum over the selected experts. */
static struct loom_tensor *ffn_moe(struct build *b, int64_t il,
				   struct loom_tensor *cur)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	int64_t t, k = hp->n_expert_used;
	struct loom_tensor *probs, *sel, *w, *gate, *up, *down;

	if (!cur)
		return NULL;
	/* The tokens of cur: the last layer's may be fewer than the
	 * batch's. */
	t = cur->ne[1];

	probs = loom_soft_max(c, loom_mul_mat(c, blk_w(b, il, MT_FFN_GATE_INP),
					      cur), NULL, 1.0f);
	sel = loom_top_k(c, probs, (int)k);
	w = loom_get_rows(c, loom_reshape_3d(c, probs, 1, hp->n_expert, t),
			  sel);
	w = loom_reshape_2d(c, w, k, t);
	w = loom_div(c, w, loom_sum_rows(c, w));
	w = loom_reshape_3d(c, w, 1, k, t);

	cur = loom_reshape_3d(c, cur, hp->n_embd, 1, t);
	gate = loom_silu(c, loom_mul_mat_id(c, blk_w(b, il, MT_FFN_GATE_EXPS),
					    cur, sel));
	up = loom_mul_mat_id(c, blk_w(b, il, MT_FFN_UP_EXPS), cur, sel);
	down = loom_mul_mat_id(c, blk_w(b, il, MT_FFN_DOWN_EXPS),
			       loom_mul(c, gate, up), sel);
	return blk_moe_sum(b, down, w);
}

struct loom_tensor *blk_moe_sum(struct build *b, struct loom_tensor *down,
				struct loom_tensor *w)
{
	loom_ctx_t *c = b->c;
	int64_t k, t;
	struct loom_tensor *sum;

	down = loom_mul(c, down, w);
	if (!down)
		return NULL;
	k = down->ne[1];
	t = down->ne[2];
	sum = loom_view_2d(c, down, b->hp->n_embd, t, down->nb[2], 0);
	for (int64_t e = 1; e < k; e++)
		sum = loom_add(c, sum,
			       loom_view_2d(c, down, b->hp->n_embd, t,
					    down->nb[2],
					    (size_t)e * down->nb[1]));
	return sum;
}

struct loom_tensor *blk_pre_norm(struct build *b, enum model_tensor ffn_norm,
				 blk_ffn_fn ffn)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	struct loom_tensor *x, *cur;

	x = blk_embed(b, 1.0f);
	for (int64_t il = 0; il < hp->n_layer && x; il++) {
		cur = blk_rms(b, x, blk_w(b, il, MT_ATTN_NORM));
		x = loom_add(c, x, blk_attention(b, il, cur));
		x = blk_last_rows(b, il, x);
		cur = blk_rms(b, x, blk_w(b, il, ffn_norm));
		x = loom_add(c, x, ffn(b, il, cur));
	}
	return blk_output(b, x);
}

struct loom_tensor *blk_ffn(struct build *b, int64_t il,
			    struct loom_tensor *cur, bool gelu)
{
	if (b->hp->n_expert > 0 && b->hp->n_expert_used > 0)
		return ffn_moe(b, il, cur);
	return ffn_dense(b, il, cur, gelu);
}

struct loom_tensor *blk_embed(struct build *b, float scale)
{
	struct loom_tensor *x = loom_get_rows(b->c, b->m->glob[MT_TOKEN_EMBD],
					      b->tokens);

	return scale != 1.0f ? loom_scale(b->c, x, scale) : x;
}

struct loom_tensor *blk_last_rows(struct build *b, int64_t il,
				  struct loom_tensor *x)
{
	if (!x || b->all_logits || b->n_tokens == 1 ||
	    il != b->hp->n_layer - 1)
		return x;
	return loom_view_2d(b->c, x, b->hp->n_embd, 1, x->nb[1],
			    (size_t)(b->n_tokens - 1) * x->nb[1]);
}

struct loom_tensor *blk_output(struct build *b, struct loom_tensor *x)
{
	x = blk_rms(b, x, b->m->glob[MT_OUTPUT_NORM]);
	return loom_mul_mat(b->c, b->m->glob[MT_OUTPUT], x);
}
