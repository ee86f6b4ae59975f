/* SPDX-License-Identifier: MIT */
/* arch.h - the architectures as tables: every tensor a decoder may have
 * (its role, GGUF name, shape, what reads it, how tensor parallelism cuts
 * it) and every architecture (its name, rope, the tensors it has, its
 * metadata and its graph builder).  Internal to the model library.
 */
#ifndef LOOM_MODEL_ARCH_H
#define LOOM_MODEL_ARCH_H

#include "decoder.h"

struct gguf;

/* Tensor roles.  Global ones first, then those of each layer. */
enum model_tensor {
	MT_TOKEN_EMBD,
	MT_OUTPUT_NORM,
	MT_OUTPUT,
	MT_ROPE_FREQS,
	MT_ATTN_NORM, /* first per-layer role */
	MT_ATTN_Q,
	MT_ATTN_K,
	MT_ATTN_V,
	MT_ATTN_QKV,
	MT_ATTN_OUT,
	MT_ATTN_Q_BIAS,
	MT_ATTN_K_BIAS,
	MT_ATTN_V_BIAS,
	MT_ATTN_Q_NORM,
	MT_ATTN_K_NORM,
	MT_ATTN_POST_NORM,
	MT_FFN_NORM,
	MT_FFN_GATE,
	MT_FFN_UP,
	MT_FFN_DOWN,
	MT_FFN_POST_NORM,
	MT_FFN_GATE_INP,
	MT_FFN_GATE_EXPS,
	MT_FFN_UP_EXPS,
	MT_FFN_DOWN_EXPS,
	MT_ATTN_SINKS,
	MT_ATTN_OUT_BIAS,
	MT_FFN_GATE_INP_BIAS,
	MT_FFN_GATE_EXPS_BIAS,
	MT_FFN_UP_EXPS_BIAS,
	MT_FFN_DOWN_EXPS_BIAS,
	MT_CACHE_K,
	MT_CACHE_V,
	MT_COUNT,
};

#define MT_FIRST_LAYER MT_ATTN_NORM

/* A size of the shape, in terms of the hyperparameters. */
enum model_dim {
	D_1,
	D_EMBD,
	D_VOCAB,
	D_Q,      /* n_head * head_dim */
	D_KV,     /* n_head_kv * head_dim */
	D_QKV,    /* D_Q + 2 D_KV */
	D_FF,
	D_FF2,    /* 2 n_ff: gate and up in one matrix */
	D_HEAD,
	D_HALF,   /* head_dim / 2 */
	D_EXPERT,
	D_CTX,
	D_HKV,    /* n_head_kv */
	D_HEADS,  /* n_head */
};

/* Which type a tensor has before a file says otherwise. */
enum model_ttype {
	TT_WEIGHT, /* the model's weight type */
	TT_F32,
	TT_CACHE,  /* the cache's type */
};

/* What reads a weight, for deciding where it goes. */
enum model_use {
	USE_MAT,   /* mul_mat by it */
	USE_EXPS,  /* mul_mat_id by it */
	USE_MUL,   /* a norm's scale: multiplied into rows */
	USE_ADD,   /* a bias */
	USE_CACHE, /* written by set_rows, read by attention */
	USE_EMBD,  /* get_rows from it, one row per token */
	USE_HOST,  /* read back to the host */
};

/* When a model has the tensor, from its hyperparameters. */
enum model_cond {
	C_ALWAYS,
	C_SEP_QKV,   /* q, k, v each its own matrix */
	C_FUSED_QKV,
	C_BIAS,      /* qkv_bias */
	C_QK_NORM,
	C_POST,      /* post_norms */
	C_DENSE,
	C_GATE,      /* dense with a gate matrix of its own */
	C_MOE,
	C_FREQS,
	C_UNTIED,
	C_FFN_NORM,  /* all but gpt-oss, which norms by post_attention_norm */
	C_POST_ATTN, /* post_norms, or gpt-oss's FFN norm */
	C_OAI,       /* gpt-oss's sinks and biases */
};

/* How tensor parallelism cuts it (loom_split): whole on every device,
 * by its outputs (dimension 1, or 0 of a bias), by its inputs
 * (dimension 0), or the cache by heads. */
enum model_cut {
	CUT_MIRROR,
	CUT_OUT,
	CUT_IN,
	CUT_CACHE,
};

/* The unit a cut keeps whole. */
enum model_unit {
	UNIT_ANY,
	UNIT_HEAD,  /* head_dim */
	UNIT_GROUP, /* head_dim * n_head / n_head_kv: a GQA group */
	UNIT_FF,    /* the FFN's blocks */
};

struct model_tensor_info {
	const char *name; /* of a layer's: past "blk.N."; the cache's: before
			   * ".N" */
	enum model_dim ne[3];
	enum model_ttype type;
	enum model_use use;
	enum model_cond cond;
	enum model_cut cut;
	enum model_unit unit;
};

/* The table of roles, indexed by enum model_tensor. */
extern const struct model_tensor_info model_tensor_infos[MT_COUNT];

/* Whether a model of hp has the tensor of role r. */
bool model_tensor_wanted(const struct llama_hparams *hp, enum model_tensor r);
/* The shape of role r's tensor in a model of hp into ne[3]; the number
 * of dimensions. */
int model_tensor_shape(const struct llama_hparams *hp, enum model_tensor r,
		       int64_t ne[3]);
/* The name of role r's tensor of layer il into buf. */
void model_tensor_name(enum model_tensor r, int64_t il, char *buf,
		       size_t size);
/* The role of a tensor named name (of layer *layer, -1 for a global
 * one); MT_COUNT when none. */
enum model_tensor model_tensor_role(const char *name, int64_t *layer);

/* Per-architecture features (struct model_arch.flags). */
enum {
	ARCH_QKV_BIAS = 1u << 0,  /* attn_q/k/v.bias */
	ARCH_QK_NORM = 1u << 1,   /* attn_q_norm/attn_k_norm */
	ARCH_MOE = 1u << 2,       /* experts allowed */
	ARCH_DENSE = 1u << 3,     /* a dense FFN allowed */
	ARCH_GEMMA = 1u << 4,     /* GELU gate, embeddings times sqrt(n_embd),
				   * norms after attention and FFN, sliding
				   * windows */
	ARCH_FUSED_QKV = 1u << 5, /* attn_qkv */
	ARCH_FUSED_UP = 1u << 6,  /* ffn_up holds gate then up */
	ARCH_OAI = 1u << 7,       /* gpt-oss: sinks, biases, clamped SwiGLU
				   * experts */
};

struct build;
struct keys;

/* The graph of a batch: the logits of b's batch, NULL with the context's
 * error set. */
typedef struct loom_tensor *(*model_build_fn)(struct build *b);
/* The keys only this architecture has, read into hp. */
typedef int (*model_keys_fn)(struct keys *k, struct llama_hparams *hp);

struct model_arch {
	const char *name;
	enum model_arch_id id;
	enum loom_rope_mode rope;
	unsigned flags;
	model_keys_fn keys; /* NULL: none of its own */
	model_build_fn build;
};

/* The architecture of id; NULL past the table. */
const struct model_arch *model_arch_get(enum model_arch_id id);
/* The architecture named name; NULL when none. */
const struct model_arch *model_arch_find(const char *name);

/* The builders (build-*.c). */
struct loom_tensor *model_build_llama(struct build *b);
struct loom_tensor *model_build_gemma3(struct build *b);
struct loom_tensor *model_build_gpt_oss(struct build *b);

/* Reading metadata (hparams.c): the file and the architecture's name. */
struct keys {
	const struct gguf *g;
	const char *arch;
};
/* {arch}.what as an integer; def when absent (def < 0: required). */
int model_key_int(struct keys *k, const char *what, int64_t def,
		  int64_t *out);
int model_key_float(struct keys *k, const char *what, double def,
		    double *out);
/* The architectures' own keys (arch-table.c). */
int model_gemma3_keys(struct keys *k, struct llama_hparams *hp);
int model_gpt_oss_keys(struct keys *k, struct llama_hparams *hp);

#endif /* LOOM_MODEL_ARCH_H */
