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

/* Decodes one Q8_0 block: v[i] = d * qs[i]. */
static void q8_0_to_double(const uint8_t *p, double *out)
{
	struct loom_block_q8_0 blk;
	double d;

	memcpy(&blk, p, sizeof(blk));
	d = loom_test_fp16_to_double(blk.d);
	for (int i = 0; i < LOOM_QK8_0; i++)
		out[i] = d * blk.qs[i];
}

double *loom_test_get_doubles(const struct loom_tensor *t, char **error)
{
	int64_t n = loom_tensor_n_elements(t);
	size_t nbytes = loom_tensor_n_bytes(t);
	uint8_t *raw;
	double *out, *o;
	int st;

	if (t->type == LOOM_TYPE_Q8_0 &&
	    (t->nb[0] != loom_type_size(t->type) || t->ne[0] % LOOM_QK8_0)) {
		*error = loom_test_strdup_printf("quantized tensor without contiguous rows");
		return NULL;
	}
	if (t->type != LOOM_TYPE_Q8_0 && loom_type_is_quantized(t->type)) {
		*error = loom_test_strdup_printf("cannot decode type %s",
					 loom_type_name(t->type));
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

		if (t->type == LOOM_TYPE_Q8_0) {
			for (int64_t b = 0; b < t->ne[0] / LOOM_QK8_0; b++) {
				q8_0_to_double(row + b * t->nb[0], o);
				o += LOOM_QK8_0;
			}
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
