/* SPDX-License-Identifier: MIT */
/* quant.c - each type's conversions to and from F32 (its codec, one
 * entry of the table at the end): the quantized blocks of loom.h and
 * F32/F16/BF16.  loom_type_convert() in types.c stages through them; the
 * names, block sizes and bytes are loom.h's LOOM_TYPE_MAP.
 */
#include "config.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "loom-private.h"

/* ------------------------------------------------------------------------
 * Q8_0: d = max|x| / 127 rounded to half, q = round(x / d).
 */
static void quantize_q8_0(const float *x, void *dst, int64_t n)
{
	struct loom_block_q8_0 *y = dst;

	for (int64_t b = 0; b < n / LOOM_QK8_0; b++) {
		const float *xb = x + b * LOOM_QK8_0;
		float amax = 0.0f;

		for (int i = 0; i < LOOM_QK8_0; i++) {
			float a = fabsf(xb[i]);

			if (a > amax)
				amax = a;
		}
		uint16_t dh = loom_f32_to_f16(amax / 127.0f);
		float d = loom_f16_to_f32(dh);
		float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[b].d = dh;
		for (int i = 0; i < LOOM_QK8_0; i++) {
			float q = roundf(xb[i] * id);

			if (isnan(q))
				q = 0.0f;
			else if (q > 127.0f)
				q = 127.0f;
			else if (q < -127.0f)
				q = -127.0f;
			y[b].qs[i] = (int8_t)q;
		}
	}
}

static void dequantize_q8_0(const void *src, float *y, int64_t n)
{
	const struct loom_block_q8_0 *x = src;

	for (int64_t b = 0; b < n / LOOM_QK8_0; b++) {
		float d = loom_f16_to_f32(x[b].d);

		for (int i = 0; i < LOOM_QK8_0; i++)
			y[b * LOOM_QK8_0 + i] = d * (float)x[b].qs[i];
	}
}

/* ------------------------------------------------------------------------
 * Q4_0: d = the value of largest magnitude / -8 rounded to half, so that
 * value lands on q = 0; q = round(x / d) + 8 in 0..15.
 */
static float half_round(float f, uint16_t *h)
{
	*h = loom_f32_to_f16(f);
	return loom_f16_to_f32(*h);
}

/* round(x * id) clamped to [lo, hi]; NaN gives 0. */
static int quant_clamp(float x, float id, int lo, int hi)
{
	float q = roundf(x * id);

	if (isnan(q))
		return 0;
	return q < (float)lo ? lo : q > (float)hi ? hi : (int)q;
}

/* The value of largest magnitude of x[0..n), keeping its sign. */
static float signed_amax(const float *x, int n)
{
	float best = 0.0f;

	for (int i = 0; i < n; i++)
		if (fabsf(x[i]) > fabsf(best))
			best = x[i];
	return best;
}

static void quantize_q4_0(const float *x, void *dst, int64_t n)
{
	struct loom_block_q4_0 *y = dst;

	for (int64_t b = 0; b < n / LOOM_QK4_0; b++) {
		const float *xb = x + b * LOOM_QK4_0;
		float d = half_round(signed_amax(xb, LOOM_QK4_0) / -8.0f,
				     &y[b].d);
		float id = d != 0.0f ? 1.0f / d : 0.0f;

		for (int j = 0; j < LOOM_QK4_0 / 2; j++) {
			int lo = quant_clamp(xb[j], id, -8, 7) + 8;
			int hi = quant_clamp(xb[j + 16], id, -8, 7) + 8;

			y[b].qs[j] = (uint8_t)(lo | hi << 4);
		}
	}
}

static void dequantize_q4_0(const void *src, float *y, int64_t n)
{
	const struct loom_block_q4_0 *x = src;

	for (int64_t b = 0; b < n / LOOM_QK4_0; b++, y += LOOM_QK4_0) {
		float d = loom_f16_to_f32(x[b].d);

		for (int j = 0; j < LOOM_QK4_0 / 2; j++) {
			y[j] = d * (float)((x[b].qs[j] & 15) - 8);
			y[j + 16] = d * (float)((x[b].qs[j] >> 4) - 8);
		}
	}
}

/* ------------------------------------------------------------------------
 * Q4_K and Q5_K: each sub-block of 32 spans [min(0, lo), hi] in nmax
 * steps; the sub-blocks' steps and (negated) minimums are then quantized
 * to 6 bits against the super-block's largest, and the values against
 * the quantized steps.
 */

/* Packs 6-bit scales and mins as loom.h describes. */
static void pack_scales_k(const uint8_t *sc, const uint8_t *m, uint8_t *q)
{
	for (int j = 0; j < 4; j++) {
		q[j] = (uint8_t)(sc[j] | (sc[j + 4] >> 4) << 6);
		q[j + 4] = (uint8_t)(m[j] | (m[j + 4] >> 4) << 6);
		q[j + 8] = (uint8_t)((sc[j + 4] & 15) | (m[j + 4] & 15) << 4);
	}
}

static void unpack_scale_k(const uint8_t *q, int s, int *sc, int *m)
{
	if (s < 4) {
		*sc = q[s] & 63;
		*m = q[s + 4] & 63;
	} else {
		*sc = (q[s + 4] & 15) | (q[s - 4] >> 6) << 4;
		*m = (q[s + 4] >> 4) | (q[s] >> 6) << 4;
	}
}

/* Quantizes one super-block of 256 in nsub sub-blocks to q[i] in
 * 0..nmax, with steps d * sc[s] and offsets dmin * m[s] (sc, m in
 * 0..smax). */
static void quantize_minmax(const float *x, int nsub, int nmax, int smax_q,
			    uint16_t *dh, uint16_t *dminh, uint8_t *sc,
			    uint8_t *m, uint8_t *q)
{
	float step[16], neg_min[16], smax = 0.0f, mmax = 0.0f;
	int len = LOOM_QK_K / nsub;

	for (int s = 0; s < nsub; s++) {
		const float *xs = x + len * s;
		float lo = 0.0f, hi = xs[0];

		for (int i = 0; i < len; i++) {
			lo = xs[i] < lo ? xs[i] : lo;
			hi = xs[i] > hi ? xs[i] : hi;
		}
		step[s] = (hi - lo) / (float)nmax;
		neg_min[s] = -lo;
		smax = step[s] > smax ? step[s] : smax;
		mmax = neg_min[s] > mmax ? neg_min[s] : mmax;
	}
	float d = half_round(smax / (float)smax_q, dh);
	float dmin = half_round(mmax / (float)smax_q, dminh);
	float id = d != 0.0f ? 1.0f / d : 0.0f;
	float idmin = dmin != 0.0f ? 1.0f / dmin : 0.0f;

	for (int s = 0; s < nsub; s++) {
		sc[s] = (uint8_t)quant_clamp(step[s], id, 0, smax_q);
		m[s] = (uint8_t)quant_clamp(neg_min[s], idmin, 0, smax_q);
	}
	for (int s = 0; s < nsub; s++) {
		float ds = d * sc[s], off = dmin * m[s];
		float ids = ds != 0.0f ? 1.0f / ds : 0.0f;

		for (int i = 0; i < len; i++)
			q[len * s + i] = (uint8_t)quant_clamp(
				x[len * s + i] + off, ids, 0, nmax);
	}
}

/* The same for Q4_K/Q5_K: 8 sub-blocks of 32, scales packed in 12 bytes. */
static void quantize_k_minmax(const float *x, int nmax, uint16_t *dh,
			      uint16_t *dminh, uint8_t *scales, uint8_t *q)
{
	uint8_t sc[8], m[8];

	quantize_minmax(x, 8, nmax, 63, dh, dminh, sc, m, q);
	pack_scales_k(sc, m, scales);
}

static void quantize_q4_k(const float *x, void *dst, int64_t n)
{
	struct loom_block_q4_k *y = dst;
	uint8_t q[LOOM_QK_K];

	for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
		quantize_k_minmax(x + b * LOOM_QK_K, 15, &y[b].d, &y[b].dmin,
				  y[b].scales, q);
		for (int c = 0; c < 4; c++)
			for (int l = 0; l < 32; l++)
				y[b].qs[32 * c + l] = (uint8_t)(
					q[64 * c + l] |
					q[64 * c + 32 + l] << 4);
	}
}

static void quantize_q5_k(const float *x, void *dst, int64_t n)
{
	struct loom_block_q5_k *y = dst;
	uint8_t q[LOOM_QK_K];

	for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
		quantize_k_minmax(x + b * LOOM_QK_K, 31, &y[b].d, &y[b].dmin,
				  y[b].scales, q);
		memset(y[b].qh, 0, sizeof(y[b].qh));
		for (int c = 0; c < 4; c++) {
			for (int l = 0; l < 32; l++) {
				int lo = q[64 * c + l], hi = q[64 * c + 32 + l];

				y[b].qs[32 * c + l] = (uint8_t)(
					(lo & 15) | (hi & 15) << 4);
				y[b].qh[l] |= (uint8_t)((lo >> 4) << (2 * c) |
							(hi >> 4) << (2 * c + 1));
			}
		}
	}
}

static void dequantize_q4_k(const void *src, float *y, int64_t n)
{
	const struct loom_block_q4_k *x = src;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++, y += LOOM_QK_K) {
		float d = loom_f16_to_f32(x[b].d);
		float dmin = loom_f16_to_f32(x[b].dmin);

		for (int s = 0; s < 8; s++) {
			const uint8_t *qs = x[b].qs + 32 * (s / 2);
			int sc, m, shift = 4 * (s & 1);

			unpack_scale_k(x[b].scales, s, &sc, &m);
			for (int i = 0; i < 32; i++)
				y[32 * s + i] = d * sc * ((qs[i] >> shift) & 15) -
						dmin * m;
		}
	}
}

static void dequantize_q5_k(const void *src, float *y, int64_t n)
{
	const struct loom_block_q5_k *x = src;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++, y += LOOM_QK_K) {
		float d = loom_f16_to_f32(x[b].d);
		float dmin = loom_f16_to_f32(x[b].dmin);

		for (int s = 0; s < 8; s++) {
			const uint8_t *qs = x[b].qs + 32 * (s / 2);
			int sc, m, shift = 4 * (s & 1);

			unpack_scale_k(x[b].scales, s, &sc, &m);
			for (int i = 0; i < 32; i++) {
				int q = ((qs[i] >> shift) & 15) |
					((x[b].qh[i] >> s) & 1) << 4;

				y[32 * s + i] = d * sc * q - dmin * m;
			}
		}
	}
}

/* ------------------------------------------------------------------------
 * Q6_K: each sub-block of 16 gets the step that puts its value of largest
 * magnitude on q - 32 = -32; the steps are quantized to signed 8 bits
 * against the largest, and the values against the quantized steps.
 */
static void quantize_q6_k(const float *x, void *dst, int64_t n)
{
	struct loom_block_q6_k *y = dst;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
		const float *xb = x + b * LOOM_QK_K;
		float step[16], smax = 0.0f;
		uint8_t q[LOOM_QK_K];

		for (int s = 0; s < 16; s++) {
			step[s] = signed_amax(xb + 16 * s, 16) / -32.0f;
			if (fabsf(step[s]) > fabsf(smax))
				smax = step[s];
		}
		float d = half_round(fabsf(smax) / 127.0f, &y[b].d);
		float id = d != 0.0f ? 1.0f / d : 0.0f;

		for (int s = 0; s < 16; s++) {
			int sc = quant_clamp(step[s], id, -127, 127);
			float ds = d * (float)sc;
			float ids = ds != 0.0f ? 1.0f / ds : 0.0f;

			y[b].scales[s] = (int8_t)sc;
			for (int i = 0; i < 16; i++)
				q[16 * s + i] = (uint8_t)(quant_clamp(
					xb[16 * s + i], ids, -32, 31) + 32);
		}
		for (int h = 0; h < 2; h++) {
			const uint8_t *qh = q + 128 * h;

			for (int l = 0; l < 32; l++) {
				int q1 = qh[l], q2 = qh[32 + l];
				int q3 = qh[64 + l], q4 = qh[96 + l];

				y[b].ql[64 * h + l] = (uint8_t)(
					(q1 & 15) | (q3 & 15) << 4);
				y[b].ql[64 * h + 32 + l] = (uint8_t)(
					(q2 & 15) | (q4 & 15) << 4);
				y[b].qh[32 * h + l] = (uint8_t)(
					q1 >> 4 | (q2 >> 4) << 2 |
					(q3 >> 4) << 4 | (q4 >> 4) << 6);
			}
		}
	}
}

static void dequantize_q6_k(const void *src, float *y, int64_t n)
{
	const struct loom_block_q6_k *x = src;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++, y += LOOM_QK_K) {
		float d = loom_f16_to_f32(x[b].d);

		for (int i = 0; i < LOOM_QK_K; i++) {
			int h = i / 128, g = i % 128 / 32, l = i % 32;
			int lo = x[b].ql[64 * h + 32 * (g & 1) + l] >>
				 (4 * (g >> 1)) & 15;
			int hi = x[b].qh[32 * h + l] >> (2 * g) & 3;

			y[i] = d * x[b].scales[i / 16] * ((lo | hi << 4) - 32);
		}
	}
}


/* ------------------------------------------------------------------------
 * Q4_1 and Q5_1: each block spans [lo, hi] in 15 or 31 steps from m = lo
 * (rounded to half); Q5_0 as Q4_0 with 16 steps each side.
 */

/* Q4_0's nibble layout: q[j] in the low nibble of qs[j], q[j + 16] in
 * the high; the fifth bits (when qh) in bit j of a 32-bit word. */
static void pack_nibbles(const uint8_t *q, uint8_t *qs, uint8_t *qh)
{
	uint32_t h = 0;

	for (int j = 0; j < 16; j++) {
		qs[j] = (uint8_t)((q[j] & 15) | (q[j + 16] & 15) << 4);
		h |= (uint32_t)(q[j] >> 4) << j | (uint32_t)(q[j + 16] >> 4)
		     << (j + 16);
	}
	if (qh)
		for (int i = 0; i < 4; i++)
			qh[i] = (uint8_t)(h >> (8 * i));
}

static void unpack_nibbles(const uint8_t *qs, const uint8_t *qh, int *q)
{
	uint32_t h = qh ? (uint32_t)qh[0] | (uint32_t)qh[1] << 8 |
			  (uint32_t)qh[2] << 16 | (uint32_t)qh[3] << 24 : 0;

	for (int j = 0; j < 16; j++) {
		q[j] = (qs[j] & 15) | (int)(h >> j & 1) << 4;
		q[j + 16] = (qs[j] >> 4) | (int)(h >> (j + 16) & 1) << 4;
	}
}

/* One block of 32 as min m and step d (halves) with q in 0..nmax. */
static void quantize_block_minmax(const float *x, int nmax, uint16_t *dh,
				  uint16_t *mh, uint8_t *q)
{
	float lo = x[0], hi = x[0];

	for (int i = 1; i < 32; i++) {
		lo = x[i] < lo ? x[i] : lo;
		hi = x[i] > hi ? x[i] : hi;
	}
	float m = half_round(lo, mh);
	float d = half_round((hi - m) / (float)nmax, dh);
	float id = d != 0.0f ? 1.0f / d : 0.0f;

	for (int i = 0; i < 32; i++)
		q[i] = (uint8_t)quant_clamp(x[i] - m, id, 0, nmax);
}

static void quantize_q4_1(const float *x, void *dst, int64_t n)
{
	struct loom_block_q4_1 *y = dst;
	uint8_t q[32];

	for (int64_t b = 0; b < n / 32; b++) {
		quantize_block_minmax(x + 32 * b, 15, &y[b].d, &y[b].m, q);
		pack_nibbles(q, y[b].qs, NULL);
	}
}

static void quantize_q5_1(const float *x, void *dst, int64_t n)
{
	struct loom_block_q5_1 *y = dst;
	uint8_t q[32];

	for (int64_t b = 0; b < n / 32; b++) {
		quantize_block_minmax(x + 32 * b, 31, &y[b].d, &y[b].m, q);
		pack_nibbles(q, y[b].qs, y[b].qh);
	}
}

static void quantize_q5_0(const float *x, void *dst, int64_t n)
{
	struct loom_block_q5_0 *y = dst;
	uint8_t q[32];

	for (int64_t b = 0; b < n / 32; b++) {
		const float *xb = x + 32 * b;
		float d = half_round(signed_amax(xb, 32) / -16.0f, &y[b].d);
		float id = d != 0.0f ? 1.0f / d : 0.0f;

		for (int i = 0; i < 32; i++)
			q[i] = (uint8_t)(quant_clamp(xb[i], id, -16, 15) + 16);
		pack_nibbles(q, y[b].qs, y[b].qh);
	}
}

static void dequantize_q4_1(const void *src, float *y, int64_t n)
{
	const struct loom_block_q4_1 *x = src;
	int q[32];

	for (int64_t b = 0; b < n / 32; b++, y += 32) {
		float d = loom_f16_to_f32(x[b].d), m = loom_f16_to_f32(x[b].m);

		unpack_nibbles(x[b].qs, NULL, q);
		for (int i = 0; i < 32; i++)
			y[i] = d * (float)q[i] + m;
	}
}

static void dequantize_q5_0(const void *src, float *y, int64_t n)
{
	const struct loom_block_q5_0 *x = src;
	int q[32];

	for (int64_t b = 0; b < n / 32; b++, y += 32) {
		float d = loom_f16_to_f32(x[b].d);

		unpack_nibbles(x[b].qs, x[b].qh, q);
		for (int i = 0; i < 32; i++)
			y[i] = d * (float)(q[i] - 16);
	}
}

static void dequantize_q5_1(const void *src, float *y, int64_t n)
{
	const struct loom_block_q5_1 *x = src;
	int q[32];

	for (int64_t b = 0; b < n / 32; b++, y += 32) {
		float d = loom_f16_to_f32(x[b].d), m = loom_f16_to_f32(x[b].m);

		unpack_nibbles(x[b].qs, x[b].qh, q);
		for (int i = 0; i < 32; i++)
			y[i] = d * (float)q[i] + m;
	}
}

/* ------------------------------------------------------------------------
 * Q3_K and Q2_K: 16 sub-blocks of 16.  Q3_K as Q6_K with 4 steps each
 * side and 6-bit scales offset by 32; Q2_K as Q4_K with 3 steps and
 * 4-bit scales and mins.  Both keep value i = 128 h + 32 g + l's low 2
 * bits in bits 2 g, 2 g + 1 of qs[32 h + l].
 */
static void pack_crumbs(const uint8_t *q, uint8_t *qs)
{
	memset(qs, 0, LOOM_QK_K / 4);
	for (int i = 0; i < LOOM_QK_K; i++)
		qs[32 * (i / 128) + i % 32] |=
			(uint8_t)((q[i] & 3) << (2 * (i % 128 / 32)));
}

static int crumb(const uint8_t *qs, int i)
{
	return qs[32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32)) & 3;
}

/* Q3_K's 6-bit scale s from its 12 bytes. */
static int q3_k_scale(const uint8_t *sc, int s)
{
	int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;

	return lo | (sc[8 + s % 4] >> (2 * (s / 4)) & 3) << 4;
}

static void quantize_q3_k(const float *x, void *dst, int64_t n)
{
	struct loom_block_q3_k *y = dst;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
		const float *xb = x + b * LOOM_QK_K;
		float step[16], smax = 0.0f;
		uint8_t q[LOOM_QK_K];

		for (int s = 0; s < 16; s++) {
			step[s] = signed_amax(xb + 16 * s, 16) / -4.0f;
			if (fabsf(step[s]) > smax)
				smax = fabsf(step[s]);
		}
		float d = half_round(smax / 31.0f, &y[b].d);
		float id = d != 0.0f ? 1.0f / d : 0.0f;

		memset(y[b].scales, 0, sizeof(y[b].scales));
		memset(y[b].hmask, 0, sizeof(y[b].hmask));
		for (int s = 0; s < 16; s++) {
			int sc = quant_clamp(step[s], id, -32, 31);
			int u = sc + 32;
			float ds = d * (float)sc;
			float ids = ds != 0.0f ? 1.0f / ds : 0.0f;

			y[b].scales[s % 8] |= (uint8_t)((u & 15) << (4 * (s / 8)));
			y[b].scales[8 + s % 4] |=
				(uint8_t)((u >> 4) << (2 * (s / 4)));
			for (int i = 0; i < 16; i++)
				q[16 * s + i] = (uint8_t)(quant_clamp(
					xb[16 * s + i], ids, -4, 3) + 4);
		}
		pack_crumbs(q, y[b].qs);
		for (int i = 0; i < LOOM_QK_K; i++)
			y[b].hmask[i % 32] |= (uint8_t)((q[i] >> 2) << (i / 32));
	}
}

static void dequantize_q3_k(const void *src, float *y, int64_t n)
{
	const struct loom_block_q3_k *x = src;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++, y += LOOM_QK_K) {
		float d = loom_f16_to_f32(x[b].d);

		for (int i = 0; i < LOOM_QK_K; i++) {
			int q = crumb(x[b].qs, i) |
				(x[b].hmask[i % 32] >> (i / 32) & 1) << 2;

			y[i] = d * (float)(q3_k_scale(x[b].scales, i / 16) -
					   32) * (float)(q - 4);
		}
	}
}

static void quantize_q2_k(const float *x, void *dst, int64_t n)
{
	struct loom_block_q2_k *y = dst;
	uint8_t q[LOOM_QK_K], sc[16], m[16];

	for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
		quantize_minmax(x + b * LOOM_QK_K, 16, 3, 15, &y[b].d,
				&y[b].dmin, sc, m, q);
		for (int s = 0; s < 16; s++)
			y[b].scales[s] = (uint8_t)(sc[s] | m[s] << 4);
		pack_crumbs(q, y[b].qs);
	}
}

static void dequantize_q2_k(const void *src, float *y, int64_t n)
{
	const struct loom_block_q2_k *x = src;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++, y += LOOM_QK_K) {
		float d = loom_f16_to_f32(x[b].d);
		float dmin = loom_f16_to_f32(x[b].dmin);

		for (int i = 0; i < LOOM_QK_K; i++) {
			int s = x[b].scales[i / 16];

			y[i] = d * (float)(s & 15) * (float)crumb(x[b].qs, i) -
			       dmin * (float)(s >> 4);
		}
	}
}

/* ------------------------------------------------------------------------
 * IQ4_NL, IQ4_XS and MXFP4: 4-bit codes into a table of 16 values; each
 * value takes the code of the nearest, the step putting the block's
 * value of largest magnitude on the table's (IQ4) or the smallest power
 * of two that keeps the block in range (MXFP4).
 */
static const int8_t iq4nl_values[16] = LOOM_IQ4NL_VALUES;
static const int8_t mxfp4_values[16] = LOOM_MXFP4_VALUES;

/* The code of the table's value nearest x * id; NaN gives code 0. */
static uint8_t nearest_code(const int8_t *values, float x, float id)
{
	float v = x * id, best = INFINITY;
	uint8_t code = 0;

	for (int c = 0; c < 16; c++) {
		float e = fabsf(v - (float)values[c]);

		if (e < best) {
			best = e;
			code = (uint8_t)c;
		}
	}
	return code;
}

static void quantize_codes(const int8_t *values, const float *x, float d,
			   uint8_t *qs)
{
	float id = d != 0.0f ? 1.0f / d : 0.0f;
	uint8_t q[32];

	for (int i = 0; i < 32; i++)
		q[i] = nearest_code(values, x[i], id);
	pack_nibbles(q, qs, NULL);
}

static void dequantize_codes(const int8_t *values, const uint8_t *qs,
			     float d, float *y)
{
	int q[32];

	unpack_nibbles(qs, NULL, q);
	for (int i = 0; i < 32; i++)
		y[i] = d * (float)values[q[i]];
}

static void quantize_iq4_nl(const float *x, void *dst, int64_t n)
{
	struct loom_block_iq4_nl *y = dst;

	for (int64_t b = 0; b < n / 32; b++) {
		const float *xb = x + 32 * b;
		float d = half_round(signed_amax(xb, 32) / -127.0f, &y[b].d);

		quantize_codes(iq4nl_values, xb, d, y[b].qs);
	}
}

static void dequantize_iq4_nl(const void *src, float *y, int64_t n)
{
	const struct loom_block_iq4_nl *x = src;

	for (int64_t b = 0; b < n / 32; b++)
		dequantize_codes(iq4nl_values, x[b].qs,
				 loom_f16_to_f32(x[b].d), y + 32 * b);
}

static int iq4_xs_scale(const struct loom_block_iq4_xs *x, int s)
{
	return (x->scales_l[s / 2] >> (4 * (s % 2)) & 15) |
	       (x->scales_h >> (2 * s) & 3) << 4;
}

static void quantize_iq4_xs(const float *x, void *dst, int64_t n)
{
	struct loom_block_iq4_xs *y = dst;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
		const float *xb = x + b * LOOM_QK_K;
		float step[8], smax = 0.0f;

		for (int s = 0; s < 8; s++) {
			step[s] = signed_amax(xb + 32 * s, 32) / -127.0f;
			if (fabsf(step[s]) > smax)
				smax = fabsf(step[s]);
		}
		float d = half_round(smax / 31.0f, &y[b].d);
		float id = d != 0.0f ? 1.0f / d : 0.0f;

		y[b].scales_h = 0;
		memset(y[b].scales_l, 0, sizeof(y[b].scales_l));
		for (int s = 0; s < 8; s++) {
			int sc = quant_clamp(step[s], id, -32, 31), u = sc + 32;

			y[b].scales_l[s / 2] |= (uint8_t)((u & 15) << (4 * (s % 2)));
			y[b].scales_h |= (uint16_t)((u >> 4) << (2 * s));
			quantize_codes(iq4nl_values, xb + 32 * s,
				       d * (float)sc, y[b].qs + 16 * s);
		}
	}
}

static void dequantize_iq4_xs(const void *src, float *y, int64_t n)
{
	const struct loom_block_iq4_xs *x = src;

	for (int64_t b = 0; b < n / LOOM_QK_K; b++) {
		float d = loom_f16_to_f32(x[b].d);

		for (int s = 0; s < 8; s++)
			dequantize_codes(iq4nl_values, x[b].qs + 16 * s,
					 d * (float)(iq4_xs_scale(x + b, s) - 32),
					 y + b * LOOM_QK_K + 32 * s);
	}
}

/* 2^(e - 128), MXFP4's scale of the doubled codes. */
static float mxfp4_scale(uint8_t e)
{
	return ldexpf(1.0f, (int)e - 128);
}

static void quantize_mxfp4(const float *x, void *dst, int64_t n)
{
	struct loom_block_mxfp4 *y = dst;

	for (int64_t b = 0; b < n / 32; b++) {
		const float *xb = x + 32 * b;
		float amax = 0.0f;
		int e = 0;

		for (int i = 0; i < 32; i++)
			amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
		/* The largest code is 12; NaN keeps e at 0. */
		while (e < 254 && 12.0f * mxfp4_scale((uint8_t)e) < amax)
			e++;
		y[b].e = (uint8_t)e;
		quantize_codes(mxfp4_values, xb, mxfp4_scale((uint8_t)e),
			       y[b].qs);
	}
}

static void dequantize_mxfp4(const void *src, float *y, int64_t n)
{
	const struct loom_block_mxfp4 *x = src;

	for (int64_t b = 0; b < n / 32; b++)
		dequantize_codes(mxfp4_values, x[b].qs, mxfp4_scale(x[b].e),
				 y + 32 * b);
}

/* ------------------------------------------------------------------------
 * F32, F16 and BF16.
 */
static void copy_f32(const void *src, float *dst, int64_t n)
{
	memcpy(dst, src, (size_t)n * sizeof(float));
}

static void f32_copy(const float *src, void *dst, int64_t n)
{
	memcpy(dst, src, (size_t)n * sizeof(float));
}

/* The converters of a 16-bit float type: name_to_f32 and f32_to_name,
 * element by element through to_f32 and from_f32. */
#define HALF_CODEC(name, to_f32, from_f32)                                   \
	static void name##_to_f32(const void *src, float *dst, int64_t n)    \
	{                                                                    \
		const uint16_t *h = src;                                     \
                                                                             \
		for (int64_t i = 0; i < n; i++)                              \
			dst[i] = to_f32(h[i]);                               \
	}                                                                    \
	static void f32_to_##name(const float *src, void *dst, int64_t n)    \
	{                                                                    \
		uint16_t *h = dst;                                           \
                                                                             \
		for (int64_t i = 0; i < n; i++)                              \
			h[i] = from_f32(src[i]);                             \
	}
HALF_CODEC(f16, loom_f16_to_f32, loom_f32_to_f16)
HALF_CODEC(bf16, loom__bf16_to_f32, loom__f32_to_bf16)
#undef HALF_CODEC

/* Every type's entry; I32 has none (it converts only to itself). */
static const struct loom__type_codec codecs[LOOM_TYPE_COUNT] = {
#define CODEC(T, name)                                                       \
	[LOOM_TYPE_##T] = { .to_f32 = dequantize_##name,                     \
			    .from_f32 = quantize_##name }
	[LOOM_TYPE_F32] = { .to_f32 = copy_f32, .from_f32 = f32_copy },
	[LOOM_TYPE_F16] = { .to_f32 = f16_to_f32, .from_f32 = f32_to_f16 },
	[LOOM_TYPE_BF16] = { .to_f32 = bf16_to_f32, .from_f32 = f32_to_bf16 },
	CODEC(Q8_0, q8_0),
	CODEC(Q4_0, q4_0),
	CODEC(Q4_K, q4_k),
	CODEC(Q5_K, q5_k),
	CODEC(Q6_K, q6_k),
	CODEC(Q4_1, q4_1),
	CODEC(Q5_0, q5_0),
	CODEC(Q5_1, q5_1),
	CODEC(Q3_K, q3_k),
	CODEC(Q2_K, q2_k),
	CODEC(IQ4_NL, iq4_nl),
	CODEC(IQ4_XS, iq4_xs),
	CODEC(MXFP4, mxfp4),
#undef CODEC
};

const struct loom__type_codec *loom__type_codec(enum loom_type type)
{
	if ((unsigned)type >= LOOM_TYPE_COUNT || !codecs[type].to_f32)
		return NULL;
	return &codecs[type];
}
