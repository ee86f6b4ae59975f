/* test-gpu-perf.c - two figures for `make check-gpu`, each set against the
 * device's own limits from the plugin's "get_features": an elementwise
 * add's bandwidth against memory bandwidth, and a BF16 mul_mat's FLOP
 * rate against the tensor-core peak.  Not a test: it only reports (exit 0)
 * and says so when the device is absent.
 *
 * Usage: test-gpu-perf [DEVICE] (default cuda0)
 */
#include "test-util.h"

#include <loom/loom-plugin.h>

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 20

/* The value of the device's feature "<dev>.<what>", or 0. */
static double feature(loom_dev_t *dev, const char *what)
{
	loom_get_features_fn f;
	const struct loom_feature *ft;
	char *name = g_strdup_printf("%s.%s", loom_dev_name(dev), what);
	double v = 0;

	f = (loom_get_features_fn)loom_reg_proc_address(loom_dev_reg(dev),
							"get_features");
	for (ft = f ? f(loom_dev_reg(dev)) : NULL; ft && ft->name; ft++)
		if (!strcmp(ft->name, name))
			v = g_ascii_strtod(ft->value, NULL);
	g_free(name);
	return v;
}

/* Runs the graph of out once to warm up, then REPS times; returns the
 * seconds of one run, or a negative value on error. */
static double time_graph(loom_dev_t *dev, loom_ctx_t *ctx,
			 struct loom_tensor *out, loom_buffer_t **buf)
{
	loom_backend_t *be;
	loom_graph_t *g;
	gint64 t0;
	double s = -1;
	int st;

	st = loom_graph_new(ctx, &g);
	if (!st)
		st = loom_graph_expand(g, out);
	if (!st)
		st = loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					    buf);
	if (!st)
		st = loom_buffer_clear(*buf, 0);
	if (st) {
		fprintf(stderr, "setup: %s\n", loom_error_message());
		return -1;
	}
	if (loom_dev_init_backend(dev, NULL, &be)) {
		fprintf(stderr, "backend: %s\n", loom_error_message());
		return -1;
	}
	st = loom_backend_graph_compute(be, g);
	if (!st)
		st = loom_backend_synchronize(be);
	t0 = g_get_monotonic_time();
	for (int i = 0; i < REPS && !st; i++)
		st = loom_backend_graph_compute_async(be, g);
	if (!st)
		st = loom_backend_synchronize(be);
	if (!st)
		s = (g_get_monotonic_time() - t0) / 1e6 / REPS;
	else
		fprintf(stderr, "compute: %s\n", loom_error_message());
	loom_backend_free(be);
	return s;
}

static void percent(double v, double peak, const char *unit)
{
	if (peak > 0)
		printf(" (%.0f%% of %.0f %s)\n", 100 * v / peak, peak, unit);
	else
		printf(" (peak unknown)\n");
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "cuda0";
	loom_buffer_t *buf = NULL;
	loom_dev_t *dev;
	loom_ctx_t *ctx;
	double s;

	loom_test_load_plugins();
	dev = loom_dev_by_name(name);
	if (!dev) {
		printf("test-gpu-perf: no device %s here\n", name);
		return 0;
	}
	printf("%s: %s\n", name, loom_dev_description(dev));

	/* c = a + b over 64 Mi floats: 768 MiB moved per run. */
	const int64_t n = 64ll << 20;

	loom_ctx_new(0, &ctx);
	s = time_graph(dev, ctx,
		       loom_add(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_F32, n),
				loom_tensor_new_1d(ctx, LOOM_TYPE_F32, n)),
		       &buf);
	if (s <= 0)
		return 1;
	printf("add f32, %lld elements: %.0f GB/s", (long long)n,
	       3.0 * n * sizeof(float) / s / 1e9);
	percent(3.0 * n * sizeof(float) / s / 1e9,
		feature(dev, "mem_bandwidth_gbs"), "GB/s");
	loom_buffer_free(buf);
	loom_ctx_free(ctx);

	/* BF16 weights [K, M] times BF16 input [K, N], M = N = K. */
	const int64_t k = 8192;

	loom_ctx_new(0, &ctx);
	s = time_graph(dev, ctx,
		       loom_mul_mat(ctx,
				    loom_tensor_new_2d(ctx, LOOM_TYPE_BF16, k,
						       k),
				    loom_tensor_new_2d(ctx, LOOM_TYPE_BF16, k,
						       k)),
		       &buf);
	if (s <= 0)
		return 1;
	printf("mul_mat bf16, %lld^3: %.0f TFLOP/s", (long long)k,
	       2.0 * k * k * k / s / 1e12);
	percent(2.0 * k * k * k / s / 1e12, feature(dev, "peak_bf16_tflops"),
		"TFLOP/s");
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	loom_unload_all();
	return 0;
}
