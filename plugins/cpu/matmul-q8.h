/* SPDX-License-Identifier: MIT */
/* matmul-q8.h - what the int8 kernels share: the quantized activations'
 * layout, the weights' blocks as unsigned bytes, and the byte dot
 * product.  matmul-q8.c quantizes activations, holds the generic tile
 * and chooses a kernel; matmul-q8v.c reads weights straight from their
 * blocks for decode, matmul-w.c from the weight buffer's groups;
 * matmul-q8p.c repacks rows into panels for wide products.
 */
#ifndef LOOM_CPU_MATMUL_Q8_H
#define LOOM_CPU_MATMUL_Q8_H

#include "cpu-matmul.h"

#if defined(CPU_HAVE_Q8)

#include "cpu-simd.h"

#define INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------------
 * Activations, one row (a column of the product) of k values: per block
 * of 32, d = max|x| / 127 and q = round(x / d); per 16 and per 32
 * values, the sums of q times d (s, s32), which the weights' offsets
 * multiply, and per 32 Q4_0's offset itself (o32).
 */
struct qcol {
	const int8_t *qs;
	const float *d;     /* per 32 */
	const float *s;     /* per 16: d * sum(q) */
	const float *s32;   /* per 32: d * sum(q) */
	const int32_t *o32; /* per 32: -8 * sum(q), Q4_0's offset */
};

static inline struct qcol col_at(const char *p, int64_t k)
{
	const float *d = (const float *)(p + k);
	struct qcol c = {
		.qs = (const int8_t *)p,
		.d = d,
		.s = d + k / 32,
		.s32 = d + k / 32 + k / 16,
		.o32 = (const int32_t *)(d + 2 * (k / 32) + k / 16),
	};

	return c;
}

/* The F32 value of every F16 bit pattern, filled on the first call: the
 * decode kernels read their blocks' F16 scales through it, a load where a
 * conversion would take the shuffle port. */
const float *cpu_q8_f16_table(void);

/* ------------------------------------------------------------------------
 * Weights, one 32-value block j of a row at a time: its values as
 * unsigned bytes u, and per half block of 16 a scale sc and an offset o
 * with value = sc * u - o.  Q8_0 is the exception: its bytes are signed
 * and its offset zero.  The scales and offsets of a whole row come first
 * (cpu_q8_row_scales), the values block by block (block_u8).
 */

/* The 6-bit scale and min of sub-block s of a Q4_K/Q5_K block. */
static inline void scale_min_k(const uint8_t *q, int s, int *sc, int *m)
{
	if (s < 4) {
		*sc = q[s] & 63;
		*m = q[s + 4] & 63;
	} else {
		*sc = (q[s + 4] & 15) | (q[s - 4] >> 6) << 4;
		*m = (q[s + 4] >> 4) | (q[s] >> 6) << 4;
	}
}

/* sc[i], o[i] for each 16 values i of a row of k values. */

/* sc[i], o[i] for each 16 values i of a row of k values (see above). */
void cpu_q8_row_scales(enum loom_type type, const char *row, int64_t k,
		       float *sc, float *o);

/* v's bits moved up (by > 0) or down by |by| within 16-bit lanes. */
INLINE __m256i shift16(__m256i v, const int by)
{
	return by > 0 ? _mm256_slli_epi16(v, by) :
	       by < 0 ? _mm256_srli_epi16(v, -by) : v;
}

/* The 32 nibbles of Q4_0's layout at qs as bytes: the 16 bytes in the
 * lower half, shifted by 4 in the upper (a variable shift across halves
 * costs Zen 1 more than the 128-bit shift and the insert). */
INLINE __m256i nibbles32(const uint8_t *qs)
{
	__m128i w = _mm_loadu_si128((const __m128i *)qs);

	return _mm256_and_si256(_mm256_inserti128_si256(
		_mm256_castsi128_si256(w), _mm_srli_epi16(w, 4), 1),
		_mm256_set1_epi8(15));
}

/* 0xff in byte i where bit i of the 32-bit word at p is set. */
INLINE __m256i bit_bytes(const uint8_t *p)
{
	uint32_t m;

	memcpy(&m, p, 4);
#if defined(__AVX512BW__) && defined(__AVX512VL__)
	return _mm256_movm_epi8(m);
#else
	/* Byte i takes byte i / 8 of m and keeps bit i % 8. */
	const __m256i spread = _mm256_setr_epi64x(
		0, 0x0101010101010101, 0x0202020202020202,
		0x0303030303030303);
	const __m256i bit = _mm256_set1_epi64x((int64_t)0x8040201008040201);
	__m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)m), spread);

	return _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
#endif
}

/* Codes 0-15 (bytes of u) looked up in a table of 16 signed bytes. */
INLINE __m256i lookup16(__m256i u, const int8_t *table)
{
	return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(
		_mm_loadu_si128((const __m128i *)table)), u);
}

/* The tables of IQ4_NL/IQ4_XS and MXFP4 (loom.h). */
static const int8_t cpu_iq4nl_values[16] = LOOM_IQ4NL_VALUES;
static const int8_t cpu_mxfp4_values[16] = LOOM_MXFP4_VALUES;

/* The 2-bit fields of Q2_K/Q3_K's 32-value block t (of 8) at qs as
 * bytes. */
INLINE __m256i crumbs32(const uint8_t *qs, int t)
{
	__m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (t / 4)));

	return _mm256_and_si256(shift16(q, -2 * (t % 4)), _mm256_set1_epi8(3));
}

/* The 32 values of block j as bytes (see above). */
INLINE __m256i block_u8(const enum loom_type type, const char *row,
			int64_t j)
{
	const __m256i m4 = _mm256_set1_epi8(15);

	if (type == LOOM_TYPE_Q8_0) {
		const struct loom_block_q8_0 *x =
			(const struct loom_block_q8_0 *)row + j;

		return _mm256_loadu_si256((const __m256i *)x->qs);
	}
	if (type == LOOM_TYPE_Q4_0)
		return nibbles32(((const struct loom_block_q4_0 *)row + j)->qs);
	if (type == LOOM_TYPE_Q4_1)
		return nibbles32(((const struct loom_block_q4_1 *)row + j)->qs);
	if (type == LOOM_TYPE_Q5_0) {
		const struct loom_block_q5_0 *x =
			(const struct loom_block_q5_0 *)row + j;

		return _mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(
			bit_bytes(x->qh), _mm256_set1_epi8(16)));
	}
	if (type == LOOM_TYPE_Q5_1) {
		const struct loom_block_q5_1 *x =
			(const struct loom_block_q5_1 *)row + j;

		return _mm256_or_si256(nibbles32(x->qs), _mm256_and_si256(
			bit_bytes(x->qh), _mm256_set1_epi8(16)));
	}
	if (type == LOOM_TYPE_IQ4_NL)
		return lookup16(nibbles32(((const struct loom_block_iq4_nl *)
					   row + j)->qs), cpu_iq4nl_values);
	if (type == LOOM_TYPE_MXFP4)
		return lookup16(nibbles32(((const struct loom_block_mxfp4 *)
					   row + j)->qs), cpu_mxfp4_values);
	if (type == LOOM_TYPE_IQ4_XS) {
		const struct loom_block_iq4_xs *x =
			(const struct loom_block_iq4_xs *)row + j / 8;

		return lookup16(nibbles32(x->qs + 16 * (j % 8)),
				cpu_iq4nl_values);
	}
	if (type == LOOM_TYPE_Q2_K)
		return crumbs32(((const struct loom_block_q2_k *)row +
				 j / 8)->qs, (int)(j % 8));
	if (type == LOOM_TYPE_Q3_K) {
		const struct loom_block_q3_k *x =
			(const struct loom_block_q3_k *)row + j / 8;
		int t = (int)(j % 8);
		__m256i h = _mm256_loadu_si256((const __m256i *)x->hmask);

		/* Bit t of each byte of hmask to bit 2. */
		return _mm256_or_si256(crumbs32(x->qs, t), _mm256_and_si256(
			shift16(h, 2 - t), _mm256_set1_epi8(4)));
	}
	if (type == LOOM_TYPE_Q4_K) {
		const struct loom_block_q4_k *x =
			(const struct loom_block_q4_k *)row + j / 8;
		int s = (int)(j % 8);
		__m256i q = _mm256_loadu_si256(
			(const __m256i *)(x->qs + 32 * (s / 2)));

		return _mm256_and_si256(s & 1 ? _mm256_srli_epi16(q, 4) : q,
					m4);
	}
	if (type == LOOM_TYPE_Q5_K) {
		const struct loom_block_q5_k *x =
			(const struct loom_block_q5_k *)row + j / 8;
		int s = (int)(j % 8);
		__m256i q = _mm256_loadu_si256(
			(const __m256i *)(x->qs + 32 * (s / 2)));
		__m256i h = _mm256_loadu_si256((const __m256i *)x->qh);

		/* Bit s of each byte of qh to bit 4, the fifth bit. */
		q = _mm256_and_si256(s & 1 ? _mm256_srli_epi16(q, 4) : q, m4);
		return _mm256_or_si256(q, _mm256_and_si256(
			shift16(h, 4 - s), _mm256_set1_epi8(16)));
	}
	/* Q6_K */
	{
		const struct loom_block_q6_k *x =
			(const struct loom_block_q6_k *)row + j / 8;
		int t = (int)(j % 8), h = t / 4, g = t % 4;
		__m256i lo = _mm256_loadu_si256(
			(const __m256i *)(x->ql + 64 * h + 32 * (g & 1)));
		__m256i hi = _mm256_loadu_si256(
			(const __m256i *)(x->qh + 32 * h));

		lo = _mm256_and_si256(g >> 1 ? _mm256_srli_epi16(lo, 4) : lo,
				      m4);
		/* Bits 2g, 2g + 1 of each byte of qh to bits 4, 5. */
		return _mm256_or_si256(lo, _mm256_and_si256(
			shift16(hi, 4 - 2 * g), _mm256_set1_epi8(0x30)));
	}
}

/* Bytes of one block: 32 values, a super-block 256. */
INLINE size_t block_bytes(const enum loom_type type)
{
	return cpu_types[type].bytes;
}

/* Bytes of a row before its 32-value block j, for prefetching. */
INLINE size_t block_offset(const enum loom_type type, int64_t j)
{
	return (size_t)j * block_bytes(type) / (cpu_types[type].block / 32);
}

/* ------------------------------------------------------------------------
 * The vector unit of a tile: QB blocks of 32 values per integer vector
 * QI (two with AVX-512, one with AVX2), its products widened to VF
 * (cpu-simd.h), a lane per 4 values.  With two blocks per vector a row
 * of an odd number of blocks ends with a half step: the second block
 * reads as zeros.
 */
#if defined(__AVX512BW__)
#define QB 2
#define QI __m512i
#define QNEG __mmask64 /* Q8_0: which weights are negative */
#else
#define QB 1
#define QI __m256i
#define QNEG __m256i
#endif

/* Dot products of bytes: acc + sum of u[i] * s[i] over each 4 bytes, u
 * unsigned, s signed.  vpdpbusd where the CPU has it (written as
 * assembly, so the rest of the variant needs no extra target); else
 * pair products to 16 bits, which cannot saturate here (u < 64, or the
 * signs moved to s for Q8_0), summed to 32 bits. */
INLINE __m256i dot_u8s8_256(__m256i acc, __m256i u, __m256i s,
			    const bool vnni)
{
	if (vnni) {
#if defined(__AVX512VL__)
		__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
#else
		__asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(u),
			"x"(s));
#endif
		return acc;
	}
	return _mm256_add_epi32(acc, _mm256_madd_epi16(
		_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

/* The same in a vector QI. */
INLINE QI dot_u8s8(QI acc, QI u, QI s, const bool vnni)
{
#if QB == 2
	if (vnni) {
		__asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "v"(s));
		return acc;
	}
	return _mm512_add_epi32(acc, _mm512_madd_epi16(
		_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#else
	return dot_u8s8_256(acc, u, s, vnni);
#endif
}

/* Quantized activations of the blocks at qs. */
INLINE QI q_acts(const int8_t *qs, const bool half)
{
#if QB == 2
	return half ? _mm512_zextsi256_si512(_mm256_loadu_si256(
			      (const __m256i *)qs)) :
		      _mm512_loadu_si512((const void *)qs);
#else
	(void)half;
	return _mm256_loadu_si256((const __m256i *)qs);
#endif
}

INLINE QI q_zero(void)
{
#if QB == 2
	return _mm512_setzero_si512();
#else
	return _mm256_setzero_si256();
#endif
}

/* Whether the CPU has the 256-bit VNNI form (found once). */
bool cpu_q8_vnni(void);

/* Rows [m0, m1) of a against n columns in panels of rows decoded once
 * (matmul-q8p.c).  tmp holds cpu_q8_panel_floats(k). */
bool cpu_q8_panel(enum loom_type type, bool vnni, const char *a,
		  size_t arow, int64_t m0, int64_t m1, int64_t k,
		  const char *qb, int64_t n, const struct cpu_cols *out,
		  float *tmp);
size_t cpu_q8_panel_floats(int64_t k);

/* Rows [m0, m1) of a against n <= 3 columns straight from the weights'
 * blocks (matmul-q8v.c); false for n > 3. */
bool cpu_q8_gv(enum loom_type type, bool vnni, const char *a, size_t arow,
	       int64_t m0, int64_t m1, int64_t k, const char *qb, int64_t n,
	       const struct cpu_cols *out);

#endif /* CPU_HAVE_Q8 */
#endif
