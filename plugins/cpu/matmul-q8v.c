/* SPDX-License-Identifier: MIT */
/* matmul-q8v.c - decode products of quantized weights with VNNI: the
 * weights go from their blocks straight into the dot products.
 */
#include "matmul-q8.h"

#if defined(CPU_HAVE_Q8) && QB == 2

/* Rows a step of gv_rows() takes. */
#define QR 4

/*
 * Decode products (fewer columns than a tile has), Q4_0 and Q8_0 with
 * VNNI: the weights go straight from their blocks into the dot products,
 * no row_scales.  Their bytes are made unsigned by an offset z (Q4_0's
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

bool cpu_q8_gv(enum loom_type type, const char *a, size_t arow, int64_t m0,
	       int64_t m1, int64_t k, const char *qb, int64_t n,
	       const struct cpu_cols *out)
{
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

#endif
