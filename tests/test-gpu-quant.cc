/* SPDX-License-Identifier: MIT */
/* test-gpu-quant.cc - the GPU plugins' block decoders (plugins/cuda/
 * ops-quant.cuh) built for the host and checked against libcore's own
 * conversions, so they are proven without a GPU: every value of every
 * quantized type bit for bit (one at a time and a sub-unit at a time),
 * and the GEMV's dp4a dot products against 8-bit activations against a
 * double-precision product of the same values.  The activations are
 * quantized as the GEMV's kernel does (ops-mmv.cu).
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom.h>

#include "ops-quant.cuh"

struct qcase {
	enum loom_type type;
	unsigned seed;
};

/* Values of varying sign and magnitude (the K-quants' minimums matter),
 * a few zeros and one large value per row. */
static void fill(float *x, int n, GRand *r)
{
	for (int i = 0; i < n; i++) {
		double mag = 1.0 + i / 37 % 5;

		x[i] = (float)(g_rand_double_range(r, -1.0, 1.0) * mag);
		if (i % 53 == 7)
			x[i] = 0.0f;
	}
	x[n / 3] = 9.5f;
}

/* The kernel's quantization of 32 activations: d = max|x| / 127,
 * q = round(x / d) within +-127. */
static float quantize32(const float *x, int8_t *q)
{
	float amax = 0.0f;

	for (int l = 0; l < 32; l++)
		amax = fmaxf(amax, fabsf(x[l]));
	float d = amax / 127.0f;
	float id = d > 0.0f ? 1.0f / d : 0.0f;

	for (int l = 0; l < 32; l++)
		q[l] = (int8_t)fminf(fmaxf(rintf(x[l] * id), -127.0f), 127.0f);
	return d;
}

template <int T>
static void check_type(const struct qcase *c)
{
	const int BK = qtraits<T>::blck, BS = qtraits<T>::size;
	const int K = 6 * BK, ROWS = 4;
	GRand *r = g_rand_new_with_seed(c->seed);
	float *x = g_new(float, K * ROWS), *deq = g_new(float, K * ROWS);
	float *y = g_new(float, K), dy[6 * 256 / 32];
	int8_t *qy = g_new(int8_t, K);
	uint8_t *q = g_new(uint8_t, K / BK * BS * ROWS);

	g_assert_cmpint(loom_type_block_size(c->type), ==, BK);
	g_assert_cmpint(loom_type_size(c->type), ==, BS);
	for (int row = 0; row < ROWS; row++)
		fill(x + row * K, K, r);
	fill(y, K, r);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, c->type, q,
					  (int64_t)K * ROWS), ==, LOOM_OK);
	g_assert_cmpint(loom_type_convert(c->type, q, LOOM_TYPE_F32, deq,
					  (int64_t)K * ROWS), ==, LOOM_OK);

	/* Each value alone (get_rows, copies) and by sub-units of 32
	 * (dequantizing for the BLAS), bit for bit. */
	for (int i = 0; i < K * ROWS; i++) {
		float v = quant_value(q + i / BK * BS, c->type, i % BK);

		if (memcmp(&v, &deq[i], sizeof(v)))
			g_error("%s value %d: %.9g, libcore %.9g",
				loom_type_name(c->type), i, v, deq[i]);
	}
	for (int u = 0; u < K * ROWS / 32; u++) {
		float v[32];

		quant_unit<T>(q + u / (BK / 32) * BS, u % (BK / 32), v);
		for (int j = 0; j < 32; j++)
			if (memcmp(&v[j], &deq[u * 32 + j], sizeof(v[j])))
				g_error("%s sub-unit %d value %d: %.9g, "
					"libcore %.9g", loom_type_name(c->type),
					u, j, v[j], deq[u * 32 + j]);
	}

	/* The GEMV's sums: per row, the dp4a dot products of its sub-units
	 * against the same quantized activations, in double. */
	for (int kb = 0; kb < K / 32; kb++)
		dy[kb] = quantize32(y + kb * 32, qy + kb * 32);
	for (int row = 0; row < ROWS; row++) {
		const uint8_t *qr = q + row * (K / BK) * BS;
		double ref = 0, scale = 0, got = 0;

		for (int i = 0; i < K; i++) {
			double yv = (double)dy[i / 32] * qy[i];

			ref += (double)deq[row * K + i] * yv;
			scale += fabs((double)deq[row * K + i] * yv);
		}
		for (int u = 0; u < K / 32; u++) {
			const uint8_t *blk = qr + u / (BK / 32) * BS;
			int w[8], yi[8];

			unit_weights<T>(blk, u % (BK / 32), w);
			memcpy(yi, qy + u * 32, sizeof(yi));
			got += unit_dot<T>(blk, u % (BK / 32), w, yi, dy[u]);
		}
		g_test_message("%s row %d: dot %.7f, reference %.7f",
			       loom_type_name(c->type), row, got, ref);
		/* Float rounding of the per-unit scales only. */
		g_assert_cmpfloat(fabs(got - ref), <=, 1e-6 * scale + 1e-30);
	}
	g_free(q);
	g_free(qy);
	g_free(y);
	g_free(deq);
	g_free(x);
	g_rand_free(r);
}

static void test_type(gconstpointer data)
{
	const struct qcase *c = (const struct qcase *)data;

	switch (c->type) {
	case LOOM_TYPE_Q8_0:
		check_type<LOOM_TYPE_Q8_0>(c);
		break;
	case LOOM_TYPE_Q4_0:
		check_type<LOOM_TYPE_Q4_0>(c);
		break;
	case LOOM_TYPE_Q4_K:
		check_type<LOOM_TYPE_Q4_K>(c);
		break;
	case LOOM_TYPE_Q5_K:
		check_type<LOOM_TYPE_Q5_K>(c);
		break;
	case LOOM_TYPE_Q6_K:
		check_type<LOOM_TYPE_Q6_K>(c);
		break;
	default:
		g_assert_not_reached();
	}
}

/* dot4 is a signed byte dot product (the device's __dp4a). */
static void test_dot4(void)
{
	const int8_t a[4] = { -128, 127, -1, 5 }, b[4] = { 127, -128, 3, -7 };
	int ia, ib, want = 10;

	memcpy(&ia, a, 4);
	memcpy(&ib, b, 4);
	for (int i = 0; i < 4; i++)
		want += a[i] * b[i];
	g_assert_cmpint(dot4(ia, ib, 10), ==, want);
}

int main(int argc, char **argv)
{
	static const enum loom_type types[] = {
		LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_K,
		LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
	};
	static struct qcase cases[G_N_ELEMENTS(types) * 2];

	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/gpu-quant/dot4", test_dot4);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		char *name;

		cases[i].type = types[i % G_N_ELEMENTS(types)];
		cases[i].seed = 11 + (unsigned)i;
		name = g_strdup_printf("/gpu-quant/%s/%u",
				       loom_type_name(cases[i].type),
				       cases[i].seed);
		g_test_add_data_func(name, &cases[i], test_type);
		g_free(name);
	}
	return g_test_run();
}
