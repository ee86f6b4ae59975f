/* SPDX-License-Identifier: MIT */
/* types.c - element types (traits from LOOM_TYPE_MAP), half and bfloat16
 * conversions and loom_type_convert().  The quantized blocks live in
 * quant.c, op names in the table of ops (rules.c), tensors in tensor.c, op constructors in ops.c. */
#include "config.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "loom-private.h"

struct type_traits {
	const char *name;
	int64_t block_size;
	size_t type_size;
};

static const struct type_traits type_traits[LOOM_TYPE_COUNT] = {
#define X_(name_, str, blck, size)                                    \
	[LOOM_TYPE_##name_] = { .name = str, .block_size = blck,     \
				.type_size = size },
	LOOM_TYPE_MAP(X_)
#undef X_
};

static bool type_valid(enum loom_type type)
{
	return (unsigned)type < LOOM_TYPE_COUNT;
}

const char *loom_type_name(enum loom_type type)
{
	return type_valid(type) ? type_traits[type].name : "unknown";
}

int loom_type_from_name(const char *name, enum loom_type *out)
{
	if (!name || !out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_type_from_name: NULL argument");
	for (int i = 0; i < LOOM_TYPE_COUNT; i++) {
		if (strcmp(type_traits[i].name, name) == 0) {
			*out = (enum loom_type)i;
			return LOOM_OK;
		}
	}
	return loom_error_set(LOOM_E_NOT_FOUND, "unknown type name \"%s\"",
			      name);
}

int64_t loom_type_block_size(enum loom_type type)
{
	return type_valid(type) ? type_traits[type].block_size : 0;
}

size_t loom_type_size(enum loom_type type)
{
	return type_valid(type) ? type_traits[type].type_size : 0;
}

bool loom_type_is_quantized(enum loom_type type)
{
	return type_valid(type) && type_traits[type].block_size > 1;
}

/* Returns 0 for an invalid type, a negative count, a count that is not
 * a whole number of blocks, or one whose bytes do not fit in a size_t. */
size_t loom_type_row_size(enum loom_type type, int64_t ne0)
{
	size_t bytes;

	if (!type_valid(type) || ne0 < 0 ||
	    ne0 % type_traits[type].block_size != 0)
		return 0;
	if (__builtin_mul_overflow(type_traits[type].type_size,
				   (size_t)(ne0 / type_traits[type].block_size),
				   &bytes))
		return 0;
	return bytes;
}

/* ------------------------------------------------------------------------
 * IEEE half and bfloat16.
 */
static uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Rounds to nearest, ties to even; overflow gives infinity, NaN stays a
 * (quiet) NaN with the sign and the top payload bits kept. */
uint16_t loom_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
	uint32_t ax = x & 0x7fffffff;
	uint32_t e = ax >> 23;

	if (ax > 0x7f800000)
		return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff);
	if (ax >= 0x477ff000) /* 65520 and above round to infinity */
		return sign | 0x7c00;
	if (ax >= 0x38800000) { /* normal half */
		uint32_t h = (ax >> 13) - ((127 - 15) << 10);
		uint32_t rem = ax & 0x1fff;

		if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
			h++;
		return sign | (uint16_t)h;
	}
	if (e < 102) /* below 2^-25: rounds to zero */
		return sign;
	/* Subnormal half: the value in units of 2^-24. */
	uint32_t m = (ax & 0x7fffff) | 0x800000;
	uint32_t shift = 126 - e;
	uint32_t q = m >> shift;
	uint32_t rem = m & ((1u << shift) - 1);
	uint32_t half = 1u << (shift - 1);

	if (rem > half || (rem == half && (q & 1)))
		q++;
	return sign | (uint16_t)q;
}

float loom_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t e = (h >> 10) & 0x1f;
	uint32_t m = h & 0x3ff;

	if (e == 0) {
		float v = (float)m * 0x1p-24f;

		return sign ? -v : v;
	}
	if (e == 31)
		return bits_f32(sign | 0x7f800000 | (m << 13));
	return bits_f32(sign | ((e + 112) << 23) | (m << 13));
}

uint16_t loom_f32_to_bf16(float f)
{
	return loom__f32_to_bf16(f);
}

float loom_bf16_to_f32(uint16_t h)
{
	return loom__bf16_to_f32(h);
}

/* Converts through a small F32 staging block; its length is a multiple of
 * every block size, so only the last step can be short. */
int loom_type_convert(enum loom_type src_type, const void *src,
		 enum loom_type dst_type, void *dst, int64_t n)
{
	enum { CHUNK = 256 };
	float tmp[CHUNK];

	if (!type_valid(src_type) || !type_valid(dst_type))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_type_convert: invalid type (%d -> %d)",
				      (int)src_type, (int)dst_type);
	if (n < 0 || (n > 0 && (!src || !dst)))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_type_convert: bad buffer or count %lld",
				      (long long)n);
	if (n % type_traits[src_type].block_size ||
	    n % type_traits[dst_type].block_size)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_type_convert: %lld values is not a "
				      "whole number of %s/%s blocks",
				      (long long)n, loom_type_name(src_type),
				      loom_type_name(dst_type));
	if (src_type == dst_type) {
		if (n > 0)
			memmove(dst, src, loom_type_row_size(src_type, n));
		return LOOM_OK;
	}
	const struct loom__type_codec *from = loom__type_codec(src_type);
	const struct loom__type_codec *to = loom__type_codec(dst_type);

	if (!from || !to)
		return loom_error_set(LOOM_E_UNSUPPORTED,
				      "loom_type_convert: no conversion from %s "
				      "to %s",
				      loom_type_name(src_type),
				      loom_type_name(dst_type));

	const char *s = src;
	char *d = dst;

	for (int64_t i = 0; i < n; i += CHUNK) {
		int64_t m = n - i < CHUNK ? n - i : CHUNK;

		from->to_f32(s, tmp, m);
		to->from_f32(tmp, d, m);
		s += loom_type_row_size(src_type, m);
		d += loom_type_row_size(dst_type, m);
	}
	return LOOM_OK;
}
