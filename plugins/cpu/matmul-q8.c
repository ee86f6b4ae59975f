/* SPDX-License-Identifier: MIT */
/* matmul-q8.c - products of quantized weights (Q8_0, Q4_0, Q4_K, Q5_K,
 * Q6_K) with activations quantized on the fly to 8 bits: int8 x int8 dot
 * products (VNNI where the CPU has it, else AVX2's pair multiplies).  The
 * float kernels and the work division live in ops-matmul.c.
 */
#include "cpu-matmul.h"

#if defined(CPU_HAVE_Q8)

#include <cpuid.h>
#include <stdatomic.h>

#include "cpu-simd.h"

/* Rows of a and columns (rows of b) a tile computes: as many
 * accumulators as the variant has vector registers for. */
#if defined(__AVX512F__)
#define QR 4
#define QC 4
#else
#define QR 2
#define QC 4
#endif

#define INLINE static inline __attribute__((always_inline))

/* ------------------------------------------------------------------------
 * Activations: per block of 32, d = max|x| / 127 and q = round(x / d); per
 * half block of 16, s = d * sum(q), which the weights' offsets multiply.
 */

size_t cpu_q8_col_bytes(int64_t k)
{
	return ((size_t)k + (size_t)k / 32 * sizeof(float) +
		(size_t)k / 16 * sizeof(float) + 63) & ~(size_t)63;
}

struct qcol {
	const int8_t *qs;
	const float *d; /* per 32 */
	const float *s; /* per 16 */
};

static struct qcol col_at(const char *p, int64_t k)
{
	struct qcol c = {
		.qs = (const int8_t *)p,
		.d = (const float *)(p + k),
		.s = (const float *)(p + k) + k / 32,
	};

	return c;
}

void cpu_q8_quantize(const float *x, int64_t k, char *out)
{
	int8_t *qs = (int8_t *)out;
	float *d = (float *)(out + k), *s = d + k / 32;

	for (int64_t b = 0; b < k / 32; b++) {
		const float *xb = x + 32 * b;
		float amax = 0.0f, id;
		int sum0 = 0, sum1 = 0;

		for (int i = 0; i < 32; i++)
			amax = fabsf(xb[i]) > amax ? fabsf(xb[i]) : amax;
		d[b] = amax / 127.0f;
		id = amax > 0.0f ? 127.0f / amax : 0.0f;
		for (int i = 0; i < 32; i++) {
			int q = (int)lrintf(xb[i] * id);

			qs[32 * b + i] = (int8_t)q;
			if (i < 16)
				sum0 += q;
			else
				sum1 += q;
		}
		s[2 * b] = d[b] * (float)sum0;
		s[2 * b + 1] = d[b] * (float)sum1;
	}
}

/* ------------------------------------------------------------------------
 * Weights, one 32-value block j of a row at a time: its values as
 * unsigned bytes u, and per half block of 16 a scale sc and an offset o
 * with value = sc * u - o.  Q8_0 is the exception: its bytes are signed
 * and its offset zero.  The scales and offsets of a whole row come first
 * (row_scales), the values block by block (block_u8).
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
static void row_scales(enum loom_type type, const char *row, int64_t k,
		       float *sc, float *o)
{
	int64_t b, i;

	switch (type) {
	case LOOM_TYPE_Q8_0:
		for (b = 0; b < k / 32; b++) {
			const struct loom_block_q8_0 *x =
				(const struct loom_block_q8_0 *)row + b;

			sc[2 * b] = sc[2 * b + 1] = cpu_f16_to_f32(x->d);
			o[2 * b] = o[2 * b + 1] = 0.0f;
		}
		break;
	case LOOM_TYPE_Q4_0:
		for (b = 0; b < k / 32; b++) {
			const struct loom_block_q4_0 *x =
				(const struct loom_block_q4_0 *)row + b;
			float d = cpu_f16_to_f32(x->d);

			sc[2 * b] = sc[2 * b + 1] = d;
			o[2 * b] = o[2 * b + 1] = 8.0f * d;
		}
		break;
	case LOOM_TYPE_Q4_K:
	case LOOM_TYPE_Q5_K:
		for (b = 0; b < k / 256; b++) {
			const uint8_t *p = (const uint8_t *)row + b *
				(type == LOOM_TYPE_Q4_K ?
				 sizeof(struct loom_block_q4_k) :
				 sizeof(struct loom_block_q5_k));
			uint16_t dh, mh;
			float d, dmin;

			memcpy(&dh, p, 2);
			memcpy(&mh, p + 2, 2);
			d = cpu_f16_to_f32(dh);
			dmin = cpu_f16_to_f32(mh);
			for (i = 0; i < 8; i++) {
				int s, m;

				scale_min_k(p + 4, (int)i, &s, &m);
				sc[16 * b + 2 * i] = sc[16 * b + 2 * i + 1] =
					d * (float)s;
				o[16 * b + 2 * i] = o[16 * b + 2 * i + 1] =
					dmin * (float)m;
			}
		}
		break;
	case LOOM_TYPE_Q6_K:
		for (b = 0; b < k / 256; b++) {
			const struct loom_block_q6_k *x =
				(const struct loom_block_q6_k *)row + b;
			float d = cpu_f16_to_f32(x->d);

			for (i = 0; i < 16; i++) {
				sc[16 * b + i] = d * (float)x->scales[i];
				o[16 * b + i] = 32.0f * sc[16 * b + i];
			}
		}
		break;
	default:
		break;
	}
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
	if (type == LOOM_TYPE_Q4_0) {
		const struct loom_block_q4_0 *x =
			(const struct loom_block_q4_0 *)row + j;
		__m128i v = _mm_loadu_si128((const __m128i *)x->qs);
		__m256i w = _mm256_set_m128i(_mm_srli_epi16(v, 4), v);

		return _mm256_and_si256(w, m4);
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
		__m256i bit = _mm256_set1_epi8((char)(1 << s));

		q = _mm256_and_si256(s & 1 ? _mm256_srli_epi16(q, 4) : q, m4);
		h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bit), bit);
		return _mm256_or_si256(q, _mm256_and_si256(
			h, _mm256_set1_epi8(16)));
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
		hi = _mm256_and_si256(_mm256_srli_epi16(hi, 2 * g),
				      _mm256_set1_epi8(3));
		return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));
	}
}

/* Bytes of a row before its 32-value block j, for prefetching. */
INLINE size_t block_offset(const enum loom_type type, int64_t j)
{
	switch (type) {
	case LOOM_TYPE_Q8_0:
		return (size_t)j * sizeof(struct loom_block_q8_0);
	case LOOM_TYPE_Q4_0:
		return (size_t)j * sizeof(struct loom_block_q4_0);
	case LOOM_TYPE_Q4_K:
		return (size_t)j * sizeof(struct loom_block_q4_k) / 8;
	case LOOM_TYPE_Q5_K:
		return (size_t)j * sizeof(struct loom_block_q5_k) / 8;
	default:
		return (size_t)j * sizeof(struct loom_block_q6_k) / 8;
	}
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
INLINE QI dot_u8s8(QI acc, QI u, QI s, const bool vnni)
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
#if QB == 2
	return _mm512_add_epi32(acc, _mm512_madd_epi16(
		_mm512_maddubs_epi16(u, s), _mm512_set1_epi16(1)));
#else
	return _mm256_add_epi32(acc, _mm256_madd_epi16(
		_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}

/* Weights of blocks j, j + 1 (not with half) as bytes. */
INLINE QI q_weights(const enum loom_type type, const char *row, int64_t j,
		    const bool half)
{
#if QB == 2
	return _mm512_inserti64x4(_mm512_castsi256_si512(
		block_u8(type, row, j)), half ? _mm256_setzero_si256() :
		block_u8(type, row, j + 1), 1);
#else
	(void)half;
	return block_u8(type, row, j);
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

/* The lanes' scales from one per 16 values (sr) or one per 32 (d). */
INLINE VF q_scales16(const float *sr, const bool half)
{
#if QB == 2
	const __m512i quarter = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2,
						 1, 1, 1, 1, 0, 0, 0, 0);

	return _mm512_permutexvar_ps(quarter, _mm512_castps128_ps512(
		half ? _mm_maskz_loadu_ps(3, sr) : _mm_loadu_ps(sr)));
#else
	(void)half;
	return _mm256_set_m128(_mm_broadcast_ss(sr + 1),
			       _mm_broadcast_ss(sr));
#endif
}

INLINE VF q_scales32(const float *d, const bool half)
{
#if QB == 2
	const __m512i halves = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1,
						0, 0, 0, 0, 0, 0, 0, 0);

	return _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(
		half ? _mm_maskz_loadu_ps(1, d) :
		       _mm_castpd_ps(_mm_load_sd((const double *)d))));
#else
	(void)half;
	return _mm256_broadcast_ss(d);
#endif
}

/* Q8_0's signed weights w: |w| for u, and the signs, which move to the
 * activations (q_signed) so that the product stays u8 x s8. */
INLINE QI q_abs(QI w)
{
#if QB == 2
	return _mm512_abs_epi8(w);
#else
	return _mm256_abs_epi8(w);
#endif
}

INLINE QNEG q_signs(QI w)
{
#if QB == 2
	return _mm512_movepi8_mask(w);
#else
	return w;
#endif
}

INLINE QI q_signed(QI a, QNEG neg)
{
#if QB == 2
	return _mm512_mask_sub_epi8(a, neg, _mm512_setzero_si512(), a);
#else
	return _mm256_sign_epi8(a, neg);
#endif
}

INLINE VF q_float(QI t)
{
#if QB == 2
	return _mm512_cvtepi32_ps(t);
#else
	return _mm256_cvtepi32_ps(t);
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

/* One step of tile(): blocks j and (without half) j + 1 of every row and
 * column into acc. */
INLINE void tile_step(const enum loom_type type, const bool vnni,
		      const char *const *rows, const int nr,
		      const struct qcol *cols, const int nc, int64_t j,
		      const float *sc, int64_t n16, VF acc[QR][QC],
		      const bool half)
{
	QI u[QR];
	QNEG neg[QR];
	VF s[QR];
	int r, c;

	UNROLL
	for (r = 0; r < nr; r++) {
		QI w;

		__builtin_prefetch(rows[r] + block_offset(type, j) + 1024);
		w = q_weights(type, rows[r], j, half);
		if (type == LOOM_TYPE_Q8_0) {
			neg[r] = q_signs(w);
			u[r] = q_abs(w);
		} else {
			u[r] = w;
		}
		s[r] = q_scales16(sc + r * n16 + 2 * j, half);
	}
	UNROLL
	for (c = 0; c < nc; c++) {
		QI a = q_acts(cols[c].qs + 32 * j, half);
		VF d = q_scales32(cols[c].d + j, half);

		UNROLL
		for (r = 0; r < nr; r++) {
			QI t = dot_u8s8(q_zero(), u[r], type == LOOM_TYPE_Q8_0 ?
					q_signed(a, neg[r]) : a, vnni);

			acc[r][c] = vfma(q_float(t), vmul(s[r], d),
					 acc[r][c]);
		}
	}
}

/* res[r * QC + c] = dot(row r of a, column c) for nr rows and nc columns
 * (constants at every call, so the accumulators stay in registers); sc
 * and o hold each row's row_scales, k / 16 apart. */
INLINE void tile(const enum loom_type type, const bool vnni,
		 const char *const *rows, const int nr,
		 const struct qcol *cols, const int nc, int64_t k,
		 const float *sc, const float *o, float *res)
{
	VF acc[QR][QC];
	int64_t j, nblk = k / 32, n16 = k / 16;
	int r, c;

	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (c = 0; c < nc; c++)
			acc[r][c] = vzero();
	for (j = 0; j + QB <= nblk; j += QB)
		tile_step(type, vnni, rows, nr, cols, nc, j, sc, n16, acc,
			  false);
	if (j < nblk)
		tile_step(type, vnni, rows, nr, cols, nc, j, sc, n16, acc,
			  true);
	/* The offsets: sum over halves of o * d * sum(q) of the column. */
	UNROLL
	for (r = 0; r < nr; r++) {
		UNROLL
		for (c = 0; c < nc; c++) {
			float off = 0.0f;

			if (type != LOOM_TYPE_Q8_0) {
				const float *orow = o + r * n16;
				VF v = vzero();
				int64_t i = 0;

				for (; i + VLEN <= n16; i += VLEN)
					v = vfma(vload(orow + i),
						 vload(cols[c].s + i), v);
				off = vhsum(v);
				for (; i < n16; i++)
					off += orow[i] * cols[c].s[i];
			}
			res[r * QC + c] = vhsum(acc[r][c]) - off;
		}
	}
}
#define TILE(R, C) tile(type, vnni, rows, R, cols, C, k, sc, o, res)

#if QB == 2
/* ------------------------------------------------------------------------
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
#endif

/* Rows [m0, m1) of a against n columns at qb (cpu_q8_col_bytes(k)
 * apart): QR x QC tiles, the last rows one at a time and the last
 * columns one at a time. */
INLINE void mm_typed(const enum loom_type type, const bool vnni,
		     const char *a, size_t arow, int64_t m0, int64_t m1,
		     int64_t k, const char *qb, int64_t n,
		     const struct cpu_cols *out, float *tmp)
{
	/* Columns in blocks that stay in L2 while the rows pass. */
	const int64_t nblk = 64;
	size_t cb = cpu_q8_col_bytes(k);
	float *sc = tmp, *o = tmp + QR * (k / 16);
	float res[QR * QC];
	int64_t m, j, jb;

#if QB == 2
	if (vnni && n < QC && (type == LOOM_TYPE_Q4_0 ||
			       type == LOOM_TYPE_Q8_0)) {
		gv_typed(type, a, arow, m0, m1, k, qb, n, out);
		return;
	}
#endif
	for (jb = 0; jb < n; jb += nblk) {
		int64_t je = jb + nblk < n ? jb + nblk : n;

		for (m = m0; m < m1;) {
			const char *rows[QR];
			int nr = m1 - m < QR ? 1 : QR, r, c;

			for (r = 0; r < nr; r++) {
				rows[r] = a + (m + r) * arow;
				row_scales(type, rows[r], k, sc + r * (k / 16),
					   o + r * (k / 16));
			}
			for (j = jb; j < je;) {
				struct qcol cols[QC];
				int nc = je - j < QC ? 1 : QC;

				for (c = 0; c < nc; c++)
					cols[c] = col_at(qb + (j + c) * cb, k);
				if (nr == QR && nc == QC)
					TILE(QR, QC);
				else if (nr == QR)
					TILE(QR, 1);
				else if (nc == QC)
					TILE(1, QC);
				else
					TILE(1, 1);
				for (r = 0; r < nr; r++)
					for (c = 0; c < nc; c++)
						cpu_cols_at(out, j + c)[m + r] =
							res[r * QC + c];
				j += nc;
			}
			m += nr;
		}
	}
}

static void mm(enum loom_type type, bool vnni, const char *a, size_t arow,
	       int64_t m0, int64_t m1, int64_t k, const char *qb, int64_t n,
	       const struct cpu_cols *out, float *tmp)
{
	switch (type) {
#define CASE(T)                                                          \
	case T:                                                          \
		if (vnni)                                                \
			mm_typed(T, true, a, arow, m0, m1, k, qb, n, out, \
				 tmp);                                   \
		else                                                     \
			mm_typed(T, false, a, arow, m0, m1, k, qb, n, out, \
				 tmp);                                   \
		break;
	CASE(LOOM_TYPE_Q8_0) CASE(LOOM_TYPE_Q4_0) CASE(LOOM_TYPE_Q4_K)
	CASE(LOOM_TYPE_Q5_K) CASE(LOOM_TYPE_Q6_K)
#undef CASE
	default:
		break;
	}
}

bool cpu_q8_supports(enum loom_type type)
{
	return type == LOOM_TYPE_Q8_0 || type == LOOM_TYPE_Q4_0 ||
	       type == LOOM_TYPE_Q4_K || type == LOOM_TYPE_Q5_K ||
	       type == LOOM_TYPE_Q6_K;
}

size_t cpu_q8_tmp_floats(int64_t k)
{
	return 2 * QR * (size_t)(k / 16);
}

/* The 256-bit VNNI form: AVX512_VNNI (with VL, which the AVX-512
 * variant has) or AVX-VNNI. */
static bool probe_vnni(void)
{
	unsigned int eax, ebx, ecx, edx;

	/* CPUID directly: not every compiler's __builtin_cpu_supports
	 * knows AVX-VNNI. */
#if defined(__AVX512VL__)
	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
		return false;
	return ecx & (1u << 11); /* AVX512_VNNI */
#else
	if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
		return false;
	return eax & (1u << 4); /* AVX-VNNI */
#endif
}

/* probe_vnni() once: CPUID can cost microseconds (a virtual machine's
 * hypervisor answers it), and a decode step does hundreds of products. */
static bool have_vnni(void)
{
	static _Atomic int known; /* 0: not yet, 1: no, 2: yes */
	int v = atomic_load_explicit(&known, memory_order_relaxed);

	if (!v) {
		v = probe_vnni() ? 2 : 1;
		atomic_store_explicit(&known, v, memory_order_relaxed);
	}
	return v == 2;
}

void cpu_q8_mm(enum loom_type type, const char *a, size_t arow, int64_t m0,
	       int64_t m1, int64_t k, const char *qb, int64_t n,
	       const struct cpu_cols *out, float *tmp)
{
	mm(type, have_vnni(), a, arow, m0, m1, k, qb, n, out, tmp);
}

#endif /* CPU_HAVE_Q8 */
