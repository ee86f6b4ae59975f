/* SPDX-License-Identifier: MIT */
/* test-cpu-pool.c - the CPU plugin's thread pool and stream: results that
 * do not depend on the thread count, nor on other work contending for
 * the cores, queued (async) graphs in order, 2D set/get, the entry points
 * and the variant the loader picked.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "loom/loom-plugin.h"

static loom_reg_t *load_cpu(void)
{
	const char *path = g_getenv("LOOM_TEST_PLUGIN_PATH");
	loom_reg_t *reg;

	if (path)
		g_setenv("LOOM_PLUGIN_PATH", path, TRUE);
	g_setenv("LOOM_BACKENDS", "cpu", TRUE);
	g_unsetenv("LOOM_CPU_DEVICES");
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	reg = loom_reg_by_name("cpu");
	g_assert_nonnull(reg);
	g_assert_cmpuint(loom_reg_dev_count(reg), >=, 1);
	return reg;
}

static void fill(float *x, size_t n, guint32 seed)
{
	GRand *r = g_rand_new_with_seed(seed);
	size_t i;

	for (i = 0; i < n; i++)
		x[i] = (float)g_rand_double_range(r, -2.0, 2.0);
	g_rand_free(r);
}

/* Relative error of got against want, over n values. */
static double nmse(const float *got, const double *want, size_t n)
{
	double err = 0, ref = 0;
	size_t i;

	for (i = 0; i < n; i++) {
		err += (got[i] - want[i]) * (got[i] - want[i]);
		ref += want[i] * want[i];
	}
	return ref > 0 ? err / ref : err;
}

#define NE0 67
#define NE1 13

/* f = scale(soft_max(rms_norm(silu((x + y) * x)), 0.5), 3); g = its row
 * sums; computed with n_threads, checked against double. */
static void run_chain(loom_dev_t *dev, int n_threads)
{
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_backend_t *be;
	loom_buffer_t *buf;
	struct loom_tensor *x, *y, *t, *f, *s;
	float xv[NE0 * NE1], yv[NE0], fv[NE0 * NE1], sv[NE1];
	double fr[NE0 * NE1], sr[NE1];
	int i, j;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, NE0, NE1);
	y = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, NE0, 1);
	t = loom_add(ctx, x, y);
	t = loom_mul(ctx, t, x);
	t = loom_silu(ctx, t);
	t = loom_rms_norm(ctx, t, 1e-5f);
	t = loom_soft_max(ctx, t, NULL, 0.5f);
	f = loom_scale(ctx, t, 3.0f);
	s = loom_sum_rows(ctx, f);
	g_assert_nonnull(s);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, s), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);

	fill(xv, NE0 * NE1, 1);
	fill(yv, NE0, 2);
	loom_tensor_set(x, xv, 0, sizeof(xv));
	loom_tensor_set(y, yv, 0, sizeof(yv));

	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_set_n_threads(be, n_threads), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	loom_tensor_get(f, fv, 0, sizeof(fv));
	loom_tensor_get(s, sv, 0, sizeof(sv));

	for (j = 0; j < NE1; j++) {
		double row[NE0], ss = 0, max = -INFINITY, sum = 0;

		for (i = 0; i < NE0; i++) {
			double a = ((double)xv[j * NE0 + i] + yv[i]) *
				   xv[j * NE0 + i];

			row[i] = a / (1 + exp(-a));
			ss += row[i] * row[i];
		}
		for (i = 0; i < NE0; i++) {
			row[i] = row[i] / sqrt(ss / NE0 + 1e-5) * 0.5;
			max = fmax(max, row[i]);
		}
		for (i = 0; i < NE0; i++)
			sum += row[i] = exp(row[i] - max);
		sr[j] = 0;
		for (i = 0; i < NE0; i++) {
			fr[j * NE0 + i] = 3 * row[i] / sum;
			sr[j] += fr[j * NE0 + i];
		}
	}
	g_assert_cmpfloat(nmse(fv, fr, NE0 * NE1), <, 1e-10);
	g_assert_cmpfloat(nmse(sv, sr, NE1), <, 1e-10);

	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

static void test_threads(void)
{
	loom_reg_t *reg = load_cpu();
	int n;

	for (n = 1; n <= 4; n++)
		run_chain(loom_reg_dev(reg, 0), n);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* Every variant built here that this CPU can run computes the same
 * results: make check otherwise only runs the one the loader picks. */
static void test_variants(void)
{
	const char *path = g_getenv("LOOM_TEST_PLUGIN_PATH");
	char **dirs;
	int i, ran = 0;

	if (!path) {
		g_test_skip("LOOM_TEST_PLUGIN_PATH is not set");
		return;
	}
	dirs = g_strsplit(path, ":", -1);
	for (i = 0; dirs[i]; i++) {
		GDir *d = g_dir_open(dirs[i], 0, NULL);
		const char *name;

		if (!d)
			continue;
		while ((name = g_dir_read_name(d))) {
			char *file;
			loom_reg_t *reg;

			if (!g_str_has_prefix(name, "loom-cpu") ||
			    !g_str_has_suffix(name, ".so"))
				continue;
			file = g_build_filename(dirs[i], name, NULL);
			if (loom_load_path(file, &reg) != LOOM_OK) {
				g_test_message("%s: %s", name,
					       loom_error_message());
			} else {
				g_test_message("%s: runs here", name);
				run_chain(loom_reg_dev(reg, 0), 1);
				run_chain(loom_reg_dev(reg, 0), 3);
				ran++;
			}
			g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
			g_free(file);
		}
		g_dir_close(d);
	}
	g_strfreev(dirs);
	/* The baseline module runs on every machine. */
	g_assert_cmpint(ran, >=, 1);
}

/* A long vector takes the flat path, split by elements not rows. */
static void test_flat(void)
{
	loom_reg_t *reg = load_cpu();
	loom_dev_t *dev = loom_reg_dev(reg, 0);
	const size_t n = 100003;
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_backend_t *be;
	loom_buffer_t *buf;
	struct loom_tensor *a, *b, *c;
	float *av = g_new(float, n), *bv = g_new(float, n);
	float *cv = g_new(float, n);
	int nth;
	size_t i;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, n);
	b = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, n);
	c = loom_gelu(ctx, loom_sub(ctx, a, b));
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, c), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	fill(av, n, 3);
	fill(bv, n, 4);
	loom_tensor_set(a, av, 0, n * sizeof(float));
	loom_tensor_set(b, bv, 0, n * sizeof(float));
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	for (nth = 1; nth <= 3; nth++) {
		double err = 0;

		g_assert_cmpint(loom_backend_set_n_threads(be, nth), ==,
				LOOM_OK);
		memset(cv, 0, n * sizeof(float));
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
				LOOM_OK);
		loom_tensor_get(c, cv, 0, n * sizeof(float));
		for (i = 0; i < n; i++) {
			double v = (double)av[i] - bv[i];
			double want = 0.5 * v *
				      (1 + tanh(sqrt(2 / M_PI) *
						(v + 0.044715 * v * v * v)));

			err = fmax(err, fabs(cv[i] - want));
		}
		g_assert_cmpfloat(err, <, 1e-5);
	}
	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	g_free(av);
	g_free(bv);
	g_free(cv);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* Several graphs queued without waiting run in order; synchronize waits
 * for all of them.  Also times the dispatch of tiny nodes. */
static void test_async(void)
{
	loom_reg_t *reg = load_cpu();
	loom_dev_t *dev = loom_reg_dev(reg, 0);
	enum { N_NODES = 2000, N_GRAPHS = 3 };
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_backend_t *be;
	loom_buffer_t *buf;
	struct loom_tensor *x, *one, *t;
	float xv[16], ov[16];
	gint64 t0, t1;
	int i, k;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);
	one = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);
	t = x;
	for (i = 0; i < N_NODES; i++)
		t = loom_add(ctx, t, one);
	/* Write back into x, so each run starts where the last ended. */
	t = loom_copy(ctx, t, x);
	g_assert_nonnull(t);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, t), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	for (i = 0; i < 16; i++) {
		xv[i] = (float)i;
		ov[i] = 1.0f;
	}
	loom_tensor_set(x, xv, 0, sizeof(xv));
	loom_tensor_set(one, ov, 0, sizeof(ov));
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_set_n_threads(be, 2), ==, LOOM_OK);

	for (k = 0; k < N_GRAPHS; k++)
		g_assert_cmpint(loom_backend_graph_compute_async(be, g), ==,
				LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	loom_tensor_get(x, xv, 0, sizeof(xv));
	for (i = 0; i < 16; i++)
		g_assert_cmpfloat(xv[i], ==, (float)(i + N_NODES * N_GRAPHS));

	for (i = 1; i <= 2; i++) {
		g_assert_cmpint(loom_backend_set_n_threads(be, i), ==, LOOM_OK);
		loom_backend_graph_compute(be, g);
		t0 = g_get_monotonic_time();
		for (k = 0; k < 5; k++)
			loom_backend_graph_compute(be, g);
		t1 = g_get_monotonic_time();
		g_test_message("dispatch: %.0f ns per node (%d threads, 16 "
			       "floats)",
			       (t1 - t0) * 1000.0 / (5.0 * (N_NODES + 1)), i);
	}

	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

static void test_2d(void)
{
	loom_reg_t *reg = load_cpu();
	loom_dev_t *dev = loom_reg_dev(reg, 0);
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *t;
	float host[10 * 6], back[10 * 6], dev_all[8 * 5];
	int i, r;

	g_assert_nonnull(loom_reg_proc_address(reg, LOOM_PROC_SET_TENSOR_2D));
	g_assert_nonnull(loom_reg_proc_address(reg, LOOM_PROC_GET_TENSOR_2D));
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	t = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 5);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	memset(dev_all, 0, sizeof(dev_all));
	loom_tensor_set(t, dev_all, 0, sizeof(dev_all));
	for (i = 0; i < 60; i++)
		host[i] = (float)i;
	/* Rows 1..4 of t, elements 2..4, from host rows 10 floats apart. */
	g_assert_cmpint(loom_tensor_set_2d(t, host, 8 * 4 + 2 * 4, 3 * 4, 4,
					   8 * 4, 10 * 4), ==, LOOM_OK);
	loom_tensor_get(t, dev_all, 0, sizeof(dev_all));
	for (r = 0; r < 5; r++)
		for (i = 0; i < 8; i++) {
			float want = 0;

			if (r >= 1 && i >= 2 && i < 5)
				want = host[(r - 1) * 10 + (i - 2)];
			g_assert_cmpfloat(dev_all[r * 8 + i], ==, want);
		}
	memset(back, 0, sizeof(back));
	g_assert_cmpint(loom_tensor_get_2d(t, back, 8 * 4 + 2 * 4, 3 * 4, 4,
					   8 * 4, 6 * 4), ==, LOOM_OK);
	for (r = 0; r < 4; r++)
		for (i = 0; i < 3; i++)
			g_assert_cmpfloat(back[r * 6 + i], ==,
					  host[r * 10 + i]);
	/* Out of bounds is the core's to refuse. */
	g_assert_cmpint(loom_tensor_set_2d(t, host, 8 * 4, 8 * 4, 5, 8 * 4,
					   8 * 4), !=, LOOM_OK);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* Async copies run in the stream's order, between graphs. */
static void test_async_copies(void)
{
	loom_reg_t *reg = load_cpu();
	loom_dev_t *dev = loom_reg_dev(reg, 0);
	enum { N = 20000 };
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_backend_t *be;
	loom_buffer_t *buf;
	struct loom_tensor *x, *y, *s;
	float *v1 = g_new(float, N), *v2 = g_new(float, N);
	float *out1 = g_new0(float, N), *out2 = g_new0(float, N);
	float *out3 = g_new0(float, N);
	int i, k;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 100, N / 100);
	y = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 100, N / 100);
	s = loom_copy(ctx, loom_scale(ctx, x, 2.0f), x);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, s), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	fill(v1, N, 5);
	fill(v2, N, 6);
	g_assert_nonnull(loom_reg_proc_address(reg,
					       LOOM_PROC_SET_TENSOR_2D_ASYNC));
	for (k = 1; k <= 2; k++) {
		g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==,
				LOOM_OK);
		g_assert_cmpint(loom_backend_set_n_threads(be, k), ==,
				LOOM_OK);
		g_assert_cmpint(loom_backend_tensor_set_async(
					be, x, v1, 0, N * sizeof(float)), ==,
				LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute_async(be, g), ==,
				LOOM_OK);
		g_assert_cmpint(loom_backend_tensor_get_async(
					be, x, out1, 0, N * sizeof(float)), ==,
				LOOM_OK);
		/* Rows 0..N/100 of x, their first 10 values, set from v2 rows
		 * 100 apart, after the get above has read x. */
		g_assert_cmpint(loom_backend_tensor_set_2d_async(
					be, x, v2, 0, 10 * sizeof(float),
					N / 100, 100 * sizeof(float),
					100 * sizeof(float)), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute_async(be, g), ==,
				LOOM_OK);
		g_assert_cmpint(loom_backend_tensor_get_2d_async(
					be, x, out2, 0, 100 * sizeof(float),
					N / 100, 100 * sizeof(float),
					100 * sizeof(float)), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_tensor_copy_async(be, be, x, y),
				==, LOOM_OK);
		g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
		loom_tensor_get(y, out3, 0, N * sizeof(float));
		for (i = 0; i < N; i++) {
			float want2 = i % 100 < 10 ? 2 * v2[i] : 4 * v1[i];

			g_assert_cmpfloat(out1[i], ==, 2 * v1[i]);
			g_assert_cmpfloat(out2[i], ==, want2);
			g_assert_cmpfloat(out3[i], ==, want2);
		}
		loom_backend_free(be);
	}
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	g_free(v1);
	g_free(v2);
	g_free(out1);
	g_free(out2);
	g_free(out3);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* Caller mistakes come back as errors, never a crash: a graph whose
 * tensors have no memory, and bad thread counts or parameters. */
static void test_errors(void)
{
	loom_reg_t *reg = load_cpu();
	loom_dev_t *dev = loom_reg_dev(reg, 0);
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_backend_t *be;
	struct loom_tensor *a, *b;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 8);
	b = loom_silu(ctx, a);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, b), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_E_STATE);
	g_assert_cmpstr(loom_error_message(), !=, "");
	g_assert_cmpint(loom_backend_set_n_threads(be, 0), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_backend_set_n_threads(be, 3), ==, LOOM_OK);
	loom_backend_free(be);
	g_assert_cmpint(loom_dev_init_backend(dev, "threads=x", &be), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_dev_init_backend(dev, "threads=2", &be), ==,
			LOOM_OK);
	loom_backend_free(be);
	loom_ctx_free(ctx);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* Nothing of the caller's graph is read once compute has returned: a
 * graph whose last nodes are views (no kernel runs for them) is freed
 * right after each compute, and the freed memory is reused and scribbled
 * over at once, so a worker still walking it reads garbage (and ASan sees
 * a use after free). */
static void test_graph_freed_after_compute(void)
{
	loom_reg_t *reg = load_cpu();
	loom_dev_t *dev = loom_reg_dev(reg, 0);
	loom_backend_t *be;
	float xv[64], yv[64];
	int iter, i;

	fill(xv, 64, 7);
	g_assert_cmpint(loom_dev_init_backend(dev, "threads=4", &be), ==,
			LOOM_OK);
	for (iter = 0; iter < 3000; iter++) {
		loom_ctx_t *ctx;
		loom_graph_t *g;
		loom_buffer_t *buf;
		struct loom_tensor *x, *t;
		void *junk[8];

		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
		x = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 64);
		t = loom_add(ctx, x, x);
		for (i = 0; i < 400; i++)
			t = i % 2 ? loom_reshape_1d(ctx, t, 64)
				  : loom_reshape_2d(ctx, t, 32, 2);
		g_assert_nonnull(t);
		g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g, t), ==, LOOM_OK);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					ctx, loom_dev_buffer_type(dev), &buf),
				==, LOOM_OK);
		g_assert_cmpint(loom_tensor_set(x, xv, 0, sizeof(xv)), ==,
				LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
				LOOM_OK);
		g_assert_cmpint(loom_tensor_get(t, yv, 0, sizeof(yv)), ==,
				LOOM_OK);
		for (i = 0; i < 64; i++)
			g_assert_cmpfloat(yv[i], ==, 2 * xv[i]);
		loom_ctx_free(ctx);
		loom_buffer_free(buf);
		/* Reuse what was freed, with bytes that are no pointers. */
		for (i = 0; i < 8; i++) {
			size_t n = (size_t)64 << i;

			junk[i] = g_malloc(n);
			memset(junk[i], 0xa5, n);
		}
		for (i = 0; i < 8; i++)
			g_free(junk[i]);
	}
	loom_backend_free(be);
	loom_unload_all();
}

/* Non-finite inputs give defined results: NaN in, NaN out through silu,
 * gelu and soft_max (whose exponential once converted NaN to an int, which
 * UBSan reports), and infinities stay what the kernels promise. */
static void test_non_finite(void)
{
	loom_reg_t *reg = load_cpu();
	loom_dev_t *dev = loom_reg_dev(reg, 0);
	const float xv[8] = { NAN, INFINITY, -INFINITY, 0.0f,
			      1.0f, -1.0f, 100.0f, -100.0f };
	float sv[8], gv[8], mv[8];
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_backend_t *be;
	loom_buffer_t *buf;
	struct loom_tensor *x, *si, *ge, *sm, *fin;
	int i;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 8);
	si = loom_silu(ctx, x);
	ge = loom_gelu(ctx, x);
	sm = loom_soft_max(ctx, x, NULL, 1.0f);
	/* The finite half of x alone, for a soft_max without NaN. */
	fin = loom_soft_max(ctx, loom_view_1d(ctx, x, 4, 4 * sizeof(float)),
			    NULL, 1.0f);
	g_assert_nonnull(fin);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, si), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, ge), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, sm), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, fin), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(x, xv, 0, sizeof(xv)), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, "threads=1", &be), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	loom_tensor_get(si, sv, 0, sizeof(sv));
	loom_tensor_get(ge, gv, 0, sizeof(gv));
	loom_tensor_get(sm, mv, 0, sizeof(mv));

	g_assert_true(isnan(sv[0]));
	g_assert_true(isnan(gv[0]));
	g_assert_true(isnan(mv[0]));
	g_assert_cmpfloat(sv[1], ==, INFINITY);
	g_assert_cmpfloat(gv[1], ==, INFINITY);
	g_assert_cmpfloat(sv[3], ==, 0.0f);
	g_assert_cmpfloat(gv[3], ==, 0.0f);
	for (i = 3; i < 8; i++) {
		double v = xv[i], s = v / (1 + exp(-v));

		g_assert_cmpfloat(fabs(sv[i] - s), <=, 1e-5 * (1 + fabs(s)));
		g_assert_true(isfinite(gv[i]));
	}
	loom_tensor_get(fin, mv, 0, 4 * sizeof(float));
	{
		double e[4], sum = 0;

		for (i = 0; i < 4; i++)
			sum += e[i] = exp(xv[4 + i] - 100.0);
		for (i = 0; i < 4; i++)
			g_assert_cmpfloat(fabs(mv[i] - e[i] / sum), <=, 1e-6);
	}
	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	loom_unload_all();
}

/* ------------------------------------------------------------------------
 * Contended cores: with busy threads on every core the pool must notice
 * (it logs so) and run a fine-grained graph (a decode step's: products of
 * a few columns) on half its threads, or on the caller's where that is
 * one, with the same results.
 */

#define CK 512
#define CN 2
/* Layers enough that a graph is a job the pool looks at (a few hundred
 * microseconds) even on a fast machine. */
#define CLAYERS 128

static volatile gint busy_stop;
static volatile gint saw_contended;
static volatile gint saw_here;

static gpointer busy_loop(gpointer data)
{
	volatile unsigned long x = 0;

	(void)data;
	while (!g_atomic_int_get(&busy_stop))
		x++;
	return NULL;
}

static void contention_log(enum loom_log_level level, const char *msg,
			   void *userdata)
{
	(void)level;
	(void)userdata;
	if (strstr(msg, "the cores are contended"))
		g_atomic_int_set(&saw_contended, 1);
	if (strstr(msg, "run on the thread that posts them"))
		g_atomic_int_set(&saw_here, 1);
}

/* x_{l+1} = w_l x_l for CLAYERS square layers, on n_threads, against
 * double; computed until the pool has said the cores are contended and
 * then a few times more. */
static void run_contended(loom_dev_t *dev, int n_threads)
{
	float *wv = g_new(float, (size_t)CLAYERS * CK * CK);
	float *xv = g_new(float, CK * CN), *yv = g_new(float, CK * CN);
	double *ref = g_new(double, CK * CN), *tmp = g_new(double, CK * CN);
	struct loom_tensor *w[CLAYERS], *x, *y;
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_backend_t *be;
	loom_buffer_t *buf;
	gint64 deadline;
	int l, i, j, q, after = 0;

	fill(wv, (size_t)CLAYERS * CK * CK, 3);
	for (i = 0; i < CLAYERS * CK * CK; i++)
		wv[i] /= sqrtf(CK);
	fill(xv, CK * CN, 4);
	for (i = 0; i < CK * CN; i++)
		ref[i] = xv[i];
	for (l = 0; l < CLAYERS; l++) {
		for (j = 0; j < CN; j++)
			for (i = 0; i < CK; i++) {
				double sum = 0;

				for (q = 0; q < CK; q++)
					sum += (double)wv[((size_t)l * CK + i) *
							  CK + q] *
					       ref[j * CK + q];
				tmp[j * CK + i] = sum;
			}
		memcpy(ref, tmp, CK * CN * sizeof(*ref));
	}

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, CK, CN);
	y = x;
	for (l = 0; l < CLAYERS; l++) {
		w[l] = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, CK, CK);
		y = loom_mul_mat(ctx, w[l], y);
	}
	g_assert_nonnull(y);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	for (l = 0; l < CLAYERS; l++)
		loom_tensor_set(w[l], wv + (size_t)l * CK * CK, 0,
				(size_t)CK * CK * sizeof(float));
	loom_tensor_set(x, xv, 0, (size_t)CK * CN * sizeof(float));
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_set_n_threads(be, n_threads), ==,
			LOOM_OK);

	/* The first graphs may run before the pool has noticed. */
	deadline = g_get_monotonic_time() + 20 * G_USEC_PER_SEC;
	while (after < 5) {
		g_assert_cmpint(g_get_monotonic_time(), <, deadline);
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
				LOOM_OK);
		memset(yv, 0, (size_t)CK * CN * sizeof(float));
		loom_tensor_get(y, yv, 0, (size_t)CK * CN * sizeof(float));
		g_assert_cmpfloat(nmse(yv, ref, CK * CN), <, 1e-10);
		if (g_atomic_int_get(&saw_contended))
			after++;
	}
	/* On two threads a contended graph takes one: the caller's. */
	if (n_threads == 2)
		g_assert_true(g_atomic_int_get(&saw_here));
	/* More small copies than the pool's queue holds, each one
	 * thread's: the caller's when nothing is queued before it, else
	 * thread 0's while the other threads pass it by, however far
	 * behind the busy threads leave them; no job is lost or run
	 * twice, and none overtakes another. */
	for (i = 0; i < CK * CN; i++) {
		tmp[i] = (double)i;
		xv[i] = (float)i;
		g_assert_cmpint(loom_backend_tensor_set_async(
					be, x, xv + i, (size_t)i * sizeof(float),
					sizeof(float)), ==, LOOM_OK);
	}
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	loom_tensor_get(x, yv, 0, (size_t)CK * CN * sizeof(float));
	g_assert_cmpfloat(nmse(yv, tmp, CK * CN), ==, 0.0);
	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	g_free(tmp);
	g_free(ref);
	g_free(yv);
	g_free(xv);
	g_free(wv);
}

static void test_contended(void)
{
	const char *preload = g_getenv("LD_PRELOAD");
	loom_reg_t *reg;
	int n_busy = 2 * (int)g_get_num_processors(), i, n;
	GThread **busy;
	enum loom_log_level level = loom_log_get_level();

	/* Valgrind runs one thread at a time, handing over itself: the
	 * kernel never preempts them. */
	if (preload && strstr(preload, "vgpreload")) {
		g_test_skip("under valgrind, which serializes the threads");
		return;
	}
	reg = load_cpu();
	busy = g_new(GThread *, n_busy);
	loom_log_set_callback(contention_log, NULL);
	loom_log_set_level(LOOM_LOG_DEBUG);
	g_atomic_int_set(&busy_stop, 0);
	for (i = 0; i < n_busy; i++)
		busy[i] = g_thread_new("busy", busy_loop, NULL);
	/* 2 threads: graphs on one, the caller's own, without barriers;
	 * 4: on two of the workers, meeting at their own barrier. */
	for (n = 2; n <= 4; n += 2) {
		/* Past the pool's hold of the last verdict, so that it
		 * finds (and says) the cores contended anew. */
		g_usleep(1200 * 1000);
		g_atomic_int_set(&saw_contended, 0);
		g_atomic_int_set(&saw_here, 0);
		run_contended(loom_reg_dev(reg, 0), n);
	}
	g_atomic_int_set(&busy_stop, 1);
	for (i = 0; i < n_busy; i++)
		g_thread_join(busy[i]);
	g_free(busy);
	loom_log_set_level(level);
	loom_log_set_callback(NULL, NULL);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* The features entry point and the variant chosen for this CPU. */
static void test_features(void)
{
	loom_reg_t *reg = load_cpu();
	loom_get_features_fn get = (loom_get_features_fn)loom_reg_proc_address(
		reg, LOOM_PROC_GET_FEATURES);
	const struct loom_feature *f;
	const char *variant = NULL;
	bool avx512 = false, avx2 = false;
	size_t i;

	g_assert_nonnull(get);
	g_assert_nonnull(loom_reg_proc_address(reg, LOOM_PROC_SET_N_THREADS));
	g_assert_nonnull(loom_reg_proc_address(reg, LOOM_PROC_ALLREDUCE));
	for (f = get(reg); f->name; f++) {
		g_test_message("feature %s = %s", f->name, f->value);
		if (!strcmp(f->name, "VARIANT"))
			variant = f->value;
		if (!strcmp(f->name, "AVX512BW"))
			avx512 = !strcmp(f->value, "1");
		if (!strcmp(f->name, "AVX2"))
			avx2 = !strcmp(f->value, "1");
	}
	g_assert_nonnull(variant);
#if defined(__x86_64__)
	/* With every variant built, the loader takes the best that runs. */
	for (i = 0; i < loom_plugin_count(); i++) {
		struct loom_plugin_info info;

		g_assert_cmpint(loom_plugin_info(i, &info), ==, LOOM_OK);
		g_test_message("%s: %s %s", info.file,
			       loom_plugin_state_name(info.state), info.reason);
	}
	if (avx512)
		g_assert_cmpstr(variant, ==, "x86_64_v4");
	else if (avx2)
		g_assert_cmpstr(variant, ==, "x86_64_v3");
#else
	(void)avx512;
	(void)avx2;
	(void)i;
#endif
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/cpu/pool/threads", test_threads);
	g_test_add_func("/cpu/variants", test_variants);
	g_test_add_func("/cpu/pool/flat", test_flat);
	g_test_add_func("/cpu/pool/async", test_async);
	g_test_add_func("/cpu/pool/async-copies", test_async_copies);
	g_test_add_func("/cpu/pool/contended", test_contended);
	g_test_add_func("/cpu/pool/graph-freed-after-compute",
			test_graph_freed_after_compute);
	g_test_add_func("/cpu/data/2d", test_2d);
	g_test_add_func("/cpu/errors", test_errors);
	g_test_add_func("/cpu/ops/non-finite", test_non_finite);
	g_test_add_func("/cpu/features", test_features);
	return g_test_run();
}
