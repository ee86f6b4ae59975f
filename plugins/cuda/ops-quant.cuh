/* SPDX-License-Identifier: MIT */
/* ops-quant.cuh - the quantized blocks of loom.h read on the device: one
 * value, the 32 values of one sub-unit as float (the arithmetic is
 * libcore's, quant.c, operation by operation and never fused, so get_rows
 * and copies give the CPU's values bit for bit), and a sub-unit's dot
 * product with 8-bit activations by dp4a, for the GEMV.  Included by
 * ops-common.cuh; without a CUDA compiler it builds as host C++, which
 * tests/test-gpu-quant.cc checks against libcore's conversions.
 */
#ifndef LOOM_CUDA_OPS_QUANT_CUH
#define LOOM_CUDA_OPS_QUANT_CUH

#include <stdint.h>

#if defined(__CUDACC__) || defined(__HIPCC__)
#define QFN __device__ __forceinline__
#define qmul(a, b) __fmul_rn((a), (b))
#define qsub(a, b) __fsub_rn((a), (b))
#define qhalf(h) __half2float(__ushort_as_half(h))
#define QUNROLL _Pragma("unroll")
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
#define qhalf(h) loom_f16_to_f32(h)
#define QUNROLL
#endif

/* Bytes per block and values per block of the quantized types, as
 * compile-time constants for the kernels' templates. */
template <int T> struct qtraits;
template <> struct qtraits<LOOM_TYPE_Q8_0> {
	enum { blck = 32, size = 34 };
};
template <> struct qtraits<LOOM_TYPE_Q4_0> {
	enum { blck = 32, size = 18 };
};
template <> struct qtraits<LOOM_TYPE_Q4_K> {
	enum { blck = 256, size = 144 };
};
template <> struct qtraits<LOOM_TYPE_Q5_K> {
	enum { blck = 256, size = 176 };
};
template <> struct qtraits<LOOM_TYPE_Q6_K> {
	enum { blck = 256, size = 210 };
};

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

/* Value j of the block at b (any quantized type). */
QFN float quant_value(const uint8_t *b, int type, int j)
{
	switch (type) {
	case LOOM_TYPE_Q8_0:
		return qmul(load_half(b), (float)(int8_t)b[2 + j]);
	case LOOM_TYPE_Q4_0: {
		int q = (b[2 + j % 16] >> (4 * (j / 16))) & 15;

		return qmul(load_half(b), (float)(q - 8));
	}
	case LOOM_TYPE_Q4_K:
	case LOOM_TYPE_Q5_K: {
		const bool five = type == LOOM_TYPE_Q5_K;
		const uint8_t *qs = b + (five ? 48 : 16);
		int s = j / 32, i = j % 32, sc, m;
		int q = (qs[32 * (s / 2) + i] >> (4 * (s & 1))) & 15;

		if (five)
			q |= ((b[16 + i] >> s) & 1) << 4;
		scale_min_k(b + 4, s, &sc, &m);
		return kq_value(load_half(b), sc, q, load_half(b + 2), m);
	}
	case LOOM_TYPE_Q6_K: {
		int h = j / 128, g = j % 128 / 32, l = j % 32;
		int lo = (b[64 * h + 32 * (g & 1) + l] >> (4 * (g >> 1))) & 15;
		int hi = (b[128 + 32 * h + l] >> (2 * g)) & 3;
		float ds = qmul(load_half(b + 208),
				(float)(int8_t)b[192 + j / 16]);

		return qmul(ds, (float)((lo | hi << 4) - 32));
	}
	default:
		return 0.0f;
	}
}

/* The 32 values of sub-unit u (values 32 u .. 32 u + 31) of the block at
 * b into y, for dequantizing whole rows: the scales are read once. */
template <int T>
QFN void quant_unit(const uint8_t *b, int u, float *y)
{
	if (T == LOOM_TYPE_Q8_0) {
		float d = load_half(b);

QUNROLL
		for (int j = 0; j < 32; j++)
			y[j] = qmul(d, (float)(int8_t)b[2 + j]);
	} else if (T == LOOM_TYPE_Q4_0) {
		float d = load_half(b);

QUNROLL
		for (int j = 0; j < 16; j++) {
			y[j] = qmul(d, (float)((b[2 + j] & 15) - 8));
			y[j + 16] = qmul(d, (float)((b[2 + j] >> 4) - 8));
		}
	} else if (T == LOOM_TYPE_Q4_K || T == LOOM_TYPE_Q5_K) {
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
	} else if (T == LOOM_TYPE_Q6_K) {
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

/* The 32 weights of sub-unit u of block b as 8 ints of 4 bytes, in the
 * order of the activations' bytes: q as stored (Q8_0, signed), or its
 * unsigned 4, 5 or 6 bits (the offset and scales come in unit_dot). */
template <int T>
QFN void unit_weights(const uint8_t *b, int u, int *w)
{
	if (T == LOOM_TYPE_Q8_0) {
QUNROLL
		for (int i = 0; i < 8; i++)
			w[i] = load_int_b2(b + 2 + 4 * i);
	} else if (T == LOOM_TYPE_Q4_0) {
QUNROLL
		for (int i = 0; i < 4; i++) {
			int raw = load_int_b2(b + 2 + 4 * i);

			w[i] = raw & 0x0F0F0F0F;
			w[i + 4] = (raw >> 4) & 0x0F0F0F0F;
		}
	} else if (T == LOOM_TYPE_Q4_K || T == LOOM_TYPE_Q5_K) {
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
	} else { /* Q6_K */
		const int h = u / 4, g = u % 4;
		const uint8_t *ql = b + 64 * h + 32 * (g & 1);
		const uint8_t *qh = b + 128 + 32 * h;

QUNROLL
		for (int i = 0; i < 8; i++)
			w[i] = ((load_int_b2(ql + 4 * i) >> (4 * (g >> 1))) &
				0x0F0F0F0F) |
			       (((load_int_b2(qh + 4 * i) >> (2 * g)) &
				 0x03030303) << 4);
	}
}

/* The dot product of sub-unit u of block b (its weights unpacked in w)
 * with one column's 32 quantized activations y of scale dy. */
template <int T>
QFN float unit_dot(const uint8_t *b, int u, const int *w, const int *y,
		   float dy)
{
	if constexpr (T == LOOM_TYPE_Q6_K) {
		/* Two sub-blocks of 16, each with its scale; q - 32. */
		int s0 = 0, s1 = 0, y0 = 0, y1 = 0;

QUNROLL
		for (int i = 0; i < 4; i++) {
			s0 = dot4(w[i], y[i], s0);
			y0 = dot4(0x01010101, y[i], y0);
			s1 = dot4(w[i + 4], y[i + 4], s1);
			y1 = dot4(0x01010101, y[i + 4], y1);
		}
		int sc0 = (int8_t)b[192 + 2 * u], sc1 = (int8_t)b[193 + 2 * u];

		return load_half(b + 208) * dy *
		       (float)(sc0 * (s0 - 32 * y0) + sc1 * (s1 - 32 * y1));
	} else {
		int sumi = 0, sumy = 0;

QUNROLL
		for (int i = 0; i < 8; i++) {
			sumi = dot4(w[i], y[i], sumi);
			sumy = dot4(0x01010101, y[i], sumy);
		}
		if constexpr (T == LOOM_TYPE_Q8_0) {
			return load_half(b) * dy * (float)sumi;
		} else if constexpr (T == LOOM_TYPE_Q4_0) {
			return load_half(b) * dy * (float)(sumi - 8 * sumy);
		} else {
			/* Q4_K, Q5_K: d sc q - dmin m. */
			int sc, m;

			scale_min_k(b + 4, u, &sc, &m);
			return dy * (load_half(b) * (float)(sc * sumi) -
				     load_half(b + 2) * (float)(m * sumy));
		}
	}
}

#endif /* LOOM_CUDA_OPS_QUANT_CUH */
