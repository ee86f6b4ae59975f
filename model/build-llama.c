/* SPDX-License-Identifier: MIT */
/* build-llama.c - the graph of the Llama family (llama, Mixtral's
 * experts, qwen2, qwen3, qwen3moe, xverse, exaone, phi3): pre-norm
 * attention and SwiGLU FFN (or experts) in residual blocks.
 */
#include "decoder-int.h"

static struct loom_tensor *ffn(struct build *b, int64_t il,
			       struct loom_tensor *cur)
{
	return blk_ffn(b, il, cur, false);
}

struct loom_tensor *model_build_llama(struct build *b)
{
	return blk_pre_norm(b, MT_FFN_NORM, ffn);
}
