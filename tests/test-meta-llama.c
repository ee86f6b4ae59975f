/* SPDX-License-Identifier: MIT */
/* test-meta-llama.c - a decoder stack of each model family (GQA
 * attention with a KV cache and RoPE, RMSNorm, SwiGLU or top-k MoE FFN;
 * gpt-oss's sinks, biases, sliding windows and YaRN; qwen2's biases;
 * Gemma 3's one KV head, norms and windows; phi3's fused matrices) run on
 * one CPU device and on meta devices over 2, 3 and 4 CPU partitions, cut
 * by the model library's policy: the logits must agree.
 */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom-backend.h>

#include "../model/decoder.h"
#include "../model/model.h"

#define N_PROMPT 7
#define N_GEN 3

/* The model families the stacks are built as. */
enum family {
	F_DENSE,   /* llama */
	F_MOE,     /* llama with experts (Mixtral) */
	F_OAI,     /* gpt-oss */
	F_MQA,     /* qwen3 with one KV head: Gemma 3 270M's attention */
	F_BIAS,    /* qwen2: q/k/v biases */
	F_GEMMA,   /* gemma3 */
	F_FUSED,   /* phi3: fused attn_qkv and gate/up */
};

static const char *const family_names[] = {
	"dense", "moe", "gpt-oss", "one-kv-head", "qwen2", "gemma3", "phi3",
};

/* Shapes no device count divides: 3 KV heads, odd FFN and vocab sizes;
 * F_MQA and F_GEMMA have one KV head and q/k norms, fewer KV heads than
 * partitions. */
static void shape(struct llama_hparams *hp, enum family f)
{
	bool moe = f == F_MOE || f == F_OAI;

	g_assert_cmpint(llama_hparams_preset(moe ? "tiny-moe" : "tiny", hp), ==,
			LOOM_OK);
	hp->n_vocab = 203;
	hp->n_embd = 72;
	hp->n_head = 6;
	hp->n_head_kv = 3;
	hp->head_dim = 12;
	hp->n_ff = moe ? 50 : 100;
	hp->n_layer = 2;
	hp->n_ctx = 64;
	if (moe) {
		hp->n_expert = 4;
		hp->n_expert_used = 2;
	}
	switch (f) {
	case F_OAI:
		/* Windows of 4 tokens in every other layer, YaRN by 4 over
		 * 16 positions. */
		hp->arch = MODEL_ARCH_GPT_OSS;
		hp->oai = hp->qkv_bias = true;
		hp->rope_mode = LOOM_ROPE_NEOX;
		hp->n_swa = 4;
		hp->swa_pattern = 2;
		hp->yarn_n_ctx = 16;
		hp->rope_scale = 0.25f;
		hp->yarn_attn_factor = 1.0f;
		break;
	case F_MQA:
	case F_GEMMA:
		hp->arch = MODEL_ARCH_QWEN3;
		hp->rope_mode = LOOM_ROPE_NEOX;
		hp->n_head = 4;
		hp->n_head_kv = 1;
		hp->head_dim = 18;
		hp->qk_norm = true;
		if (f == F_MQA)
			break;
		/* Windows of 4 tokens but in every other layer, GELU, the
		 * extra norms, scaled embeddings and scores, tied output. */
		hp->arch = MODEL_ARCH_GEMMA3;
		hp->gelu = hp->embd_scale = hp->post_norms = true;
		hp->tied_output = true;
		hp->attn_scale = 0.2f;
		hp->n_swa = 4;
		hp->swa_pattern = 2;
		hp->rope_base_swa = 10000.0f;
		break;
	case F_BIAS:
		hp->arch = MODEL_ARCH_QWEN2;
		hp->rope_mode = LOOM_ROPE_NEOX;
		hp->qkv_bias = true;
		break;
	case F_FUSED:
		hp->arch = MODEL_ARCH_PHI3;
		hp->rope_mode = LOOM_ROPE_NEOX;
		hp->fused_qkv = hp->fused_up = true;
		break;
	default:
		break;
	}
	g_assert_cmpint(llama_hparams_check(hp), ==, LOOM_OK);
}

/* Runs a prompt (all logits) and N_GEN single-token steps on dev and
 * returns every logit in one array (caller frees). */
static float *run_model(const struct llama_hparams *hp, loom_dev_t *dev,
			size_t *n_out)
{
	size_t nv = (size_t)hp->n_vocab;
	size_t n = nv * (N_PROMPT + N_GEN);
	float *out = g_new0(float, n);
	struct llama_model *m = NULL;
	loom_backend_t *be = NULL;
	int32_t tokens[N_PROMPT];
	int ret;

	for (int i = 0; i < N_PROMPT; i++)
		tokens[i] = (int32_t)((i * 37 + 5) % hp->n_vocab);
	ret = llama_model_new(hp, dev, 7, &m);
	if (ret)
		g_error("model on %s: %s", loom_dev_name(dev),
			loom_error_message());
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	ret = llama_eval(m, be, tokens, N_PROMPT, 0, true, out);
	if (ret)
		g_error("eval on %s: %s", loom_dev_name(dev),
			loom_error_message());
	for (int s = 0; s < N_GEN; s++) {
		int32_t tok = (int32_t)((s * 11 + 3) % hp->n_vocab);
		float *dst = out + nv * (N_PROMPT + s);

		ret = llama_eval(m, be, &tok, 1, N_PROMPT + s, false, dst);
		if (ret)
			g_error("decode on %s: %s", loom_dev_name(dev),
				loom_error_message());
	}
	loom_backend_free(be);
	llama_model_free(m);
	*n_out = n;
	return out;
}

static double nmse(const float *ref, const float *x, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i] - (double)ref[i];

		num += d * d;
		den += (double)ref[i] * (double)ref[i];
	}
	return den > 0 ? num / den : num;
}

struct config {
	enum family f;
	int n;
	const float *ratios;
};

static const float even[4] = { 1, 1, 1, 1 };
static const float uneven3[3] = { 0.5f, 0.3f, 0.2f };
static const float uneven4[4] = { 3, 1, 2, 2 };
static const float uneven2[2] = { 0.7f, 0.3f };

static void test_stack(gconstpointer data)
{
	const struct config *c = data;
	struct llama_hparams hp;
	struct model_split_state split;
	struct loom_meta_opts opts = { .size = sizeof(opts) };
	loom_dev_t *devs[4], *meta;
	float *ref, *got;
	size_t n_ref, n_got;
	double e;

	shape(&hp, c->f);
	for (int j = 0; j < c->n; j++) {
		char name[16];

		g_snprintf(name, sizeof(name), "cpu%d", j);
		devs[j] = loom_dev_by_name(name);
		g_assert_nonnull(devs[j]);
	}
	opts.ratios = c->ratios;
	/* The model library's policy, by the role table, as loom-run's. */
	model_split_state_init(&hp, NULL, &split);
	if (loom_meta_dev_new(devs, (size_t)c->n, model_split, &split, &opts,
			      &meta))
		g_error("meta device: %s", loom_error_message());

	ref = run_model(&hp, devs[0], &n_ref);
	got = run_model(&hp, meta, &n_got);
	g_assert_cmpuint(n_ref, ==, n_got);
	e = nmse(ref, got, n_ref);
	g_test_message("%s over %d partitions: nmse %.3g", loom_dev_name(meta),
		       c->n, e);
	g_assert_cmpfloat(e, <=, 1e-6);
	g_free(ref);
	g_free(got);
}

int main(int argc, char **argv)
{
	static const struct config configs[] = {
		{ F_DENSE, 2, NULL },    { F_DENSE, 2, uneven2 },
		{ F_DENSE, 3, NULL },    { F_DENSE, 3, uneven3 },
		{ F_DENSE, 4, NULL },    { F_DENSE, 4, uneven4 },
		{ F_MOE, 2, NULL },      { F_MOE, 3, uneven3 },
		{ F_MOE, 4, even },      { F_OAI, 2, NULL },
		{ F_OAI, 3, NULL },      { F_OAI, 3, uneven3 },
		{ F_MQA, 2, NULL },      { F_MQA, 3, uneven3 },
		{ F_BIAS, 2, NULL },     { F_BIAS, 3, uneven3 },
		{ F_GEMMA, 2, NULL },    { F_GEMMA, 3, uneven3 },
		{ F_FUSED, 2, NULL },    { F_FUSED, 3, uneven3 },
	};

	const char *path = g_getenv("LOOM_TEST_PLUGIN_PATH");
	int ret;

	g_test_init(&argc, &argv, NULL);
	if (path)
		g_setenv("LOOM_PLUGIN_PATH", path, TRUE);
	g_setenv("LOOM_CPU_DEVICES", "4", TRUE);
	g_setenv("LOOM_BACKENDS", "cpu,meta", TRUE);
	g_unsetenv("LOOM_META_DEVICES");
	if (loom_load_all() || !loom_reg_by_name("meta") ||
	    !loom_dev_by_name("cpu3")) {
		g_test_skip("no cpu and meta plugins with 4 partitions");
		return g_test_run();
	}

	for (size_t i = 0; i < G_N_ELEMENTS(configs); i++) {
		const struct config *c = &configs[i];
		char *name = g_strdup_printf("/meta/llama/%s/n%d/%s",
					     family_names[c->f], c->n,
					     c->ratios && c->ratios != even
						     ? "uneven" : "even");

		g_test_add_data_func(name, c, test_stack);
		g_free(name);
	}
	ret = g_test_run();
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	return ret;
}
