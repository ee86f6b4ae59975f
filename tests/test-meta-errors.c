/* SPDX-License-Identifier: MIT */
/* test-meta-errors.c - part of test-meta: the errors of bad callbacks
 * and unsupported combinations, K-quant blocks and empty views of split
 * weights, and the entry points (split buffer type, one device twice,
 * the default policy). */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom-plugin.h>

#include "meta-cases.h"
#include "meta-util.h"

/* ---- errors ---- */

static int alloc_one(loom_dev_t *meta, enum loom_type type, int64_t ne0,
		     int64_t ne1, const char *name)
{
	loom_ctx_t *ctx;
	loom_buffer_t *buf = NULL;
	struct loom_tensor *t;
	int rc;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	t = loom_tensor_new_2d(ctx, type, ne0, ne1);
	loom_tensor_set_name(t, name);
	rc = loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta), &buf);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	return rc;
}

void test_bad_callbacks(void)
{
	static const struct rule rules[] = {
		{ .name = "sum", .state = LOOM_SPLIT_DIM1, .n_seg = 2,
		  .seg = { 3, 3 } },
		{ .name = "block", .state = LOOM_SPLIT_DIM0,
		  .granularity = 48 },
		{ .name = "gran", .state = LOOM_SPLIT_DIM1, .granularity = 4 },
		{ .name = "refused", .state = LOOM_SPLIT_DIM1, .fail = 1 },
		{ .name = "ok", .state = LOOM_SPLIT_DIM0, .granularity = 64 },
		{ .name = "state", .state = (enum loom_split_state)42 },
		{ .name = "state-neg", .state = (enum loom_split_state)-1 },
		{ .name = "nseg", .state = LOOM_SPLIT_DIM1, .n_seg = 9 },
		{ .name = "nseg-neg", .state = LOOM_SPLIT_DIM1, .n_seg = -1 },
		{ .name = "seg-neg", .state = LOOM_SPLIT_DIM1, .n_seg = 2,
		  .seg = { -2, 8 } },
		{ .name = "seg-huge", .state = LOOM_SPLIT_DIM1, .n_seg = 2,
		  .seg = { INT64_MAX, INT64_MAX } },
		{ .name = "gran-neg", .state = LOOM_SPLIT_DIM1,
		  .granularity = -2 },
		{ .name = "gran-huge", .state = LOOM_SPLIT_DIM1,
		  .granularity = INT64_MAX },
		{ .name = "gran-zero", .state = LOOM_SPLIT_DIM1,
		  .granularity = 0 },
		{ .name = "positive", .state = LOOM_SPLIT_DIM1, .ret = 7 },
		{ .name = "silent", .state = LOOM_SPLIT_DIM1,
		  .ret = LOOM_E_UNSUPPORTED },
		{ .name = NULL }
	};
	static const struct {
		const char *name;
		int rc;
		const char *msg;
	} bad[] = {
		{ "state", LOOM_E_INVAL, "unknown state 42" },
		{ "state-neg", LOOM_E_INVAL, "unknown state -1" },
		{ "nseg", LOOM_E_INVAL, "9 segments" },
		{ "nseg-neg", LOOM_E_INVAL, "-1 segments" },
		{ "seg-neg", LOOM_E_INVAL, "negative segment" },
		{ "seg-huge", LOOM_E_INVAL, "more than its dimension" },
		{ "gran-neg", LOOM_E_INVAL, "granularity -2" },
		{ "gran-huge", LOOM_E_INVAL, "not a multiple" },
		{ "positive", LOOM_E_INVAL, "returned 7" },
		{ "silent", LOOM_E_UNSUPPORTED, "refused silent" },
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);

	/* Garbage from the callback is an error naming the tensor, never
	 * an abort. */
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6,
					  bad[i].name), ==, bad[i].rc);
		g_assert_nonnull(strstr(loom_error_message(), bad[i].name));
		g_assert_nonnull(strstr(loom_error_message(), bad[i].msg));
	}
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6, "gran-zero"), ==,
			LOOM_OK);
	/* The dry run asks the callback of weights not yet placed. */
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		loom_ctx_t *ctx;
		loom_graph_t *g;
		struct loom_tensor *w, *x;

		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
		w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 6);
		loom_tensor_set_name(w, bad[i].name);
		loom_tensor_set_flags(w, LOOM_TENSOR_WEIGHT);
		x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 1);
		loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
		g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g, loom_mul_mat(ctx, w, x)),
				==, LOOM_OK);
		g_assert_cmpint(loom_meta_check(meta, g), ==, bad[i].rc);
		g_assert_nonnull(strstr(loom_error_message(), bad[i].msg));
		loom_ctx_free(ctx);
	}

	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 7, "sum"), ==,
			LOOM_E_INVAL);
	g_assert_nonnull(strstr(loom_error_message(), "add up"));
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q8_0, 64, 2, "block"), ==,
			LOOM_E_INVAL);
	g_assert_nonnull(strstr(loom_error_message(), "block"));
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6, "gran"), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6, "refused"), !=,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q8_0, 128, 2, "ok"), ==,
			LOOM_OK);
}

/* Splits of dimension 0 fall on a type's blocks: a K-quant's are 256
 * values, so 3 super-blocks over 2 even devices are 2 + 1 (the tie goes to
 * the first), and a granularity of 64 cuts them in units of 256. */
void test_kquant_blocks(void)
{
	static const enum loom_type super[] = {
		LOOM_TYPE_Q3_K, LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_XS,
	};
	static const enum loom_type small[] = {
		LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1,
		LOOM_TYPE_IQ4_NL, LOOM_TYPE_MXFP4,
	};
	static const struct rule rules[] = {
		{ .name = "k", .state = LOOM_SPLIT_DIM0 },
		{ .name = "k64", .state = LOOM_SPLIT_DIM0, .granularity = 64 },
		{ .name = NULL }
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *k;
	size_t sizes[2], row = 144, slack = 1024;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	k = loom_tensor_new_2d(ctx, LOOM_TYPE_Q4_K, 768, 4);
	loom_tensor_set_name(k, "k");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta),
					       &buf), ==, LOOM_OK);
	dev_sizes(buf, sizes, 2);
	g_assert_cmpuint(sizes[0], >=, 2 * row * 4);
	g_assert_cmpuint(sizes[0], <=, 2 * row * 4 + slack);
	g_assert_cmpuint(sizes[1], >=, row * 4);
	g_assert_cmpuint(sizes[1], <, 2 * row * 4);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	/* Granularity 64 meets the block in units of 256; a row of 320
	 * values holds no whole number of them. */
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q6_K, 512, 2, "k64"), ==,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q6_K, 768, 2, "k64"), ==,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q4_0, 64, 2, "k64"), ==,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q4_0, 320, 2, "k64"), ==,
			LOOM_OK);
	/* Every other type of 256-value blocks, and of 32. */
	for (size_t i = 0; i < G_N_ELEMENTS(super); i++)
		g_assert_cmpint(alloc_one(meta, super[i], 512, 2, "k64"), ==,
				LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(small); i++)
		g_assert_cmpint(alloc_one(meta, small[i], 64, 2, "k64"), ==,
				LOOM_OK);
}

/* A view of an empty split weight is an error, not a division by its
 * empty rows. */
void test_empty_split_view(void)
{
	static const struct rule rules[] = {
		{ .name = "empty", .state = LOOM_SPLIT_DIM1 },
		{ .name = NULL }
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);
	loom_ctx_t *ctx;
	loom_graph_t *g;
	struct loom_tensor *w, *v;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 0, 4);
	loom_tensor_set_name(w, "empty");
	loom_tensor_set_flags(w, LOOM_TENSOR_WEIGHT);
	v = loom_view_2d(ctx, w, 0, 2, w->nb[1], 0);
	g_assert_nonnull(v);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, loom_cont(ctx, v)), ==, LOOM_OK);
	g_assert_cmpint(loom_meta_check(meta, g), ==, LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "empty split tensor"));
	loom_ctx_free(ctx);
}

/* rms_norm of a SPLIT(0) value has no rule: the dry run and compute both
 * say so, naming op, tensor and state. */
void test_unsupported(void)
{
	loom_dev_t *meta = meta_new(2, mm_rules, NULL, false);
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;
	struct loom_tensor *w, *x, *y;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, K, M);
	loom_tensor_set_name(w, "w1");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(meta),
					       &wbuf), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, K, T);
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	y = loom_rms_norm(gctx, loom_mul_mat(gctx, w, x), 1e-5f);
	loom_tensor_set_name(y, "normed");
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);

	g_assert_cmpint(loom_meta_check(meta, g), ==, LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "rms_norm"));
	g_assert_nonnull(strstr(loom_error_message(), "normed"));
	g_assert_nonnull(strstr(loom_error_message(), "SPLIT(0)"));

	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(meta), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "rms_norm"));
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* ---- entry points ---- */

void test_split_buffer_type(void)
{
	loom_split_buffer_type_fn fn = (loom_split_buffer_type_fn)
		loom_reg_proc_address(loom_reg_by_name("meta"),
				      LOOM_PROC_SPLIT_BUFFER_TYPE);
	static const float r[2] = { 1, 3 };
	loom_buffer_type_t *buft;
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *w;
	float in[8 * 12], out[8 * 12];
	size_t sizes[2];

	g_assert_nonnull(fn);
	g_assert_cmpint(fn(cpu, 2, r, &buft), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 12);
	loom_tensor_set_name(w, "rows");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, buft, &buf), ==, LOOM_OK);
	dev_sizes(buf, sizes, 2);
	g_assert_cmpuint(sizes[0], >=, 3 * 8 * 4);
	g_assert_cmpuint(sizes[0], <, 3 * 8 * 4 + 64);
	g_assert_cmpuint(sizes[1], >=, 9 * 8 * 4);
	g_assert_cmpuint(sizes[1], <, 9 * 8 * 4 + 64);
	fill(in, G_N_ELEMENTS(in), 31);
	g_assert_cmpint(loom_tensor_set(w, in, 0, sizeof(in)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(w, out, 0, sizeof(out)), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* The same device twice is a valid meta device (the generic allreduce
 * serves it). */
void test_same_device_twice(void)
{
	loom_dev_t *twice[2] = { cpu[1], cpu[1] };
	loom_dev_t *meta;
	float w1[K * M], w2[M * N], x[K * T];
	struct mm_result ref, got;

	g_assert_cmpint(loom_meta_dev_new(twice, 2, table_split,
					  (void *)mm_rules, NULL, &meta), ==,
			LOOM_OK);
	g_assert_cmpstr(loom_dev_description(meta), ==, "meta(cpu1,cpu1)");
	fill(w1, G_N_ELEMENTS(w1), 41);
	fill(w2, G_N_ELEMENTS(w2), 42);
	fill(x, G_N_ELEMENTS(x), 43);
	mm_reference(w1, w2, x, &ref);
	mm_run(meta, w1, w2, x, &got);
	assert_close(ref.s, got.s, N * T);
}

/* The default policy on Llama-style names and shapes. */
void test_default_policy(void)
{
	/* head_dim 16, 8 query heads in 2 GQA groups of 4 */
	struct loom_meta_model m = { .head_dim = 16, .n_head = 8,
				     .n_head_kv = 2 };
	static const struct {
		const char *name;
		int64_t ne0, ne1, ne2;
		enum loom_split_state state;
		int64_t granularity;
		int n_seg;
	} cases[] = {
		{ "blk.0.attn_q.weight", 64, 128, 1, LOOM_SPLIT_DIM1, 64, 0 },
		{ "blk.0.attn_k.weight", 64, 32, 1, LOOM_SPLIT_DIM1, 16, 0 },
		{ "blk.0.attn_v.weight", 64, 32, 1, LOOM_SPLIT_DIM1, 16, 0 },
		{ "blk.0.attn_qkv.weight", 64, 192, 1, LOOM_SPLIT_DIM1, 16,
		  3 },
		{ "blk.0.attn_output.weight", 128, 64, 1, LOOM_SPLIT_DIM0, 64,
		  0 },
		{ "blk.0.attn_norm.weight", 64, 1, 1, LOOM_SPLIT_MIRRORED, 1,
		  0 },
		{ "blk.0.attn_q_norm.weight", 16, 1, 1, LOOM_SPLIT_MIRRORED, 1,
		  0 },
		{ "blk.0.ffn_gate.weight", 64, 96, 1, LOOM_SPLIT_DIM1, 32, 0 },
		{ "blk.0.ffn_up.weight", 64, 100, 1, LOOM_SPLIT_DIM1, 1, 0 },
		{ "blk.0.ffn_down.weight", 96, 64, 1, LOOM_SPLIT_DIM0, 32, 0 },
		{ "blk.0.ffn_gate_inp.weight", 64, 4, 1, LOOM_SPLIT_MIRRORED, 1,
		  0 },
		{ "blk.0.ffn_up_exps.weight", 64, 96, 4, LOOM_SPLIT_DIM1, 32,
		  0 },
		{ "blk.0.ffn_down_exps.weight", 96, 64, 4, LOOM_SPLIT_DIM0, 32,
		  0 },
		{ "cache_k.0", 16, 64, 2, LOOM_SPLIT_DIM2, 1, 0 },
		{ "cache_v.0", 32, 64, 1, LOOM_SPLIT_DIM0, 16, 0 },
		{ "output.weight", 64, 1000, 1, LOOM_SPLIT_DIM1, 1, 0 },
		{ "output_norm.weight", 64, 1, 1, LOOM_SPLIT_MIRRORED, 1, 0 },
		{ "token_embd.weight", 64, 1000, 1, LOOM_SPLIT_MIRRORED, 1, 0 },
	};
	loom_ctx_t *ctx;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct loom_tensor *t = loom_tensor_new_3d(
			ctx, LOOM_TYPE_F32, cases[i].ne0, cases[i].ne1,
			cases[i].ne2);
		struct loom_split sp;

		loom_tensor_set_name(t, cases[i].name);
		g_assert_cmpint(loom_meta_split_default(t, &sp, &m), ==,
				LOOM_OK);
		g_test_message("%s", cases[i].name);
		g_assert_cmpint(sp.state, ==, cases[i].state);
		g_assert_cmpint(sp.granularity, ==, cases[i].granularity);
		g_assert_cmpint(sp.n_segments, ==, cases[i].n_seg);
	}
	loom_ctx_free(ctx);
}
