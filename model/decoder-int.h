/* SPDX-License-Identifier: MIT */
/* decoder-int.h - the decoder's insides, shared by the files that make its
 * weights (weights.c), its graph (decoder.c, blocks.c, build-*.c) and its
 * reference: the model, its tensors by role, and the state of one build.
 */
#ifndef LOOM_MODEL_DECODER_INT_H
#define LOOM_MODEL_DECODER_INT_H

#include "arch.h"

/* Batches are evaluated over a KV window rounded up to this many tokens,
 * so that consecutive decode steps share one graph. */
#define KV_PAD 32

/* A layer's tensors by role (NULL where the model has none). */
struct llama_layer {
	struct loom_tensor *t[MT_COUNT];
};

struct llama_model {
	struct llama_hparams hp;
	const struct model_arch *arch;
	const struct llama_source *src; /* NULL: synthetic weights */
	loom_dev_t *dev;
	loom_ctx_t *wctx;
	loom_buffer_t *wbuf;
	/* Partial offload: the weights that are not on dev. */
	loom_dev_t *rest;
	int64_t n_first;
	loom_ctx_t *wctx_rest;
	loom_buffer_t *wbuf_rest;
	/* The weights only mul_mat reads, on dev ([0]) and on rest ([1]):
	 * in that device's weight buffer type when it has one of its own. */
	struct loom_tensor **mats[2];
	size_t n_mats[2];
	loom_buffer_t *wbuf_mat[2];
	loom_ctx_t *probe;      /* scratch descriptors while placing */
	struct loom_tensor *glob[MT_FIRST_LAYER]; /* the global tensors */
	float *freq_factors; /* rope_freqs read back, for the rope tables */
	struct llama_layer *layers;
	size_t weight_bytes, decode_bytes, cache_bytes;
	int64_t n_params;

	loom_galloc_t *galloc;

	/* The graph of the last batch shape, reused while it repeats. */
	loom_ctx_t *gctx;
	loom_graph_t *graph;
	int g_n_tokens, g_n_kv;
	bool g_all;
	bool g_placed;
	struct loom_tensor *in_tokens, *in_pos, *in_kv_ids, *in_v_ids;
	struct loom_tensor *in_mask, *in_mask_swa, *in_cos, *in_sin;
	struct loom_tensor *out_logits;
};

/* The state of one graph build. */
struct build {
	struct llama_model *m;
	const struct llama_hparams *hp;
	loom_ctx_t *c;
	int64_t n_tokens;
	int64_t n_kv;
	bool all_logits;
	struct loom_tensor *tokens, *pos, *kv_ids, *v_ids;
	/* [n_kv, n_tokens * group]: causal, and causal within the sliding
	 * window; each made when a layer first reads it. */
	struct loom_tensor *mask, *mask_swa;
	struct loom_tensor *cos, *sin; /* [head_dim / 2, n_tokens] */
};

/* weights.c: the tensors of m's architecture created (types from m->src
 * when set), placed, allocated and filled (synthetic ones from seed). */
int model_create_tensors(struct llama_model *m);
int model_alloc_weights(struct llama_model *m);
int model_fill_weights(struct llama_model *m, uint64_t seed);
/* Frees what placing and filling allocated. */
void model_weights_free(struct llama_model *m);

/* blocks.c: the common blocks of the builders. */
/* Layer il's tensor of role r. */
static inline struct loom_tensor *blk_w(struct build *b, int64_t il,
					enum model_tensor r)
{
	return b->m->layers[il].t[r];
}
/* A new input tensor of the graph. */
struct loom_tensor *blk_input(loom_ctx_t *c, enum loom_type type, int n_dims,
			      int64_t ne0, int64_t ne1, const char *name);
/* RMSNorm of x times w. */
struct loom_tensor *blk_rms(struct build *b, struct loom_tensor *x,
			    struct loom_tensor *w);
/* The embeddings of the batch's tokens, times scale when not 1. */
struct loom_tensor *blk_embed(struct build *b, float scale);
/* Self-attention of layer il over cur (normed): q, k, v (separate or
 * fused, with biases and per-head norms as the model has), rope, the
 * cache, GQA scores over the layer's mask, and the output projection. */
struct loom_tensor *blk_attention(struct build *b, int64_t il,
				  struct loom_tensor *cur);
/* The feed-forward of layer il over cur: gated (gate and up separate or
 * fused) through GELU (gelu) or SiLU, or the experts. */
struct loom_tensor *blk_ffn(struct build *b, int64_t il,
			    struct loom_tensor *cur, bool gelu);
/* The experts' outputs down (n_embd x k x tokens) weighted by w (1 x k x
 * tokens) and summed over the k chosen experts. */
struct loom_tensor *blk_moe_sum(struct build *b, struct loom_tensor *down,
				struct loom_tensor *w);
/* A feed-forward block of layer il over cur (normed). */
typedef struct loom_tensor *(*blk_ffn_fn)(struct build *b, int64_t il,
					   struct loom_tensor *cur);
/* The pre-norm decoder: embeddings, then per layer x += attention(norm(x))
 * and x += ffn(norm_ffn(x)) with the FFN's norm of role ffn_norm, then the
 * output. */
struct loom_tensor *blk_pre_norm(struct build *b, enum model_tensor ffn_norm,
				 blk_ffn_fn ffn);
/* x cut to the tokens whose logits are asked for, past the last layer's
 * attention (il): its FFN runs on them alone. */
struct loom_tensor *blk_last_rows(struct build *b, int64_t il,
				  struct loom_tensor *x);
/* The output norm and projection: the logits. */
struct loom_tensor *blk_output(struct build *b, struct loom_tensor *x);

#endif /* LOOM_MODEL_DECODER_INT_H */
