/* SPDX-License-Identifier: MIT */
/* decoder.c - a decoder built through the public API: its shape and
 * presets, the model made (weights.c) on one device or two, the graph of
 * one batch (the architecture's builder, build-*.c), the KV cache and the
 * evaluation.  No timing here.
 */
#include "decoder-int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void drop_graph(struct llama_model *m);

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

/* The rope, window and cache choices. */
static int check_rope(const struct llama_hparams *hp)
{
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
	if (hp->yarn_n_ctx < 0 || hp->yarn_n_ctx > INT32_MAX ||
	    (hp->yarn_n_ctx && (!(hp->rope_scale > 0) ||
				!isfinite(hp->yarn_attn_factor))))
		return loom_error_set(LOOM_E_INVAL,
				      "llama: YaRN over %lld positions, "
				      "scale %g, attention factor %g",
				      (long long)hp->yarn_n_ctx,
				      (double)hp->rope_scale,
				      (double)hp->yarn_attn_factor);
	if (hp->rope_freqs && hp->yarn_n_ctx)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "llama: rope frequency factors with "
				      "YaRN");
	if (hp->rope_freqs && hp->n_swa)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "llama: rope frequency factors with a "
				      "sliding window");
	if (hp->cache_type != LOOM_TYPE_F32 &&
	    hp->cache_type != LOOM_TYPE_F16)
		return loom_error_set(LOOM_E_INVAL,
				      "llama: cache type %s (f32 or f16)",
				      loom_type_name(hp->cache_type));
	return LOOM_OK;
}

/* The choices hp makes that its architecture's builder and tensors have:
 * a feature the architecture lacks would be ignored, so it is refused. */
static int check_arch(const struct llama_hparams *hp)
{
	const struct model_arch *a = model_arch_get(hp->arch);
	bool gemma = hp->gelu || hp->embd_scale || hp->post_norms ||
		     hp->rope_base_swa > 0;
	const struct {
		bool used;
		unsigned flag;
		const char *what;
	} need[] = {
		{ hp->qkv_bias, ARCH_QKV_BIAS, "q/k/v biases" },
		{ hp->qk_norm, ARCH_QK_NORM, "q/k norms" },
		{ is_moe(hp), ARCH_MOE, "experts" },
		{ !is_moe(hp), ARCH_DENSE, "a dense FFN" },
		{ gemma, ARCH_GEMMA, "Gemma's choices" },
		{ hp->fused_qkv, ARCH_FUSED_QKV, "a fused attn_qkv" },
		{ hp->fused_up, ARCH_FUSED_UP, "a fused ffn_up" },
		{ hp->n_swa > 0, ARCH_GEMMA | ARCH_OAI, "sliding windows" },
		{ hp->oai, ARCH_OAI, "gpt-oss's sinks and biases" },
	};

	if (!a)
		return loom_error_set(LOOM_E_INVAL, "llama: architecture %d",
				      (int)hp->arch);
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (need[i].used && !(a->flags & need[i].flag))
			return loom_error_set(LOOM_E_INVAL, "llama: %s has no "
					      "%s", a->name, need[i].what);
	return LOOM_OK;
}

int llama_hparams_check(const struct llama_hparams *hp)
{
	int64_t bs;
	int ret;

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
	if ((ret = check_rope(hp)) || (ret = check_arch(hp)))
		return ret;
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
	m->arch = model_arch_get(hp->arch);
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
	if (!ret)
		ret = model_create_tensors(m);
	loom_ctx_free(m->probe);
	m->probe = NULL;
	if (!ret)
		ret = model_alloc_weights(m);
	if (!ret)
		ret = model_fill_weights(m, seed);
	m->src = NULL;
	if (!ret)
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
	model_weights_free(m);
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
		/* Gemma's sliding layers are not scaled; gpt-oss's are. */
		*scale = hp->oai && hp->rope_scale > 0 ? hp->rope_scale : 1.0f;
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

/* The inputs of a batch of b->n_tokens: tokens, positions, the cache's
 * row ids, and the rope tables where the file has frequency factors. */
static void build_inputs(struct build *b)
{
	const struct llama_hparams *hp = b->hp;
	loom_ctx_t *c = b->c;
	int64_t t = b->n_tokens;
	struct loom_tensor *v_ids;

	b->tokens = blk_input(c, LOOM_TYPE_I32, 1, t, 1, "inp_tokens");
	b->pos = blk_input(c, LOOM_TYPE_I32, 1, t, 1, "inp_pos");
	b->kv_ids = blk_input(c, LOOM_TYPE_I32, 2, t, hp->n_head_kv,
			      "inp_kv_ids");
	v_ids = blk_input(c, LOOM_TYPE_I32, 2, t,
			  hp->head_dim * hp->n_head_kv, "inp_v_ids");
	b->v_ids = loom_reshape_3d(c, v_ids, t, hp->head_dim, hp->n_head_kv);
	if (hp->rope_freqs) {
		b->cos = blk_input(c, LOOM_TYPE_F32, 2, hp->head_dim / 2, t,
				   "inp_rope_cos");
		b->sin = blk_input(c, LOOM_TYPE_F32, 2, hp->head_dim / 2, t,
				   "inp_rope_sin");
	}
	/* The ids' own tensor, which the inputs set: the reshape is a
	 * view. */
	b->m->in_v_ids = v_ids;
}

/* Builds the graph of a batch of n_tokens over a cache window of n_kv in
 * a fresh context, by the architecture's builder, replacing the previous
 * graph. */
static int build_graph(struct llama_model *m, int n_tokens, int n_kv,
		       bool all_logits)
{
	struct build b = {
		.m = m, .hp = &m->hp, .n_tokens = n_tokens, .n_kv = n_kv,
		.all_logits = all_logits,
	};
	struct loom_tensor *x;
	int ret;

	drop_graph(m);
	ret = loom_ctx_new(0, &b.c);
	if (ret)
		return ret;
	build_inputs(&b);
	x = m->arch->build(&b);
	if (!x) {
		ret = loom_error_set(LOOM_E_INVAL, "llama: graph: %s",
				     loom_ctx_error(b.c));
		goto err_free;
	}
	loom_tensor_set_name(x, "logits");
	loom_tensor_set_flags(x, LOOM_TENSOR_OUTPUT);

	ret = loom_graph_new(b.c, &m->graph);
	if (!ret)
		ret = loom_graph_expand(m->graph, x);
	if (ret)
		goto err_free;
	m->gctx = b.c;
	m->g_n_tokens = n_tokens;
	m->g_n_kv = n_kv;
	m->g_all = all_logits;
	m->g_placed = false;
	m->in_tokens = b.tokens;
	m->in_pos = b.pos;
	m->in_kv_ids = b.kv_ids;
	m->in_mask = b.mask;
	m->in_mask_swa = b.mask_swa;
	m->in_cos = b.cos;
	m->in_sin = b.sin;
	m->out_logits = x;
	return LOOM_OK;

err_free:
	m->graph = NULL;
	loom_ctx_free(b.c);
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
	struct llama_model m = {
		.hp = *hp, .arch = model_arch_get(hp->arch), .src = src,
		.dev = dev,
	};
	bool ok = true;

	if (what && size)
		what[0] = '\0';
	if (llama_hparams_check(hp))
		return false;
	m.layers = calloc((size_t)hp->n_layer, sizeof(*m.layers));
	if (!m.layers || loom_ctx_new(0, &m.wctx) || model_create_tensors(&m) ||
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
