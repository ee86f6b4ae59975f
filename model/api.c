/* SPDX-License-Identifier: MIT */
/* api.c - the model library's public API (loom-model.h) over the
 * library's own parts: the file, its shape, tokenizer and chat template,
 * the decoder and the split policy.
 */
#include <loom/loom-model.h>

#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_CTX 2048

struct loom_model {
	struct gguf *g;
	struct llama_hparams hp;
	char arch[32];
	struct model_tokenizer *tok; /* NULL: tok_status, tok_msg say why */
	int tok_status;
	char tok_msg[256];
	int32_t *eog;
	int n_eog;
	struct model_split_state split;
	struct llama_model *lm; /* NULL until loaded */
};

/* The parameters, checked, with their defaults. */
static int read_params(const struct loom_model_params *p, int64_t *n_ctx,
		       enum loom_type *cache)
{
	*n_ctx = DEFAULT_CTX;
	*cache = LOOM_TYPE_F32;
	if (!p)
		return LOOM_OK;
	if (p->size < sizeof(*p))
		return loom_error_set(LOOM_E_INVAL, "loom_model_open: params "
				      "of %u bytes (%zu needed)",
				      (unsigned)p->size, sizeof(*p));
	if (p->n_ctx < 0 || p->n_ctx > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "loom_model_open: context "
				      "of %lld tokens", (long long)p->n_ctx);
	if (p->cache_type != LOOM_TYPE_F32 && p->cache_type != LOOM_TYPE_F16)
		return loom_error_set(LOOM_E_INVAL, "loom_model_open: cache "
				      "type %s (f32 or f16)",
				      loom_type_name(p->cache_type));
	if (p->n_ctx)
		*n_ctx = p->n_ctx;
	*cache = p->cache_type;
	return LOOM_OK;
}

int loom_model_open(const char *path, const struct loom_model_params *params,
		    loom_model_t **out)
{
	struct loom_model *m;
	enum loom_type cache;
	int64_t n_ctx;
	int ret;

	if (!path || !out)
		return loom_error_set(LOOM_E_INVAL, "loom_model_open: NULL "
				      "argument");
	*out = NULL;
	ret = read_params(params, &n_ctx, &cache);
	if (ret)
		return ret;
	m = calloc(1, sizeof(*m));
	if (!m)
		return loom_error_set(LOOM_E_NOMEM, "no memory");
	ret = gguf_open(path, &m->g);
	if (!ret)
		ret = model_hparams(m->g, n_ctx, cache, &m->hp, m->arch);
	if (!ret && (m->tok_status = model_tokenizer_new(m->g, &m->tok)))
		snprintf(m->tok_msg, sizeof(m->tok_msg), "%s",
			 loom_error_message());
	if (!ret)
		ret = model_eog_tokens(m->g, &m->eog, &m->n_eog);
	if (ret) {
		loom_model_free(m);
		return ret;
	}
	model_split_state_init(&m->hp, m->g, &m->split);
	*out = m;
	return LOOM_OK;
}

void loom_model_free(loom_model_t *m)
{
	if (!m)
		return;
	llama_model_free(m->lm);
	model_tokenizer_free(m->tok);
	free(m->eog);
	gguf_free(m->g);
	free(m);
}

const char *loom_model_arch(const loom_model_t *m)
{
	return m ? m->arch : NULL;
}

int64_t loom_model_n_vocab(const loom_model_t *m)
{
	return m ? m->hp.n_vocab : 0;
}

int64_t loom_model_n_ctx(const loom_model_t *m)
{
	return m ? m->hp.n_ctx : 0;
}

int loom_model_split_policy(loom_model_t *m, loom_split_fn *fn,
			    void **userdata)
{
	if (!m || !fn || !userdata)
		return loom_error_set(LOOM_E_INVAL, "loom_model_split_policy: "
				      "NULL argument");
	*fn = model_split;
	*userdata = &m->split;
	return LOOM_OK;
}

int64_t loom_model_n_layer(const loom_model_t *m)
{
	return m ? m->hp.n_layer : 0;
}

int64_t loom_model_n_ctx_train(const loom_model_t *m)
{
	char key[64];
	int64_t v;

	if (!m)
		return 0;
	snprintf(key, sizeof(key), "%s.context_length", m->arch);
	return gguf_get_int(m->g, key, &v) || v < 0 ? 0 : v;
}

int loom_model_set_n_ctx(loom_model_t *m, int64_t n)
{
	if (!m || m->lm || n < 1 || n > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "loom_model_set_n_ctx: %s",
				      !m ? "NULL model" : m->lm ?
				      "the model is loaded" : "bad length");
	m->hp.n_ctx = n;
	return LOOM_OK;
}

bool loom_model_dev_runs(const loom_model_t *m, loom_dev_t *dev, char *what,
			 size_t size)
{
	if (!m || !dev) {
		loom_error_set(LOOM_E_INVAL, "loom_model_dev_runs: NULL "
			       "argument");
		return false;
	}
	return model_dev_runs(m->g, &m->hp, dev, what, size);
}

int loom_model_load_with(loom_model_t *m, loom_dev_t *dev,
			 const struct loom_model_load_params *p)
{
	struct llama_placement pl = { .first = dev };

	if (!m || !dev)
		return loom_error_set(LOOM_E_INVAL, "loom_model_load: NULL "
				      "argument");
	if (p && p->size < sizeof(*p))
		return loom_error_set(LOOM_E_INVAL, "loom_model_load_with: "
				      "params of %u bytes (%zu needed)",
				      (unsigned)p->size, sizeof(*p));
	if (m->lm)
		return loom_error_set(LOOM_E_INVAL, "loom_model_load: the "
				      "model is loaded already");
	if (p) {
		pl.rest = p->rest;
		pl.n_first = p->n_first;
	}
	return model_load_placed(m->g, &m->hp, &pl, p ? p->progress : NULL,
				 p ? p->user : NULL, &m->lm);
}

int loom_model_load(loom_model_t *m, loom_dev_t *dev)
{
	return loom_model_load_with(m, dev, NULL);
}

int loom_model_tokenize(const loom_model_t *m, const char *text,
			unsigned flags, int32_t **ids, int *n)
{
	unsigned f = 0;

	if (!m || !text || !ids || !n)
		return loom_error_set(LOOM_E_INVAL, "loom_model_tokenize: NULL "
				      "argument");
	if (flags & ~(unsigned)(LOOM_MODEL_ADD_SPECIAL |
				LOOM_MODEL_PARSE_SPECIAL))
		return loom_error_set(LOOM_E_INVAL, "loom_model_tokenize: "
				      "flags 0x%x", flags);
	if (!m->tok)
		return loom_error_set(m->tok_status, "%s", m->tok_msg);
	if (flags & LOOM_MODEL_ADD_SPECIAL)
		f |= MODEL_TOKENIZE_ADD_SPECIAL;
	if (flags & LOOM_MODEL_PARSE_SPECIAL)
		f |= MODEL_TOKENIZE_PARSE_SPECIAL;
	return model_tokenize(m->tok, text, f, ids, n);
}

int loom_model_token_text(const loom_model_t *m, int32_t id, char *buf,
			  size_t size)
{
	if (!m || (!buf && size))
		return loom_error_set(LOOM_E_INVAL, "loom_model_token_text: "
				      "NULL argument");
	if (id < 0 || id >= m->hp.n_vocab)
		return loom_error_set(LOOM_E_RANGE, "loom_model_token_text: "
				      "token %d of %lld", (int)id,
				      (long long)m->hp.n_vocab);
	return model_token_text(m->g, id, buf, size);
}

bool loom_model_is_eog(const loom_model_t *m, int32_t id)
{
	for (int i = 0; m && i < m->n_eog; i++)
		if (m->eog[i] == id)
			return true;
	return false;
}

int loom_model_chat_family(const loom_model_t *m, const char *name,
			   const char **family)
{
	enum model_chat kind;
	int ret;

	if (!m || !family)
		return loom_error_set(LOOM_E_INVAL, "loom_model_chat_family: "
				      "NULL argument");
	ret = name ? model_chat_by_name(name, &kind) :
		     model_chat_detect(m->g, &kind);
	if (!ret)
		*family = model_chat_name(kind);
	return ret;
}

int loom_model_chat_turn(const loom_model_t *m, const char *tmpl,
			 const char *system, const char *user, bool first,
			 char **out)
{
	enum model_chat kind;
	int ret;

	if (!m || !user || !out)
		return loom_error_set(LOOM_E_INVAL, "loom_model_chat_turn: "
				      "NULL argument");
	ret = tmpl ? model_chat_by_name(tmpl, &kind) :
			 model_chat_detect(m->g, &kind);
	if (ret)
		return ret;
	return model_chat_turn(kind, system, user, first, out);
}

int loom_model_eval(loom_model_t *m, loom_backend_t *be,
		    const int32_t *tokens, int n_tokens, int n_past,
		    bool all_logits, float *logits)
{
	if (!m || !be)
		return loom_error_set(LOOM_E_INVAL, "loom_model_eval: NULL "
				      "argument");
	if (!m->lm)
		return loom_error_set(LOOM_E_INVAL, "loom_model_eval: the "
				      "model is not loaded");
	return llama_eval(m->lm, be, tokens, n_tokens, n_past, all_logits,
			  logits);
}

int loom_model_eval_sched(loom_model_t *m, loom_sched_t *s,
			  const int32_t *tokens, int n_tokens, int n_past,
			  bool all_logits, float *logits)
{
	if (!m || !s)
		return loom_error_set(LOOM_E_INVAL, "loom_model_eval_sched: "
				      "NULL argument");
	if (!m->lm)
		return loom_error_set(LOOM_E_INVAL, "loom_model_eval: the "
				      "model is not loaded");
	return llama_eval_sched(m->lm, s, tokens, n_tokens, n_past,
				all_logits, logits);
}

int loom_model_memory(const loom_model_t *m, struct loom_model_memory *out)
{
	const struct llama_model *lm = m ? m->lm : NULL;

	if (!lm || !out)
		return loom_error_set(LOOM_E_INVAL, "loom_model_memory: %s",
				      out && m ? "the model is not loaded" :
						 "NULL argument");
	out->weight_bytes = llama_model_weight_bytes(lm);
	out->cache_bytes = llama_model_cache_bytes(lm);
	out->compute_bytes = llama_model_compute_bytes(lm);
	out->held_bytes[0] = llama_model_held_bytes(lm, 0);
	out->held_bytes[1] = llama_model_held_bytes(lm, 1);
	out->weight_buffer = llama_model_weight_buffer(lm);
	out->matrix_buffer = llama_model_matrix_buffer(lm);
	out->compute_buffer = llama_model_compute_buffer(lm);
	out->rest = llama_model_rest_device(lm);
	return LOOM_OK;
}

int loom_model_reset(loom_model_t *m)
{
	if (!m)
		return loom_error_set(LOOM_E_INVAL, "loom_model_reset: NULL "
				      "argument");
	return m->lm ? llama_model_clear_cache(m->lm) : LOOM_OK;
}
