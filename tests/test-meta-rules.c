/* SPDX-License-Identifier: MIT */
/* test-meta-rules.c - each split rule of the meta device on its own
 * (plugins/meta/meta-rules.c), over two devices cut 3 + 5: the state it
 * gives for its sources' states, the MIRRORED sources it cuts, and the
 * combinations it refuses.  Whole graphs are test-meta's.
 */
#include <glib.h>
#include <string.h>

#include "meta-rules.h"

#define P LOOM_SPLIT_PARTIAL
#define M LOOM_SPLIT_MIRRORED
#define D0 LOOM_SPLIT_DIM0
#define D1 LOOM_SPLIT_DIM1
#define D2 LOOM_SPLIT_DIM2
#define NO (-2) /* the rule refuses */

static struct meta_dev md = { .n = 2, .n_all = 2 };

/* A record in state st, cut 3 + 5 (or cut as cut says) when split. */
static void set_state(struct meta_tensor *mt, enum loom_split_state st,
		      int cut)
{
	meta_state_whole(&mt->synced, st);
	if (st <= LOOM_SPLIT_DIM3) {
		mt->synced.n_seg = 1;
		mt->synced.len[0][0] = cut;
		mt->synced.len[0][1] = 8 - cut;
	}
}

struct rule_case {
	const char *what;
	enum loom_op op;
	enum loom_split_state in[3];
	int want;          /* the result's state, or NO */
	int cut_src;       /* the source cut to meet a split, or -1 */
};

/* Every source is 8 x 8 x 2 (rope's positions I32, 2); t is what the
 * op's constructor makes of them. */
static void run_case(const struct rule_case *c)
{
	loom_ctx_t *ctx;
	struct loom_tensor *src[LOOM_MAX_SRC] = { 0 }, *t;
	struct meta_tensor rec[3] = { 0 }, *s[LOOM_MAX_SRC] = { 0 };
	struct meta_rule r;
	int32_t params[LOOM_MAX_OP_PARAMS] = { 0 };
	int n = loom_op_n_src(c->op);
	bool ok;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	for (int i = 0; i < n; i++) {
		src[i] = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 8, 8, 2);
		set_state(&rec[i], c->in[i], 3);
		s[i] = &rec[i];
	}
	if (c->op == LOOM_OP_ROPE) {
		const float base = 10000.0f, scale = 1.0f;

		src[1] = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 2);
		params[0] = 8;
		memcpy(&params[2], &base, sizeof(base));
		memcpy(&params[3], &scale, sizeof(scale));
	}
	if (c->op == LOOM_OP_ROPE_YARN) {
		const float f[] = { 10000.0f, 0.25f, 1.0f, 1.0f, 32.0f, 1.0f };

		src[1] = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 2);
		params[0] = 8;
		params[4] = 4096;
		memcpy(&params[2], &f[0], 2 * sizeof(*f));
		memcpy(&params[5], &f[2], 4 * sizeof(*f));
	}
	if (c->op == LOOM_OP_SOFT_MAX_SINKS) {
		/* a mask broadcast over the heads; one sink per head */
		src[1] = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 8, 8, 1);
		src[2] = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 2);
	}
	if (c->op == LOOM_OP_SWIGLU_OAI) {
		const float f[] = { 1.702f, 7.0f };

		memcpy(params, f, sizeof(f));
	}
	if (c->op == LOOM_OP_ADD_ID) {
		src[1] = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 4);
		src[2] = loom_tensor_new_2d(ctx, LOOM_TYPE_I32, 8, 2);
	}
	if (c->op == LOOM_OP_TOP_K || c->op == LOOM_OP_CONCAT)
		params[0] = 2; /* k; the dimension concatenated */
	t = loom_op_new(ctx, c->op, src, params);
	if (!t)
		g_error("%s: %s", c->what, loom_ctx_error(ctx));
	ok = meta_rule_find(t, s, &r, &md);
	if (c->want == NO) {
		g_assert_false(ok);
	} else {
		g_assert_true(ok);
		g_assert_cmpint(r.out.state, ==, c->want);
		for (int i = 0; i < n; i++)
			g_assert_cmpint(r.slice_dim[i] >= 0, ==,
					i == c->cut_src);
	}
	loom_ctx_free(ctx);
}

static const struct rule_case cases[] = {
	/* elementwise: PARTIAL where the op is additive or linear */
	{ "add P+P", LOOM_OP_ADD, { P, P }, P, -1 },
	{ "sub P-M", LOOM_OP_SUB, { P, M }, NO, -1 },
	{ "mul P*M", LOOM_OP_MUL, { P, M }, P, -1 },
	{ "mul M*P", LOOM_OP_MUL, { M, P }, P, -1 },
	{ "mul P*P", LOOM_OP_MUL, { P, P }, NO, -1 },
	{ "div M by P", LOOM_OP_DIV, { M, P }, NO, -1 },
	{ "add S1+M cuts b", LOOM_OP_ADD, { D1, M }, D1, 1 },
	{ "add M+S1 cuts a", LOOM_OP_ADD, { M, D1 }, D1, 0 },
	{ "add S1+S1", LOOM_OP_ADD, { D1, D1 }, D1, -1 },
	/* map: any state; PARTIAL only where linear */
	{ "scale P", LOOM_OP_SCALE, { P }, P, -1 },
	{ "silu P", LOOM_OP_SILU, { P }, NO, -1 },
	{ "gelu S0", LOOM_OP_GELU, { D0 }, D0, -1 },
	{ "cont P", LOOM_OP_CONT, { P }, P, -1 },
	/* rows: dimension 0 whole */
	{ "rms_norm S0", LOOM_OP_RMS_NORM, { D0 }, NO, -1 },
	{ "rms_norm S1", LOOM_OP_RMS_NORM, { D1 }, D1, -1 },
	{ "norm P", LOOM_OP_NORM, { P }, NO, -1 },
	{ "sum_rows P", LOOM_OP_SUM_ROWS, { P }, P, -1 },
	{ "sum_rows S0", LOOM_OP_SUM_ROWS, { D0 }, NO, -1 },
	{ "top_k S2", LOOM_OP_TOP_K, { D2 }, D2, -1 },
	/* soft_max with a mask */
	{ "soft_max S1 mask M cut", LOOM_OP_SOFT_MAX, { D1, M }, D1, 1 },
	{ "soft_max S0", LOOM_OP_SOFT_MAX, { D0, M }, NO, -1 },
	/* rope: positions whole */
	{ "rope S1", LOOM_OP_ROPE, { D1, M }, D1, -1 },
	{ "rope S2 cuts positions", LOOM_OP_ROPE, { D2, M }, D2, 1 },
	{ "rope positions split", LOOM_OP_ROPE, { M, D0 }, NO, -1 },
	/* mul_mat */
	{ "mul_mat S1 x M", LOOM_OP_MUL_MAT, { D1, M }, D0, -1 },
	{ "mul_mat S0 x S0", LOOM_OP_MUL_MAT, { D0, D0 }, P, -1 },
	{ "mul_mat M x S0 cuts a", LOOM_OP_MUL_MAT, { M, D0 }, P, 0 },
	{ "mul_mat S0 x M cuts b", LOOM_OP_MUL_MAT, { D0, M }, P, 1 },
	{ "mul_mat M x S1", LOOM_OP_MUL_MAT, { M, D1 }, D1, -1 },
	{ "mul_mat P x M", LOOM_OP_MUL_MAT, { P, M }, P, -1 },
	{ "mul_mat P x P", LOOM_OP_MUL_MAT, { P, P }, NO, -1 },
	{ "mul_mat S2 x S2", LOOM_OP_MUL_MAT, { D2, D2 }, D2, -1 },
	/* copy: the destination's state */
	{ "copy M to M", LOOM_OP_COPY, { M, M }, M, -1 },
	{ "copy S1 to S1", LOOM_OP_COPY, { D1, D1 }, D1, -1 },
	{ "copy M to S1 cuts a", LOOM_OP_COPY, { M, D1 }, D1, 0 },
	{ "copy P", LOOM_OP_COPY, { P, M }, NO, -1 },
	/* concat: not along the split */
	{ "concat P P", LOOM_OP_CONCAT, { P, P }, P, -1 },
	{ "concat along S2", LOOM_OP_CONCAT, { D2, D2 }, NO, -1 },
	{ "concat S1 S1", LOOM_OP_CONCAT, { D1, D1 }, D1, -1 },
	/* soft_max_sinks: the sinks follow the heads */
	{ "soft_max_sinks S2 cuts sinks", LOOM_OP_SOFT_MAX_SINKS, { D2, M, M },
	  D2, 2 },
	{ "soft_max_sinks S1 cuts mask", LOOM_OP_SOFT_MAX_SINKS, { D1, M, M },
	  D1, 1 },
	{ "soft_max_sinks M", LOOM_OP_SOFT_MAX_SINKS, { M, M, M }, M, -1 },
	{ "soft_max_sinks sinks split", LOOM_OP_SOFT_MAX_SINKS, { D2, M, D0 },
	  NO, -1 },
	{ "soft_max_sinks P", LOOM_OP_SOFT_MAX_SINKS, { P, M, M }, NO, -1 },
	/* rope_yarn: never cut inside a head */
	{ "rope_yarn S2 cuts positions", LOOM_OP_ROPE_YARN, { D2, M }, D2, 1 },
	{ "rope_yarn S0", LOOM_OP_ROPE_YARN, { D0, M }, NO, -1 },
	/* swiglu_oai: elementwise, no PARTIAL */
	{ "swiglu_oai S1 S1", LOOM_OP_SWIGLU_OAI, { D1, D1 }, D1, -1 },
	{ "swiglu_oai S0 M cuts up", LOOM_OP_SWIGLU_OAI, { D0, M }, D0, 1 },
	{ "swiglu_oai P", LOOM_OP_SWIGLU_OAI, { P, M }, NO, -1 },
	/* add_id: the biases follow a's rows; ids whole */
	{ "add_id M", LOOM_OP_ADD_ID, { M, M, M }, M, -1 },
	{ "add_id S0 cuts biases", LOOM_OP_ADD_ID, { D0, M, M }, D0, 1 },
	{ "add_id S0 S0", LOOM_OP_ADD_ID, { D0, D0, M }, D0, -1 },
	{ "add_id P P", LOOM_OP_ADD_ID, { P, P, M }, P, -1 },
	{ "add_id P M", LOOM_OP_ADD_ID, { P, M, M }, NO, -1 },
	{ "add_id S1", LOOM_OP_ADD_ID, { D1, M, M }, NO, -1 },
	{ "add_id ids split", LOOM_OP_ADD_ID, { M, M, D0 }, NO, -1 },
};

static void test_case(gconstpointer data)
{
	run_case(data);
}

/* Two sources split on one dimension but cut at different places meet
 * no rule. */
static void test_cut_differs(void)
{
	loom_ctx_t *ctx;
	struct loom_tensor *src[LOOM_MAX_SRC] = { 0 }, *t;
	struct meta_tensor a = { 0 }, b = { 0 };
	struct meta_tensor *s[LOOM_MAX_SRC] = { &a, &b };
	struct meta_rule r;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	src[0] = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 8);
	src[1] = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 8);
	t = loom_op_new(ctx, LOOM_OP_ADD, src, NULL);
	set_state(&a, D1, 3);
	set_state(&b, D1, 4);
	g_assert_false(meta_rule_find(t, s, &r, &md));
	set_state(&b, D1, 3);
	g_assert_true(meta_rule_find(t, s, &r, &md));
	loom_ctx_free(ctx);
}

/* A MIRRORED matrix times MIRRORED activations into an output of the
 * graph (tied logits): each member takes its share of the matrix's rows,
 * in whole runs of 32, the last member the rest; a node that is not an
 * output, or too few rows, stays whole on every member. */
static void test_output_rows(void)
{
	struct meta_dev even = { .n = 2, .n_all = 2,
				 .ratios_all = { 1.0f, 1.0f } };
	loom_ctx_t *ctx;
	struct loom_tensor *src[LOOM_MAX_SRC] = { 0 }, *t;
	struct meta_tensor a = { 0 }, b = { 0 };
	struct meta_tensor *s[LOOM_MAX_SRC] = { &a, &b };
	struct meta_rule r;
	const int64_t rows[] = { 300, 127 };

	set_state(&a, M, 0);
	set_state(&b, M, 0);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(rows); i++) {
		src[0] = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, rows[i]);
		src[1] = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, 3);
		t = loom_op_new(ctx, LOOM_OP_MUL_MAT, src, NULL);
		g_assert_true(meta_rule_find(t, s, &r, &even));
		g_assert_cmpint(r.out.state, ==, M);
		loom_tensor_set_flags(t, LOOM_TENSOR_OUTPUT);
		g_assert_true(meta_rule_find(t, s, &r, &even));
		if (rows[i] < 128) {
			g_assert_cmpint(r.out.state, ==, M);
			g_assert_cmpint(r.slice_dim[0], ==, -1);
			continue;
		}
		/* 9 runs of 32 (5 + 4), the 12 rows past them last */
		g_assert_cmpint(r.out.state, ==, D0);
		g_assert_cmpint(r.out.len[0][0], ==, 160);
		g_assert_cmpint(r.out.len[0][1], ==, 140);
		g_assert_cmpint(r.slice_dim[0], ==, 1);
		g_assert_true(r.slice_ref[0] == &r.out);
		g_assert_cmpint(r.slice_dim[1], ==, -1);
	}
	loom_ctx_free(ctx);
}

/* Every op the table gives a rule other than NONE and VIEW reaches a
 * rule function (one that answers for M sources). */
static void test_every_rule(void)
{
	for (int op = 0; op < LOOM_OP_COUNT; op++) {
		enum loom_split_rule k = loom_op_split_rule(op);

		g_assert_cmpint(k, <, LOOM_SPLIT_RULE_COUNT);
		if (op == LOOM_OP_NONE || loom_op_is_view(op))
			g_assert_true(k == LOOM_SPLIT_RULE_NONE ||
				      k == LOOM_SPLIT_RULE_VIEW);
		else
			g_assert_cmpint(k, !=, LOOM_SPLIT_RULE_NONE);
	}
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		char *path = g_strdup_printf("/meta-rules/%s", cases[i].what);

		g_test_add_data_func(path, &cases[i], test_case);
		g_free(path);
	}
	g_test_add_func("/meta-rules/cut-differs", test_cut_differs);
	g_test_add_func("/meta-rules/every-rule", test_every_rule);
	g_test_add_func("/meta-rules/output-rows", test_output_rows);
	return g_test_run();
}
