/* SPDX-License-Identifier: MIT */
/* matmul-w.c - decode products on the weight buffer's groups
 * (cpu-weights.c): 16 rows interleaved, a row per 32-bit lane of a
 * 512-bit vector.  Each 64-byte chunk of quants is 4 bytes of every row,
 * one dot product (VNNI) with 4 activations broadcast; the rows' scales
 * come 16 to a vector.  High nibbles that stay in place are 16 times
 * their value: their lanes' factor is a sixteenth, which is exact.
 * Two groups run at once, from the two halves of the rows: two streams
 * in flight where one was found to wait on memory.
 */
#include <stddef.h>

#include "matmul-q8.h"

#if defined(CPU_HAVE_WEIGHTS)

/* How far ahead (bytes) a group is fetched, into L2. */
#define W_PF 8192

/* Offset of a field in a group's block (16 rows' blocks). */
#define AT(T, f) (CPU_W_ROWS * offsetof(struct T, f))

INLINE __m512i load(const char *p)
{
	return _mm512_loadu_si512(p);
}

/* 16 halves as floats. */
INLINE __m512 halves(const char *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
}

INLINE __m512i bytes(int v)
{
	return _mm512_set1_epi8((char)v);
}

/* Four activations (bytes) in every 32-bit lane. */
INLINE __m512i bcast4(const int8_t *q)
{
	int32_t v;

	memcpy(&v, q, 4);
	return _mm512_set1_epi32(v);
}

INLINE __m512i dot(__m512i acc, __m512i u, const int8_t *q)
{
	return dot_u8s8(acc, u, bcast4(q), true);
}

INLINE __m512 fma_i(__m512i s, __m512 f, __m512 acc)
{
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), f, acc);
}

/* Part `part` of `parts` of a group's block of `bytes` at b, W_PF on:
 * the lines one step fetches, so that the fetches spread evenly over
 * the block's steps.  Pinned (volatile assembly), each stays at its
 * step: as __builtin_prefetch the compiler's scheduler bunched a
 * super-block's fetches together, and two threads streamed Q4_K, Q5_K
 * and Q6_K at 23-26 GB/s where they stream at 27-31 spread out.  Q4_0's
 * block of 4.5 lines, fetched at once, streamed no faster pinned. */
INLINE void fetch(const char *b, size_t bytes, int part, int parts,
		  const bool pin)
{
	size_t i = bytes * part / parts / 64 * 64;
	size_t end = bytes * (part + 1) / parts;

	for (; i < end; i += 64)
		if (pin)
			__asm__ volatile("prefetcht1 %0" : : "m"(b[W_PF + i]));
		else
			__builtin_prefetch(b + W_PF + i, 0, 2);
}

/* Q4_0 (one = false) and Q4_1, block j of a group against nc columns:
 * the high nibbles are summed apart and shifted back; Q4_0's offset
 * (each column's o32) starts the sum, Q4_1's rows' mins add each
 * column's d * sum(q). */
INLINE void g_q4(const bool one, const char *g, int64_t j,
		 const struct qcol *cols, const int nc, __m512 *acc)
{
	const size_t bs = one ? sizeof(struct loom_block_q4_1) :
			  sizeof(struct loom_block_q4_0);
	const char *b = g + j * CPU_W_ROWS * bs;
	const char *qs = b + (one ? AT(loom_block_q4_1, qs) :
			      AT(loom_block_q4_0, qs));
	__m512 dw = halves(b), mw = _mm512_setzero_ps();
	__m512i lo[4], hi[4];
	int c, i;

	if (one)
		mw = halves(b + AT(loom_block_q4_1, m));
	fetch(b, CPU_W_ROWS * bs, 0, 1, false);
	UNROLL
	for (i = 0; i < 4; i++) {
		__m512i w = load(qs + 64 * i);

		lo[i] = _mm512_and_si512(w, bytes(0x0f));
		hi[i] = _mm512_and_si512(w, bytes(0xf0));
	}
	UNROLL
	for (c = 0; c < nc; c++) {
		const int8_t *q = cols[c].qs + 32 * j;
		__m512i s = one ? _mm512_setzero_si512() :
			    _mm512_set1_epi32(cols[c].o32[j]);
		__m512i h = _mm512_setzero_si512();

		UNROLL
		for (i = 0; i < 4; i++) {
			s = dot(s, lo[i], q + 4 * i);
			h = dot(h, hi[i], q + 16 + 4 * i);
		}
		s = _mm512_add_epi32(s, _mm512_srai_epi32(h, 4));
		acc[c] = fma_i(s, _mm512_mul_ps(dw, _mm512_set1_ps(
			cols[c].d[j])), acc[c]);
		if (one)
			acc[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(
				cols[c].s32[j]), acc[c]);
	}
}

/* A group's block b of 4-bit codes (at qs, n bytes of blocks in all)
 * against nc columns, steps dw: each code looked up in values, 128 up
 * as an unsigned byte, and each column's -128 * sum(q) (16 times Q4_0's
 * offset) starting the sum, as Q8_0's.  IQ4_NL's and MXFP4's. */
INLINE void g_lut4(const char *b, size_t n, const char *qs, __m512 dw,
		   const int8_t *values, int64_t j, const struct qcol *cols,
		   const int nc, __m512 *acc)
{
	const __m512i table = _mm512_xor_si512(_mm512_broadcast_i32x4(
		_mm_loadu_si128((const __m128i *)values)), bytes(0x80));
	__m512i lo[4], hi[4];
	int c, i;

	fetch(b, n, 0, 1, false);
	UNROLL
	for (i = 0; i < 4; i++) {
		__m512i w = load(qs + 64 * i);

		lo[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(w,
							bytes(0x0f)));
		hi[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(
			_mm512_srli_epi16(w, 4), bytes(0x0f)));
	}
	UNROLL
	for (c = 0; c < nc; c++) {
		const int8_t *q = cols[c].qs + 32 * j;
		__m512i s = _mm512_set1_epi32(16 * cols[c].o32[j]);

		UNROLL
		for (i = 0; i < 4; i++) {
			s = dot(s, lo[i], q + 4 * i);
			s = dot(s, hi[i], q + 16 + 4 * i);
		}
		acc[c] = fma_i(s, _mm512_mul_ps(dw, _mm512_set1_ps(
			cols[c].d[j])), acc[c]);
	}
}

/* IQ4_NL, block j of a group against nc columns: its table and half
 * steps. */
INLINE void g_iq4_nl(const char *g, int64_t j, const struct qcol *cols,
		     const int nc, __m512 *acc)
{
	const size_t n = CPU_W_ROWS * sizeof(struct loom_block_iq4_nl);
	const char *b = g + j * n;

	g_lut4(b, n, b + AT(loom_block_iq4_nl, qs),
	       halves(b + AT(loom_block_iq4_nl, d)), cpu_iq4nl_values, j, cols,
	       nc, acc);
}

/* u with bits 4 n .. 4 n + 3 of each row's 32-bit qh (h) added as bit
 * 4 of its bytes 0-3: the byte holding them is spread over its lane's 4
 * bytes, each tested at its own bit. */
INLINE __m512i fifth(__m512i u, __m512i h, const int n)
{
	const __m512i at = _mm512_add_epi32(
		_mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0),
		_mm512_set1_epi32(0x01010101 * (n / 2)));
	const __m512i bit = _mm512_set1_epi32(
		(int)(0x08040201u << 4 * (n % 2)));
	__mmask64 k = _mm512_test_epi8_mask(_mm512_shuffle_epi8(h, at), bit);

	return _mm512_mask_add_epi8(u, k, u, bytes(16));
}

/* Q5_0 (one = false) and Q5_1, block j of a group against nc columns:
 * Q4's nibbles with their fifth bits from qh (bit i for value i), both
 * halves 0-31 in one sum; Q5_0's offset, -16 per value, is twice Q4_0's
 * (each column's o32) and starts the sum, Q5_1's mins are Q4_1's. */
INLINE void g_q5(const bool one, const char *g, int64_t j,
		 const struct qcol *cols, const int nc, __m512 *acc)
{
	const size_t bs = one ? sizeof(struct loom_block_q5_1) :
			  sizeof(struct loom_block_q5_0);
	const char *b = g + j * CPU_W_ROWS * bs;
	const char *qs = b + (one ? AT(loom_block_q5_1, qs) :
			      AT(loom_block_q5_0, qs));
	const __m512i h = load(b + (one ? AT(loom_block_q5_1, qh) :
				    AT(loom_block_q5_0, qh)));
	__m512 dw = halves(b), mw = _mm512_setzero_ps();
	__m512i u[8];
	int c, i;

	if (one)
		mw = halves(b + AT(loom_block_q5_1, m));
	fetch(b, CPU_W_ROWS * bs, 0, 1, false);
	UNROLL
	for (i = 0; i < 4; i++) {
		__m512i w = load(qs + 64 * i);

		u[i] = fifth(_mm512_and_si512(w, bytes(0x0f)), h, i);
		u[4 + i] = fifth(_mm512_and_si512(_mm512_srli_epi16(w, 4),
						  bytes(0x0f)), h, 4 + i);
	}
	UNROLL
	for (c = 0; c < nc; c++) {
		const int8_t *q = cols[c].qs + 32 * j;
		__m512i s = one ? _mm512_setzero_si512() :
			    _mm512_set1_epi32(2 * cols[c].o32[j]);

		UNROLL
		for (i = 0; i < 4; i++) {
			s = dot(s, u[i], q + 4 * i);
			s = dot(s, u[4 + i], q + 16 + 4 * i);
		}
		acc[c] = fma_i(s, _mm512_mul_ps(dw, _mm512_set1_ps(
			cols[c].d[j])), acc[c]);
		if (one)
			acc[c] = _mm512_fmadd_ps(mw, _mm512_set1_ps(
				cols[c].s32[j]), acc[c]);
	}
}

/* 16 E8M0 bytes as the floats 2^(e - 128) (cpu_e8m0_half_bits). */
INLINE __m512 e8m0_halves(const char *p)
{
	__m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
	__m512i v = _mm512_slli_epi32(_mm512_sub_epi32(e,
					_mm512_set1_epi32(1)), 23);
	__mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));

	v = _mm512_mask_sllv_epi32(v, small, _mm512_set1_epi32(0x00200000),
				   e);
	return _mm512_castsi512_ps(v);
}

/* MXFP4, block j of a group against nc columns: IQ4_NL's with MXFP4's
 * table (its codes doubled) and the rows' exponents, a byte each, as
 * steps of half their value. */
INLINE void g_mxfp4(const char *g, int64_t j, const struct qcol *cols,
		    const int nc, __m512 *acc)
{
	const size_t n = CPU_W_ROWS * sizeof(struct loom_block_mxfp4);
	const char *b = g + j * n;

	g_lut4(b, n, b + AT(loom_block_mxfp4, qs),
	       e8m0_halves(b + AT(loom_block_mxfp4, e)), cpu_mxfp4_values, j,
	       cols, nc, acc);
}

/* Q8_0, block j of a group against nc columns: the weights' bytes
 * taken as unsigned, their sign bits flipped (128 more), and each
 * column's -128 * sum(q) (16 times Q4_0's offset) starting the sum. */
INLINE void g_q8_0(const char *g, int64_t j, const struct qcol *cols,
		   const int nc, __m512 *acc)
{
	const char *b = g + j * CPU_W_ROWS * sizeof(struct loom_block_q8_0);
	const char *qs = b + AT(loom_block_q8_0, qs);
	__m512 dw = halves(b + AT(loom_block_q8_0, d));
	__m512i u[8];
	int c, i;

	UNROLL
	for (i = 0; i < 8; i++) {
		fetch(b, CPU_W_ROWS * sizeof(struct loom_block_q8_0), i, 8,
		      true);
		u[i] = _mm512_xor_si512(load(qs + 64 * i), bytes(0x80));
	}
	UNROLL
	for (c = 0; c < nc; c++) {
		const int8_t *q = cols[c].qs + 32 * j;
		__m512i s = _mm512_set1_epi32(16 * cols[c].o32[j]);

		UNROLL
		for (i = 0; i < 8; i++)
			s = dot(s, u[i], q + 4 * i);
		acc[c] = fma_i(s, _mm512_mul_ps(dw, _mm512_set1_ps(
			cols[c].d[j])), acc[c]);
	}
}

/* IQ4_XS, super-block b of a group against nc columns: per 32-value
 * sub-block j, IQ4_NL's codes and sums (its qs chunks 4j..4j+3), times
 * the 16 rows' 6-bit scale j less 32: its low 4 bits nibble j of
 * scales_l, its top 2 bits 2j, 2j + 1 of scales_h (16 halves' places). */
INLINE void g_iq4_xs(const char *g, int64_t b, const struct qcol *cols,
		     const int nc, __m512 *acc)
{
	const size_t bs = sizeof(struct loom_block_iq4_xs);
	const char *x = g + b * CPU_W_ROWS * bs;
	const char *qs = x + AT(loom_block_iq4_xs, qs);
	const __m512 d = halves(x + AT(loom_block_iq4_xs, d));
	const __m512i sl = load(x + AT(loom_block_iq4_xs, scales_l));
	const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256(
		(const __m256i *)(x + AT(loom_block_iq4_xs, scales_h))));
	const __m512i table = _mm512_xor_si512(_mm512_broadcast_i32x4(
		_mm_loadu_si128((const __m128i *)cpu_iq4nl_values)),
		bytes(0x80));
	int j, i, c;

	UNROLL
	for (j = 0; j < 8; j++) {
		__m512i lo[4], hi[4];
		__m512 f = _mm512_mul_ps(d, _mm512_cvtepi32_ps(
			_mm512_sub_epi32(_mm512_or_si512(
				_mm512_and_si512(_mm512_srli_epi32(sl, 4 * j),
						 _mm512_set1_epi32(15)),
				_mm512_and_si512(j < 2 ?
					_mm512_slli_epi32(sh, 4 - 2 * j) :
					_mm512_srli_epi32(sh, 2 * j - 4),
					_mm512_set1_epi32(0x30))),
				_mm512_set1_epi32(32))));

		fetch(x, CPU_W_ROWS * bs, j, 8, true);
		UNROLL
		for (i = 0; i < 4; i++) {
			__m512i w = load(qs + 64 * (4 * j + i));

			lo[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(w,
							bytes(0x0f)));
			hi[i] = _mm512_shuffle_epi8(table, _mm512_and_si512(
				_mm512_srli_epi16(w, 4), bytes(0x0f)));
		}
		UNROLL
		for (c = 0; c < nc; c++) {
			const int8_t *q = cols[c].qs + 256 * b + 32 * j;
			__m512i t = _mm512_set1_epi32(16 * cols[c].o32[8 * b +
								       j]);

			UNROLL
			for (i = 0; i < 4; i++) {
				t = dot(t, lo[i], q + 4 * i);
				t = dot(t, hi[i], q + 16 + 4 * i);
			}
			acc[c] = fma_i(t, _mm512_mul_ps(f, _mm512_set1_ps(
				cols[c].d[8 * b + j])), acc[c]);
		}
	}
}

/* Q4_K and Q5_K: scale (mins: 1) j of the 16 rows, a 6-bit field of
 * their 12 bytes at sc, times d (dmin): for j < 4 the low 6 bits of
 * byte j (4 + j); else the nibble of byte 8 + j - 4 (its high one) and
 * the top 2 bits of byte j - 4 (j). */
INLINE __m512 k_scale(const char *sc, __m512 d, const int mins, const int j)
{
	__m512i v;

	if (j < 4) {
		v = _mm512_and_si512(_mm512_srli_epi32(load(sc + 64 * mins),
						       8 * j),
				     _mm512_set1_epi32(63));
	} else {
		int i = j - 4;

		v = _mm512_or_si512(
			_mm512_and_si512(_mm512_srli_epi32(load(sc + 128),
							   8 * i + 4 * mins),
					 _mm512_set1_epi32(15)),
			_mm512_and_si512(_mm512_srli_epi32(load(sc + 64 * mins),
							   8 * i + 2),
					 _mm512_set1_epi32(0x30)));
	}
	return _mm512_mul_ps(_mm512_cvtepi32_ps(v), d);
}

/* Bit `bit` of every byte of h moved to bit 4. */
INLINE __m512i bit4(__m512i h, const int bit)
{
	__m512i v = bit < 4 ? _mm512_slli_epi32(h, 4 - bit) :
		    bit > 4 ? _mm512_srli_epi32(h, bit - 4) : h;

	return _mm512_and_si512(v, bytes(0x10));
}

/* Q4_K (five = false) and Q5_K, super-block b of a group against nc
 * columns: per pair p of sub-blocks, the low nibbles are sub-block 2p,
 * the high ones 2p + 1, with Q5_K's fifth bits from bits 2p and 2p + 1
 * of qh.  The mins times each column's d * sum(q) per 32 leave the sum
 * once per sub-block. */
INLINE void g_qk(const bool five, const char *g, int64_t b,
		 const struct qcol *cols, const int nc, __m512 *acc)
{
	const size_t bs = five ? sizeof(struct loom_block_q5_k) :
			  sizeof(struct loom_block_q4_k);
	const char *x = g + b * CPU_W_ROWS * bs;
	const char *sc = x + (five ? AT(loom_block_q5_k, scales) :
			      AT(loom_block_q4_k, scales));
	const char *qs = x + (five ? AT(loom_block_q5_k, qs) :
			      AT(loom_block_q4_k, qs));
	const char *qh = x + AT(loom_block_q5_k, qh);
	const __m512 d = halves(x), dmin = halves(x + 32);
	int p, t, c;

	UNROLL
	for (p = 0; p < 4; p++) {
		__m512i lo[3], hi[3];

		for (c = 0; c < nc; c++) {
			lo[c] = _mm512_setzero_si512();
			hi[c] = _mm512_setzero_si512();
		}
		UNROLL
		for (t = 0; t < 8; t++) {
			__m512i w = load(qs + 512 * p + 64 * t), l, h;

			fetch(x, CPU_W_ROWS * bs, 8 * p + t, 32, true);

			if (five) {
				__m512i bits = load(qh + 64 * t);

				l = _mm512_ternarylogic_epi32(w, bytes(0x0f),
					bit4(bits, 2 * p), 0xea);
				h = _mm512_ternarylogic_epi32(
					_mm512_srli_epi32(w, 4), bytes(0x0f),
					bit4(bits, 2 * p + 1), 0xea);
			} else {
				l = _mm512_and_si512(w, bytes(0x0f));
				h = _mm512_and_si512(w, bytes(0xf0));
			}
			UNROLL
			for (c = 0; c < nc; c++) {
				const int8_t *q = cols[c].qs + 256 * b +
						  64 * p + 4 * t;

				lo[c] = dot(lo[c], l, q);
				hi[c] = dot(hi[c], h, q + 32);
			}
		}
		{
			__m512 s0 = k_scale(sc, d, 0, 2 * p);
			__m512 s1 = k_scale(sc, d, 0, 2 * p + 1);
			__m512 m0 = k_scale(sc, dmin, 1, 2 * p);
			__m512 m1 = k_scale(sc, dmin, 1, 2 * p + 1);
			const float h1 = five ? 1.0f : 0.0625f;

			UNROLL
			for (c = 0; c < nc; c++) {
				int64_t i = 8 * b + 2 * p;

				acc[c] = fma_i(lo[c], _mm512_mul_ps(s0,
					_mm512_set1_ps(cols[c].d[i])), acc[c]);
				acc[c] = fma_i(hi[c], _mm512_mul_ps(s1,
					_mm512_set1_ps(cols[c].d[i + 1] * h1)),
					acc[c]);
				acc[c] = _mm512_fnmadd_ps(m0, _mm512_set1_ps(
					cols[c].s32[i]), acc[c]);
				acc[c] = _mm512_fnmadd_ps(m1, _mm512_set1_ps(
					cols[c].s32[i + 1]), acc[c]);
			}
		}
	}
}

/* Step t of half n of super-block b against nc columns: u[v] (4
 * values of each row) times each column's 4 values 32 v further in,
 * summed into s[v]. */
INLINE void dot_step(__m512i s[4][3], const __m512i *u,
		     const struct qcol *cols, const int nc, int64_t b,
		     const int n, const int t)
{
	int c, v;

	UNROLL
	for (c = 0; c < nc; c++) {
		const int8_t *q = cols[c].qs + 256 * b + 128 * n + 4 * t;

		UNROLL
		for (v = 0; v < 4; v++)
			s[v][c] = dot(s[v][c], u[v], q + 32 * v);
	}
}

/* Q6_K, super-block b of a group against nc columns.  Per half n of 128
 * values and 4-value step t, chunks A and B of ql (bytes 64 n + 4 t and
 * 64 n + 32 + 4 t) and H of qh (32 n + 4 t) give 4 values of each 32:
 * A's and B's low nibbles, then their high ones, with bits 0-1, 2-3,
 * 4-5 and 6-7 of H above them.  Steps 0-3 and 4-7 are the two 16s of
 * each 32, 16 scales in all; the values' offset 32 times the scale and
 * each column's d * sum(q) per 16 leaves the sum once per scale. */
INLINE void g_q6_k(const char *g, int64_t b, const struct qcol *cols,
		   const int nc, __m512 *acc)
{
	const size_t bs = sizeof(struct loom_block_q6_k);
	const char *x = g + b * CPU_W_ROWS * bs;
	const char *ql = x + AT(loom_block_q6_k, ql);
	const char *qh = x + AT(loom_block_q6_k, qh);
	const char *sc = x + AT(loom_block_q6_k, scales);
	const __m512 d = halves(x + AT(loom_block_q6_k, d));
	const __m512i m4 = bytes(0x0f), m2 = bytes(0x30);
	int n, h, t, v, c;

	UNROLL
	for (n = 0; n < 2; n++) {
		UNROLL
		for (h = 0; h < 2; h++) {
			__m512i s[4][3];

			for (v = 0; v < 4; v++)
				for (c = 0; c < nc; c++)
					s[v][c] = _mm512_setzero_si512();
			UNROLL
			for (t = 4 * h; t < 4 * h + 4; t++) {
				__m512i A = load(ql + 64 * (16 * n + t));
				__m512i B = load(ql + 64 * (16 * n + 8 + t));
				__m512i H = load(qh + 64 * (8 * n + t));
				__m512i u[4] = {
					_mm512_ternarylogic_epi32(A, m4,
						_mm512_and_si512(
						_mm512_slli_epi32(H, 4), m2),
						0xea),
					_mm512_ternarylogic_epi32(B, m4,
						_mm512_and_si512(
						_mm512_slli_epi32(H, 2), m2),
						0xea),
					_mm512_ternarylogic_epi32(
						_mm512_srli_epi32(A, 4), m4,
						_mm512_and_si512(H, m2), 0xea),
					_mm512_ternarylogic_epi32(
						_mm512_srli_epi32(B, 4), m4,
						_mm512_and_si512(
						_mm512_srli_epi32(H, 2), m2),
						0xea),
				};

				fetch(x, CPU_W_ROWS * bs, 8 * n + t, 16, true);
				dot_step(s, u, cols, nc, b, n, t);
			}
			UNROLL
			for (v = 0; v < 4; v++) {
				/* Scale 8 n + 2 v + h: byte of its chunk,
				 * signed. */
				int k = 8 * n + 2 * v + h;
				__m512 f = _mm512_mul_ps(d, _mm512_cvtepi32_ps(
					_mm512_srai_epi32(_mm512_slli_epi32(
						load(sc + 64 * (k / 4)),
						24 - 8 * (k % 4)), 24)));

				UNROLL
				for (c = 0; c < nc; c++) {
					acc[c] = fma_i(s[v][c], _mm512_mul_ps(
						f, _mm512_set1_ps(cols[c].d[
							8 * b + 4 * n + v])),
						acc[c]);
					acc[c] = _mm512_fnmadd_ps(f,
						_mm512_set1_ps(32.0f *
							cols[c].s[16 * b + k]),
						acc[c]);
				}
			}
		}
	}
}

/* Byte `byte` of each 32-bit lane of v, as the lane's value (the
 * shuffle picks byte 4 j + byte of each 16 for lane j, zeros above). */
INLINE __m512i lane_byte(__m512i v, const int byte)
{
	const int z = (int)0x80808000 | byte;

	return byte == 3 ? _mm512_srli_epi32(v, 24) :
	       byte == 0 ? _mm512_and_si512(v, _mm512_set1_epi32(255)) :
	       _mm512_shuffle_epi8(v, _mm512_broadcast_i32x4(_mm_setr_epi32(
		       z, z + 4, z + 8, z + 12)));
}

/* The 16 scales of a Q3_K group's 16 rows (their 12 bytes at sc), less
 * 32, times d, into f: scales 4g..4g+3 are first gathered as the bytes
 * of one vector, their low 4 bits the nibbles of chunk g % 2 (the high
 * ones for g >= 2), their top 2 from bits 2g of chunk 2's bytes. */
INLINE void q3_k_scales16(const char *sc, __m512 d, __m512 *f)
{
	const __m512i c0 = load(sc), c1 = load(sc + 64), c2 = load(sc + 128);
	const __m512 d32 = _mm512_mul_ps(d, _mm512_set1_ps(32.0f));
	int g, i;

	UNROLL
	for (g = 0; g < 4; g++) {
		__m512i l = g & 1 ? c1 : c0, hi;

		if (g >= 2)
			l = _mm512_srli_epi32(l, 4);
		hi = g < 2 ? _mm512_slli_epi32(c2, 4 - 2 * g) :
		     g == 2 ? c2 : _mm512_srli_epi32(c2, 2);
		/* (hi & 0x30) | (l & 0x0f) */
		l = _mm512_ternarylogic_epi32(hi, bytes(0x30),
			_mm512_and_si512(l, bytes(0x0f)), 0xea);
		UNROLL
		for (i = 0; i < 4; i++)
			f[4 * g + i] = _mm512_fmsub_ps(_mm512_cvtepi32_ps(
				lane_byte(l, i)), d, d32);
	}
}

/* Q2_K (three = false) and Q3_K, super-block b of a group against nc
 * columns.  Chunk t of qs (bytes 4t..4t+3 of each row: 128 (t / 8) +
 * 4 (t % 8) and on) holds at bits 2s, 2s + 1 the values 32 s further
 * in.  Crumbs 0 and 1 are masked in place, crumbs 2 and 3 after one
 * shift by 4: the odd ones are 4 times their value, their lanes' factor
 * a quarter (exact).  Chunks t % 8 < 4 and >= 4 are the two 16s of each
 * 32.  Q2_K: the scales' low nibbles times d, and their high ones (mins)
 * times dmin times each column's d * sum(q) per 16 leave the sum once
 * per scale.  Q3_K: each crumb gets its third bit from hmask's chunk
 * t % 8, bit 4 (t / 8) + s of each byte, moved above the crumb (bit 2,
 * bit 4 for the odd crumbs in place); the values' offset 4 times the
 * scale and each column's d * sum(q) per 16 leaves the sum once per
 * scale. */
INLINE void g_crumbs(const bool three, const char *g, int64_t b,
		     const struct qcol *cols, const int nc, __m512 *acc)
{
	const size_t bs = three ? sizeof(struct loom_block_q3_k) :
			  sizeof(struct loom_block_q2_k);
	const char *x = g + b * CPU_W_ROWS * bs;
	const char *qs = x + (three ? AT(loom_block_q3_k, qs) :
			      AT(loom_block_q2_k, qs));
	const char *hm = x + AT(loom_block_q3_k, hmask);
	const char *sc = x + AT(loom_block_q2_k, scales);
	__m512 f[16], d = _mm512_setzero_ps(), dmin = _mm512_setzero_ps();
	int n, h, t, s, c;

	if (three) {
		q3_k_scales16(x + AT(loom_block_q3_k, scales),
			      halves(x + AT(loom_block_q3_k, d)), f);
	} else {
		d = halves(x + AT(loom_block_q2_k, d));
		dmin = halves(x + AT(loom_block_q2_k, dmin));
	}
	UNROLL
	for (n = 0; n < 2; n++) {
		UNROLL
		for (h = 0; h < 2; h++) {
			__m512i sum[4][3];

			for (s = 0; s < 4; s++)
				for (c = 0; c < nc; c++)
					sum[s][c] = _mm512_setzero_si512();
			UNROLL
			for (t = 4 * h; t < 4 * h + 4; t++) {
				__m512i w = load(qs + 64 * (8 * n + t));
				__m512i w4 = _mm512_srli_epi32(w, 4);
				__m512i hb = three ? load(hm + 64 * t) :
					     _mm512_setzero_si512();
				__m512i u[4];

				fetch(x, CPU_W_ROWS * bs, 8 * n + t, 16, true);
				UNROLL
				for (s = 0; s < 4; s++) {
					/* Bit 4 n + s of hb to bit 2 (4). */
					const int to = s & 1 ? 4 : 2;
					const int by = to - 4 * n - s;
					__m512i hs = by > 0 ?
						_mm512_slli_epi32(hb, by) :
						by < 0 ?
						_mm512_srli_epi32(hb, -by) : hb;
					const __m512i m = bytes(s & 1 ? 0x0c :
								0x03);

					/* The crumb; Q3_K's with its third
					 * bit, (src & m) | (hs & bit). */
					u[s] = three ?
						_mm512_ternarylogic_epi32(
						s < 2 ? w : w4, m,
						_mm512_and_si512(hs,
							bytes(1 << to)), 0xea) :
						_mm512_and_si512(s < 2 ? w : w4,
								 m);
				}
				dot_step(sum, u, cols, nc, b, n, t);
			}
			UNROLL
			for (s = 0; s < 4; s++) {
				/* Scale 8 n + 2 s + h. */
				const int k = 8 * n + 2 * s + h;
				const float q1 = s & 1 ? 0.25f : 1.0f;
				__m512 fk, mk;

				if (three) {
					fk = f[k];
					mk = _mm512_mul_ps(f[k],
						_mm512_set1_ps(4.0f));
				} else {
					/* Byte k % 4 of chunk k / 4. */
					__m512i v = _mm512_srli_epi32(
						load(sc + 64 * (k / 4)),
						8 * (k % 4));

					fk = _mm512_mul_ps(d, _mm512_cvtepi32_ps(
						_mm512_and_si512(v,
						_mm512_set1_epi32(15))));
					mk = _mm512_mul_ps(dmin,
						_mm512_cvtepi32_ps(
						_mm512_and_si512(
						_mm512_srli_epi32(v, 4),
						_mm512_set1_epi32(15))));
				}
				UNROLL
				for (c = 0; c < nc; c++) {
					acc[c] = fma_i(sum[s][c], _mm512_mul_ps(
						fk, _mm512_set1_ps(q1 *
							cols[c].d[8 * b +
								  4 * n + s])),
						acc[c]);
					acc[c] = _mm512_fnmadd_ps(mk,
						_mm512_set1_ps(
							cols[c].s[16 * b + k]),
						acc[c]);
				}
			}
		}
	}
}

/* ng groups at gs (rows of k values) against nc columns, one row per
 * lane of out. */
INLINE void w_groups(const enum loom_type type, const char *const *gs,
		     const int ng, int64_t k, const struct qcol *cols,
		     const int nc, float *const *out)
{
	__m512 acc[2][3];
	int64_t j;
	int c, e;

	for (e = 0; e < ng; e++)
		for (c = 0; c < nc; c++)
			acc[e][c] = _mm512_setzero_ps();
	for (j = 0; j < k / loom_type_block_size(type); j++)
		UNROLL
		for (e = 0; e < ng; e++) {
			if (type == LOOM_TYPE_Q8_0)
				g_q8_0(gs[e], j, cols, nc, acc[e]);
			else if (type == LOOM_TYPE_Q4_0 ||
				 type == LOOM_TYPE_Q4_1)
				g_q4(type == LOOM_TYPE_Q4_1, gs[e], j, cols,
				     nc, acc[e]);
			else if (type == LOOM_TYPE_IQ4_NL)
				g_iq4_nl(gs[e], j, cols, nc, acc[e]);
			else if (type == LOOM_TYPE_Q5_0 ||
				 type == LOOM_TYPE_Q5_1)
				g_q5(type == LOOM_TYPE_Q5_1, gs[e], j, cols,
				     nc, acc[e]);
			else if (type == LOOM_TYPE_MXFP4)
				g_mxfp4(gs[e], j, cols, nc, acc[e]);
			else if (type == LOOM_TYPE_Q6_K)
				g_q6_k(gs[e], j, cols, nc, acc[e]);
			else if (type == LOOM_TYPE_Q2_K ||
				 type == LOOM_TYPE_Q3_K)
				g_crumbs(type == LOOM_TYPE_Q3_K, gs[e], j,
					 cols, nc, acc[e]);
			else if (type == LOOM_TYPE_IQ4_XS)
				g_iq4_xs(gs[e], j, cols, nc, acc[e]);
			else
				g_qk(type == LOOM_TYPE_Q5_K, gs[e], j, cols,
				     nc, acc[e]);
		}
	for (e = 0; e < ng; e++)
		for (c = 0; c < nc; c++)
			_mm512_storeu_ps(out[3 * e + c], acc[e][c]);
}

/* One or two groups against n columns, each count its own kernel. */
INLINE void w_pick(const enum loom_type type, const char *const *gs,
		   const int ng, int64_t k, const struct qcol *cols, int64_t n,
		   float *const *out)
{
	if (ng == 2 && n == 1)
		w_groups(type, gs, 2, k, cols, 1, out);
	else if (ng == 2 && n == 2)
		w_groups(type, gs, 2, k, cols, 2, out);
	else if (ng == 2)
		w_groups(type, gs, 2, k, cols, 3, out);
	else if (n == 1)
		w_groups(type, gs, 1, k, cols, 1, out);
	else if (n == 2)
		w_groups(type, gs, 1, k, cols, 2, out);
	else
		w_groups(type, gs, 1, k, cols, 3, out);
}

/* Pairs of groups, one from each half of the rows; with an odd count
 * the middle group goes alone, last. */
INLINE void w_typed(const enum loom_type type, const char *a, size_t arow,
		    int64_t m0, int64_t m1, int64_t k, const char *qb,
		    int64_t n, const struct cpu_cols *out)
{
	size_t cb = cpu_q8_col_bytes(k);
	int64_t ng = (m1 - m0) / CPU_W_ROWS, half = ng / 2, t;
	struct qcol cols[3];
	int c;

	for (c = 0; c < n; c++)
		cols[c] = col_at(qb + c * cb, k);
	for (t = 0; t < ng - half; t++) {
		int64_t r[2] = { m0 + t * CPU_W_ROWS,
				 m0 + (half + t) * CPU_W_ROWS };
		const char *gs[2];
		float *o[6] = { NULL };
		int e, two = t < half;

		if (t == ng - half - 1 && ng % 2) {
			r[0] = m0 + half * 2 * CPU_W_ROWS;
			two = 0;
		}
		for (e = 0; e < 2; e++) {
			gs[e] = a + r[e] * arow;
			for (c = 0; c < n; c++)
				o[3 * e + c] = cpu_cols_at(out, c) + r[e];
		}
		w_pick(type, gs, two ? 2 : 1, k, cols, n, o);
	}
}

void cpu_w_gv(enum loom_type type, const char *a, size_t arow, int64_t m0,
	      int64_t m1, int64_t k, const char *qb, int64_t n,
	      const struct cpu_cols *out)
{
	switch (type) {
#define CASE(T)                                                 \
	case T:                                                 \
		w_typed(T, a, arow, m0, m1, k, qb, n, out);     \
		break;
	CPU_W_TYPES(CASE)
#undef CASE
	default:
		break;
	}
}

#endif
