/* SPDX-License-Identifier: MIT */
/* matmul-q8v.c - decode products of quantized weights (fewer columns
 * than a tile has), every type whose entry names a decode kernel
 * (cpu-types.h), in 256-bit vectors: the weights go from
 * their blocks straight into the dot products, no cpu_q8_row_scales.
 *
 * A 32-value block of a row times a column's block is one dot product
 * of unsigned weight bytes u by signed activations (dot_u8s8_256: the
 * signs moved to the activations for signed weights), 8 sums of 4 values each;
 * lanes 0-3 hold the block's first 16 values, lanes 4-7 the last 16.
 * The block's scales multiply them as floats, except for K-quants
 * without VNNI (vk_step_int), where the second of the two multiplies
 * the dot product takes there brings the integer scale in, and the sums
 * stay integers over the super-block.  Offsets: Q4_0's nibbles
 * are 8 above their values, so 8 * sum(q) of the column's block leaves
 * lane 0; a K-quant's mins times the column's d * sum(q) per 32 leave
 * the sum once per super-block; Q6_K's 32 likewise, per 16.  (512-bit
 * vectors were slower here, a row's blocks being too short for them,
 * except for Q4_0 against one column, where two rows share a vector.)
 */
#include "matmul-q8.h"

#if defined(CPU_HAVE_Q8)

/* Rows of a step: as many accumulators as 16 registers leave room for. */
#define VR 4

INLINE __m256 bcast(float x)
{
	return _mm256_set1_ps(x);
}

/* 32-value blocks (CPU_GV_BLOCK: Q4_0, Q8_0, Q4_1, Q5_0, Q5_1, IQ4_NL,
 * MXFP4): block j of nr rows against nc columns.  The product of the two
 * scales multiplies in vector lanes, each scale broadcast straight from
 * memory (the weights' F16 through f16, MXFP4's exponent as a float's
 * bits), so that a block takes no shuffle but
 * the activations' for signed weights.  An integer offset (Q4_0's 8,
 * Q5_0's 16) times the column's sum starts the dot product; a min (Q4_1,
 * Q5_1) multiplies the column's d * sum(q). */
INLINE void v0_step(const enum loom_type type, const bool vnni,
		    const char *const *rows,
		    const int nr, const struct qcol *cols, const int nc,
		    int64_t j, size_t ahead, const float *f16,
		    __m256 acc[VR][3])
{
	const struct cpu_type *ct = &cpu_types[type];
	const size_t bs = ct->bytes;
	__m256i a[3], z[3];
	__m256 da[3], sa[3];
	int r, c;

	UNROLL
	for (c = 0; c < nc; c++) {
		a[c] = _mm256_loadu_si256((const __m256i *)(cols[c].qs +
							    32 * j));
		da[c] = _mm256_broadcast_ss(cols[c].d + j);
		/* o32 is -8 times the sum. */
		z[c] = ct->off == CPU_OFF_INT ?
			_mm256_zextsi128_si256(_mm_cvtsi32_si128(
				cols[c].o32[j] * (ct->off_int / -8))) :
			_mm256_setzero_si256();
		if (ct->off == CPU_OFF_MIN)
			sa[c] = _mm256_setr_ps(cols[c].s32[j], 0, 0, 0, 0, 0,
					       0, 0);
	}
	UNROLL
	for (r = 0; r < nr; r++) {
		const char *blk = rows[r] + (size_t)j * bs;
		__m256i w = block_u8(type, rows[r], j), u = w;
		uint16_t h;
		__m256 dw, mw = _mm256_setzero_ps();

		__builtin_prefetch(blk + ahead);
		if (ct->e8m0) {
			dw = _mm256_castsi256_ps(_mm256_set1_epi32(
				(int)cpu_e8m0_half_bits((uint8_t)blk[0])));
		} else {
			memcpy(&h, blk, 2);
			dw = _mm256_broadcast_ss(f16 + h);
		}
		if (ct->off == CPU_OFF_MIN) {
			memcpy(&h, blk + 2, 2);
			mw = _mm256_broadcast_ss(f16 + h);
		}
		if (ct->is_signed)
			u = _mm256_abs_epi8(w);
		UNROLL
		for (c = 0; c < nc; c++) {
			/* The integer offset starts the sum. */
			__m256i t = dot_u8s8_256(z[c], u, ct->is_signed ?
					 _mm256_sign_epi8(a[c], w) : a[c], vnni);

			if (ct->off == CPU_OFF_MIN)
				acc[r][c] = _mm256_add_ps(acc[r][c],
					_mm256_fmadd_ps(_mm256_cvtepi32_ps(t),
						_mm256_mul_ps(da[c], dw),
						_mm256_mul_ps(sa[c], mw)));
			else
				acc[r][c] = _mm256_fmadd_ps(_mm256_mul_ps(
					_mm256_cvtepi32_ps(t), da[c]), dw,
					acc[r][c]);
		}
	}
}

/* The scales d * sc (s) and mins dmin * m (m) of a Q4_K/Q5_K super-block
 * at x, 8 each, from their 6-bit fields in 12 bytes: scales 0-3 and mins
 * 0-3 are the low 6 bits of words 0 and 1; scales 4-7 and mins 4-7 take
 * their low 4 bits from the nibbles of word 2 and their top 2 from the
 * top bits of words 0 and 1. */
INLINE void k_scales(const char *x, __m256 *s, __m256 *m)
{
	/* 16 bytes from the scales on: within the block, whose values
	 * follow. */
	__m128i v = _mm_loadu_si128((const __m128i *)(x + 4));
	__m128i lo = _mm_and_si128(v, _mm_set1_epi8(63));
	__m128i w2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa),
				    _mm_setr_epi32(0, 4, 0, 0));
	__m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(v, 6),
						   _mm_set1_epi8(3)), 4);
	__m128i hi = _mm_or_si128(_mm_and_si128(w2, _mm_set1_epi8(15)), top);
	/* Scales 0-7 in bytes 0-7, mins 0-7 in bytes 8-15. */
	__m128i b = _mm_unpacklo_epi32(lo, hi);
	uint32_t h;
	__m128 d;

	memcpy(&h, x, 4);
	d = _mm_cvtph_ps(_mm_cvtsi32_si128((int)h));
	*s = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b)),
			   _mm256_broadcastss_ps(d));
	*m = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
		_mm_srli_si128(b, 8))), _mm256_broadcastss_ps(
		_mm_movehdup_ps(d)));
}

/* Eight bytes as floats times f. */
INLINE __m256 bytes_ps(const void *p, float f, bool is_signed)
{
	__m128i b = _mm_loadl_epi64((const __m128i *)p);

	return _mm256_mul_ps(_mm256_cvtepi32_ps(is_signed ?
		_mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b)), bcast(f));
}

/* Fetches the cache lines of [p, p + n) ahead. */
INLINE void prefetch_lines(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i += 64)
		__builtin_prefetch(p + i);
}

/* The 8 scales of an IQ4_XS super-block less 32, times d: scale i takes
 * its low 4 bits from nibble i of scales_l, its top 2 from bits 2i, 2i + 1
 * of scales_h. */
INLINE __m256 iq4_xs_scales(const struct loom_block_iq4_xs *x)
{
	uint32_t l;
	__m256i lo, hi;

	memcpy(&l, x->scales_l, 4);
	lo = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32((int)l),
		_mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
		_mm256_set1_epi32(15));
	hi = _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(
		x->scales_h), _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14)),
		_mm256_set1_epi32(3));
	return _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(
		_mm256_or_si256(lo, _mm256_slli_epi32(hi, 4)),
		_mm256_set1_epi32(32))), bcast(cpu_f16_to_f32(x->d)));
}

/* Scales per 16 values of a super-block (s0: values 0-127, s1: 128-255)
 * times each column's d into sd[c], and what their offsets take from the
 * sums, off0 and off1 times the column's d * sum(q) per 16. */
INLINE void k16_apply(__m256 s0, __m256 s1, __m256 off0, __m256 off1,
		      const struct qcol *cols, const int nc, int64_t b,
		      float sd[3][16], __m256 *acc)
{
	int c;

	UNROLL
	for (c = 0; c < nc; c++) {
		/* Each column's d per 32, twice, for the scales per 16. */
		__m256 dc = _mm256_loadu_ps(cols[c].d + 8 * b);
		__m256 d0 = _mm256_permutevar8x32_ps(dc, _mm256_setr_epi32(
			0, 0, 1, 1, 2, 2, 3, 3));
		__m256 d1 = _mm256_permutevar8x32_ps(dc, _mm256_setr_epi32(
			4, 4, 5, 5, 6, 6, 7, 7));
		const float *s16 = cols[c].s + 16 * b;

		_mm256_store_ps(sd[c], _mm256_mul_ps(s0, d0));
		_mm256_store_ps(sd[c] + 8, _mm256_mul_ps(s1, d1));
		acc[c] = _mm256_fnmadd_ps(off0, _mm256_loadu_ps(s16), acc[c]);
		acc[c] = _mm256_fnmadd_ps(off1, _mm256_loadu_ps(s16 + 8),
					  acc[c]);
	}
}

/* The 16 signed 6-bit scales of a Q3_K super-block less 32, as bytes:
 * the low 4 bits of scale i are the low nibble of byte i (i < 8) or the
 * high one of byte i - 8, its top 2 bits those at 2 * (i / 4) of byte
 * 8 + i % 4. */
INLINE __m128i q3_k_scales(const struct loom_block_q3_k *x)
{
	__m128i v = _mm_loadl_epi64((const __m128i *)x->scales);
	uint32_t h;
	__m128i lo, hi;

	memcpy(&h, x->scales + 8, 4);
	lo = _mm_and_si128(_mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4)),
			   _mm_set1_epi8(15));
	hi = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)h),
					  _mm_setr_epi32(0, 2, 4, 6)),
			   _mm_set1_epi8(3));
	return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)),
			    _mm_set1_epi8(32));
}

/* Eight bytes from b on as floats times f. */
INLINE __m256 bytes_at(__m128i v, const int b, __m256 f, bool is_signed)
{
	__m128i q = b ? _mm_srli_si128(v, 8) : v;

	return _mm256_mul_ps(_mm256_cvtepi32_ps(is_signed ?
		_mm256_cvtepi8_epi32(q) : _mm256_cvtepu8_epi32(q)), f);
}

/* The scales per 16 (per 32 for Q4_K, Q5_K and IQ4_XS) of super-block
 * blk times each column's d into sd[c], and the offsets' part of the
 * sums into acc: Q6_K's 32 and Q3_K's 4 times the scale, Q2_K's and
 * the K-quants' mins. */
INLINE void k_prep(const enum loom_type type, const char *blk,
		   const struct qcol *cols, const int nc, int64_t b,
		   float sd[3][16], __m256 *acc)
{
	int c;

	if (type == LOOM_TYPE_Q6_K) {
		const struct loom_block_q6_k *x = (const void *)blk;
		__m128i v = _mm_loadu_si128((const __m128i *)x->scales);
		__m256 d = bcast(cpu_f16_to_f32(x->d)), o = bcast(32.0f);
		__m256 s0 = bytes_at(v, 0, d, true), s1 = bytes_at(v, 1, d, true);

		k16_apply(s0, s1, _mm256_mul_ps(s0, o), _mm256_mul_ps(s1, o),
			  cols, nc, b, sd, acc);
	} else if (type == LOOM_TYPE_Q3_K) {
		const struct loom_block_q3_k *x = (const void *)blk;
		__m128i v = q3_k_scales(x);
		__m256 d = bcast(cpu_f16_to_f32(x->d)), o = bcast(4.0f);
		__m256 s0 = bytes_at(v, 0, d, true), s1 = bytes_at(v, 1, d, true);

		k16_apply(s0, s1, _mm256_mul_ps(s0, o), _mm256_mul_ps(s1, o),
			  cols, nc, b, sd, acc);
	} else if (type == LOOM_TYPE_Q2_K) {
		const struct loom_block_q2_k *x = (const void *)blk;
		__m128i v = _mm_loadu_si128((const __m128i *)x->scales);
		__m128i lo = _mm_and_si128(v, _mm_set1_epi8(15));
		__m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4),
					   _mm_set1_epi8(15));
		__m256 d = bcast(cpu_f16_to_f32(x->d));
		__m256 dm = bcast(cpu_f16_to_f32(x->dmin));

		k16_apply(bytes_at(lo, 0, d, false), bytes_at(lo, 1, d, false),
			  bytes_at(hi, 0, dm, false), bytes_at(hi, 1, dm, false),
			  cols, nc, b, sd, acc);
	} else {
		__m256 s, m = _mm256_setzero_ps();

		if (type == LOOM_TYPE_IQ4_XS)
			s = iq4_xs_scales((const void *)blk);
		else
			k_scales(blk, &s, &m);
		UNROLL
		for (c = 0; c < nc; c++) {
			_mm256_store_ps(sd[c], _mm256_mul_ps(s,
				_mm256_loadu_ps(cols[c].d + 8 * b)));
			if (type != LOOM_TYPE_IQ4_XS)
				acc[c] = _mm256_fnmadd_ps(m, _mm256_loadu_ps(
					cols[c].s32 + 8 * b), acc[c]);
		}
	}
}

/* Super-blocks (CPU_GV_SUPER: Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_XS):
 * super-block b of nr rows against nc columns. */
INLINE void vk_step(const enum loom_type type, const bool vnni,
		    const char *const *rows,
		    const int nr, const struct qcol *cols, const int nc,
		    int64_t b, size_t ahead, __m256 acc[VR][3])
{
	const struct cpu_type *ct = &cpu_types[type];
	const size_t bs = ct->bytes;
	int r, c, i;

	UNROLL
	for (r = 0; r < nr; r++) {
		const char *blk = rows[r] + (size_t)b * bs;
		/* Scales per 32 (per 16) times each column's d. */
		float sd[3][16] __attribute__((aligned(32)));

		prefetch_lines(blk + ahead, bs);
		k_prep(type, blk, cols, nc, b, sd, acc[r]);
		UNROLL
		for (i = 0; i < 8; i++) {
			__m256i w = block_u8(type, rows[r], 8 * b + i);
			__m256i u = ct->is_signed ? _mm256_abs_epi8(w) : w;

			UNROLL
			for (c = 0; c < nc; c++) {
				__m256i a = _mm256_loadu_si256((const __m256i *)
					(cols[c].qs + 256 * b + 32 * i));
				__m256i t = dot_u8s8_256(
					_mm256_setzero_si256(), u,
					ct->is_signed ? _mm256_sign_epi8(a, w) :
					a, vnni);
				__m256 f = ct->span == 16 ?
					_mm256_set_m128(
						_mm_broadcast_ss(sd[c] + 2 * i +
								 1),
						_mm_broadcast_ss(sd[c] + 2 * i)) :
					_mm256_broadcast_ss(sd[c] + i);

				/* With one column, odd blocks go to a second
				 * sum: two chains of dependent adds. */
				int e = nc == 1 ? i & 1 : c;

				acc[r][e] = _mm256_fmadd_ps(
					_mm256_cvtepi32_ps(t), f, acc[r][e]);
			}
		}
	}
}

/* The 8 6-bit scales of a Q4_K/Q5_K super-block at x as 16-bit lanes,
 * in both halves (as k_scales reads them), and its mins times dmin. */
INLINE __m256i k_scales_i16(const char *x, __m256 *m)
{
	__m128i v = _mm_loadu_si128((const __m128i *)(x + 4));
	__m128i lo = _mm_and_si128(v, _mm_set1_epi8(63));
	__m128i w2 = _mm_srlv_epi32(_mm_shuffle_epi32(v, 0xaa),
				    _mm_setr_epi32(0, 4, 0, 0));
	__m128i top = _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(v, 6),
						   _mm_set1_epi8(3)), 4);
	__m128i hi = _mm_or_si128(_mm_and_si128(w2, _mm_set1_epi8(15)), top);
	__m128i b = _mm_unpacklo_epi32(lo, hi);
	uint16_t dmin;

	memcpy(&dmin, x + 2, 2);
	*m = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
		_mm_srli_si128(b, 8))), bcast(cpu_f16_to_f32(dmin)));
	return _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(b));
}

/* 16-bit lanes: word a of v in the lower half, word b in the upper
 * (v's halves alike). */
INLINE __m256i words(__m256i v, const int a, const int b)
{
	const char a0 = (char)(2 * a), a1 = (char)(2 * a + 1);
	const char b0 = (char)(2 * b), b1 = (char)(2 * b + 1);

	return _mm256_shuffle_epi8(v, _mm256_setr_epi8(
		a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1, a0, a1,
		b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1, b0, b1));
}

/* vk_step without VNNI, where each dot product costs two multiplies:
 * the second multiplies by the 32 (Q6_K: 16) values' integer scale
 * instead of by ones, the sums stay integers over the super-block, and
 * one conversion and one FMA per super-block take the product of the
 * weights' d and the column's, the column quantized with one scale per
 * 256 values (cpu_q8_quantize's group). */
INLINE void vk_step_int(const enum loom_type type, const char *const *rows,
			const int nr, const struct qcol *cols, const int nc,
			int64_t b, size_t ahead, __m256 acc[VR][3])
{
	const size_t bs = block_bytes(type);
	int r, c, i;

	UNROLL
	for (r = 0; r < nr; r++) {
		const char *blk = rows[r] + (size_t)b * bs;
		__m256i sum[3], sc, sc2 = _mm256_setzero_si256();
		uint16_t dh;

		prefetch_lines(blk + ahead, bs);
		if (type == LOOM_TYPE_Q6_K) {
			const struct loom_block_q6_k *x =
				(const struct loom_block_q6_k *)blk;
			__m256i s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(
				(const __m128i *)x->scales));
			float d = cpu_f16_to_f32(x->d);
			__m256 s0 = bytes_ps(x->scales, 32.0f * d, true);
			__m256 s1 = bytes_ps(x->scales + 8, 32.0f * d, true);

			/* Scales 0-7 in both halves, then 8-15. */
			sc = _mm256_permute2x128_si256(s16, s16, 0x00);
			sc2 = _mm256_permute2x128_si256(s16, s16, 0x11);
			memcpy(&dh, &x->d, 2);
			UNROLL
			for (c = 0; c < nc; c++) {
				/* The offset 32 of every value. */
				const float *o = cols[c].s + 16 * b;

				acc[r][c] = _mm256_fnmadd_ps(s0,
					_mm256_loadu_ps(o), acc[r][c]);
				acc[r][c] = _mm256_fnmadd_ps(s1,
					_mm256_loadu_ps(o + 8), acc[r][c]);
			}
		} else {
			__m256 m;

			sc = k_scales_i16(blk, &m);
			memcpy(&dh, blk, 2);
			UNROLL
			for (c = 0; c < nc; c++)
				acc[r][c] = _mm256_fnmadd_ps(m,
					_mm256_loadu_ps(cols[c].s32 + 8 * b),
					acc[r][c]);
		}
		UNROLL
		for (c = 0; c < nc; c++)
			sum[c] = _mm256_setzero_si256();
		UNROLL
		for (i = 0; i < 8; i++) {
			__m256i u = block_u8(type, rows[r], 8 * b + i);
			/* Block i's scale in every lane; Q6_K's two, one
			 * per 16 values. */
			__m256i f = type == LOOM_TYPE_Q6_K ?
				words(i < 4 ? sc : sc2, 2 * (i % 4),
				      2 * (i % 4) + 1) : words(sc, i, i);

			UNROLL
			for (c = 0; c < nc; c++) {
				__m256i p = _mm256_maddubs_epi16(u,
					_mm256_loadu_si256((const __m256i *)(
						cols[c].qs + 256 * b + 32 * i)));

				sum[c] = _mm256_add_epi32(sum[c],
					_mm256_madd_epi16(p, f));
			}
		}
		UNROLL
		for (c = 0; c < nc; c++)
			acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum[c]),
				bcast(cpu_f16_to_f32(dh) * cols[c].d[8 * b]),
				acc[r][c]);
	}
}

/* res[r][c] = dot(row r of a, column c) for nr rows and nc columns;
 * the same bytes of the next nr rows, ahead bytes on, are fetched into
 * the caches meanwhile. */
INLINE void v_rows(const enum loom_type type, const bool vnni,
		    const char *const *rows,
		   const int nr, const struct qcol *cols, const int nc,
		   int64_t k, size_t ahead, const float *f16, float res[VR][3])
{
	__m256 acc[VR][3];
	int64_t j;
	int r, c;

	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (c = 0; c < 3; c++)
			acc[r][c] = _mm256_setzero_ps();
	if (cpu_types[type].gv == CPU_GV_BLOCK)
		for (j = 0; j < k / 32; j++)
			v0_step(type, vnni, rows, nr, cols, nc, j, ahead, f16,
				acc);
	else if (!vnni && cpu_types[type].group == 256)
		for (j = 0; j < k / 256; j++)
			vk_step_int(type, rows, nr, cols, nc, j, ahead, acc);
	else
		for (j = 0; j < k / 256; j++)
			vk_step(type, vnni, rows, nr, cols, nc, j, ahead, acc);
	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (c = 0; c < nc; c++)
			res[r][c] = cpu_hsum256(nc == 1 ? _mm256_add_ps(
				acc[r][0], acc[r][1]) : acc[r][c]);
}

#if QB == 2
/* Block j of two rows x and y against the column (a, its scale da, and
 * its offset z), into acc: the pair shares a 512-bit vector, x in the
 * lower half, which halves the vector operations of a block where the
 * core runs two 512-bit units.  With VNNI, the nibbles are not shifted:
 * the high ones are masked in place, 16 times their value, and their
 * lanes' scale (in da) is a sixteenth; without it, the bytes would
 * saturate maddubs's 16-bit sums, so they are shifted down. */
INLINE __m512 q4_0_pair(const bool vnni, const struct loom_block_q4_0 *x,
			const struct loom_block_q4_0 *y, __m512i a, __m512 da,
			__m512i z, const float *f16, __m512 acc)
{
	__m512i w = _mm512_mask_broadcast_i32x4(
		_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)x->qs)),
		0xff00, _mm_loadu_si128((const __m128i *)y->qs));
	__m512 dw = _mm512_mask_broadcastss_ps(_mm512_set1_ps(f16[x->d]),
					       0xff00, _mm_load_ss(f16 + y->d));

	if (vnni)
		w = _mm512_and_si512(w, _mm512_setr_epi64(
			0x0f0f0f0f0f0f0f0f, 0x0f0f0f0f0f0f0f0f,
			(int64_t)0xf0f0f0f0f0f0f0f0, (int64_t)0xf0f0f0f0f0f0f0f0,
			0x0f0f0f0f0f0f0f0f, 0x0f0f0f0f0f0f0f0f,
			(int64_t)0xf0f0f0f0f0f0f0f0, (int64_t)0xf0f0f0f0f0f0f0f0));
	else
		w = _mm512_and_si512(_mm512_srlv_epi64(w, _mm512_setr_epi64(
			0, 0, 4, 4, 0, 0, 4, 4)), _mm512_set1_epi8(15));
	return _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot_u8s8(z, w, a, vnni)),
			       _mm512_mul_ps(dw, da), acc);
}

/* Q4_0 against one column, VR rows a pair at a time, two blocks a step
 * so that each row's next bytes are fetched once per 36. */
INLINE void q4_0_pairs(const bool vnni, const char *const *rows,
		       const struct qcol *col, int64_t k, size_t ahead,
		       const float *f16, float res[VR][3])
{
	const struct loom_block_q4_0 *x[VR];
	const float h = vnni ? 0.0625f : 1.0f;
	const __m512 hi = _mm512_setr_ps(1, 1, 1, 1, h, h, h, h,
					 1, 1, 1, 1, h, h, h, h);
	__m512 acc[VR / 2];
	const int64_t nb = k / 32;
	int64_t j;
	int p;

	for (p = 0; p < VR; p++)
		x[p] = (const struct loom_block_q4_0 *)rows[p];
	for (p = 0; p < VR / 2; p++)
		acc[p] = _mm512_setzero_ps();
	for (j = 0; j < nb; j++) {
		__m512i a = _mm512_broadcast_i64x4(_mm256_loadu_si256(
			(const __m256i *)(col->qs + 32 * j)));
		__m512 da = _mm512_mul_ps(_mm512_set1_ps(col->d[j]), hi);
		__m512i z = _mm512_maskz_set1_epi32(0x0101, col->o32[j]);

		if (!(j & 1))
			for (p = 0; p < VR; p++)
				__builtin_prefetch((const char *)(x[p] + j) +
						   ahead);
		UNROLL
		for (p = 0; p < VR / 2; p++)
			acc[p] = q4_0_pair(vnni, x[2 * p] + j, x[2 * p + 1] + j,
					   a, da, z, f16, acc[p]);
	}
	for (p = 0; p < VR / 2; p++) {
		res[2 * p][0] = cpu_hsum256(_mm512_castps512_ps256(acc[p]));
		res[2 * p + 1][0] = cpu_hsum256(
			_mm512_extractf32x8_ps(acc[p], 1));
	}
}
#endif

/* Rows [m0, m1) of a against n <= 3 columns: rows of 32-value blocks VR
 * at a time against one column, else two at a time. */
INLINE void v_typed(const enum loom_type type, const bool vnni,
		    const char *a, size_t arow,
		    int64_t m0, int64_t m1, int64_t k, const char *qb,
		    int64_t n, const struct cpu_cols *out)
{
	const bool wide = n == 1 && cpu_types[type].gv == CPU_GV_BLOCK;
	size_t cb = cpu_q8_col_bytes(k);
	const float *f16 = cpu_q8_f16_table();
	struct qcol cols[3];
	float res[VR][3] = { { 0 } };
	int64_t m;
	int c;

	for (c = 0; c < n; c++)
		cols[c] = col_at(qb + c * cb, k);
	for (m = m0; m < m1;) {
		const char *rows[VR];
		int step = wide ? VR : 2, nr = m1 - m < step ? 1 : step, r;
		size_t ahead = (size_t)nr * arow;

		for (r = 0; r < nr; r++)
			rows[r] = a + (m + r) * arow;
		if (nr == 1 && n == 1)
			v_rows(type, vnni, rows, 1, cols, 1, k, ahead, f16, res);
		else if (nr == 1 && n == 2)
			v_rows(type, vnni, rows, 1, cols, 2, k, ahead, f16, res);
		else if (nr == 1)
			v_rows(type, vnni, rows, 1, cols, 3, k, ahead, f16, res);
#if QB == 2
		else if (wide && type == LOOM_TYPE_Q4_0)
			q4_0_pairs(vnni, rows, cols, k, ahead, f16, res);
#endif
		else if (wide)
			v_rows(type, vnni, rows, VR, cols, 1, k, ahead, f16, res);
		else if (n == 1)
			v_rows(type, vnni, rows, 2, cols, 1, k, ahead, f16, res);
		else if (n == 2)
			v_rows(type, vnni, rows, 2, cols, 2, k, ahead, f16, res);
		else
			v_rows(type, vnni, rows, 2, cols, 3, k, ahead, f16, res);
		for (r = 0; r < nr; r++)
			for (c = 0; c < n; c++)
				cpu_cols_at(out, c)[m + r] = res[r][c];
		m += nr;
	}
}

bool cpu_q8_gv(enum loom_type type, bool vnni, const char *a, size_t arow,
	       int64_t m0, int64_t m1, int64_t k, const char *qb, int64_t n,
	       const struct cpu_cols *out)
{
	if (n > 3 || cpu_type_of(type)->gv == CPU_GV_TILE)
		return false;
	switch (type) {
#define CASE(T)                                                 \
	case T:                                                 \
		if (vnni)                                       \
			v_typed(T, true, a, arow, m0, m1, k, qb, n, out); \
		else                                            \
			v_typed(T, false, a, arow, m0, m1, k, qb, n, out); \
		return true;
	CPU_Q8_TYPES(CASE)
#undef CASE
	default:
		return false;
	}
}

#endif
