/* SPDX-License-Identifier: MIT */
/* test-gpu-perf.c - the GPU's figures for `make check-gpu`, each beside a
 * limit: the device-to-device copy measured here, the datasheet's memory
 * bandwidth and BF16 peak, and the peak at the SM clock read while the
 * GEMM runs (nvidia-smi, when there is one).  Inputs are random (zeros
 * run faster on tensor cores and hide wrong indexing; quantized weights
 * are random blocks under small scales).  Figures: copy and add, GEMM at
 * 8192^3 per type, decode GEMV per type (and Q4_K for 4 and 512
 * columns), launch cost per op node by node and replayed as a CUDA
 * graph, MoE decode and prefill with BF16 and Q4_K experts.  Not a test:
 * it reports, and fails only when a figure cannot be taken.
 *
 * Usage: test-gpu-perf [DEVICE] (default cuda0)
 */
#include "test-util.h"

#include <loom/loom-plugin.h>

#include "cuda-types.h"

#include <glib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPS 20

/* Datasheet figures by a part of the device description. */
static const struct {
	const char *name;
	double tflops_bf16;
	double gbps;
} datasheet[] = {
	{ "H200", 989, 4800 },
	{ "H100 PCIe", 756, 2000 },
	{ "H100", 989, 3350 },
	{ "A100", 312, 2039 },
};

static double ds_tflops, ds_gbps, copy_gbps, boost_mhz;

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

/* The SM clock in MHz as the driver reports it now, or 0. */
static double sm_clock_mhz(void)
{
	FILE *p = popen("nvidia-smi --query-gpu=clocks.sm "
			"--format=csv,noheader,nounits 2>/dev/null", "r");
	double mhz = 0;

	if (!p)
		return 0;
	if (fscanf(p, "%lf", &mhz) != 1)
		mhz = 0;
	pclose(p);
	return mhz;
}

struct timed {
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	loom_backend_t *be;
	loom_graph_t *g;
};

/* Offsets of the half scales in a block of each quantized type (MXFP4's
 * exponent byte is set apart: 2^-8 .. 2^-2). */
static int scale_offsets(enum loom_type type, int *off)
{
	switch (type) {
	case LOOM_TYPE_Q8_0:
	case LOOM_TYPE_Q4_0:
	case LOOM_TYPE_Q5_0:
	case LOOM_TYPE_IQ4_NL:
	case LOOM_TYPE_IQ4_XS:
		off[0] = 0;
		return 1;
	case LOOM_TYPE_Q4_1:
	case LOOM_TYPE_Q5_1:
	case LOOM_TYPE_Q4_K:
	case LOOM_TYPE_Q5_K:
		off[0] = 0;
		off[1] = 2;
		return 2;
	case LOOM_TYPE_Q2_K:
		off[0] = 80;
		off[1] = 82;
		return 2;
	case LOOM_TYPE_Q3_K:
		off[0] = 108;
		return 1;
	case LOOM_TYPE_Q6_K:
		off[0] = 208;
		return 1;
	default:
		return 0;
	}
}

/* Fills a quantized t with random blocks under small finite scales:
 * quantizing hundreds of millions of values on the CPU would take
 * longer than the runs it prepares. */
static int fill_blocks(struct loom_tensor *t, struct loom_test_rng *rng)
{
	size_t n = loom_tensor_n_bytes(t), bs = loom_type_size(t->type);
	uint8_t *raw = g_malloc(n);
	int off[2], k = scale_offsets(t->type, off), st;

	for (size_t i = 0; i + 8 <= n; i += 8) {
		uint64_t v = loom_test_rng_next(rng);

		memcpy(raw + i, &v, 8);
	}
	for (size_t b = 0; b + bs <= n; b += bs) {
		if (t->type == LOOM_TYPE_MXFP4)
			raw[b] = (uint8_t)(120 + b / bs % 7);
		for (int j = 0; j < k; j++) {
			uint16_t h = loom_f32_to_f16(1e-3f * (1 + b / bs % 7));

			memcpy(raw + b + off[j], &h, 2);
		}
	}
	st = loom_tensor_set(t, raw, 0, n);
	g_free(raw);
	return st;
}

/* Builds out's graph, places it on dev, fills every leaf with random
 * values (I32 leaves with ids in [0, id_range)) and makes a backend with
 * params. */
static int prepare_with(struct timed *r, loom_dev_t *dev,
			struct loom_tensor *out, int64_t id_range,
			const char *params)
{
	struct loom_test_rng rng;
	int st;

	loom_test_rng_seed(&rng, 1);
	st = loom_graph_new(r->ctx, &r->g);
	if (!st)
		st = loom_graph_expand(r->g, out);
	if (!st)
		st = loom_ctx_alloc_tensors(r->ctx, loom_dev_buffer_type(dev),
					    &r->buf);
	for (size_t i = 0; !st && i < loom_graph_n_leaves(r->g); i++) {
		struct loom_tensor *t = loom_graph_leaf(r->g, i);

		if (t->type == LOOM_TYPE_I32) {
			int64_t n = loom_tensor_n_elements(t);
			int32_t *ids = g_new(int32_t, n);

			/* Rows of distinct ids (an expert once per token). */
			for (int64_t j = 0; j < n; j++)
				ids[j] = (int32_t)((j % t->ne[0]) * 7 +
						   loom_test_rng_int(&rng, 7)) %
					 (int32_t)id_range;
			st = loom_test_set_i32(t, ids);
			g_free(ids);
		} else if (loom_type_is_quantized(t->type)) {
			st = fill_blocks(t, &rng);
		} else {
			st = loom_test_fill_uniform(t, &rng, -1, 1);
		}
	}
	if (!st)
		st = loom_dev_init_backend(dev, params, &r->be);
	if (st)
		fprintf(stderr, "setup: %s\n", loom_error_message());
	return st;
}

static int prepare(struct timed *r, loom_dev_t *dev, struct loom_tensor *out,
		   int64_t id_range)
{
	return prepare_with(r, dev, out, id_range, NULL);
}

/* Seconds per run of r's graph (median of REPS single runs after a
 * warm-up); *mhz (when not NULL) gets the SM clock read while a long
 * queue of runs is in flight. */
static double run_time(struct timed *r, double *mhz)
{
	double t[REPS];
	int st = loom_backend_graph_compute(r->be, r->g);

	if (!st)
		st = loom_backend_synchronize(r->be);
	for (int i = 0; i < REPS && !st; i++) {
		gint64 t0 = g_get_monotonic_time();

		st = loom_backend_graph_compute(r->be, r->g);
		if (!st)
			st = loom_backend_synchronize(r->be);
		t[i] = (g_get_monotonic_time() - t0) / 1e6;
	}
	if (!st && mhz) {
		for (int i = 0; i < 10 * REPS && !st; i++)
			st = loom_backend_graph_compute_async(r->be, r->g);
		*mhz = sm_clock_mhz();
		if (!st)
			st = loom_backend_synchronize(r->be);
	}
	if (st) {
		fprintf(stderr, "compute: %s\n", loom_error_message());
		return -1;
	}
	for (int i = 1; i < REPS; i++)
		for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
			double x = t[j];

			t[j] = t[j - 1];
			t[j - 1] = x;
		}
	return t[REPS / 2];
}

static void done(struct timed *r)
{
	loom_backend_free(r->be);
	loom_buffer_free(r->buf);
	loom_ctx_free(r->ctx);
	memset(r, 0, sizeof(*r));
}

static void share(double v, double limit, const char *what)
{
	if (limit > 0)
		printf("  %5.1f%% of %s", 100 * v / limit, what);
}

/* c = a (type, [k, m]) times b (F32 [k, n]). */
static int gemm(loom_dev_t *dev, enum loom_type type, int64_t k, int64_t m,
		int64_t n, double boost_tflops)
{
	struct timed r = { 0 };
	double s, mhz = 0, tflops, gbps;

	loom_ctx_new(0, &r.ctx);
	if (prepare(&r, dev,
		    loom_mul_mat(r.ctx, loom_tensor_new_2d(r.ctx, type, k, m),
				 loom_tensor_new_2d(r.ctx, LOOM_TYPE_F32, k,
						    n)), 0))
		return 1;
	s = run_time(&r, n > 8 ? &mhz : NULL);
	done(&r);
	if (s <= 0)
		return 1;
	tflops = 2.0 * k * m * n / s / 1e12;
	gbps = (double)loom_type_row_size(type, k) * m / s / 1e9;
	if (n > 8) {
		printf("gemm %-5s %lldx%lldx%lld  %7.1f TFLOP/s",
		       loom_type_name(type), (long long)m, (long long)n,
		       (long long)k, tflops);
		share(tflops, ds_tflops, "datasheet bf16");
		/* The boost-clock peak scaled to the clock seen in the run. */
		if (mhz > 0 && boost_tflops > 0 && boost_mhz > 0) {
			printf("  SM clock %.0f MHz:", mhz);
			share(tflops, boost_tflops * mhz / boost_mhz,
			      "peak at that clock");
		}
		printf("\n");
	} else {
		printf("gemv %-5s %lldx%lld", loom_type_name(type),
		       (long long)k, (long long)m);
		if (n > 1)
			printf(" x %lld", (long long)n);
		printf("  %7.0f GB/s of weights", gbps);
		share(gbps, copy_gbps, "measured copy");
		printf("\n");
	}
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "cuda0";
	struct timed r = { 0 };
	loom_dev_t *dev;
	double s, boost;
	int fails = 0;

	loom_test_load_plugins();
	dev = loom_dev_by_name(name);
	if (!dev) {
		printf("test-gpu-perf: no device %s here\n", name);
		return 0;
	}
	printf("%s: %s\n", name, loom_dev_description(dev));
	for (size_t i = 0; i < G_N_ELEMENTS(datasheet); i++)
		if (strstr(loom_dev_description(dev), datasheet[i].name)) {
			ds_tflops = datasheet[i].tflops_bf16;
			ds_gbps = datasheet[i].gbps;
			break;
		}
	boost = feature(dev, "peak_bf16_tflops");
	boost_mhz = feature(dev, "clock_mhz");
	printf("limits: datasheet %.0f TFLOP/s bf16, %.0f GB/s; plugin's "
	       "boost-clock peak %.0f TFLOP/s\n", ds_tflops, ds_gbps, boost);

	/* Copy: cont of a 1 GiB tensor, bytes read plus written. */
	const int64_t n = (int64_t)1 << 28;

	loom_ctx_new(0, &r.ctx);
	if (prepare(&r, dev,
		    loom_cont(r.ctx, loom_transpose(r.ctx, loom_reshape_2d(
				    r.ctx, loom_tensor_new_1d(
						   r.ctx, LOOM_TYPE_F32, n),
				    1, n))), 0))
		return 1;
	s = run_time(&r, NULL);
	done(&r);
	if (s <= 0)
		return 1;
	copy_gbps = 2.0 * n * 4 / s / 1e9;
	printf("copy  f32 1 GiB      %7.0f GB/s", copy_gbps);
	share(copy_gbps, ds_gbps, "datasheet");
	printf("\n");

	/* add: 64 Mi floats, 768 MiB moved per run. */
	const int64_t na = 64ll << 20;

	loom_ctx_new(0, &r.ctx);
	if (prepare(&r, dev,
		    loom_add(r.ctx,
			     loom_tensor_new_1d(r.ctx, LOOM_TYPE_F32, na),
			     loom_tensor_new_1d(r.ctx, LOOM_TYPE_F32, na)), 0))
		return 1;
	s = run_time(&r, NULL);
	done(&r);
	if (s <= 0)
		return 1;
	printf("add   f32 64 Mi      %7.0f GB/s", 3.0 * na * 4 / s / 1e9);
	share(3.0 * na * 4 / s / 1e9, ds_gbps, "datasheet");
	share(3.0 * na * 4 / s / 1e9, copy_gbps, "copy");
	printf("\n");

	/* GEMM at 8192^3 per weight type; decode GEMV per type. */
	fails += gemm(dev, LOOM_TYPE_BF16, 8192, 8192, 8192, boost);
	fails += gemm(dev, LOOM_TYPE_F16, 8192, 8192, 8192, boost);
	fails += gemm(dev, LOOM_TYPE_Q8_0, 8192, 8192, 8192, boost);
	/* Decode: one column, and four (a small batch), per type. */
	static const enum loom_type gemv_types[] = {
		LOOM_TYPE_F32, LOOM_TYPE_BF16, LOOM_TYPE_F16,
#define GEMV_TYPE_(name) LOOM_TYPE_##name,
		CUDA_QUANT_TYPES(GEMV_TYPE_)
#undef GEMV_TYPE_
	};

	for (size_t i = 0; i < G_N_ELEMENTS(gemv_types); i++)
		fails += gemm(dev, gemv_types[i], 8192, 16384, 1, boost);
	fails += gemm(dev, LOOM_TYPE_Q4_K, 8192, 16384, 4, boost);
	fails += gemm(dev, LOOM_TYPE_Q4_K, 8192, 8192, 512, boost);

	/* Launch cost: 512 chained adds of 1024 values, node by node and
	 * replayed as a CUDA graph. */
	for (int replay = 0; replay < 2; replay++) {
		loom_ctx_new(0, &r.ctx);
		struct loom_tensor *x = loom_tensor_new_1d(r.ctx,
							   LOOM_TYPE_F32, 1024);
		struct loom_tensor *y = x;

		for (int i = 0; i < 512; i++)
			y = loom_add(r.ctx, y, x);
		if (prepare_with(&r, dev, y, 0, replay ? NULL : "graph=off"))
			return 1;
		s = run_time(&r, NULL);
		done(&r);
		if (s <= 0)
			return 1;
		printf("launch: %.2f us per op (512 small adds, %s)\n",
		       s / 512 * 1e6, replay ? "CUDA graph replayed" :
						"node by node");
	}

	/* MoE: 64 experts [2048, 768], 8 used per token, BF16 and Q4_K. */
	for (int q = 0; q < 2; q++)
	for (int tokens = 1; tokens <= 512; tokens *= 512) {
		enum loom_type et = q ? LOOM_TYPE_Q4_K : LOOM_TYPE_BF16;
		double bytes = 8.0 * loom_type_row_size(et, 2048) * 768;

		loom_ctx_new(0, &r.ctx);
		struct loom_tensor *as = loom_tensor_new_3d(r.ctx, et, 2048,
							    768, 64);
		struct loom_tensor *b = loom_tensor_new_3d(
			r.ctx, LOOM_TYPE_F32, 2048, 1, tokens);
		struct loom_tensor *ids = loom_tensor_new_2d(
			r.ctx, LOOM_TYPE_I32, 8, tokens);

		if (prepare(&r, dev, loom_mul_mat_id(r.ctx, as, b, ids), 64))
			return 1;
		s = run_time(&r, NULL);
		done(&r);
		if (s <= 0)
			return 1;
		if (tokens == 1) {
			printf("moe decode %-5s (8 of 64 experts): %.0f us, "
			       "%.0f GB/s of expert weights",
			       loom_type_name(et), s * 1e6, bytes / s / 1e9);
			share(bytes / s / 1e9, copy_gbps, "measured copy");
			printf("\n");
		} else {
			printf("moe prefill %-5s (%d tokens): %.2f ms, %.1f "
			       "TFLOP/s\n", loom_type_name(et), tokens,
			       s * 1e3,
			       2.0 * 2048 * 768 * 8 * tokens / s / 1e12);
		}
	}
	if (loom_unload_all()) {
		fprintf(stderr, "%s\n", loom_error_message());
		fails++;
	}
	return fails ? 1 : 0;
}
