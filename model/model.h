/* SPDX-License-Identifier: MIT */
/* model.h - models from GGUF files: the architectures of arch-table.c
 * read into the decoder (decoder.h), with the weights uploaded from the
 * file's mapping; vocabularies, tokenizers and chat templates.
 */
#ifndef LOOM_MODEL_MODEL_H
#define LOOM_MODEL_MODEL_H

#include "gguf.h"
#include "decoder.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The architectures read, NULL-terminated (static). */
const char *const *model_arch_names(void);

/* Reads the shape of g's model into *hp: general.architecture must be a
 * supported one (else LOOM_E_UNSUPPORTED naming it), its keys and tensors
 * consistent.  n_ctx (> 0) sizes the KV cache, whose type is cache_type
 * (F32 or F16).  arch (32 bytes, may be NULL) receives the name. */
int model_hparams(const struct gguf *g, int64_t n_ctx,
		  enum loom_type cache_type, struct llama_hparams *hp,
		  char arch[32]);

/* Creates the model of hp (from model_hparams) on dev with g's weights:
 * every tensor the architecture needs, of the file's shape and a type
 * Loom has, and no tensor it would ignore.  Pages of the mapping are
 * dropped once copied.  The caller frees *out with llama_model_free();
 * g may be freed after. */
int model_load(const struct gguf *g, const struct llama_hparams *hp,
	       loom_dev_t *dev, struct llama_model **out);
/* As model_load, calling progress (when not NULL) after each tensor with
 * the bytes uploaded so far and the file's tensor bytes. */
typedef void (*model_progress_fn)(size_t done, size_t total, void *user);
int model_load_progress(const struct gguf *g, const struct llama_hparams *hp,
			loom_dev_t *dev, model_progress_fn progress,
			void *user, struct llama_model **out);

/* As model_load_progress, with the weights placed over two devices as
 * pl says (see struct llama_placement). */
int model_load_placed(const struct gguf *g, const struct llama_hparams *hp,
		      const struct llama_placement *pl,
		      model_progress_fn progress, void *user,
		      struct llama_model **out);
/* llama_dev_runs with the weight types of g's tensors. */
bool model_dev_runs(const struct gguf *g, const struct llama_hparams *hp,
		    loom_dev_t *dev, char *what, size_t size);

/* The split policy for meta devices (a loom_split_fn): each weight and
 * cache tensor cut as its role in the architecture's table says (q, k, v,
 * gate and up by their outputs in whole heads, GQA groups or FFN blocks,
 * a fused matrix in segments; the attention output and down by their
 * inputs; the cache by heads; norms, router and embeddings whole).
 * userdata is a struct model_split_state, which must outlive the meta
 * device; a tensor of no role is refused. */
struct model_split_state {
	struct loom_meta_model shape;
	bool fused_up;
	bool fused_qkv;
	int64_t ff_block; /* the blocks of the tensors cut along n_ff by
			   * their inputs (ffn_down) */
};
/* The state of a model of hp; g, when not NULL, is its file, whose
 * tensor types decide the FFN's unit (else every matrix is hp->wtype). */
void model_split_state_init(const struct llama_hparams *hp,
			    const struct gguf *g,
			    struct model_split_state *out);
int model_split(const struct loom_tensor *t, struct loom_split *out,
		void *userdata);

/* Writes m's weights (as its device holds them) and hp's keys as a GGUF
 * file of the architecture its shape is, which model_hparams and
 * model_load read back.  Used by tests and loom-bench to save a synthetic model. */
int model_save(struct llama_model *m, const char *path);

/* The bytes token id stands for (tokenizer.ggml.tokens decoded as the
 * tokenizer.ggml.model says), NUL-terminated into buf of size bytes;
 * "[id]" when the file has no such token, "" for a control token.
 * Returns the length. */
int model_token_text(const struct gguf *g, int32_t id, char *buf,
		     size_t size);

/* The tokenizer of g's vocabulary; g must outlive it: SentencePiece-style
 * (tokenizer.ggml.model "llama") or BPE ("gpt2") with a pre-tokenizer
 * model_pretok_by_name knows.  Others are refused with
 * LOOM_E_UNSUPPORTED naming the model and pre-tokenizer.
 * The caller frees *out with model_tokenizer_free(). */
struct model_tokenizer;
int model_tokenizer_new(const struct gguf *g, struct model_tokenizer **out);
void model_tokenizer_free(struct model_tokenizer *t);
/* The ids of text.  flags: MODEL_TOKENIZE_ADD_SPECIAL adds BOS/EOS as
 * the file asks; the texts of user-defined tokens are always their
 * tokens, and those of control tokens (<|im_start|>, <s>) are too with
 * MODEL_TOKENIZE_PARSE_SPECIAL, else plain text.  *out (malloc'ed, the
 * caller frees; NULL when *n is 0) receives *n ids. */
enum {
	MODEL_TOKENIZE_ADD_SPECIAL = 1,
	MODEL_TOKENIZE_PARSE_SPECIAL = 2,
};
int model_tokenize(const struct model_tokenizer *t, const char *text,
		   unsigned flags, int32_t **out, int *n);

/* BPE pre-tokenizers: text cut into words as a family's expressions cut
 * it.  GEMMA4's words are runs of line breaks and of other text (its
 * vocabulary is not byte-level: spaces are U+2581, as SentencePiece's). */
enum model_pretok {
	MODEL_PRETOK_LLAMA3,    /* Llama 3: digits by three */
	MODEL_PRETOK_QWEN2,     /* Llama 3's expression, digits one by one */
	MODEL_PRETOK_QWEN35,    /* Qwen 2's, marks (\p{M}) as letters */
	MODEL_PRETOK_GPT2,      /* GPT-2's expression */
	MODEL_PRETOK_STARCODER, /* each number alone, then GPT-2's */
	MODEL_PRETOK_DEFAULT,   /* punctuation runs, GPT-2's, number runs,
				 * ASCII digits by three */
	MODEL_PRETOK_FALCON,    /* as DEFAULT, ` among the punctuation,
				 * without number runs */
	MODEL_PRETOK_DEEPSEEK_CODER,
	MODEL_PRETOK_DEEPSEEK_LLM,
	MODEL_PRETOK_GEMMA4,
	MODEL_PRETOK_TEKKEN,    /* Mistral's: words split at case changes */
	MODEL_PRETOK_DEEPSEEK3,
	MODEL_PRETOK_GPT4O,     /* GPT-4o's (o200k, gpt-oss): tekken's with
				 * contractions and numbers of 1-3 digits */
};
/* The pre-tokenizer of tokenizer.ggml.pre's name into *kind; else
 * LOOM_E_UNSUPPORTED (no message). */
int model_pretok_by_name(const char *name, enum model_pretok *kind);
/* The i-th name model_pretok_by_name knows (static), NULL past the last. */
const char *model_pretok_names(size_t i);
/* text[0..len) (UTF-8, else LOOM_E_INVAL) cut into words, *ends
 * (malloc'ed, the caller frees) receiving the byte offset where each of
 * the *n words ends. */
int model_pretokenize(enum model_pretok kind, const char *text, size_t len,
		      size_t **ends, size_t *n);

/* Chat template families, recognised by their markers in a file's
 * tokenizer.chat_template (not executed). */
enum model_chat {
	MODEL_CHAT_GPT_OSS,
	MODEL_CHAT_CHATML,
	MODEL_CHAT_LLAMA3,
	MODEL_CHAT_GEMMA,
	MODEL_CHAT_PHI3,
	MODEL_CHAT_MISTRAL,
};
/* The family of g's template into *kind; LOOM_E_NOT_FOUND when the file
 * has none, LOOM_E_UNSUPPORTED when it is of no family known, each with
 * a message. */
int model_chat_detect(const struct gguf *g, enum model_chat *kind);
/* The family named name (chatml, llama3, ...); else LOOM_E_UNSUPPORTED
 * with a message listing them. */
int model_chat_by_name(const char *name, enum model_chat *kind);
/* The name of a family (static), NULL for none. */
const char *model_chat_name(enum model_chat kind);
/* The text of one turn of a conversation in kind's format, to tokenize
 * with the special tokens' texts parsed: the end of the previous reply
 * (unless first), system (when first and not NULL or empty) and user's
 * text, then the start of the reply.  *out (malloc'ed, the caller frees)
 * is NUL-terminated. */
int model_chat_turn(enum model_chat kind, const char *system,
		    const char *user, bool first, char **out);
/* The tokens that end a reply: the file's EOS, EOT and EOM ids and the
 * tokens of the texts that end a turn in the families above
 * (<|im_end|>, <end_of_turn>, <|eot_id|>, <|end|>, <|return|>, ...).
 * *ids (malloc'ed, the caller frees) receives *n of them. */
int model_eog_tokens(const struct gguf *g, int32_t **ids, int *n);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_MODEL_MODEL_H */
