/* SPDX-License-Identifier: MIT */
/* test-gpu-limits.c - the GPU plugins past the sizes the op suite uses:
 * more than 65,535 rows (grid limits), more than 2^31 elements (32-bit
 * index overflow), a 4096^3 GEMM against a sampled double reference, a
 * batch of 70,000 small GEMMs on both GEMM paths and of GEMVs, and
 * 80,000 expert pairs grouped.  Results of the row ops
 * are checked against the CPU plugin, which the op suite checks against a
 * double reference.  Skips without a GPU; tests/check-gpu.sh runs it.
 */
#include "test-util.h"

#include <glib.h>
#include <math.h>
#include <string.h>

static loom_dev_t *gpu(void)
{
	for (size_t i = 0; i < loom_dev_count(); i++) {
		loom_dev_t *d = loom_dev_get(i);

		if (loom_dev_type(d) == LOOM_DEV_TYPE_GPU)
			return d;
	}
	return NULL;
}

/* Builds the graph of a case in ctx from its inputs; returns the output. */
typedef struct loom_tensor *(*build_fn)(loom_ctx_t *ctx,
					 struct loom_tensor **in);

struct run {
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	loom_backend_t *be;
	struct loom_tensor *in[4], *out;
};

/* Makes the case's tensors on dev, fills the inputs (F32/F16/BF16 uniform
 * in [-1, 1), I32 ids in [0, id_range)) from seed, and computes. */
static void run_case(struct run *r, loom_dev_t *dev, const char *params,
		     build_fn build, int n_in, const enum loom_type *types,
		     const int64_t (*ne)[4], int64_t id_range, uint64_t seed)
{
	struct loom_test_rng rng;
	loom_graph_t *g;

	memset(r, 0, sizeof(*r));
	loom_test_rng_seed(&rng, seed);
	g_assert_cmpint(loom_dev_init_backend(dev, params, &r->be), ==,
			LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &r->ctx), ==, LOOM_OK);
	for (int i = 0; i < n_in; i++) {
		r->in[i] = loom_tensor_new(r->ctx, types[i], 4, ne[i]);
		g_assert_nonnull(r->in[i]);
	}
	r->out = build(r->ctx, r->in);
	g_assert_nonnull(r->out);
	g_assert_cmpint(loom_graph_new(r->ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, r->out), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(r->ctx,
					       loom_dev_buffer_type(dev),
					       &r->buf), ==, LOOM_OK);
	for (int i = 0; i < n_in; i++) {
		struct loom_tensor *t = r->in[i];

		if (t->type == LOOM_TYPE_I32) {
			int64_t n = loom_tensor_n_elements(t);
			int32_t *ids = g_new(int32_t, n);

			for (int64_t j = 0; j < n; j++)
				ids[j] = (int32_t)loom_test_rng_int(&rng,
								    id_range);
			g_assert_cmpint(loom_test_set_i32(t, ids), ==, LOOM_OK);
			g_free(ids);
		} else {
			g_assert_cmpint(loom_test_fill_uniform(t, &rng, -1, 1),
					==, LOOM_OK);
		}
	}
	g_assert_cmpint(loom_backend_graph_compute(r->be, g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(r->be), ==, LOOM_OK);
}

static void run_free(struct run *r)
{
	loom_buffer_free(r->buf);
	loom_ctx_free(r->ctx);
	loom_backend_free(r->be);
}

/* The case on the GPU against the same case on cpu0. */
static void check_against_cpu(const char *what, const char *params,
			      build_fn build, int n_in,
			      const enum loom_type *types,
			      const int64_t (*ne)[4], int64_t id_range,
			      double bound)
{
	loom_dev_t *g = gpu(), *c = loom_dev_by_name("cpu0");
	struct run rg, rc;
	double *dg, *dc, nmse;
	char *err = NULL;

	run_case(&rg, g, params, build, n_in, types, ne, id_range, 5);
	run_case(&rc, c, NULL, build, n_in, types, ne, id_range, 5);
	dg = loom_test_get_doubles(rg.out, &err);
	dc = loom_test_get_doubles(rc.out, &err);
	g_assert_nonnull(dg);
	g_assert_nonnull(dc);
	nmse = loom_test_nmse(dc, dg, loom_tensor_n_elements(rc.out));
	g_test_message("%s%s%s: nmse %g against cpu0", what,
		       params ? " " : "", params ? params : "", nmse);
	g_assert_cmpfloat(nmse, <=, bound);
	g_free(dc);
	g_free(dg);
	run_free(&rc);
	run_free(&rg);
}

#define ROWS 100000

static struct loom_tensor *b_add(loom_ctx_t *ctx, struct loom_tensor **in)
{
	return loom_add(ctx, in[0], in[1]);
}

static struct loom_tensor *b_soft_max(loom_ctx_t *ctx,
				      struct loom_tensor **in)
{
	return loom_soft_max(ctx, in[0], NULL, 0.7f);
}

static struct loom_tensor *b_rms_norm(loom_ctx_t *ctx,
				      struct loom_tensor **in)
{
	return loom_rms_norm(ctx, in[0], 1e-6f);
}

static struct loom_tensor *b_sum_rows(loom_ctx_t *ctx,
				      struct loom_tensor **in)
{
	return loom_sum_rows(ctx, in[0]);
}

static struct loom_tensor *b_get_rows(loom_ctx_t *ctx,
				      struct loom_tensor **in)
{
	return loom_get_rows(ctx, in[0], in[1]);
}

static struct loom_tensor *b_mul_mat(loom_ctx_t *ctx,
				     struct loom_tensor **in)
{
	return loom_mul_mat(ctx, in[0], in[1]);
}

/* Ops over more rows than a grid dimension holds. */
static void test_many_rows(void)
{
	static const enum loom_type f1[] = { LOOM_TYPE_F32, LOOM_TYPE_F32 };
	static const int64_t add_ne[][4] = { { 8, ROWS, 1, 1 },
					     { 8, 1, 1, 1 } };
	static const int64_t rows_ne[][4] = { { 8, ROWS, 1, 1 } };
	static const enum loom_type gr[] = { LOOM_TYPE_F32, LOOM_TYPE_I32 };
	static const int64_t gr_ne[][4] = { { 16, 300, 1, 1 },
					    { ROWS, 1, 1, 1 } };

	if (!gpu() || !loom_dev_by_name("cpu0")) {
		g_test_skip("no GPU device (or no cpu0)");
		return;
	}
	check_against_cpu("add, 1e5 rows", NULL, b_add, 2, f1, add_ne, 0, 0);
	check_against_cpu("soft_max, 1e5 rows", NULL, b_soft_max, 1, f1,
			  rows_ne, 0, 1e-10);
	check_against_cpu("rms_norm, 1e5 rows", NULL, b_rms_norm, 1, f1,
			  rows_ne, 0, 1e-10);
	check_against_cpu("sum_rows, 1e5 rows", NULL, b_sum_rows, 1, f1,
			  rows_ne, 0, 1e-10);
	check_against_cpu("get_rows, 1e5 ids", NULL, b_get_rows, 2, gr, gr_ne,
			  300, 0);
}

static struct loom_tensor *b_mul_mat_id(loom_ctx_t *ctx,
					struct loom_tensor **in)
{
	return loom_mul_mat_id(ctx, in[0], in[1], in[2]);
}

/* A batch of 70,000 small GEMMs (past the 65,535 grid limit), on the BLAS
 * and on the plugin's own GEMM; as many GEMVs of quantized weights (one
 * group of columns each); experts for 20,000 tokens of 4 (80,000 pairs
 * grouped by expert). */
static void test_many_gemms(void)
{
	static const enum loom_type t[] = { LOOM_TYPE_F32, LOOM_TYPE_F32 };
	static const enum loom_type tq[] = { LOOM_TYPE_Q4_0, LOOM_TYPE_F32 };
	static const enum loom_type te[] = { LOOM_TYPE_BF16, LOOM_TYPE_F32,
					     LOOM_TYPE_I32 };
	static const int64_t ne[][4] = { { 32, 8, 70000, 1 },
					 { 32, 4, 70000, 1 } };
	static const int64_t ne_e[][4] = { { 64, 16, 8, 1 },
					   { 64, 1, 20000, 1 },
					   { 4, 20000, 1, 1 } };

	if (!gpu() || !loom_dev_by_name("cpu0")) {
		g_test_skip("no GPU device (or no cpu0)");
		return;
	}
	check_against_cpu("70000 GEMMs", NULL, b_mul_mat, 2, t, ne, 0, 1e-6);
	check_against_cpu("70000 GEMMs", "gemm=own", b_mul_mat, 2, t, ne, 0,
			  1e-10);
	/* 8-bit activations on the GPU: the op suite's bound for Q8_0. */
	check_against_cpu("70000 GEMVs q4_0", NULL, b_mul_mat, 2, tq, ne, 0,
			  2e-4);
	check_against_cpu("80000 expert pairs", NULL, b_mul_mat_id, 3, te,
			  ne_e, 8, 1e-4);
}

/* An elementwise op over 2^31 + 1000 F16 values: every index past 2^31 is
 * written, and right.  The input is one byte pattern (memset), so the
 * expected value is known without a host copy of 4 GiB. */
static void test_huge_elementwise(void)
{
	const int64_t n = ((int64_t)1 << 31) + 1000;
	loom_dev_t *dev = gpu();
	struct loom_tensor *x, *y;
	loom_backend_t *be;
	loom_buffer_t *buf;
	loom_graph_t *g;
	loom_ctx_t *ctx;
	size_t free_mem = 0, total = 0;
	float tail[2048], want;
	uint16_t h = 0x3c3c; /* the memset pattern as an F16 value */

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	loom_dev_memory(dev, &free_mem, &total);
	if (free_mem < ((size_t)14 << 30)) {
		g_test_skip("under 14 GiB free on the GPU");
		return;
	}
	want = 2.0f * loom_f16_to_f32(h);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_1d(ctx, LOOM_TYPE_F16, n);
	y = loom_scale(ctx, x, 2.0f);
	g_assert_nonnull(y);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_memset(x, 0x3c, 0, loom_tensor_n_bytes(x)),
			==, LOOM_OK);
	g_assert_cmpint(loom_tensor_memset(y, 0, 0, loom_tensor_n_bytes(y)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	/* The last 2048 values (across 2^31) and a few before. */
	g_assert_cmpint(loom_tensor_get(y, tail, (size_t)(n - 2048) * 4,
					sizeof(tail)), ==, LOOM_OK);
	for (int i = 0; i < 2048; i++)
		g_assert_cmpfloat(tail[i], ==, want);
	for (int64_t at = 0; at < n; at += n / 7) {
		g_assert_cmpint(loom_tensor_get(y, tail, (size_t)at * 4, 4), ==,
				LOOM_OK);
		g_assert_cmpfloat(tail[0], ==, want);
	}
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	loom_backend_free(be);
}

/* 4096^3 in F32 and BF16, 512 outputs against a double reference. */
static void test_big_gemm(void)
{
	enum { S = 4096, SAMPLES = 512 };
	static const enum loom_type types[] = { LOOM_TYPE_F32, LOOM_TYPE_BF16 };
	loom_dev_t *dev = gpu();

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	for (size_t ti = 0; ti < G_N_ELEMENTS(types); ti++) {
		const enum loom_type t[] = { types[ti], LOOM_TYPE_F32 };
		const int64_t ne[][4] = { { S, S, 1, 1 }, { S, S, 1, 1 } };
		struct loom_test_rng pick;
		double *da, *db, *dc, ref[SAMPLES], got[SAMPLES];
		char *err = NULL;
		struct run r;

		run_case(&r, dev, NULL, b_mul_mat, 2, t, ne, 0, 9);
		da = loom_test_get_doubles(r.in[0], &err);
		db = loom_test_get_doubles(r.in[1], &err);
		dc = loom_test_get_doubles(r.out, &err);
		g_assert_nonnull(da);
		g_assert_nonnull(db);
		g_assert_nonnull(dc);
		loom_test_rng_seed(&pick, 3);
		for (int s = 0; s < SAMPLES; s++) {
			int64_t m = loom_test_rng_int(&pick, S);
			int64_t nn = loom_test_rng_int(&pick, S);

			ref[s] = 0;
			for (int64_t k = 0; k < S; k++)
				ref[s] += da[m * S + k] * db[nn * S + k];
			got[s] = dc[nn * S + m];
		}
		double nmse = loom_test_nmse(ref, got, SAMPLES);

		g_test_message("gemm 4096^3 %s: nmse %g over %d samples",
			       loom_type_name(types[ti]), nmse, SAMPLES);
		/* F32 may run on TF32-free cuBLAS F32; BF16 rounds b. */
		g_assert_cmpfloat(nmse, <, ti ? 1e-4 : 1e-9);
		g_free(dc);
		g_free(db);
		g_free(da);
		run_free(&r);
	}
}

int main(int argc, char **argv)
{
	int ret;

	g_test_init(&argc, &argv, NULL);
	loom_test_load_plugins();
	g_test_add_func("/gpu-limits/many_rows", test_many_rows);
	g_test_add_func("/gpu-limits/many_gemms", test_many_gemms);
	g_test_add_func("/gpu-limits/huge_elementwise", test_huge_elementwise);
	g_test_add_func("/gpu-limits/big_gemm", test_big_gemm);
	ret = g_test_run();
	loom_unload_all();
	return ret;
}
