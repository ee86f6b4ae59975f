/* SPDX-License-Identifier: MIT */
/* test-cpu-quant.c - products of quantized weights whose activations hold
 * infinities, NaNs or values too small for an int8 scale: the CPU plugin
 * quantizes activations to 8 bits, and such a group has no scale.  Its
 * products are NaN (loom(7)), every other column's as the plain double
 * product says, for every quantized type and every kernel's width (1-3
 * columns decode, tiles, panels, AMX where present).
 */
#include <glib.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-backend.h"
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

static void check_product(loom_dev_t *dev, loom_backend_t *be,
			  enum loom_type type, int64_t k, int64_t m,
			  int64_t n, struct loom_test_rng *rng)
{
	loom_ctx_t *c;
	loom_buffer_t *buf;
	struct loom_tensor *w, *x, *y;
	loom_graph_t *g;
	float *wf = g_new(float, k * m), *xf = g_new(float, k * n);
	void *q = g_malloc(loom_type_row_size(type, k) * m);
	double *wd = g_new(double, k * m), *yd;
	char *err = NULL;

	for (int64_t i = 0; i < k * m; i++)
		wf[i] = (float)loom_test_rng_uniform(rng, -1, 1);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, wf, type, q, k * m),
			==, LOOM_OK);
	g_assert_cmpint(loom_test_decode_blocks(type, q, k * m, wd), ==,
			LOOM_OK);
	for (int64_t j = 0; j < n; j++)
		fill_column(xf + j * k, k, j, rng);

	g_assert_cmpint(loom_ctx_new(0, &c), ==, LOOM_OK);
	w = loom_tensor_new_2d(c, type, k, m);
	x = loom_tensor_new_2d(c, LOOM_TYPE_F32, k, n);
	y = loom_mul_mat(c, w, x);
	g_assert_nonnull(y);
	g_assert_cmpint(loom_ctx_alloc_tensors(c, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(w, q, 0, loom_tensor_n_bytes(w)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_test_set_f32(x, xf), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_new(c, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	yd = loom_test_get_doubles(y, &err);
	g_assert_null(err);

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
	loom_buffer_free(buf);
	loom_ctx_free(c);
	g_free(wd);
	g_free(q);
	g_free(xf);
	g_free(wf);
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

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	for (size_t i = 0; i < G_N_ELEMENTS(q_types); i++) {
		char *p = g_strdup_printf("/cpu-quant/special/%s",
					  loom_type_name(q_types[i]));

		g_test_add_data_func(p, &q_types[i], test_special);
		g_free(p);
	}
	return g_test_run();
}
