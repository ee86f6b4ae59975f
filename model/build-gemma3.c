/* SPDX-License-Identifier: MIT */
/* build-gemma3.c - the graph of Gemma 3: embeddings times sqrt(n_embd),
 * attention (sliding-window layers and global ones, each with its rope
 * base) and a GELU-gated FFN, each output normed before it is added.
 */
#include "decoder-int.h"

#include <math.h>

struct loom_tensor *model_build_gemma3(struct build *b)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	struct loom_tensor *x, *cur;

	x = blk_embed(b, hp->embd_scale ? sqrtf((float)hp->n_embd) : 1.0f);
	for (int64_t il = 0; il < hp->n_layer && x; il++) {
		cur = blk_rms(b, x, blk_w(b, il, MT_ATTN_NORM));
		cur = blk_attention(b, il, cur);
		if (hp->post_norms)
			cur = blk_rms(b, cur, blk_w(b, il, MT_ATTN_POST_NORM));
		x = loom_add(c, x, cur);
		x = blk_last_rows(b, il, x);
		cur = blk_rms(b, x, blk_w(b, il, MT_FFN_NORM));
		cur = blk_ffn(b, il, cur, hp->gelu);
		if (hp->post_norms)
			cur = blk_rms(b, cur, blk_w(b, il, MT_FFN_POST_NORM));
		x = loom_add(c, x, cur);
	}
	return blk_output(b, x);
}
