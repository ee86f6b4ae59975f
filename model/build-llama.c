/* SPDX-License-Identifier: MIT */
/* build-llama.c - the graph of the Llama family (llama, Mixtral's
 * experts, qwen2, qwen3, qwen3moe, xverse, exaone, phi3): pre-norm
 * attention and SwiGLU FFN (or experts) in residual blocks.
 */
#include "decoder-int.h"

struct loom_tensor *model_build_llama(struct build *b)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	struct loom_tensor *x, *cur;

	x = blk_embed(b, 1.0f);
	for (int64_t il = 0; il < hp->n_layer && x; il++) {
		cur = blk_rms(b, x, blk_w(b, il, MT_ATTN_NORM));
		x = loom_add(c, x, blk_attention(b, il, cur));
		x = blk_last_rows(b, il, x);
		cur = blk_rms(b, x, blk_w(b, il, MT_FFN_NORM));
		x = loom_add(c, x, blk_ffn(b, il, cur, false));
	}
	return blk_output(b, x);
}
