/* SPDX-License-Identifier: MIT */
/* test-core.c - types and conversions against formulas written here in
 * double precision, contexts and tensors, the shape rules of every op
 * constructor, views and strides, and graphs (order, dedup, depth). */
#include <float.h>
#include <glib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-plugin.h"
#include "test-util.h"

/* ------------------------------------------------------------------------
 * Reference number formats.
 */
static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Value of a binary16 or bfloat16 pattern from its fields. */
static double ref_decode(uint16_t h, int exp_bits, int man_bits)
{
	int bias = (1 << (exp_bits - 1)) - 1;
	int e = (h >> man_bits) & ((1 << exp_bits) - 1);
	int m = h & ((1 << man_bits) - 1);
	double sign = (h & 0x8000) ? -1.0 : 1.0;

	if (e == (1 << exp_bits) - 1)
		return m ? NAN : sign * INFINITY;
	if (e == 0)
		return sign * ldexp(m, 1 - bias - man_bits);
	return sign * ldexp(1.0 + ldexp(m, -man_bits), e - bias);
}

/* x rounded to the nearest value with man_bits stored mantissa bits and
 * the given minimum exponent (ties to even, through rint), or infinity
 * past max. */
static double ref_round(double x, int man_bits, int min_exp, double max)
{
	double ax = fabs(x), ulp, q;
	int e;

	if (ax == 0.0 || isnan(x))
		return x;
	frexp(ax, &e);
	e -= 1; /* ax in [2^e, 2^(e+1)) */
	if (e < min_exp)
		e = min_exp;
	ulp = ldexp(1.0, e - man_bits);
	q = rint(ax / ulp) * ulp;
	if (q > max)
		q = INFINITY;
	return x < 0 ? -q : q;
}

#define F16_MAX 65504.0
#define BF16_MAX (ldexp(1.0, 127) * (2.0 - ldexp(1.0, -7)))

static void test_fp16_exhaustive(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = loom_f16_to_f32((uint16_t)h);
		double ref = ref_decode((uint16_t)h, 5, 10);

		if (isnan(ref)) {
			g_assert_true(isnan(f));
			g_assert_true(isnan(loom_f16_to_f32(
				loom_f32_to_f16(f))));
			continue;
		}
		g_assert_cmpfloat((double)f, ==, ref);
		g_assert_cmphex(loom_f32_to_f16(f), ==, h);
		g_assert_cmpint(signbit(f) != 0, ==, (h & 0x8000) != 0);
	}
}

static void test_bf16_exhaustive(void)
{
	for (uint32_t h = 0; h < 65536; h++) {
		float f = loom_bf16_to_f32((uint16_t)h);
		double ref = ref_decode((uint16_t)h, 8, 7);

		if (isnan(ref)) {
			g_assert_true(isnan(f));
			g_assert_true(isnan(loom_bf16_to_f32(
				loom_f32_to_bf16(f))));
			continue;
		}
		g_assert_cmpfloat((double)f, ==, ref);
		g_assert_cmphex(loom_f32_to_bf16(f), ==, h);
	}
}

/* Rounding of arbitrary floats, of every tie between neighbouring halves,
 * and of the overflow and underflow edges. */
static void check_f16(float x)
{
	double ref = ref_round(x, 10, -14, F16_MAX);
	float got = loom_f16_to_f32(loom_f32_to_f16(x));

	if (isnan(x)) {
		g_assert_true(isnan(got));
		return;
	}
	if ((double)got != ref)
		g_error("fp16(%a) = %a, expected %a", (double)x, (double)got,
			ref);
}

static void check_bf16(float x)
{
	double ref = ref_round(x, 7, -126, BF16_MAX);
	float got = loom_bf16_to_f32(loom_f32_to_bf16(x));

	if (isnan(x)) {
		g_assert_true(isnan(got));
		return;
	}
	if ((double)got != ref)
		g_error("bf16(%a) = %a, expected %a", (double)x, (double)got,
			ref);
}

static void test_fp16_rounding(void)
{
	GRand *rand = g_rand_new_with_seed(1);

	for (int i = 0; i < 1000000; i++) {
		float x = bits_f32(g_rand_int(rand));

		check_f16(x);
		check_bf16(x);
		/* Values near the half range, where rounding matters. */
		check_f16((float)g_rand_double_range(rand, -70000, 70000));
		check_f16((float)ldexp(g_rand_double_range(rand, -1, 1),
				       g_rand_int_range(rand, -28, -12)));
	}
	/* Every midpoint between neighbouring positive halves. */
	for (uint32_t h = 0; h < 0x7bff; h++) {
		double lo = ref_decode((uint16_t)h, 5, 10);
		double hi = ref_decode((uint16_t)(h + 1), 5, 10);
		float mid = (float)((lo + hi) / 2);

		g_assert_cmpfloat((double)mid, ==, (lo + hi) / 2);
		check_f16(mid);
		check_f16(-mid);
		check_f16(nextafterf(mid, 0));
		check_f16(nextafterf(mid, INFINITY));
	}
	for (uint32_t h = 0; h < 0x7f7f; h += 7) {
		double lo = ref_decode((uint16_t)h, 8, 7);
		double hi = ref_decode((uint16_t)(h + 1), 8, 7);

		check_bf16((float)((lo + hi) / 2));
	}
	g_assert_cmphex(loom_f32_to_f16(65519.0f), ==, 0x7bff);
	g_assert_cmphex(loom_f32_to_f16(65520.0f), ==, 0x7c00);
	g_assert_cmphex(loom_f32_to_f16(-INFINITY), ==, 0xfc00);
	g_assert_cmphex(loom_f32_to_f16(0x1p-25f), ==, 0x0000);
	g_assert_cmphex(loom_f32_to_f16(0x1.000002p-25f), ==, 0x0001);
	g_assert_cmphex(loom_f32_to_f16(-0.0f), ==, 0x8000);
	g_assert_cmphex(loom_f32_to_bf16(FLT_MAX), ==, 0x7f80);
	g_assert_true(isnan(loom_f16_to_f32(loom_f32_to_f16(NAN))));
	g_assert_true(isnan(loom_bf16_to_f32(loom_f32_to_bf16(NAN))));
	g_rand_free(rand);
}

static void test_q8_0(void)
{
	enum { N = 32 * 64 };
	GRand *rand = g_rand_new_with_seed(2);
	float *x = g_new(float, N), *y = g_new(float, N);
	struct loom_block_q8_0 *q = g_new(struct loom_block_q8_0, N / 32);

	g_assert_cmpuint(sizeof(struct loom_block_q8_0), ==, 34);
	g_assert_cmpuint(loom_type_row_size(LOOM_TYPE_Q8_0, 64), ==, 68);
	for (int round = 0; round < 20; round++) {
		double scale = ldexp(1.0, g_rand_int_range(rand, -22, 12));

		for (int i = 0; i < N; i++)
			x[i] = (float)(g_rand_double_range(rand, -1, 1) *
				       scale);
		if (round == 0)
			memset(x, 0, 32 * sizeof(float));
		g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, LOOM_TYPE_Q8_0,
					     q, N), ==, LOOM_OK);
		g_assert_cmpint(loom_type_convert(LOOM_TYPE_Q8_0, q, LOOM_TYPE_F32,
					     y, N), ==, LOOM_OK);
		for (int b = 0; b < N / 32; b++) {
			double amax = 0, d = ref_decode(q[b].d, 5, 10), bound;

			for (int i = 0; i < 32; i++)
				amax = fmax(amax, fabs(x[b * 32 + i]));
			/* d is amax / 127 to half precision. */
			g_assert_cmpfloat(fabs(d - amax / 127), <=,
					  amax / 127 * 0x1p-11 + 0x1p-25);
			/* Half a step, or the clamp at 127 when d rounded
			 * down. */
			bound = fmax(0.5 * d, amax - 127 * d);
			for (int i = 0; i < 32; i++) {
				double v = d * q[b].qs[i];

				g_assert_cmpint(abs(q[b].qs[i]), <=, 127);
				g_assert_cmpfloat((double)y[b * 32 + i], ==,
						  (double)(float)v);
				g_assert_cmpfloat(fabs(x[b * 32 + i] - v), <=,
						  bound + 1e-6 * amax);
			}
		}
	}
	g_free(x);
	g_free(y);
	g_free(q);
	g_rand_free(rand);
}

/* A normally distributed value (Box-Muller), as weights mostly are. */
static double gauss(GRand *rand)
{
	double u = g_rand_double_range(rand, 0x1p-30, 1.0);
	double v = g_rand_double(rand);

	return sqrt(-2.0 * log(u)) * cos(2.0 * G_PI * v);
}

/* Every quantized type: its block struct has the GGUF size, quantizing
 * and decoding by loom_type_convert matches the tests' own decoder (from
 * the format definitions) value for value, and the error against the
 * input is what the type's bits allow (NMSE per type), at any scale and
 * for blocks of zeros or of one sign. */
static void test_quant_types(void)
{
	static const struct {
		enum loom_type type;
		size_t struct_size;
		double max_nmse; /* normal input; each is ~1.3x what we get */
		double max_err;  /* on the blocks of one value, one sign */
	} types[] = {
		{ LOOM_TYPE_Q8_0, sizeof(struct loom_block_q8_0), 4e-5, 7.0 / 8 },
		{ LOOM_TYPE_Q4_0, sizeof(struct loom_block_q4_0), 1e-2, 7.0 / 8 },
		{ LOOM_TYPE_Q4_K, sizeof(struct loom_block_q4_k), 8e-3, 7.0 / 8 },
		{ LOOM_TYPE_Q5_K, sizeof(struct loom_block_q5_k), 2e-3, 7.0 / 8 },
		{ LOOM_TYPE_Q6_K, sizeof(struct loom_block_q6_k), 5e-4, 7.0 / 8 },
		{ LOOM_TYPE_Q4_1, sizeof(struct loom_block_q4_1), 8.5e-3, 7.0 / 8 },
		{ LOOM_TYPE_Q5_0, sizeof(struct loom_block_q5_0), 2.5e-3, 7.0 / 8 },
		{ LOOM_TYPE_Q5_1, sizeof(struct loom_block_q5_1), 2e-3, 7.0 / 8 },
		{ LOOM_TYPE_Q3_K, sizeof(struct loom_block_q3_k), 3.2e-2, 7.0 / 8 },
		{ LOOM_TYPE_Q2_K, sizeof(struct loom_block_q2_k), 1.45e-1, 7.0 / 6 },
		{ LOOM_TYPE_IQ4_NL, sizeof(struct loom_block_iq4_nl), 8.5e-3, 7.0 / 8 },
		{ LOOM_TYPE_IQ4_XS, sizeof(struct loom_block_iq4_xs), 8.5e-3, 7.0 / 8 },
		{ LOOM_TYPE_MXFP4, sizeof(struct loom_block_mxfp4), 1.8e-2, 1.0 },
	};
	enum { N = 256 * 32 };
	GRand *rand = g_rand_new_with_seed(11);
	float *x = g_new(float, N), *y = g_new(float, N);
	double *ref = g_new(double, N), *xd = g_new(double, N);
	void *q = g_malloc(N * 2);

	g_assert_cmpuint(sizeof(struct loom_block_q4_0), ==, 18);
	g_assert_cmpuint(sizeof(struct loom_block_q4_k), ==, 144);
	g_assert_cmpuint(sizeof(struct loom_block_q5_k), ==, 176);
	g_assert_cmpuint(sizeof(struct loom_block_q6_k), ==, 210);
	for (size_t t = 0; t < G_N_ELEMENTS(types); t++) {
		enum loom_type type = types[t].type;
		int64_t bs = loom_type_block_size(type);

		g_assert_cmpuint(loom_type_size(type), ==,
				 types[t].struct_size);
		g_assert_cmpuint(loom_type_row_size(type, 2 * bs), ==,
				 2 * types[t].struct_size);
		/* Scales as weights have; far smaller ones put a K-quant's
		 * half scale among the subnormals. */
		for (int round = 0; round < 5; round++) {
			double scale = ldexp(1.0, 4 * round - 8);

			for (int i = 0; i < N; i++)
				x[i] = (float)(gauss(rand) * scale);
			g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, type,
							  q, N), ==, LOOM_OK);
			g_assert_cmpint(loom_type_convert(type, q,
							  LOOM_TYPE_F32, y, N),
					==, LOOM_OK);
			g_assert_cmpint(loom_test_decode_blocks(type, q, N, ref),
					==, LOOM_OK);
			for (int i = 0; i < N; i++) {
				g_assert_cmpfloat(y[i], ==, (float)ref[i]);
				xd[i] = x[i];
			}
			if (g_test_verbose())
				g_print("%s scale 2^%d: nmse %.3g\n",
					loom_type_name(type), 4 * round - 8,
					loom_test_nmse(xd, ref, N));
			g_assert_cmpfloat(loom_test_nmse(xd, ref, N), <=,
					  types[t].max_nmse);
		}
		/* A block of zeros, one of one positive value, one all
		 * negative: exact zeros, and the extremes kept to within a
		 * step of the block's range. */
		for (int i = 0; i < 3 * bs; i++)
			x[i] = i < bs ? 0.0f : i < 2 * bs ? 2.5f :
			       -(float)(1 + i % 7);
		loom_type_convert(LOOM_TYPE_F32, x, type, q, 3 * bs);
		loom_test_decode_blocks(type, q, 3 * bs, ref);
		for (int i = 0; i < bs; i++)
			g_assert_cmpfloat(ref[i], ==, 0.0);
		for (int i = bs; i < 3 * bs; i++)
			g_assert_cmpfloat(fabs(ref[i] - x[i]), <=,
					  types[t].max_err);
	}
	/* Whole blocks only. */
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, LOOM_TYPE_Q4_K, q,
					  128), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_Q6_K, q, LOOM_TYPE_Q4_0, y,
					  256), ==, LOOM_OK);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_I32, q, LOOM_TYPE_Q4_K, y,
					  256), ==, LOOM_E_UNSUPPORTED);
	g_free(x);
	g_free(y);
	g_free(ref);
	g_free(xd);
	g_free(q);
	g_rand_free(rand);
}

static void test_convert(void)
{
	enum { N = 96 };
	float x[N], y[N];
	uint16_t h[N];
	int32_t ia[4] = { 1, -2, 3, 4 }, ib[4];
	struct loom_block_q8_0 q[N / 32];

	for (int i = 0; i < N; i++)
		x[i] = (float)sin(i * 0.37) * 3;
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, LOOM_TYPE_F16, h, N),
			==, LOOM_OK);
	for (int i = 0; i < N; i++)
		g_assert_cmphex(h[i], ==, loom_f32_to_f16(x[i]));
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F16, h, LOOM_TYPE_BF16, h, 0),
			==, LOOM_OK);
	{
		uint16_t b[N];

		g_assert_cmpint(loom_type_convert(LOOM_TYPE_F16, h, LOOM_TYPE_BF16,
					     b, N), ==, LOOM_OK);
		for (int i = 0; i < N; i++)
			g_assert_cmphex(b[i], ==,
					loom_f32_to_bf16(
						loom_f16_to_f32(h[i])));
		g_assert_cmpint(loom_type_convert(LOOM_TYPE_BF16, b, LOOM_TYPE_F32,
					     y, N), ==, LOOM_OK);
		for (int i = 0; i < N; i++)
			g_assert_cmpfloat(y[i], ==, loom_bf16_to_f32(b[i]));
		g_assert_cmpint(loom_type_convert(LOOM_TYPE_BF16, b, LOOM_TYPE_Q8_0,
					     q, N), ==, LOOM_OK);
		g_assert_cmpint(loom_type_convert(LOOM_TYPE_Q8_0, q, LOOM_TYPE_F16,
					     h, N), ==, LOOM_OK);
		for (int i = 0; i < N; i++)
			g_assert_cmpfloat(fabs(loom_f16_to_f32(h[i]) - x[i]),
					  <, 0.03);
	}
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_I32, ia, LOOM_TYPE_I32, ib, 4),
			==, LOOM_OK);
	g_assert_cmpmem(ia, sizeof(ia), ib, sizeof(ib));
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_I32, ia, LOOM_TYPE_F32, y, 4),
			==, LOOM_E_UNSUPPORTED);
	g_assert_cmpstr(loom_error_message(), !=, "");
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, LOOM_TYPE_I32, ib, 4),
			==, LOOM_E_UNSUPPORTED);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, LOOM_TYPE_Q8_0, q, 40),
			==, LOOM_E_INVAL);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, NULL, LOOM_TYPE_F16, h, 4),
			==, LOOM_E_INVAL);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_COUNT, x, LOOM_TYPE_F16, h, 4),
			==, LOOM_E_INVAL);
}

static void test_type_traits(void)
{
	static const struct {
		enum loom_type type;
		const char *name;
		int64_t blck;
		size_t size;
	} want[] = {
		{ LOOM_TYPE_F32, "f32", 1, 4 },
		{ LOOM_TYPE_F16, "f16", 1, 2 },
		{ LOOM_TYPE_BF16, "bf16", 1, 2 },
		{ LOOM_TYPE_I32, "i32", 1, 4 },
		{ LOOM_TYPE_Q8_0, "q8_0", 32, 34 },
		{ LOOM_TYPE_Q4_0, "q4_0", 32, 18 },
		{ LOOM_TYPE_Q4_K, "q4_k", 256, 144 },
		{ LOOM_TYPE_Q5_K, "q5_k", 256, 176 },
		{ LOOM_TYPE_Q6_K, "q6_k", 256, 210 },
		{ LOOM_TYPE_Q4_1, "q4_1", 32, 20 },
		{ LOOM_TYPE_Q5_0, "q5_0", 32, 22 },
		{ LOOM_TYPE_Q5_1, "q5_1", 32, 24 },
		{ LOOM_TYPE_Q3_K, "q3_k", 256, 110 },
		{ LOOM_TYPE_Q2_K, "q2_k", 256, 84 },
		{ LOOM_TYPE_IQ4_NL, "iq4_nl", 32, 18 },
		{ LOOM_TYPE_IQ4_XS, "iq4_xs", 256, 136 },
		{ LOOM_TYPE_MXFP4, "mxfp4", 32, 17 },
	};
	enum loom_type t;

	for (size_t i = 0; i < G_N_ELEMENTS(want); i++) {
		g_assert_cmpstr(loom_type_name(want[i].type), ==, want[i].name);
		g_assert_cmpint(loom_type_block_size(want[i].type), ==,
				want[i].blck);
		g_assert_cmpuint(loom_type_size(want[i].type), ==,
				 want[i].size);
		g_assert_cmpint(loom_type_is_quantized(want[i].type), ==,
				want[i].blck > 1);
		g_assert_cmpint(loom_type_from_name(want[i].name, &t), ==,
				LOOM_OK);
		g_assert_cmpint(t, ==, want[i].type);
	}
	g_assert_cmpint(loom_type_from_name("f64", &t), ==, LOOM_E_NOT_FOUND);
	g_assert_cmpstr(loom_type_name(LOOM_TYPE_COUNT), ==, "unknown");
	g_assert_cmpuint(loom_type_row_size(LOOM_TYPE_F16, 7), ==, 14);
	g_assert_cmpuint(loom_type_row_size(LOOM_TYPE_Q8_0, 33), ==, 0);
	g_assert_cmpstr(loom_op_name(LOOM_OP_MUL_MAT), ==, "mul_mat");
	g_assert_cmpstr(loom_op_name(LOOM_OP_TOP_K), ==, "top_k");
	g_assert_cmpstr(loom_op_name(LOOM_OP_COUNT), ==, "unknown");
	for (int op = 0; op < LOOM_OP_COUNT; op++) {
		bool view = op == LOOM_OP_VIEW || op == LOOM_OP_RESHAPE ||
			    op == LOOM_OP_PERMUTE || op == LOOM_OP_TRANSPOSE;

		g_assert_cmpint(loom_op_is_view(op), ==, view);
		g_assert_nonnull(loom_op_name(op));
	}
}

/* ------------------------------------------------------------------------
 * Contexts and tensors.
 */
static loom_ctx_t *ctx_new(void)
{
	loom_ctx_t *ctx;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	return ctx;
}

static void test_ctx(void)
{
	loom_ctx_t *ctx;
	struct loom_tensor *t, *a;
	int n = 0;

	g_assert_cmpint(loom_ctx_new(2, &ctx), ==, LOOM_OK);
	g_assert_nonnull(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 4));
	g_assert_nonnull(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 4));
	g_assert_cmpstr(loom_ctx_error(ctx), ==, "");
	g_assert_null(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 4));
	g_assert_cmpstr(loom_ctx_error(ctx), !=, "");
	g_assert_cmpstr(loom_error_message(), ==, loom_ctx_error(ctx));
	loom_ctx_clear_error(ctx);
	g_assert_cmpstr(loom_ctx_error(ctx), ==, "");
	g_assert_cmpuint(loom_ctx_n_tensors(ctx), ==, 2);
	loom_ctx_free(ctx);

	ctx = ctx_new();
	for (int i = 0; i < 10000; i++) {
		t = loom_tensor_new_2d(ctx, LOOM_TYPE_F16, i + 1, 2);
		g_assert_nonnull(t);
		loom_tensor_set_name_fmt(t, "t%d", i);
	}
	g_assert_cmpuint(loom_ctx_n_tensors(ctx), ==, 10000);
	for (t = loom_ctx_first_tensor(ctx); t;
	     t = loom_ctx_next_tensor(ctx, t), n++) {
		g_assert_cmpint(t->ne[0], ==, n + 1);
		g_assert_cmpint(atoi(t->name + 1), ==, n);
	}
	g_assert_cmpint(n, ==, 10000);
	t = loom_ctx_get_tensor(ctx, "t4321");
	g_assert_nonnull(t);
	g_assert_cmpint(t->ne[0], ==, 4322);
	g_assert_null(loom_ctx_get_tensor(ctx, "nope"));

	/* Names are truncated, not overflowed. */
	{
		char longname[200];

		memset(longname, 'x', sizeof(longname) - 1);
		longname[sizeof(longname) - 1] = '\0';
		loom_tensor_set_name(t, longname);
		g_assert_cmpuint(strlen(t->name), ==, LOOM_MAX_NAME - 1);
	}
	loom_tensor_set_flags(t, LOOM_TENSOR_INPUT);
	loom_tensor_set_flags(t, LOOM_TENSOR_OUTPUT);
	g_assert_cmpuint(t->flags, ==, LOOM_TENSOR_INPUT | LOOM_TENSOR_OUTPUT);

	/* Shapes and strides of a new tensor. */
	a = loom_tensor_new_4d(ctx, LOOM_TYPE_Q8_0, 64, 3, 2, 5);
	g_assert_nonnull(a);
	g_assert_cmpuint(a->nb[0], ==, 34);
	g_assert_cmpuint(a->nb[1], ==, 68);
	g_assert_cmpuint(a->nb[2], ==, 68 * 3);
	g_assert_cmpuint(a->nb[3], ==, 68 * 6);
	g_assert_cmpuint(loom_tensor_n_bytes(a), ==, 68 * 30);
	g_assert_cmpint(loom_tensor_n_elements(a), ==, 64 * 30);
	g_assert_cmpint(loom_tensor_n_rows(a), ==, 30);
	g_assert_cmpint(loom_tensor_n_dims(a), ==, 4);
	g_assert_true(loom_tensor_is_contiguous(a));
	g_assert_null(a->data);
	g_assert_null(a->view_src);
	t = loom_tensor_dup(ctx, a);
	g_assert_true(loom_tensor_same_shape(t, a));
	g_assert_cmpint(t->type, ==, a->type);
	t = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 5, 1, 1);
	g_assert_cmpint(loom_tensor_n_dims(t), ==, 1);

	/* Mistakes. */
	g_assert_null(loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, 33));
	g_assert_nonnull(strstr(loom_ctx_error(ctx), "block"));
	g_assert_null(loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, -1));
	g_assert_null(loom_tensor_new_1d(ctx, LOOM_TYPE_COUNT, 4));
	g_assert_null(loom_tensor_new(ctx, LOOM_TYPE_F32, 5,
				      (int64_t[]){ 1, 1, 1, 1, 1 }));
	g_assert_null(loom_tensor_new_4d(ctx, LOOM_TYPE_F32, INT64_MAX / 2, 4,
					 4, 4));
	g_assert_null(loom_tensor_new_1d(NULL, LOOM_TYPE_F32, 4));
	g_assert_cmpstr(loom_error_message(), !=, "");
	loom_ctx_free(ctx);
	loom_ctx_free(NULL);
}

static void test_shape_helpers(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *a = loom_tensor_new_4d(ctx, LOOM_TYPE_F32, 6, 4,
						   2, 3);
	struct loom_tensor *b = loom_tensor_new_4d(ctx, LOOM_TYPE_F32, 3, 1,
						   2, 1);
	struct loom_tensor *c = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 4);

	g_assert_true(loom_tensor_can_repeat(b, a));
	g_assert_false(loom_tensor_can_repeat(a, b));
	g_assert_false(loom_tensor_can_repeat(c, a));
	g_assert_true(loom_tensor_can_repeat(a, a));
	g_assert_false(loom_tensor_same_shape(a, b));
	g_assert_cmpfloat(loom_tensor_op_param_f32(a, 99), ==, 0);
	g_assert_cmpint(loom_tensor_op_param_i32(a, -1), ==, 0);
	/* Predicates on NULL answer, not crash. */
	g_assert_cmpint(loom_tensor_n_elements(NULL), ==, 0);
	g_assert_cmpuint(loom_tensor_n_bytes(NULL), ==, 0);
	g_assert_false(loom_tensor_is_contiguous(NULL));
	g_assert_false(loom_tensor_can_repeat(NULL, a));
	loom_ctx_free(ctx);
}

/* ------------------------------------------------------------------------
 * Op constructors.
 */

/* t must be NULL, with a message naming op on ctx and on the thread. */
static void expect_fail(loom_ctx_t *ctx, struct loom_tensor *t,
			const char *op)
{
	if (t)
		g_error("%s: a bad call made a tensor", op);
	g_assert_cmpstr(loom_ctx_error(ctx), !=, "");
	if (!strstr(loom_ctx_error(ctx), op))
		g_error("message \"%s\" does not name %s",
			loom_ctx_error(ctx), op);
	g_assert_cmpstr(loom_error_message(), ==, loom_ctx_error(ctx));
	loom_ctx_clear_error(ctx);
}

static void expect_shape(struct loom_tensor *t, enum loom_op op,
			 enum loom_type type, int64_t ne0, int64_t ne1,
			 int64_t ne2, int64_t ne3)
{
	g_assert_nonnull(t);
	g_assert_cmpint(t->op, ==, op);
	g_assert_cmpint(t->type, ==, type);
	g_assert_cmpint(t->ne[0], ==, ne0);
	g_assert_cmpint(t->ne[1], ==, ne1);
	g_assert_cmpint(t->ne[2], ==, ne2);
	g_assert_cmpint(t->ne[3], ==, ne3);
	g_assert_null(t->data);
}

static struct loom_tensor *T(loom_ctx_t *ctx, enum loom_type type,
			     int64_t ne0, int64_t ne1, int64_t ne2,
			     int64_t ne3)
{
	struct loom_tensor *t = loom_tensor_new_4d(ctx, type, ne0, ne1, ne2,
						   ne3);

	g_assert_nonnull(t);
	return t;
}

static void test_binary_unary(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *a = T(ctx, LOOM_TYPE_F16, 8, 4, 2, 1);
	struct loom_tensor *row = T(ctx, LOOM_TYPE_F32, 8, 1, 1, 1);
	struct loom_tensor *col = T(ctx, LOOM_TYPE_BF16, 1, 4, 2, 1);
	struct loom_tensor *bad3 = T(ctx, LOOM_TYPE_F32, 3, 1, 1, 1);
	struct loom_tensor *i32 = T(ctx, LOOM_TYPE_I32, 8, 4, 2, 1);
	struct loom_tensor *q = T(ctx, LOOM_TYPE_Q8_0, 32, 4, 1, 1);
	struct loom_tensor *(*bin[])(loom_ctx_t *, struct loom_tensor *,
				     struct loom_tensor *) = {
		loom_add, loom_sub, loom_mul, loom_div
	};
	const enum loom_op bin_op[] = { LOOM_OP_ADD, LOOM_OP_SUB, LOOM_OP_MUL,
					LOOM_OP_DIV };
	struct loom_tensor *t;

	for (size_t i = 0; i < G_N_ELEMENTS(bin); i++) {
		const char *name = loom_op_name(bin_op[i]);

		t = bin[i](ctx, a, row);
		expect_shape(t, bin_op[i], LOOM_TYPE_F32, 8, 4, 2, 1);
		g_assert_true(t->src[0] == a && t->src[1] == row);
		expect_shape(bin[i](ctx, a, col), bin_op[i], LOOM_TYPE_F32, 8,
			     4, 2, 1);
		expect_shape(bin[i](ctx, a, a), bin_op[i], LOOM_TYPE_F32, 8,
			     4, 2, 1);
		expect_fail(ctx, bin[i](ctx, a, bad3), name);
		expect_fail(ctx, bin[i](ctx, row, a), name);
		expect_fail(ctx, bin[i](ctx, a, i32), name);
		expect_fail(ctx, bin[i](ctx, q, q), name);
		expect_fail(ctx, bin[i](ctx, a, NULL), name);
		expect_fail(ctx, bin[i](ctx, NULL, a), name);
	}
	/* The message names the shapes too. */
	g_assert_null(loom_add(ctx, a, bad3));
	g_assert_nonnull(strstr(loom_ctx_error(ctx), "[3, 1, 1, 1] f32"));
	g_assert_nonnull(strstr(loom_ctx_error(ctx), "[8, 4, 2, 1] f16"));
	loom_ctx_clear_error(ctx);

	/* A failed call's NULL fails the next one, which keeps the first
	 * mistake's message. */
	expect_fail(ctx, loom_silu(ctx, loom_add(ctx, a, bad3)),
		    "add: b [3, 1, 1, 1] f32 cannot be broadcast");

	t = loom_scale(ctx, a, 0.25f);
	expect_shape(t, LOOM_OP_SCALE, LOOM_TYPE_F32, 8, 4, 2, 1);
	g_assert_cmpfloat(loom_tensor_op_param_f32(t, 0), ==, 0.25f);
	expect_shape(loom_silu(ctx, col), LOOM_OP_SILU, LOOM_TYPE_F32, 1, 4,
		     2, 1);
	expect_shape(loom_gelu(ctx, a), LOOM_OP_GELU, LOOM_TYPE_F32, 8, 4, 2,
		     1);
	t = loom_rms_norm(ctx, a, 1e-6f);
	expect_shape(t, LOOM_OP_RMS_NORM, LOOM_TYPE_F32, 8, 4, 2, 1);
	g_assert_cmpfloat(loom_tensor_op_param_f32(t, 0), ==, 1e-6f);
	t = loom_norm(ctx, a, 1e-5f);
	expect_shape(t, LOOM_OP_NORM, LOOM_TYPE_F32, 8, 4, 2, 1);
	g_assert_cmpfloat(loom_tensor_op_param_f32(t, 0), ==, 1e-5f);
	expect_fail(ctx, loom_scale(ctx, i32, 2), "scale");
	expect_fail(ctx, loom_silu(ctx, q), "silu");
	expect_fail(ctx, loom_gelu(ctx, NULL), "gelu");
	expect_fail(ctx, loom_rms_norm(ctx, a, -1), "rms_norm");
	expect_fail(ctx, loom_norm(ctx, a, NAN), "norm");
	expect_fail(ctx, loom_norm(ctx, i32, 1e-5f), "norm");

	t = loom_sum_rows(ctx, a);
	expect_shape(t, LOOM_OP_SUM_ROWS, LOOM_TYPE_F32, 1, 4, 2, 1);
	expect_fail(ctx, loom_sum_rows(ctx, i32), "sum_rows");
	t = loom_argmax(ctx, T(ctx, LOOM_TYPE_F32, 10, 3, 1, 1));
	expect_shape(t, LOOM_OP_ARGMAX, LOOM_TYPE_I32, 3, 1, 1, 1);
	expect_fail(ctx, loom_argmax(ctx, a), "argmax");
	t = loom_top_k(ctx, a, 3);
	expect_shape(t, LOOM_OP_TOP_K, LOOM_TYPE_I32, 3, 4, 2, 1);
	g_assert_cmpint(loom_tensor_op_param_i32(t, 0), ==, 3);
	expect_shape(loom_top_k(ctx, a, 8), LOOM_OP_TOP_K, LOOM_TYPE_I32, 8,
		     4, 2, 1);
	expect_fail(ctx, loom_top_k(ctx, a, 9), "top_k");
	expect_fail(ctx, loom_top_k(ctx, a, 0), "top_k");
	expect_fail(ctx, loom_top_k(ctx, i32, 1), "top_k");
	loom_ctx_free(ctx);
}

static void test_soft_max_rope(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *kq = T(ctx, LOOM_TYPE_F32, 16, 5, 4, 1);
	struct loom_tensor *mask = T(ctx, LOOM_TYPE_F16, 16, 8, 1, 1);
	struct loom_tensor *x = T(ctx, LOOM_TYPE_F32, 64, 4, 7, 1);
	struct loom_tensor *pos = T(ctx, LOOM_TYPE_I32, 7, 1, 1, 1);
	struct loom_tensor *t;

	t = loom_soft_max(ctx, kq, mask, 0.125f);
	expect_shape(t, LOOM_OP_SOFT_MAX, LOOM_TYPE_F32, 16, 5, 4, 1);
	g_assert_true(t->src[1] == mask);
	g_assert_cmpfloat(loom_tensor_op_param_f32(t, 0), ==, 0.125f);
	t = loom_soft_max(ctx, kq, NULL, 1);
	expect_shape(t, LOOM_OP_SOFT_MAX, LOOM_TYPE_F32, 16, 5, 4, 1);
	g_assert_null(t->src[1]);
	expect_shape(loom_soft_max(ctx, kq, T(ctx, LOOM_TYPE_F32, 16, 5, 2, 1),
				   1),
		     LOOM_OP_SOFT_MAX, LOOM_TYPE_F32, 16, 5, 4, 1);
	expect_fail(ctx, loom_soft_max(ctx, kq, T(ctx, LOOM_TYPE_F32, 15, 8, 1,
						  1), 1), "soft_max");
	expect_fail(ctx, loom_soft_max(ctx, kq, T(ctx, LOOM_TYPE_F32, 16, 4, 1,
						  1), 1), "soft_max");
	expect_fail(ctx, loom_soft_max(ctx, kq, T(ctx, LOOM_TYPE_F32, 16, 5, 3,
						  1), 1), "soft_max");
	expect_fail(ctx, loom_soft_max(ctx, kq, T(ctx, LOOM_TYPE_BF16, 16, 5,
						  1, 1), 1), "soft_max");
	expect_fail(ctx, loom_soft_max(ctx, pos, NULL, 1), "soft_max");

	t = loom_rope(ctx, x, pos, 32, LOOM_ROPE_NEOX, 10000, 0.5f);
	expect_shape(t, LOOM_OP_ROPE, LOOM_TYPE_F32, 64, 4, 7, 1);
	g_assert_true(t->src[0] == x && t->src[1] == pos);
	g_assert_cmpint(loom_tensor_op_param_i32(t, 0), ==, 32);
	g_assert_cmpint(loom_tensor_op_param_i32(t, 1), ==, LOOM_ROPE_NEOX);
	g_assert_cmpfloat(loom_tensor_op_param_f32(t, 2), ==, 10000);
	g_assert_cmpfloat(loom_tensor_op_param_f32(t, 3), ==, 0.5f);
	expect_shape(loom_rope(ctx, x, pos, 64, LOOM_ROPE_NORMAL, 1e4f, 1),
		     LOOM_OP_ROPE, LOOM_TYPE_F32, 64, 4, 7, 1);
	expect_fail(ctx, loom_rope(ctx, x, pos, 66, 0, 1e4f, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, x, pos, 31, 0, 1e4f, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, x, pos, 0, 0, 1e4f, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, x, pos, 32, 1, 1e4f, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, x, pos, 32, 0, 0, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, x, T(ctx, LOOM_TYPE_I32, 6, 1, 1, 1),
				   32, 0, 1e4f, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, x, T(ctx, LOOM_TYPE_F32, 7, 1, 1, 1),
				   32, 0, 1e4f, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, T(ctx, LOOM_TYPE_F32, 64, 4, 7, 2),
				   pos, 32, 0, 1e4f, 1), "rope");
	expect_fail(ctx, loom_rope(ctx, x, NULL, 32, 0, 1e4f, 1), "rope");
	loom_ctx_free(ctx);
}

static void test_mul_mat(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *w = T(ctx, LOOM_TYPE_Q8_0, 64, 10, 1, 1);
	struct loom_tensor *x = T(ctx, LOOM_TYPE_F32, 64, 3, 1, 1);
	struct loom_tensor *a = T(ctx, LOOM_TYPE_F16, 16, 5, 2, 1);
	struct loom_tensor *b = T(ctx, LOOM_TYPE_F32, 16, 7, 6, 3);
	struct loom_tensor *t;

	t = loom_mul_mat(ctx, w, x);
	expect_shape(t, LOOM_OP_MUL_MAT, LOOM_TYPE_F32, 10, 3, 1, 1);
	g_assert_true(t->src[0] == w && t->src[1] == x);
	expect_shape(loom_mul_mat(ctx, a, b), LOOM_OP_MUL_MAT, LOOM_TYPE_F32,
		     5, 7, 6, 3);
	expect_fail(ctx, loom_mul_mat(ctx, b, a), "mul_mat");
	expect_fail(ctx, loom_mul_mat(ctx, x, w), "mul_mat");
	expect_fail(ctx, loom_mul_mat(ctx, w, T(ctx, LOOM_TYPE_F32, 32, 3, 1,
						1)), "mul_mat");
	expect_fail(ctx, loom_mul_mat(ctx, a, T(ctx, LOOM_TYPE_F32, 16, 7, 3,
						1)), "mul_mat");
	expect_fail(ctx, loom_mul_mat(ctx, a, T(ctx, LOOM_TYPE_I32, 16, 7, 2,
						1)), "mul_mat");
	expect_fail(ctx, loom_mul_mat(ctx, loom_transpose(ctx, a), b),
		    "mul_mat");
	expect_fail(ctx, loom_mul_mat(ctx, NULL, b), "mul_mat");

	/* mul_mat_id: 8 experts, 2 used, 5 tokens. */
	{
		struct loom_tensor *as = T(ctx, LOOM_TYPE_F16, 32, 12, 8, 1);
		struct loom_tensor *ids = T(ctx, LOOM_TYPE_I32, 2, 5, 1, 1);
		struct loom_tensor *b1 = T(ctx, LOOM_TYPE_F32, 32, 1, 5, 1);
		struct loom_tensor *b2 = T(ctx, LOOM_TYPE_F32, 32, 2, 5, 1);

		t = loom_mul_mat_id(ctx, as, b1, ids);
		expect_shape(t, LOOM_OP_MUL_MAT_ID, LOOM_TYPE_F32, 12, 2, 5,
			     1);
		g_assert_true(t->src[0] == as && t->src[1] == b1 &&
			      t->src[2] == ids);
		expect_shape(loom_mul_mat_id(ctx, as, b2, ids),
			     LOOM_OP_MUL_MAT_ID, LOOM_TYPE_F32, 12, 2, 5, 1);
		expect_fail(ctx, loom_mul_mat_id(ctx, as, T(ctx, LOOM_TYPE_F32,
							    32, 3, 5, 1), ids),
			    "mul_mat_id");
		expect_fail(ctx, loom_mul_mat_id(ctx, as, T(ctx, LOOM_TYPE_F32,
							    32, 1, 4, 1), ids),
			    "mul_mat_id");
		expect_fail(ctx, loom_mul_mat_id(ctx, as, T(ctx, LOOM_TYPE_F32,
							    16, 1, 5, 1), ids),
			    "mul_mat_id");
		expect_fail(ctx, loom_mul_mat_id(ctx, as, b1, T(ctx,
				LOOM_TYPE_F32, 2, 5, 1, 1)), "mul_mat_id");
		expect_fail(ctx, loom_mul_mat_id(ctx, as, b1, NULL),
			    "mul_mat_id");
	}
	loom_ctx_free(ctx);
}

static void test_rows_copy_concat(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *emb = T(ctx, LOOM_TYPE_Q8_0, 64, 100, 1, 1);
	struct loom_tensor *ids = T(ctx, LOOM_TYPE_I32, 6, 1, 1, 1);
	struct loom_tensor *a3 = T(ctx, LOOM_TYPE_F16, 8, 10, 3, 1);
	struct loom_tensor *ids3 = T(ctx, LOOM_TYPE_I32, 4, 3, 1, 1);
	struct loom_tensor *cache = T(ctx, LOOM_TYPE_F16, 64, 32, 1, 1);
	struct loom_tensor *vals = T(ctx, LOOM_TYPE_F32, 64, 6, 1, 1);
	struct loom_tensor *t;

	t = loom_get_rows(ctx, emb, ids);
	expect_shape(t, LOOM_OP_GET_ROWS, LOOM_TYPE_F32, 64, 6, 1, 1);
	expect_shape(loom_get_rows(ctx, a3, ids3), LOOM_OP_GET_ROWS,
		     LOOM_TYPE_F32, 8, 4, 3, 1);
	expect_fail(ctx, loom_get_rows(ctx, a3, ids), "get_rows");
	expect_fail(ctx, loom_get_rows(ctx, emb, vals), "get_rows");
	expect_fail(ctx, loom_get_rows(ctx, emb, NULL), "get_rows");

	t = loom_set_rows(ctx, cache, vals, ids);
	expect_shape(t, LOOM_OP_SET_ROWS, LOOM_TYPE_F16, 64, 32, 1, 1);
	g_assert_true(t->view_src == cache);
	g_assert_cmpuint(t->view_offs, ==, 0);
	g_assert_cmpmem(t->nb, sizeof(t->nb), cache->nb, sizeof(cache->nb));
	g_assert_true(t->src[0] == cache && t->src[1] == vals &&
		      t->src[2] == ids);
	/* Into a view of the cache: the owner stays the cache. */
	{
		struct loom_tensor *v = loom_view_2d(ctx, cache, 64, 16,
						     cache->nb[1],
						     16 * cache->nb[1]);

		t = loom_set_rows(ctx, v, vals, ids);
		expect_shape(t, LOOM_OP_SET_ROWS, LOOM_TYPE_F16, 64, 16, 1,
			     1);
		g_assert_true(t->view_src == cache);
		g_assert_cmpuint(t->view_offs, ==, 16 * cache->nb[1]);
	}
	expect_fail(ctx, loom_set_rows(ctx, cache, T(ctx, LOOM_TYPE_F32, 32,
						     6, 1, 1), ids),
		    "set_rows");
	expect_fail(ctx, loom_set_rows(ctx, cache, T(ctx, LOOM_TYPE_F16, 64,
						     6, 1, 1), ids),
		    "set_rows");
	expect_fail(ctx, loom_set_rows(ctx, cache, vals, ids3), "set_rows");
	expect_fail(ctx, loom_set_rows(ctx, NULL, vals, ids), "set_rows");

	t = loom_copy(ctx, vals, T(ctx, LOOM_TYPE_Q8_0, 128, 3, 1, 1));
	expect_shape(t, LOOM_OP_COPY, LOOM_TYPE_Q8_0, 128, 3, 1, 1);
	g_assert_true(t->view_src == t->src[1]);
	expect_fail(ctx, loom_copy(ctx, vals, T(ctx, LOOM_TYPE_F32, 64, 5, 1,
					       1)), "copy");
	expect_fail(ctx, loom_copy(ctx, vals, T(ctx, LOOM_TYPE_I32, 64, 6, 1,
					       1)), "copy");
	expect_shape(loom_copy(ctx, ids, T(ctx, LOOM_TYPE_I32, 3, 2, 1, 1)),
		     LOOM_OP_COPY, LOOM_TYPE_I32, 3, 2, 1, 1);

	t = loom_cont(ctx, loom_transpose(ctx, a3));
	expect_shape(t, LOOM_OP_CONT, LOOM_TYPE_F16, 10, 8, 3, 1);
	g_assert_true(loom_tensor_is_contiguous(t));
	expect_fail(ctx, loom_cont(ctx, NULL), "cont");

	t = loom_concat(ctx, a3, T(ctx, LOOM_TYPE_F16, 8, 10, 5, 1), 2);
	expect_shape(t, LOOM_OP_CONCAT, LOOM_TYPE_F16, 8, 10, 8, 1);
	g_assert_cmpint(loom_tensor_op_param_i32(t, 0), ==, 2);
	expect_shape(loom_concat(ctx, a3, a3, 0), LOOM_OP_CONCAT,
		     LOOM_TYPE_F16, 16, 10, 3, 1);
	expect_fail(ctx, loom_concat(ctx, a3, T(ctx, LOOM_TYPE_F32, 8, 10, 5,
						1), 2), "concat");
	expect_fail(ctx, loom_concat(ctx, a3, T(ctx, LOOM_TYPE_F16, 8, 9, 5,
						1), 2), "concat");
	expect_fail(ctx, loom_concat(ctx, a3, a3, 4), "concat");
	expect_fail(ctx, loom_concat(ctx, a3, a3, -1), "concat");
	loom_ctx_free(ctx);
}

/* ------------------------------------------------------------------------
 * Views.
 */

/* Byte offset of element (i0..i3) through t's strides, as the owner's
 * memory sees it. */
static size_t at(const struct loom_tensor *t, int64_t i0, int64_t i1,
		 int64_t i2, int64_t i3)
{
	return t->view_offs + (size_t)i0 * t->nb[0] + (size_t)i1 * t->nb[1] +
	       (size_t)i2 * t->nb[2] + (size_t)i3 * t->nb[3];
}

static void test_views(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *a = T(ctx, LOOM_TYPE_F32, 6, 5, 4, 3);
	struct loom_tensor *t, *v, *p;

	/* permute: dimension i of a becomes dimension axis_i. */
	p = loom_permute(ctx, a, 2, 0, 3, 1);
	expect_shape(p, LOOM_OP_PERMUTE, LOOM_TYPE_F32, 5, 3, 6, 4);
	g_assert_true(p->view_src == a && p->src[0] == a);
	g_assert_cmpint(loom_tensor_op_param_i32(p, 0), ==, 2);
	g_assert_cmpint(loom_tensor_op_param_i32(p, 3), ==, 1);
	g_assert_false(loom_tensor_is_contiguous(p));
	g_assert_cmpuint(loom_tensor_n_bytes(p), ==, loom_tensor_n_bytes(a));
	for (int i0 = 0; i0 < 6; i0++)
		for (int i1 = 0; i1 < 5; i1++)
			for (int i2 = 0; i2 < 4; i2++)
				for (int i3 = 0; i3 < 3; i3++)
					g_assert_cmpuint(at(p, i1, i3, i0, i2),
							 ==,
							 at(a, i0, i1, i2,
							    i3));
	expect_fail(ctx, loom_permute(ctx, a, 0, 1, 1, 3), "permute");
	expect_fail(ctx, loom_permute(ctx, a, 0, 1, 2, 4), "permute");
	expect_fail(ctx, loom_permute(ctx, T(ctx, LOOM_TYPE_Q8_0, 32, 2, 1, 1),
				      1, 0, 2, 3), "permute");

	t = loom_transpose(ctx, a);
	expect_shape(t, LOOM_OP_TRANSPOSE, LOOM_TYPE_F32, 5, 6, 4, 3);
	g_assert_cmpuint(t->nb[0], ==, a->nb[1]);
	g_assert_cmpuint(t->nb[1], ==, a->nb[0]);
	g_assert_cmpuint(t->nb[2], ==, a->nb[2]);
	expect_fail(ctx, loom_reshape_1d(ctx, t, 360), "reshape");
	g_assert_true(loom_tensor_is_contiguous(loom_transpose(ctx, t)));

	/* Views are named after what they show. */
	loom_tensor_set_name(a, "a");
	g_assert_cmpstr(loom_transpose(ctx, a)->name, ==, "a (transposed)");
	g_assert_cmpstr(loom_reshape_1d(ctx, a, 360)->name, ==, "a (reshaped)");
	loom_tensor_set_name(a, "");

	/* A view of a view of a view points at the owner, offsets add. */
	v = loom_view_2d(ctx, a, 6, 4, a->nb[1], a->nb[2]);
	expect_shape(v, LOOM_OP_VIEW, LOOM_TYPE_F32, 6, 4, 1, 1);
	g_assert_cmpuint(v->view_offs, ==, a->nb[2]);
	g_assert_cmpuint(v->nb[1], ==, a->nb[1]);
	t = loom_view_1d(ctx, v, 3, 2 * sizeof(float));
	expect_shape(t, LOOM_OP_VIEW, LOOM_TYPE_F32, 3, 1, 1, 1);
	g_assert_true(t->view_src == a && t->src[0] == v);
	g_assert_cmpuint(t->view_offs, ==, a->nb[2] + 8);
	t = loom_reshape_2d(ctx, loom_cont(ctx, t), 1, 3);
	g_assert_nonnull(t);
	g_assert_true(t->view_src == t->src[0]);

	t = loom_view_3d(ctx, a, 2, 5, 4, a->nb[1], a->nb[2], 4);
	expect_shape(t, LOOM_OP_VIEW, LOOM_TYPE_F32, 2, 5, 4, 1);
	g_assert_cmpuint(t->nb[3], ==, a->nb[2] * 4);
	t = loom_view_4d(ctx, a, 6, 5, 4, 3, a->nb[1], a->nb[2], a->nb[3], 0);
	g_assert_true(loom_tensor_is_contiguous(t));
	g_assert_cmpuint(loom_tensor_n_bytes(t), ==, loom_tensor_n_bytes(a));

	/* Out of bounds. */
	expect_fail(ctx, loom_view_1d(ctx, a, 361, 0), "view");
	expect_fail(ctx, loom_view_1d(ctx, a, 2, loom_tensor_n_bytes(a) - 4), "view");
	expect_fail(ctx, loom_view_2d(ctx, a, 6, 5, a->nb[1], a->nb[3] * 3),
		    "view");
	expect_fail(ctx, loom_view_1d(ctx, a, 1, SIZE_MAX - 2), "view");
	expect_fail(ctx, loom_view_1d(ctx, NULL, 1, 0), "view");
	expect_fail(ctx, loom_view_1d(ctx, T(ctx, LOOM_TYPE_Q8_0, 64, 1, 1, 1),
				      16, 0), "view");

	/* reshape keeps the data and the element count. */
	t = loom_reshape_3d(ctx, a, 30, 4, 3);
	expect_shape(t, LOOM_OP_RESHAPE, LOOM_TYPE_F32, 30, 4, 3, 1);
	g_assert_true(loom_tensor_is_contiguous(t));
	g_assert_true(t->view_src == a);
	t = loom_reshape_4d(ctx, t, 2, 3, 5, 12);
	expect_shape(t, LOOM_OP_RESHAPE, LOOM_TYPE_F32, 2, 3, 5, 12);
	g_assert_true(t->view_src == a);
	expect_fail(ctx, loom_reshape_2d(ctx, a, 7, 7), "reshape");
	expect_fail(ctx, loom_reshape_2d(ctx, T(ctx, LOOM_TYPE_Q8_0, 64, 2, 1,
						1), 16, 8), "reshape");
	expect_shape(loom_reshape_1d(ctx, T(ctx, LOOM_TYPE_Q8_0, 64, 2, 1, 1),
				     128),
		     LOOM_OP_RESHAPE, LOOM_TYPE_Q8_0, 128, 1, 1, 1);
	loom_ctx_free(ctx);
}

static void test_op_tensor_raw(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *a = T(ctx, LOOM_TYPE_F32, 4, 4, 1, 1);
	struct loom_tensor *srcs[LOOM_MAX_SRC] = { a, a };
	int32_t params[LOOM_MAX_OP_PARAMS] = { 7 };
	const int64_t ne[4] = { 4, 4, 1, 1 };
	struct loom_tensor *t;

	t = loom_tensor_new_op(ctx, LOOM_OP_ADD, LOOM_TYPE_F32, ne, srcs,
			       params);
	expect_shape(t, LOOM_OP_ADD, LOOM_TYPE_F32, 4, 4, 1, 1);
	g_assert_true(t->src[0] == a && t->src[1] == a);
	g_assert_cmpint(t->op_params[0], ==, 7);
	g_assert_null(t->view_src);
	t = loom_tensor_new_op(ctx, LOOM_OP_RESHAPE, LOOM_TYPE_F32, ne, srcs,
			       NULL);
	g_assert_true(t->view_src == a);
	g_assert_null(loom_tensor_new_op(ctx, LOOM_OP_COUNT, LOOM_TYPE_F32, ne,
					 NULL, NULL));
	g_assert_cmpstr(loom_ctx_error(ctx), !=, "");
	loom_ctx_free(ctx);
}

/* ------------------------------------------------------------------------
 * Graphs.
 */

/* Every node comes once, after the nodes among its sources. */
static void check_order(loom_graph_t *g)
{
	GHashTable *pos = g_hash_table_new(NULL, NULL);
	int n = loom_graph_n_nodes(g);

	for (int i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		g_assert_false(g_hash_table_contains(pos, t));
		g_assert_cmpint(t->op, !=, LOOM_OP_NONE);
		for (int j = 0; j < LOOM_MAX_SRC; j++) {
			struct loom_tensor *s = t->src[j];

			if (s && s->op != LOOM_OP_NONE)
				g_assert_true(g_hash_table_contains(pos, s));
		}
		g_hash_table_add(pos, t);
	}
	for (size_t i = 0; i < loom_graph_n_leaves(g); i++) {
		struct loom_tensor *l = loom_graph_leaf(g, i);

		g_assert_cmpint(l->op, ==, LOOM_OP_NONE);
		g_assert_false(g_hash_table_contains(pos, l));
		g_hash_table_add(pos, l);
	}
	g_hash_table_destroy(pos);
}

static void test_graph_basic(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *x = T(ctx, LOOM_TYPE_F32, 8, 2, 1, 1);
	struct loom_tensor *w = T(ctx, LOOM_TYPE_F16, 8, 8, 1, 1);
	struct loom_tensor *h = loom_mul_mat(ctx, w, x);
	struct loom_tensor *s = loom_silu(ctx, h);
	struct loom_tensor *y = loom_add(ctx, loom_mul(ctx, s, h), s);
	struct loom_tensor *z = loom_scale(ctx, y, 2);
	loom_graph_t *g;
	uint64_t v0, v1;

	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_n_nodes(g), ==, 0);
	v0 = loom_graph_version(g);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	v1 = loom_graph_version(g);
	g_assert_cmpuint(v1, !=, v0);
	/* h and s are shared: mul_mat, silu, mul, add. */
	g_assert_cmpint(loom_graph_n_nodes(g), ==, 4);
	g_assert_cmpint(loom_graph_n_leaves(g), ==, 2);
	g_assert_true(loom_graph_node(g, 0) == h);
	g_assert_true(loom_graph_node(g, 3) == y);
	check_order(g);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpuint(loom_graph_version(g), ==, v1);
	g_assert_cmpint(loom_graph_expand(g, z), ==, LOOM_OK);
	g_assert_cmpuint(loom_graph_version(g), >, v1);
	g_assert_cmpint(loom_graph_n_nodes(g), ==, 5);
	g_assert_true(loom_graph_node(g, 4) == z);
	g_assert_null(loom_graph_node(g, 5));
	g_assert_null(loom_graph_leaf(g, -1));

	/* A NULL from a failed constructor fails the expand. */
	g_assert_cmpint(loom_graph_expand(g, loom_add(ctx, x, w)), ==,
			LOOM_E_INVAL);
	g_assert_nonnull(strstr(loom_ctx_error(ctx), "add"));

	/* add_node appends as is; unknown inputs become leaves. */
	{
		loom_graph_t *g2;
		uint64_t v;

		g_assert_cmpint(loom_graph_new(ctx, &g2), ==, LOOM_OK);
		v = loom_graph_version(g2);
		g_assert_cmpint(loom_graph_add_node(g2, s), ==, LOOM_OK);
		g_assert_cmpuint(loom_graph_version(g2), >, v);
		g_assert_cmpint(loom_graph_n_nodes(g2), ==, 1);
		g_assert_cmpint(loom_graph_n_leaves(g2), ==, 1);
		g_assert_true(loom_graph_leaf(g2, 0) == h);
		g_assert_cmpint(loom_graph_add_node(g2, h), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_n_leaves(g2), ==, 2);
		g_assert_cmpint(loom_graph_n_nodes(g2), ==, 2);
		g_assert_cmpint(loom_graph_add_node(g2, h), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_n_nodes(g2), ==, 2);
	}
	loom_ctx_free(ctx);
}

static void test_graph_views_cycle(void)
{
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *cache = T(ctx, LOOM_TYPE_F16, 16, 8, 1, 1);
	struct loom_tensor *k = T(ctx, LOOM_TYPE_F32, 16, 2, 1, 1);
	struct loom_tensor *ids = T(ctx, LOOM_TYPE_I32, 2, 1, 1, 1);
	struct loom_tensor *st = loom_set_rows(ctx, cache, k, ids);
	struct loom_tensor *v = loom_view_2d(ctx, st, 16, 4, st->nb[1], 0);
	struct loom_tensor *a, *b;
	loom_graph_t *g;

	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, loom_sum_rows(ctx, v)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_graph_n_nodes(g), ==, 3);
	g_assert_cmpint(loom_graph_n_leaves(g), ==, 3);
	check_order(g);

	/* A cycle made by hand is an error, not a hang. */
	a = loom_silu(ctx, k);
	b = loom_silu(ctx, a);
	a->src[0] = b;
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, b), ==, LOOM_E_INVAL);
	g_assert_nonnull(strstr(loom_ctx_error(ctx), "itself"));
	a->src[0] = k;
	g_assert_cmpint(loom_graph_expand(g, b), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_n_nodes(g), ==, 2);
	check_order(g);
	loom_ctx_free(ctx);
}

/* A 1000-layer model: deep chains must neither recurse nor go quadratic. */
static void test_graph_deep(void)
{
	enum { LAYERS = 1000 };
	loom_ctx_t *ctx = ctx_new();
	struct loom_tensor *x = T(ctx, LOOM_TYPE_F32, 16, 4, 1, 1);
	struct loom_tensor *w = T(ctx, LOOM_TYPE_F32, 16, 16, 1, 1);
	struct loom_tensor *norm = T(ctx, LOOM_TYPE_F32, 16, 1, 1, 1);
	loom_graph_t *g;
	gint64 t0;

	for (int l = 0; l < LAYERS; l++) {
		struct loom_tensor *h = loom_rms_norm(ctx, x, 1e-5f);

		h = loom_mul(ctx, h, norm);
		h = loom_mul_mat(ctx, w, h);
		h = loom_silu(ctx, h);
		h = loom_mul_mat(ctx, w, h);
		x = loom_add(ctx, x, h);
		for (int i = 0; i < 94; i++)
			x = loom_scale(ctx, x, 1.0f);
	}
	g_assert_nonnull(x);
	t0 = g_get_monotonic_time();
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, x), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_n_nodes(g), ==, LAYERS * 100);
	g_assert_cmpint(loom_graph_n_leaves(g), ==, 3);
	g_test_message("100000 nodes in %.1f ms",
		       (g_get_monotonic_time() - t0) / 1000.0);
	/* Quadratic work would take minutes; valgrind stays well inside. */
	g_assert_cmpint(g_get_monotonic_time() - t0, <, 10 * G_USEC_PER_SEC);
	check_order(g);
	loom_ctx_free(ctx);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/core/types/traits", test_type_traits);
	g_test_add_func("/core/types/fp16-exhaustive", test_fp16_exhaustive);
	g_test_add_func("/core/types/bf16-exhaustive", test_bf16_exhaustive);
	g_test_add_func("/core/types/rounding", test_fp16_rounding);
	g_test_add_func("/core/types/q8_0", test_q8_0);
	g_test_add_func("/core/types/quantized", test_quant_types);
	g_test_add_func("/core/types/convert", test_convert);
	g_test_add_func("/core/ctx", test_ctx);
	g_test_add_func("/core/shape-helpers", test_shape_helpers);
	g_test_add_func("/core/ops/binary-unary", test_binary_unary);
	g_test_add_func("/core/ops/soft_max-rope", test_soft_max_rope);
	g_test_add_func("/core/ops/mul_mat", test_mul_mat);
	g_test_add_func("/core/ops/rows-copy-concat", test_rows_copy_concat);
	g_test_add_func("/core/ops/views", test_views);
	g_test_add_func("/core/ops/raw", test_op_tensor_raw);
	g_test_add_func("/core/graph/basic", test_graph_basic);
	g_test_add_func("/core/graph/views-cycle", test_graph_views_cycle);
	g_test_add_func("/core/graph/deep", test_graph_deep);
	return g_test_run();
}
