/* SPDX-License-Identifier: MIT */
/* test-ops-oai.c - what the constructors of the gpt-oss family's ops
 * (soft_max_sinks, rope_yarn, swiglu_oai, add_id) refuse, and the message
 * each refusal gives.  Their values are the op suite's (tests/test-ops).
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom.h>

static loom_ctx_t *ctx;

/* A constructor that must return NULL, its context's message holding
 * want. */
#define REFUSED(call, want)                                                  \
	do {                                                                 \
		g_assert_null(call);                                         \
		if (!strstr(loom_ctx_error(ctx), (want)))                    \
			g_error("%s: message '%s' lacks '%s'", #call,        \
				loom_ctx_error(ctx), (want));                \
	} while (0)

/* A missing source: NULL, as a failed constructor's result passes on
 * (the context keeps that constructor's message). */
#define MISSING(call) g_assert_null(call)

static void setup(void)
{
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
}

static void test_soft_max_sinks(void)
{
	struct loom_tensor *a, *mask, *sinks, *t;

	setup();
	a = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 16, 4, 8);
	mask = loom_tensor_new_2d(ctx, LOOM_TYPE_F16, 16, 4);
	sinks = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 8);
	t = loom_soft_max_sinks(ctx, a, mask, sinks, 0.125f);
	g_assert_nonnull(t);
	g_assert_cmpint(t->op, ==, LOOM_OP_SOFT_MAX_SINKS);
	g_assert_true(loom_tensor_same_shape(t, a));
	g_assert_nonnull(loom_soft_max_sinks(ctx, a, NULL, sinks, 1.0f));
	MISSING(loom_soft_max_sinks(ctx, a, mask, NULL, 1.0f));
	REFUSED(loom_soft_max_sinks(ctx, a, mask,
				    loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 4),
				    1.0f), "n_head = 8");
	REFUSED(loom_soft_max_sinks(ctx, a, mask,
				    loom_tensor_new_1d(ctx, LOOM_TYPE_F16, 8),
				    1.0f), "must be f32");
	REFUSED(loom_soft_max_sinks(ctx, a, mask,
				    loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8,
						       2), 1.0f), "sinks");
	/* soft_max's own rule holds too */
	REFUSED(loom_soft_max_sinks(ctx, a,
				    loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 15,
						       4), sinks, 1.0f),
		"does not fit");
	MISSING(loom_soft_max_sinks(ctx, NULL, NULL, sinks, 1.0f));
	loom_ctx_free(ctx);
}

static void test_rope_yarn(void)
{
	struct loom_tensor *a, *pos;

	setup();
	a = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 64, 4, 5);
	pos = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 5);
	g_assert_nonnull(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX,
					150000, 1.0f / 32, 4096, 1, 1, 32, 1));
	/* ext_factor 0 needs no freq_scale > 0 */
	g_assert_nonnull(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX,
					150000, 0, 4096, 0, 1, 32, 1));
	REFUSED(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX, 150000, 0.5f,
			       0, 1, 1, 32, 1), "n_ctx_orig 0");
	REFUSED(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX, 150000, 0.5f,
			       4096, NAN, 1, 32, 1), "ext_factor");
	REFUSED(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX, 150000, 0.5f,
			       4096, 1, INFINITY, 32, 1), "attn_factor");
	REFUSED(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX, 150000, 0.5f,
			       4096, 1, 1, 0, 1), "beta_fast 0");
	REFUSED(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX, 150000, 0.5f,
			       4096, 1, 1, 32, -1), "beta_slow -1");
	REFUSED(loom_rope_yarn(ctx, a, pos, 64, LOOM_ROPE_NEOX, 150000, 0,
			       4096, 1, 1, 32, 1), "freq_scale 0");
	/* rope's own rule holds too */
	REFUSED(loom_rope_yarn(ctx, a, pos, 63, LOOM_ROPE_NEOX, 150000, 0.5f,
			       4096, 1, 1, 32, 1), "n_dims 63");
	REFUSED(loom_rope_yarn(ctx, a, pos, 64, (enum loom_rope_mode)5,
			       150000, 0.5f, 4096, 1, 1, 32, 1),
		"unknown mode");
	MISSING(loom_rope_yarn(ctx, a, NULL, 64, LOOM_ROPE_NEOX, 150000, 0.5f,
			       4096, 1, 1, 32, 1));
	loom_ctx_free(ctx);
}

static void test_swiglu_oai(void)
{
	struct loom_tensor *g, *u;

	setup();
	g = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 32, 3);
	u = loom_tensor_new_2d(ctx, LOOM_TYPE_BF16, 32, 3);
	g_assert_nonnull(loom_swiglu_oai(ctx, g, u, 1.702f, 7.0f));
	g_assert_nonnull(loom_swiglu_oai(ctx, g, u, 1.702f, INFINITY));
	REFUSED(loom_swiglu_oai(ctx, g, loom_tensor_new_2d(ctx, LOOM_TYPE_F32,
							   32, 1), 1, 7),
		"differ in shape");
	REFUSED(loom_swiglu_oai(ctx, g, loom_tensor_new_2d(ctx, LOOM_TYPE_I32,
							   32, 3), 1, 7),
		"must be f32, f16 or bf16");
	REFUSED(loom_swiglu_oai(ctx, g, u, 1.702f, 0), "limit 0");
	REFUSED(loom_swiglu_oai(ctx, g, u, 1.702f, NAN), "limit nan");
	REFUSED(loom_swiglu_oai(ctx, g, u, INFINITY, 7), "alpha inf");
	MISSING(loom_swiglu_oai(ctx, g, NULL, 1, 7));
	loom_ctx_free(ctx);
}

static void test_add_id(void)
{
	struct loom_tensor *a, *b, *ids, *t;

	setup();
	a = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 32, 4, 3);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 32, 8);
	ids = loom_tensor_new_2d(ctx, LOOM_TYPE_I32, 4, 3);
	t = loom_add_id(ctx, a, b, ids);
	g_assert_nonnull(t);
	g_assert_true(loom_tensor_same_shape(t, a));
	REFUSED(loom_add_id(ctx, a, loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 31,
						       8), ids),
		"must be [32, n_expert]");
	REFUSED(loom_add_id(ctx, a, b, loom_tensor_new_2d(ctx, LOOM_TYPE_I32,
							  4, 2)),
		"[4, 3]");
	REFUSED(loom_add_id(ctx, a, b, loom_tensor_new_2d(ctx, LOOM_TYPE_F32,
							  4, 3)),
		"i32");
	REFUSED(loom_add_id(ctx, a, loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 32,
						       8, 2), ids), "2D");
	MISSING(loom_add_id(ctx, a, b, NULL));
	loom_ctx_free(ctx);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/ops-oai/soft-max-sinks", test_soft_max_sinks);
	g_test_add_func("/ops-oai/rope-yarn", test_rope_yarn);
	g_test_add_func("/ops-oai/swiglu-oai", test_swiglu_oai);
	g_test_add_func("/ops-oai/add-id", test_add_id);
	return g_test_run();
}
