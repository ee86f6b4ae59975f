/* SPDX-License-Identifier: MIT */
/* test-cpu-quant.c - products of quantized weights whose activations hold
 * infinities, NaNs or values too small for an int8 scale: the CPU plugin
 * quantizes activations to 8 bits, and such a group has no scale.  Its
 * products are NaN (loom(7)), every other column's as the plain double
 * product says, for every quantized type and every kernel's width (1-3
 * columns decode, tiles, panels, AMX where present).
 *
 * And products whose activations hold a few massive values among small
 * ones, as a small model's do: each kernel (decode on plain and on
 * interleaved weights, tiles, panels) against the double product of the
 * very int8 activations the plugin makes, within what float rounding
 * alone allows.
 */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-backend.h"
#include "loom/loom-plugin.h"
#include "test-util.h"

static const enum loom_type q_types[] = {
	LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K,
	LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1,
	LOOM_TYPE_Q3_K, LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
	LOOM_TYPE_MXFP4,
};

/* What column j holds, by j % 5: a value that is not finite (+inf,
 * -inf, NaN) in one place, values below 2^-120, or ordinary values. */
enum col { COL_INF, COL_NEG_INF, COL_NAN, COL_TINY, COL_PLAIN };

static void fill_column(float *x, int64_t k, int64_t j,
			struct loom_test_rng *rng)
{
	for (int64_t l = 0; l < k; l++)
		x[l] = (float)loom_test_rng_uniform(rng, -1, 1);
	switch (j % 5) {
	case COL_INF:
		x[k / 2] = INFINITY;
		break;
	case COL_NEG_INF:
		x[k - 1] = -INFINITY;
		break;
	case COL_NAN:
		x[3] = NAN;
		break;
	case COL_TINY:
		for (int64_t l = 0; l < k; l++)
			x[l] *= 0x1p-125f;
		break;
	default:
		break;
	}
}

/* The product of m rows of k weights, uniform in [-1, 1) and quantized
 * to type (their values in wd), in a buffer of buft, with the n columns
 * of xf (k values each), computed on be; free() the result. */
static double *product(loom_backend_t *be, loom_buffer_type_t *buft,
		       enum loom_type type, int64_t k, int64_t m,
		       const float *xf, int64_t n, double *wd,
		       struct loom_test_rng *rng)
{
	loom_ctx_t *c;
	loom_buffer_t *buf;
	struct loom_tensor *w, *x, *y;
	loom_graph_t *g;
	float *wf = g_new(float, k * m);
	void *q = g_malloc(loom_type_row_size(type, k) * m);
	double *yd;
	char *err = NULL;

	for (int64_t i = 0; i < k * m; i++)
		wf[i] = (float)loom_test_rng_uniform(rng, -1, 1);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, wf, type, q, k * m),
			==, LOOM_OK);
	g_assert_cmpint(loom_test_decode_blocks(type, q, k * m, wd), ==,
			LOOM_OK);

	g_assert_cmpint(loom_ctx_new(0, &c), ==, LOOM_OK);
	w = loom_tensor_new_2d(c, type, k, m);
	x = loom_tensor_new_2d(c, LOOM_TYPE_F32, k, n);
	y = loom_mul_mat(c, w, x);
	g_assert_nonnull(y);
	g_assert_cmpint(loom_ctx_alloc_tensors(c, buft, &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(w, q, 0, loom_tensor_n_bytes(w)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_test_set_f32(x, xf), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_new(c, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	yd = loom_test_get_doubles(y, &err);
	g_assert_null(err);
	loom_buffer_free(buf);
	loom_ctx_free(c);
	g_free(q);
	g_free(wf);
	return yd;
}

static void check_product(loom_dev_t *dev, loom_backend_t *be,
			  enum loom_type type, int64_t k, int64_t m,
			  int64_t n, struct loom_test_rng *rng)
{
	float *xf = g_new(float, k * n);
	double *wd = g_new(double, k * m), *yd;

	for (int64_t j = 0; j < n; j++)
		fill_column(xf + j * k, k, j, rng);
	yd = product(be, loom_dev_buffer_type(dev), type, k, m, xf, n, wd,
		     rng);

	for (int64_t j = 0; j < n; j++) {
		const float *xj = xf + j * k;

		for (int64_t i = 0; i < m; i++) {
			double ref = 0, mag = 0, got = yd[j * m + i];

			for (int64_t l = 0; l < k; l++) {
				ref += wd[i * k + l] * xj[l];
				mag += fabs(wd[i * k + l] * xj[l]);
			}
			if (j % 5 <= COL_NAN) {
				/* NaN on the int8 paths; AMX's BF16 products
				 * may keep an infinity. */
				if (isfinite(got))
					g_error("%s k %lld n %lld: column %lld "
						"row %lld is %g, not NaN",
						loom_type_name(type),
						(long long)k, (long long)n,
						(long long)j, (long long)i,
						got);
			} else if (!(fabs(got - ref) <= 2e-2 * mag + 1e-30)) {
				g_error("%s k %lld n %lld: column %lld row "
					"%lld is %.9g, expected %.9g",
					loom_type_name(type), (long long)k,
					(long long)n, (long long)j,
					(long long)i, got, ref);
			}
		}
	}
	free(yd);
	g_free(wd);
	g_free(xf);
}

static void test_special(const void *data)
{
	const enum loom_type type = *(const enum loom_type *)data;
	const int64_t kb = loom_type_block_size(type);
	static const int64_t ns[] = { 1, 2, 3, 5, 8, 20 };
	struct loom_test_rng rng;
	loom_backend_t *be;
	loom_dev_t *dev;

	g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
	dev = loom_dev_by_name("cpu0");
	g_assert_nonnull(dev);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	loom_test_rng_seed(&rng, 5);
	for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) {
		/* Each column's special value in one of several blocks,
		 * and in the only one. */
		check_product(dev, be, type, 4 * kb, 36, ns[i], &rng);
		check_product(dev, be, type, kb, 9, ns[i], &rng);
	}
	loom_backend_free(be);
}

/* Values of activations per int8 scale the plugin takes for weights of
 * type: one per 256 for the K-quants whose kernels without VNNI keep
 * integer sums over the super-block (as llama.cpp's Q8_K), else one per
 * 32. */
static int64_t act_group(enum loom_type type)
{
	return type == LOOM_TYPE_Q4_K || type == LOOM_TYPE_Q5_K ||
	       type == LOOM_TYPE_Q6_K ? 256 : 32;
}

/* The activations x (k values) as the plugin rounds them, in double: per
 * group d = max|x| / 127 and q = x * (127 / max|x|) rounded to nearest
 * even, both in float as the plugin computes them. */
static void int8_acts(const float *x, int64_t k, int64_t group, double *out)
{
	for (int64_t b = 0; b < k; b += group) {
		float amax = 0.0f, id, d;

		for (int64_t l = b; l < b + group; l++)
			amax = fmaxf(amax, fabsf(x[l]));
		id = 127.0f / amax;
		d = amax / 127.0f;
		for (int64_t l = b; l < b + group; l++)
			out[l] = (double)d * (double)nearbyintf(x[l] * id);
	}
}

/* Column j: small values, and massive ones in three channels, two of
 * them side by side (the pair a 16-bit sum of two products would
 * saturate on) and one of the other sign in another block. */
static void outlier_column(float *x, int64_t k, int64_t j,
			   struct loom_test_rng *rng)
{
	int64_t at = (37 + 96 * j) % (k - 1);

	for (int64_t l = 0; l < k; l++)
		x[l] = (float)loom_test_rng_uniform(rng, -0.3, 0.3);
	x[at] = 60.0f + (float)j;
	x[at + 1] = 55.0f;
	x[(at + k / 2) % k] = -80.0f - 3.0f * (float)j;
}

/* Weights of type in buffers of buft against n outlier columns. */
static void check_outlier(loom_backend_t *be, loom_buffer_type_t *buft,
			  enum loom_type type, int64_t k, int64_t m, int64_t n,
			  struct loom_test_rng *rng)
{
	const int64_t group = act_group(type);
	float *xf = g_new(float, k * n);
	double *wd = g_new(double, k * m), *qd = g_new(double, k), *yd;

	for (int64_t j = 0; j < n; j++)
		outlier_column(xf + j * k, k, j, rng);
	yd = product(be, buft, type, k, m, xf, n, wd, rng);

	for (int64_t j = 0; j < n; j++) {
		int8_acts(xf + j * k, k, group, qd);
		for (int64_t i = 0; i < m; i++) {
			const double *wr = wd + i * k;
			double ref = 0, mag = 0, got = yd[j * m + i], tol;

			/* A kernel sums, per scale group, scales times exact
			 * integer sums and an offset (at most the block's
			 * largest |weight|) times the activations' sum: each
			 * group adds a few roundings of float's epsilon of
			 * at most this magnitude. */
			for (int64_t b = 0; b < k; b += 32) {
				double wmax = 0;

				for (int64_t l = b; l < b + 32; l++)
					wmax = fmax(wmax, fabs(wr[l]));
				for (int64_t l = b; l < b + 32; l++) {
					ref += wr[l] * qd[l];
					mag += (fabs(wr[l]) + wmax) *
					       fabs(qd[l]);
				}
			}
			tol = (double)(2 * (k / 16) + 16) * 0x1p-24 * mag;
			if (!(fabs(got - ref) <= tol))
				g_error("%s on %s, k %lld n %lld: column %lld "
					"row %lld is %.9g, the int8 product "
					"%.9g (off by %.3g, float rounding "
					"allows %.3g)",
					loom_type_name(type),
					loom_buffer_type_name(buft),
					(long long)k, (long long)n,
					(long long)j, (long long)i, got, ref,
					fabs(got - ref), tol);
		}
	}
	free(yd);
	g_free(qd);
	g_free(wd);
	g_free(xf);
}

/* The value of the CPU plugin's feature name, or "". */
static const char *cpu_feature(loom_dev_t *dev, const char *name)
{
	loom_get_features_fn get = (loom_get_features_fn)
		loom_reg_proc_address(loom_dev_reg(dev),
				      LOOM_PROC_GET_FEATURES);

	for (const struct loom_feature *f = get ? get(loom_dev_reg(dev)) :
						  NULL; f && f->name; f++)
		if (!strcmp(f->name, name))
			return f->value;
	return "";
}

static void test_outlier(const void *data)
{
	const enum loom_type type = *(const enum loom_type *)data;
	static const int64_t ns[] = { 1, 2, 3, 5, 8, 20 };
	struct loom_test_rng rng;
	loom_backend_t *be;
	loom_dev_t *dev;
	const char *variant, *env = g_getenv("LOOM_CPU_AMX");
	bool amx;

	g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
	dev = loom_dev_by_name("cpu0");
	g_assert_nonnull(dev);
	/* x86-64-v3 and v4 have the int8 kernels; the other variants
	 * multiply float activations. */
	variant = cpu_feature(dev, "VARIANT");
	if (strcmp(variant, "x86_64_v3") && strcmp(variant, "x86_64_v4")) {
		g_test_skip("this CPU's variant has no int8 kernels");
		return;
	}
	/* Where AMX may take the wide products (BF16, not int8), the panels
	 * are checked with LOOM_CPU_AMX=0 only. */
	amx = !strcmp(cpu_feature(dev, "AMX_BF16"), "1") &&
	      !(env && !strcmp(env, "0"));
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	loom_test_rng_seed(&rng, 7);
	for (size_t i = 0; i < G_N_ELEMENTS(ns); i++) {
		if (amx && ns[i] >= 16) {
			g_test_message("%lld columns: AMX's, not checked",
				       (long long)ns[i]);
			continue;
		}
		/* 40 rows: a panel of 32 and a part, tiles of 4. */
		check_outlier(be, loom_dev_buffer_type(dev), type, 512, 40,
			      ns[i], &rng);
		check_outlier(be, loom_dev_weight_buffer_type(dev), type, 512,
			      40, ns[i], &rng);
	}
	loom_backend_free(be);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	for (size_t i = 0; i < G_N_ELEMENTS(q_types); i++) {
		char *p = g_strdup_printf("/cpu-quant/special/%s",
					  loom_type_name(q_types[i]));

		g_test_add_data_func(p, &q_types[i], test_special);
		g_free(p);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(q_types); i++) {
		char *p = g_strdup_printf("/cpu-quant/outlier/%s",
					  loom_type_name(q_types[i]));

		g_test_add_data_func(p, &q_types[i], test_outlier);
		g_free(p);
	}
	return g_test_run();
}
