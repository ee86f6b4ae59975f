/* SPDX-License-Identifier: MIT */
/* test-gpt-oss.c - gpt-oss's metadata read from a file as llama.cpp's
 * writer names it: experts, the sliding window every other layer, YaRN
 * (its scale, original context and attention factor), and what is
 * refused.  Its graph is checked against llama.cpp by
 * tools/compare-llama-cpp.py and on meta devices by test-meta-llama.
 */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "model.h"

/* What a case leaves out or changes of the complete file. */
enum edit {
	E_NONE,
	E_NO_ORIG_CTX,   /* YaRN over context_length */
	E_NO_CTX,        /* neither context length */
	E_ATTN_FACTOR,   /* rope.scaling.attn_factor 0.5 */
	E_PATTERN3,      /* sliding_window_pattern 3 */
	E_NO_EXPERTS,    /* no expert_count */
	E_LINEAR,        /* linear scaling, not YaRN */
};

/* A gpt-oss file of 2 layers with its keys and the tensors whose shapes
 * the reader needs (the embeddings and a query matrix), parsed. */
/* The file as parsed; *bytes (which the parse reads from) is the
 * caller's to free after gguf_free. */
static struct gguf *make_file(enum edit e, void **bytes)
{
	static float embd[32 * 16], wq[32 * 32];
	const int64_t ne_embd[2] = { 32, 16 }, ne_q[2] = { 32, 32 };
	struct gguf_writer *w;
	struct gguf *g;
	size_t size;

	g_assert_cmpint(gguf_writer_new(&w), ==, LOOM_OK);
	gguf_writer_add_str(w, "general.architecture", "gpt-oss");
	if (e != E_NO_CTX)
		gguf_writer_add_u32(w, "gpt-oss.context_length", 131072);
	gguf_writer_add_u32(w, "gpt-oss.embedding_length", 32);
	gguf_writer_add_u32(w, "gpt-oss.block_count", 2);
	gguf_writer_add_u32(w, "gpt-oss.attention.head_count", 4);
	gguf_writer_add_u32(w, "gpt-oss.attention.head_count_kv", 2);
	gguf_writer_add_u32(w, "gpt-oss.attention.key_length", 8);
	gguf_writer_add_u32(w, "gpt-oss.attention.value_length", 8);
	gguf_writer_add_f32(w, "gpt-oss.attention.layer_norm_rms_epsilon",
			    1e-5f);
	gguf_writer_add_f32(w, "gpt-oss.rope.freq_base", 150000.0f);
	gguf_writer_add_u32(w, "gpt-oss.attention.sliding_window", 128);
	if (e == E_PATTERN3)
		gguf_writer_add_u32(w,
				    "gpt-oss.attention.sliding_window_pattern",
				    3);
	if (e != E_NO_EXPERTS) {
		gguf_writer_add_u32(w, "gpt-oss.expert_count", 4);
		gguf_writer_add_u32(w, "gpt-oss.expert_used_count", 2);
	}
	gguf_writer_add_u32(w, "gpt-oss.expert_feed_forward_length", 64);
	gguf_writer_add_u32(w, "gpt-oss.feed_forward_length", 64);
	gguf_writer_add_str(w, "gpt-oss.rope.scaling.type",
			    e == E_LINEAR ? "linear" : "yarn");
	gguf_writer_add_f32(w, "gpt-oss.rope.scaling.factor", 32.0f);
	if (e != E_NO_ORIG_CTX && e != E_NO_CTX)
		gguf_writer_add_u32(w,
			"gpt-oss.rope.scaling.original_context_length", 4096);
	if (e == E_ATTN_FACTOR)
		gguf_writer_add_f32(w, "gpt-oss.rope.scaling.attn_factor",
				    0.5f);
	gguf_writer_add_tensor(w, "token_embd.weight", 0, 2, ne_embd, embd);
	gguf_writer_add_tensor(w, "blk.0.attn_q.weight", 0, 2, ne_q, wq);
	g_assert_cmpint(gguf_writer_bytes(w, bytes, &size), ==, LOOM_OK);
	g_assert_cmpint(gguf_parse(*bytes, size, &g), ==, LOOM_OK);
	gguf_writer_free(w);
	return g;
}

static int read_hp(enum edit e, struct llama_hparams *hp)
{
	void *bytes;
	struct gguf *g = make_file(e, &bytes);
	int ret = model_hparams(g, 256, LOOM_TYPE_F32, hp, NULL);

	gguf_free(g);
	free(bytes);
	return ret;
}

static void test_keys(void)
{
	struct llama_hparams hp;
	float base, scale;

	g_assert_cmpint(read_hp(E_NONE, &hp), ==, LOOM_OK);
	g_assert_cmpint(hp.arch, ==, MODEL_ARCH_GPT_OSS);
	g_assert_true(hp.oai && hp.qkv_bias && !hp.post_norms && !hp.gelu);
	g_assert_cmpint(hp.rope_mode, ==, LOOM_ROPE_NEOX);
	g_assert_cmpint(hp.n_expert, ==, 4);
	g_assert_cmpint(hp.n_expert_used, ==, 2);
	g_assert_cmpint(hp.n_ff, ==, 64);
	g_assert_cmpint(hp.n_vocab, ==, 16);
	g_assert_cmpint(hp.n_swa, ==, 128);
	g_assert_cmpint(hp.swa_pattern, ==, 2);
	g_assert_cmpint(hp.yarn_n_ctx, ==, 4096);
	g_assert_cmpfloat(hp.rope_scale, ==, 1.0f / 32);
	g_assert_cmpfloat(hp.yarn_attn_factor, ==, 1.0f);
	/* Layer 0 slides, layer 1 sees all; both rotate alike. */
	g_assert_true(llama_layer_slides(&hp, 0));
	g_assert_false(llama_layer_slides(&hp, 1));
	for (int il = 0; il < 2; il++) {
		llama_layer_rope(&hp, il, &base, &scale);
		g_assert_cmpfloat(base, ==, 150000.0f);
		g_assert_cmpfloat(scale, ==, 1.0f / 32);
	}
}

static void test_variants(void)
{
	struct llama_hparams hp;

	g_assert_cmpint(read_hp(E_NO_ORIG_CTX, &hp), ==, LOOM_OK);
	g_assert_cmpint(hp.yarn_n_ctx, ==, 131072);
	g_assert_cmpint(read_hp(E_ATTN_FACTOR, &hp), ==, LOOM_OK);
	g_assert_cmpfloat(hp.yarn_attn_factor, ==, 0.5f);
	g_assert_cmpint(read_hp(E_PATTERN3, &hp), ==, LOOM_OK);
	g_assert_true(llama_layer_slides(&hp, 0));
	g_assert_true(llama_layer_slides(&hp, 1));
	g_assert_cmpint(read_hp(E_LINEAR, &hp), ==, LOOM_OK);
	g_assert_cmpint(hp.yarn_n_ctx, ==, 0);
	g_assert_cmpfloat(hp.rope_scale, ==, 1.0f / 32);
}

static void test_refused(void)
{
	struct llama_hparams hp;

	g_assert_cmpint(read_hp(E_NO_CTX, &hp), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==,
			"gguf: gpt-oss: YaRN needs the original context "
			"length (gpt-oss.rope.scaling.original_context_length"
			"), not 0");
	g_assert_cmpint(read_hp(E_NO_EXPERTS, &hp), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==,
			"gguf: gpt-oss has no experts (gpt-oss.expert_count, "
			"expert_used_count)");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/gpt-oss/keys", test_keys);
	g_test_add_func("/gpt-oss/variants", test_variants);
	g_test_add_func("/gpt-oss/refused", test_refused);
	return g_test_run();
}
