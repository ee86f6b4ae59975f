/* SPDX-License-Identifier: MIT */
/* test-gpu-quant.cc - the GPU plugins' block decoders (plugins/cuda/
 * ops-quant.cuh) built for the host and checked against libcore's own
 * conversions, so they are proven without a GPU: every value of every
 * quantized type of the plugins' list (cuda-types.h) bit for bit, one at
 * a time and a sub-unit at a time, of quantized data and of blocks of
 * random bytes, and the GEMV's dp4a dot products against 8-bit
 * activations against a double-precision product of the same values.  The activations are
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

/* The decoders' values of n values at q of type T against libcore's,
 * bit for bit: each value alone (get_rows, copies) and by sub-units of 32
 * (dequantizing for the BLAS). */
template <int T>
static void check_values(const uint8_t *q, const float *deq, int n,
			 const char *what)
{
	const int BK = qtraits<T>::blck, BS = qtraits<T>::size;
	const char *name = loom_type_name((enum loom_type)T);

	for (int i = 0; i < n; i++) {
		float v = quant_value<T>(q + i / BK * BS, i % BK);

		if (memcmp(&v, &deq[i], sizeof(v)))
			g_error("%s (%s) value %d: %.9g, libcore %.9g", name,
				what, i, v, deq[i]);
	}
	for (int u = 0; u < n / 32; u++) {
		float v[32];

		quant_unit<T>(q + u / (BK / 32) * BS, u % (BK / 32), v);
		for (int j = 0; j < 32; j++)
			if (memcmp(&v[j], &deq[u * 32 + j], sizeof(v[j])))
				g_error("%s (%s) sub-unit %d value %d: %.9g, "
					"libcore %.9g", name, what, u, j, v[j],
					deq[u * 32 + j]);
	}
}

/* Where type T's blocks keep halves (scales), byte offsets; -1 ends. */
static const int *half_offsets(int type)
{
	static const int at0[] = { 0, -1 }, at02[] = { 0, 2, -1 };
	static const int q2k[] = { 80, 82, -1 }, q3k[] = { 108, -1 };
	static const int q6k[] = { 208, -1 }, none[] = { -1 };

	switch (type) {
	case LOOM_TYPE_Q4_1:
	case LOOM_TYPE_Q5_1:
	case LOOM_TYPE_Q4_K:
	case LOOM_TYPE_Q5_K:
		return at02;
	case LOOM_TYPE_Q2_K:
		return q2k;
	case LOOM_TYPE_Q3_K:
		return q3k;
	case LOOM_TYPE_Q6_K:
		return q6k;
	case LOOM_TYPE_MXFP4:
		return none;
	default:
		return at0;
	}
}

/* Blocks of random bytes, every code and scale bit pattern (a half scale
 * of exponent 31, inf or NaN, made finite: a NaN's payload is the
 * device's own), MXFP4's exponents 0, 1 (subnormal scales), 254 and 255
 * (products past float's range) among them, decoded bit for bit. */
template <int T>
static void check_raw(unsigned seed)
{
	const int BK = qtraits<T>::blck, BS = qtraits<T>::size;
	const int NB = 64, n = NB * BK;
	GRand *r = g_rand_new_with_seed(seed);
	uint8_t *q = g_new(uint8_t, NB * BS);
	float *deq = g_new(float, n);

	for (int i = 0; i < NB * BS; i++)
		q[i] = (uint8_t)g_rand_int_range(r, 0, 256);
	for (int b = 0; b < NB; b++) {
		for (const int *o = half_offsets(T); *o >= 0; o++)
			if ((q[b * BS + *o + 1] & 0x7c) == 0x7c)
				q[b * BS + *o + 1] &= 0xbf;
		if (T == LOOM_TYPE_MXFP4 && b < 4)
			q[b * BS] = (uint8_t)(b < 2 ? b : 252 + b);
	}
	g_assert_cmpint(loom_type_convert((enum loom_type)T, q, LOOM_TYPE_F32,
					  deq, n), ==, LOOM_OK);
	check_values<T>(q, deq, n, "random blocks");
	g_free(deq);
	g_free(q);
	g_rand_free(r);
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
	g_assert_true(loom_type_is_quantized(c->type));
	for (int row = 0; row < ROWS; row++)
		fill(x + row * K, K, r);
	fill(y, K, r);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, x, c->type, q,
					  (int64_t)K * ROWS), ==, LOOM_OK);
	g_assert_cmpint(loom_type_convert(c->type, q, LOOM_TYPE_F32, deq,
					  (int64_t)K * ROWS), ==, LOOM_OK);
	check_values<T>(q, deq, K * ROWS, "quantized");
	check_raw<T>(c->seed);

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
		g_assert_cmpfloat(scale, >, 0.0);
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
#define CHECK_(name)                                                       \
	case LOOM_TYPE_##name:                                             \
		check_type<LOOM_TYPE_##name>(c);                           \
		break;
		CUDA_QUANT_TYPES(CHECK_)
#undef CHECK_
	default:
		g_assert_not_reached();
	}
}

/* The plugin's list names quantized types of loom.h, each once, and
 * nothing else; the float types are not in it. */
static void test_list(void)
{
	static const enum loom_type listed[] = {
#define LIST_(name) LOOM_TYPE_##name,
		CUDA_QUANT_TYPES(LIST_)
#undef LIST_
	};
	int seen[LOOM_TYPE_COUNT] = { 0 };

	for (size_t i = 0; i < G_N_ELEMENTS(listed); i++) {
		g_assert_true(loom_type_is_quantized(listed[i]));
		g_assert_cmpint(++seen[listed[i]], ==, 1);
	}
	for (int t = 0; t < LOOM_TYPE_COUNT; t++)
		g_assert_cmpint(cuda_quant_type((enum loom_type)t), ==,
				seen[t] == 1);
	g_assert_false(cuda_quant_type(LOOM_TYPE_F32));
	g_assert_false(cuda_quant_type(LOOM_TYPE_COUNT));
}

/* qperm picks bytes as the device's __byte_perm is documented to;
 * table4 maps each of four nibbles through its table, every one of the
 * 65536 combinations; spread4 puts four bits in four bytes. */
static void test_table4(void)
{
	static const int8_t iq[16] = LOOM_IQ4NL_VALUES;
	static const int8_t mx[16] = LOOM_MXFP4_VALUES;

	g_assert_cmpuint(qperm(0x33221100u, 0x77665544u, 0x3210u), ==,
			 0x33221100u);
	g_assert_cmpuint(qperm(0x33221100u, 0x77665544u, 0x4567u), ==,
			 0x44556677u);
	/* Bit 3 of a selector and bits 16-31 are not read. */
	g_assert_cmpuint(qperm(0x33221100u, 0x77665544u, 0xffff8888u), ==,
			 0x00000000u);
	for (int x = 0; x < 65536; x++) {
		int in = (x & 15) | (x >> 4 & 15) << 8 | (x >> 8 & 15) << 16 |
			 (x >> 12 & 15) << 24;
		uint32_t want_iq = 0, want_mx = 0;

		for (int n = 0; n < 4; n++) {
			want_iq |= (uint32_t)(uint8_t)iq[x >> (4 * n) & 15]
				   << (8 * n);
			want_mx |= (uint32_t)(uint8_t)mx[x >> (4 * n) & 15]
				   << (8 * n);
		}
		if ((uint32_t)table4<false>(in) != want_iq ||
		    (uint32_t)table4<true>(in) != want_mx)
			g_error("table4 of %#x: %#x %#x, want %#x %#x", in,
				(uint32_t)table4<false>(in),
				(uint32_t)table4<true>(in), want_iq, want_mx);
	}
	g_assert_cmpint(spread4(0xA), ==, 0x01000100);
	g_assert_cmpint(spread4(0xF), ==, 0x01010101);
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
#define TYPE_(name) LOOM_TYPE_##name,
		CUDA_QUANT_TYPES(TYPE_)
#undef TYPE_
	};
	static struct qcase cases[G_N_ELEMENTS(types) * 2];

	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/gpu-quant/dot4", test_dot4);
	g_test_add_func("/gpu-quant/table4", test_table4);
	g_test_add_func("/gpu-quant/list", test_list);
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
