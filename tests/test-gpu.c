/* SPDX-License-Identifier: MIT */
/* test-gpu.c - the CUDA and HIP plugins: how they load (or why not), their
 * buffers, pinned host memory, 2D and async copies, events, copies between
 * backends, a mul_mat on both GEMM paths, the allreduce's rules (one
 * device included), blocking calls ordered after async work, F16 GEMM
 * with activations past F16's range, and RoPE at long positions.
 * Without a GPU only the load test runs; the others skip.  The op suite
 * (test-ops) checks every kernel; tests/check-gpu.sh runs both on a GPU.
 */
#include "test-util.h"

#include <loom/loom-plugin.h>

#include <dlfcn.h>
#include <glib.h>
#include <math.h>
#include <string.h>

static const char *const gpu_plugins[] = { "cuda", "hip" };

static bool is_gpu_reg(loom_reg_t *reg)
{
	for (size_t i = 0; i < G_N_ELEMENTS(gpu_plugins); i++)
		if (!strcmp(loom_reg_name(reg), gpu_plugins[i]))
			return true;
	return false;
}

/* The first GPU device of our plugins, or NULL. */
static loom_dev_t *first_gpu(void)
{
	for (size_t i = 0; i < loom_dev_count(); i++) {
		loom_dev_t *dev = loom_dev_get(i);

		if (is_gpu_reg(loom_dev_reg(dev)))
			return dev;
	}
	return NULL;
}

/* True when a library whose file name contains what is mapped into this
 * process. */
static bool mapped(const char *what)
{
	char *maps = NULL;
	bool found;

	if (!g_file_get_contents("/proc/self/maps", &maps, NULL, NULL))
		return false;
	found = strstr(maps, what) != NULL;
	g_free(maps);
	return found;
}

static void assert_unmapped(void)
{
	static const char *const heavy[] = { "libcudart", "libcublas",
					     "libnccl", "cuda-impl.so" };

	for (size_t i = 0; i < G_N_ELEMENTS(heavy); i++) {
		if (mapped(heavy[i]))
			g_test_message("%s is mapped", heavy[i]);
		g_assert_false(mapped(heavy[i]));
	}
}

/* Each GPU plugin that was built either loaded with devices named after
 * it, or is not applicable for a reason a user understands. */
static void test_load(void)
{
	for (size_t i = 0; i < loom_plugin_count(); i++) {
		struct loom_plugin_info pi;
		bool cuda, hip;

		g_assert_cmpint(loom_plugin_info(i, &pi), ==, LOOM_OK);
		cuda = !strcmp(pi.name, "cuda");
		hip = !strcmp(pi.name, "hip");
		if (!cuda && !hip)
			continue;
		g_test_message("%s: %s %s", pi.name,
			       loom_plugin_state_name(pi.state), pi.reason);
		/* Without a device the CUDA plugin brings in nothing of
		 * CUDA: the runtime, cuBLAS and NCCL stay unmapped. */
		if (cuda && pi.state == LOOM_PLUGIN_NOT_APPLICABLE)
			assert_unmapped();
		if (pi.state == LOOM_PLUGIN_NOT_APPLICABLE) {
			/* No driver, no device, or the runtime's own words
			 * for anything else. */
			const char *vendor = cuda ? "CUDA" : "HIP";
			char *driver = g_strdup_printf("no %s driver", vendor);
			char *device = g_strdup_printf("no %s device", vendor);
			char *failed = g_strdup_printf("%s runtime failed: ",
						       vendor);
			char *dfailed = g_strdup_printf("%s driver failed: ",
							vendor);

			g_assert_true(!strcmp(pi.reason, driver) ||
				      !strcmp(pi.reason, device) ||
				      g_str_has_prefix(pi.reason, failed) ||
				      g_str_has_prefix(pi.reason, dfailed));
			g_free(dfailed);
			g_free(failed);
			g_free(device);
			g_free(driver);
			g_assert_cmpint(pi.score, ==, 0);
			continue;
		}
		g_assert_cmpint(pi.state, ==, LOOM_PLUGIN_LOADED);

		loom_reg_t *reg = loom_reg_by_name(pi.name);

		g_assert_nonnull(reg);
		g_assert_cmpuint(loom_reg_dev_count(reg), >, 0);
		for (size_t d = 0; d < loom_reg_dev_count(reg); d++) {
			char *want = g_strdup_printf("%s%zu", pi.name, d);
			loom_dev_t *dev = loom_reg_dev(reg, d);

			g_assert_cmpstr(loom_dev_name(dev), ==, want);
			g_assert_cmpint(loom_dev_type(dev), ==,
					LOOM_DEV_TYPE_GPU);
			g_assert_nonnull(loom_dev_host_buffer_type(dev));
			g_free(want);
		}
		g_assert_nonnull(loom_reg_proc_address(reg, "set_tensor_2d"));
		g_assert_nonnull(loom_reg_proc_address(reg,
						       "get_tensor_2d_async"));
		g_assert_nonnull(loom_reg_proc_address(reg,
						       "host_buffer_type"));
		g_assert_null(loom_reg_proc_address(reg, "no_such_entry"));

		/* Features name what was built in. */
		loom_get_features_fn ff = (loom_get_features_fn)
			loom_reg_proc_address(reg, "get_features");
		bool has_blas = false;

		g_assert_nonnull(ff);
		for (const struct loom_feature *ft = ff(reg); ft->name; ft++) {
			g_test_message("  %s = %s", ft->name, ft->value);
			has_blas |= !strcmp(ft->name, "blas");
		}
		g_assert_true(has_blas);
#ifdef LOOM_TEST_HAVE_NCCL
		if (cuda)
			g_assert_nonnull(loom_reg_proc_address(reg,
							       "allreduce"));
#endif
	}
}

#define NE0 64
#define NE1 33

/* A context with one F32 [NE0, NE1] tensor allocated in buft. */
struct one {
	loom_ctx_t *ctx;
	struct loom_tensor *t;
	loom_buffer_t *buf;
};

static void one_new(struct one *o, loom_buffer_type_t *buft)
{
	g_assert_cmpint(loom_ctx_new(0, &o->ctx), ==, LOOM_OK);
	o->t = loom_tensor_new_2d(o->ctx, LOOM_TYPE_F32, NE0, NE1);
	g_assert_nonnull(o->t);
	g_assert_cmpint(loom_ctx_alloc_tensors(o->ctx, buft, &o->buf), ==,
			LOOM_OK);
}

static void one_free(struct one *o)
{
	loom_buffer_free(o->buf);
	loom_ctx_free(o->ctx);
}

static void fill(float *v, size_t n, float base)
{
	for (size_t i = 0; i < n; i++)
		v[i] = base + (float)i * 0.25f;
}

static void test_buffers(void)
{
	loom_dev_t *dev = first_gpu();
	float in[NE0 * NE1], out[NE0 * NE1];
	struct one a, b, h;

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	one_new(&a, loom_dev_buffer_type(dev));
	one_new(&b, loom_dev_buffer_type(dev));
	fill(in, G_N_ELEMENTS(in), 1.0f);
	g_assert_cmpint(loom_tensor_set(a.t, in, 0, sizeof(in)), ==, LOOM_OK);
	memset(out, 0, sizeof(out));
	g_assert_cmpint(loom_tensor_get(a.t, out, 0, sizeof(out)), ==,
			LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));

	/* memset of a middle range. */
	g_assert_cmpint(loom_tensor_memset(a.t, 0, 40, 24), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(a.t, out, 0, sizeof(out)), ==,
			LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(in); i++)
		g_assert_cmpfloat(out[i], ==, i >= 10 && i < 16 ? 0.0f : in[i]);

	/* 2D: 5 values from each of 20 rows, host rows 7 floats apart. */
	g_assert_cmpint(loom_tensor_set_2d(a.t, in, 3 * sizeof(float),
					   5 * sizeof(float), 20,
					   a.t->nb[1], 7 * sizeof(float)),
			==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(a.t, out, 0, sizeof(out)), ==,
			LOOM_OK);
	for (int r = 0; r < 20; r++)
		for (int c = 0; c < 5; c++)
			g_assert_cmpfloat(out[r * NE0 + 3 + c], ==,
					  in[r * 7 + c]);
	float back[20 * 8];

	memset(back, 0, sizeof(back));
	g_assert_cmpint(loom_tensor_get_2d(a.t, back, 3 * sizeof(float),
					   5 * sizeof(float), 20,
					   a.t->nb[1], 8 * sizeof(float)),
			==, LOOM_OK);
	for (int r = 0; r < 20; r++)
		for (int c = 0; c < 5; c++)
			g_assert_cmpfloat(back[r * 8 + c], ==, in[r * 7 + c]);

	/* Device to device, and through pinned host memory. */
	g_assert_cmpint(loom_tensor_copy(a.t, b.t), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(b.t, back, 0, sizeof(back)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(a.t, out, 0, sizeof(back)), ==,
			LOOM_OK);
	g_assert_cmpmem(out, sizeof(back), back, sizeof(back));

	loom_buffer_type_t *hbt = loom_dev_host_buffer_type(dev);

	g_assert_nonnull(hbt);
	g_assert_true(loom_buffer_type_is_host(hbt));
	one_new(&h, hbt);
	fill(in, G_N_ELEMENTS(in), -3.0f);
	memcpy(h.t->data, in, sizeof(in));
	g_assert_cmpint(loom_tensor_copy(h.t, b.t), ==, LOOM_OK);
	memset(h.t->data, 0, sizeof(in));
	g_assert_cmpint(loom_tensor_copy(b.t, h.t), ==, LOOM_OK);
	g_assert_cmpmem(h.t->data, sizeof(in), in, sizeof(in));
	g_assert_cmpint(loom_buffer_clear(b.buf, 0), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(b.t, out, 0, sizeof(out)), ==,
			LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(out); i++)
		g_assert_cmpfloat(out[i], ==, 0.0f);

	one_free(&h);
	one_free(&b);
	one_free(&a);
}

static void test_async(void)
{
	loom_dev_t *dev = first_gpu();
	float in[NE0 * NE1], out[NE0 * NE1];
	loom_backend_t *be1, *be2;
	loom_event_t *ev;
	struct one a, b, h;

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be1), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be2), ==, LOOM_OK);
	one_new(&a, loom_dev_buffer_type(dev));
	one_new(&b, loom_dev_buffer_type(dev));
	one_new(&h, loom_dev_host_buffer_type(dev));

	/* Async set from pinned memory, copy to another stream's tensor
	 * ordered by an event, async get back. */
	fill(h.t->data, NE0 * NE1, 2.0f);
	memcpy(in, h.t->data, sizeof(in));
	g_assert_cmpint(loom_backend_tensor_set_async(be1, a.t, h.t->data, 0,
						      sizeof(in)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_event_new(dev, &ev), ==, LOOM_OK);
	g_assert_cmpint(loom_event_record(ev, be1), ==, LOOM_OK);
	g_assert_cmpint(loom_event_wait(be2, ev), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_copy_async(be2, be2, a.t, b.t), ==,
			LOOM_OK);
	memset(out, 0, sizeof(out));
	g_assert_cmpint(loom_backend_tensor_get_async(be2, b.t, out, 0,
						      sizeof(out)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be2), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));

	/* Copy between two streams, then 2D async both ways. */
	g_assert_cmpint(loom_backend_tensor_copy_async(be1, be2, a.t, b.t), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_set_2d_async(
				be1, a.t, in, 0, 4 * sizeof(float), NE1,
				a.t->nb[1], 4 * sizeof(float)), ==, LOOM_OK);
	float back[NE1 * 4];

	g_assert_cmpint(loom_backend_tensor_get_2d_async(
				be1, a.t, back, 0, 4 * sizeof(float), NE1,
				a.t->nb[1], 4 * sizeof(float)), ==, LOOM_OK);
	g_assert_cmpint(loom_event_record(ev, be1), ==, LOOM_OK);
	g_assert_cmpint(loom_event_synchronize(ev), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(back), back, sizeof(back));
	g_assert_cmpint(loom_backend_synchronize(be2), ==, LOOM_OK);

	loom_event_free(ev);
	one_free(&h);
	one_free(&b);
	one_free(&a);
	loom_backend_free(be2);
	loom_backend_free(be1);
}

/* a [K, M] of type at times b [K, N] F32 against a double reference, on a
 * backend made with params. */
static void check_mul_mat(loom_dev_t *dev, const char *params,
			  enum loom_type at, int64_t K, int64_t M, int64_t N,
			  double bound)
{
	struct loom_test_rng rng;
	struct loom_tensor *a, *b, *c;
	loom_backend_t *be;
	loom_buffer_t *buf;
	loom_graph_t *g;
	loom_ctx_t *ctx;
	double *da, *db, *dc, *ref, nmse;
	char *err = NULL;

	loom_test_rng_seed(&rng, 42 + K + M + N);
	g_assert_cmpint(loom_dev_init_backend(dev, params, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, at, K, M);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, K, N);
	c = loom_mul_mat(ctx, a, b);
	g_assert_nonnull(c);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, c), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(a, &rng, -1, 1), ==, LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(b, &rng, -1, 1), ==, LOOM_OK);
	g_assert_true(loom_backend_supports_op(be, c));
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);

	da = loom_test_get_doubles(a, &err);
	g_assert_nonnull(da);
	db = loom_test_get_doubles(b, &err);
	g_assert_nonnull(db);
	dc = loom_test_get_doubles(c, &err);
	g_assert_nonnull(dc);
	ref = g_new0(double, M * N);
	for (int64_t n = 0; n < N; n++)
		for (int64_t m = 0; m < M; m++)
			for (int64_t k = 0; k < K; k++)
				ref[n * M + m] += da[m * K + k] * db[n * K + k];
	nmse = loom_test_nmse(ref, dc, M * N);
	g_test_message("mul_mat %s %s [%ld,%ld]x[%ld,%ld]: nmse %g",
		       params ? params : "blas", loom_type_name(at), (long)K,
		       (long)M, (long)K, (long)N, nmse);
	g_assert_cmpfloat(nmse, <, bound);

	g_free(ref);
	g_free(dc);
	g_free(db);
	g_free(da);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	loom_backend_free(be);
}

static void test_mul_mat(void)
{
	loom_dev_t *dev = first_gpu();

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	for (int own = 0; own < 2; own++) {
		const char *p = own ? "gemm=own" : NULL;

		check_mul_mat(dev, p, LOOM_TYPE_F32, 96, 70, 37, 1e-6);
		check_mul_mat(dev, p, LOOM_TYPE_F16, 96, 70, 37, 1e-5);
		check_mul_mat(dev, p, LOOM_TYPE_BF16, 96, 70, 37, 5e-5);
		check_mul_mat(dev, p, LOOM_TYPE_Q8_0, 96, 70, 37, 5e-4);
		check_mul_mat(dev, p, LOOM_TYPE_Q8_0, 256, 130, 1, 5e-4);
	}
}

/* The allreduce sums across distinct GPUs, and declines one GPU twice;
 * LOOM_CUDA_ALLREDUCE is read once per process. */
static void test_allreduce(void)
{
	loom_dev_t *dev = first_gpu();
	loom_allreduce_fn f;
	loom_reg_t *reg;
	loom_backend_t *be[2];
	struct one t[2];
	struct loom_tensor *ts[2];
	float in[2][NE0 * NE1], out[NE0 * NE1];
	size_t nd;

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	reg = loom_dev_reg(dev);
	f = (loom_allreduce_fn)loom_reg_proc_address(reg, "allreduce");
	if (!f) {
		g_test_skip("no allreduce entry point (built without NCCL)");
		return;
	}
	nd = loom_reg_dev_count(reg);
	for (int pass = 0; pass < 2; pass++) {
		/* Pass 0: the same GPU twice; pass 1: two GPUs. */
		loom_dev_t *d[2] = {
			loom_reg_dev(reg, 0),
			loom_reg_dev(reg, pass && nd > 1 ? 1 : 0),
		};

		if (pass && nd < 2) {
			g_test_message("one GPU: the summing pass is skipped");
			break;
		}
		for (int i = 0; i < 2; i++) {
			g_assert_cmpint(loom_dev_init_backend(d[i], NULL,
							      &be[i]), ==,
					LOOM_OK);
			one_new(&t[i], loom_dev_buffer_type(d[i]));
			fill(in[i], NE0 * NE1, (float)(i + 1));
			g_assert_cmpint(loom_tensor_set(t[i].t, in[i], 0,
							sizeof(in[i])), ==,
					LOOM_OK);
			ts[i] = t[i].t;
		}
		if (!pass) {
			g_assert_cmpint(f(be, ts, 2, NULL), ==,
					LOOM_E_DECLINED);
		} else {
			/* Read once (pass 0 did): a change now is none. */
			g_setenv("LOOM_CUDA_ALLREDUCE", "none", TRUE);
			g_assert_cmpint(f(be, ts, 2, NULL), ==, LOOM_OK);
			g_unsetenv("LOOM_CUDA_ALLREDUCE");
			for (int i = 0; i < 2; i++) {
				g_assert_cmpint(loom_backend_synchronize(be[i]),
						==, LOOM_OK);
				g_assert_cmpint(loom_tensor_get(ts[i], out, 0,
								sizeof(out)),
						==, LOOM_OK);
				for (int j = 0; j < NE0 * NE1; j++)
					g_assert_cmpfloat(out[j], ==,
							  in[0][j] + in[1][j]);
			}
		}
		for (int i = 0; i < 2; i++) {
			one_free(&t[i]);
			loom_backend_free(be[i]);
		}
	}
}

/* A blocking get right after an async compute reads the result: the
 * backend's stream is non-blocking, so the get must wait for it.  The
 * graph is long enough (a chain of scales over 64 MiB) to still run when
 * the get starts. */
static void test_blocking_order(void)
{
	enum { N = 16 << 20, STEPS = 40 };
	loom_dev_t *dev = first_gpu();
	struct loom_tensor *x, *y;
	loom_backend_t *be;
	loom_buffer_t *buf;
	loom_graph_t *g;
	loom_ctx_t *ctx;
	float *in, *out;

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, N);
	y = x;
	for (int i = 0; i < STEPS; i++)
		y = loom_scale(ctx, y, i % 2 ? 0.5f : 2.0f);
	y = loom_scale(ctx, y, 3.0f);
	g_assert_nonnull(y);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	in = g_new(float, N);
	out = g_new(float, N);
	for (int64_t i = 0; i < N; i++)
		in[i] = (float)(i % 1000);
	g_assert_cmpint(loom_tensor_set(x, in, 0, (size_t)N * 4), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_memset(y, 0, 0, (size_t)N * 4), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute_async(be, g), ==, LOOM_OK);
	/* No synchronize: the blocking get orders itself. */
	g_assert_cmpint(loom_tensor_get(y, out, 0, (size_t)N * 4), ==, LOOM_OK);
	for (int64_t i = 0; i < N; i += 4099)
		g_assert_cmpfloat(out[i], ==, 3.0f * in[i]);
	g_assert_cmpfloat(out[N - 1], ==, 3.0f * in[N - 1]);
	g_free(out);
	g_free(in);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	loom_backend_free(be);
}

/* F16 weights times F32 activations beyond F16's range (65504): the
 * product is finite and right, not inf. */
static void test_f16_range(void)
{
	enum { K = 64, M = 16, N = 24 };
	loom_dev_t *dev = first_gpu();
	struct loom_test_rng rng;
	struct loom_tensor *a, *b, *c;
	loom_backend_t *be;
	loom_buffer_t *buf;
	loom_graph_t *g;
	loom_ctx_t *ctx;
	double *da, *db, *dc, ref[M * N] = { 0 }, nmse;
	char *err = NULL;

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	loom_test_rng_seed(&rng, 7);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F16, K, M);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, K, N);
	c = loom_mul_mat(ctx, a, b);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, c), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(a, &rng, -1, 1), ==, LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(b, &rng, -3e5, 3e5), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	da = loom_test_get_doubles(a, &err);
	db = loom_test_get_doubles(b, &err);
	dc = loom_test_get_doubles(c, &err);
	g_assert_nonnull(da);
	g_assert_nonnull(db);
	g_assert_nonnull(dc);
	for (int n = 0; n < N; n++)
		for (int m = 0; m < M; m++)
			for (int k = 0; k < K; k++)
				ref[n * M + m] += da[m * K + k] * db[n * K + k];
	nmse = loom_test_nmse(ref, dc, M * N);
	g_test_message("f16 weights, activations to 3e5: nmse %g", nmse);
	g_assert_cmpfloat(nmse, <, 1e-5);
	g_free(dc);
	g_free(db);
	g_free(da);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	loom_backend_free(be);
}

/* RoPE at long positions agrees with the CPU plugin (which computes the
 * angles in double) to the CPU's own precision. */
static void test_rope_long(void)
{
	enum { HD = 128, NH = 4, NT = 8 };
	loom_dev_t *devs[2] = { first_gpu(), loom_dev_by_name("cpu0") };
	struct loom_test_rng rng;
	double *res[2], nmse;
	char *err = NULL;
	int32_t pos[NT];

	if (!devs[0] || !devs[1]) {
		g_test_skip("no GPU device (or no cpu0)");
		return;
	}
	for (int i = 0; i < NT; i++)
		pos[i] = 100000 + 997 * i;
	for (int d = 0; d < 2; d++) {
		struct loom_tensor *x, *p, *y;
		loom_backend_t *be;
		loom_buffer_t *buf;
		loom_graph_t *g;
		loom_ctx_t *ctx;

		loom_test_rng_seed(&rng, 11);
		g_assert_cmpint(loom_dev_init_backend(devs[d], NULL, &be), ==,
				LOOM_OK);
		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
		x = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, HD, NH, NT);
		p = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, NT);
		y = loom_rope(ctx, x, p, HD, LOOM_ROPE_NEOX, 500000.0f, 1.0f);
		g_assert_nonnull(y);
		g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					ctx, loom_dev_buffer_type(devs[d]),
					&buf), ==, LOOM_OK);
		g_assert_cmpint(loom_test_fill_uniform(x, &rng, -1, 1), ==,
				LOOM_OK);
		g_assert_cmpint(loom_test_set_i32(p, pos), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
		res[d] = loom_test_get_doubles(y, &err);
		g_assert_nonnull(res[d]);
		loom_buffer_free(buf);
		loom_ctx_free(ctx);
		loom_backend_free(be);
	}
	nmse = loom_test_nmse(res[1], res[0], HD * NH * NT);
	g_test_message("rope at positions 1e5..: gpu vs cpu nmse %g", nmse);
	g_assert_cmpfloat(nmse, <, 1e-10);
	g_free(res[1]);
	g_free(res[0]);
}

/* The allreduce of one device runs through NCCL too: F32 is unchanged,
 * BF16 comes back rounded to BF16 as the CPU rounds. */
static void test_allreduce_one(void)
{
	loom_dev_t *dev = first_gpu();
	loom_allreduce_fn f;
	loom_backend_t *be;
	struct one t;
	float in[NE0 * NE1], out[NE0 * NE1];

	if (!dev) {
		g_test_skip("no GPU device");
		return;
	}
	f = (loom_allreduce_fn)loom_reg_proc_address(loom_dev_reg(dev),
						     "allreduce");
	if (!f) {
		g_test_skip("no allreduce entry point (built without NCCL)");
		return;
	}
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	one_new(&t, loom_dev_buffer_type(dev));
	for (int type = 0; type < 2; type++) {
		struct loom_allreduce_opts opts = {
			.size = sizeof(opts),
			.reduce_type = type ? LOOM_TYPE_BF16 : LOOM_TYPE_F32,
		};
		int st;

		for (int j = 0; j < NE0 * NE1; j++)
			in[j] = 1.0f + (float)j / 3.0f;
		g_assert_cmpint(loom_tensor_set(t.t, in, 0, sizeof(in)), ==,
				LOOM_OK);
		st = f(&be, &t.t, 1, &opts);
		if (type && st == LOOM_E_DECLINED) {
			g_test_message("BF16 allreduce declined (old NCCL)");
			continue;
		}
		g_assert_cmpint(st, ==, LOOM_OK);
		g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
		g_assert_cmpint(loom_tensor_get(t.t, out, 0, sizeof(out)), ==,
				LOOM_OK);
		for (int j = 0; j < NE0 * NE1; j++)
			g_assert_cmpfloat(out[j], ==,
					  type ? loom_bf16_to_f32(
							 loom_f32_to_bf16(in[j]))
					       : in[j]);
	}
	one_free(&t);
	loom_backend_free(be);
}

/* The CUDA implementation (cuda-impl.so, opened only where there is a
 * device) resolves every symbol: on a machine without a GPU nothing else
 * opens it, so this is where a broken link shows. */
static void test_impl_links(void)
{
	const char *b = g_getenv("LOOM_TEST_BUILDDIR");
	char *path;
	void *h;

	path = g_strdup_printf("%s/plugins/cuda/.libs/cuda-impl.so",
			       b ? b : ".");
	if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
		g_free(path);
		g_test_skip("the CUDA plugin was not built");
		return;
	}
	h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		g_test_message("%s", dlerror());
	g_assert_nonnull(h);
	g_assert_nonnull(dlsym(h, LOOM_PLUGIN_SYMBOL));
	g_assert_true(mapped("libcudart"));
	/* Never closed: it is linked -z nodelete, as its contexts need. */
	g_free(path);
}

int main(int argc, char **argv)
{
	int ret;

	g_test_init(&argc, &argv, NULL);
	/* A GPU plugin that is not applicable is not an error. */
	loom_test_load_plugins();

	g_test_add_func("/gpu/load", test_load);
	g_test_add_func("/gpu/buffers", test_buffers);
	g_test_add_func("/gpu/async", test_async);
	g_test_add_func("/gpu/mul_mat", test_mul_mat);
	g_test_add_func("/gpu/allreduce", test_allreduce);
	g_test_add_func("/gpu/allreduce_one", test_allreduce_one);
	g_test_add_func("/gpu/blocking_order", test_blocking_order);
	g_test_add_func("/gpu/f16_range", test_f16_range);
	g_test_add_func("/gpu/rope_long", test_rope_long);
	g_test_add_func("/gpu/impl_links", test_impl_links);
	ret = g_test_run();
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	return ret;
}
