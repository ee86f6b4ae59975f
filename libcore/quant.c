/* SPDX-License-Identifier: MIT */
/* quant.c - the quantized blocks of loom.h: quantizing F32 to Q8_0,
 * Q4_0, Q4_K, Q5_K and Q6_K and back, and the F32/F16/BF16 cases of the
 * same two conversions (loom_type_convert() in types.c stages through them).
 */
#include "config.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "loom-private.h"

/* ------------------------------------------------------------------------
 * Q8_0: d = max|x| / 127 rounded to half, q = round(x / d).
 */
static void quantize_q8_0(const float *x, struct loom_block_q8_0 *y,
			  int64_t n)
{
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

static void dequantize_q8_0(const struct loom_block_q8_0 *x, float *y,
			    int64_t n)
{
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

static void quantize_q4_0(const float *x, struct loom_block_q4_0 *y,
			  int64_t n)
{
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

static void dequantize_q4_0(const struct loom_block_q4_0 *x, float *y,
			    int64_t n)
{
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

/* Quantizes one super-block of 256 to q[i] in 0..nmax with the scales
 * and mins of a Q4_K/Q5_K block. */
static void quantize_k_minmax(const float *x, int nmax, uint16_t *dh,
			      uint16_t *dminh, uint8_t *scales, uint8_t *q)
{
	float step[8], neg_min[8], smax = 0.0f, mmax = 0.0f;
	uint8_t sc[8], m[8];

	for (int s = 0; s < 8; s++) {
		const float *xs = x + 32 * s;
		float lo = 0.0f, hi = xs[0];

		for (int i = 0; i < 32; i++) {
			lo = xs[i] < lo ? xs[i] : lo;
			hi = xs[i] > hi ? xs[i] : hi;
		}
		step[s] = (hi - lo) / (float)nmax;
		neg_min[s] = -lo;
		smax = step[s] > smax ? step[s] : smax;
		mmax = neg_min[s] > mmax ? neg_min[s] : mmax;
	}
	float d = half_round(smax / 63.0f, dh);
	float dmin = half_round(mmax / 63.0f, dminh);
	float id = d != 0.0f ? 1.0f / d : 0.0f;
	float idmin = dmin != 0.0f ? 1.0f / dmin : 0.0f;

	for (int s = 0; s < 8; s++) {
		sc[s] = (uint8_t)quant_clamp(step[s], id, 0, 63);
		m[s] = (uint8_t)quant_clamp(neg_min[s], idmin, 0, 63);
	}
	pack_scales_k(sc, m, scales);
	for (int s = 0; s < 8; s++) {
		float ds = d * sc[s], off = dmin * m[s];
		float ids = ds != 0.0f ? 1.0f / ds : 0.0f;

		for (int i = 0; i < 32; i++)
			q[32 * s + i] = (uint8_t)quant_clamp(
				x[32 * s + i] + off, ids, 0, nmax);
	}
}

static void quantize_q4_k(const float *x, struct loom_block_q4_k *y,
			  int64_t n)
{
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

static void quantize_q5_k(const float *x, struct loom_block_q5_k *y,
			  int64_t n)
{
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

static void dequantize_q4_k(const struct loom_block_q4_k *x, float *y,
			    int64_t n)
{
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

static void dequantize_q5_k(const struct loom_block_q5_k *x, float *y,
			    int64_t n)
{
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
static void quantize_q6_k(const float *x, struct loom_block_q6_k *y,
			  int64_t n)
{
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

static void dequantize_q6_k(const struct loom_block_q6_k *x, float *y,
			    int64_t n)
{
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

void loom__dequantize(enum loom_type type, const void *src, float *dst,
		   int64_t n)
{
	const uint16_t *h = src;

	switch (type) {
	case LOOM_TYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case LOOM_TYPE_F16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = loom_f16_to_f32(h[i]);
		break;
	case LOOM_TYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			dst[i] = loom_bf16_to_f32(h[i]);
		break;
	case LOOM_TYPE_Q8_0:
		dequantize_q8_0(src, dst, n);
		break;
	case LOOM_TYPE_Q4_0:
		dequantize_q4_0(src, dst, n);
		break;
	case LOOM_TYPE_Q4_K:
		dequantize_q4_k(src, dst, n);
		break;
	case LOOM_TYPE_Q5_K:
		dequantize_q5_k(src, dst, n);
		break;
	case LOOM_TYPE_Q6_K:
		dequantize_q6_k(src, dst, n);
		break;
	default:
		assert(!"to_f32: type not convertible");
	}
}

void loom__quantize(enum loom_type type, const float *src, void *dst,
		     int64_t n)
{
	uint16_t *h = dst;

	switch (type) {
	case LOOM_TYPE_F32:
		memcpy(dst, src, (size_t)n * sizeof(float));
		break;
	case LOOM_TYPE_F16:
		for (int64_t i = 0; i < n; i++)
			h[i] = loom_f32_to_f16(src[i]);
		break;
	case LOOM_TYPE_BF16:
		for (int64_t i = 0; i < n; i++)
			h[i] = loom_f32_to_bf16(src[i]);
		break;
	case LOOM_TYPE_Q8_0:
		quantize_q8_0(src, dst, n);
		break;
	case LOOM_TYPE_Q4_0:
		quantize_q4_0(src, dst, n);
		break;
	case LOOM_TYPE_Q4_K:
		quantize_q4_k(src, dst, n);
		break;
	case LOOM_TYPE_Q5_K:
		quantize_q5_k(src, dst, n);
		break;
	case LOOM_TYPE_Q6_K:
		quantize_q6_k(src, dst, n);
		break;
	default:
		assert(!"from_f32: type not convertible");
	}
}

