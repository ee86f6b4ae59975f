/* SPDX-License-Identifier: MIT */
/* arch-table.c - the tables of arch.h: every tensor role with its GGUF
 * name (as llama.cpp writes them), shape, use and cut, and every
 * architecture with its rope, features, own keys and graph builder.
 */
#include "arch.h"
#include "gguf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define W(n, a, b, c, use, cond, cut, unit) \
	{ n, { a, b, c }, TT_WEIGHT, use, cond, cut, unit }
#define F(n, a, b, c, use, cond, cut, unit) \
	{ n, { a, b, c }, TT_F32, use, cond, cut, unit }

const struct model_tensor_info model_tensor_infos[MT_COUNT] = {
	[MT_TOKEN_EMBD] = W("token_embd.weight", D_EMBD, D_VOCAB, D_1,
			    USE_EMBD, C_ALWAYS, CUT_MIRROR, UNIT_ANY),
	[MT_OUTPUT_NORM] = F("output_norm.weight", D_EMBD, D_1, D_1, USE_MUL,
			     C_ALWAYS, CUT_MIRROR, UNIT_ANY),
	[MT_OUTPUT] = W("output.weight", D_EMBD, D_VOCAB, D_1, USE_MAT,
			C_UNTIED, CUT_OUT, UNIT_ANY),
	[MT_ROPE_FREQS] = F("rope_freqs.weight", D_HALF, D_1, D_1, USE_HOST,
			    C_FREQS, CUT_MIRROR, UNIT_ANY),
	[MT_ATTN_NORM] = F("attn_norm.weight", D_EMBD, D_1, D_1,
			   USE_MUL, C_ALWAYS, CUT_MIRROR, UNIT_ANY),
	[MT_ATTN_Q] = W("attn_q.weight", D_EMBD, D_Q, D_1, USE_MAT,
			C_SEP_QKV, CUT_OUT, UNIT_GROUP),
	[MT_ATTN_K] = W("attn_k.weight", D_EMBD, D_KV, D_1, USE_MAT,
			C_SEP_QKV, CUT_OUT, UNIT_HEAD),
	[MT_ATTN_V] = W("attn_v.weight", D_EMBD, D_KV, D_1, USE_MAT,
			C_SEP_QKV, CUT_OUT, UNIT_HEAD),
	[MT_ATTN_QKV] = W("attn_qkv.weight", D_EMBD, D_QKV, D_1,
			  USE_MAT, C_FUSED_QKV, CUT_MIRROR, UNIT_ANY),
	[MT_ATTN_OUT] = W("attn_output.weight", D_Q, D_EMBD, D_1,
			  USE_MAT, C_ALWAYS, CUT_IN, UNIT_GROUP),
	[MT_ATTN_Q_BIAS] = F("attn_q.bias", D_Q, D_1, D_1, USE_ADD,
			     C_BIAS, CUT_OUT, UNIT_GROUP),
	[MT_ATTN_K_BIAS] = F("attn_k.bias", D_KV, D_1, D_1, USE_ADD,
			     C_BIAS, CUT_OUT, UNIT_HEAD),
	[MT_ATTN_V_BIAS] = F("attn_v.bias", D_KV, D_1, D_1, USE_ADD,
			     C_BIAS, CUT_OUT, UNIT_HEAD),
	[MT_ATTN_Q_NORM] = F("attn_q_norm.weight", D_HEAD, D_1, D_1,
			     USE_MUL, C_QK_NORM, CUT_MIRROR, UNIT_ANY),
	[MT_ATTN_K_NORM] = F("attn_k_norm.weight", D_HEAD, D_1, D_1,
			     USE_MUL, C_QK_NORM, CUT_MIRROR, UNIT_ANY),
	[MT_ATTN_POST_NORM] = F("post_attention_norm.weight", D_EMBD,
				D_1, D_1, USE_MUL, C_POST_ATTN, CUT_MIRROR,
				UNIT_ANY),
	[MT_FFN_NORM] = F("ffn_norm.weight", D_EMBD, D_1, D_1,
			  USE_MUL, C_FFN_NORM, CUT_MIRROR, UNIT_ANY),
	[MT_FFN_GATE] = W("ffn_gate.weight", D_EMBD, D_FF, D_1,
			  USE_MAT, C_GATE, CUT_OUT, UNIT_FF),
	[MT_FFN_UP] = W("ffn_up.weight", D_EMBD, D_FF, D_1, USE_MAT,
			C_DENSE, CUT_OUT, UNIT_FF),
	[MT_FFN_DOWN] = W("ffn_down.weight", D_FF, D_EMBD, D_1,
			  USE_MAT, C_DENSE, CUT_IN, UNIT_FF),
	[MT_FFN_POST_NORM] = F("post_ffw_norm.weight", D_EMBD, D_1,
			       D_1, USE_MUL, C_POST, CUT_MIRROR, UNIT_ANY),
	[MT_FFN_GATE_INP] = F("ffn_gate_inp.weight", D_EMBD,
			      D_EXPERT, D_1, USE_MAT, C_MOE, CUT_MIRROR,
			      UNIT_ANY),
	[MT_FFN_GATE_EXPS] = W("ffn_gate_exps.weight", D_EMBD, D_FF,
			       D_EXPERT, USE_EXPS, C_MOE, CUT_OUT, UNIT_FF),
	[MT_FFN_UP_EXPS] = W("ffn_up_exps.weight", D_EMBD, D_FF,
			     D_EXPERT, USE_EXPS, C_MOE, CUT_OUT, UNIT_FF),
	[MT_FFN_DOWN_EXPS] = W("ffn_down_exps.weight", D_FF, D_EMBD,
			       D_EXPERT, USE_EXPS, C_MOE, CUT_IN, UNIT_FF),
	/* gpt-oss's: a sink per head (cut with the heads by the op's
	 * rule), the biases of the output and the router (added whole),
	 * of the experts' gate and up (cut as their outputs, dimension 0)
	 * and of down (added whole). */
	[MT_ATTN_SINKS] = F("attn_sinks.weight", D_HEADS, D_1, D_1, USE_ADD,
			    C_OAI, CUT_MIRROR, UNIT_ANY),
	[MT_ATTN_OUT_BIAS] = F("attn_output.bias", D_EMBD, D_1, D_1, USE_ADD,
			       C_OAI, CUT_MIRROR, UNIT_ANY),
	[MT_FFN_GATE_INP_BIAS] = F("ffn_gate_inp.bias", D_EXPERT, D_1, D_1,
				   USE_ADD, C_OAI, CUT_MIRROR, UNIT_ANY),
	[MT_FFN_GATE_EXPS_BIAS] = F("ffn_gate_exps.bias", D_FF, D_EXPERT,
				    D_1, USE_ADD, C_OAI, CUT_IN, UNIT_FF),
	[MT_FFN_UP_EXPS_BIAS] = F("ffn_up_exps.bias", D_FF, D_EXPERT, D_1,
				  USE_ADD, C_OAI, CUT_IN, UNIT_FF),
	[MT_FFN_DOWN_EXPS_BIAS] = F("ffn_down_exps.bias", D_EMBD, D_EXPERT,
				    D_1, USE_ADD, C_OAI, CUT_MIRROR,
				    UNIT_ANY),
	/* The cache: keys [head_dim, n_ctx, n_head_kv], a position per row
	 * so that set_rows writes tokens and each head is one matrix for
	 * attention; values transposed, [n_ctx, head_dim, n_head_kv], a
	 * position per column, so that attention reads them as they are. */
	[MT_CACHE_K] = { "cache_k", { D_HEAD, D_CTX, D_HKV }, TT_CACHE,
			 USE_CACHE, C_ALWAYS, CUT_CACHE, UNIT_ANY },
	[MT_CACHE_V] = { "cache_v", { D_CTX, D_HEAD, D_HKV }, TT_CACHE,
			 USE_CACHE, C_ALWAYS, CUT_CACHE, UNIT_ANY },
};

#undef W
#undef F

static bool is_moe(const struct llama_hparams *hp)
{
	return hp->n_expert > 0 && hp->n_expert_used > 0;
}

bool model_tensor_wanted(const struct llama_hparams *hp, enum model_tensor r)
{
	switch (model_tensor_infos[r].cond) {
	case C_ALWAYS:
		return true;
	case C_SEP_QKV:
		return !hp->fused_qkv;
	case C_FUSED_QKV:
		return hp->fused_qkv;
	case C_BIAS:
		return hp->qkv_bias;
	case C_QK_NORM:
		return hp->qk_norm;
	case C_POST:
		return hp->post_norms;
	case C_DENSE:
		return !is_moe(hp);
	case C_GATE:
		return !is_moe(hp) && !hp->fused_up;
	case C_MOE:
		return is_moe(hp);
	case C_FREQS:
		return hp->rope_freqs;
	case C_UNTIED:
		return !hp->tied_output;
	case C_FFN_NORM:
		return !hp->oai;
	case C_POST_ATTN:
		return hp->post_norms || hp->oai;
	case C_OAI:
		return hp->oai;
	}
	return false;
}

static int64_t dim(const struct llama_hparams *hp, enum model_dim d)
{
	const int64_t q = hp->n_head * hp->head_dim;
	const int64_t kv = hp->n_head_kv * hp->head_dim;
	const int64_t v[] = {
		[D_1] = 1, [D_EMBD] = hp->n_embd, [D_VOCAB] = hp->n_vocab,
		[D_Q] = q, [D_KV] = kv, [D_QKV] = q + 2 * kv,
		[D_FF] = hp->n_ff, [D_FF2] = 2 * hp->n_ff,
		[D_HEAD] = hp->head_dim, [D_HALF] = hp->head_dim / 2,
		[D_EXPERT] = hp->n_expert, [D_CTX] = hp->n_ctx,
		[D_HKV] = hp->n_head_kv, [D_HEADS] = hp->n_head,
	};

	return v[d];
}

int model_tensor_shape(const struct llama_hparams *hp, enum model_tensor r,
		       int64_t ne[3])
{
	const struct model_tensor_info *ti = &model_tensor_infos[r];
	int n = 1;

	for (int i = 0; i < 3; i++) {
		ne[i] = dim(hp, ti->ne[i]);
		if (ti->ne[i] != D_1)
			n = i + 1;
	}
	/* ffn_up fused with the gate is twice as wide. */
	if (r == MT_FFN_UP && hp->fused_up)
		ne[1] = dim(hp, D_FF2);
	return n;
}

void model_tensor_name(enum model_tensor r, int64_t il, char *buf,
		       size_t size)
{
	const char *n = model_tensor_infos[r].name;

	if (r < MT_FIRST_LAYER)
		snprintf(buf, size, "%s", n);
	else if (r >= MT_CACHE_K)
		snprintf(buf, size, "%s.%lld", n, (long long)il);
	else
		snprintf(buf, size, "blk.%lld.%s", (long long)il, n);
}

/* A role of a layer (without the cache) named rest past "blk.N.". */
static enum model_tensor layer_role(const char *rest)
{
	for (int r = MT_FIRST_LAYER; r < MT_CACHE_K; r++)
		if (!strcmp(model_tensor_infos[r].name, rest))
			return (enum model_tensor)r;
	return MT_COUNT;
}

enum model_tensor model_tensor_role(const char *name, int64_t *layer)
{
	long long il = -1;
	int n = 0;

	if (!name)
		return MT_COUNT;
	*layer = -1;
	if (sscanf(name, "cache_%*1[kv].%lld%n", &il, &n) == 1 && !name[n] &&
	    il >= 0) {
		*layer = il;
		return name[6] == 'k' ? MT_CACHE_K : MT_CACHE_V;
	}
	if (sscanf(name, "blk.%lld.%n", &il, &n) == 1 && n > 0 && il >= 0) {
		*layer = il;
		return layer_role(name + n);
	}
	for (int r = 0; r < MT_FIRST_LAYER; r++)
		if (!strcmp(model_tensor_infos[r].name, name))
			return (enum model_tensor)r;
	return MT_COUNT;
}

/* ------------------------------------------------------------------------
 * Architectures.
 */

/* Gemma's sliding window: layers slide but every pattern-th, at their own
 * rope base (llama.cpp's defaults where the file is silent).  The scores
 * are scaled by 1/sqrt(head_dim), but in the 62 layers of Gemma 3 27B by
 * 1/sqrt(n_embd / n_head), its query_pre_attn_scalar, a value its file
 * does not hold. */
int model_gemma3_keys(struct keys *k, struct llama_hparams *hp)
{
	double base, cap;
	int ret;

	if ((ret = model_key_int(k, "attention.sliding_window", 0,
				 &hp->n_swa)) ||
	    (ret = model_key_int(k, "attention.sliding_window_pattern", 6,
				 &hp->swa_pattern)) ||
	    (ret = model_key_float(k, "rope.freq_base_swa", 10000.0, &base)) ||
	    (ret = model_key_float(k, "final_logit_softcapping", 0.0, &cap)))
		return ret;
	if (!(base > 0) || !isfinite((float)base))
		return loom_error_set(LOOM_E_INVAL, "gguf: %s.rope.freq_base_swa"
				      " is %g, not a positive number", k->arch,
				      base);
	if (cap != 0)
		return loom_error_set(LOOM_E_UNSUPPORTED, "gguf: final logit "
				      "softcapping (%s.final_logit_softcapping"
				      " %g) is not supported", k->arch, cap);
	if (hp->n_swa > INT32_MAX || hp->swa_pattern > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: sliding window "
				      "%lld or pattern %lld too large",
				      k->arch, (long long)hp->n_swa,
				      (long long)hp->swa_pattern);
	hp->rope_base_swa = (float)base;
	if (hp->n_layer == 62)
		hp->attn_scale = 1.0f / sqrtf((float)(hp->n_embd /
						      hp->n_head));
	return LOOM_OK;
}

/* Phi-3: q, k and v in one matrix or three (both are in llama.cpp's
 * graph), gate and up in one.  Its long-context files scale rope by
 * per-frequency factors, long and short, which Loom lacks: refused by
 * name.  llama.cpp runs Phi-3 without its sliding window, as Loom does. */
static int phi3_keys(struct keys *k, struct llama_hparams *hp)
{
	static const char *const longrope[] = { "rope_factors_long.weight",
						"rope_factors_short.weight" };

	for (size_t i = 0; i < sizeof(longrope) / sizeof(longrope[0]); i++)
		if (gguf_tensor_find(k->g, longrope[i]))
			return loom_error_set(LOOM_E_UNSUPPORTED, "gguf: %s: "
					      "long-rope scaling (tensor '%s')"
					      " is not supported", k->arch,
					      longrope[i]);
	hp->fused_qkv = gguf_tensor_find(k->g, "blk.0.attn_qkv.weight");
	return LOOM_OK;
}

/* Mistral 3 is llama but for an attention temperature, which Loom lacks:
 * refused when the file sets one. */
static int mistral3_keys(struct keys *k, struct llama_hparams *hp)
{
	double t;
	int ret = model_key_float(k, "attention.temperature_scale", 0.0, &t);

	(void)hp;
	if (!ret && t != 0)
		ret = loom_error_set(LOOM_E_UNSUPPORTED, "gguf: %s: attention "
				     "temperature scaling (%s.attention."
				     "temperature_scale %g) is not supported",
				     k->arch, k->arch, t);
	return ret;
}

/* gpt-oss: every other layer slides (its window in the file), all at one
 * rope base and scale. */
int model_gpt_oss_keys(struct keys *k, struct llama_hparams *hp)
{
	int ret;

	if ((ret = model_key_int(k, "attention.sliding_window", 0,
				 &hp->n_swa)) ||
	    (ret = model_key_int(k, "attention.sliding_window_pattern", 2,
				 &hp->swa_pattern)))
		return ret;
	if (hp->n_swa > INT32_MAX || hp->swa_pattern > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: sliding window "
				      "%lld or pattern %lld too large",
				      k->arch, (long long)hp->n_swa,
				      (long long)hp->swa_pattern);
	if (!hp->n_expert || !hp->n_expert_used)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s has no experts "
				      "(%s.expert_count, expert_used_count)",
				      k->arch, k->arch);
	return LOOM_OK;
}

#define DENSE ARCH_DENSE
#define GEMMA (ARCH_DENSE | ARCH_GEMMA | ARCH_QK_NORM)

/* llama covers Llama 2/3, Mistral, TinyLlama and Mixtral (experts);
 * xverse and internlm2 are llama by other names, mistral3 too without
 * its temperature, exaone llama with NEOX rope (all also in llama.cpp's
 * graphs). */
static const struct model_arch archs[MODEL_ARCH_COUNT] = {
	{ "llama", MODEL_ARCH_LLAMA, LOOM_ROPE_NORMAL, DENSE | ARCH_MOE,
	  NULL, model_build_llama },
	{ "qwen2", MODEL_ARCH_QWEN2, LOOM_ROPE_NEOX, DENSE | ARCH_QKV_BIAS,
	  NULL, model_build_llama },
	{ "qwen3", MODEL_ARCH_QWEN3, LOOM_ROPE_NEOX, DENSE | ARCH_QK_NORM,
	  NULL, model_build_llama },
	{ "qwen3moe", MODEL_ARCH_QWEN3MOE, LOOM_ROPE_NEOX,
	  ARCH_MOE | ARCH_QK_NORM, NULL, model_build_llama },
	{ "gemma3", MODEL_ARCH_GEMMA3, LOOM_ROPE_NEOX, GEMMA,
	  model_gemma3_keys, model_build_gemma3 },
	{ "xverse", MODEL_ARCH_XVERSE, LOOM_ROPE_NORMAL, DENSE, NULL,
	  model_build_llama },
	{ "exaone", MODEL_ARCH_EXAONE, LOOM_ROPE_NEOX, DENSE, NULL,
	  model_build_llama },
	{ "phi3", MODEL_ARCH_PHI3, LOOM_ROPE_NEOX,
	  DENSE | ARCH_FUSED_QKV | ARCH_FUSED_UP, phi3_keys,
	  model_build_llama },
	{ "internlm2", MODEL_ARCH_INTERNLM2, LOOM_ROPE_NORMAL, DENSE, NULL,
	  model_build_llama },
	{ "mistral3", MODEL_ARCH_MISTRAL3, LOOM_ROPE_NORMAL, DENSE,
	  mistral3_keys, model_build_llama },
	{ "gpt-oss", MODEL_ARCH_GPT_OSS, LOOM_ROPE_NEOX,
	  ARCH_MOE | ARCH_QKV_BIAS | ARCH_OAI, model_gpt_oss_keys,
	  model_build_gpt_oss },
};

const struct model_arch *model_arch_get(enum model_arch_id id)
{
	return (unsigned)id < MODEL_ARCH_COUNT ? &archs[id] : NULL;
}

const struct model_arch *model_arch_find(const char *name)
{
	for (int i = 0; name && i < MODEL_ARCH_COUNT; i++)
		if (!strcmp(archs[i].name, name))
			return &archs[i];
	return NULL;
}
