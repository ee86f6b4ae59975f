/* SPDX-License-Identifier: MIT */
/* decoder.h - the decoders of the model library, written against the
 * public Loom API: the architectures of arch.h (each with its graph
 * builder), seeded synthetic weights on any device (a meta device
 * included), a KV cache, and one call that evaluates a batch of tokens.
 */
#ifndef LOOM_MODEL_DECODER_H
#define LOOM_MODEL_DECODER_H

#include <loom/loom-backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The architectures (arch-table.c); zero is llama. */
enum model_arch_id {
	MODEL_ARCH_LLAMA,
	MODEL_ARCH_QWEN2,
	MODEL_ARCH_QWEN3,
	MODEL_ARCH_QWEN3MOE,
	MODEL_ARCH_GEMMA3,
	MODEL_ARCH_XVERSE,
	MODEL_ARCH_EXAONE,
	MODEL_ARCH_PHI3,
	MODEL_ARCH_INTERNLM2,
	MODEL_ARCH_MISTRAL3,
	MODEL_ARCH_GPT_OSS,
	MODEL_ARCH_COUNT,
};

/* Model shape.  n_expert == 0 (or n_expert_used == 0) means a dense
 * SwiGLU FFN; otherwise every layer has a mixture-of-experts FFN that
 * routes each token to n_expert_used of n_expert experts. */
struct llama_hparams {
	int64_t n_vocab;
	int64_t n_embd;
	int64_t n_head;
	int64_t n_head_kv;     /* divides n_head (GQA) */
	int64_t head_dim;      /* even */
	int64_t n_ff;
	int64_t n_layer;
	int64_t n_expert;
	int64_t n_expert_used;
	int64_t n_ctx;         /* KV cache length in tokens */
	float rope_base;
	float eps;             /* RMSNorm epsilon */
	enum loom_type wtype;  /* matrices and embeddings; norms are F32 */
	/* What model files vary; zero (the presets) is Llama's choice. */
	enum loom_rope_mode rope_mode;
	int64_t n_rot;         /* rotated values per head; 0: head_dim */
	float rope_scale;      /* position scale (linear scaling); 0: 1 */
	bool qkv_bias;         /* attn_q/k/v.bias added to the projections */
	bool qk_norm;          /* attn_q_norm/attn_k_norm: RMSNorm per head */
	bool tied_output;      /* no output.weight: token_embd projects */
	bool rope_freqs;       /* rope_freqs.weight: a divisor of each pair's
				* frequency (Llama 3.1); n_rot is head_dim */
	enum loom_type cache_type; /* KV cache: F32 or F16 */
	/* Gemma's choices; zero is Llama's. */
	bool gelu;             /* FFN gate through GELU (tanh), not SiLU */
	bool embd_scale;       /* embeddings times sqrt(n_embd) */
	bool post_norms;       /* blk.N.post_attention_norm and post_ffw_norm:
				* RMSNorm of the attention's and the FFN's
				* outputs before each is added */
	float attn_scale;      /* scores' scale; 0: 1 / sqrt(head_dim) */
	int64_t n_swa;         /* sliding window: a token sees itself and the
				* n_swa - 1 before it; 0: every layer sees
				* all */
	int64_t swa_pattern;   /* with n_swa: layer i slides unless
				* i % swa_pattern == swa_pattern - 1; 0: all
				* slide */
	float rope_base_swa;   /* rope base of sliding layers, which are not
				* scaled; 0: rope_base */
	/* The architecture, whose graph builder runs the model and whose
	 * features (arch.h) bound the choices above. */
	enum model_arch_id arch;
	bool fused_qkv;        /* attn_qkv: q, k and v in one matrix */
	bool fused_up;         /* ffn_up [n_embd, 2 n_ff]: gate, then up */
	/* gpt-oss's choices; zero is Llama's. */
	bool oai;              /* attention sinks and an output bias; the FFN
				* normed by post_attention_norm; the router
				* and the experts biased, the experts through
				* the clamped SwiGLU (loom_swiglu_oai) */
	int64_t yarn_n_ctx;    /* YaRN over this many original positions
				* (rope_scale the factor's inverse); 0: no
				* YaRN */
	float yarn_attn_factor; /* YaRN's scale of the rotation */
};

/* Fills *out with a named preset: "tiny", "tiny-moe", "small",
 * "small-moe" or "7b-layer" (7B-shaped layers, two of them).  The weight
 * type is F32 and n_ctx 1024; change them after.  Returns
 * LOOM_E_NOT_FOUND for an unknown name. */
int llama_hparams_preset(const char *name, struct llama_hparams *out);
/* The preset names, NULL-terminated (static). */
const char *const *llama_preset_names(void);
/* Checks the shape (divisibility, block sizes); LOOM_E_INVAL with a
 * message in loom_error_message() when it cannot be built. */
int llama_hparams_check(const struct llama_hparams *hp);

/* Whether layer il attends over the sliding window alone. */
bool llama_layer_slides(const struct llama_hparams *hp, int64_t il);
/* Layer il's rope base and position scale. */
void llama_layer_rope(const struct llama_hparams *hp, int64_t il,
		      float *base, float *scale);
/* What attention scores are multiplied by before the softmax. */
float llama_attn_scale(const struct llama_hparams *hp);

/* The shape facts loom_meta_split_default() needs for whole heads. */
void llama_meta_model(const struct llama_hparams *hp,
		      struct loom_meta_model *out);

struct llama_model;

/* Where weights come from when they are not synthetic (a model file):
 * type() gives the type of the weight called name (def when the source
 * has no say), fill() writes a weight once it is placed on the device.
 * Both return LOOM_OK or an error with its message set. */
struct llama_source {
	int (*type)(void *user, const char *name, enum loom_type def,
		    enum loom_type *out);
	int (*fill)(void *user, struct loom_tensor *t);
	void *user;
};

/* As llama_model_new, with the weights of src rather than synthetic ones.
 * The tensors are the same, plus blk.N.attn_q/k/v.bias with qkv_bias,
 * blk.N.attn_q_norm/attn_k_norm.weight with qk_norm,
 * blk.N.post_attention_norm/post_ffw_norm.weight with post_norms,
 * rope_freqs.weight [head_dim / 2] with rope_freqs; output.weight is
 * absent with tied_output. */
int llama_model_load(const struct llama_hparams *hp, loom_dev_t *dev,
		     const struct llama_source *src,
		     struct llama_model **out);

/* Creates the weights and KV cache on dev (any device, a meta device
 * included) in one buffer of the device's buffer type marked as weights,
 * fills them with values drawn from a fixed generator seeded with seed
 * (the same seed gives the same values on every device), and clears the
 * cache.  Tensor names follow loom_meta_split_default(): token_embd,
 * blk.N.attn_norm, blk.N.attn_q/k/v/output, blk.N.ffn_norm,
 * blk.N.ffn_gate/up/down (or ffn_gate_inp and ffn_gate/up/down_exps),
 * output_norm, output (all with .weight), and cache_k.N, cache_v.N.
 * The caller frees *out with llama_model_free(). */
int llama_model_new(const struct llama_hparams *hp, loom_dev_t *dev,
		    uint64_t seed, struct llama_model **out);
/* Partial offload: a model over two devices.  Layers [0, n_first) go to
 * first and the others to rest; the output (output_norm, output) goes to
 * first when every layer is there, else to rest; token_embd, which
 * get_rows reads one row per token, and rope_freqs, which the host reads,
 * go to rest.  A weight of first's whose op first cannot run (asked with
 * supports_op on a probe of that op: mul_mat for matrices, mul for
 * norms, add for biases, mul_mat_id for experts) goes to rest instead, as
 * does a layer's KV cache when first cannot write it with set_rows and
 * read it in attention.  rest NULL (or first) puts everything on first.
 * Run such a model with a scheduler over backends of both devices
 * (llama_eval_sched). */
struct llama_placement {
	loom_dev_t *first;
	loom_dev_t *rest;
	int64_t n_first; /* layers on first; more than n_layer is all */
};

/* llama_model_new and llama_model_load with the weights placed as pl
 * says.  llama_model_device() is pl->first. */
int llama_model_new_placed(const struct llama_hparams *hp,
			   const struct llama_placement *pl, uint64_t seed,
			   struct llama_model **out);
int llama_model_load_placed(const struct llama_hparams *hp,
			    const struct llama_placement *pl,
			    const struct llama_source *src,
			    struct llama_model **out);

/* True when dev supports every op of the model's graph (hp, with the
 * weight types of src when not NULL); else false, with the first op it
 * lacks (or why no graph could be built) in what (size bytes). */
bool llama_dev_runs(const struct llama_hparams *hp,
		    const struct llama_source *src, loom_dev_t *dev,
		    char *what, size_t size);

/* Frees the model, its buffers and its graph allocator; NULL is a no-op. */
void llama_model_free(struct llama_model *m);

const struct llama_hparams *llama_model_hparams(const struct llama_model *m);
loom_dev_t *llama_model_device(const struct llama_model *m);
/* The context holding the weight and cache tensors (owned by m); of a
 * placed model, those on its first device. */
loom_ctx_t *llama_model_ctx(const struct llama_model *m);
/* The weight or cache tensor of that name, wherever it is; NULL when the
 * model has none.  Owned by m. */
struct loom_tensor *llama_model_tensor(const struct llama_model *m,
				       const char *name);
/* Bytes of the weights (cache excluded), as the device holds them. */
size_t llama_model_weight_bytes(const struct llama_model *m);
/* Bytes of weights one decode token reads: every matrix but the
 * embedding table (one row) and, for MoE, only the experts used. */
size_t llama_model_decode_bytes(const struct llama_model *m);
/* Number of weight values (cache excluded). */
int64_t llama_model_n_params(const struct llama_model *m);
/* The buffer holding weights and cache, and the graph allocator's compute
 * buffer (NULL before the first llama_eval or llama_model_reserve); both
 * owned by m. */
loom_buffer_t *llama_model_weight_buffer(const struct llama_model *m);
/* The buffer of the matrices on the device's own weight buffer type (an
 * interleaved layout; a meta device's per-member one), NULL where they
 * sit in the weight buffer; owned by m. */
loom_buffer_t *llama_model_matrix_buffer(const struct llama_model *m);
/* Bytes of weights and cache m holds on its device (part 0) or on its
 * rest device (part 1; 0 for a model on one device): that weight buffer
 * and, where the device's weight buffer type is one of its own
 * (loom_dev_weight_buffer_type), the buffer of the matrices that only
 * mul_mat reads, which are placed there. */
size_t llama_model_held_bytes(const struct llama_model *m, int part);
/* A placed model's rest device and the buffer of the weights and cache it
 * holds (NULL for a model on one device); owned by m. */
loom_dev_t *llama_model_rest_device(const struct llama_model *m);
loom_buffer_t *llama_model_rest_buffer(const struct llama_model *m);
loom_buffer_t *llama_model_compute_buffer(const struct llama_model *m);
/* Bytes of the KV cache. */
size_t llama_model_cache_bytes(const struct llama_model *m);
/* Size of the compute buffer the graph allocator holds (0 before the
 * first llama_eval or llama_model_reserve). */
size_t llama_model_compute_bytes(const struct llama_model *m);
/* Number of nodes of the last graph built (0 before any). */
int llama_model_graph_nodes(const struct llama_model *m);

/* Sizes the compute buffer for batches of up to n_tokens tokens at any
 * position, so that later calls do not grow it. */
int llama_model_reserve(struct llama_model *m, int n_tokens);

/* As llama_model_reserve, in the memory of scheduler s. */
int llama_model_reserve_sched(struct llama_model *m, loom_sched_t *s,
			      int n_tokens);

/* Builds anew the graph llama_eval would run for n_tokens at n_past (its
 * inputs not set), in place of the model's last graph; owned by m until
 * the next build or eval.  For measuring what planning a graph costs. */
loom_graph_t *llama_model_graph(struct llama_model *m, int n_tokens,
			       int n_past);

/* Forgets the cache contents (zeroes it). */
int llama_model_clear_cache(struct llama_model *m);

/* Evaluates n_tokens tokens at positions n_past.. on backend be (a backend
 * of the model's device), writing their keys and values into the cache.
 * logits receives n_vocab floats for the last token, or n_vocab *
 * n_tokens floats (token-major) when all_logits is true.  The graph is
 * rebuilt only when the batch shape changes; its compute buffer is kept
 * between calls. */
int llama_eval(struct llama_model *m, loom_backend_t *be,
	       const int32_t *tokens, int n_tokens, int n_past,
	       bool all_logits, float *logits);

/* As llama_eval, through scheduler s, whose backends must include ones
 * of the devices holding the model's weights; the compute memory is s's
 * (llama_model_compute_bytes does not count it: see
 * loom_sched_buffer_size). */
int llama_eval_sched(struct llama_model *m, loom_sched_t *s,
		     const int32_t *tokens, int n_tokens, int n_past,
		     bool all_logits, float *logits);

/* The logits of tokens at positions 0..n_tokens-1 (n_vocab * n_tokens
 * doubles, token-major) computed plainly on the host in double precision
 * from the model's weights as read back from its device: a reference to
 * check llama_eval against.  Slow; meant for small presets. */
int llama_reference_eval(struct llama_model *m, const int32_t *tokens,
			 int n_tokens, double *logits);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_MODEL_DECODER_H */
