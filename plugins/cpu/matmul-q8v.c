/* SPDX-License-Identifier: MIT */
/* matmul-q8v.c - decode products of quantized weights (fewer columns
 * than a tile has): the weights go from their blocks straight into the
 * dot products, no cpu_q8_row_scales.  With AVX-512, Q4_0 and Q8_0 on
 * VNNI; with AVX2, every type on pair multiplies.
 */
#include "matmul-q8.h"

#if defined(CPU_HAVE_Q8) && QB == 2

/* Rows a step of gv_rows() takes. */
#define QR 4

/*
 * AVX-512 with VNNI, Q4_0 and Q8_0.  Their bytes are made unsigned by an offset z (Q4_0's
 * nibbles are 8 above their values; Q8_0's bytes get 128 added), and
 * z * sum(q) of each 4 activations, the same for every row, is taken
 * from the integer products before the block's scales multiply them.
 */

/* Blocks j and (not with half) j + 1 of a row as unsigned bytes. */
INLINE __m512i gv_weights(const enum loom_type type, const char *row,
			  int64_t j, const bool half)
{
	if (type == LOOM_TYPE_Q4_0) {
		const struct loom_block_q4_0 *x =
			(const struct loom_block_q4_0 *)row + j;
		__m128i v0 = _mm_loadu_si128((const __m128i *)x[0].qs);
		__m128i v1 = half ? _mm_setzero_si128() :
			_mm_loadu_si128((const __m128i *)x[1].qs);
		__m512i w = _mm512_inserti64x4(
			_mm512_castsi256_si512(_mm256_set_m128i(
				_mm_srli_epi16(v0, 4), v0)),
			_mm256_set_m128i(_mm_srli_epi16(v1, 4), v1), 1);

		return _mm512_and_si512(w, _mm512_set1_epi8(15));
	} else {
		const struct loom_block_q8_0 *x =
			(const struct loom_block_q8_0 *)row + j;
		__m256i v0 = _mm256_loadu_si256((const __m256i *)x[0].qs);
		__m256i v1 = half ? _mm256_setzero_si256() :
			_mm256_loadu_si256((const __m256i *)x[1].qs);

		return _mm512_xor_si512(_mm512_inserti64x4(
			_mm512_castsi256_si512(v0), v1, 1),
			_mm512_set1_epi8((char)0x80));
	}
}

/* The f16 scales of blocks j and (not with half) j + 1, as floats. */
INLINE __m128 gv_scales(const enum loom_type type, const char *row,
			int64_t j, const bool half)
{
	size_t bs = type == LOOM_TYPE_Q4_0 ? sizeof(struct loom_block_q4_0) :
		sizeof(struct loom_block_q8_0);
	uint16_t h0, h1 = 0;

	memcpy(&h0, row + (size_t)j * bs, 2);
	if (!half)
		memcpy(&h1, row + (size_t)(j + 1) * bs, 2);
	return _mm_cvtph_ps(_mm_cvtsi32_si128((int)((uint32_t)h0 |
						     (uint32_t)h1 << 16)));
}

/* One step of gv_rows(): blocks j and (without half) j + 1. */
INLINE void gv_step(const enum loom_type type, const char *const *rows,
		    const int nr, const struct qcol *col, int64_t j,
		    __m512 acc[QR], const bool half)
{
	const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1,
						0, 0, 0, 0, 0, 0, 0, 0);
	const __m512i z = _mm512_set1_epi8(type == LOOM_TYPE_Q4_0 ? 8 :
					   (char)0x80);
	__m512i a = q_acts(col->qs + 32 * j, half), za;
	__m128 d = half ? _mm_maskz_loadu_ps(1, col->d + j) :
		_mm_castpd_ps(_mm_load_sd((const double *)(col->d + j)));
	int r;

	za = dot_u8s8(q_zero(), z, a, true);
	UNROLL
	for (r = 0; r < nr; r++) {
		__m512i t;
		__m512 s;

		__builtin_prefetch(rows[r] + block_offset(type, j) + 1024);
		t = dot_u8s8(q_zero(), gv_weights(type, rows[r], j, half), a,
			     true);
		s = _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(
			_mm_mul_ps(gv_scales(type, rows[r], j, half), d)));
		acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(
			_mm512_sub_epi32(t, za)), s, acc[r]);
	}
}

/* res[r] = dot(row r of a, the column) for nr rows. */
INLINE void gv_rows(const enum loom_type type, const char *const *rows,
		    const int nr, const struct qcol *col, int64_t k,
		    float *res)
{
	__m512 acc[QR];
	int64_t j, nblk = k / 32;
	int r;

	UNROLL
	for (r = 0; r < nr; r++)
		acc[r] = _mm512_setzero_ps();
	for (j = 0; j + 2 <= nblk; j += 2)
		gv_step(type, rows, nr, col, j, acc, false);
	if (j < nblk)
		gv_step(type, rows, nr, col, j, acc, true);
	UNROLL
	for (r = 0; r < nr; r++)
		res[r] = _mm512_reduce_add_ps(acc[r]);
}

/* Rows [m0, m1) of a against n columns, QR rows at a time. */
INLINE void gv_typed(const enum loom_type type, const char *a, size_t arow,
		     int64_t m0, int64_t m1, int64_t k, const char *qb,
		     int64_t n, const struct cpu_cols *out)
{
	size_t cb = cpu_q8_col_bytes(k);
	float res[QR];
	int64_t m, c;

	for (m = m0; m < m1;) {
		const char *rows[QR];
		int nr = m1 - m < QR ? 1 : QR, r;

		for (r = 0; r < nr; r++)
			rows[r] = a + (m + r) * arow;
		for (c = 0; c < n; c++) {
			struct qcol col = col_at(qb + c * cb, k);

			if (nr == QR)
				gv_rows(type, rows, QR, &col, k, res);
			else
				gv_rows(type, rows, 1, &col, k, res);
			for (r = 0; r < nr; r++)
				cpu_cols_at(out, c)[m + r] = res[r];
		}
		m += nr;
	}
}

bool cpu_q8_gv(enum loom_type type, bool vnni, const char *a, size_t arow,
	       int64_t m0, int64_t m1, int64_t k, const char *qb, int64_t n,
	       const struct cpu_cols *out)
{
	if (!vnni)
		return false;
	switch (type) {
	case LOOM_TYPE_Q4_0:
		gv_typed(LOOM_TYPE_Q4_0, a, arow, m0, m1, k, qb, n, out);
		return true;
	case LOOM_TYPE_Q8_0:
		gv_typed(LOOM_TYPE_Q8_0, a, arow, m0, m1, k, qb, n, out);
		return true;
	default:
		return false;
	}
}

#elif defined(CPU_HAVE_Q8)
/* ------------------------------------------------------------------------
 * AVX2, every type.  A 32-value block of a row times a column's block is
 * one pair multiply of unsigned weight bytes u by signed activations
 * (vpmaddubsw: no sum reaches 2^15 here, as u < 64, or |u| <= 127 with
 * the signs moved to the activations for Q8_0) and one widening add
 * (vpmaddwd), 8 sums of 4 values each; lanes 0-3 hold the block's first
 * 16 values, lanes 4-7 the last 16.  The block's scales multiply them
 * as floats.  Offsets: Q4_0's nibbles are 8 above their values, so 8 *
 * sum(q) of the column's block leaves lane 0; a K-quant's mins times
 * the column's d * sum(q) per 32 leave the sum once per super-block;
 * Q6_K's 32 likewise, per 16.
 */

/* Rows of a step: as many accumulators as 16 registers leave room for. */
#define VR 4

INLINE __m256i dot2(__m256i u, __m256i s)
{
	return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s),
				 _mm256_set1_epi16(1));
}

INLINE __m256 bcast(float x)
{
	return _mm256_set1_ps(x);
}

/* Q4_0 and Q8_0: block j of nr rows against nc columns. */
INLINE void v0_step(const enum loom_type type, const char *const *rows,
		    const int nr, const struct qcol *cols, const int nc,
		    int64_t j, size_t ahead, __m256 acc[VR][3])
{
	const size_t bs = type == LOOM_TYPE_Q4_0 ?
		sizeof(struct loom_block_q4_0) : sizeof(struct loom_block_q8_0);
	__m256i a[3], z[3];
	int r, c;

	UNROLL
	for (c = 0; c < nc; c++) {
		a[c] = _mm256_loadu_si256((const __m256i *)(cols[c].qs +
							    32 * j));
		if (type == LOOM_TYPE_Q4_0)
			z[c] = _mm256_zextsi128_si256(
				_mm_cvtsi32_si128(8 * cols[c].n32[j]));
	}
	UNROLL
	for (r = 0; r < nr; r++) {
		const char *blk = rows[r] + (size_t)j * bs;
		__m256i w = block_u8(type, rows[r], j), u = w;
		uint16_t h;
		float d;

		__builtin_prefetch(blk + ahead);
		memcpy(&h, blk, 2);
		d = cpu_f16_to_f32(h);
		if (type == LOOM_TYPE_Q8_0)
			u = _mm256_abs_epi8(w);
		UNROLL
		for (c = 0; c < nc; c++) {
			__m256i t = dot2(u, type == LOOM_TYPE_Q8_0 ?
					 _mm256_sign_epi8(a[c], w) : a[c]);

			if (type == LOOM_TYPE_Q4_0)
				t = _mm256_sub_epi32(t, z[c]);
			acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t),
						    bcast(d * cols[c].d[j]),
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

/* Q4_K, Q5_K, Q6_K: super-block b of nr rows against nc columns. */
INLINE void vk_step(const enum loom_type type, const char *const *rows,
		    const int nr, const struct qcol *cols, const int nc,
		    int64_t b, size_t ahead, __m256 acc[VR][3])
{
	const size_t bs = type == LOOM_TYPE_Q4_K ?
		sizeof(struct loom_block_q4_k) : type == LOOM_TYPE_Q5_K ?
		sizeof(struct loom_block_q5_k) : sizeof(struct loom_block_q6_k);
	int r, c, i;

	UNROLL
	for (r = 0; r < nr; r++) {
		const char *blk = rows[r] + (size_t)b * bs;
		/* Scales per 32 (per 16 for Q6_K) times each column's d. */
		float sd[3][16] __attribute__((aligned(32)));

		for (i = 0; i < (int)bs; i += 64)
			__builtin_prefetch(blk + ahead + i);
		if (type == LOOM_TYPE_Q6_K) {
			const struct loom_block_q6_k *x =
				(const struct loom_block_q6_k *)blk;
			float d = cpu_f16_to_f32(x->d);
			__m256 s0 = bytes_ps(x->scales, d, true);
			__m256 s1 = bytes_ps(x->scales + 8, d, true);

			UNROLL
			for (c = 0; c < nc; c++) {
				/* Each column's d per 32, twice, for the
				 * scales per 16. */
				__m256 dc = _mm256_loadu_ps(cols[c].d + 8 * b);
				__m256 d0 = _mm256_permutevar8x32_ps(dc,
					_mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3,
							  3));
				__m256 d1 = _mm256_permutevar8x32_ps(dc,
					_mm256_setr_epi32(4, 4, 5, 5, 6, 6, 7,
							  7));
				const float *s16 = cols[c].s + 16 * b;

				_mm256_store_ps(sd[c], _mm256_mul_ps(s0, d0));
				_mm256_store_ps(sd[c] + 8,
						_mm256_mul_ps(s1, d1));
				/* The offset 32 of every value. */
				acc[r][c] = _mm256_fnmadd_ps(_mm256_mul_ps(
					s0, bcast(32.0f)),
					_mm256_loadu_ps(s16), acc[r][c]);
				acc[r][c] = _mm256_fnmadd_ps(_mm256_mul_ps(
					s1, bcast(32.0f)),
					_mm256_loadu_ps(s16 + 8), acc[r][c]);
			}
		} else {
			__m256 s, m;

			k_scales(blk, &s, &m);
			UNROLL
			for (c = 0; c < nc; c++) {
				_mm256_store_ps(sd[c], _mm256_mul_ps(s,
					_mm256_loadu_ps(cols[c].d + 8 * b)));
				acc[r][c] = _mm256_fnmadd_ps(m,
					_mm256_loadu_ps(cols[c].s32 + 8 * b),
					acc[r][c]);
			}
		}
		UNROLL
		for (i = 0; i < 8; i++) {
			__m256i u = block_u8(type, rows[r], 8 * b + i);

			UNROLL
			for (c = 0; c < nc; c++) {
				__m256i t = dot2(u, _mm256_loadu_si256(
					(const __m256i *)(cols[c].qs +
							  256 * b + 32 * i)));
				__m256 f = type == LOOM_TYPE_Q6_K ?
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

/* res[r][c] = dot(row r of a, column c) for nr rows and nc columns;
 * the same bytes of the next nr rows, ahead bytes on, are fetched into
 * the caches meanwhile. */
INLINE void v_rows(const enum loom_type type, const char *const *rows,
		   const int nr, const struct qcol *cols, const int nc,
		   int64_t k, size_t ahead, float res[VR][3])
{
	__m256 acc[VR][3];
	int64_t j;
	int r, c;

	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (c = 0; c < 3; c++)
			acc[r][c] = _mm256_setzero_ps();
	if (type == LOOM_TYPE_Q4_0 || type == LOOM_TYPE_Q8_0)
		for (j = 0; j < k / 32; j++)
			v0_step(type, rows, nr, cols, nc, j, ahead, acc);
	else
		for (j = 0; j < k / 256; j++)
			vk_step(type, rows, nr, cols, nc, j, ahead, acc);
	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (c = 0; c < nc; c++)
			res[r][c] = cpu_hsum256(nc == 1 ? _mm256_add_ps(
				acc[r][0], acc[r][1]) : acc[r][c]);
}

/* Rows [m0, m1) of a against n <= 3 columns: rows of Q4_0 and Q8_0 VR at
 * a time against one column, else two at a time. */
INLINE void v_typed(const enum loom_type type, const char *a, size_t arow,
		    int64_t m0, int64_t m1, int64_t k, const char *qb,
		    int64_t n, const struct cpu_cols *out)
{
	const bool wide = n == 1 && (type == LOOM_TYPE_Q4_0 ||
				     type == LOOM_TYPE_Q8_0);
	size_t cb = cpu_q8_col_bytes(k);
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
			v_rows(type, rows, 1, cols, 1, k, ahead, res);
		else if (nr == 1 && n == 2)
			v_rows(type, rows, 1, cols, 2, k, ahead, res);
		else if (nr == 1)
			v_rows(type, rows, 1, cols, 3, k, ahead, res);
		else if (wide)
			v_rows(type, rows, VR, cols, 1, k, ahead, res);
		else if (n == 1)
			v_rows(type, rows, 2, cols, 1, k, ahead, res);
		else if (n == 2)
			v_rows(type, rows, 2, cols, 2, k, ahead, res);
		else
			v_rows(type, rows, 2, cols, 3, k, ahead, res);
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
	(void)vnni;
	if (n > 3)
		return false;
	switch (type) {
#define CASE(T)                                                 \
	case T:                                                 \
		v_typed(T, a, arow, m0, m1, k, qb, n, out);     \
		return true;
	CPU_Q8_TYPES(CASE)
#undef CASE
	default:
		return false;
	}
}

#endif
