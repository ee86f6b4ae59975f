/* SPDX-License-Identifier: MIT */
/* test-model.c - models read from GGUF files: a synthetic decoder of each
 * architecture and weight type saved with the writer, loaded back, its
 * logits checked against the double-precision reference on the same
 * weights, from one batch and a token at a time; meta devices over CPU
 * partitions against one device; files the loader must refuse, each with
 * its message.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <loom/loom-backend.h>

#include "../model/model.h"

#define N_PROMPT 6
#define N_GEN 4

static char *tmpdir;

enum arch { LLAMA, QWEN2, QWEN3, QWEN3MOE, MIXTRAL, GEMMA3, EXAONE, PHI3 };

struct config {
	enum arch arch;
	enum loom_type type;
	bool tied;
	double max_nmse;
	bool freqs; /* rope_freqs.weight */
};

/* Shapes no partition count divides: 3 KV heads, an FFN of 96. */
static void shape(enum arch a, enum loom_type type, bool tied,
		  struct llama_hparams *hp)
{
	g_assert_cmpint(llama_hparams_preset("tiny", hp), ==, LOOM_OK);
	hp->n_vocab = 300;
	hp->n_embd = 96;
	hp->n_head = 6;
	hp->n_head_kv = 3;
	hp->head_dim = 16;
	hp->n_ff = 96;
	hp->n_layer = 2;
	hp->n_ctx = 32;
	hp->rope_base = 5000.0f;
	hp->eps = 1e-6f;
	hp->wtype = type;
	hp->tied_output = tied;
	hp->rope_mode = a == LLAMA || a == MIXTRAL ? LOOM_ROPE_NORMAL :
						     LOOM_ROPE_NEOX;
	hp->qkv_bias = a == QWEN2;
	hp->qk_norm = a == QWEN3 || a == QWEN3MOE || a == GEMMA3;
	hp->arch = a == QWEN2 ? MODEL_ARCH_QWEN2 :
		   a == QWEN3 ? MODEL_ARCH_QWEN3 :
		   a == QWEN3MOE ? MODEL_ARCH_QWEN3MOE :
		   a == GEMMA3 ? MODEL_ARCH_GEMMA3 :
		   a == EXAONE ? MODEL_ARCH_EXAONE :
		   a == PHI3 ? MODEL_ARCH_PHI3 : MODEL_ARCH_LLAMA;
	/* Phi-3: q, k, v in one matrix, gate and up in another. */
	hp->fused_qkv = hp->fused_up = a == PHI3;
	/* Gemma: a window of 3 in layer 0 and the whole context in layer
	 * 1, whose rope base is the other one. */
	if (a == GEMMA3) {
		hp->gelu = true;
		hp->embd_scale = true;
		hp->post_norms = true;
		hp->n_swa = 3;
		hp->swa_pattern = 2;
		hp->rope_base_swa = 10000.0f;
	}
	if (a == QWEN3MOE || a == MIXTRAL) {
		hp->n_expert = 4;
		hp->n_expert_used = 2;
		hp->n_ff = 64;
	}
	/* K-quant rows are whole 256-element blocks: an embedding of one
	 * block, an FFN of three, which neither two nor three devices split
	 * evenly by blocks, and 4 KV heads whose query groups (4 heads of
	 * 64) are a block each in attn_output's rows, which three devices
	 * do not split evenly either. */
	if (loom_type_block_size(type) == 256) {
		hp->n_embd = 256;
		hp->n_head = 16;
		hp->n_head_kv = 4;
		hp->head_dim = 64;
		hp->n_ff = 768;
	}
}

static double nmse(const double *ref, const float *x, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i] - ref[i];

		num += d * d;
		den += ref[i] * ref[i];
	}
	return den > 0 ? num / den : num;
}

static double nmse_f(const float *ref, const float *x, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i] - ref[i];

		num += d * d;
		den += (double)ref[i] * ref[i];
	}
	return den > 0 ? num / den : num;
}

/* Saves a synthetic model of hp as a file; returns its path (g_free). */
static char *save_model(const struct llama_hparams *hp, const char *name)
{
	char *path = g_build_filename(tmpdir, name, NULL);
	struct llama_model *m;

	if (llama_model_new(hp, loom_dev_by_name("cpu0"), 11, &m))
		g_error("synthetic model: %s", loom_error_message());
	if (model_save(m, path))
		g_error("save: %s", loom_error_message());
	llama_model_free(m);
	return path;
}

static struct llama_model *load(const char *path, loom_dev_t *dev,
				enum loom_type cache, char arch[32])
{
	struct llama_hparams hp;
	struct llama_model *m;
	struct gguf *g;

	if (gguf_open(path, &g))
		g_error("open: %s", loom_error_message());
	if (model_hparams(g, 32, cache, &hp, arch))
		g_error("hparams: %s", loom_error_message());
	if (model_load(g, &hp, dev, &m))
		g_error("load on %s: %s", loom_dev_name(dev),
			loom_error_message());
	gguf_free(g);
	return m;
}

/* Mixtral is llama with experts. */
static const char *const arch_names[] = { "llama", "qwen2", "qwen3",
					  "qwen3moe", "llama", "gemma3",
					  "exaone", "phi3" };

static void test_reference(gconstpointer data)
{
	const struct config *c = data;
	struct llama_hparams hp;
	struct llama_model *m;
	loom_dev_t *dev = loom_dev_by_name("cpu0");
	loom_backend_t *be;
	int32_t tokens[N_PROMPT] = { 1, 77, 299, 5, 140, 3 };
	size_t n = (size_t)300 * N_PROMPT;
	float *got = g_new(float, n);
	double *ref = g_new(double, n), e;
	/* Where the batch of half the prompt puts its last logits. */
	size_t h = (size_t)300 * (N_PROMPT / 2 - 1);
	char *path, arch[32];

	shape(c->arch, c->type, c->tied, &hp);
	hp.rope_freqs = c->freqs;
	path = save_model(&hp, "ref.gguf");
	m = load(path, dev, LOOM_TYPE_F32, arch);
	g_assert_cmpstr(arch, ==, arch_names[c->arch]);
	g_assert_true(llama_model_hparams(m)->tied_output == c->tied);
	g_assert_true(llama_model_hparams(m)->rope_freqs == c->freqs);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	if (llama_eval(m, be, tokens, N_PROMPT, 0, true, got))
		g_error("eval: %s", loom_error_message());
	g_assert_cmpint(llama_reference_eval(m, tokens, N_PROMPT, ref), ==, 0);
	e = nmse(ref, got, n);
	g_test_message("%s %s%s: nmse %.3g", arch, loom_type_name(c->type),
		       c->tied ? " tied" : "", e);
	g_assert_cmpfloat(e, <=, c->max_nmse);

	/* The same logits again through the cache: half the prompt as a
	 * batch that asks for its last token's logits alone (the last
	 * layer's FFN runs on that token only), then a token at a time,
	 * each step reading the keys and values the earlier ones stored. */
	memset(got, 0, n * sizeof(*got));
	g_assert_cmpint(llama_model_clear_cache(m), ==, LOOM_OK);
	if (llama_eval(m, be, tokens, N_PROMPT / 2, 0, false, got + h))
		g_error("eval: %s", loom_error_message());
	for (int i = N_PROMPT / 2; i < N_PROMPT; i++)
		if (llama_eval(m, be, &tokens[i], 1, i, false,
			       got + (size_t)300 * i))
			g_error("decode: %s", loom_error_message());
	e = nmse(ref + h, got + h, n - h);
	g_test_message("%s %s%s, a token at a time: nmse %.3g", arch,
		       loom_type_name(c->type), c->tied ? " tied" : "", e);
	g_assert_cmpfloat(e, <=, c->max_nmse);
	loom_backend_free(be);
	llama_model_free(m);
	g_unlink(path);
	g_free(path);
	g_free(ref);
	g_free(got);
}

/* Prompt logits then N_GEN decode steps: each step's greedy choice goes
 * to toks and is the next token decoded, unless follow gives the tokens
 * to decode (so that two devices' logits compare step by step). */
static float *run(struct llama_model *m, loom_dev_t *dev, int32_t *toks,
		  const int32_t *follow)
{
	size_t nv = (size_t)llama_model_hparams(m)->n_vocab;
	float *out = g_new0(float, nv * (N_PROMPT + N_GEN));
	int32_t prompt[N_PROMPT] = { 2, 9, 250, 31, 4, 100 };
	loom_backend_t *be;

	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	if (llama_eval(m, be, prompt, N_PROMPT, 0, true, out))
		g_error("eval on %s: %s", loom_dev_name(dev),
			loom_error_message());
	for (int s = 0; s < N_GEN; s++) {
		const float *last = out + nv * (N_PROMPT - 1 + s);
		int32_t best = 0;

		for (size_t i = 1; i < nv; i++)
			if (last[i] > last[best])
				best = (int32_t)i;
		toks[s] = best;
		if (follow)
			best = follow[s];
		if (llama_eval(m, be, &best, 1, N_PROMPT + s, false,
			       out + nv * (N_PROMPT + s)))
			g_error("decode on %s: %s", loom_dev_name(dev),
				loom_error_message());
	}
	loom_backend_free(be);
	return out;
}

struct meta_config {
	enum arch arch;
	enum loom_type cache;
	int n;
	const float *ratios;
	enum loom_type type; /* of the weights */
	bool freqs;          /* rope_freqs.weight */
};

static void test_meta(gconstpointer data)
{
	const struct meta_config *c = data;
	struct llama_hparams hp;
	static struct model_split_state mm;
	struct loom_meta_opts opts = { .size = sizeof(opts) };
	loom_dev_t *devs[3], *meta;
	struct llama_model *m;
	int32_t t1[N_GEN], t2[N_GEN];
	float *ref, *got;
	size_t n;
	char *path;
	double e, max = 1e-6;

	/* Quantized weights multiply activations that the CPU rounds to
	 * int8 per 32 values.  A split adds its partial sums in another
	 * order than one device does; now and then the last-bit difference
	 * moves a value across a rounding edge (an int8 step, an F16 cache
	 * entry, the router's top k), which costs up to half a step there
	 * and spreads from there.  The two devices then differ by a share of
	 * the rounding error, not by the order of a sum, so they must agree
	 * within that error: the reference tests' bound for these types.
	 * That the products agree to the order of the sums is test-meta's
	 * quant-mul-mat. */
	if (loom_type_block_size(c->type) > 1)
		max = 1e-3;
	shape(c->arch, c->type, false, &hp);
	hp.cache_type = c->cache;
	hp.rope_freqs = c->freqs;
	path = save_model(&hp, "meta.gguf");
	model_split_state_init(&hp, NULL, &mm);
	for (int j = 0; j < c->n; j++) {
		char name[8];

		g_snprintf(name, sizeof(name), "cpu%d", j);
		devs[j] = loom_dev_by_name(name);
	}
	opts.ratios = c->ratios;
	if (loom_meta_dev_new(devs, (size_t)c->n, model_split, &mm, &opts,
			      &meta))
		g_error("meta: %s", loom_error_message());

	m = load(path, devs[0], c->cache, NULL);
	ref = run(m, devs[0], t1, NULL);
	llama_model_free(m);
	m = load(path, meta, c->cache, NULL);
	got = run(m, meta, t2, t1);
	llama_model_free(m);
	n = (size_t)hp.n_vocab * (N_PROMPT + N_GEN);
	e = nmse_f(ref, got, n);
	g_test_message("%s over %d: nmse %.3g", arch_names[c->arch], c->n, e);
	g_assert_cmpfloat(e, <=, max);
	/* The same greedy choices, or where a near tie lets the two differ,
	 * one the single device rates within the allowed error of its own. */
	for (int s = 0; s < N_GEN; s++) {
		const float *last = ref + (size_t)hp.n_vocab *
						  (N_PROMPT - 1 + s);
		double sq = 0;

		if (t1[s] == t2[s])
			continue;
		for (int64_t i = 0; i < hp.n_vocab; i++)
			sq += (double)last[i] * last[i];
		g_test_message("step %d: %d, %d over one device", s, t2[s],
			       t1[s]);
		g_assert_cmpfloat(last[t1[s]] - last[t2[s]], <=,
				  2 * sqrt(max * sq / (double)hp.n_vocab));
	}
	g_unlink(path);
	g_free(path);
	g_free(ref);
	g_free(got);
}

/* ------------------------------------------------------------------------
 * Refusals: a saved file rewritten with one change.
 */
enum edit { E_NONE, E_ARCH, E_DROP, E_ROPE_FREQS, E_TYPE, E_SHAPE, E_EXTRA,
	    E_SCALING, E_YARN_LOG, E_HEADS, E_ZERO_FREQ, E_FF_ZERO, E_ROPE_ZERO,
	    E_ROPE_NAN, E_LONGROPE, E_TEMP,
	    /* Of a gemma3 file; those above of a llama one. */
	    E_SOFTCAP, E_SWA_BASE };

/* src with one edit, its architecture renamed to arch unless NULL. */
static char *rewrite(const char *src, enum edit edit, const char *arch)
{
	struct gguf *g;
	struct gguf_writer *w;
	char *path = g_build_filename(tmpdir, "edited.gguf", NULL);
	static const uint8_t zeros[4096];

	g_assert_cmpint(gguf_open(src, &g), ==, LOOM_OK);
	g_assert_cmpint(gguf_writer_new(&w), ==, LOOM_OK);
	for (size_t i = 0; i < gguf_n_kv(g); i++) {
		const struct gguf_kv *kv = gguf_kv_get(g, i);
		bool str = kv->type == GGUF_TYPE_STRING ||
			   (kv->type == GGUF_TYPE_ARRAY &&
			    kv->arr_type == GGUF_TYPE_STRING);
		char **s = NULL;

		/* The writer's keys of an architecture are numbers. */
		if (arch && g_str_has_prefix(kv->key, "llama.")) {
			char *key = g_strconcat(arch, kv->key + 5, NULL);

			gguf_writer_add(w, key, kv->type, kv->data);
			g_free(key);
			continue;
		}
		if (str) {
			s = g_new0(char *, kv->n + 1);
			for (uint64_t k = 0; k < kv->n; k++)
				s[k] = g_strndup(kv->strs[k].s,
						 kv->strs[k].n);
		}
		if ((arch || edit == E_ARCH) &&
		    !strcmp(kv->key, "general.architecture"))
			gguf_writer_add_str(w, kv->key, arch ? arch : "gpt2");
		else if (edit == E_HEADS &&
			 !strcmp(kv->key, "llama.attention.head_count"))
			gguf_writer_add(w, kv->key, GGUF_TYPE_UINT64,
					&(uint64_t){ 1ull << 40 });
		else if (edit == E_FF_ZERO &&
			 !strcmp(kv->key, "llama.feed_forward_length"))
			gguf_writer_add_u32(w, kv->key, 0);
		else if ((edit == E_ROPE_ZERO || edit == E_ROPE_NAN) &&
			 !strcmp(kv->key, "llama.rope.freq_base"))
			gguf_writer_add_f32(w, kv->key,
					    edit == E_ROPE_ZERO ? 0.0f : NAN);
		else if (edit == E_SWA_BASE &&
			 !strcmp(kv->key, "gemma3.rope.freq_base_swa"))
			gguf_writer_add_f32(w, kv->key, -1.0f);
		else if (kv->type == GGUF_TYPE_ARRAY)
			gguf_writer_add_array(w, kv->key, kv->arr_type, kv->n,
					      str ? (const void *)s : kv->data);
		else
			gguf_writer_add(w, kv->key, kv->type,
					str ? (const void *)s[0] : kv->data);
		g_strfreev(s);
	}
	if (edit == E_SCALING)
		gguf_writer_add_str(w, "llama.rope.scaling.type", "longrope");
	if (edit == E_YARN_LOG) {
		gguf_writer_add_str(w, "llama.rope.scaling.type", "yarn");
		gguf_writer_add_f32(w, "llama.rope.scaling.yarn_log_multiplier",
				    0.1f);
	}
	if (edit == E_SOFTCAP)
		gguf_writer_add_f32(w, "gemma3.final_logit_softcapping", 30.0f);
	if (edit == E_TEMP)
		gguf_writer_add_f32(w, "mistral3.attention.temperature_scale",
				    0.1f);
	for (size_t i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor_get(g, i);
		bool it = !strcmp(t->name, "blk.1.ffn_up.weight");

		if (edit == E_DROP && it)
			continue;
		if (edit == E_TYPE && it)
			gguf_writer_add_tensor(w, t->name, 9, t->n_dims, t->ne,
					       NULL);
		else if (edit == E_SHAPE && it)
			gguf_writer_add_tensor(w, t->name, t->type, t->n_dims,
					       (int64_t[]){ t->ne[1], t->ne[0] },
					       t->data);
		else
			gguf_writer_add_tensor(w, t->name, t->type, t->n_dims,
					       t->ne, t->data);
	}
	if (edit == E_ROPE_FREQS)
		gguf_writer_add_tensor(w, "rope_freqs.weight", 0, 1,
				       (int64_t[]){ 4 }, zeros);
	if (edit == E_ZERO_FREQ)
		gguf_writer_add_tensor(w, "rope_freqs.weight", 0, 1,
				       (int64_t[]){ 8 }, zeros);
	if (edit == E_EXTRA)
		gguf_writer_add_tensor(w, "blk.0.attn_q.bias", 0, 1,
				       (int64_t[]){ 96 }, zeros);
	if (edit == E_LONGROPE)
		gguf_writer_add_tensor(w, "rope_factors_long.weight", 0, 1,
				       (int64_t[]){ 8 }, zeros);
	g_assert_cmpint(gguf_writer_save(w, path), ==, LOOM_OK);
	gguf_writer_free(w);
	gguf_free(g);
	return path;
}

static void test_refused(void)
{
	static const struct {
		enum edit edit;
		int status;
		const char *msg;
		const char *arch; /* the llama file renamed */
	} cases[] = {
		{ E_ARCH, LOOM_E_UNSUPPORTED, "architecture 'gpt2' is not "
		  "supported (llama, qwen2, qwen3, qwen3moe, gemma3, xverse, "
		  "exaone, phi3, internlm2, mistral3, gpt-oss are)", NULL },
		{ E_DROP, LOOM_E_INVAL, "gguf: tensor 'blk.1.ffn_up.weight' is "
		  "missing", NULL },
		{ E_ROPE_FREQS, LOOM_E_INVAL, "gguf: tensor 'rope_freqs.weight' "
		  "is [4, 1, 1], the model needs [8, 1, 1]", NULL },
		{ E_ZERO_FREQ, LOOM_E_INVAL, "llama: rope_freqs.weight: factor 0 "
		  "is 0, not a positive number", NULL },
		{ E_TYPE, LOOM_E_UNSUPPORTED, "tensor 'blk.1.ffn_up.weight': "
		  "type q8_1 is not supported by Loom", NULL },
		{ E_SHAPE, LOOM_E_INVAL, "gguf: tensor 'blk.1.ffn_up.weight' "
		  "is [128, 96, 1], the model needs [96, 128, 1]", NULL },
		{ E_EXTRA, LOOM_E_UNSUPPORTED, "gguf: tensor "
		  "'blk.0.attn_q.bias' is not used by this architecture", NULL },
		{ E_SCALING, LOOM_E_UNSUPPORTED, "gguf: rope scaling 'longrope' "
		  "is not supported (none, linear and yarn are)", NULL },
		{ E_YARN_LOG, LOOM_E_UNSUPPORTED, "gguf: llama: YaRN's log "
		  "multiplier (0.1) is not supported", NULL },
		{ E_HEADS, LOOM_E_INVAL, "gguf: llama: a size above 16777216 "
		  "(embedding 96, heads 1099511627776/3, layers 2, experts "
		  "0/0)", NULL },
		{ E_FF_ZERO, LOOM_E_INVAL, "gguf: llama.feed_forward_length "
		  "is 0", NULL },
		{ E_ROPE_ZERO, LOOM_E_INVAL, "gguf: llama.rope.freq_base is 0, "
		  "not a positive number", NULL },
		{ E_ROPE_NAN, LOOM_E_INVAL, "gguf: llama.rope.freq_base is nan, "
		  "not a positive number", NULL },
		{ E_SOFTCAP, LOOM_E_UNSUPPORTED, "gguf: final logit softcapping "
		  "(gemma3.final_logit_softcapping 30) is not supported", NULL },
		{ E_SWA_BASE, LOOM_E_INVAL, "gguf: gemma3.rope.freq_base_swa is "
		  "-1, not a positive number", NULL },
		{ E_LONGROPE, LOOM_E_UNSUPPORTED, "gguf: phi3: long-rope scaling "
		  "(tensor 'rope_factors_long.weight') is not supported",
		  "phi3" },
		{ E_TEMP, LOOM_E_UNSUPPORTED, "gguf: mistral3: attention "
		  "temperature scaling (mistral3.attention.temperature_scale "
		  "0.1) is not supported", "mistral3" },
	};
	struct llama_hparams hp;
	loom_dev_t *dev = loom_dev_by_name("cpu0");
	char *src[2];

	for (int gemma = 0; gemma < 2; gemma++) {
		shape(gemma ? GEMMA3 : LLAMA, LOOM_TYPE_F32, false, &hp);
		hp.n_ff = 128; /* so that a transposed ffn_up differs */
		src[gemma] = save_model(&hp, gemma ? "src-gemma3.gguf" :
						     "src.gguf");
	}
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		char *path = rewrite(src[cases[i].edit >= E_SOFTCAP],
				     cases[i].edit, cases[i].arch);
		struct llama_hparams h;
		struct llama_model *m = NULL;
		struct gguf *g;
		int ret;

		g_assert_cmpint(gguf_open(path, &g), ==, LOOM_OK);
		ret = model_hparams(g, 16, LOOM_TYPE_F32, &h, NULL);
		if (!ret)
			ret = model_load(g, &h, dev, &m);
		g_assert_null(m);
		g_assert_cmpint(ret, ==, cases[i].status);
		g_assert_cmpstr(loom_error_message(), ==, cases[i].msg);
		gguf_free(g);
		g_unlink(path);
		g_free(path);
	}
	for (int gemma = 0; gemma < 2; gemma++) {
		g_unlink(src[gemma]);
		g_free(src[gemma]);
	}
}

/* The architectures that are llama by another name: a llama file renamed
 * gives the same logits. */
static void test_renamed(gconstpointer data)
{
	const char *name = data;
	struct llama_hparams hp;
	loom_dev_t *dev = loom_dev_by_name("cpu0");
	int32_t tokens[N_PROMPT] = { 1, 77, 299, 5, 140, 3 };
	size_t n = (size_t)300 * N_PROMPT;
	float *logits[2] = { g_new(float, n), g_new(float, n) };
	char *path[2], arch[32];
	loom_backend_t *be;

	shape(LLAMA, LOOM_TYPE_F32, false, &hp);
	path[0] = save_model(&hp, "llama.gguf");
	path[1] = rewrite(path[0], E_NONE, name);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	for (int i = 0; i < 2; i++) {
		struct llama_model *m = load(path[i], dev, LOOM_TYPE_F32, arch);

		g_assert_cmpstr(arch, ==, i ? name : "llama");
		if (llama_eval(m, be, tokens, N_PROMPT, 0, true, logits[i]))
			g_error("eval: %s", loom_error_message());
		llama_model_free(m);
		g_unlink(path[i]);
		g_free(path[i]);
	}
	g_assert_cmpmem(logits[0], n * sizeof(float), logits[1],
			n * sizeof(float));
	loom_backend_free(be);
	g_free(logits[0]);
	g_free(logits[1]);
}

/* A model file cut short after it was opened: its weights' pages are
 * gone, and loading says so instead of dying of SIGBUS. */
static void test_changed(void)
{
	struct llama_hparams hp, h;
	struct llama_model *m = NULL;
	struct gguf *g;
	char *path;

	shape(LLAMA, LOOM_TYPE_F32, false, &hp);
	path = save_model(&hp, "changed.gguf");
	g_assert_cmpint(gguf_open(path, &g), ==, LOOM_OK);
	g_assert_cmpint(model_hparams(g, 16, LOOM_TYPE_F32, &h, NULL), ==,
			LOOM_OK);
	g_assert_cmpint(truncate(path, (off_t)gguf_data_offset(g)), ==, 0);
	g_assert_cmpint(model_load(g, &h, loom_dev_by_name("cpu0"), &m), ==,
			LOOM_E_IO);
	g_assert_null(m);
	g_assert_true(g_str_has_suffix(loom_error_message(),
				       "changed.gguf: the file changed while "
				       "in use"));
	gguf_free(g);
	g_unlink(path);
	g_free(path);
}

int main(int argc, char **argv)
{
	static const struct config refs[] = {
		{ LLAMA, LOOM_TYPE_F32, false, 1e-6, false },
		{ LLAMA, LOOM_TYPE_F32, true, 1e-6, false },
		{ LLAMA, LOOM_TYPE_F16, false, 1e-4, false },
		{ LLAMA, LOOM_TYPE_BF16, false, 1e-3, false },
		{ LLAMA, LOOM_TYPE_Q8_0, false, 1e-3, false },
		{ QWEN2, LOOM_TYPE_F32, false, 1e-6, false },
		{ QWEN2, LOOM_TYPE_Q8_0, true, 1e-3, false },
		{ QWEN3, LOOM_TYPE_F32, true, 1e-6, false },
		{ QWEN3, LOOM_TYPE_F16, false, 1e-4, false },
		{ QWEN3MOE, LOOM_TYPE_F32, false, 1e-6, false },
		{ QWEN3MOE, LOOM_TYPE_BF16, false, 1e-3, false },
		{ MIXTRAL, LOOM_TYPE_F32, false, 1e-6, false },
		{ LLAMA, LOOM_TYPE_F32, false, 1e-6, true },
		{ LLAMA, LOOM_TYPE_Q8_0, true, 1e-3, true },
		{ QWEN3, LOOM_TYPE_F32, false, 1e-6, true },
		{ LLAMA, LOOM_TYPE_Q4_0, false, 1e-3, false },
		{ LLAMA, LOOM_TYPE_Q4_K, false, 1e-3, false },
		{ QWEN2, LOOM_TYPE_Q5_K, true, 1e-3, false },
		{ QWEN3, LOOM_TYPE_Q6_K, false, 1e-3, false },
		{ QWEN3MOE, LOOM_TYPE_Q4_K, false, 1e-3, false },
		{ QWEN3MOE, LOOM_TYPE_Q6_K, false, 1e-3, false },
		{ MIXTRAL, LOOM_TYPE_Q5_K, false, 1e-3, false },
		{ GEMMA3, LOOM_TYPE_F32, true, 1e-6, false },
		{ GEMMA3, LOOM_TYPE_F16, false, 1e-4, false },
		{ GEMMA3, LOOM_TYPE_Q8_0, true, 1e-3, false },
		{ GEMMA3, LOOM_TYPE_Q4_K, true, 1e-3, false },
		{ EXAONE, LOOM_TYPE_F32, false, 1e-6, false },
		{ EXAONE, LOOM_TYPE_Q8_0, false, 1e-3, true },
		{ PHI3, LOOM_TYPE_F32, false, 1e-6, false },
		{ PHI3, LOOM_TYPE_F16, true, 1e-4, false },
		{ PHI3, LOOM_TYPE_Q8_0, false, 1e-3, false },
		{ PHI3, LOOM_TYPE_Q4_K, false, 1e-3, false },
	};
	static const float uneven2[2] = { 0.7f, 0.3f };
	static const float uneven3[3] = { 0.5f, 0.3f, 0.2f };
	static const struct meta_config metas[] = {
		{ LLAMA, LOOM_TYPE_F32, 2, NULL, LOOM_TYPE_F32, false },
		{ LLAMA, LOOM_TYPE_F16, 2, uneven2, LOOM_TYPE_F32, false },
		{ LLAMA, LOOM_TYPE_F32, 3, NULL, LOOM_TYPE_F32, false },
		{ QWEN2, LOOM_TYPE_F32, 3, uneven3, LOOM_TYPE_F32, false },
		{ QWEN3, LOOM_TYPE_F32, 2, NULL, LOOM_TYPE_F32, false },
		{ QWEN3MOE, LOOM_TYPE_F32, 3, NULL, LOOM_TYPE_F32, false },
		/* An FFN of three Q8_0 blocks over two and three devices. */
		{ LLAMA, LOOM_TYPE_F32, 2, NULL, LOOM_TYPE_Q8_0, false },
		{ QWEN2, LOOM_TYPE_F16, 3, uneven3, LOOM_TYPE_Q8_0, false },
		/* An FFN of three K-quant blocks (768) over two. */
		{ LLAMA, LOOM_TYPE_F32, 2, NULL, LOOM_TYPE_Q4_K, false },
		{ QWEN2, LOOM_TYPE_F32, 2, uneven2, LOOM_TYPE_Q4_0, false },
		/* K-quants over three, with an F16 cache and with experts. */
		{ QWEN3, LOOM_TYPE_F16, 3, NULL, LOOM_TYPE_Q6_K, false },
		{ QWEN3MOE, LOOM_TYPE_F32, 3, uneven3, LOOM_TYPE_Q5_K, false },
		/* Rope from tables, split by heads. */
		{ LLAMA, LOOM_TYPE_F32, 3, uneven3, LOOM_TYPE_F32, true },
		{ QWEN3, LOOM_TYPE_F32, 2, NULL, LOOM_TYPE_F32, true },
		/* Two masks, two rope bases, the extra norms. */
		{ GEMMA3, LOOM_TYPE_F32, 2, NULL, LOOM_TYPE_F32, false },
		{ GEMMA3, LOOM_TYPE_F16, 3, uneven3, LOOM_TYPE_F32, false },
		{ GEMMA3, LOOM_TYPE_F32, 3, NULL, LOOM_TYPE_Q8_0, false },
		{ EXAONE, LOOM_TYPE_F32, 2, uneven2, LOOM_TYPE_F32, false },
		/* Fused q/k/v and gate/up, cut in segments. */
		{ PHI3, LOOM_TYPE_F32, 2, NULL, LOOM_TYPE_F32, false },
		{ PHI3, LOOM_TYPE_F32, 3, NULL, LOOM_TYPE_F32, false },
		{ PHI3, LOOM_TYPE_F16, 3, uneven3, LOOM_TYPE_Q8_0, false },
	};
	const char *path = g_getenv("LOOM_TEST_PLUGIN_PATH");
	int ret;

	g_test_init(&argc, &argv, NULL);
	if (path)
		g_setenv("LOOM_PLUGIN_PATH", path, TRUE);
	g_setenv("LOOM_CPU_DEVICES", "3", TRUE);
	g_setenv("LOOM_BACKENDS", "cpu,meta", TRUE);
	g_unsetenv("LOOM_META_DEVICES");
	if (loom_load_all() || !loom_reg_by_name("meta") ||
	    !loom_dev_by_name("cpu2")) {
		g_test_skip("no cpu and meta plugins with 3 partitions");
		return g_test_run();
	}
	tmpdir = g_dir_make_tmp("loom-model-XXXXXX", NULL);
	for (size_t i = 0; i < G_N_ELEMENTS(refs); i++) {
		char *name = g_strdup_printf("/model/reference/%s/%s%s%s",
					     refs[i].arch == MIXTRAL ?
						     "llama-moe" :
						     arch_names[refs[i].arch],
					     loom_type_name(refs[i].type),
					     refs[i].tied ? "-tied" : "",
					     refs[i].freqs ? "-rope-freqs" : "");

		g_test_add_data_func(name, &refs[i], test_reference);
		g_free(name);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(metas); i++) {
		char *name = g_strdup_printf("/model/meta/%s/n%d%s/%s/"
					     "cache-%s%s",
					     arch_names[metas[i].arch],
					     metas[i].n,
					     metas[i].ratios ? "-uneven" : "",
					     loom_type_name(metas[i].type),
					     loom_type_name(metas[i].cache),
					     metas[i].freqs ? "/rope-freqs" :
							      "");

		g_test_add_data_func(name, &metas[i], test_meta);
		g_free(name);
	}
	g_test_add_func("/model/refused", test_refused);
	g_test_add_func("/model/changed", test_changed);
	g_test_add_data_func("/model/renamed/xverse", "xverse", test_renamed);
	g_test_add_data_func("/model/renamed/internlm2", "internlm2",
			     test_renamed);
	g_test_add_data_func("/model/renamed/mistral3", "mistral3",
			     test_renamed);
	ret = g_test_run();
	g_rmdir(tmpdir);
	g_free(tmpdir);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	return ret;
}
