/* SPDX-License-Identifier: MIT */
/* llama.c - a Llama-style decoder built through the public API: synthetic
 * weights, the KV cache, and the graph of one batch (GQA attention with
 * RoPE, RMSNorm, SwiGLU or a mixture-of-experts FFN, and Gemma's sliding
 * windows, GELU gate and extra norms).  No timing here.
 */
#include "llama.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Batches are evaluated over a KV window rounded up to this many tokens,
 * so that consecutive decode steps share one graph. */
#define KV_PAD 32

struct llama_layer {
	struct loom_tensor *attn_norm;
	struct loom_tensor *wq, *wk, *wv, *wo;
	struct loom_tensor *bq, *bk, *bv;
	struct loom_tensor *q_norm, *k_norm;
	struct loom_tensor *ffn_norm;
	struct loom_tensor *post_attn_norm, *post_ffn_norm;
	struct loom_tensor *ffn_gate, *ffn_up, *ffn_down;
	struct loom_tensor *ffn_gate_inp;
	struct loom_tensor *ffn_gate_exps, *ffn_up_exps, *ffn_down_exps;
	struct loom_tensor *cache_k, *cache_v;
};

struct llama_model {
	struct llama_hparams hp;
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
	struct loom_tensor *tok_embd, *output_norm, *output;
	struct loom_tensor *rope_freqs;
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

/* ------------------------------------------------------------------------
 * Shapes.
 */
static const char *const preset_names[] = {
	"tiny", "tiny-moe", "small", "small-moe", "7b-layer", NULL,
};

const char *const *llama_preset_names(void)
{
	return preset_names;
}

int llama_hparams_preset(const char *name, struct llama_hparams *out)
{
	struct llama_hparams hp = {
		.n_vocab = 256, .n_embd = 128, .n_head = 4, .n_head_kv = 2,
		.head_dim = 32, .n_ff = 352, .n_layer = 2, .n_ctx = 1024,
		.rope_base = 10000.0f, .eps = 1e-5f, .wtype = LOOM_TYPE_F32,
	};

	if (!name)
		return loom_error_set(LOOM_E_INVAL, "no preset name");
	if (!strcmp(name, "tiny") || !strcmp(name, "tiny-moe")) {
		if (!strcmp(name, "tiny-moe")) {
			hp.n_expert = 4;
			hp.n_expert_used = 2;
			hp.n_ff = 128;
		}
	} else if (!strcmp(name, "small") || !strcmp(name, "small-moe")) {
		hp.n_vocab = 8192;
		hp.n_embd = 1024;
		hp.n_head = 16;
		hp.n_head_kv = 4;
		hp.head_dim = 64;
		hp.n_ff = 2816;
		hp.n_layer = 8;
		if (!strcmp(name, "small-moe")) {
			hp.n_expert = 8;
			hp.n_expert_used = 2;
			hp.n_ff = 1024;
		}
	} else if (!strcmp(name, "7b-layer")) {
		hp.n_vocab = 32000;
		hp.n_embd = 4096;
		hp.n_head = 32;
		hp.n_head_kv = 32;
		hp.head_dim = 128;
		hp.n_ff = 11008;
		hp.n_layer = 2;
	} else {
		return loom_error_set(LOOM_E_NOT_FOUND,
				      "unknown preset '%s'", name);
	}
	*out = hp;
	return LOOM_OK;
}

static bool is_moe(const struct llama_hparams *hp)
{
	return hp->n_expert > 0 && hp->n_expert_used > 0;
}

int llama_hparams_check(const struct llama_hparams *hp)
{
	int64_t bs;

	if (hp->n_vocab <= 0 || hp->n_embd <= 0 || hp->n_head <= 0 ||
	    hp->n_head_kv <= 0 || hp->head_dim <= 0 || hp->n_ff <= 0 ||
	    hp->n_layer <= 0 || hp->n_ctx <= 0)
		return loom_error_set(LOOM_E_INVAL, "llama: sizes must be > 0");
	if (hp->n_head % hp->n_head_kv)
		return loom_error_set(LOOM_E_INVAL,
				      "llama: n_head %lld not a multiple of "
				      "n_head_kv %lld", (long long)hp->n_head,
				      (long long)hp->n_head_kv);
	if (hp->head_dim % 2)
		return loom_error_set(LOOM_E_INVAL, "llama: odd head_dim");
	if (hp->n_rot < 0 || hp->n_rot % 2 || hp->n_rot > hp->head_dim)
		return loom_error_set(LOOM_E_INVAL,
				      "llama: %lld rotated values per head of "
				      "%lld", (long long)hp->n_rot,
				      (long long)hp->head_dim);
	if (hp->rope_mode != LOOM_ROPE_NORMAL &&
	    hp->rope_mode != LOOM_ROPE_NEOX)
		return loom_error_set(LOOM_E_INVAL, "llama: bad rope mode");
	if (hp->rope_freqs && hp->n_rot && hp->n_rot != hp->head_dim)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "llama: rope frequency factors with %lld "
				      "of %lld values rotated",
				      (long long)hp->n_rot,
				      (long long)hp->head_dim);
	if (hp->n_swa < 0 || hp->swa_pattern < 0 || !(hp->attn_scale >= 0) ||
	    isinf(hp->attn_scale) || !(hp->rope_base_swa >= 0) ||
	    isinf(hp->rope_base_swa))
		return loom_error_set(LOOM_E_INVAL,
				      "llama: sliding window %lld, pattern "
				      "%lld, score scale %g, rope base %g",
				      (long long)hp->n_swa,
				      (long long)hp->swa_pattern,
				      (double)hp->attn_scale,
				      (double)hp->rope_base_swa);
	if (hp->rope_freqs && hp->n_swa)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "llama: rope frequency factors with a "
				      "sliding window");
	if (hp->cache_type != LOOM_TYPE_F32 &&
	    hp->cache_type != LOOM_TYPE_F16)
		return loom_error_set(LOOM_E_INVAL,
				      "llama: cache type %s (f32 or f16)",
				      loom_type_name(hp->cache_type));
	if (is_moe(hp) && hp->n_expert_used > hp->n_expert)
		return loom_error_set(LOOM_E_INVAL,
				      "llama: more experts used than exist");
	if (hp->n_ctx > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "llama: n_ctx too large");
	if (hp->wtype == LOOM_TYPE_I32 || hp->wtype >= LOOM_TYPE_COUNT)
		return loom_error_set(LOOM_E_INVAL, "llama: bad weight type");
	bs = loom_type_block_size(hp->wtype);
	if (hp->n_embd % bs || hp->n_ff % bs ||
	    (hp->n_head * hp->head_dim) % bs)
		return loom_error_set(LOOM_E_INVAL,
				      "llama: n_embd, n_ff and n_head*head_dim "
				      "must be multiples of %lld for %s",
				      (long long)bs, loom_type_name(hp->wtype));
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * Synthetic weights: a splitmix64 stream per tensor, keyed on the seed and
 * the tensor's name, so values do not depend on creation order or device.
 */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 0x100000001b3ull;
	return h;
}

/* Fills dst with offset + scale * u, u uniform in [-1, 1). */
static void fill_uniform(float *dst, int64_t n, uint64_t seed, float offset,
			 float scale)
{
	uint64_t s = seed;

	for (int64_t i = 0; i < n; i++) {
		float u = (float)(splitmix64(&s) >> 40) * (1.0f / 8388608.0f);

		dst[i] = offset + scale * (u - 1.0f);
	}
}

/* Draws t's values in F32 and stores them converted to t's type. */
static int fill_tensor(struct loom_tensor *t, uint64_t seed, float offset,
		       float scale)
{
	int64_t n = loom_tensor_n_elements(t);
	size_t bytes = loom_tensor_n_bytes(t);
	float *f;
	void *conv = NULL;
	int ret;

	f = malloc((size_t)n * sizeof(*f));
	if (!f)
		return loom_error_set(LOOM_E_NOMEM, "llama: no memory for %s",
				      t->name);
	fill_uniform(f, n, splitmix64(&seed) ^ name_hash(t->name), offset,
		     scale);
	if (t->type != LOOM_TYPE_F32) {
		conv = malloc(bytes);
		if (!conv) {
			ret = loom_error_set(LOOM_E_NOMEM,
					     "llama: no memory for %s",
					     t->name);
			goto out;
		}
		ret = loom_type_convert(LOOM_TYPE_F32, f, t->type, conv, n);
		if (ret)
			goto out;
	}
	ret = loom_tensor_set(t, conv ? conv : f, 0, bytes);
out:
	free(conv);
	free(f);
	return ret;
}

/* A matrix whose products keep activations near unit variance. */
static float mat_scale(int64_t k)
{
	return sqrtf(3.0f / (float)k);
}

static struct loom_tensor *new_weight(loom_ctx_t *ctx, enum loom_type type,
				      int n_dims, int64_t ne0, int64_t ne1,
				      int64_t ne2, const char *name)
{
	int64_t ne[3] = { ne0, ne1, ne2 };
	struct loom_tensor *t = loom_tensor_new(ctx, type, n_dims, ne);

	if (t) {
		loom_tensor_set_name(t, name);
		loom_tensor_set_flags(t, LOOM_TENSOR_WEIGHT);
	}
	return t;
}

/* What reads a weight, for deciding where it goes. */
enum use {
	USE_MAT,   /* mul_mat by it */
	USE_EXPS,  /* mul_mat_id by it */
	USE_MUL,   /* a norm's scale: multiplied into rows */
	USE_ADD,   /* a bias */
	USE_CACHE, /* written by set_rows, read by attention */
	USE_EMBD,  /* get_rows from it, one row per token */
	USE_HOST,  /* read back to the host */
};

/* True when dev runs the op that uses t as u says (a probe of
 * descriptors, never computed). */
static bool dev_runs_use(loom_ctx_t *c, loom_dev_t *dev, struct loom_tensor *t,
			 enum use u)
{
	struct loom_tensor *x, *ids, *v, *r;

	switch (u) {
	case USE_MAT:
		x = loom_tensor_new_2d(c, LOOM_TYPE_F32, t->ne[0], 1);
		r = loom_mul_mat(c, t, x);
		return r && loom_dev_supports_op(dev, r);
	case USE_EXPS:
		x = loom_tensor_new_3d(c, LOOM_TYPE_F32, t->ne[0], 1, 1);
		ids = loom_tensor_new_2d(c, LOOM_TYPE_I32, 1, 1);
		r = loom_mul_mat_id(c, t, x, ids);
		return r && loom_dev_supports_op(dev, r);
	case USE_MUL:
	case USE_ADD:
		x = loom_tensor_new_1d(c, LOOM_TYPE_F32, t->ne[0]);
		r = u == USE_MUL ? loom_mul(c, x, t) : loom_add(c, x, t);
		return r && loom_dev_supports_op(dev, r);
	case USE_CACHE:
		x = loom_tensor_new_3d(c, LOOM_TYPE_F32, t->ne[0], 1, t->ne[2]);
		ids = loom_tensor_new_2d(c, LOOM_TYPE_I32, 1, t->ne[2]);
		r = loom_set_rows(c, t, x, ids);
		if (!r || !loom_dev_supports_op(dev, r))
			return false;
		v = loom_view_3d(c, r, t->ne[0], 1, t->ne[2], t->nb[1],
				 t->nb[2], 0);
		x = loom_tensor_new_3d(c, LOOM_TYPE_F32, t->ne[0], 1, t->ne[2]);
		r = loom_mul_mat(c, v, x);
		if (!r || !loom_dev_supports_op(dev, r))
			return false;
		r = loom_cont(c, loom_transpose(c, v));
		return r && loom_dev_supports_op(dev, r);
	case USE_EMBD:
	case USE_HOST:
		break;
	}
	return false;
}

/* A weight of layer (-1: none) used as u, in the context of the device
 * it goes to: everything on dev without a rest device; else layers
 * [0, n_first) on dev when it runs what uses them, the output with them
 * when every layer is there, and the embeddings and the rest on rest. */
static struct loom_tensor *place_weight(struct llama_model *m,
					enum loom_type type, int n_dims,
					int64_t ne0, int64_t ne1, int64_t ne2,
					const char *name, int64_t layer,
					enum use u)
{
	struct loom_tensor *probe, *t, **mats;
	bool first = true;
	int part;

	if (m->rest) {
		first = layer >= 0 ? layer < m->n_first :
				     m->n_first >= m->hp.n_layer;
		if (first && u != USE_EMBD && u != USE_HOST) {
			probe = new_weight(m->probe, type, n_dims, ne0, ne1,
					   ne2, name);
			first = probe && dev_runs_use(m->probe, m->dev, probe,
						      u);
		} else {
			first = false;
		}
	}
	t = new_weight(first ? m->wctx : m->wctx_rest, type, n_dims, ne0, ne1,
		       ne2, name);
	if (!t || u != USE_MAT)
		return t;
	part = first ? 0 : 1;
	mats = realloc(m->mats[part], (m->n_mats[part] + 1) * sizeof(*mats));
	if (!mats) {
		loom_error_set(LOOM_E_NOMEM, "llama: no memory");
		return NULL;
	}
	m->mats[part] = mats;
	m->mats[part][m->n_mats[part]++] = t;
	return t;
}

static int create_tensors(struct llama_model *m)
{
	const struct llama_hparams *hp = &m->hp;
	const struct llama_source *src = m->src;
	enum loom_type wt = hp->wtype, ty;
	int64_t n_q = hp->n_head * hp->head_dim;
	int64_t n_kv = hp->n_head_kv * hp->head_dim;
	char name[LOOM_MAX_NAME];
	int ret;

	/* A weight's type is the source's when there is one; the cache's is
	 * the model's. */
#define W(field, dtype, nd, a, b, c2, layer, use, fmt, ...)                    \
	do {                                                                 \
		snprintf(name, sizeof(name), fmt, ##__VA_ARGS__);            \
		ty = dtype;                                                  \
		if (src && strncmp(name, "cache_", 6)) {                     \
			ret = src->type(src->user, name, ty, &ty);           \
			if (ret)                                             \
				return ret;                                  \
		}                                                            \
		field = place_weight(m, ty, nd, a, b, c2, name, layer, use); \
		if (!field)                                                  \
			return loom_error_set(LOOM_E_INVAL, "llama: %s: %s", \
					      name, loom_error_message());   \
	} while (0)

	W(m->tok_embd, wt, 2, hp->n_embd, hp->n_vocab, 1, -1, USE_EMBD,
	  "token_embd.weight");
	for (int64_t i = 0; i < hp->n_layer; i++) {
		struct llama_layer *l = &m->layers[i];
		long long li = (long long)i;

		W(l->attn_norm, LOOM_TYPE_F32, 1, hp->n_embd, 1, 1, i, USE_MUL,
		  "blk.%lld.attn_norm.weight", li);
		W(l->wq, wt, 2, hp->n_embd, n_q, 1, i, USE_MAT,
		  "blk.%lld.attn_q.weight", li);
		W(l->wk, wt, 2, hp->n_embd, n_kv, 1, i, USE_MAT,
		  "blk.%lld.attn_k.weight", li);
		W(l->wv, wt, 2, hp->n_embd, n_kv, 1, i, USE_MAT,
		  "blk.%lld.attn_v.weight", li);
		W(l->wo, wt, 2, n_q, hp->n_embd, 1, i, USE_MAT,
		  "blk.%lld.attn_output.weight", li);
		if (hp->qkv_bias) {
			W(l->bq, LOOM_TYPE_F32, 1, n_q, 1, 1, i, USE_ADD,
			  "blk.%lld.attn_q.bias", li);
			W(l->bk, LOOM_TYPE_F32, 1, n_kv, 1, 1, i, USE_ADD,
			  "blk.%lld.attn_k.bias", li);
			W(l->bv, LOOM_TYPE_F32, 1, n_kv, 1, 1, i, USE_ADD,
			  "blk.%lld.attn_v.bias", li);
		}
		if (hp->qk_norm) {
			W(l->q_norm, LOOM_TYPE_F32, 1, hp->head_dim, 1, 1, i,
			  USE_MUL, "blk.%lld.attn_q_norm.weight", li);
			W(l->k_norm, LOOM_TYPE_F32, 1, hp->head_dim, 1, 1, i,
			  USE_MUL, "blk.%lld.attn_k_norm.weight", li);
		}
		W(l->ffn_norm, LOOM_TYPE_F32, 1, hp->n_embd, 1, 1, i, USE_MUL,
		  "blk.%lld.ffn_norm.weight", li);
		if (hp->post_norms) {
			W(l->post_attn_norm, LOOM_TYPE_F32, 1, hp->n_embd, 1, 1,
			  i, USE_MUL, "blk.%lld.post_attention_norm.weight",
			  li);
			W(l->post_ffn_norm, LOOM_TYPE_F32, 1, hp->n_embd, 1, 1,
			  i, USE_MUL, "blk.%lld.post_ffw_norm.weight", li);
		}
		if (is_moe(hp)) {
			W(l->ffn_gate_inp, LOOM_TYPE_F32, 2, hp->n_embd,
			  hp->n_expert, 1, i, USE_MAT,
			  "blk.%lld.ffn_gate_inp.weight", li);
			W(l->ffn_gate_exps, wt, 3, hp->n_embd, hp->n_ff,
			  hp->n_expert, i, USE_EXPS,
			  "blk.%lld.ffn_gate_exps.weight", li);
			W(l->ffn_up_exps, wt, 3, hp->n_embd, hp->n_ff,
			  hp->n_expert, i, USE_EXPS,
			  "blk.%lld.ffn_up_exps.weight", li);
			W(l->ffn_down_exps, wt, 3, hp->n_ff, hp->n_embd,
			  hp->n_expert, i, USE_EXPS,
			  "blk.%lld.ffn_down_exps.weight", li);
		} else {
			W(l->ffn_gate, wt, 2, hp->n_embd, hp->n_ff, 1, i, USE_MAT,
			  "blk.%lld.ffn_gate.weight", li);
			W(l->ffn_up, wt, 2, hp->n_embd, hp->n_ff, 1, i, USE_MAT,
			  "blk.%lld.ffn_up.weight", li);
			W(l->ffn_down, wt, 2, hp->n_ff, hp->n_embd, 1, i, USE_MAT,
			  "blk.%lld.ffn_down.weight", li);
		}
	}
	W(m->output_norm, LOOM_TYPE_F32, 1, hp->n_embd, 1, 1, -1, USE_MUL,
	  "output_norm.weight");
	if (hp->rope_freqs)
		W(m->rope_freqs, LOOM_TYPE_F32, 1, hp->head_dim / 2, 1, 1, -1,
		  USE_HOST, "rope_freqs.weight");
	if (hp->tied_output)
		m->output = m->tok_embd;
	else
		W(m->output, wt, 2, hp->n_embd, hp->n_vocab, 1, -1, USE_MAT,
		  "output.weight");

	/* The cache: keys [head_dim, n_ctx, n_head_kv], a position per row so
	 * that set_rows writes tokens and each head is one matrix for
	 * attention; values transposed, [n_ctx, head_dim, n_head_kv], a
	 * position per column, so that attention reads them as they are. */
	for (int64_t i = 0; i < hp->n_layer; i++) {
		struct llama_layer *l = &m->layers[i];

		W(l->cache_k, hp->cache_type, 3, hp->head_dim, hp->n_ctx,
		  hp->n_head_kv, i, USE_CACHE, "cache_k.%lld", (long long)i);
		W(l->cache_v, hp->cache_type, 3, hp->n_ctx, hp->head_dim,
		  hp->n_head_kv, i, USE_CACHE, "cache_v.%lld", (long long)i);
	}
#undef W
	return LOOM_OK;
}

/* Fills every weight; sums the byte counts the benchmark reports. */
static int fill_ctx(struct llama_model *m, loom_ctx_t *c, uint64_t seed)
{
	const struct llama_hparams *hp = &m->hp;
	struct loom_tensor *t;
	int ret;

	for (t = c ? loom_ctx_first_tensor(c) : NULL; t;
	     t = loom_ctx_next_tensor(c, t)) {
		bool cache = !strncmp(t->name, "cache_", 6);
		bool norm = strstr(t->name, "norm") != NULL;
		size_t bytes = loom_tensor_n_bytes(t);

		if (cache) {
			m->cache_bytes += bytes;
			continue;
		}
		m->weight_bytes += bytes;
		m->n_params += loom_tensor_n_elements(t);
		if (t == m->tok_embd && !hp->tied_output)
			m->decode_bytes += loom_type_row_size(t->type, t->ne[0]);
		else if (strstr(t->name, "_exps"))
			m->decode_bytes += bytes / (size_t)hp->n_expert *
					   (size_t)hp->n_expert_used;
		else
			m->decode_bytes += bytes;

		if (m->src)
			ret = m->src->fill(m->src->user, t);
		else if (t == m->rope_freqs)
			ret = fill_tensor(t, seed, 2.5f, 1.5f); /* [1, 4) */
		else if (norm)
			ret = fill_tensor(t, seed, 1.0f, 0.1f);
		else if (t == m->tok_embd || loom_tensor_n_dims(t) == 1)
			ret = fill_tensor(t, seed, 0.0f, 1.0f);
		else
			ret = fill_tensor(t, seed, 0.0f, mat_scale(t->ne[0]));
		if (ret)
			return ret;
	}
	return LOOM_OK;
}

static int fill_weights(struct llama_model *m, uint64_t seed)
{
	int ret = fill_ctx(m, m->wctx, seed);

	if (!ret)
		ret = fill_ctx(m, m->wctx_rest, seed);
	return ret ? ret : llama_model_clear_cache(m);
}

int llama_model_clear_cache(struct llama_model *m)
{
	for (int64_t i = 0; i < m->hp.n_layer; i++) {
		struct loom_tensor *k = m->layers[i].cache_k;
		struct loom_tensor *v = m->layers[i].cache_v;
		int ret;

		ret = loom_tensor_memset(k, 0, 0, loom_tensor_n_bytes(k));
		if (!ret)
			ret = loom_tensor_memset(v, 0, 0, loom_tensor_n_bytes(v));
		if (ret)
			return ret;
	}
	return LOOM_OK;
}

/* The frequency factors on the host, where the rope tables are made. */
static int read_freq_factors(struct llama_model *m)
{
	size_t n = loom_tensor_n_bytes(m->rope_freqs);

	int ret;

	m->freq_factors = malloc(n);
	if (!m->freq_factors)
		return loom_error_set(LOOM_E_NOMEM, "llama: no memory");
	ret = loom_tensor_get(m->rope_freqs, m->freq_factors, 0, n);
	for (int64_t i = 0; !ret && i < m->rope_freqs->ne[0]; i++)
		if (!(m->freq_factors[i] > 0) || isinf(m->freq_factors[i]))
			ret = loom_error_set(LOOM_E_INVAL,
					     "llama: rope_freqs.weight: factor "
					     "%lld is %g, not a positive "
					     "number", (long long)i,
					     (double)m->freq_factors[i]);
	return ret;
}

/* Places the matrices of part (0: on dev, 1: on rest) that only mul_mat
 * reads in one buffer of that device's weight buffer type, where that is
 * not the device's own buffer type. */
static int alloc_mats(struct llama_model *m, int part, loom_dev_t *dev)
{
	loom_buffer_type_t *wbt = loom_dev_weight_buffer_type(dev);
	struct loom_tensor **mats = m->mats[part];
	size_t n = m->n_mats[part], align, size = 0, off = 0;
	int ret = LOOM_OK;

	if (!n || !wbt || wbt == loom_dev_buffer_type(dev))
		return LOOM_OK;
	align = loom_buffer_type_alignment(wbt);
	for (size_t i = 0; i < n; i++)
		size += (loom_buffer_type_alloc_size(wbt, mats[i]) + align -
			 1) / align * align;
	ret = loom_buffer_type_alloc_buffer(wbt, size, &m->wbuf_mat[part]);
	for (size_t i = 0; !ret && i < n; i++) {
		ret = loom_tensor_place(mats[i], m->wbuf_mat[part], off);
		off += (loom_buffer_type_alloc_size(wbt, mats[i]) + align -
			1) / align * align;
	}
	if (!ret)
		loom_buffer_set_usage(m->wbuf_mat[part],
				      LOOM_BUFFER_USAGE_WEIGHTS);
	return ret;
}

/* Allocates the weights of c on dev in one buffer marked as weights. */
static int alloc_weights(loom_ctx_t *c, loom_dev_t *dev, loom_buffer_t **out)
{
	loom_buffer_type_t *buft = loom_dev_buffer_type(dev);
	int ret;

	if (!buft)
		return loom_error_set(LOOM_E_DEVICE,
				      "llama: %s has no buffer type",
				      loom_dev_name(dev));
	ret = loom_ctx_alloc_tensors(c, buft, out);
	if (!ret && *out)
		loom_buffer_set_usage(*out, LOOM_BUFFER_USAGE_WEIGHTS);
	return ret;
}

static int model_new(const struct llama_hparams *hp,
		     const struct llama_placement *pl,
		     const struct llama_source *src, uint64_t seed,
		     struct llama_model **out)
{
	struct llama_model *m;
	loom_buffer_type_t *buft;
	int ret;

	if (!hp || !pl || !pl->first || !out)
		return loom_error_set(LOOM_E_INVAL, "llama: NULL argument");
	if (pl->rest && pl->rest != pl->first && pl->n_first < 0)
		return loom_error_set(LOOM_E_INVAL, "llama: %lld layers on %s",
				      (long long)pl->n_first,
				      loom_dev_name(pl->first));
	ret = llama_hparams_check(hp);
	if (ret)
		return ret;
	buft = loom_dev_buffer_type(pl->first);
	if (!buft)
		return loom_error_set(LOOM_E_DEVICE,
				      "llama: %s has no buffer type",
				      loom_dev_name(pl->first));

	m = calloc(1, sizeof(*m));
	if (!m)
		return loom_error_set(LOOM_E_NOMEM, "llama: no memory");
	m->hp = *hp;
	m->src = src;
	m->dev = pl->first;
	if (pl->rest && pl->rest != pl->first) {
		m->rest = pl->rest;
		m->n_first = pl->n_first < hp->n_layer ? pl->n_first
						       : hp->n_layer;
	}
	m->layers = calloc((size_t)hp->n_layer, sizeof(*m->layers));
	if (!m->layers) {
		ret = loom_error_set(LOOM_E_NOMEM, "llama: no memory");
		goto err_free;
	}
	ret = loom_ctx_new(0, &m->wctx);
	if (!ret && m->rest)
		ret = loom_ctx_new(0, &m->wctx_rest);
	if (!ret && m->rest)
		ret = loom_ctx_new(0, &m->probe);
	if (ret)
		goto err_free;
	ret = create_tensors(m);
	loom_ctx_free(m->probe);
	m->probe = NULL;
	if (ret)
		goto err_free;
	ret = alloc_mats(m, 0, m->dev);
	if (!ret && m->rest)
		ret = alloc_mats(m, 1, m->rest);
	if (!ret)
		ret = alloc_weights(m->wctx, m->dev, &m->wbuf);
	if (!ret && m->rest)
		ret = alloc_weights(m->wctx_rest, m->rest, &m->wbuf_rest);
	if (ret)
		goto err_free;
	ret = fill_weights(m, seed);
	m->src = NULL;
	if (!ret && m->rope_freqs)
		ret = read_freq_factors(m);
	if (ret)
		goto err_free;
	ret = loom_galloc_new(buft, &m->galloc);
	if (ret)
		goto err_free;
	*out = m;
	return LOOM_OK;

err_free:
	llama_model_free(m);
	return ret;
}

int llama_model_new(const struct llama_hparams *hp, loom_dev_t *dev,
		    uint64_t seed, struct llama_model **out)
{
	struct llama_placement pl = { .first = dev };

	return model_new(hp, &pl, NULL, seed, out);
}

int llama_model_new_placed(const struct llama_hparams *hp,
			   const struct llama_placement *pl, uint64_t seed,
			   struct llama_model **out)
{
	return model_new(hp, pl, NULL, seed, out);
}

int llama_model_load(const struct llama_hparams *hp, loom_dev_t *dev,
		     const struct llama_source *src,
		     struct llama_model **out)
{
	struct llama_placement pl = { .first = dev };

	return llama_model_load_placed(hp, &pl, src, out);
}

int llama_model_load_placed(const struct llama_hparams *hp,
			    const struct llama_placement *pl,
			    const struct llama_source *src,
			    struct llama_model **out)
{
	if (!src || !src->type || !src->fill)
		return loom_error_set(LOOM_E_INVAL, "llama: no weight source");
	return model_new(hp, pl, src, 0, out);
}

static void drop_graph(struct llama_model *m)
{
	loom_ctx_free(m->gctx);
	m->gctx = NULL;
	m->graph = NULL;
	m->g_n_tokens = 0;
	m->g_placed = false;
}

void llama_model_free(struct llama_model *m)
{
	if (!m)
		return;
	drop_graph(m);
	loom_galloc_free(m->galloc);
	loom_buffer_free(m->wbuf);
	loom_buffer_free(m->wbuf_rest);
	for (int part = 0; part < 2; part++) {
		loom_buffer_free(m->wbuf_mat[part]);
		free(m->mats[part]);
	}
	loom_ctx_free(m->wctx);
	loom_ctx_free(m->wctx_rest);
	loom_ctx_free(m->probe);
	free(m->freq_factors);
	free(m->layers);
	free(m);
}

const struct llama_hparams *llama_model_hparams(const struct llama_model *m)
{
	return &m->hp;
}

loom_dev_t *llama_model_device(const struct llama_model *m)
{
	return m->dev;
}

struct loom_tensor *llama_model_tensor(const struct llama_model *m,
				      const char *name)
{
	struct loom_tensor *t = loom_ctx_get_tensor(m->wctx, name);

	return t || !m->wctx_rest ? t : loom_ctx_get_tensor(m->wctx_rest, name);
}

loom_ctx_t *llama_model_ctx(const struct llama_model *m)
{
	return m->wctx;
}

size_t llama_model_weight_bytes(const struct llama_model *m)
{
	return m->weight_bytes;
}

size_t llama_model_decode_bytes(const struct llama_model *m)
{
	return m->decode_bytes;
}

int64_t llama_model_n_params(const struct llama_model *m)
{
	return m->n_params;
}

loom_buffer_t *llama_model_weight_buffer(const struct llama_model *m)
{
	return m->wbuf;
}

loom_buffer_t *llama_model_matrix_buffer(const struct llama_model *m)
{
	return m->wbuf_mat[0];
}

size_t llama_model_held_bytes(const struct llama_model *m, int part)
{
	if (part < 0 || part > 1)
		return 0;
	return loom_buffer_size(part ? m->wbuf_rest : m->wbuf) +
	       loom_buffer_size(m->wbuf_mat[part]);
}

loom_dev_t *llama_model_rest_device(const struct llama_model *m)
{
	return m->rest;
}

loom_buffer_t *llama_model_rest_buffer(const struct llama_model *m)
{
	return m->wbuf_rest;
}

loom_buffer_t *llama_model_compute_buffer(const struct llama_model *m)
{
	return m->galloc ? loom_galloc_buffer(m->galloc) : NULL;
}

size_t llama_model_cache_bytes(const struct llama_model *m)
{
	return m->cache_bytes;
}

size_t llama_model_compute_bytes(const struct llama_model *m)
{
	return m->galloc ? loom_galloc_buffer_size(m->galloc) : 0;
}

void llama_meta_model(const struct llama_hparams *hp,
		      struct loom_meta_model *out)
{
	out->head_dim = hp->head_dim;
	out->n_head = hp->n_head;
	out->n_head_kv = hp->n_head_kv;
}

bool llama_layer_slides(const struct llama_hparams *hp, int64_t il)
{
	if (!hp->n_swa)
		return false;
	return !hp->swa_pattern || il % hp->swa_pattern != hp->swa_pattern - 1;
}

void llama_layer_rope(const struct llama_hparams *hp, int64_t il,
		      float *base, float *scale)
{
	if (llama_layer_slides(hp, il)) {
		*base = hp->rope_base_swa > 0 ? hp->rope_base_swa :
						hp->rope_base;
		*scale = 1.0f;
	} else {
		*base = hp->rope_base;
		*scale = hp->rope_scale > 0 ? hp->rope_scale : 1.0f;
	}
}

float llama_attn_scale(const struct llama_hparams *hp)
{
	return hp->attn_scale > 0 ? hp->attn_scale :
				    1.0f / sqrtf((float)hp->head_dim);
}

int llama_model_graph_nodes(const struct llama_model *m)
{
	return m->graph ? loom_graph_n_nodes(m->graph) : 0;
}

/* ------------------------------------------------------------------------
 * The graph of one batch.
 */
struct build {
	struct llama_model *m;
	loom_ctx_t *c;
	int64_t n_tokens;
	int64_t n_kv;
	struct loom_tensor *pos, *kv_ids, *v_ids;
	/* [n_kv, n_tokens * group]: causal, and causal within the sliding
	 * window; each made when a layer first reads it. */
	struct loom_tensor *mask, *mask_swa;
	struct loom_tensor *cos, *sin; /* [head_dim / 2, n_tokens] */
};

static struct loom_tensor *rms(struct build *b, struct loom_tensor *x,
			       struct loom_tensor *w)
{
	return loom_mul(b->c, loom_rms_norm(b->c, x, b->m->hp.eps), w);
}

/* Rope from tables of cos and sin per pair and token, made on the host
 * with the file's frequency factors: x [head_dim, n_head, n_tokens] read
 * as pairs (x0, x1) (NORMAL: adjacent; NEOX: the two halves) turned into
 * (x0 cos - x1 sin, x0 sin + x1 cos). */
static struct loom_tensor *rope_table(struct build *b, struct loom_tensor *x,
				      int64_t nh)
{
	const struct llama_hparams *hp = &b->m->hp;
	loom_ctx_t *c = b->c;
	int64_t h2 = hp->head_dim / 2, t = b->n_tokens;
	bool neox = hp->rope_mode == LOOM_ROPE_NEOX;
	size_t step = neox ? (size_t)h2 * sizeof(float) : sizeof(float);
	struct loom_tensor *x4, *x0, *x1, *cs, *sn, *o0, *o1;

	/* A tensor of its own, so that on a meta device the pairs' views
	 * cut it by heads, not inside the projection's slices. */
	x = loom_cont(c, x);
	x4 = neox ? loom_reshape_4d(c, x, h2, 2, nh, t) :
		    loom_reshape_4d(c, x, 2, h2, nh, t);
	if (!x4)
		return NULL;
	x0 = loom_view_4d(c, x4, neox ? h2 : 1, neox ? 1 : h2, nh, t,
			  x4->nb[1], x4->nb[2], x4->nb[3], 0);
	x1 = loom_view_4d(c, x4, neox ? h2 : 1, neox ? 1 : h2, nh, t,
			  x4->nb[1], x4->nb[2], x4->nb[3], step);
	x0 = loom_cont(c, x0);
	x1 = loom_cont(c, x1);
	cs = neox ? loom_reshape_4d(c, b->cos, h2, 1, 1, t) :
		    loom_reshape_4d(c, b->cos, 1, h2, 1, t);
	sn = neox ? loom_reshape_4d(c, b->sin, h2, 1, 1, t) :
		    loom_reshape_4d(c, b->sin, 1, h2, 1, t);
	o0 = loom_sub(c, loom_mul(c, x0, cs), loom_mul(c, x1, sn));
	o1 = loom_add(c, loom_mul(c, x0, sn), loom_mul(c, x1, cs));
	x = loom_concat(c, o0, o1, neox ? 1 : 0);
	return loom_reshape_3d(c, x, hp->head_dim, nh, t);
}

static struct loom_tensor *rope(struct build *b, struct loom_tensor *x,
				int64_t nh, int64_t il)
{
	const struct llama_hparams *hp = &b->m->hp;
	int64_t n_rot = hp->n_rot ? hp->n_rot : hp->head_dim;
	float base, freq_scale;

	if (hp->rope_freqs)
		return rope_table(b, x, nh);
	llama_layer_rope(hp, il, &base, &freq_scale);
	return loom_rope(b->c, x, b->pos, (int)n_rot, hp->rope_mode, base,
			 freq_scale);
}

static struct loom_tensor *new_input(loom_ctx_t *c, enum loom_type type,
				     int n_dims, int64_t ne0, int64_t ne1,
				     const char *name)
{
	int64_t ne[2] = { ne0, ne1 };
	struct loom_tensor *t = loom_tensor_new(c, type, n_dims, ne);

	if (t) {
		loom_tensor_set_name(t, name);
		loom_tensor_set_flags(t, LOOM_TENSOR_INPUT);
	}
	return t;
}

/* The mask layer il reads. */
static struct loom_tensor *layer_mask(struct build *b, int64_t il)
{
	const struct llama_hparams *hp = &b->m->hp;
	bool slides = llama_layer_slides(hp, il);
	struct loom_tensor **mask = slides ? &b->mask_swa : &b->mask;

	if (!*mask)
		*mask = new_input(b->c, LOOM_TYPE_F32, 2, b->n_kv,
				  b->n_tokens * (hp->n_head / hp->n_head_kv),
				  slides ? "inp_mask_swa" : "inp_mask");
	return *mask;
}

/* Self-attention of one layer over the cache window [0, n_kv).  Heads are
 * grouped [head_dim, tokens * group, n_head_kv] so that every query head
 * of a GQA group multiplies its own key/value head without broadcasting. */
static struct loom_tensor *attention(struct build *b, struct llama_layer *l,
				     int64_t il, struct loom_tensor *cur)
{
	const struct llama_hparams *hp = &b->m->hp;
	loom_ctx_t *c = b->c;
	int64_t hd = hp->head_dim, hkv = hp->n_head_kv, t = b->n_tokens;
	int64_t g = hp->n_head / hp->n_head_kv;
	struct loom_tensor *q, *k, *v, *ks, *vs, *kq, *kqv;

	q = loom_mul_mat(c, l->wq, cur);
	k = loom_mul_mat(c, l->wk, cur);
	v = loom_mul_mat(c, l->wv, cur);
	if (hp->qkv_bias) {
		q = loom_add(c, q, l->bq);
		k = loom_add(c, k, l->bk);
		v = loom_add(c, v, l->bv);
	}
	q = loom_reshape_3d(c, q, hd, hp->n_head, t);
	k = loom_reshape_3d(c, k, hd, hkv, t);
	v = loom_reshape_3d(c, v, hd, hkv, t);
	if (hp->qk_norm) {
		q = rms(b, q, l->q_norm);
		k = rms(b, k, l->k_norm);
	}
	q = rope(b, q, hp->n_head, il);
	k = rope(b, k, hkv, il);

	/* New keys into the cache rows of their positions; new values, one
	 * value a row of [1, n_ctx, head_dim, n_head_kv], into the cache
	 * columns of theirs. */
	k = loom_cont(c, loom_permute(c, k, 0, 2, 1, 3));
	v = loom_permute(c, loom_reshape_4d(c, v, 1, hd, hkv, t), 0, 2, 3, 1);
	ks = loom_set_rows(c, l->cache_k, k, b->kv_ids);
	vs = loom_set_rows(c, loom_reshape_4d(c, l->cache_v, 1, hp->n_ctx, hd,
					      hkv), v, b->v_ids);
	if (!ks || !vs)
		return NULL;
	k = loom_view_3d(c, ks, hd, b->n_kv, hkv, ks->nb[1], ks->nb[2], 0);
	v = loom_view_3d(c, vs, b->n_kv, hd, hkv, vs->nb[2], vs->nb[3], 0);

	q = loom_reshape_4d(c, q, hd, g, hkv, t);
	q = loom_cont(c, loom_permute(c, q, 0, 2, 3, 1));
	q = loom_reshape_3d(c, q, hd, t * g, hkv);

	kq = loom_mul_mat(c, k, q);
	kq = loom_soft_max(c, kq, layer_mask(b, il), llama_attn_scale(hp));
	kqv = loom_mul_mat(c, v, kq);
	kqv = loom_reshape_4d(c, kqv, hd, t, g, hkv);
	kqv = loom_cont(c, loom_permute(c, kqv, 0, 3, 1, 2));
	kqv = loom_reshape_2d(c, kqv, hd * hp->n_head, t);
	return loom_mul_mat(c, l->wo, kqv);
}

static struct loom_tensor *ffn_dense(struct build *b, struct llama_layer *l,
				     struct loom_tensor *cur)
{
	loom_ctx_t *c = b->c;
	struct loom_tensor *gate, *up;

	gate = loom_mul_mat(c, l->ffn_gate, cur);
	gate = b->m->hp.gelu ? loom_gelu(c, gate) : loom_silu(c, gate);
	up = loom_mul_mat(c, l->ffn_up, cur);
	return loom_mul_mat(c, l->ffn_down, loom_mul(c, gate, up));
}

/* Router softmax, top-k experts with renormalized weights, SwiGLU experts
 * through mul_mat_id, then the weighted sum over the selected experts. */
static struct loom_tensor *ffn_moe(struct build *b, struct llama_layer *l,
				   struct loom_tensor *cur)
{
	const struct llama_hparams *hp = &b->m->hp;
	loom_ctx_t *c = b->c;
	int64_t t, k = hp->n_expert_used;
	struct loom_tensor *probs, *sel, *w, *gate, *up, *down, *sum;

	if (!cur)
		return NULL;
	/* The tokens of cur: the last layer's may be fewer than the
	 * batch's. */
	t = cur->ne[1];

	probs = loom_soft_max(c, loom_mul_mat(c, l->ffn_gate_inp, cur), NULL,
			      1.0f);
	sel = loom_top_k(c, probs, (int)k);
	w = loom_get_rows(c, loom_reshape_3d(c, probs, 1, hp->n_expert, t),
			  sel);
	w = loom_reshape_2d(c, w, k, t);
	w = loom_div(c, w, loom_sum_rows(c, w));
	w = loom_reshape_3d(c, w, 1, k, t);

	cur = loom_reshape_3d(c, cur, hp->n_embd, 1, t);
	gate = loom_silu(c, loom_mul_mat_id(c, l->ffn_gate_exps, cur, sel));
	up = loom_mul_mat_id(c, l->ffn_up_exps, cur, sel);
	down = loom_mul_mat_id(c, l->ffn_down_exps, loom_mul(c, gate, up),
			       sel);
	down = loom_mul(c, down, w);
	if (!down)
		return NULL;

	sum = loom_view_2d(c, down, hp->n_embd, t, down->nb[2], 0);
	for (int64_t e = 1; e < k; e++)
		sum = loom_add(c, sum,
			       loom_view_2d(c, down, hp->n_embd, t, down->nb[2],
					    (size_t)e * down->nb[1]));
	return sum;
}

/* Builds the graph of a batch of n_tokens over a cache window of n_kv in
 * a fresh context, replacing the previous graph. */
static int build_graph(struct llama_model *m, int n_tokens, int n_kv,
		       bool all_logits)
{
	const struct llama_hparams *hp = &m->hp;
	struct build b = { .m = m, .n_tokens = n_tokens, .n_kv = n_kv };
	struct loom_tensor *x, *cur, *tokens, *v_ids;
	loom_ctx_t *c;
	int ret;

	drop_graph(m);
	ret = loom_ctx_new(0, &c);
	if (ret)
		return ret;
	b.c = c;

	tokens = new_input(c, LOOM_TYPE_I32, 1, n_tokens, 1, "inp_tokens");
	b.pos = new_input(c, LOOM_TYPE_I32, 1, n_tokens, 1, "inp_pos");
	b.kv_ids = new_input(c, LOOM_TYPE_I32, 2, n_tokens, hp->n_head_kv,
			     "inp_kv_ids");
	v_ids = new_input(c, LOOM_TYPE_I32, 2, n_tokens,
			  hp->head_dim * hp->n_head_kv, "inp_v_ids");
	b.v_ids = loom_reshape_3d(c, v_ids, n_tokens, hp->head_dim,
				  hp->n_head_kv);
	if (hp->rope_freqs) {
		b.cos = new_input(c, LOOM_TYPE_F32, 2, hp->head_dim / 2,
				  n_tokens, "inp_rope_cos");
		b.sin = new_input(c, LOOM_TYPE_F32, 2, hp->head_dim / 2,
				  n_tokens, "inp_rope_sin");
	}

	x = loom_get_rows(c, m->tok_embd, tokens);
	if (hp->embd_scale)
		x = loom_scale(c, x, sqrtf((float)hp->n_embd));
	for (int64_t i = 0; i < hp->n_layer && x; i++) {
		struct llama_layer *l = &m->layers[i];

		cur = attention(&b, l, i, rms(&b, x, l->attn_norm));
		if (hp->post_norms)
			cur = rms(&b, cur, l->post_attn_norm);
		x = loom_add(c, x, cur);
		/* Past the last layer's attention only the tokens whose
		 * logits are asked for matter: its FFN runs on them alone. */
		if (x && !all_logits && n_tokens > 1 && i == hp->n_layer - 1)
			x = loom_view_2d(c, x, hp->n_embd, 1, x->nb[1],
					 (size_t)(n_tokens - 1) * x->nb[1]);
		cur = rms(&b, x, l->ffn_norm);
		cur = is_moe(hp) ? ffn_moe(&b, l, cur) : ffn_dense(&b, l, cur);
		if (hp->post_norms)
			cur = rms(&b, cur, l->post_ffn_norm);
		x = loom_add(c, x, cur);
	}
	x = rms(&b, x, m->output_norm);
	x = loom_mul_mat(c, m->output, x);
	if (!x) {
		ret = loom_error_set(LOOM_E_INVAL, "llama: graph: %s",
				     loom_ctx_error(c));
		goto err_free;
	}
	loom_tensor_set_name(x, "logits");
	loom_tensor_set_flags(x, LOOM_TENSOR_OUTPUT);

	ret = loom_graph_new(c, &m->graph);
	if (!ret)
		ret = loom_graph_expand(m->graph, x);
	if (ret)
		goto err_free;
	m->gctx = c;
	m->g_n_tokens = n_tokens;
	m->g_n_kv = n_kv;
	m->g_all = all_logits;
	m->g_placed = false;
	m->in_tokens = tokens;
	m->in_pos = b.pos;
	m->in_kv_ids = b.kv_ids;
	m->in_v_ids = v_ids;
	m->in_mask = b.mask;
	m->in_mask_swa = b.mask_swa;
	m->in_cos = b.cos;
	m->in_sin = b.sin;
	m->out_logits = x;
	return LOOM_OK;

err_free:
	m->graph = NULL;
	loom_ctx_free(c);
	return ret;
}

static int kv_window(const struct llama_model *m, int n_end)
{
	int64_t n = (n_end + KV_PAD - 1) / KV_PAD * KV_PAD;

	return (int)(n < m->hp.n_ctx ? n : m->hp.n_ctx);
}

/* Sizes the memory of the graphs of n_tokens (and of one token) over
 * the whole cache, in the model's allocator or s's. */
static int reserve(struct llama_model *m, loom_sched_t *s, int n_tokens)
{
	int ret;

	if (n_tokens < 1 || n_tokens > m->hp.n_ctx)
		return loom_error_set(LOOM_E_RANGE,
				      "llama: cannot reserve %d tokens",
				      n_tokens);
	for (int pass = 0; pass < 2; pass++) {
		ret = build_graph(m, pass ? 1 : n_tokens, (int)m->hp.n_ctx,
				  true);
		if (!ret)
			ret = s ? loom_sched_reserve(s, m->graph) :
				  loom_galloc_reserve(m->galloc, m->graph);
		if (ret || n_tokens == 1)
			break;
	}
	drop_graph(m);
	return ret;
}

int llama_model_reserve(struct llama_model *m, int n_tokens)
{
	return reserve(m, NULL, n_tokens);
}

int llama_model_reserve_sched(struct llama_model *m, loom_sched_t *s,
			      int n_tokens)
{
	if (!m || !s)
		return loom_error_set(LOOM_E_INVAL, "llama: NULL argument");
	return reserve(m, s, n_tokens);
}

loom_graph_t *llama_model_graph(struct llama_model *m, int n_tokens,
			       int n_past)
{
	if (!m || n_tokens < 1 || n_past < 0 ||
	    n_past + n_tokens > m->hp.n_ctx) {
		loom_error_set(LOOM_E_RANGE, "llama: no graph of %d tokens at "
			       "%d", n_tokens, n_past);
		return NULL;
	}
	if (build_graph(m, n_tokens, kv_window(m, n_past + n_tokens), false))
		return NULL;
	return m->graph;
}

/* cos and sin of pos * scale * base^(-2i / head_dim) / factor[i] for each
 * pair i of each token of the batch. */
static int set_rope_tables(struct llama_model *m, int n_tokens, int n_past)
{
	const struct llama_hparams *hp = &m->hp;
	int64_t h2 = hp->head_dim / 2;
	size_t n = (size_t)(h2 * n_tokens);
	double scale = hp->rope_scale > 0 ? hp->rope_scale : 1.0;
	float *cs = malloc(n * sizeof(*cs)), *sn = malloc(n * sizeof(*sn));
	int ret;

	if (!cs || !sn) {
		ret = loom_error_set(LOOM_E_NOMEM, "llama: no memory");
		goto out;
	}
	for (int t = 0; t < n_tokens; t++) {
		for (int64_t i = 0; i < h2; i++) {
			double th = (double)(n_past + t) * scale *
				    pow(hp->rope_base,
					-2.0 * (double)i / (double)hp->head_dim) /
				    m->freq_factors[i];

			cs[t * h2 + i] = (float)cos(th);
			sn[t * h2 + i] = (float)sin(th);
		}
	}
	ret = loom_tensor_set(m->in_cos, cs, 0, n * sizeof(*cs));
	if (!ret)
		ret = loom_tensor_set(m->in_sin, sn, 0, n * sizeof(*sn));
out:
	free(sn);
	free(cs);
	return ret;
}

/* Fills the graph's inputs for a batch at position n_past. */
static int set_inputs(struct llama_model *m, const int32_t *tokens,
		      int n_tokens, int n_past)
{
	const struct llama_hparams *hp = &m->hp;
	int64_t g = hp->n_head / hp->n_head_kv, n_kv = m->g_n_kv;
	int64_t rows = (int64_t)n_tokens * g;
	size_t n_ids = (size_t)n_tokens * (size_t)hp->n_head_kv;
	size_t n_v_ids = n_ids * (size_t)hp->head_dim;
	int32_t *ids;
	float *mask;
	int ret = LOOM_OK;

	/* Every position of the batch once per kv head (keys) or per value
	 * of a kv head (values): the first n_ids serve the keys. */
	ids = malloc(n_v_ids * sizeof(*ids));
	mask = malloc((size_t)(rows * n_kv) * sizeof(*mask));
	if (!ids || !mask) {
		ret = loom_error_set(LOOM_E_NOMEM, "llama: no memory");
		goto out;
	}
	for (size_t i = 0; i < n_v_ids; i++)
		ids[i] = n_past + (int32_t)(i % (size_t)n_tokens);
	/* Row r is the query of token r % n_tokens; it sees the positions
	 * up to its own, the window's last n_swa in the sliding one. */
	for (int pass = 0; pass < 2 && !ret; pass++) {
		struct loom_tensor *in = pass ? m->in_mask_swa : m->in_mask;
		int64_t w = pass ? hp->n_swa : 0;

		if (!in)
			continue;
		for (int64_t r = 0; r < rows; r++) {
			int64_t last = n_past + r % n_tokens;

			for (int64_t j = 0; j < n_kv; j++)
				mask[r * n_kv + j] =
					j <= last && (!w || last - j < w) ?
						0.0f : -INFINITY;
		}
		ret = loom_tensor_set(in, mask, 0,
				      (size_t)(rows * n_kv) * sizeof(*mask));
	}
	if (!ret)
		ret = loom_tensor_set(m->in_tokens, tokens, 0,
				      (size_t)n_tokens * sizeof(*tokens));
	/* Rope from tables reads no positions. */
	if (!ret && !hp->rope_freqs)
		ret = loom_tensor_set(m->in_pos, ids, 0,
				      (size_t)n_tokens * sizeof(*ids));
	if (!ret)
		ret = loom_tensor_set(m->in_kv_ids, ids, 0,
				      n_ids * sizeof(*ids));
	if (!ret)
		ret = loom_tensor_set(m->in_v_ids, ids, 0,
				      n_v_ids * sizeof(*ids));
	if (!ret && hp->rope_freqs)
		ret = set_rope_tables(m, n_tokens, n_past);
out:
	free(mask);
	free(ids);
	return ret;
}

/* One batch on be, or through s when s is set. */
static int eval(struct llama_model *m, loom_backend_t *be, loom_sched_t *s,
		const int32_t *tokens, int n_tokens, int n_past,
		bool all_logits, float *logits)
{
	int n_kv, ret;

	if (!m || !(be || s) || !tokens || !logits)
		return loom_error_set(LOOM_E_INVAL, "llama: NULL argument");
	if (n_tokens < 1 || n_past < 0 || n_past + n_tokens > m->hp.n_ctx)
		return loom_error_set(LOOM_E_RANGE,
				      "llama: %d tokens at %d exceed n_ctx "
				      "%lld", n_tokens, n_past,
				      (long long)m->hp.n_ctx);
	for (int i = 0; i < n_tokens; i++)
		if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
			return loom_error_set(LOOM_E_RANGE,
					      "llama: token %d out of range",
					      (int)tokens[i]);

	if (n_tokens == 1)
		all_logits = false;
	n_kv = kv_window(m, n_past + n_tokens);
	if (!m->graph || m->g_n_tokens != n_tokens || m->g_n_kv != n_kv ||
	    m->g_all != all_logits) {
		ret = build_graph(m, n_tokens, n_kv, all_logits);
		if (ret)
			return ret;
	}
	if (s) {
		/* Cheap while the graph is the one placed last. */
		ret = loom_sched_alloc_graph(s, m->graph);
		if (ret)
			return ret;
		m->g_placed = false;
	} else if (!m->g_placed) {
		ret = loom_galloc_alloc_graph(m->galloc, m->graph);
		if (ret)
			return ret;
		m->g_placed = true;
	}
	ret = set_inputs(m, tokens, n_tokens, n_past);
	if (ret)
		return ret;
	if (s) {
		ret = loom_sched_compute(s, m->graph);
	} else {
		ret = loom_backend_graph_compute(be, m->graph);
		if (!ret)
			ret = loom_backend_synchronize(be);
	}
	if (ret)
		return ret;
	return loom_tensor_get(m->out_logits, logits, 0,
			       loom_tensor_n_bytes(m->out_logits));
}

int llama_eval(struct llama_model *m, loom_backend_t *be,
	       const int32_t *tokens, int n_tokens, int n_past,
	       bool all_logits, float *logits)
{
	return eval(m, be, NULL, tokens, n_tokens, n_past, all_logits,
		    logits);
}

int llama_eval_sched(struct llama_model *m, loom_sched_t *s,
		     const int32_t *tokens, int n_tokens, int n_past,
		     bool all_logits, float *logits)
{
	if (!s)
		return loom_error_set(LOOM_E_INVAL, "llama: no scheduler");
	return eval(m, NULL, s, tokens, n_tokens, n_past, all_logits,
		    logits);
}

bool llama_dev_runs(const struct llama_hparams *hp,
		    const struct llama_source *src, loom_dev_t *dev,
		    char *what, size_t size)
{
	struct llama_model m = { .hp = *hp, .src = src, .dev = dev };
	bool ok = true;

	if (what && size)
		what[0] = '\0';
	if (llama_hparams_check(hp))
		return false;
	m.layers = calloc((size_t)hp->n_layer, sizeof(*m.layers));
	if (!m.layers || loom_ctx_new(0, &m.wctx) || create_tensors(&m) ||
	    build_graph(&m, 2, KV_PAD < hp->n_ctx ? KV_PAD : (int)hp->n_ctx,
			true)) {
		ok = false;
		if (what && size)
			snprintf(what, size, "%s", loom_error_message());
	}
	for (size_t i = 0; ok && i < loom_graph_n_nodes(m.graph); i++) {
		struct loom_tensor *t = loom_graph_node(m.graph, i);

		if (loom_op_is_view(t->op) || loom_dev_supports_op(dev, t))
			continue;
		ok = false;
		if (what && size)
			snprintf(what, size, "%s%s%s%s", loom_op_name(t->op),
				 t->name[0] ? " ('" : "", t->name,
				 t->name[0] ? "')" : "");
	}
	drop_graph(&m);
	loom_ctx_free(m.wctx);
	free(m.mats[0]);
	free(m.mats[1]);
	free(m.layers);
	return ok;
}
