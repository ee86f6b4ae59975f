/* SPDX-License-Identifier: MIT */
/* ops-composites.c - part of the op suite (ops-suite.c): composite cases,
 * small pieces of a model (FFN, attention, a chain of ops, a KV cache
 * store) in one graph with their references. */
#define _GNU_SOURCE
#include "ops-suite.h"
#include "ref-ops.h"
#include "test-util.h"
#include "ops-suite-int.h"

#include <loom/loom-backend.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Composite cases: small pieces of a model in one graph.
 */

/* The reference's view of x through a layout's index map (permute(0, 2,
 * 1, 3) or transpose), as view_values() reads inputs. */
static void ref_view(const struct ref_tensor *x, enum layout layout,
		     struct ref_tensor *out)
{
	struct input in = { .layout = layout };

	memcpy(in.ne, x->ne, sizeof(in.ne));
	if (layout == LAYOUT_TRANSPOSE) {
		in.ne[0] = x->ne[1];
		in.ne[1] = x->ne[0];
	} else if (layout == LAYOUT_PERMUTE) {
		in.ne[1] = x->ne[2];
		in.ne[2] = x->ne[1];
	}
	view_values(&in, x, out);
}

/* x + w2 (silu(w1 h) * (w3 h)), h = rms_norm(x) * norm weight.
 * Inputs: x, w1, w3, w2, norm weight, named as a model names them, so a
 * meta device's default policy splits the weights across its devices. */
static struct loom_tensor *ffn_build(loom_ctx_t *ctx, const struct op_case *c,
				     struct loom_tensor **s)
{
	struct loom_tensor *h, *g, *u;

	h = loom_mul(ctx, loom_rms_norm(ctx, s[0], 1e-5f), s[4]);
	g = loom_silu(ctx, loom_mul_mat(ctx, s[1], h));
	u = loom_mul_mat(ctx, s[2], h);
	return loom_add(ctx, s[0], loom_mul_mat(ctx, s[3],
						loom_mul(ctx, g, u)));
}

static void ffn_reference(const struct op_case *c, struct ref_tensor *r,
			  struct ref_tensor *out)
{
	struct ref_tensor n, h, a, g, u, gu, y;

	ref_rms_norm(&r[0], 1e-5f, &n);
	ref_binary(REF_MUL, &n, &r[4], &h);
	ref_mul_mat(&r[1], &h, &a);
	ref_silu(&a, &g);
	ref_mul_mat(&r[2], &h, &u);
	ref_binary(REF_MUL, &g, &u, &gu);
	ref_mul_mat(&r[3], &gu, &y);
	ref_binary(REF_ADD, &r[0], &y, out);
	ref_tensor_free(&n);
	ref_tensor_free(&h);
	ref_tensor_free(&a);
	ref_tensor_free(&g);
	ref_tensor_free(&u);
	ref_tensor_free(&gu);
	ref_tensor_free(&y);
}

static const struct composite ffn = {
	.name = "ffn",
	.build = ffn_build,
	.reference = ffn_reference,
};

/* Attention with GQA over a KV cache: rope on q, k q^T with a causal
 * mask, softmax, times v.  Inputs: q [hd, n_head, n_tok], k and v
 * [hd, n_kv, n_head_kv], mask [n_kv, >= n_tok], positions [n_tok]. */
static struct loom_tensor *attn_build(loom_ctx_t *ctx,
				      const struct op_case *c,
				      struct loom_tensor **s)
{
	struct loom_tensor *q, *kq, *vt, *kqv;
	int64_t hd = c->in[0].ne[0];

	q = loom_rope(ctx, s[0], s[4], (int)hd, LOOM_ROPE_NEOX, 10000.0f,
		      1.0f);
	kq = loom_mul_mat(ctx, s[1], loom_permute(ctx, q, 0, 2, 1, 3));
	kq = loom_soft_max(ctx, kq, s[3], 1.0f / sqrtf((float)hd));
	vt = loom_cont(ctx, loom_transpose(ctx, s[2]));
	kqv = loom_mul_mat(ctx, vt, kq);
	return loom_cont(ctx, loom_permute(ctx, kqv, 0, 2, 1, 3));
}

static void attn_reference(const struct op_case *c, struct ref_tensor *r,
			   struct ref_tensor *out)
{
	struct ref_tensor q, qp, kq, sm, vt, kqv;
	int64_t hd = c->in[0].ne[0];

	ref_rope(&r[0], &r[4], (int)hd, LOOM_ROPE_NEOX, 10000.0f, 1.0f, &q);
	ref_view(&q, LAYOUT_PERMUTE, &qp);
	ref_mul_mat(&r[1], &qp, &kq);
	ref_soft_max(&kq, &r[3], 1.0f / sqrtf((float)hd), &sm);
	ref_view(&r[2], LAYOUT_TRANSPOSE, &vt);
	ref_mul_mat(&vt, &sm, &kqv);
	ref_view(&kqv, LAYOUT_PERMUTE, out);
	ref_tensor_free(&q);
	ref_tensor_free(&qp);
	ref_tensor_free(&kq);
	ref_tensor_free(&sm);
	ref_tensor_free(&vt);
	ref_tensor_free(&kqv);
}

static const struct composite attn = {
	.name = "attention",
	.build = attn_build,
	.reference = attn_reference,
};

/* A chain of row and elementwise ops: sum_rows(gelu(scale(norm(x) * w +
 * b))).  Inputs: x, w, b. */
static struct loom_tensor *chain_build(loom_ctx_t *ctx,
				       const struct op_case *c,
				       struct loom_tensor **s)
{
	struct loom_tensor *t;

	t = loom_mul(ctx, loom_norm(ctx, s[0], 1e-5f), s[1]);
	t = loom_scale(ctx, loom_add(ctx, t, s[2]), 0.5f);
	return loom_sum_rows(ctx, loom_gelu(ctx, t));
}

static void chain_reference(const struct op_case *c, struct ref_tensor *r,
			    struct ref_tensor *out)
{
	struct ref_tensor n, m, a, sc, g;

	ref_norm(&r[0], 1e-5f, &n);
	ref_binary(REF_MUL, &n, &r[1], &m);
	ref_binary(REF_ADD, &m, &r[2], &a);
	ref_scale(&a, 0.5f, &sc);
	ref_gelu(&sc, &g);
	ref_sum_rows(&g, out);
	ref_tensor_free(&n);
	ref_tensor_free(&m);
	ref_tensor_free(&a);
	ref_tensor_free(&sc);
	ref_tensor_free(&g);
}

static const struct composite chain = {
	.name = "chain",
	.build = chain_build,
	.reference = chain_reference,
};

/* A KV-cache write read back in the same graph: mul_mat(set_rows(cache,
 * new rows, ids), q).  Inputs: cache, new rows, ids, q. */
static struct loom_tensor *cache_build(loom_ctx_t *ctx,
				       const struct op_case *c,
				       struct loom_tensor **s)
{
	return loom_mul_mat(ctx, loom_set_rows(ctx, s[0], s[1], s[2]), s[3]);
}

static void cache_reference(const struct op_case *c, struct ref_tensor *r,
			    struct ref_tensor *out)
{
	struct ref_tensor k;

	ref_set_rows(&r[0], &r[1], &r[2], &k);
	ref_mul_mat(&k, &r[3], out);
	ref_tensor_free(&k);
}

static const struct composite cache = {
	.name = "kv_cache",
	.build = cache_build,
	.reference = cache_reference,
};

void add_graph_cases(void)
{
	static const enum loom_type wtypes[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_Q8_0,
	};
	struct op_case *c;
	struct input *in;
	char tag[64];

	for (size_t i = 0; i < N_OF(wtypes); i++) {
		enum loom_type t = wtypes[i];

		c = case_new(LOOM_OP_NONE, mul_mat_nmse(t, LOOM_TYPE_F32));
		c->graph = &ffn;
		case_in(c, LOOM_TYPE_F32, 64, 5, 1, 1, LAYOUT_CONT);
		in = case_in(c, t, 64, 128, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_gate.weight";
		in = case_in(c, t, 64, 128, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_up.weight";
		in = case_in(c, t, 128, 64, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_down.weight";
		in = case_in(c, LOOM_TYPE_F32, 64, 1, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_norm.weight";
		snprintf(tag, sizeof(tag), "ffn_%s", loom_type_name(t));
		case_add(c, tag);
	}
	for (int n_tok = 1; n_tok <= 5; n_tok += 4) {
		for (size_t i = 0; i < 2; i++) {
			enum loom_type t = wtypes[i];

			c = case_new(LOOM_OP_NONE,
				     mul_mat_nmse(t, LOOM_TYPE_F32));
			c->graph = &attn;
			case_in(c, LOOM_TYPE_F32, 32, 4, n_tok, 1,
				LAYOUT_CONT);
			case_in(c, t, 32, 7, 2, 1, LAYOUT_CONT);
			case_in(c, t, 32, 7, 2, 1, LAYOUT_CONT);
			in = case_in(c, LOOM_TYPE_F32, 7, 8, 1, 1,
				     LAYOUT_CONT);
			in->fill = FILL_MASK;
			case_ids(c, FILL_IDS, 512, n_tok, 1, 1);
			snprintf(tag, sizeof(tag), "attention_%s_tok%d",
				   loom_type_name(t), n_tok);
			case_add(c, tag);
		}
	}
	c = case_new(LOOM_OP_NONE, NMSE_F32_ACC);
	c->graph = &chain;
	case_in(c, LOOM_TYPE_F32, 33, 6, 2, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 33, 1, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 33, 1, 1, 1, LAYOUT_CONT);
	case_add(c, "chain");
	c = case_new(LOOM_OP_NONE, NMSE_F16);
	c->graph = &cache;
	case_in(c, LOOM_TYPE_F16, 32, 10, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 32, 3, 1, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 10, 3, 1, 1);
	case_in(c, LOOM_TYPE_F32, 32, 2, 1, 1, LAYOUT_CONT);
	case_add(c, "kv_cache_f16");
}
