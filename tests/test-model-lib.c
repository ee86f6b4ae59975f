/* SPDX-License-Identifier: MIT */
/* test-model-lib.c - the public API of the model library (loom-model.h)
 * on a file the library's writer saves: its logits equal the decoder's
 * own on the same file, and every misuse (NULL, bad parameters, evaluating
 * before loading, loading twice, a context set after loading, an id out
 * of range) fails with its status; the sampler picks the largest logit
 * greedily and draws in proportion to the softmax at a temperature; the
 * split policy cuts each tensor as its role says and refuses names of no
 * role.
 */
#include <glib.h>
#include <glib/gstdio.h>
#include <math.h>
#include <string.h>

#include <loom/loom-model.h>

#include "../model/model.h"
#include "test-util.h"

static char *path;

static void test_logits(void)
{
	struct llama_hparams hp;
	struct llama_model *ref;
	loom_model_t *m;
	loom_dev_t *dev = loom_dev_by_name("cpu0");
	loom_backend_t *be;
	int32_t tokens[4] = { 1, 7, 200, 3 };
	float *a = g_new(float, 256 * 4), *b = g_new(float, 256 * 4);
	struct gguf *g;

	g_assert_cmpint(loom_model_open(path, NULL, &m), ==, LOOM_OK);
	g_assert_cmpstr(loom_model_arch(m), ==, "llama");
	g_assert_cmpint(loom_model_n_vocab(m), ==, 256);
	g_assert_cmpint(loom_model_load(m, dev), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_model_eval(m, be, tokens, 4, 0, true, a), ==,
			LOOM_OK);
	/* The decoder, through the library's insides, on the same file. */
	g_assert_cmpint(gguf_open(path, &g), ==, LOOM_OK);
	g_assert_cmpint(model_hparams(g, loom_model_n_ctx(m), LOOM_TYPE_F32,
				      &hp, NULL), ==, LOOM_OK);
	g_assert_cmpint(model_load(g, &hp, dev, &ref), ==, LOOM_OK);
	g_assert_cmpint(llama_eval(ref, be, tokens, 4, 0, true, b), ==,
			LOOM_OK);
	g_assert_cmpmem(a, 256 * 4 * sizeof(float), b,
			256 * 4 * sizeof(float));
	llama_model_free(ref);
	gguf_free(g);
	loom_backend_free(be);
	loom_model_free(m);
	g_free(a);
	g_free(b);
}

static void test_misuse(void)
{
	struct loom_model_params small = { .size = 4 };
	struct loom_model_params f8 = { .size = sizeof(f8),
					.cache_type = LOOM_TYPE_Q8_0 };
	loom_dev_t *dev = loom_dev_by_name("cpu0");
	loom_backend_t *be;
	loom_model_t *m;
	float logits[256];
	int32_t tok = 1, *ids;
	char text[16];
	int n;

	g_assert_cmpint(loom_model_open(NULL, NULL, &m), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_model_open(path, &small, &m), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_model_open(path, &f8, &m), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_model_open("/nonexistent.gguf", NULL, &m), <, 0);
	g_assert_cmpint(loom_model_open(path, NULL, &m), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_model_eval(m, be, &tok, 1, 0, false, logits), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_model_memory(m, &(struct loom_model_memory){ 0 }),
			==, LOOM_E_INVAL);
	g_assert_cmpint(loom_model_set_n_ctx(m, 0), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_model_set_n_ctx(m, 64), ==, LOOM_OK);
	g_assert_cmpint(loom_model_n_ctx(m), ==, 64);
	g_assert_cmpint(loom_model_load(m, dev), ==, LOOM_OK);
	g_assert_cmpint(loom_model_load(m, dev), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_model_set_n_ctx(m, 32), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_model_eval(m, be, &tok, 1, 64, false, logits), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_model_token_text(m, 256, text, sizeof(text)), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_model_token_text(m, -1, text, sizeof(text)), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_model_tokenize(m, "t5", 8, &ids, &n), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_model_split_policy(m, NULL, NULL), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_model_chat_turn(m, "nonesuch", NULL, "hi", true,
					     &(char *){ NULL }), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_false(loom_model_is_eog(NULL, 2));
	g_assert_true(loom_model_is_eog(m, 2)); /* the file's EOS */
	g_assert_cmpint(loom_model_reset(NULL), ==, LOOM_E_INVAL);
	loom_backend_free(be);
	loom_model_free(m);
	loom_model_free(NULL);
}

/* The split policy cuts by the role table: each name's state and unit,
 * and names of no role refused. */
static void test_split(void)
{
	static const struct {
		const char *name;
		int status;
		enum loom_split_state state;
		int64_t granularity;
	} cases[] = {
		{ "blk.3.attn_q.weight", LOOM_OK, LOOM_SPLIT_DIM1, 32 * 4 },
		{ "blk.3.attn_k.weight", LOOM_OK, LOOM_SPLIT_DIM1, 32 },
		{ "blk.0.attn_q.bias", LOOM_OK, LOOM_SPLIT_DIM0, 32 * 4 },
		{ "blk.1.attn_output.weight", LOOM_OK, LOOM_SPLIT_DIM0,
		  32 * 4 },
		{ "blk.1.ffn_down.weight", LOOM_OK, LOOM_SPLIT_DIM0, 32 },
		{ "blk.1.ffn_up.weight", LOOM_OK, LOOM_SPLIT_DIM1, 32 },
		{ "blk.0.attn_qkv.weight", LOOM_OK, LOOM_SPLIT_MIRRORED, 1 },
		{ "blk.0.ffn_gate_inp.weight", LOOM_OK, LOOM_SPLIT_MIRRORED,
		  1 },
		{ "blk.2.attn_norm.weight", LOOM_OK, LOOM_SPLIT_MIRRORED, 1 },
		{ "token_embd.weight", LOOM_OK, LOOM_SPLIT_MIRRORED, 1 },
		{ "output.weight", LOOM_OK, LOOM_SPLIT_DIM1, 1 },
		{ "cache_v.7", LOOM_OK, LOOM_SPLIT_DIM2, 1 },
		{ "blk.x.attn_q.weight", LOOM_E_INVAL, 0, 0 },
		{ "blk.0.attn_zz.weight", LOOM_E_INVAL, 0, 0 },
		{ "cache_k.", LOOM_E_INVAL, 0, 0 },
		{ "rope_factors_long.weight", LOOM_E_INVAL, 0, 0 },
	};
	struct llama_hparams hp;
	struct model_split_state st;
	loom_ctx_t *c;

	/* 8 query heads of 32 over 2 KV heads: groups of 4; an FFN of 96. */
	g_assert_cmpint(llama_hparams_preset("tiny", &hp), ==, LOOM_OK);
	hp.n_head = 8;
	hp.n_ff = 96;
	model_split_state_init(&hp, NULL, &st);
	g_assert_cmpint(loom_ctx_new(0, &c), ==, LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct loom_tensor *t = loom_tensor_new_2d(c, LOOM_TYPE_F32, 96,
							   96);
		struct loom_split out;

		if (strstr(cases[i].name, ".bias"))
			t = loom_tensor_new_1d(c, LOOM_TYPE_F32, 256);
		loom_tensor_set_name(t, cases[i].name);
		g_assert_cmpint(model_split(t, &out, &st), ==, cases[i].status);
		if (cases[i].status)
			continue;
		g_assert_cmpint(out.state, ==, cases[i].state);
		g_assert_cmpint(out.granularity, ==, cases[i].granularity);
	}
	g_assert_cmpint(model_split(NULL, NULL, &st), ==, LOOM_E_INVAL);
	loom_ctx_free(c);
}

/* The granularity the policy gives a [ne0, ne1] tensor named name
 * under st. */
static int64_t split_unit(struct model_split_state *st, const char *name,
			  int64_t ne0, int64_t ne1)
{
	struct loom_split out;

	g_assert_cmpint(loom_test_split_of(model_split, st, name,
					   LOOM_TYPE_F32, ne0, ne1, &out), ==,
			LOOM_OK);
	return out.granularity;
}

/* A parsed file of two layers' attn_q and ffn_down of the given types
 * (only names and types are read); *bytes is the caller's to free. */
static struct gguf *typed_file(enum loom_type q, enum loom_type down0,
			       enum loom_type down1, void **bytes)
{
	const enum loom_type types[] = { q, down0, down1 };
	const char *const names[] = { "blk.0.attn_q.weight",
				      "blk.0.ffn_down.weight",
				      "blk.1.ffn_down.weight" };
	static uint8_t data[4096];
	struct gguf_writer *w;
	struct gguf *g;
	size_t size;

	g_assert_cmpint(gguf_writer_new(&w), ==, LOOM_OK);
	gguf_writer_add_str(w, "general.architecture", "llama");
	for (int i = 0; i < 3; i++) {
		const int64_t ne[2] = { 256, 2 };

		g_assert_cmpint(gguf_writer_add_tensor(
					w, names[i], gguf_tensor_type_of(types[i]),
					2, ne, data), ==, LOOM_OK);
	}
	g_assert_cmpint(gguf_writer_bytes(w, bytes, &size), ==, LOOM_OK);
	g_assert_cmpint(gguf_parse(*bytes, size, &g), ==, LOOM_OK);
	gguf_writer_free(w);
	return g;
}

/* The FFN is cut in whole 32-value rows and whole blocks of the types of
 * the matrices cut by their inputs (ffn_down), as the file has them:
 * an F32 or Q8_0 FFN of 2816 in halves, not 1536 and 1280. */
static void test_split_ffn(void)
{
	static const struct {
		enum loom_type wtype, q, down0, down1;
		bool file;
		int64_t n_ff, unit;
	} cases[] = {
		{ LOOM_TYPE_F32, 0, 0, 0, false, 2816, 32 },
		{ LOOM_TYPE_F32, 0, 0, 0, false, 100, 1 },
		{ LOOM_TYPE_Q8_0, 0, 0, 0, false, 2816, 32 },
		{ LOOM_TYPE_Q4_K, 0, 0, 0, false, 2816, 256 },
		/* The file decides, not attn_q's type. */
		{ LOOM_TYPE_Q8_0, LOOM_TYPE_Q8_0, LOOM_TYPE_Q8_0,
		  LOOM_TYPE_Q4_K, true, 2816, 256 },
		{ LOOM_TYPE_Q4_K, LOOM_TYPE_Q4_K, LOOM_TYPE_Q8_0,
		  LOOM_TYPE_Q8_0, true, 2816, 32 },
		{ LOOM_TYPE_F16, LOOM_TYPE_F16, LOOM_TYPE_F16, LOOM_TYPE_F32,
		  true, 96, 32 },
	};
	struct llama_hparams hp;
	struct model_split_state st;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		void *bytes = NULL;
		struct gguf *g = cases[i].file ?
			typed_file(cases[i].q, cases[i].down0, cases[i].down1,
				   &bytes) : NULL;

		g_assert_cmpint(llama_hparams_preset("tiny", &hp), ==,
				LOOM_OK);
		hp.wtype = cases[i].wtype;
		hp.n_ff = cases[i].n_ff;
		model_split_state_init(&hp, g, &st);
		g_assert_cmpint(split_unit(&st, "blk.1.ffn_down.weight",
					   cases[i].n_ff, 64), ==,
				cases[i].unit);
		g_assert_cmpint(split_unit(&st, "blk.1.ffn_gate.weight", 64,
					   cases[i].n_ff), ==, cases[i].unit);
		gguf_free(g);
		free(bytes);
	}
}

static void test_sample(void)
{
	struct loom_sample_params hot = { .temp = 1.0f, .top_p = 1.0f };
	struct loom_sample_params one = { .temp = 1.0f, .top_k = 1,
					  .top_p = 1.0f };
	struct loom_sample_params bad = { .temp = 1.0f, .top_p = 0.0f };
	/* Softmax of 0 and ln 3 (and -inf-ish): 1/4 and 3/4. */
	float logits[3] = { 0.0f, logf(3.0f), -80.0f };
	uint64_t rng = 42;
	int32_t tok;
	int ones = 0;

	g_assert_cmpint(loom_model_sample(logits, 3, NULL, NULL, &tok), ==,
			LOOM_OK);
	g_assert_cmpint(tok, ==, 1);
	g_assert_cmpint(loom_model_sample(logits, 0, NULL, NULL, &tok), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_model_sample(logits, 3, &hot, NULL, &tok), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_model_sample(logits, 3, &bad, &rng, &tok), ==,
			LOOM_E_INVAL);
	for (int i = 0; i < 100; i++) {
		g_assert_cmpint(loom_model_sample(logits, 3, &one, &rng, &tok),
				==, LOOM_OK);
		g_assert_cmpint(tok, ==, 1);
	}
	for (int i = 0; i < 4000; i++) {
		g_assert_cmpint(loom_model_sample(logits, 3, &hot, &rng, &tok),
				==, LOOM_OK);
		g_assert_cmpint(tok, !=, 2);
		ones += tok == 1;
	}
	/* 3000 expected; the binomial's sigma is 27. */
	g_assert_cmpint(ones, >, 2850);
	g_assert_cmpint(ones, <, 3150);
}

int main(int argc, char **argv)
{
	const char *pp = g_getenv("LOOM_TEST_PLUGIN_PATH");
	struct llama_hparams hp;
	struct llama_model *m;
	char *dir;
	int ret;

	g_test_init(&argc, &argv, NULL);
	if (pp)
		g_setenv("LOOM_PLUGIN_PATH", pp, TRUE);
	g_setenv("LOOM_BACKENDS", "cpu", TRUE);
	g_test_add_func("/model-lib/sample", test_sample);
	g_test_add_func("/model-lib/split", test_split);
	g_test_add_func("/model-lib/split-ffn", test_split_ffn);
	if (loom_load_all() || !loom_dev_by_name("cpu0")) {
		g_test_skip("no cpu plugin");
		return g_test_run();
	}
	dir = g_dir_make_tmp("loom-model-lib-XXXXXX", NULL);
	path = g_build_filename(dir, "tiny.gguf", NULL);
	g_assert_cmpint(llama_hparams_preset("tiny", &hp), ==, LOOM_OK);
	hp.n_ctx = 64;
	g_assert_cmpint(llama_model_new(&hp, loom_dev_by_name("cpu0"), 5, &m),
			==, LOOM_OK);
	g_assert_cmpint(model_save(m, path), ==, LOOM_OK);
	llama_model_free(m);
	g_test_add_func("/model-lib/logits", test_logits);
	g_test_add_func("/model-lib/misuse", test_misuse);
	ret = g_test_run();
	g_unlink(path);
	g_rmdir(dir);
	g_free(path);
	g_free(dir);
	loom_unload_all();
	return ret;
}
