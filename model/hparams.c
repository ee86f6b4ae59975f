/* SPDX-License-Identifier: MIT */
/* hparams.c - a model's shape read from a GGUF file: the architecture
 * (arch-table.c), its metadata keys as llama.cpp writes them, and the
 * sizes its tensors imply.
 */
#include "model.h"
#include "arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DIM (1 << 24)

const char *const *model_arch_names(void)
{
	static const char *names[MODEL_ARCH_COUNT + 1];

	for (int i = 0; i < MODEL_ARCH_COUNT; i++)
		names[i] = model_arch_get((enum model_arch_id)i)->name;
	return names;
}

int model_key_int(struct keys *k, const char *what, int64_t def,
		  int64_t *out)
{
	char key[128];
	int ret;

	snprintf(key, sizeof(key), "%s.%s", k->arch, what);
	ret = gguf_get_int(k->g, key, out);
	if (ret == LOOM_E_NOT_FOUND && def >= 0) {
		*out = def;
		return LOOM_OK;
	}
	if (!ret && *out < 0)
		return loom_error_set(LOOM_E_INVAL, "gguf: key '%s' is "
				      "negative", key);
	return ret;
}

int model_key_float(struct keys *k, const char *what, double def,
		    double *out)
{
	char key[128];
	int ret;

	snprintf(key, sizeof(key), "%s.%s", k->arch, what);
	ret = gguf_get_float(k->g, key, out);
	if (ret == LOOM_E_NOT_FOUND) {
		*out = def;
		return LOOM_OK;
	}
	return ret;
}

/* YaRN (as llama.cpp applies it): the extension over the original
 * context (the trained one where the file names none), its rotation
 * scale 1 times the file's attention factor. */
static int rope_yarn(struct keys *k, struct llama_hparams *hp)
{
	int64_t n_ctx;
	double attn, log_mul;
	int ret;

	if ((ret = model_key_int(k, "context_length", 0, &n_ctx)) ||
	    (ret = model_key_int(k, "rope.scaling.original_context_length",
				 n_ctx, &hp->yarn_n_ctx)) ||
	    (ret = model_key_float(k, "rope.scaling.attn_factor", 1.0,
				   &attn)) ||
	    (ret = model_key_float(k, "rope.scaling.yarn_log_multiplier", 0.0,
				   &log_mul)))
		return ret;
	if (!hp->yarn_n_ctx || hp->yarn_n_ctx > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: YaRN needs the "
				      "original context length (%s.rope."
				      "scaling.original_context_length), not "
				      "%lld", k->arch, k->arch,
				      (long long)hp->yarn_n_ctx);
	if (log_mul != 0)
		return loom_error_set(LOOM_E_UNSUPPORTED, "gguf: %s: YaRN's "
				      "log multiplier (%g) is not supported",
				      k->arch, log_mul);
	if (!isfinite((float)attn))
		return loom_error_set(LOOM_E_INVAL, "gguf: %s.rope.scaling."
				      "attn_factor %g", k->arch, attn);
	hp->yarn_attn_factor = (float)attn;
	return LOOM_OK;
}

/* Positions scale linearly, by YaRN or not at all; other schemes are
 * refused. */
static int rope_scaling(struct keys *k, struct llama_hparams *hp)
{
	char key[128], type[32];
	double factor;
	bool yarn;
	int ret;

	snprintf(key, sizeof(key), "%s.rope.scaling.type", k->arch);
	ret = gguf_get_string(k->g, key, type, sizeof(type));
	if (ret == LOOM_E_NOT_FOUND || (!ret && !strcmp(type, "none")))
		return LOOM_OK;
	if (ret)
		return ret;
	yarn = !strcmp(type, "yarn");
	if (strcmp(type, "linear") && !yarn)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "gguf: rope scaling '%s' is not "
				      "supported (none, linear and yarn are)",
				      type);
	ret = model_key_float(k, "rope.scaling.factor", 1.0, &factor);
	if (ret)
		return ret;
	if (!(factor > 0))
		return loom_error_set(LOOM_E_INVAL, "gguf: rope scaling "
				      "factor %g", factor);
	hp->rope_scale = (float)(1.0 / factor);
	return yarn ? rope_yarn(k, hp) : LOOM_OK;
}

/* Why an FFN width of 0 was read: a key that says 0, or none at all (an
 * expert's width falls back to the FFN's). */
static int ff_missing(struct keys *k)
{
	static const char *const names[] = { "expert_feed_forward_length",
					     "feed_forward_length" };
	char key[128];
	int64_t v;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(key, sizeof(key), "%s.%s", k->arch, names[i]);
		if (gguf_get_int(k->g, key, &v) == LOOM_OK)
			return loom_error_set(LOOM_E_INVAL, "gguf: %s is 0",
					      key);
	}
	return loom_error_set(LOOM_E_INVAL, "gguf: no %s.expert_feed_"
			      "forward_length (nor %s.feed_forward_length)",
			      k->arch, k->arch);
}

/* The architecture of general.architecture; else an error naming those
 * supported. */
static int find_arch(const struct gguf *g, const struct model_arch **out)
{
	char name[32], list[256] = "";
	int ret;

	ret = gguf_get_string(g, "general.architecture", name, sizeof(name));
	if (ret == LOOM_E_NOT_FOUND)
		return loom_error_set(LOOM_E_INVAL, "gguf: no "
				      "general.architecture");
	if (ret)
		return ret;
	*out = model_arch_find(name);
	if (*out)
		return LOOM_OK;
	for (int i = 0; i < MODEL_ARCH_COUNT; i++)
		snprintf(list + strlen(list), sizeof(list) - strlen(list),
			 "%s%s", i ? ", " : "",
			 model_arch_get((enum model_arch_id)i)->name);
	return loom_error_set(LOOM_E_UNSUPPORTED, "architecture '%s' is not "
			      "supported (%s are)", name, list);
}

/* Layers, heads, embedding and experts; bounds far above any model keep
 * every product of sizes below 2^63. */
static int read_sizes(struct keys *k, const struct model_arch *a,
		      struct llama_hparams *h)
{
	int ret;

	if ((ret = model_key_int(k, "embedding_length", -1, &h->n_embd)) ||
	    (ret = model_key_int(k, "block_count", -1, &h->n_layer)) ||
	    (ret = model_key_int(k, "attention.head_count", -1,
				 &h->n_head)) ||
	    (ret = model_key_int(k, "attention.head_count_kv", h->n_head,
				 &h->n_head_kv)) ||
	    (ret = model_key_int(k, "expert_count", 0, &h->n_expert)) ||
	    (ret = model_key_int(k, "expert_used_count", 0,
				 &h->n_expert_used)))
		return ret;
	if (!h->n_head || !h->n_layer || !h->n_embd || !h->n_head_kv)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: zero heads, "
				      "layers or embedding", a->name);
	if (h->n_embd > MAX_DIM || h->n_head > MAX_DIM ||
	    h->n_head_kv > MAX_DIM || h->n_layer > MAX_DIM ||
	    h->n_expert > MAX_DIM || h->n_expert_used > MAX_DIM)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: a size above "
				      "%d (embedding %lld, heads %lld/%lld, "
				      "layers %lld, experts %lld/%lld)",
				      a->name, MAX_DIM, (long long)h->n_embd,
				      (long long)h->n_head,
				      (long long)h->n_head_kv,
				      (long long)h->n_layer,
				      (long long)h->n_expert,
				      (long long)h->n_expert_used);
	if (h->n_expert && !(a->flags & ARCH_MOE))
		return loom_error_set(LOOM_E_UNSUPPORTED, "architecture '%s' "
				      "with experts is not supported",
				      a->name);
	return LOOM_OK;
}

/* The FFN's width (an expert's: its own key, as qwen3moe, or the FFN's,
 * as Mixtral) and the heads' sizes. */
static int read_widths(struct keys *k, const struct model_arch *a,
		       struct llama_hparams *h)
{
	int64_t v, n_ff;
	int ret;

	ret = model_key_int(k, "feed_forward_length", h->n_expert ? 0 : -1,
			    &n_ff);
	if (!ret && h->n_expert)
		ret = model_key_int(k, "expert_feed_forward_length", n_ff,
				    &n_ff);
	if (ret)
		return ret;
	if (!n_ff)
		return ff_missing(k);
	if ((ret = model_key_int(k, "attention.key_length",
				 h->n_embd / h->n_head, &h->head_dim)) ||
	    (ret = model_key_int(k, "attention.value_length", h->head_dim,
				 &v)))
		return ret;
	if (n_ff > MAX_DIM || h->head_dim > MAX_DIM)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: FFN width %lld "
				      "or head size %lld above %d", a->name,
				      (long long)n_ff, (long long)h->head_dim,
				      MAX_DIM);
	if (v != h->head_dim)
		return loom_error_set(LOOM_E_UNSUPPORTED, "gguf: value length "
				      "%lld differs from key length %lld",
				      (long long)v, (long long)h->head_dim);
	h->n_ff = n_ff;
	return LOOM_OK;
}

/* Rope (rotated values, base, scaling) and the norms' epsilon. */
static int read_rope(struct keys *k, const struct model_arch *a,
		     struct llama_hparams *h)
{
	double d;
	int ret;

	if ((ret = model_key_int(k, "rope.dimension_count", h->head_dim,
				 &h->n_rot)) ||
	    (ret = model_key_float(k, "rope.freq_base", 10000.0, &d)))
		return ret;
	if (!(d > 0) || !isfinite((float)d))
		return loom_error_set(LOOM_E_INVAL, "gguf: %s.rope.freq_base "
				      "is %g, not a positive number", a->name,
				      d);
	h->rope_base = (float)d;
	ret = model_key_float(k, "attention.layer_norm_rms_epsilon", -1, &d);
	if (ret)
		return ret;
	if (!(d > 0))
		return loom_error_set(LOOM_E_INVAL, "gguf: no positive "
				      "%s.attention.layer_norm_rms_epsilon",
				      a->name);
	h->eps = (float)d;
	return rope_scaling(k, h);
}

/* The vocabulary from the embeddings, the weight type from the first
 * attention matrix, and the optional tensors. */
static int read_tensors(const struct gguf *g, struct llama_hparams *h)
{
	const char *qname = h->fused_qkv ? "blk.0.attn_qkv.weight" :
					   "blk.0.attn_q.weight";
	const struct gguf_tensor *emb = gguf_tensor_find(g,
							 "token_embd.weight");
	const struct gguf_tensor *wq = gguf_tensor_find(g, qname);

	if (!emb || !wq)
		return loom_error_set(LOOM_E_INVAL, "gguf: tensor '%s' is "
				      "missing", emb ? qname :
						       "token_embd.weight");
	if (emb->n_dims != 2 || emb->ne[0] != h->n_embd)
		return loom_error_set(LOOM_E_INVAL, "gguf: tensor "
				      "'token_embd.weight' is not [%lld, "
				      "n_vocab]", (long long)h->n_embd);
	h->n_vocab = emb->ne[1];
	h->tied_output = !gguf_tensor_find(g, "output.weight");
	h->rope_freqs = gguf_tensor_find(g, "rope_freqs.weight") != NULL;
	return gguf_tensor_loom_type(wq, &h->wtype);
}

/* The choices the architecture's table row makes. */
static void arch_choices(const struct model_arch *a, struct llama_hparams *h)
{
	h->arch = a->id;
	h->rope_mode = a->rope;
	h->qkv_bias = a->flags & ARCH_QKV_BIAS;
	h->qk_norm = a->flags & ARCH_QK_NORM;
	h->fused_qkv = a->flags & ARCH_FUSED_QKV;
	h->fused_up = a->flags & ARCH_FUSED_UP;
	h->gelu = h->embd_scale = h->post_norms = a->flags & ARCH_GEMMA;
	h->oai = a->flags & ARCH_OAI;
}

int model_hparams(const struct gguf *g, int64_t n_ctx,
		  enum loom_type cache_type, struct llama_hparams *hp,
		  char arch_out[32])
{
	struct llama_hparams h = { 0 }, c;
	const struct model_arch *a;
	struct keys k = { .g = g };
	int ret;

	ret = find_arch(g, &a);
	if (ret)
		return ret;
	k.arch = a->name;
	if (n_ctx < 1 || n_ctx > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "context of %lld tokens",
				      (long long)n_ctx);
	arch_choices(a, &h);
	if ((ret = read_sizes(&k, a, &h)) || (ret = read_widths(&k, a, &h)) ||
	    (ret = read_rope(&k, a, &h)) ||
	    (a->keys && (ret = a->keys(&k, &h))) ||
	    (ret = read_tensors(g, &h)))
		return ret;
	h.n_ctx = n_ctx;
	h.cache_type = cache_type;
	/* The block sizes llama_hparams_check asks of the weight type hold
	 * per tensor: each tensor's type is checked against its shape by
	 * the reader. */
	c = h;
	c.wtype = LOOM_TYPE_F32;
	ret = llama_hparams_check(&c);
	if (ret)
		return ret;
	*hp = h;
	if (arch_out)
		snprintf(arch_out, 32, "%s", a->name);
	return LOOM_OK;
}
