/* SPDX-License-Identifier: MIT */
/* ops-quant.cuh - the quantized blocks of loom.h read on the device: one
 * value, the 32 values of one sub-unit as float (the arithmetic is
 * libcore's, quant.c, operation by operation and never fused, so get_rows
 * and copies give the CPU's values bit for bit), and a sub-unit's dot
 * product with 8-bit activations by dp4a, for the GEMV: four templates
 * on the type, each with a branch per type of cuda-types.h's list.
 * Included by ops-common.cuh; without a CUDA compiler it builds as host
 * C++, which tests/test-gpu-quant.cc checks against libcore's
 * conversions.
 */
#ifndef LOOM_CUDA_OPS_QUANT_CUH
#define LOOM_CUDA_OPS_QUANT_CUH

#include <stdint.h>
#include <string.h>

#include "cuda-types.h"

#if defined(__CUDACC__) || defined(__HIPCC__)
#define QFN __device__ __forceinline__
#define qmul(a, b) __fmul_rn((a), (b))
#define qsub(a, b) __fsub_rn((a), (b))
#define qadd(a, b) __fadd_rn((a), (b))
#define qhalf(h) __half2float(__ushort_as_half(h))
#define qbits(u) __uint_as_float(u)
#define QUNROLL _Pragma("unroll")
/* Tables in global memory, read through the cache: the lanes' indices
 * differ, which constant memory would serialize. */
#define QTABLE static __device__ const
#else
#define QFN static inline
/* Each product and difference rounded on its own, as on the device. */
static inline float qmul(float a, float b)
{
	volatile float r = a * b;

	return r;
}

static inline float qsub(float a, float b)
{
	volatile float r = a - b;

	return r;
}
static inline float qadd(float a, float b)
{
	volatile float r = a + b;

	return r;
}

static inline float qbits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}
#define qhalf(h) loom_f16_to_f32(h)
#define QUNROLL
#define QTABLE static const
#endif

/* Bytes per block and values per block of every type, as compile-time
 * constants for the kernels' templates (loom.h's table). */
template <int T> struct qtraits;
#define QTRAITS_(name, str, nblck, nsize)                                  \
	template <> struct qtraits<LOOM_TYPE_##name> {                     \
		enum { blck = nblck, size = nsize };                       \
	};
LOOM_TYPE_MAP(QTRAITS_)
#undef QTRAITS_

/* The code tables of IQ4_NL/IQ4_XS and MXFP4 (loom.h). */
QTABLE int8_t kv_iq4nl[16] = LOOM_IQ4NL_VALUES;
QTABLE int8_t kv_mxfp4[16] = LOOM_MXFP4_VALUES;

/* The half at p (2-byte aligned) as float. */
QFN float load_half(const uint8_t *p)
{
	return qhalf(*(const uint16_t *)p);
}

/* Four bytes at a 2-byte aligned p as one little-endian int. */
QFN int load_int_b2(const uint8_t *p)
{
	const uint16_t *h = (const uint16_t *)p;

	return (int)((uint32_t)h[0] | (uint32_t)h[1] << 16);
}

/* Four bytes at any p as one little-endian int (MXFP4's 17-byte blocks). */
QFN int load_int_b1(const uint8_t *p)
{
	return (int)((uint32_t)p[0] | (uint32_t)p[1] << 8 |
		     (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
}

/* Sub-block s's 6-bit scale and min of a Q4_K/Q5_K block (loom.h). */
QFN void scale_min_k(const uint8_t *q, int s, int *sc, int *m)
{
	if (s < 4) {
		*sc = q[s] & 63;
		*m = q[s + 4] & 63;
	} else {
		*sc = (q[s + 4] & 15) | (q[s - 4] >> 6) << 4;
		*m = (q[s + 4] >> 4) | (q[s] >> 6) << 4;
	}
}

/* d * sc * q - dmin * m as quant.c evaluates it. */
QFN float kq_value(float d, int sc, int q, float dmin, int m)
{
	return qsub(qmul(qmul(d, (float)sc), (float)q), qmul(dmin, (float)m));
}

/* Value j (0..31) of Q4_0's nibble layout: j in the low nibble of qs[j],
 * j + 16 in the high. */
QFN int nibble(const uint8_t *qs, int j)
{
	return (qs[j % 16] >> (4 * (j / 16))) & 15;
}

/* Bit j of the 32-bit little-endian word at qh (Q5_0/Q5_1's fifth bits). */
QFN int bit32(const uint8_t *qh, int j)
{
	return (qh[j / 8] >> (j % 8)) & 1;
}

/* Value i's 2 low bits in Q2_K/Q3_K: bits 2 g of qs[32 h + l], i =
 * 128 h + 32 g + l. */
QFN int crumb(const uint8_t *qs, int i)
{
	return (qs[32 * (i / 128) + i % 32] >> (2 * (i % 128 / 32))) & 3;
}

/* Q3_K's 6-bit scale s (unsigned, offset 32) from its 12 bytes. */
QFN int q3_k_scale(const uint8_t *sc, int s)
{
	int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;

	return lo | ((sc[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
}

/* IQ4_XS's 6-bit scale of sub-block s (offset 32) of the block at b. */
QFN int iq4_xs_scale(const uint8_t *b, int s)
{
	int h = *(const uint16_t *)(b + 2);

	return ((b[4 + s / 2] >> (4 * (s % 2))) & 15) |
	       ((h >> (2 * s)) & 3) << 4;
}

/* 2^(e - 128), MXFP4's scale of its doubled codes, built from its bits
 * (e 0 and 1 give subnormals). */
QFN float mxfp4_scale(int e)
{
	return qbits(e >= 2 ? (uint32_t)(e - 1) << 23 : 0x00200000u << e);
}

/* Value j of the block at b of type T, as libcore's quant.c computes it. */
template <int T>
QFN float quant_value(const uint8_t *b, int j)
{
	if constexpr (T == LOOM_TYPE_Q8_0) {
		return qmul(load_half(b), (float)(int8_t)b[2 + j]);
	} else if constexpr (T == LOOM_TYPE_Q4_0) {
		return qmul(load_half(b), (float)(nibble(b + 2, j) - 8));
	} else if constexpr (T == LOOM_TYPE_Q4_1) {
		return qadd(qmul(load_half(b), (float)nibble(b + 4, j)),
			    load_half(b + 2));
	} else if constexpr (T == LOOM_TYPE_Q5_0) {
		int q = nibble(b + 6, j) | bit32(b + 2, j) << 4;

		return qmul(load_half(b), (float)(q - 16));
	} else if constexpr (T == LOOM_TYPE_Q5_1) {
		int q = nibble(b + 8, j) | bit32(b + 4, j) << 4;

		return qadd(qmul(load_half(b), (float)q), load_half(b + 2));
	} else if constexpr (T == LOOM_TYPE_Q2_K) {
		int s = b[j / 16];

		return kq_value(load_half(b + 80), s & 15, crumb(b + 16, j),
				load_half(b + 82), s >> 4);
	} else if constexpr (T == LOOM_TYPE_Q3_K) {
		int q = crumb(b + 32, j) | ((b[j % 32] >> (j / 32)) & 1) << 2;
		float ds = qmul(load_half(b + 108),
				(float)(q3_k_scale(b + 96, j / 16) - 32));

		return qmul(ds, (float)(q - 4));
	} else if constexpr (T == LOOM_TYPE_Q4_K || T == LOOM_TYPE_Q5_K) {
		const bool five = T == LOOM_TYPE_Q5_K;
		const uint8_t *qs = b + (five ? 48 : 16);
		int s = j / 32, i = j % 32, sc, m;
		int q = (qs[32 * (s / 2) + i] >> (4 * (s & 1))) & 15;

		if (five)
			q |= ((b[16 + i] >> s) & 1) << 4;
		scale_min_k(b + 4, s, &sc, &m);
		return kq_value(load_half(b), sc, q, load_half(b + 2), m);
	} else if constexpr (T == LOOM_TYPE_Q6_K) {
		int h = j / 128, g = j % 128 / 32, l = j % 32;
		int lo = (b[64 * h + 32 * (g & 1) + l] >> (4 * (g >> 1))) & 15;
		int hi = (b[128 + 32 * h + l] >> (2 * g)) & 3;
		float ds = qmul(load_half(b + 208),
				(float)(int8_t)b[192 + j / 16]);

		return qmul(ds, (float)((lo | hi << 4) - 32));
	} else if constexpr (T == LOOM_TYPE_IQ4_NL) {
		return qmul(load_half(b), (float)kv_iq4nl[nibble(b + 2, j)]);
	} else if constexpr (T == LOOM_TYPE_IQ4_XS) {
		int s = j / 32;
		float ds = qmul(load_half(b), (float)(iq4_xs_scale(b, s) - 32));

		return qmul(ds, (float)kv_iq4nl[nibble(b + 8 + 16 * s,
							j % 32)]);
	} else {
		static_assert(T == LOOM_TYPE_MXFP4, "a type without decoder");
		return qmul(mxfp4_scale(b[0]),
			    (float)kv_mxfp4[nibble(b + 1, j)]);
	}
}

/* The 32 values of sub-unit u (values 32 u .. 32 u + 31) of the block at
 * b into y, for dequantizing whole rows: the scales are read once. */
template <int T>
QFN void quant_unit(const uint8_t *b, int u, float *y)
{
	if constexpr (T == LOOM_TYPE_Q8_0) {
		float d = load_half(b);

QUNROLL
		for (int j = 0; j < 32; j++)
			y[j] = qmul(d, (float)(int8_t)b[2 + j]);
	} else if constexpr (T == LOOM_TYPE_Q4_0) {
		float d = load_half(b);

QUNROLL
		for (int j = 0; j < 16; j++) {
			y[j] = qmul(d, (float)((b[2 + j] & 15) - 8));
			y[j + 16] = qmul(d, (float)((b[2 + j] >> 4) - 8));
		}
	} else if constexpr (T == LOOM_TYPE_Q4_K || T == LOOM_TYPE_Q5_K) {
		const bool five = T == LOOM_TYPE_Q5_K;
		const uint8_t *qs = b + (five ? 48 : 16) + 32 * (u / 2);
		float d = load_half(b), dmin = load_half(b + 2);
		int sc, m, shift = 4 * (u & 1);

		scale_min_k(b + 4, u, &sc, &m);
QUNROLL
		for (int i = 0; i < 32; i++) {
			int q = (qs[i] >> shift) & 15;

			if (five)
				q |= ((b[16 + i] >> u) & 1) << 4;
			y[i] = kq_value(d, sc, q, dmin, m);
		}
	} else if constexpr (T == LOOM_TYPE_Q6_K) {
		int h = u / 4, g = u % 4;
		const uint8_t *ql = b + 64 * h + 32 * (g & 1);
		const uint8_t *qh = b + 128 + 32 * h;
		float d = load_half(b + 208);

QUNROLL
		for (int l = 0; l < 32; l++) {
			int lo = (ql[l] >> (4 * (g >> 1))) & 15;
			int hi = (qh[l] >> (2 * g)) & 3;
			float ds = qmul(d, (float)(int8_t)b[192 + 2 * u +
							    l / 16]);

			y[l] = qmul(ds, (float)((lo | hi << 4) - 32));
		}
	} else {
		/* The other types value by value (y is the caller's
		 * registers: the scales' loads are shared). */
QUNROLL
		for (int j = 0; j < 32; j++)
			y[j] = quant_value<T>(b, 32 * u + j);
	}
}

/* a . b over four signed bytes each, plus c. */
QFN int dot4(int a, int b, int c)
{
#if defined(__CUDACC__) && !defined(LOOM_HIP)
	return __dp4a(a, b, c);
#else
	for (int s = 0; s < 32; s += 8)
		c += (int)(int8_t)(a >> s) * (int)(int8_t)(b >> s);
	return c;
#endif
}

/* Bytes s[2:0], s[6:4], s[10:8], s[14:12] of the eight bytes y:x (x the
 * low four), as the device's __byte_perm. */
QFN uint32_t qperm(uint32_t x, uint32_t y, uint32_t s)
{
#if defined(__CUDACC__) || defined(__HIPCC__)
	return __byte_perm(x, y, s);
#else
	uint64_t v = (uint64_t)y << 32 | x;
	uint32_t r = 0;

	for (int n = 0; n < 4; n++)
		r |= (uint32_t)(uint8_t)(v >> (8 * ((s >> (4 * n)) & 7)))
		     << (8 * n);
	return r;
#endif
}

/* A table of 16 signed bytes as four little-endian words, compile-time
 * constants (the GEMV's lookups stay in registers). */
constexpr int8_t qv_iq4nl[16] = LOOM_IQ4NL_VALUES;
constexpr int8_t qv_mxfp4[16] = LOOM_MXFP4_VALUES;

constexpr uint32_t qpack4(const int8_t *v, int i)
{
	return (uint32_t)(uint8_t)v[i] | (uint32_t)(uint8_t)v[i + 1] << 8 |
	       (uint32_t)(uint8_t)v[i + 2] << 16 |
	       (uint32_t)(uint8_t)v[i + 3] << 24;
}

template <bool MX> struct qtable4 {
	static constexpr const int8_t *v = MX ? qv_mxfp4 : qv_iq4nl;
	static constexpr uint32_t w0 = qpack4(v, 0), w1 = qpack4(v, 4);
	static constexpr uint32_t w2 = qpack4(v, 8), w3 = qpack4(v, 12);
};

/* The four nibbles (one a byte) of x through the IQ4 (MX false) or MXFP4
 * table: two byte permutes, entries 0-7 and 8-15, and bit 3 of each
 * nibble picks one. */
template <bool MX>
QFN int table4(int x)
{
	typedef qtable4<MX> t;
	const uint32_t sel = (x & 0x7) | ((x >> 4) & 0x70) |
			     ((x >> 8) & 0x700) | ((x >> 12) & 0x7000);
	const uint32_t lo = qperm(t::w0, t::w1, sel);
	const uint32_t hi = qperm(t::w2, t::w3, sel);
	const uint32_t m = ((uint32_t)(x >> 3) & 0x01010101u) * 0xFFu;

	return (int)((lo & ~m) | (hi & m));
}

/* Four bits (3..0) of x spread to bit 0 of four bytes. */
QFN int spread4(int x)
{
	return (x & 1) | (x & 2) << 7 | (x & 4) << 14 | (x & 8) << 21;
}

/* The 32 nibbles of Q4_0's layout at qs as 8 ints of 4 bytes, values
 * 4 i .. 4 i + 3 in w[i]. */
template <bool B1>
QFN void nibbles32(const uint8_t *qs, int *w)
{
QUNROLL
	for (int i = 0; i < 4; i++) {
		int raw = B1 ? load_int_b1(qs + 4 * i) : load_int_b2(qs + 4 * i);

		w[i] = raw & 0x0F0F0F0F;
		w[i + 4] = (raw >> 4) & 0x0F0F0F0F;
	}
}

/* The 32 weights of sub-unit u of block b as 8 ints of 4 bytes, in the
 * order of the activations' bytes: q as stored (Q8_0, signed), the codes'
 * table values (IQ4, MXFP4), or the unsigned bits (the offsets and scales
 * come in unit_dot). */
template <int T>
QFN void unit_weights(const uint8_t *b, int u, int *w)
{
	if constexpr (T == LOOM_TYPE_Q8_0) {
QUNROLL
		for (int i = 0; i < 8; i++)
			w[i] = load_int_b2(b + 2 + 4 * i);
	} else if constexpr (T == LOOM_TYPE_Q4_0 || T == LOOM_TYPE_Q4_1) {
		nibbles32<false>(b + (T == LOOM_TYPE_Q4_0 ? 2 : 4), w);
	} else if constexpr (T == LOOM_TYPE_Q5_0 || T == LOOM_TYPE_Q5_1) {
		const int off = T == LOOM_TYPE_Q5_0 ? 2 : 4;
		const int h = load_int_b2(b + off);

		nibbles32<false>(b + off + 4, w);
QUNROLL
		for (int i = 0; i < 8; i++)
			w[i] |= spread4((h >> (4 * i)) & 15) << 4;
	} else if constexpr (T == LOOM_TYPE_Q2_K || T == LOOM_TYPE_Q3_K) {
		const bool three = T == LOOM_TYPE_Q3_K;
		const uint8_t *qs = b + (three ? 32 : 16) + 32 * (u / 4);
		const int shift = 2 * (u % 4);

QUNROLL
		for (int i = 0; i < 8; i++) {
			w[i] = (load_int_b2(qs + 4 * i) >> shift) & 0x03030303;
			if (three)
				w[i] |= ((load_int_b2(b + 4 * i) >> u) &
					 0x01010101) << 2;
		}
	} else if constexpr (T == LOOM_TYPE_Q4_K || T == LOOM_TYPE_Q5_K) {
		const bool five = T == LOOM_TYPE_Q5_K;
		const uint8_t *qs = b + (five ? 48 : 16) + 32 * (u / 2);
		const int shift = 4 * (u & 1);

QUNROLL
		for (int i = 0; i < 8; i++) {
			w[i] = (load_int_b2(qs + 4 * i) >> shift) & 0x0F0F0F0F;
			if (five)
				w[i] |= ((load_int_b2(b + 16 + 4 * i) >> u) &
					 0x01010101) << 4;
		}
	} else if constexpr (T == LOOM_TYPE_Q6_K) {
		const int h = u / 4, g = u % 4;
		const uint8_t *ql = b + 64 * h + 32 * (g & 1);
		const uint8_t *qh = b + 128 + 32 * h;

QUNROLL
		for (int i = 0; i < 8; i++)
			w[i] = ((load_int_b2(ql + 4 * i) >> (4 * (g >> 1))) &
				0x0F0F0F0F) |
			       (((load_int_b2(qh + 4 * i) >> (2 * g)) &
				 0x03030303) << 4);
	} else {
		/* IQ4_NL, IQ4_XS (sub-unit u's 16 bytes), MXFP4 (byte
		 * aligned): codes through their table. */
		const bool mx = T == LOOM_TYPE_MXFP4;

		if (mx)
			nibbles32<true>(b + 1, w);
		else
			nibbles32<false>(b + (T == LOOM_TYPE_IQ4_NL ?
					      2 : 8 + 16 * u), w);
QUNROLL
		for (int i = 0; i < 8; i++)
			w[i] = table4<mx>(w[i]);
	}
}

/* sum over 16 values (4 ints) of w y and of y, from int i0. */
QFN void dot16(const int *w, const int *y, int i0, int *swy, int *sy)
{
	int s = 0, t = 0;

QUNROLL
	for (int i = i0; i < i0 + 4; i++) {
		s = dot4(w[i], y[i], s);
		t = dot4(0x01010101, y[i], t);
	}
	*swy = s;
	*sy = t;
}

/* The dot product of sub-unit u of block b (its weights unpacked in w)
 * with one column's 32 quantized activations y of scale dy. */
template <int T>
QFN float unit_dot(const uint8_t *b, int u, const int *w, const int *y,
		   float dy)
{
	int s0, s1, y0, y1;

	/* Two halves of 16: the K-quants of 16-value sub-blocks have a
	 * scale each. */
	dot16(w, y, 0, &s0, &y0);
	dot16(w, y, 4, &s1, &y1);
	const int sumi = s0 + s1, sumy = y0 + y1;

	if constexpr (T == LOOM_TYPE_Q6_K) {
		int sc0 = (int8_t)b[192 + 2 * u], sc1 = (int8_t)b[193 + 2 * u];

		return load_half(b + 208) * dy *
		       (float)(sc0 * (s0 - 32 * y0) + sc1 * (s1 - 32 * y1));
	} else if constexpr (T == LOOM_TYPE_Q3_K) {
		int sc0 = q3_k_scale(b + 96, 2 * u) - 32;
		int sc1 = q3_k_scale(b + 96, 2 * u + 1) - 32;

		return load_half(b + 108) * dy *
		       (float)(sc0 * (s0 - 4 * y0) + sc1 * (s1 - 4 * y1));
	} else if constexpr (T == LOOM_TYPE_Q2_K) {
		int a0 = b[2 * u], a1 = b[2 * u + 1];

		return dy * (load_half(b + 80) *
				     (float)((a0 & 15) * s0 + (a1 & 15) * s1) -
			     load_half(b + 82) *
				     (float)((a0 >> 4) * y0 + (a1 >> 4) * y1));
	} else if constexpr (T == LOOM_TYPE_Q8_0 || T == LOOM_TYPE_IQ4_NL) {
		return load_half(b) * dy * (float)sumi;
	} else if constexpr (T == LOOM_TYPE_Q4_0) {
		return load_half(b) * dy * (float)(sumi - 8 * sumy);
	} else if constexpr (T == LOOM_TYPE_Q5_0) {
		return load_half(b) * dy * (float)(sumi - 16 * sumy);
	} else if constexpr (T == LOOM_TYPE_Q4_1 || T == LOOM_TYPE_Q5_1) {
		/* d q + m. */
		return dy * (load_half(b) * (float)sumi +
			     load_half(b + 2) * (float)sumy);
	} else if constexpr (T == LOOM_TYPE_IQ4_XS) {
		return load_half(b) * (float)(iq4_xs_scale(b, u) - 32) * dy *
		       (float)sumi;
	} else if constexpr (T == LOOM_TYPE_MXFP4) {
		return mxfp4_scale(b[0]) * dy * (float)sumi;
	} else {
		/* Q4_K, Q5_K: d sc q - dmin m. */
		int sc, m;

		scale_min_k(b + 4, u, &sc, &m);
		return dy * (load_half(b) * (float)(sc * sumi) -
			     load_half(b + 2) * (float)(m * sumy));
	}
}

#endif /* LOOM_CUDA_OPS_QUANT_CUH */
