/* SPDX-License-Identifier: MIT */
/* test-meta-compute.c - part of test-meta: mul_mat splits with the
 * allreduce through the CPU entry point and the generic path, BF16
 * reductions, products of quantized weights against one device, and
 * memory per device. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom-plugin.h>

#include "meta-cases.h"
#include "meta-util.h"

/* ---- compute ---- */

void test_mul_mat(void)
{
	static const float r3[3] = { 0.2f, 0.5f, 0.3f };
	float w1[K * M], w2[M * N], x[K * T];
	struct mm_result ref, got, fb;

	fill(w1, G_N_ELEMENTS(w1), 21);
	fill(w2, G_N_ELEMENTS(w2), 22);
	fill(x, G_N_ELEMENTS(x), 23);
	mm_reference(w1, w2, x, &ref);
	for (int n = 2; n <= 4; n++) {
		const float *ratios = n == 3 ? r3 : NULL;

		mm_run(meta_new(n, mm_rules, ratios, false), w1, w2, x, &got);
		mm_run(meta_new(n, mm_rules, ratios, true), w1, w2, x, &fb);
		assert_close(ref.y, got.y, M * T);
		assert_close(ref.z, got.z, N * T);
		assert_close(ref.s, got.s, N * T);
		/* The entry point and the generic allreduce agree. */
		assert_close(got.s, fb.s, N * T);
		for (int j = 0; j < n; j++)
			g_assert_cmpuint(got.dev_compute[j], >, 0);
	}
}

/* Reducing in BF16 from a size on stays within BF16 precision, through
 * the entry point and the generic path alike. */
void test_bf16_reduce(void)
{
	float w1[K * M], w2[M * N], x[K * T];
	struct mm_result ref, got;

	fill(w1, G_N_ELEMENTS(w1), 51);
	fill(w2, G_N_ELEMENTS(w2), 52);
	fill(x, G_N_ELEMENTS(x), 53);
	mm_reference(w1, w2, x, &ref);
	for (int fb = 0; fb < 2; fb++) {
		struct loom_meta_opts opts = {
			.size = sizeof(opts),
			.reduce_type = LOOM_TYPE_BF16,
			.bf16_min_bytes = 0,
			.force_fallback = fb,
		};
		loom_dev_t *meta;
		double num = 0, den = 0;

		g_assert_cmpint(loom_meta_dev_new(cpu, 2, table_split,
						  (void *)mm_rules, &opts,
						  &meta), ==, LOOM_OK);
		mm_run(meta, w1, w2, x, &got);
		for (int i = 0; i < N * T; i++) {
			double d = (double)got.s[i] - ref.s[i];

			num += d * d;
			den += (double)ref.s[i] * ref.s[i];
		}
		g_assert_cmpfloat(num, <=, 1e-4 * den);
	}
}

/* ---- quantized weights ---- */

/* Products of block-quantized weights, which the CPU computes on int8
 * activations quantized per 32 values: w1 [QK, QM] by rows (SPLIT(1)),
 * w2 [QM, QK] along its three 256-value blocks (SPLIT(0), a PARTIAL sum
 * that silu needs whole), and the same two as experts through
 * mul_mat_id.  Every device quantizes the same blocks of the same values
 * as one device does, so the meta device agrees with one device to the
 * order of the partial sums, far below the int8 rounding (a device on
 * another kernel path, or quantizing other blocks, differs by that
 * rounding); both agree with the double-precision products of the
 * dequantized weights to that rounding. */
#define QK 256
#define QM 768
#define QT 5
#define QE 3
#define QU 2

static const struct rule q_rules[] = {
	{ .name = "w1", .state = LOOM_SPLIT_DIM1, .granularity = 256 },
	{ .name = "w2", .state = LOOM_SPLIT_DIM0, .granularity = 256 },
	{ .name = "e1", .state = LOOM_SPLIT_DIM1, .granularity = 256 },
	{ .name = "e2", .state = LOOM_SPLIT_DIM0, .granularity = 256 },
	{ .name = NULL }
};

struct q_result {
	float y[QM * QT], s[QK * QT];
	float ey[QM * QU * QT], es[QK * QU * QT];
};

static const int32_t q_ids[QU * QT] = { 0, 2, 1, 0, 2, 1, 2, 2, 1, 0 };

static struct loom_tensor *q_weight(loom_ctx_t *ctx, enum loom_type type,
				    int64_t k, int64_t m, int64_t e,
				    const char *name)
{
	struct loom_tensor *t = e ? loom_tensor_new_3d(ctx, type, k, m, e) :
				    loom_tensor_new_2d(ctx, type, k, m);

	g_assert_nonnull(t);
	loom_tensor_set_name(t, name);
	return t;
}

static void q_run(loom_dev_t *dev, enum loom_type type, void *const *q,
		  const float *x, struct q_result *r)
{
	struct loom_tensor *w[4], *tx, *ids, *y, *s, *ey, *es;
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w[0] = q_weight(wctx, type, QK, QM, 0, "w1");
	w[1] = q_weight(wctx, type, QM, QK, 0, "w2");
	w[2] = q_weight(wctx, type, QK, QM, QE, "e1");
	w[3] = q_weight(wctx, type, QM, QK, QE, "e2");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(dev),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	for (int i = 0; i < 4; i++)
		g_assert_cmpint(loom_tensor_set(w[i], q[i], 0,
						loom_tensor_n_bytes(w[i])), ==,
				LOOM_OK);

	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	tx = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, QK, QT);
	ids = loom_tensor_new_2d(gctx, LOOM_TYPE_I32, QU, QT);
	loom_tensor_set_flags(tx, LOOM_TENSOR_INPUT);
	loom_tensor_set_flags(ids, LOOM_TENSOR_INPUT);
	y = loom_mul_mat(gctx, w[0], tx);
	s = loom_silu(gctx, loom_mul_mat(gctx, w[1], y));
	ey = loom_mul_mat_id(gctx, w[2], loom_reshape_3d(gctx, tx, QK, 1, QT),
			     ids);
	es = loom_silu(gctx, loom_mul_mat_id(gctx, w[3], ey, ids));
	g_assert_nonnull(s);
	g_assert_nonnull(es);
	loom_tensor_set_flags(y, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(s, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(ey, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(es, LOOM_TENSOR_OUTPUT);
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, s), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, es), ==, LOOM_OK);
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META)
		g_assert_cmpint(loom_meta_check(dev, g), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(dev), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(tx, x, 0, sizeof(float) * QK * QT), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_set(ids, q_ids, 0, sizeof(q_ids)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	if (loom_backend_graph_compute(be, g))
		g_error("compute: %s", loom_error_message());
	g_assert_cmpint(loom_tensor_get(y, r->y, 0, sizeof(r->y)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(s, r->s, 0, sizeof(r->s)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(ey, r->ey, 0, sizeof(r->ey)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(es, r->es, 0, sizeof(r->es)), ==,
			LOOM_OK);
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* out[t][i] = sum_k w[i][k] x[t][k] (w row-major [m][k]). */
static void q_product(const double *w, const double *x, int64_t k,
		      int64_t m, double *out)
{
	for (int64_t i = 0; i < m; i++) {
		double acc = 0;

		for (int64_t j = 0; j < k; j++)
			acc += w[i * k + j] * x[j];
		out[i] = acc;
	}
}

static double silu_d(double v)
{
	return v / (1 + exp(-v));
}

/* The products of the dequantized weights wd (w1, w2, e1, e2) in double. */
static void q_reference(double *const *wd, const float *x,
			struct q_result *r)
{
	double xd[QK], y[QM], z[QK];

	for (int t = 0; t < QT; t++) {
		for (int k = 0; k < QK; k++)
			xd[k] = x[t * QK + k];
		q_product(wd[0], xd, QK, QM, y);
		q_product(wd[1], y, QM, QK, z);
		for (int i = 0; i < QM; i++)
			r->y[t * QM + i] = (float)y[i];
		for (int i = 0; i < QK; i++)
			r->s[t * QK + i] = (float)silu_d(z[i]);
		for (int u = 0; u < QU; u++) {
			int32_t e = q_ids[t * QU + u];
			float *ey = r->ey + (t * QU + u) * QM;

			q_product(wd[2] + (size_t)e * QM * QK, xd, QK, QM, y);
			q_product(wd[3] + (size_t)e * QK * QM, y, QM, QK, z);
			for (int i = 0; i < QM; i++)
				ey[i] = (float)y[i];
			for (int i = 0; i < QK; i++)
				r->es[(t * QU + u) * QK + i] =
					(float)silu_d(z[i]);
		}
	}
}

static void assert_q_close(const struct q_result *ref,
			   const struct q_result *got, double max)
{
	g_assert_cmpfloat(nmse_of(ref->y, got->y, QM * QT), <=, max);
	g_assert_cmpfloat(nmse_of(ref->s, got->s, QK * QT), <=, max);
	g_assert_cmpfloat(nmse_of(ref->ey, got->ey, QM * QU * QT), <=, max);
	g_assert_cmpfloat(nmse_of(ref->es, got->es, QK * QU * QT), <=, max);
}

void test_quant_mul_mat(void)
{
	static const enum loom_type types[] = {
		LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
		LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1,
		LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1, LOOM_TYPE_Q3_K,
		LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
		LOOM_TYPE_MXFP4,
	};
	static const float r3[3] = { 0.5f, 0.3f, 0.2f };
	static const int64_t n_el[4] = { QK * QM, QM * QK, QK * QM * QE,
					 QM * QK * QE };
	float x[QK * QT];
	struct q_result *ref = g_new(struct q_result, 1);
	struct q_result *one = g_new(struct q_result, 1);
	struct q_result *got = g_new(struct q_result, 1);

	fill(x, G_N_ELEMENTS(x), 61);
	for (size_t ti = 0; ti < G_N_ELEMENTS(types); ti++) {
		enum loom_type type = types[ti];
		void *q[4];
		double *wd[4];

		for (int i = 0; i < 4; i++) {
			float *f = g_new(float, n_el[i]);

			fill(f, (size_t)n_el[i], 62 + (unsigned)i);
			q[i] = g_malloc(loom_type_row_size(type, n_el[i]));
			g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, f,
							  type, q[i],
							  n_el[i]), ==,
					LOOM_OK);
			g_assert_cmpint(loom_type_convert(type, q[i],
							  LOOM_TYPE_F32, f,
							  n_el[i]), ==,
					LOOM_OK);
			wd[i] = g_new(double, n_el[i]);
			for (int64_t j = 0; j < n_el[i]; j++)
				wd[i][j] = f[j];
			g_free(f);
		}
		q_reference(wd, x, ref);
		q_run(cpu[0], type, q, x, one);
		/* One device: within the int8 rounding of the activations. */
		assert_q_close(ref, one, 2e-4);
		g_test_message("%s: one device %.3g from the double products",
			       loom_type_name(type),
			       nmse_of(ref->s, one->s, QK * QT));
		/* Two devices, three uneven, four with one left empty, through
		 * the entry point and the generic allreduce. */
		for (int n = 2; n <= 4; n++) {
			for (int fb = 0; fb < 2; fb++) {
				q_run(meta_new(n, q_rules, n == 3 ? r3 : NULL,
					       fb),
				      type, q, x, got);
				assert_q_close(one, got, 1e-10);
			}
		}
		for (int i = 0; i < 4; i++) {
			g_free(q[i]);
			g_free(wd[i]);
		}
	}
	g_free(ref);
	g_free(one);
	g_free(got);
}

/* ---- memory ---- */

void test_memory(void)
{
	static const struct rule rules[] = {
		{ .name = "big", .state = LOOM_SPLIT_DIM1 },
		{ .name = "q", .state = LOOM_SPLIT_DIM0 },
		{ .name = NULL }
	};
	static const float r[2] = { 3, 1 };
	loom_dev_t *meta = meta_new(2, rules, r, false);
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *big, *q, *mir;
	size_t sizes[2], whole_big = 64 * 256 * 4, whole_mir = 100 * 4;
	size_t whole_q = 2 * 34 * 8, slack = 1024;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	big = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, 256);
	q = loom_tensor_new_2d(ctx, LOOM_TYPE_Q8_0, 64, 8);
	mir = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 100);
	loom_tensor_set_name(big, "big");
	loom_tensor_set_name(q, "q");
	loom_tensor_set_name(mir, "mirror");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta),
					       &buf), ==, LOOM_OK);
	dev_sizes(buf, sizes, 2);
	/* 3:1 of 256 columns; Q8_0 rows by whole blocks: 2 blocks at 3:1
	 * have quotas 1.5 and 0.5, a tie the first device wins, so all of
	 * q is on device 0; the mirrored vector is whole on both. */
	g_assert_cmpuint(sizes[0], >=, whole_big * 3 / 4 + whole_q + whole_mir);
	g_assert_cmpuint(sizes[0], <=, whole_big * 3 / 4 + whole_q +
					       whole_mir + slack);
	g_assert_cmpuint(sizes[1], >=, whole_big / 4 + whole_mir);
	g_assert_cmpuint(sizes[1], <=, whole_big / 4 + whole_mir + slack);
	g_test_message("per device: %zu + %zu bytes, whole %zu", sizes[0],
		       sizes[1], whole_big + whole_q + whole_mir);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* Compute memory per device is about the slices: a wide SPLIT(0) result
 * costs each of 2 devices half of what it costs whole. */
void test_compute_memory(void)
{
	static const struct rule rules[] = {
		{ .name = "w1", .state = LOOM_SPLIT_DIM1 }, { .name = NULL }
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;
	struct loom_tensor *w, *x, *y;
	size_t sizes[2], whole;
	loom_meta_backend_dev_sizes_fn fn = (loom_meta_backend_dev_sizes_fn)
		loom_reg_proc_address(loom_reg_by_name("meta"),
				      LOOM_PROC_META_BACKEND_DEV_SIZES);

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, 16, 1024);
	loom_tensor_set_name(w, "w1");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(meta),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_clear(wbuf, 0);
	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, 16, 32);
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	loom_tensor_set_name(x, "x");
	y = loom_silu(gctx, loom_mul_mat(gctx, w, x));
	loom_tensor_set_flags(y, LOOM_TENSOR_OUTPUT);
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(meta), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	loom_tensor_memset(x, 0, 0, loom_tensor_n_bytes(x));
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	g_assert_cmpint(fn(be, sizes, 2), ==, LOOM_OK);
	whole = 2 * 1024 * 32 * 4; /* the product and its silu */
	g_test_message("compute per device: %zu, %zu; whole %zu", sizes[0],
		       sizes[1], whole);
	g_assert_cmpuint(sizes[0], <=, whole / 2 + 4096);
	g_assert_cmpuint(sizes[1], <=, whole / 2 + 4096);
	g_assert_cmpuint(sizes[0], >=, whole / 4);
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}
