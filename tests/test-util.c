/* SPDX-License-Identifier: MIT */
/* test-util.c - helpers shared by the tests and loom-conformance: seeded
 * random values, setting and reading back tensors of any type as plain
 * numbers, NMSE, and loading the uninstalled plugins.  Nothing here is part
 * of the library, and nothing uses GLib (loom-conformance is installed).
 */
#define _GNU_SOURCE
#include "test-util.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Test code stops at the first allocation that fails: there is no result
 * to report without the memory. */
static void out_of_memory(void)
{
	fputs("out of memory\n", stderr);
	abort();
}

void *loom_test_malloc(size_t size)
{
	void *p = calloc(1, size ? size : 1);

	if (!p)
		out_of_memory();
	return p;
}

char *loom_test_strdup_printf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		out_of_memory();
	return s;
}

void loom_test_rng_seed(struct loom_test_rng *rng, uint64_t seed)
{
	rng->state = seed;
}

uint64_t loom_test_rng_next(struct loom_test_rng *rng)
{
	uint64_t z = (rng->state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

double loom_test_rng_uniform(struct loom_test_rng *rng, double lo, double hi)
{
	/* 53 random bits make a double in [0, 1). */
	double u = (double)(loom_test_rng_next(rng) >> 11) * 0x1.0p-53;

	return lo + (hi - lo) * u;
}

int64_t loom_test_rng_int(struct loom_test_rng *rng, int64_t n)
{
	return (int64_t)(loom_test_rng_next(rng) % (uint64_t)n);
}

/* IEEE binary16: 1 sign bit, 5 exponent bits (bias 15), 10 fraction bits. */
double loom_test_fp16_to_double(uint16_t h)
{
	int sign = h >> 15;
	int exp = (h >> 10) & 0x1f;
	int frac = h & 0x3ff;
	double v;

	if (exp == 0)
		v = ldexp(frac, -24);
	else if (exp == 31)
		v = frac ? NAN : INFINITY;
	else
		v = ldexp(1024 + frac, exp - 25);
	return sign ? -v : v;
}

/* bfloat16 is the upper half of an IEEE binary32. */
double loom_test_bf16_to_double(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

int loom_test_split_of(loom_split_fn fn, void *userdata, const char *name,
		       enum loom_type type, int64_t ne0, int64_t ne1,
		       struct loom_split *out)
{
	loom_ctx_t *ctx;
	struct loom_tensor *t;
	int st = loom_ctx_new(0, &ctx);

	if (st)
		return st;
	t = loom_tensor_new_2d(ctx, type, ne0, ne1);
	if (t) {
		loom_tensor_set_name(t, name);
		st = fn(t, out, userdata);
	} else {
		st = LOOM_E_INVAL;
	}
	loom_ctx_free(ctx);
	return st;
}

int loom_test_set_f32(struct loom_tensor *t, const float *values)
{
	int64_t n = loom_tensor_n_elements(t);
	size_t size = loom_tensor_n_bytes(t);
	void *buf;
	int st;

	if (!loom_tensor_is_contiguous(t))
		return LOOM_E_INVAL;
	if (t->type == LOOM_TYPE_F32)
		return loom_tensor_set(t, values, 0, size);
	buf = loom_test_malloc(size ? size : 1);
	st = loom_type_convert(LOOM_TYPE_F32, values, t->type, buf, n);
	if (st == LOOM_OK)
		st = loom_tensor_set(t, buf, 0, size);
	free(buf);
	return st;
}

int loom_test_set_i32(struct loom_tensor *t, const int32_t *values)
{
	if (t->type != LOOM_TYPE_I32 || !loom_tensor_is_contiguous(t))
		return LOOM_E_INVAL;
	return loom_tensor_set(t, values, 0, loom_tensor_n_bytes(t));
}

int loom_test_fill_uniform(struct loom_tensor *t, struct loom_test_rng *rng,
			   double lo, double hi)
{
	int64_t n = loom_tensor_n_elements(t);
	float *v = loom_test_malloc(sizeof(float) * (size_t)(n ? n : 1));
	int st;

	for (int64_t i = 0; i < n; i++)
		v[i] = (float)loom_test_rng_uniform(rng, lo, hi);
	st = loom_test_set_f32(t, v);
	free(v);
	return st;
}

/* Decodes one element of a non-quantized type. */
static double scalar_to_double(enum loom_type type, const uint8_t *p)
{
	float f;
	uint16_t h;
	int32_t i;

	switch (type) {
	case LOOM_TYPE_F32:
		memcpy(&f, p, sizeof(f));
		return f;
	case LOOM_TYPE_F16:
		memcpy(&h, p, sizeof(h));
		return loom_test_fp16_to_double(h);
	case LOOM_TYPE_BF16:
		memcpy(&h, p, sizeof(h));
		return loom_test_bf16_to_double(h);
	case LOOM_TYPE_I32:
		memcpy(&i, p, sizeof(i));
		return i;
	default:
		return NAN;
	}
}

/* Block decoders, one per quantized type, written from the GGUF block
 * definitions byte by byte (not through the library's structs), each
 * writing the block's values to out. */
static double half_at(const uint8_t *p)
{
	return loom_test_fp16_to_double((uint16_t)(p[0] | p[1] << 8));
}

/* Q8_0: half d, then 32 signed bytes; v = d * q. */
static void q8_0_to_double(const uint8_t *p, double *out)
{
	double d = half_at(p);

	for (int i = 0; i < 32; i++)
		out[i] = d * (int8_t)p[2 + i];
}

/* Q4_0: half d, then 16 bytes; value i < 16 is the low nibble of byte i,
 * value 16 + i its high nibble; v = d * (q - 8). */
static void q4_0_to_double(const uint8_t *p, double *out)
{
	double d = half_at(p);

	for (int i = 0; i < 16; i++) {
		out[i] = d * ((p[2 + i] & 0x0f) - 8);
		out[16 + i] = d * ((p[2 + i] >> 4) - 8);
	}
}

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block from its
 * 12 scale bytes k: sub-blocks 0-3 in the low 6 bits of k[0..3] (scales)
 * and k[4..7] (mins); 4-7 in the nibbles of k[8..11] with their top two
 * bits in the top bits of k[0..3] and k[4..7]. */
static void k_scale_min(const uint8_t *k, int j, int *sc, int *mn)
{
	if (j < 4) {
		*sc = k[j] & 0x3f;
		*mn = k[4 + j] & 0x3f;
		return;
	}
	*sc = (k[8 + j - 4] & 0x0f) | ((k[j - 4] & 0xc0) >> 2);
	*mn = (k[8 + j - 4] >> 4) | ((k[j] & 0xc0) >> 2);
}

/* Q4_K: half d, half dmin, 12 scale bytes, 128 bytes of nibbles.  Each
 * 32-byte group g of nibbles holds values 64 g .. 64 g + 31 (low) and
 * 64 g + 32 .. 64 g + 63 (high); v = d * sc * q - dmin * min.  Q5_K has
 * 32 bytes qh between the scales and the nibbles: bit b of qh[l] is the
 * fifth bit of value 32 b + l. */
static void qk_minmax_to_double(const uint8_t *p, bool five, double *out)
{
	double d = half_at(p), dmin = half_at(p + 2);
	const uint8_t *k = p + 4, *qh = p + 16;
	const uint8_t *qs = five ? p + 48 : p + 16;

	for (int g = 0; g < 4; g++) {
		for (int half = 0; half < 2; half++) {
			int j = 2 * g + half, sc, mn;

			k_scale_min(k, j, &sc, &mn);
			for (int l = 0; l < 32; l++) {
				int q = half ? qs[32 * g + l] >> 4 :
					       qs[32 * g + l] & 0x0f;

				if (five && (qh[l] >> j & 1))
					q += 16;
				out[32 * j + l] = d * sc * q - dmin * mn;
			}
		}
	}
}

static void q4_k_to_double(const uint8_t *p, double *out)
{
	qk_minmax_to_double(p, false, out);
}

static void q5_k_to_double(const uint8_t *p, double *out)
{
	qk_minmax_to_double(p, true, out);
}

/* Q6_K: 128 bytes ql, 64 bytes qh, 16 signed scales, half d.  For each
 * half n of the block (128 values, ql + 64 n, qh + 32 n) and l < 32:
 * values l, l + 32, l + 64, l + 96 take the low nibbles of ql[l],
 * ql[l + 32], then the high nibbles of ql[l], ql[l + 32], and bit pairs
 * 0-1, 2-3, 4-5, 6-7 of qh[l] on top; v = d * scale[value / 16] *
 * (q - 32). */
static void q6_k_to_double(const uint8_t *p, double *out)
{
	const uint8_t *ql = p, *qh = p + 128;
	const int8_t *sc = (const int8_t *)(p + 192);
	double d = half_at(p + 208);

	for (int n = 0; n < 2; n++) {
		for (int l = 0; l < 32; l++) {
			int q[4] = {
				(ql[64 * n + l] & 0x0f) | (qh[32 * n + l] & 3) << 4,
				(ql[64 * n + l + 32] & 0x0f) |
					(qh[32 * n + l] >> 2 & 3) << 4,
				(ql[64 * n + l] >> 4) |
					(qh[32 * n + l] >> 4 & 3) << 4,
				(ql[64 * n + l + 32] >> 4) |
					(qh[32 * n + l] >> 6 & 3) << 4,
			};

			for (int g = 0; g < 4; g++) {
				int i = 128 * n + 32 * g + l;

				out[i] = d * sc[i / 16] * (q[g] - 32);
			}
		}
	}
}

/* The 32 4-bit codes of Q4_0's layout at qs (value i < 16 the low nibble
 * of byte i, 16 + i its high one), with bit i of the little-endian word
 * at qh (when not NULL) as each one's fifth bit. */
static void codes32(const uint8_t *qs, const uint8_t *qh, int *q)
{
	uint32_t h = qh ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 |
			  (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24 : 0;

	for (int i = 0; i < 32; i++) {
		int nib = i < 16 ? qs[i] & 0x0f : qs[i - 16] >> 4;

		q[i] = nib + ((h >> i & 1) ? 16 : 0);
	}
}

/* Q4_1: half d, half m, 16 bytes; v = d * q + m. */
static void q4_1_to_double(const uint8_t *p, double *out)
{
	int q[32];

	codes32(p + 4, NULL, q);
	for (int i = 0; i < 32; i++)
		out[i] = half_at(p) * q[i] + half_at(p + 2);
}

/* Q5_0: half d, 4 bytes qh, 16 bytes; v = d * (q - 16). */
static void q5_0_to_double(const uint8_t *p, double *out)
{
	int q[32];

	codes32(p + 6, p + 2, q);
	for (int i = 0; i < 32; i++)
		out[i] = half_at(p) * (q[i] - 16);
}

/* Q5_1: half d, half m, 4 bytes qh, 16 bytes; v = d * q + m. */
static void q5_1_to_double(const uint8_t *p, double *out)
{
	int q[32];

	codes32(p + 8, p + 4, q);
	for (int i = 0; i < 32; i++)
		out[i] = half_at(p) * q[i] + half_at(p + 2);
}

/* The 2-bit field of value i of a Q2_K/Q3_K block: for each half n (128
 * values, qs + 32 n) and l < 32, values 128 n + l, + 32, + 64, + 96 are
 * bits 0-1, 2-3, 4-5, 6-7 of qs[32 n + l]. */
static int two_bits(const uint8_t *qs, int i)
{
	int n = i / 128, g = i % 128 / 32, l = i % 32;

	return qs[32 * n + l] >> (2 * g) & 3;
}

/* Q3_K: 32 bytes hmask, 64 bytes qs, 12 bytes of scales, half d.  The
 * 16 6-bit scales: scale j's low 4 bits are the low nibble of byte j (j
 * < 8) or the high nibble of byte j - 8; its top 2 are bits 2 (j / 4),
 * 2 (j / 4) + 1 of byte 8 + j % 4.  Value i = 32 g + l (g < 8) takes its
 * third bit from bit g of hmask[l]; v = d * (scale - 32) * (q - 4). */
static void q3_k_to_double(const uint8_t *p, double *out)
{
	const uint8_t *hm = p, *qs = p + 32, *k = p + 96;
	double d = half_at(p + 108);

	for (int i = 0; i < 256; i++) {
		int j = i / 16;
		int lo = j < 8 ? k[j] & 0x0f : k[j - 8] >> 4;
		int sc = lo | (k[8 + j % 4] >> (2 * (j / 4)) & 3) << 4;
		int q = two_bits(qs, i) + ((hm[i % 32] >> (i / 32) & 1) ? 4 : 0);

		out[i] = d * (sc - 32) * (q - 4);
	}
}

/* Q2_K: 16 bytes of scales (low nibble the scale, high the min of each
 * 16 values), 64 bytes qs, half d, half dmin; v = d * sc * q - dmin * m. */
static void q2_k_to_double(const uint8_t *p, double *out)
{
	double d = half_at(p + 80), dmin = half_at(p + 82);

	for (int i = 0; i < 256; i++)
		out[i] = d * (p[i / 16] & 0x0f) * two_bits(p + 16, i) -
			 dmin * (p[i / 16] >> 4);
}

static const int iq4nl_table[16] = {
	-127, -104, -83, -65, -49, -35, -22, -10,
	1, 13, 25, 38, 53, 69, 89, 113,
};

/* IQ4_NL: half d, 16 bytes of codes; v = d * table[q]. */
static void iq4_nl_to_double(const uint8_t *p, double *out)
{
	int q[32];

	codes32(p + 2, NULL, q);
	for (int i = 0; i < 32; i++)
		out[i] = half_at(p) * iq4nl_table[q[i]];
}

/* IQ4_XS: half d, 16-bit scales_h, 4 bytes scales_l, 128 bytes of codes
 * (16 per 32 values).  Sub-block j's 6-bit scale: nibble j % 2 of
 * scales_l[j / 2], top bits 2 j, 2 j + 1 of scales_h; v = d * (scale -
 * 32) * table[q]. */
static void iq4_xs_to_double(const uint8_t *p, double *out)
{
	unsigned sh = p[2] | p[3] << 8;

	for (int j = 0; j < 8; j++) {
		int ls = (p[4 + j / 2] >> (4 * (j % 2)) & 0x0f) |
			 (sh >> (2 * j) & 3) << 4;
		int q[32];

		codes32(p + 8 + 16 * j, NULL, q);
		for (int i = 0; i < 32; i++)
			out[32 * j + i] = half_at(p) * (ls - 32) *
					  iq4nl_table[q[i]];
	}
}

/* MXFP4: an E8M0 exponent e, 16 bytes of E2M1 codes (sign, 2 exponent
 * bits, 1 mantissa bit); v = 2^(e - 127) * fp4(q). */
static void mxfp4_to_double(const uint8_t *p, double *out)
{
	static const double fp4[8] = { 0, 0.5, 1, 1.5, 2, 3, 4, 6 };
	int q[32];

	codes32(p + 1, NULL, q);
	for (int i = 0; i < 32; i++)
		out[i] = ldexp(q[i] & 8 ? -fp4[q[i] & 7] : fp4[q[i] & 7],
			       p[0] - 127);
}

typedef void (*block_decoder)(const uint8_t *p, double *out);

static block_decoder decoder_of(enum loom_type type)
{
	switch (type) {
	case LOOM_TYPE_Q8_0:
		return q8_0_to_double;
	case LOOM_TYPE_Q4_0:
		return q4_0_to_double;
	case LOOM_TYPE_Q4_K:
		return q4_k_to_double;
	case LOOM_TYPE_Q5_K:
		return q5_k_to_double;
	case LOOM_TYPE_Q6_K:
		return q6_k_to_double;
	case LOOM_TYPE_Q4_1:
		return q4_1_to_double;
	case LOOM_TYPE_Q5_0:
		return q5_0_to_double;
	case LOOM_TYPE_Q5_1:
		return q5_1_to_double;
	case LOOM_TYPE_Q3_K:
		return q3_k_to_double;
	case LOOM_TYPE_Q2_K:
		return q2_k_to_double;
	case LOOM_TYPE_IQ4_NL:
		return iq4_nl_to_double;
	case LOOM_TYPE_IQ4_XS:
		return iq4_xs_to_double;
	case LOOM_TYPE_MXFP4:
		return mxfp4_to_double;
	default:
		return NULL;
	}
}

int loom_test_decode_blocks(enum loom_type type, const void *blocks,
			    int64_t n, double *out)
{
	block_decoder dec = decoder_of(type);
	int64_t bs = loom_type_block_size(type);

	if (!dec || n % bs)
		return LOOM_E_UNSUPPORTED;
	for (int64_t b = 0; b < n / bs; b++)
		dec((const uint8_t *)blocks + b * loom_type_size(type),
		    out + b * bs);
	return LOOM_OK;
}

double *loom_test_get_doubles(const struct loom_tensor *t, char **error)
{
	int64_t n = loom_tensor_n_elements(t);
	size_t nbytes = loom_tensor_n_bytes(t);
	uint8_t *raw;
	double *out, *o;
	int st;

	bool quant = loom_type_is_quantized(t->type);

	if (quant && !decoder_of(t->type)) {
		*error = loom_test_strdup_printf("cannot decode type %s",
					 loom_type_name(t->type));
		return NULL;
	}
	if (quant && (t->nb[0] != loom_type_size(t->type) ||
		      t->ne[0] % loom_type_block_size(t->type))) {
		*error = loom_test_strdup_printf("quantized tensor without contiguous rows");
		return NULL;
	}
	raw = loom_test_malloc(nbytes ? nbytes : 1);
	st = loom_tensor_get(t, raw, 0, nbytes);
	if (st != LOOM_OK) {
		*error = loom_test_strdup_printf("loom_tensor_get: %s: %s",
					 loom_strerror(st), loom_error_message());
		free(raw);
		return NULL;
	}
	out = o = loom_test_malloc(sizeof(double) * (size_t)(n ? n : 1));
	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
	for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
	for (int64_t i1 = 0; i1 < t->ne[1]; i1++) {
		const uint8_t *row = raw + i1 * t->nb[1] + i2 * t->nb[2] +
				     i3 * t->nb[3];

		if (quant) {
			loom_test_decode_blocks(t->type, row, t->ne[0], o);
			o += t->ne[0];
			continue;
		}
		for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
			*o++ = scalar_to_double(t->type, row + i0 * t->nb[0]);
	}
	free(raw);
	return out;
}

double loom_test_nmse(const double *ref, const double *out, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d;

		if (isnan(ref[i]) || isnan(out[i]))
			return INFINITY;
		if (out[i] == ref[i]) {
			den += isinf(ref[i]) ? 0 : ref[i] * ref[i];
			continue;
		}
		d = out[i] - ref[i];
		num += d * d;
		den += ref[i] * ref[i];
	}
	if (isinf(num))
		return INFINITY;
	if (den == 0)
		return num == 0 ? 0 : INFINITY;
	return num / den;
}

int loom_test_meta_partitions(int n, loom_dev_t **cpu)
{
	char name[16];

	snprintf(name, sizeof(name), "%d", n);
	setenv("LOOM_CPU_DEVICES", name, 1);
	setenv("LOOM_BACKENDS", "cpu,meta", 1);
	unsetenv("LOOM_META_DEVICES");
	if (loom_test_load_plugins() || !loom_reg_by_name("meta"))
		return -1;
	for (int j = 0; j < n; j++) {
		snprintf(name, sizeof(name), "cpu%d", j);
		if (!(cpu[j] = loom_dev_by_name(name)))
			return -1;
	}
	return 0;
}

/* The failing call's message, for loom_test_compute. */
static double *compute_error(const char *what, int st, char **error)
{
	*error = loom_test_strdup_printf("%s: %s: %s", what, loom_strerror(st),
					 loom_error_message());
	return NULL;
}

double *loom_test_compute(loom_dev_t *dev, loom_ctx_t *ctx,
			  struct loom_tensor *y, struct loom_tensor *x, const float *x_values,
			  char **error)
{
	loom_graph_t *g = NULL;
	loom_galloc_t *ga = NULL;
	loom_backend_t *be = NULL;
	double *out = NULL;
	int st;

	if ((st = loom_graph_new(ctx, &g)) || (st = loom_graph_expand(g, y)))
		return compute_error("graph", st, error);
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META &&
	    (st = loom_meta_check(dev, g)))
		return compute_error("meta check", st, error);
	if ((st = loom_galloc_new(loom_dev_buffer_type(dev), &ga)) ||
	    (st = loom_galloc_alloc_graph(ga, g))) {
		out = compute_error("allocation", st, error);
		goto out;
	}
	st = loom_tensor_set(x, x_values, 0,
			     sizeof(float) * loom_tensor_n_elements(x));
	if (st) {
		out = compute_error("input", st, error);
		goto out;
	}
	if ((st = loom_dev_init_backend(dev, NULL, &be)) ||
	    (st = loom_backend_graph_compute(be, g))) {
		out = compute_error(loom_dev_name(dev), st, error);
		goto out;
	}
	out = loom_test_get_doubles(y, error);
out:
	loom_backend_free(be);
	loom_galloc_free(ga);
	return out;
}

int loom_test_load_plugins(void)
{
	const char *test_path = getenv("LOOM_TEST_PLUGIN_PATH");
	const char *user_path = getenv("LOOM_PLUGIN_PATH");

	if (test_path && *test_path &&
	    !(user_path && strstr(user_path, test_path))) {
		char *path = user_path && *user_path ?
			loom_test_strdup_printf("%s:%s", user_path, test_path) :
			loom_test_strdup_printf("%s", test_path);

		setenv("LOOM_PLUGIN_PATH", path, 1);
		free(path);
	}
	return loom_load_all();
}
