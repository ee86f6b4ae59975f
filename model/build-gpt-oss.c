/* SPDX-License-Identifier: MIT */
/* build-gpt-oss.c - the graph of gpt-oss: attention with sinks and biases
 * (sliding-window layers alternating with global ones, YaRN rope), then
 * experts chosen by a biased router, weighted by the softmax of the
 * chosen logits, each with biases and the clamped SwiGLU.
 */
#include "decoder-int.h"

/* The clamped SwiGLU's constants (fixed by the model, not in its file). */
#define OAI_ALPHA 1.702f
#define OAI_LIMIT 7.0f

static struct loom_tensor *ffn_oai(struct build *b, int64_t il,
				   struct loom_tensor *cur)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	int64_t t, k = hp->n_expert_used;
	struct loom_tensor *logits, *sel, *w, *gate, *up, *down;

	if (!cur)
		return NULL;
	t = cur->ne[1];
	logits = loom_add(c, loom_mul_mat(c, blk_w(b, il, MT_FFN_GATE_INP),
					  cur),
			  blk_w(b, il, MT_FFN_GATE_INP_BIAS));
	sel = loom_top_k(c, logits, (int)k);
	w = loom_get_rows(c, loom_reshape_3d(c, logits, 1, hp->n_expert, t),
			  sel);
	w = loom_soft_max(c, loom_reshape_2d(c, w, k, t), NULL, 1.0f);
	w = loom_reshape_3d(c, w, 1, k, t);

	cur = loom_reshape_3d(c, cur, hp->n_embd, 1, t);
	gate = loom_add_id(c, loom_mul_mat_id(c, blk_w(b, il, MT_FFN_GATE_EXPS),
					      cur, sel),
			   blk_w(b, il, MT_FFN_GATE_EXPS_BIAS), sel);
	up = loom_add_id(c, loom_mul_mat_id(c, blk_w(b, il, MT_FFN_UP_EXPS),
					    cur, sel),
			 blk_w(b, il, MT_FFN_UP_EXPS_BIAS), sel);
	down = loom_mul_mat_id(c, blk_w(b, il, MT_FFN_DOWN_EXPS),
			       loom_swiglu_oai(c, gate, up, OAI_ALPHA,
					       OAI_LIMIT), sel);
	down = loom_add_id(c, down, blk_w(b, il, MT_FFN_DOWN_EXPS_BIAS), sel);
	return blk_moe_sum(b, down, w);
}

struct loom_tensor *model_build_gpt_oss(struct build *b)
{
	return blk_pre_norm(b, MT_ATTN_POST_NORM, ffn_oai);
}
