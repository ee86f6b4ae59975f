/* SPDX-License-Identifier: MIT */
/* save.c - a model written as a GGUF file of the architecture its shape
 * is (its hparams' architecture), with the keys and tensor names that
 * hparams.c reads and llama.cpp writes, and a placeholder vocabulary.
 */
#include "model.h"
#include "arch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The architecture of hp when a file of it says all that hp chooses: the
 * rope and features of its table row are hp's.  Gemma's files hold no
 * score scale: the reader derives it. */
static const char *arch_of(const struct llama_hparams *hp)
{
	const struct model_arch *a = model_arch_get(hp->arch);
	bool gemma = hp->gelu && hp->embd_scale && hp->post_norms;

	if (!a || hp->rope_mode != a->rope || hp->attn_scale > 0 ||
	    hp->qkv_bias != !!(a->flags & ARCH_QKV_BIAS) ||
	    hp->qk_norm != !!(a->flags & ARCH_QK_NORM) ||
	    (hp->fused_qkv && !(a->flags & ARCH_FUSED_QKV)) ||
	    hp->fused_up != !!(a->flags & ARCH_FUSED_UP) ||
	    gemma != !!(a->flags & ARCH_GEMMA))
		return NULL;
	return a->name;
}

/* {arch}.what = v as a u32. */
static int put_u32(struct gguf_writer *w, const char *arch, const char *what,
		   int64_t v)
{
	char key[128];

	snprintf(key, sizeof(key), "%s.%s", arch, what);
	return gguf_writer_add_u32(w, key, (uint32_t)v);
}

static int put_f32(struct gguf_writer *w, const char *arch, const char *what,
		   float v)
{
	char key[128];

	snprintf(key, sizeof(key), "%s.%s", arch, what);
	return gguf_writer_add_f32(w, key, v);
}

/* A SentencePiece-style vocabulary of placeholders: <unk>, <s>, </s>, the
 * 256 byte tokens, then "t<id>"; enough for other readers to load. */
static int put_vocab(struct gguf_writer *w, int64_t n)
{
	char **tok = calloc((size_t)n, sizeof(*tok));
	float *score = calloc((size_t)n, sizeof(*score));
	int32_t *type = calloc((size_t)n, sizeof(*type));
	int ret = LOOM_E_NOMEM;

	if (!tok || !score || !type)
		goto out;
	for (int64_t i = 0; i < n; i++) {
		char buf[32];

		if (i < 3)
			snprintf(buf, sizeof(buf), "%s",
				 i == 0 ? "<unk>" : i == 1 ? "<s>" : "</s>");
		else if (i < 259)
			snprintf(buf, sizeof(buf), "<0x%02X>", (int)(i - 3));
		else
			snprintf(buf, sizeof(buf), "t%lld", (long long)i);
		tok[i] = strdup(buf);
		if (!tok[i])
			goto out;
		score[i] = -(float)i;
		type[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
	}
	ret = gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
	if (!ret)
		ret = gguf_writer_add_array(w, "tokenizer.ggml.tokens",
					    GGUF_TYPE_STRING, (uint64_t)n,
					    tok);
	if (!ret)
		ret = gguf_writer_add_array(w, "tokenizer.ggml.scores",
					    GGUF_TYPE_FLOAT32, (uint64_t)n,
					    score);
	if (!ret)
		ret = gguf_writer_add_array(w, "tokenizer.ggml.token_type",
					    GGUF_TYPE_INT32, (uint64_t)n,
					    type);
	if (!ret)
		ret = gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", 1);
	if (!ret)
		ret = gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 2);
	if (ret == LOOM_E_NOMEM)
		ret = loom_error_set(ret, "no memory");
out:
	for (int64_t i = 0; tok && i < n; i++)
		free(tok[i]);
	free(tok);
	free(score);
	free(type);
	return ret ? ret : LOOM_OK;
}

static int put_tensors(struct gguf_writer *w, struct llama_model *m)
{
	loom_ctx_t *c = llama_model_ctx(m);
	int ret = LOOM_OK;

	for (struct loom_tensor *t = loom_ctx_first_tensor(c); t && !ret;
	     t = loom_ctx_next_tensor(c, t)) {
		int type = gguf_tensor_type_of(t->type);
		size_t n = loom_tensor_n_bytes(t);
		void *p;

		if (!strncmp(t->name, "cache_", 6))
			continue;
		if (type < 0)
			return loom_error_set(LOOM_E_UNSUPPORTED, "tensor '%s':"
					      " type %s has no GGUF id",
					      t->name, loom_type_name(t->type));
		p = malloc(n);
		if (!p)
			return loom_error_set(LOOM_E_NOMEM, "no memory");
		ret = loom_tensor_get(t, p, 0, n);
		if (!ret)
			ret = gguf_writer_add_tensor(w, t->name, (uint32_t)type,
						     (uint32_t)loom_tensor_n_dims(t),
						     t->ne, p);
		free(p);
	}
	return ret;
}

int model_save(struct llama_model *m, const char *path)
{
	const struct llama_hparams *hp = llama_model_hparams(m);
	const char *a = arch_of(hp);
	bool moe = hp->n_expert && hp->n_expert_used;
	struct gguf_writer *w;
	int ret;

	if (!a)
		return loom_error_set(LOOM_E_UNSUPPORTED, "no architecture "
				      "has this model's rope, biases, norms, "
				      "gate and attention");
	if (hp->rope_scale > 0 && hp->rope_scale != 1.0f)
		return loom_error_set(LOOM_E_UNSUPPORTED, "rope scaling is "
				      "not saved");
	ret = gguf_writer_new(&w);
	if (ret)
		return ret;
	gguf_writer_add_str(w, "general.architecture", a);
	gguf_writer_add_str(w, "general.name", "loom synthetic");
	put_u32(w, a, "context_length", hp->n_ctx);
	put_u32(w, a, "embedding_length", hp->n_embd);
	put_u32(w, a, "block_count", hp->n_layer);
	/* qwen3moe names an expert's width; llama with experts (Mixtral)
	 * gives it as the FFN's. */
	put_u32(w, a, moe && strcmp(a, "llama") ? "expert_feed_forward_length" :
		"feed_forward_length", hp->n_ff);
	put_u32(w, a, "attention.head_count", hp->n_head);
	put_u32(w, a, "attention.head_count_kv", hp->n_head_kv);
	put_u32(w, a, "attention.key_length", hp->head_dim);
	put_u32(w, a, "attention.value_length", hp->head_dim);
	put_u32(w, a, "rope.dimension_count",
		hp->n_rot ? hp->n_rot : hp->head_dim);
	put_f32(w, a, "rope.freq_base", hp->rope_base);
	put_f32(w, a, "attention.layer_norm_rms_epsilon", hp->eps);
	put_u32(w, a, "vocab_size", hp->n_vocab);
	if (moe) {
		put_u32(w, a, "expert_count", hp->n_expert);
		put_u32(w, a, "expert_used_count", hp->n_expert_used);
	}
	if (hp->n_swa) {
		put_u32(w, a, "attention.sliding_window", hp->n_swa);
		put_u32(w, a, "attention.sliding_window_pattern",
			hp->swa_pattern);
	}
	if (!strcmp(a, "gemma3"))
		put_f32(w, a, "rope.freq_base_swa", hp->rope_base_swa > 0 ?
			hp->rope_base_swa : hp->rope_base);
	ret = put_vocab(w, hp->n_vocab);
	if (!ret)
		ret = put_tensors(w, m);
	if (!ret)
		ret = gguf_writer_save(w, path);
	gguf_writer_free(w);
	return ret;
}
