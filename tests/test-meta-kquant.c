/* SPDX-License-Identifier: MIT */
/* test-meta-kquant.c - a Llama-7B-shaped attention (d 4096, 32 heads of
 * 128) whose output projection is a K-quant, split by the default policy
 * over 2 and 3 partitions: the q cut (dimension 1, by heads) and the
 * output cut (dimension 0, where a 256-value block spans two heads) agree,
 * and the result matches one device and a double product.  Also the
 * policy's units where two heads make no whole block or too few units,
 * and one KV head (attention whole on every member).
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-plugin.h"
#include "test-util.h"

#define D 4096
#define NT 2

static loom_dev_t *cpu[3];
static struct loom_meta_model llama7b = { 128, 32, 32 };

static void *quantized(enum loom_type type, int64_t n, unsigned seed)
{
	struct loom_test_rng rng;
	float *f = g_new(float, n);
	void *q = g_malloc(loom_type_row_size(type, n));

	loom_test_rng_seed(&rng, seed);
	for (int64_t i = 0; i < n; i++)
		f[i] = (float)loom_test_rng_uniform(&rng, -1, 1);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, f, type, q, n), ==,
			LOOM_OK);
	g_free(f);
	return q;
}

/* out = wo (wq x) on dev; wq Q4_K, wo of type to. */
static double *run(loom_dev_t *dev, enum loom_type to, const void *wq,
		   const void *wo, const float *x)
{
	struct loom_tensor *q, *o, *tx, *y;
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	double *out;
	char *err = NULL;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	q = loom_tensor_new_2d(wctx, LOOM_TYPE_Q4_K, D, D);
	o = loom_tensor_new_2d(wctx, to, D, D);
	loom_tensor_set_name(q, "blk.0.attn_q.weight");
	loom_tensor_set_name(o, "blk.0.attn_output.weight");
	if (loom_ctx_alloc_tensors(wctx, loom_dev_weight_buffer_type(dev),
				   &wbuf))
		g_error("weights on %s: %s", loom_dev_name(dev),
			loom_error_message());
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_tensor_set(q, wq, 0, loom_tensor_n_bytes(q)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_set(o, wo, 0, loom_tensor_n_bytes(o)), ==,
			LOOM_OK);

	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	tx = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, D, NT);
	loom_tensor_set_flags(tx, LOOM_TENSOR_INPUT);
	y = loom_mul_mat(gctx, o, loom_mul_mat(gctx, q, tx));
	g_assert_nonnull(y);
	loom_tensor_set_flags(y, LOOM_TENSOR_OUTPUT);
	out = loom_test_compute(dev, gctx, y, tx, x, &err);
	if (!out)
		g_error("%s", err);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
	return out;
}

/* y = w x, w (D x D of type, a row per output) decoded row by row. */
static void product(enum loom_type type, const void *w, const double *x,
		    double *y)
{
	size_t nb1 = loom_type_row_size(type, D);
	double *row = g_new(double, D);

	for (int r = 0; r < D; r++) {
		g_assert_cmpint(loom_test_decode_blocks(
			type, (const uint8_t *)w + (size_t)r * nb1, D, row),
			==, LOOM_OK);
		for (int t = 0; t < NT; t++) {
			double acc = 0;

			for (int i = 0; i < D; i++)
				acc += row[i] * x[t * D + i];
			y[t * D + r] = acc;
		}
	}
	g_free(row);
}

static void test_attention(gconstpointer data)
{
	const enum loom_type to = *(const enum loom_type *)data;
	void *wq = quantized(LOOM_TYPE_Q4_K, (int64_t)D * D, 3);
	void *wo = quantized(to, (int64_t)D * D, 4);
	float *x = g_new(float, D * NT);
	double *xd = g_new(double, D * NT), *h = g_new(double, D * NT);
	double *ref = g_new(double, D * NT), *one;
	struct loom_test_rng rng;

	loom_test_rng_seed(&rng, 9);
	for (int i = 0; i < D * NT; i++)
		xd[i] = x[i] = (float)loom_test_rng_uniform(&rng, -1, 1);
	product(LOOM_TYPE_Q4_K, wq, xd, h);
	product(to, wo, h, ref);

	one = run(cpu[0], to, wq, wo, x);
	/* int8 activations, twice */
	g_assert_cmpfloat(loom_test_nmse(ref, one, D * NT), <=, 1e-3);
	for (int n = 2; n <= 3; n++) {
		loom_dev_t *meta = NULL;
		double *got;

		if (loom_meta_dev_new(cpu, (size_t)n, NULL, &llama7b, NULL,
				      &meta))
			g_error("meta device: %s", loom_error_message());
		got = run(meta, to, wq, wo, x);
		g_test_message("%s over %d: NMSE %.3g against one device",
			       loom_type_name(to), n,
			       loom_test_nmse(one, got, D * NT));
		g_assert_cmpfloat(loom_test_nmse(one, got, D * NT), <=, 1e-6);
		g_assert_cmpfloat(loom_test_nmse(ref, got, D * NT), <=, 1e-3);
		g_free(got);
	}
	g_free(one);
	g_free(ref);
	g_free(h);
	g_free(xd);
	g_free(x);
	g_free(wo);
	g_free(wq);
}

/* The policy's granularity for a tensor of the given name and shape. */
static int64_t granularity(const struct loom_meta_model *m, const char *name,
			   enum loom_type type, int64_t ne0, int64_t ne1,
			   enum loom_split_state *state)
{
	struct loom_split sp;

	g_assert_cmpint(loom_test_split_of(loom_meta_split_default, (void *)m,
					   name, type, ne0, ne1, &sp), ==,
			LOOM_OK);
	*state = sp.state;
	return sp.granularity;
}

/* Two heads of 128 per unit for 32 KV heads; whole GQA groups where
 * those are whole blocks already (or where units would be too few). */
static void test_units(void)
{
	static const struct loom_meta_model gqa = { 128, 32, 8 };
	static const struct loom_meta_model small = { 64, 9, 3 };
	static const struct loom_meta_model few = { 128, 8, 8 };
	static const struct loom_meta_model mqa = { 256, 4, 1 };
	static const struct loom_meta_model mqa64 = { 64, 8, 1 };
	enum loom_split_state st;

	g_assert_cmpint(granularity(&llama7b, "blk.0.attn_q.weight",
				    LOOM_TYPE_F32, D, D, &st), ==, 256);
	g_assert_cmpint(st, ==, LOOM_SPLIT_DIM1);
	g_assert_cmpint(granularity(&llama7b, "blk.0.attn_k.weight",
				    LOOM_TYPE_F32, D, D, &st), ==, 256);
	g_assert_cmpint(granularity(&llama7b, "blk.0.attn_output.weight",
				    LOOM_TYPE_Q4_K, D, D, &st), ==, 256);
	g_assert_cmpint(st, ==, LOOM_SPLIT_DIM0);
	g_assert_cmpint(granularity(&llama7b, "cache_k_l0", LOOM_TYPE_F16,
				    128 * 32, 64, &st), ==, 256);
	g_assert_cmpint(granularity(&gqa, "blk.0.attn_q.weight",
				    LOOM_TYPE_F32, D, D, &st), ==, 512);
	g_assert_cmpint(granularity(&gqa, "blk.0.attn_k.weight",
				    LOOM_TYPE_F32, D, 1024, &st), ==, 128);
	g_assert_cmpint(granularity(&small, "blk.0.attn_output.weight",
				    LOOM_TYPE_F32, 576, 576, &st), ==, 192);
	g_assert_cmpint(granularity(&few, "blk.0.attn_q.weight",
				    LOOM_TYPE_F32, 1024, 1024, &st), ==, 128);
	/* One KV head: k, v and the cache whole on every member, q and the
	 * output cut by whole query heads (one of 256 values each). */
	g_assert_cmpint(granularity(&mqa, "blk.0.attn_q.weight",
				    LOOM_TYPE_F32, 640, 1024, &st), ==, 256);
	g_assert_cmpint(st, ==, LOOM_SPLIT_DIM1);
	g_assert_cmpint(granularity(&mqa, "blk.0.attn_output.weight",
				    LOOM_TYPE_Q4_K, 1024, 640, &st), ==, 256);
	g_assert_cmpint(st, ==, LOOM_SPLIT_DIM0);
	granularity(&mqa, "blk.0.attn_k.weight", LOOM_TYPE_F32, 640, 256,
		    &st);
	g_assert_cmpint(st, ==, LOOM_SPLIT_MIRRORED);
	granularity(&mqa, "blk.0.attn_k_norm.weight", LOOM_TYPE_F32, 256, 1,
		    &st);
	g_assert_cmpint(st, ==, LOOM_SPLIT_MIRRORED);
	granularity(&mqa, "cache_k.0", LOOM_TYPE_F16, 256, 64, &st);
	g_assert_cmpint(st, ==, LOOM_SPLIT_MIRRORED);
	/* Heads of 64 make whole 256-value blocks four at a time. */
	g_assert_cmpint(granularity(&mqa64, "blk.0.attn_q.weight",
				    LOOM_TYPE_Q4_K, 512, 512, &st), ==, 256);
	granularity(&mqa, "blk.0.ffn_up.weight", LOOM_TYPE_F32, 640, 2048,
		    &st);
	g_assert_cmpint(st, ==, LOOM_SPLIT_DIM1);
}

/* loom_meta_head_unit against the units worked out by hand, and shapes
 * no model has. */
static void test_head_unit(void)
{
	g_assert_cmpint(loom_meta_head_unit(32, 128, 8), ==, 2);
	g_assert_cmpint(loom_meta_head_unit(8, 512, 8), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(3, 192, 8), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(8, 64, 2), ==, 4);
	g_assert_cmpint(loom_meta_head_unit(6, 12, 2), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(9, 96, 2), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(0, 128, 2), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(-4, 128, 2), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(8, 0, 2), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(8, -64, 2), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(8, 64, 0), ==, 4);
	g_assert_cmpint(loom_meta_head_unit(INT64_MAX, 128, 2), ==, 1);
	g_assert_cmpint(loom_meta_head_unit(64, INT64_MAX / 2, 2), ==, 1);
}

static const enum loom_type out_types[] = {
	LOOM_TYPE_Q4_K, LOOM_TYPE_Q6_K,
};

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	if (loom_test_meta_partitions(3, cpu)) {
		g_test_skip("no cpu and meta plugins with 3 partitions");
		return g_test_run();
	}
	g_test_add_func("/meta-kquant/units", test_units);
	g_test_add_func("/meta-kquant/head-unit", test_head_unit);
	for (size_t i = 0; i < G_N_ELEMENTS(out_types); i++) {
		char *path = g_strdup_printf("/meta-kquant/attention/%s",
					     loom_type_name(out_types[i]));

		g_test_add_data_func(path, &out_types[i], test_attention);
		g_free(path);
	}
	return g_test_run();
}
