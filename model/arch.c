/* SPDX-License-Identifier: MIT */
/* arch.c - the architectures read from GGUF files: their metadata keys
 * and tensor names as llama.cpp writes them, mapped onto the decoder of
 * examples/llama; the weights uploaded from the mapping; and the reverse
 * (a model saved as a file).
 */
#include "model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom-backend.h>

#define MAX_DIM (1 << 24)

struct arch {
	const char *name;
	enum loom_rope_mode rope;
	bool qkv_bias, qk_norm, moe;
	/* Gemma: GELU gate, embeddings scaled by sqrt(n_embd), norms after
	 * attention and FFN, sliding-window layers. */
	bool gemma;
};

/* llama covers Llama 2/3, Mistral, TinyLlama and Mixtral (experts);
 * xverse is llama by another name, exaone llama with NEOX rope (both
 * also in llama.cpp's graphs). */
static const struct arch archs[] = {
	{ .name = "llama", .rope = LOOM_ROPE_NORMAL, .moe = true },
	{ .name = "qwen2", .rope = LOOM_ROPE_NEOX, .qkv_bias = true },
	{ .name = "qwen3", .rope = LOOM_ROPE_NEOX, .qk_norm = true },
	{ .name = "qwen3moe", .rope = LOOM_ROPE_NEOX, .qk_norm = true,
	  .moe = true },
	{ .name = "gemma3", .rope = LOOM_ROPE_NEOX, .qk_norm = true,
	  .gemma = true },
	{ .name = "xverse", .rope = LOOM_ROPE_NORMAL },
	{ .name = "exaone", .rope = LOOM_ROPE_NEOX },
};

#define N_ARCHS (sizeof(archs) / sizeof(archs[0]))

static const char *const arch_names[N_ARCHS + 1] = {
	"llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "xverse", "exaone",
	NULL,
};

const char *const *model_arch_names(void)
{
	return arch_names;
}

/* ------------------------------------------------------------------------
 * Metadata.
 */
struct keys {
	const struct gguf *g;
	const char *arch;
};

/* {arch}.what as an integer; def when absent (def < 0: required). */
static int key_int(struct keys *k, const char *what, int64_t def,
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

static int key_float(struct keys *k, const char *what, double def,
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

/* Positions scale linearly or not at all; other schemes are refused. */
static int rope_scaling(struct keys *k, struct llama_hparams *hp)
{
	char key[128], type[32];
	double factor;
	int ret;

	snprintf(key, sizeof(key), "%s.rope.scaling.type", k->arch);
	ret = gguf_get_string(k->g, key, type, sizeof(type));
	if (ret == LOOM_E_NOT_FOUND || (!ret && !strcmp(type, "none")))
		return LOOM_OK;
	if (ret)
		return ret;
	if (strcmp(type, "linear"))
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "gguf: rope scaling '%s' is not "
				      "supported (none and linear are)", type);
	ret = key_float(k, "rope.scaling.factor", 1.0, &factor);
	if (ret)
		return ret;
	if (!(factor > 0))
		return loom_error_set(LOOM_E_INVAL, "gguf: rope scaling "
				      "factor %g", factor);
	hp->rope_scale = (float)(1.0 / factor);
	return LOOM_OK;
}

/* Gemma's sliding window: layers slide but every pattern-th, at their own
 * rope base (llama.cpp's defaults where the file is silent).  The scores
 * are scaled by 1/sqrt(head_dim), but in the 62 layers of Gemma 3 27B by
 * 1/sqrt(n_embd / n_head), its query_pre_attn_scalar, a value its file
 * does not hold. */
static int gemma_keys(struct keys *k, struct llama_hparams *hp)
{
	double base, cap;
	int ret;

	hp->gelu = true;
	hp->embd_scale = true;
	hp->post_norms = true;
	if ((ret = key_int(k, "attention.sliding_window", 0, &hp->n_swa)) ||
	    (ret = key_int(k, "attention.sliding_window_pattern", 6,
			   &hp->swa_pattern)) ||
	    (ret = key_float(k, "rope.freq_base_swa", 10000.0, &base)) ||
	    (ret = key_float(k, "final_logit_softcapping", 0.0, &cap)))
		return ret;
	if (!(base > 0) || !isfinite((float)base))
		return loom_error_set(LOOM_E_INVAL, "gguf: %s.rope.freq_base_swa"
				      " is %g, not a positive number", k->arch,
				      base);
	if (cap != 0)
		return loom_error_set(LOOM_E_UNSUPPORTED, "gguf: final logit "
				      "softcapping (%s.final_logit_softcapping"
				      " %g) is not supported", k->arch, cap);
	if (hp->n_swa > MAX_DIM || hp->swa_pattern > MAX_DIM)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: sliding window "
				      "%lld or pattern %lld above %d", k->arch,
				      (long long)hp->n_swa,
				      (long long)hp->swa_pattern, MAX_DIM);
	hp->rope_base_swa = (float)base;
	if (hp->n_layer == 62)
		hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd /
						      hp->n_head));
	return LOOM_OK;
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

static const struct gguf_tensor *need_tensor(const struct gguf *g,
					     const char *name)
{
	const struct gguf_tensor *t = gguf_tensor_find(g, name);

	if (!t)
		loom_error_set(LOOM_E_INVAL, "gguf: tensor '%s' is missing",
			       name);
	return t;
}

int model_hparams(const struct gguf *g, int64_t n_ctx,
		  enum loom_type cache_type, struct llama_hparams *hp,
		  char arch_out[32])
{
	struct llama_hparams h = { 0 };
	const struct gguf_tensor *emb, *wq;
	const struct arch *a = NULL;
	struct keys k = { .g = g };
	char name[32];
	int64_t v, n_ff;
	double d;
	int ret;

	ret = gguf_get_string(g, "general.architecture", name, sizeof(name));
	if (ret == LOOM_E_NOT_FOUND)
		return loom_error_set(LOOM_E_INVAL, "gguf: no "
				      "general.architecture");
	if (ret)
		return ret;
	for (size_t i = 0; i < N_ARCHS; i++)
		if (!strcmp(archs[i].name, name))
			a = &archs[i];
	if (!a) {
		char list[256] = "";

		for (size_t i = 0; i < N_ARCHS; i++)
			snprintf(list + strlen(list), sizeof(list) - strlen(list),
				 "%s%s", i ? ", " : "", archs[i].name);
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "architecture '%s' is not supported "
				      "(%s are)", name, list);
	}
	k.arch = a->name;
	if (n_ctx < 1 || n_ctx > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "context of %lld tokens",
				      (long long)n_ctx);

	if ((ret = key_int(&k, "embedding_length", -1, &h.n_embd)) ||
	    (ret = key_int(&k, "block_count", -1, &h.n_layer)) ||
	    (ret = key_int(&k, "attention.head_count", -1, &h.n_head)) ||
	    (ret = key_int(&k, "attention.head_count_kv", h.n_head,
			   &h.n_head_kv)) ||
	    (ret = key_int(&k, "expert_count", 0, &h.n_expert)) ||
	    (ret = key_int(&k, "expert_used_count", 0, &h.n_expert_used)))
		return ret;
	if (!h.n_head || !h.n_layer || !h.n_embd || !h.n_head_kv)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: zero heads, "
				      "layers or embedding", a->name);
	/* Bounds far above any model keep every product of sizes below
	 * 2^63. */
	if (h.n_embd > MAX_DIM || h.n_head > MAX_DIM ||
	    h.n_head_kv > MAX_DIM || h.n_layer > MAX_DIM ||
	    h.n_expert > MAX_DIM || h.n_expert_used > MAX_DIM)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: a size above "
				      "%d (embedding %lld, heads %lld/%lld, "
				      "layers %lld, experts %lld/%lld)",
				      a->name, MAX_DIM, (long long)h.n_embd,
				      (long long)h.n_head,
				      (long long)h.n_head_kv,
				      (long long)h.n_layer,
				      (long long)h.n_expert,
				      (long long)h.n_expert_used);
	if (h.n_expert && !a->moe)
		return loom_error_set(LOOM_E_UNSUPPORTED, "architecture '%s' "
				      "with experts is not supported",
				      a->name);
	/* An expert's width: its own key (qwen3moe) or the FFN's (Mixtral,
	 * as llama). */
	ret = key_int(&k, "feed_forward_length", h.n_expert ? 0 : -1, &n_ff);
	if (!ret && h.n_expert)
		ret = key_int(&k, "expert_feed_forward_length", n_ff, &n_ff);
	if (ret)
		return ret;
	if (!n_ff)
		return ff_missing(&k);
	if (n_ff > MAX_DIM || h.head_dim > MAX_DIM)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: FFN width %lld "
				      "or head size %lld above %d", a->name,
				      (long long)n_ff, (long long)h.head_dim,
				      MAX_DIM);
	h.n_ff = n_ff;
	if ((ret = key_int(&k, "attention.key_length", h.n_embd / h.n_head,
			   &h.head_dim)) ||
	    (ret = key_int(&k, "attention.value_length", h.head_dim, &v)))
		return ret;
	if (v != h.head_dim)
		return loom_error_set(LOOM_E_UNSUPPORTED, "gguf: value length "
				      "%lld differs from key length %lld",
				      (long long)v, (long long)h.head_dim);
	if ((ret = key_int(&k, "rope.dimension_count", h.head_dim,
			   &h.n_rot)) ||
	    (ret = key_float(&k, "rope.freq_base", 10000.0, &d)))
		return ret;
	if (!(d > 0) || !isfinite((float)d))
		return loom_error_set(LOOM_E_INVAL, "gguf: %s.rope.freq_base "
				      "is %g, not a positive number", a->name,
				      d);
	h.rope_base = (float)d;
	ret = key_float(&k, "attention.layer_norm_rms_epsilon", -1, &d);
	if (ret)
		return ret;
	if (!(d > 0))
		return loom_error_set(LOOM_E_INVAL, "gguf: no positive "
				      "%s.attention.layer_norm_rms_epsilon",
				      a->name);
	h.eps = (float)d;
	ret = rope_scaling(&k, &h);
	if (!ret && a->gemma)
		ret = gemma_keys(&k, &h);
	if (ret)
		return ret;

	emb = need_tensor(g, "token_embd.weight");
	wq = need_tensor(g, "blk.0.attn_q.weight");
	if (!emb || !wq)
		return LOOM_E_INVAL;
	if (emb->n_dims != 2 || emb->ne[0] != h.n_embd)
		return loom_error_set(LOOM_E_INVAL, "gguf: tensor "
				      "'token_embd.weight' is not [%lld, "
				      "n_vocab]", (long long)h.n_embd);
	h.n_vocab = emb->ne[1];
	ret = gguf_tensor_loom_type(wq, &h.wtype);
	if (ret)
		return ret;
	h.n_ctx = n_ctx;
	h.rope_mode = a->rope;
	h.qkv_bias = a->qkv_bias;
	h.qk_norm = a->qk_norm;
	h.tied_output = !gguf_tensor_find(g, "output.weight");
	h.rope_freqs = gguf_tensor_find(g, "rope_freqs.weight") != NULL;
	h.cache_type = cache_type;
	/* The block sizes llama_hparams_check asks of the weight type hold
	 * per tensor: each tensor's type is checked against its shape by
	 * the reader. */
	{
		struct llama_hparams c = h;

		c.wtype = LOOM_TYPE_F32;
		ret = llama_hparams_check(&c);
		if (ret)
			return ret;
	}
	*hp = h;
	if (arch_out)
		snprintf(arch_out, 32, "%s", a->name);
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * Weights.
 */
struct source {
	const struct gguf *g;
	bool *used;
	model_progress_fn progress;
	void *user;
	size_t done, total;
};

static int src_type(void *user, const char *name, enum loom_type def,
		    enum loom_type *out)
{
	struct source *s = user;
	const struct gguf_tensor *t = need_tensor(s->g, name);

	(void)def;
	if (!t)
		return LOOM_E_INVAL;
	s->used[t - gguf_tensor_get(s->g, 0)] = true;
	return gguf_tensor_loom_type(t, out);
}

static int src_fill(void *user, struct loom_tensor *t)
{
	struct source *s = user;
	const struct gguf_tensor *f = gguf_tensor_find(s->g, t->name);
	int ret;

	if (!f)
		return loom_error_set(LOOM_E_INVAL, "gguf: tensor '%s' is "
				      "missing", t->name);
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		if (f->ne[d] != t->ne[d])
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: tensor '%s' is [%lld, "
					      "%lld, %lld], the model needs "
					      "[%lld, %lld, %lld]", t->name,
					      (long long)f->ne[0],
					      (long long)f->ne[1],
					      (long long)f->ne[2],
					      (long long)t->ne[0],
					      (long long)t->ne[1],
					      (long long)t->ne[2]);
	if (f->size != loom_tensor_n_bytes(t))
		return loom_error_set(LOOM_E_INVAL, "gguf: tensor '%s': size "
				      "mismatch", t->name);
	ret = gguf_check_read(s->g, f->data, (size_t)f->size);
	if (ret)
		return loom_error_set(ret, "tensor '%s': %s", t->name,
				      loom_error_message());
	ret = loom_tensor_set(t, f->data, 0, (size_t)f->size);
	if (ret)
		return loom_error_set(ret, "tensor '%s': %s", t->name,
				      loom_error_message());
	gguf_drop_pages(s->g, f->data, (size_t)f->size);
	s->done += (size_t)f->size;
	if (s->progress)
		s->progress(s->done, s->total, s->user);
	return LOOM_OK;
}

int model_load(const struct gguf *g, const struct llama_hparams *hp,
	       loom_dev_t *dev, struct llama_model **out)
{
	return model_load_progress(g, hp, dev, NULL, NULL, out);
}

int model_load_progress(const struct gguf *g, const struct llama_hparams *hp,
			loom_dev_t *dev, model_progress_fn progress,
			void *user, struct llama_model **out)
{
	struct llama_placement pl = { .first = dev };

	return model_load_placed(g, hp, &pl, progress, user, out);
}

int model_load_placed(const struct gguf *g, const struct llama_hparams *hp,
		      const struct llama_placement *pl,
		      model_progress_fn progress, void *user,
		      struct llama_model **out)
{
	struct source s = { .g = g, .progress = progress, .user = user };
	struct llama_source src = {
		.type = src_type, .fill = src_fill, .user = &s,
	};
	size_t n = gguf_n_tensors(g);
	int ret;

	for (size_t i = 0; i < n; i++)
		s.total += (size_t)gguf_tensor_get(g, i)->size;
	s.used = calloc(n ? n : 1, sizeof(*s.used));
	if (!s.used)
		return loom_error_set(LOOM_E_NOMEM, "no memory");
	/* A tensor the graph would not read means a model it would get
	 * wrong: refused. */
	ret = llama_model_load_placed(hp, pl, &src, out);
	for (size_t i = 0; i < n && !ret; i++) {
		if (s.used[i])
			continue;
		ret = loom_error_set(LOOM_E_UNSUPPORTED,
				     "gguf: tensor '%s' is not used by this "
				     "architecture",
				     gguf_tensor_get(g, i)->name);
		llama_model_free(*out);
		*out = NULL;
	}
	free(s.used);
	return ret;
}

bool model_dev_runs(const struct gguf *g, const struct llama_hparams *hp,
		    loom_dev_t *dev, char *what, size_t size)
{
	struct source s = { .g = g };
	struct llama_source src = {
		.type = src_type, .fill = src_fill, .user = &s,
	};
	size_t n = gguf_n_tensors(g);
	bool ok;

	s.used = calloc(n ? n : 1, sizeof(*s.used));
	if (!s.used)
		return false;
	ok = llama_dev_runs(hp, &src, dev, what, size);
	free(s.used);
	return ok;
}

int model_split(const struct loom_tensor *t, struct loom_split *out,
		void *userdata)
{
	const struct loom_meta_model *m = userdata;
	int64_t hd = m && m->head_dim > 0 ? m->head_dim : 1;
	const char *dot = t ? strrchr(t->name, '.') : NULL;
	struct loom_split w;

	if (!dot || strcmp(dot, ".bias"))
		return loom_meta_split_default(t, out, userdata);
	memset(out, 0, sizeof(*out));
	out->state = LOOM_SPLIT_DIM0;
	out->granularity = hd;
	if (strstr(t->name, "attn_q.") && m && m->n_head_kv > 0)
		out->granularity = hd * (m->n_head / m->n_head_kv);
	/* A q, k or v bias follows its projection: the policy's unit (whole
	 * blocks of heads), or whole where the projection is (one KV head). */
	if (strstr(t->name, "attn_") && !strstr(t->name, "norm") &&
	    loom_meta_split_default(t, &w, userdata) == LOOM_OK) {
		if (w.state == LOOM_SPLIT_DIM1)
			out->granularity = w.granularity;
		else if (w.state == LOOM_SPLIT_MIRRORED)
			out->state = LOOM_SPLIT_MIRRORED;
	}
	return LOOM_OK;
}
