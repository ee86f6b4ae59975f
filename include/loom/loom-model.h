/* SPDX-License-Identifier: MIT */
/* loom-model.h - the model library: runs a GGUF model file (the
 * architectures llama, qwen2, qwen3, qwen3moe, gemma3, xverse, exaone,
 * phi3, internlm2, mistral3, gpt-oss) on a Loom device, a meta device
 * included.
 * Link with libloom-model (pkg-config loom-model).
 *
 * A run: loom_model_open() reads the file's shape and vocabulary;
 * loom_model_load() puts its weights and KV cache on a device (for a meta
 * device, make it first with the split policy loom_model_split_policy()
 * gives); loom_model_tokenize() turns text into token ids,
 * loom_model_eval() a batch of ids into logits (writing their keys and
 * values into the cache), loom_model_sample() logits into the next id,
 * and loom_model_token_text() an id back into text.
 *
 * A vocabulary Loom cannot tokenize does not stop loom_model_open: the
 * model runs on token ids, and loom_model_tokenize() says why.
 *
 * Every function returns LOOM_OK or a negative LOOM_E_* with its message
 * in loom_error_message(); none aborts on a caller's mistake.  A model is
 * used by one thread at a time.
 */
#ifndef LOOM_MODEL_H
#define LOOM_MODEL_H

#include <loom/loom-backend.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the model library's exported functions. */
#define LOOM_MODEL_API __attribute__((visibility("default")))

typedef struct loom_model loom_model_t;

struct loom_model_params {
	uint32_t size;             /* sizeof(struct loom_model_params) */
	int64_t n_ctx;             /* KV cache length in tokens; 0: 2048 */
	enum loom_type cache_type; /* the cache's type: F32 (0) or F16 */
};

/* Opens the GGUF file at path (its tensors mapped, not read) and reads
 * its architecture, shape and tokenizer.  params may be NULL (the
 * defaults).  An architecture, tokenizer or key Loom lacks is refused
 * with LOOM_E_UNSUPPORTED naming it.  The caller frees *out with
 * loom_model_free(). */
LOOM_MODEL_API int loom_model_open(const char *path,
				   const struct loom_model_params *params,
				   loom_model_t **out);
/* Frees the model, its weights and the file's mapping; NULL is a no-op. */
LOOM_MODEL_API void loom_model_free(loom_model_t *m);

/* The architecture's name (static storage of m), the vocabulary's size
 * and the cache's length in tokens. */
LOOM_MODEL_API const char *loom_model_arch(const loom_model_t *m);
LOOM_MODEL_API int64_t loom_model_n_vocab(const loom_model_t *m);
LOOM_MODEL_API int64_t loom_model_n_ctx(const loom_model_t *m);

/* The split policy of a meta device for m (a loom_split_fn and its
 * userdata, valid until loom_model_free): each weight and cache tensor
 * cut by the role the architecture gives it, the FFN in units of 32
 * values and of the blocks of the file's ffn_down types.  Pass both to
 * loom_meta_dev_new(), then load m on that device. */
LOOM_MODEL_API int loom_model_split_policy(loom_model_t *m, loom_split_fn *fn,
					   void **userdata);

/* The file's layers, and its training context ({arch}.context_length; 0
 * when it has none). */
LOOM_MODEL_API int64_t loom_model_n_layer(const loom_model_t *m);
LOOM_MODEL_API int64_t loom_model_n_ctx_train(const loom_model_t *m);
/* Sets the cache's length before the model is loaded (LOOM_E_INVAL
 * after, or for n outside 1..INT32_MAX). */
LOOM_MODEL_API int loom_model_set_n_ctx(loom_model_t *m, int64_t n);

/* True when dev runs every op of m's graph with the file's weight types;
 * else false, with the first op it lacks (or why no graph could be made)
 * in what (size bytes). */
LOOM_MODEL_API bool loom_model_dev_runs(const loom_model_t *m,
					loom_dev_t *dev, char *what,
					size_t size);

/* Creates m's weights and KV cache on dev and uploads the file's weights
 * (once; LOOM_E_INVAL when m is loaded already).  A tensor of the file
 * the architecture does not use, or one it needs and the file lacks, is
 * refused by name.  Evaluate with a backend of dev. */
LOOM_MODEL_API int loom_model_load(loom_model_t *m, loom_dev_t *dev);

/* How loom_model_load_with() places and loads: with rest, a partial
 * offload over two devices (layers [0, n_first) on the first device, the
 * others, the embeddings and any weight whose op the first device cannot
 * run on rest; evaluate with loom_model_eval_sched() over backends of
 * both); progress (when not NULL) is called after each tensor with the
 * bytes uploaded and the file's tensor bytes. */
struct loom_model_load_params {
	uint32_t size; /* sizeof(struct loom_model_load_params) */
	loom_dev_t *rest;
	int64_t n_first;
	void (*progress)(size_t done, size_t total, void *user);
	void *user;
};
LOOM_MODEL_API int loom_model_load_with(loom_model_t *m, loom_dev_t *dev,
					const struct loom_model_load_params *p);

/* Tokenizing flags. */
enum {
	LOOM_MODEL_ADD_SPECIAL = 1,   /* BOS/EOS as the vocabulary asks */
	LOOM_MODEL_PARSE_SPECIAL = 2, /* control tokens' texts (<s>,
				       * <|im_start|>) are those tokens */
};

/* The ids of text (UTF-8), as the file's tokenizer cuts it.  *ids
 * (malloc'ed, the caller frees; NULL when *n is 0) receives *n ids. */
LOOM_MODEL_API int loom_model_tokenize(const loom_model_t *m, const char *text,
				       unsigned flags, int32_t **ids, int *n);
/* The bytes token id stands for, NUL-terminated into buf of size bytes
 * ("" for a control token); the length, or a negative LOOM_E_* (an id
 * out of range). */
LOOM_MODEL_API int loom_model_token_text(const loom_model_t *m, int32_t id,
					 char *buf, size_t size);
/* True when id ends a reply: the vocabulary's end of text, end of turn
 * (<|im_end|>, <end_of_turn>, <|eot_id|>, ...). */
LOOM_MODEL_API bool loom_model_is_eog(const loom_model_t *m, int32_t id);

/* One turn of a conversation in the chat format of tmpl (chatml,
 * llama3, gemma, phi3, mistral, gpt-oss; NULL: the one the file's
 * tokenizer.chat_template is recognised as, LOOM_E_NOT_FOUND when it has
 * none, LOOM_E_UNSUPPORTED when it is of no family known): the end of
 * the previous reply (unless first), system (when first, and not NULL or
 * empty) and user's text, then the start of the reply.  Tokenize it with
 * LOOM_MODEL_PARSE_SPECIAL.  *out (malloc'ed, the caller frees) is
 * NUL-terminated. */
LOOM_MODEL_API int loom_model_chat_turn(const loom_model_t *m,
					const char *tmpl, const char *system,
					const char *user, bool first,
					char **out);

/* Evaluates n_tokens ids at positions n_past.. on be (a backend of the
 * device m is loaded on), writing their keys and values into the cache.
 * logits receives loom_model_n_vocab() floats for the last token, or as
 * many for each token (token-major) when all_logits.  Positions past
 * n_past + n_tokens are forgotten for what comes after: a conversation
 * goes on at n_past + n_tokens. */
LOOM_MODEL_API int loom_model_eval(loom_model_t *m, loom_backend_t *be,
				   const int32_t *tokens, int n_tokens,
				   int n_past, bool all_logits, float *logits);
/* As loom_model_eval, through scheduler s (whose backends include ones
 * of the devices holding the weights). */
LOOM_MODEL_API int loom_model_eval_sched(loom_model_t *m, loom_sched_t *s,
					 const int32_t *tokens, int n_tokens,
					 int n_past, bool all_logits,
					 float *logits);
/* Forgets the cache's contents (a new conversation starts at 0). */
LOOM_MODEL_API int loom_model_reset(loom_model_t *m);

/* What a loaded model holds: weights and cache bytes, the compute buffer
 * of loom_model_eval (0 and NULL before the first), the bytes held on the
 * first device and on rest ([1], 0 without), the buffer of the weights on
 * the first device, rest (NULL without), and the buffer of the matrices
 * where the first device has a weight layout of its own (NULL where they
 * sit in weight_buffer). */
struct loom_model_memory {
	size_t weight_bytes;
	size_t cache_bytes;
	size_t compute_bytes;
	size_t held_bytes[2];
	loom_buffer_t *weight_buffer;
	loom_buffer_t *compute_buffer;
	loom_dev_t *rest;
	loom_buffer_t *matrix_buffer;
};
LOOM_MODEL_API int loom_model_memory(const loom_model_t *m,
				     struct loom_model_memory *out);

/* The chat family of name (NULL: the one the file's template is
 * recognised as) into *family (static): errors as loom_model_chat_turn's.
 */
LOOM_MODEL_API int loom_model_chat_family(const loom_model_t *m,
					  const char *name,
					  const char **family);

struct loom_sample_params {
	float temp;  /* 0 (or below): greedy, the largest logit */
	int top_k;   /* keep the k likeliest; 0: all */
	float top_p; /* then the fewest whose probabilities reach p; 1:
		      * all */
};

/* The next id from n_vocab logits: greedy, or a draw from the softmax of
 * logits / temp over the top_k, then top_p, likeliest ids, with the
 * generator whose state is *rng (any seed; advanced by one draw).
 * params NULL is greedy. */
LOOM_MODEL_API int loom_model_sample(const float *logits, int64_t n_vocab,
				     const struct loom_sample_params *params,
				     uint64_t *rng, int32_t *out);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_MODEL_H */
