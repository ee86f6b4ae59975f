/* ops-matmul.c - the CPU plugin's mul_mat and mul_mat_id kernels.
 *
 * Two paths: a blocked GEMM (b packed once into panels, a packed per
 * cache block into F32 panels, a register-blocked micro-kernel) for wide
 * b, and a streaming GEMV (each row of a read once, against a few rows of
 * b) for decode-sized b.  The SIMD flavour is chosen at compile time; the
 * plugin is built once per instruction set.
 */
#include <stdint.h>
#include <string.h>

#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#include "cpu-matmul.h"

/* Micro-kernel tile (MR rows of a by NR rows of b), cache blocks (an
 * MC x KC block of packed a stays in L2 while KC x NR panels of b pass
 * through L1) and how many k steps ahead the micro-kernel fetches a. */
#if defined(__AVX512F__)
#define MR 32
#define NR 12
#define KC 384
#define MC 768
#define PFD 8
#elif defined(__AVX2__) && defined(__FMA__)
#define MR 16
#define NR 6
#define KC 256
#define MC 512
#else
#define MR 8
#define NR 4
#define KC 256
#define MC 256
#endif

/* Rows of b up to which the streaming GEMV beats packing for the GEMM. */
#define GEMV_NB 8

#define ALIGN 64

/* Fully unrolls a loop of constant trip count. */
#define UNROLL _Pragma("GCC unroll 16")

static inline size_t align_up(size_t n)
{
	return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static inline int64_t div_up(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* Byte offset of element k of a row (k on a block boundary). */
static inline size_t row_offset(enum loom_type type, int64_t k, size_t nb0)
{
	return (size_t)(k / loom_type_block_size(type)) * nb0;
}

/* Converts n values of a row to F32 (see cpu_load_f32). */
#define to_f32 cpu_load_f32

/* ------------------------------------------------------------------------
 * GEMV: out[j][m] = dot(row m of a, bv[j]) for a few F32 vectors bv[j],
 * reading each row of a once.  A few rows of a go together, so that
 * several streams are in flight and each load of b serves them all.
 */

#if defined(__AVX512F__)
#define VF __m512
#define VLEN 16
#define vzero() _mm512_setzero_ps()
#define vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vmul(a, b) _mm512_mul_ps(a, b)
#define vload(p) _mm512_loadu_ps(p)
#define vhsum(v) _mm512_reduce_add_ps(v)
static inline VF vload_f16(const uint16_t *p)
{
	return _mm512_cvtph_ps(_mm256_loadu_si256((const void *)p));
}

static inline VF vload_bf16(const uint16_t *p)
{
	__m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const void *)p));

	return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

/* VLEN int8 values as floats. */
static inline VF vload_q8(const int8_t *q)
{
	return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
		_mm_loadu_si128((const void *)q)));
}
#define vset1(x) _mm512_set1_ps(x)
#elif defined(__AVX2__) && defined(__FMA__)
#define VF __m256
#define VLEN 8
#define vzero() _mm256_setzero_ps()
#define vfma(a, b, c) _mm256_fmadd_ps(a, b, c)
#define vmul(a, b) _mm256_mul_ps(a, b)
#define vload(p) _mm256_loadu_ps(p)
static inline float vhsum(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v),
			      _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}

static inline VF vload_f16(const uint16_t *p)
{
#if defined(__F16C__)
	return _mm256_cvtph_ps(_mm_loadu_si128((const void *)p));
#else
	float t[8];
	int i;

	for (i = 0; i < 8; i++)
		t[i] = cpu_f16_to_f32(p[i]);
	return _mm256_loadu_ps(t);
#endif
}

static inline VF vload_bf16(const uint16_t *p)
{
	__m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const void *)p));

	return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

static inline VF vload_q8(const int8_t *q)
{
	return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
		_mm_loadl_epi64((const void *)q)));
}
#define vset1(x) _mm256_set1_ps(x)
#endif

/* How far ahead (bytes) each row of a is fetched: past the 4 KiB page
 * the hardware's stream prefetcher stops at.  Q8_0 rows, a little over
 * a page each, gain from fetching the rows that come next. */
#define GEMV_PF 2048
#define GEMV_PF_Q8 8192

/* Rows of a that go together against nb vectors of b: several streams
 * in flight, and each load of b serves them all. */
#define GEMV_MAXR 8
#if defined(VF) && VLEN == 16
#define GEMV_ROWS(nb) ((nb) <= 4 ? 4 : 2)
#elif defined(VF)
#define GEMV_ROWS(nb) ((nb) == 1 ? 4 : (nb) <= 4 ? 2 : 1)
#else
#define GEMV_ROWS(nb) 1
#endif

/* res[r * GEMV_NB + j] = dot(row r of a, bv[j]) for nr rows of type,
 * arow bytes apart.  type, nr and nb are compile-time constants at every
 * call, so the loops unroll and the accumulators stay in registers. */
static inline __attribute__((always_inline)) void
dot_rows(const enum loom_type type, const char *a, size_t arow, const int nr,
	 const float *const *bv, const int nb, int64_t k, float *res)
{
	int64_t i = 0;
	int r, j;

#if defined(VF)
	VF acc[GEMV_MAXR][GEMV_NB];

	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (j = 0; j < nb; j++)
			acc[r][j] = vzero();
	if (type == LOOM_TYPE_Q8_0) {
		const struct loom_block_q8_0 *blk[GEMV_MAXR];

		UNROLL
		for (r = 0; r < nr; r++)
			blk[r] = (const void *)(a + r * arow);
		for (; i < k; i += LOOM_QK8_0) {
			UNROLL
			for (r = 0; r < nr; r++) {
				const struct loom_block_q8_0 *q = blk[r]++;
				VF d = vset1(cpu_f16_to_f32(q->d));
				VF av[LOOM_QK8_0 / VLEN];
				int h;

				__builtin_prefetch((const char *)q + GEMV_PF_Q8);
				UNROLL
				for (h = 0; h < LOOM_QK8_0 / VLEN; h++)
					av[h] = vload_q8(q->qs + h * VLEN);
				if (nb == 1) {
					/* Scale the block's sum, not its
					 * values. */
					const float *b0 = bv[0] + i;
					VF t = vmul(av[0], vload(b0));

					UNROLL
					for (h = 1; h < LOOM_QK8_0 / VLEN; h++)
						t = vfma(av[h],
							 vload(b0 + h * VLEN),
							 t);
					acc[r][0] = vfma(d, t, acc[r][0]);
					continue;
				}
				UNROLL
				for (h = 0; h < LOOM_QK8_0 / VLEN; h++)
					av[h] = vmul(av[h], d);
				UNROLL
				for (j = 0; j < nb; j++) {
					const float *bj = bv[j] + i;

					UNROLL
					for (h = 0; h < LOOM_QK8_0 / VLEN; h++)
						acc[r][j] = vfma(av[h],
							vload(bj + h * VLEN),
							acc[r][j]);
				}
			}
		}
	} else {
		for (; i + VLEN <= k; i += VLEN) {
			VF bb[GEMV_NB];

			UNROLL
			for (j = 0; j < nb; j++)
				bb[j] = vload(bv[j] + i);
			UNROLL
			for (r = 0; r < nr; r++) {
				const char *row = a + r * arow;
				const uint16_t *h16 = (const uint16_t *)row;
				VF av;

				/* The same place one group of rows on,
				 * into L2: a fixed distance ahead lands in
				 * rows already in flight when rows are
				 * short, as the split halves of a
				 * tensor-parallel layer are. */
				__builtin_prefetch(row + nr * arow + i *
					(type == LOOM_TYPE_F32 ? 4 : 2), 0, 2);
				if (type == LOOM_TYPE_F32)
					av = vload((const float *)row + i);
				else if (type == LOOM_TYPE_F16)
					av = vload_f16(h16 + i);
				else
					av = vload_bf16(h16 + i);
				UNROLL
				for (j = 0; j < nb; j++)
					acc[r][j] = vfma(av, bb[j], acc[r][j]);
			}
		}
	}
	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (j = 0; j < nb; j++)
			res[r * GEMV_NB + j] = vhsum(acc[r][j]);
#else
	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (j = 0; j < nb; j++)
			res[r * GEMV_NB + j] = 0.0f;
	if (type == LOOM_TYPE_Q8_0) {
		UNROLL
		for (r = 0; r < nr; r++) {
			const struct loom_block_q8_0 *q =
				(const void *)(a + r * arow);

			for (i = 0; i < k; i += LOOM_QK8_0, q++) {
				float d = cpu_f16_to_f32(q->d);

				UNROLL
				for (j = 0; j < nb; j++) {
					float s = 0.0f;
					int h;

					UNROLL
					for (h = 0; h < LOOM_QK8_0; h++)
						s += q->qs[h] * bv[j][i + h];
					res[r * GEMV_NB + j] += d * s;
				}
			}
		}
	} else if (type == LOOM_TYPE_F32) {
		UNROLL
		for (r = 0; r < nr; r++) {
			const float *row = (const float *)(a + r * arow);

			UNROLL
			for (j = 0; j < nb; j++) {
				float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
				int64_t q;

				for (q = 0; q + 4 <= k; q += 4) {
					s0 += row[q] * bv[j][q];
					s1 += row[q + 1] * bv[j][q + 1];
					s2 += row[q + 2] * bv[j][q + 2];
					s3 += row[q + 3] * bv[j][q + 3];
				}
				res[r * GEMV_NB + j] = (s0 + s1) + (s2 + s3);
			}
		}
		i = k & ~(int64_t)3;
	}
#endif
	/* The tail the vector loops left (never for Q8_0). */
	for (; i < k; i++) {
		UNROLL
		for (r = 0; r < nr; r++) {
			const char *row = a + r * arow;
			float av;

			if (type == LOOM_TYPE_F32)
				av = ((const float *)row)[i];
			else if (type == LOOM_TYPE_F16)
				av = cpu_f16_to_f32(((const uint16_t *)row)[i]);
			else
				av = cpu_bf16_to_f32(((const uint16_t *)row)[i]);
			UNROLL
			for (j = 0; j < nb; j++)
				res[r * GEMV_NB + j] += av * bv[j][i];
		}
	}
}

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define HAVE_Q8_I16 1

/* Quantizes k floats (k a multiple of 32) to int16 with one scale per
 * block of 32: x[i] ~ q[i] * s[i / 32].  The error is 2^-16 of each
 * block's largest value, far below what Q8_0 weights carry. */
static void quantize_i16(const float *x, int64_t k, int16_t *q, float *s)
{
	int64_t i;

	for (i = 0; i < k; i += LOOM_QK8_0) {
		__m512 x0 = _mm512_loadu_ps(x + i);
		__m512 x1 = _mm512_loadu_ps(x + i + 16);
		float amax = _mm512_reduce_max_ps(_mm512_max_ps(
			_mm512_abs_ps(x0), _mm512_abs_ps(x1)));
		float scale = amax / 32767.0f;
		__m512 inv = _mm512_set1_ps(amax > 0.0f ? 32767.0f / amax :
							  0.0f);

		s[i / LOOM_QK8_0] = scale;
		_mm256_storeu_si256((void *)(q + i), _mm512_cvtsepi32_epi16(
			_mm512_cvtps_epi32(_mm512_mul_ps(x0, inv))));
		_mm256_storeu_si256((void *)(q + i + 16),
				    _mm512_cvtsepi32_epi16(_mm512_cvtps_epi32(
					    _mm512_mul_ps(x1, inv))));
	}
}

/* res[r] = dot(row r of Q8_0 a, b) for nr (constant) rows, b quantized
 * by quantize_i16: int8 x int16 products summed exactly in int32 per
 * block, then scaled once. */
static inline __attribute__((always_inline)) void
dot_q8_i16(const char *a, size_t arow, const int nr, const int16_t *qb,
	   const float *sb, int64_t k, float *res)
{
	const struct loom_block_q8_0 *blk[GEMV_MAXR];
	__m512 acc[GEMV_MAXR];
	int64_t i;
	int r;

	UNROLL
	for (r = 0; r < nr; r++) {
		blk[r] = (const void *)(a + r * arow);
		acc[r] = _mm512_setzero_ps();
	}
	for (i = 0; i < k; i += LOOM_QK8_0) {
		__m512i bq = _mm512_loadu_si512((const void *)(qb + i));
		__m512 bs = _mm512_set1_ps(sb[i / LOOM_QK8_0]);

		UNROLL
		for (r = 0; r < nr; r++) {
			const struct loom_block_q8_0 *q = blk[r]++;
			__m512i a16 = _mm512_cvtepi8_epi16(
				_mm256_loadu_si256((const void *)q->qs));
			__m512 f = _mm512_cvtepi32_ps(
				_mm512_madd_epi16(a16, bq));
			__m512 d = _mm512_cvtph_ps(_mm256_set1_epi16(
				(short)q->d));

			__builtin_prefetch((const char *)q + nr * arow);
			acc[r] = _mm512_fmadd_ps(f, _mm512_mul_ps(d, bs),
						 acc[r]);
		}
	}
	UNROLL
	for (r = 0; r < nr; r++)
		res[r] = _mm512_reduce_add_ps(acc[r]);
}

/* out[m] = dot(row m of Q8_0 a, b) for m in [m0, m1), b a quantize_i16
 * vector.  Eight rows go together, and each row fetches the same place
 * in the row eight further on: Q8_0 rows are barely over a page, so a
 * fixed distance ahead would mostly land in rows already in flight. */
static void gemv_q8_i16(const char *a, size_t arow, int64_t m0, int64_t m1,
			int64_t k, const int16_t *qb, const float *sb,
			float *out)
{
	int64_t m = m0;

	for (; m + 8 <= m1; m += 8)
		dot_q8_i16(a + m * arow, arow, 8, qb, sb, k, out + m);
	for (; m < m1; m++)
		dot_q8_i16(a + m * arow, arow, 1, qb, sb, k, out + m);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define HAVE_BF16_DP 1
#define BF16_DP_TARGET __attribute__((target("avx512bf16")))

/* res[r] = dot(row r of BF16 a, b) for nr (constant) rows, with the
 * AVX512_BF16 pair dot product: b is rounded to BF16 once per 32 values
 * (shared by every row), so each 64-byte line of a costs one load and one
 * vdpbf16ps, and is fetched once, as for F32.  Rounding b to BF16 adds a
 * relative error of 2^-9 per product, the size of the weights' own. */
static inline __attribute__((always_inline)) BF16_DP_TARGET void
dot_bf16_dp(const char *a, size_t arow, const int nr, const float *b,
	    int64_t k, float *res)
{
	__m512 acc[GEMV_MAXR];
	int64_t i = 0;
	int r;

	UNROLL
	for (r = 0; r < nr; r++)
		acc[r] = _mm512_setzero_ps();
	for (; i + 32 <= k; i += 32) {
		__m512bh bb = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(b + i + 16),
						  _mm512_loadu_ps(b + i));

		UNROLL
		for (r = 0; r < nr; r++) {
			const char *row = a + r * arow + 2 * i;

			/* The same place in the row nr further on, one
			 * group ahead, into L2 only: measured faster than
			 * a fixed 2 KiB, as for Q8_0. */
			__builtin_prefetch(row + nr * arow, 0, 2);
			acc[r] = _mm512_dpbf16_ps(acc[r], (__m512bh)
				_mm512_loadu_si512((const void *)row), bb);
		}
	}
	UNROLL
	for (r = 0; r < nr; r++) {
		const uint16_t *row = (const uint16_t *)(a + r * arow);
		float s = _mm512_reduce_add_ps(acc[r]);
		int64_t t;

		for (t = i; t < k; t++)
			s += cpu_bf16_to_f32(row[t]) * b[t];
		res[r] = s;
	}
}

/* out[m] = dot(row m of BF16 a, b) for m in [m0, m1).  Eight rows go
 * together: BF16 rows are half the bytes of F32 ones, so twice the rows
 * keep as many lines in flight. */
static BF16_DP_TARGET void gemv_bf16_dp(const char *a, size_t arow,
					int64_t m0, int64_t m1, int64_t k,
					const float *b, float *out)
{
	int64_t m = m0;

	for (; m + 8 <= m1; m += 8)
		dot_bf16_dp(a + m * arow, arow, 8, b, k, out + m);
	for (; m < m1; m++)
		dot_bf16_dp(a + m * arow, arow, 1, b, k, out + m);
}
#endif

#if defined(__AVX512F__)
#define HAVE_F16_ROWS 1

/* res[r] = dot(row r of F16 a, b) for nr (constant) rows: a whole
 * 64-byte line of each row per step (two vcvtph2ps from memory), one
 * prefetch per line, and each load of b shared by every row. */
static inline __attribute__((always_inline)) void
dot_f16_rows(const char *a, size_t arow, const int nr, const float *b,
	     int64_t k, float *res)
{
	__m512 acc[GEMV_MAXR][2];
	int64_t i = 0;
	int r;

	UNROLL
	for (r = 0; r < nr; r++)
		acc[r][0] = acc[r][1] = _mm512_setzero_ps();
	for (; i + 32 <= k; i += 32) {
		__m512 b0 = _mm512_loadu_ps(b + i);
		__m512 b1 = _mm512_loadu_ps(b + i + 16);

		UNROLL
		for (r = 0; r < nr; r++) {
			const char *row = a + r * arow + 2 * i;

			/* One group of rows ahead, into L2, as for BF16. */
			__builtin_prefetch(row + nr * arow, 0, 2);
			acc[r][0] = _mm512_fmadd_ps(_mm512_cvtph_ps(
				_mm256_loadu_si256((const void *)row)), b0,
				acc[r][0]);
			acc[r][1] = _mm512_fmadd_ps(_mm512_cvtph_ps(
				_mm256_loadu_si256((const void *)(row + 32))),
				b1, acc[r][1]);
		}
	}
	UNROLL
	for (r = 0; r < nr; r++) {
		const uint16_t *row = (const uint16_t *)(a + r * arow);
		float s = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0],
							     acc[r][1]));
		int64_t t;

		for (t = i; t < k; t++)
			s += cpu_f16_to_f32(row[t]) * b[t];
		res[r] = s;
	}
}

/* out[m] = dot(row m of F16 a, b) for m in [m0, m1), eight rows at a
 * time: as many lines in flight as four F32 rows. */
static void gemv_f16_rows(const char *a, size_t arow, int64_t m0,
			  int64_t m1, int64_t k, const float *b, float *out)
{
	int64_t m = m0;

	for (; m + 8 <= m1; m += 8)
		dot_f16_rows(a + m * arow, arow, 8, b, k, out + m);
	for (; m < m1; m++)
		dot_f16_rows(a + m * arow, arow, 1, b, k, out + m);
}
#endif

/* Rows [m0, m1) of one type against nb (constant) vectors. */
static inline __attribute__((always_inline)) void
gemv_typed(const enum loom_type type, const char *a, size_t arow,
	   int64_t m0, int64_t m1, int64_t k, const float *const *bv,
	   const int nb, float *const *out)
{
	const int nr = GEMV_ROWS(nb);
	float res[GEMV_MAXR * GEMV_NB];
	int64_t m = m0;
	int r, j;

	for (; m + nr <= m1; m += nr) {
		dot_rows(type, a + m * arow, arow, nr, bv, nb, k, res);
		for (r = 0; r < nr; r++)
			for (j = 0; j < nb; j++)
				out[j][m + r] = res[r * GEMV_NB + j];
	}
	for (; m < m1; m++) {
		dot_rows(type, a + m * arow, arow, 1, bv, nb, k, res);
		for (j = 0; j < nb; j++)
			out[j][m] = res[j];
	}
}

static inline __attribute__((always_inline)) void
gemv_nb(enum loom_type type, const char *a, size_t arow, int64_t m0,
	int64_t m1, int64_t k, const float *const *bv, const int nb,
	float *const *out)
{
	switch (type) {
	case LOOM_TYPE_F32:
		gemv_typed(LOOM_TYPE_F32, a, arow, m0, m1, k, bv, nb, out);
		break;
	case LOOM_TYPE_F16:
		gemv_typed(LOOM_TYPE_F16, a, arow, m0, m1, k, bv, nb, out);
		break;
	case LOOM_TYPE_BF16:
		gemv_typed(LOOM_TYPE_BF16, a, arow, m0, m1, k, bv, nb, out);
		break;
	case LOOM_TYPE_Q8_0:
		gemv_typed(LOOM_TYPE_Q8_0, a, arow, m0, m1, k, bv, nb, out);
		break;
	default:
		break;
	}
}

/* out[j][m] = dot(a row m, bv[j]) for m in [m0, m1), j < nb <= GEMV_NB.
 * Rows of a are arow bytes apart and contiguous along dimension 0. */
static void gemv_rows(enum loom_type type, const char *a, size_t arow,
		      int64_t m0, int64_t m1, int64_t k,
		      const float *const *bv, int nb, float *const *out)
{
	switch (nb) {
#define CASE_NB(n)                                                       \
	case n:                                                          \
		gemv_nb(type, a, arow, m0, m1, k, bv, n, out);           \
		break;
	CASE_NB(1) CASE_NB(2) CASE_NB(3) CASE_NB(4)
	CASE_NB(5) CASE_NB(6) CASE_NB(7) CASE_NB(8)
#undef CASE_NB
	default:
		break;
	}
}

/* ------------------------------------------------------------------------
 * GEMM micro-kernel: the MR x NR tile c[j][i] (+)= sum over kc of
 * a[k][i] * b[k][j], from packed panels a (kc x MR) and b (kc x NR).  Only
 * the first mr rows and nr columns are written; acc adds to c.
 */

#if defined(__AVX512F__)
static void ukernel(int64_t kc, const float *restrict a,
		    const float *restrict b, float *const *c, int mr, int nr,
		    int acc)
{
	__m512 c0_0 = _mm512_setzero_ps(), c0_1 = c0_0, c1_0 = c0_0,
	       c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0, c3_0 = c0_0,
	       c3_1 = c0_0, c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0,
	       c5_1 = c0_0, c6_0 = c0_0, c6_1 = c0_0, c7_0 = c0_0,
	       c7_1 = c0_0, c8_0 = c0_0, c8_1 = c0_0, c9_0 = c0_0,
	       c9_1 = c0_0, c10_0 = c0_0, c10_1 = c0_0, c11_0 = c0_0,
	       c11_1 = c0_0;
	__mmask16 k0, k1;
	int64_t k;
	int j;

	/* The tile's rows of dst are far apart: fetch them early. */
	for (j = 0; j < nr; j++) {
		_mm_prefetch((const char *)c[j], _MM_HINT_T0);
		_mm_prefetch((const char *)(c[j] + 16), _MM_HINT_T0);
	}
	for (k = 0; k < kc; k++) {
		__m512 a0 = _mm512_load_ps(a);
		__m512 a1 = _mm512_load_ps(a + 16);
		__m512 bb;

		_mm_prefetch((const char *)(a + PFD * MR), _MM_HINT_T0);
#define STEP(j)                                                      \
		bb = _mm512_set1_ps(b[j]);                          \
		c##j##_0 = _mm512_fmadd_ps(a0, bb, c##j##_0);       \
		c##j##_1 = _mm512_fmadd_ps(a1, bb, c##j##_1);
		STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5)
		STEP(6) STEP(7) STEP(8) STEP(9) STEP(10) STEP(11)
#undef STEP
		a += MR;
		b += NR;
	}

	k0 = mr >= 16 ? 0xffff : (__mmask16)((1u << mr) - 1);
	k1 = mr >= 32 ? 0xffff : mr <= 16 ? 0 :
	     (__mmask16)((1u << (mr - 16)) - 1);
#define STORE(j)                                                         \
	if (j < nr) {                                                    \
		float *p = c[j];                                         \
		if (acc) {                                               \
			c##j##_0 = _mm512_add_ps(c##j##_0,               \
				_mm512_maskz_loadu_ps(k0, p));          \
			c##j##_1 = _mm512_add_ps(c##j##_1,               \
				_mm512_maskz_loadu_ps(k1, p + 16));     \
		}                                                        \
		_mm512_mask_storeu_ps(p, k0, c##j##_0);                  \
		_mm512_mask_storeu_ps(p + 16, k1, c##j##_1);             \
	}
	STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
	STORE(6) STORE(7) STORE(8) STORE(9) STORE(10) STORE(11)
#undef STORE
}
#elif defined(__AVX2__) && defined(__FMA__)
static void ukernel(int64_t kc, const float *restrict a,
		    const float *restrict b, float *const *c, int mr, int nr,
		    int acc)
{
	__m256 c0_0 = _mm256_setzero_ps(), c0_1 = c0_0, c1_0 = c0_0,
	       c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0, c3_0 = c0_0,
	       c3_1 = c0_0, c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0,
	       c5_1 = c0_0;
	float tile[2 * 8];
	int64_t k;
	int j, i;

	for (k = 0; k < kc; k++) {
		__m256 a0 = _mm256_load_ps(a);
		__m256 a1 = _mm256_load_ps(a + 8);
		__m256 bb;

#define STEP(j)                                                      \
		bb = _mm256_broadcast_ss(b + j);                    \
		c##j##_0 = _mm256_fmadd_ps(a0, bb, c##j##_0);       \
		c##j##_1 = _mm256_fmadd_ps(a1, bb, c##j##_1);
		STEP(0) STEP(1) STEP(2) STEP(3) STEP(4) STEP(5)
#undef STEP
		a += MR;
		b += NR;
	}

#define STORE(j)                                                         \
	if (j < nr) {                                                    \
		float *p = c[j];                                         \
		if (mr == MR) {                                          \
			if (acc) {                                       \
				c##j##_0 = _mm256_add_ps(c##j##_0,       \
					_mm256_loadu_ps(p));            \
				c##j##_1 = _mm256_add_ps(c##j##_1,       \
					_mm256_loadu_ps(p + 8));        \
			}                                                \
			_mm256_storeu_ps(p, c##j##_0);                   \
			_mm256_storeu_ps(p + 8, c##j##_1);               \
		} else {                                                 \
			_mm256_storeu_ps(tile, c##j##_0);                \
			_mm256_storeu_ps(tile + 8, c##j##_1);            \
			for (i = 0; i < mr; i++)                         \
				p[i] = acc ? p[i] + tile[i] : tile[i];   \
		}                                                        \
	}
	STORE(0) STORE(1) STORE(2) STORE(3) STORE(4) STORE(5)
#undef STORE
	(void)j;
}
#else
static void ukernel(int64_t kc, const float *restrict a,
		    const float *restrict b, float *const *c, int mr, int nr,
		    int acc)
{
	float t[NR][MR] = { { 0 } };
	int64_t k;
	int i, j;

	for (k = 0; k < kc; k++) {
		for (j = 0; j < NR; j++)
			for (i = 0; i < MR; i++)
				t[j][i] += a[i] * b[j];
		a += MR;
		b += NR;
	}
	for (j = 0; j < nr; j++)
		for (i = 0; i < mr; i++)
			c[j][i] = acc ? c[j][i] + t[j][i] : t[j][i];
}
#endif

#if defined(__AVX512F__)
/* Transposes the 16 x 16 block r in place: r[i] becomes column i. */
static inline void transpose16(__m512 r[16])
{
	__m512 t[16];
	int i;

	UNROLL
	for (i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
	}
	UNROLL
	for (i = 0; i < 4; i++) {
		__m512d t0 = _mm512_castps_pd(t[4 * i]);
		__m512d t1 = _mm512_castps_pd(t[4 * i + 1]);
		__m512d t2 = _mm512_castps_pd(t[4 * i + 2]);
		__m512d t3 = _mm512_castps_pd(t[4 * i + 3]);

		r[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(t0, t2));
		r[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(t0, t2));
		r[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(t1, t3));
		r[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(t1, t3));
	}
	/* r[4g + j] now holds, in 128-bit lane l, column 4l + j of rows
	 * 4g..4g+3. */
	UNROLL
	for (i = 0; i < 4; i++) {
		__m512 u0 = _mm512_shuffle_f32x4(r[i], r[4 + i], 0x88);
		__m512 u1 = _mm512_shuffle_f32x4(r[i], r[4 + i], 0xdd);
		__m512 u2 = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0x88);
		__m512 u3 = _mm512_shuffle_f32x4(r[8 + i], r[12 + i], 0xdd);

		t[i] = _mm512_shuffle_f32x4(u0, u2, 0x88);
		t[8 + i] = _mm512_shuffle_f32x4(u0, u2, 0xdd);
		t[4 + i] = _mm512_shuffle_f32x4(u1, u3, 0x88);
		t[12 + i] = _mm512_shuffle_f32x4(u1, u3, 0xdd);
	}
	UNROLL
	for (i = 0; i < 16; i++)
		r[i] = t[i];
}
#endif

/* dst[i * ld + q] = rows[q][i] for q < nr, i < n, and zero for
 * nr <= q < ncols (nr <= ncols <= 16): a block of rows becomes a panel. */
static void transpose_rows(const float *const *rows, int nr, int64_t n,
			   float *restrict dst, int ld, int ncols)
{
	int64_t i = 0;
	int q;

#if defined(__AVX512F__)
	__mmask16 cm = (__mmask16)((1u << ncols) - 1);

	for (; i < n; i += 16) {
		int cnt = n - i < 16 ? (int)(n - i) : 16;
		__mmask16 lm = (__mmask16)((1u << cnt) - 1);
		__m512 r[16];

		for (q = 0; q < 16; q++)
			r[q] = q < nr ? _mm512_maskz_loadu_ps(lm, rows[q] + i) :
					_mm512_setzero_ps();
		transpose16(r);
		for (q = 0; q < cnt; q++)
			_mm512_mask_storeu_ps(dst + (i + q) * ld, cm, r[q]);
	}
#else
	for (; i < n; i++) {
		for (q = 0; q < nr; q++)
			dst[i * ld + q] = rows[q][i];
		for (; q < ncols; q++)
			dst[i * ld + q] = 0.0f;
	}
#endif
}

/* Packs nv rows of b (any type; row j at rows[j], elements nb0 bytes
 * apart) into the panel p laid out [k][NR], zero-padded.  tmp holds
 * NR x k floats for rows that need converting. */
static void pack_b_panel(enum loom_type type, const char *const *rows,
			 size_t nb0, int nv, int64_t k, float *restrict p,
			 float *restrict tmp)
{
	const float *src[NR];
	int j;

	for (j = 0; j < nv; j++) {
		if (type == LOOM_TYPE_F32 && nb0 == sizeof(float)) {
			src[j] = (const float *)rows[j];
		} else {
			to_f32(type, rows[j], nb0, tmp + j * k, k);
			src[j] = tmp + j * k;
		}
	}
	transpose_rows(src, nv, k, p, NR, NR);
}

/* Packs rows [m0, m0 + mc) x columns [k0, k0 + kc) of a into MR-row
 * panels laid out [panel][k][MR], zero-padded past mc.  tmp holds MR x kc
 * floats for rows that need converting. */
static void pack_a_block(enum loom_type type, const char *a, size_t arow,
			 size_t nb0, int64_t m0, int64_t mc, int64_t k0,
			 int64_t kc, float *restrict p, float *restrict tmp)
{
	bool direct = type == LOOM_TYPE_F32 && nb0 == sizeof(float);
	int64_t r0;

	for (r0 = 0; r0 < mc; r0 += MR) {
		int nr = mc - r0 < MR ? (int)(mc - r0) : MR;
		const float *src[MR];
		int q, h;

		for (q = 0; q < nr; q++) {
			const char *row = a + (m0 + r0 + q) * arow +
					  row_offset(type, k0, nb0);

			if (direct) {
				src[q] = (const float *)row;
			} else {
				to_f32(type, row, nb0, tmp + q * kc, kc);
				src[q] = tmp + q * kc;
			}
		}
		for (h = 0; h < MR; h += 16) {
			int n = nr - h < 0 ? 0 : nr - h > 16 ? 16 : nr - h;

			transpose_rows(src + h, n, kc, p + r0 * kc + h, MR,
				       MR < 16 ? MR : 16);
		}
	}
}

/* Brings cache lines [from, to) of p towards L2. */
static inline void prefetch_lines(const char *p, int64_t from, int64_t to)
{
	for (; from < to; from++)
		__builtin_prefetch(p + 64 * from, 0, 2);
}

/* Scratch of one thread: an a block in packing and a row in conversion. */
struct scratch {
	float *ap;  /* MC x KC */
	float *tmp; /* rows in conversion, see scratch_floats() */
};

/* dst column j, rows [m0, m1) = a rows times b row j, for every b row of
 * the packed panels bp (nb rows, NR per panel, each k x NR). */
static void gemm_rows(enum loom_type type, const char *a, size_t arow,
		      size_t nb0, int64_t m0, int64_t m1, int64_t k,
		      const float *bp, int64_t nb, const struct cpu_cols *c,
		      const struct scratch *s)
{
	/* Blocks of even size, so that none is a small leftover. */
	int64_t mcb = div_up(div_up(m1 - m0, div_up(m1 - m0, MC)), MR) * MR;
	int64_t blck = loom_type_block_size(type) > LOOM_QK8_0 ?
		       loom_type_block_size(type) : LOOM_QK8_0;
	int64_t kcb = div_up(div_up(k, div_up(k, KC)), blck) * blck;
	int64_t pc, ic, jr, ir;

	/* Whole blocks per step, no more than the packing space holds. */
	if (kcb > KC)
		kcb = KC / blck * blck;
	for (ic = m0; ic < m1; ic += mcb) {
		int64_t mc = m1 - ic < mcb ? m1 - ic : mcb;

		for (pc = 0; pc < k; pc += kcb) {
			int64_t kc = k - pc < kcb ? k - pc : kcb;

			pack_a_block(type, a, arow, nb0, ic, mc, pc, kc, s->ap,
				     s->tmp);
			for (jr = 0; jr < nb; jr += NR) {
				const float *bpanel = bp + jr * k + pc * NR;
				int nr = nb - jr < NR ? (int)(nb - jr) : NR;
				float *cp[NR];
				int j;

				/* The next panel of b comes into L2 while
				 * this one is in use, a few lines per tile. */
				const char *next = (const char *)(bpanel +
								  NR * k);
				int64_t lines = jr + NR < nb ? kc * NR *
						(int64_t)sizeof(float) / 64 : 0;
				int64_t step = div_up(lines, div_up(mc, MR));
				int64_t l = 0;

				for (j = 0; j < nr; j++)
					cp[j] = cpu_cols_at(c, jr + j) + ic;
				for (ir = 0; ir < mc; ir += MR) {
					int mr = mc - ir < MR ? (int)(mc - ir) :
								MR;
					int64_t lend = l + step < lines ?
						       l + step : lines;

					prefetch_lines(next, l, lend);
					l = lend;
					ukernel(kc, s->ap + ir * kc, bpanel, cp,
						mr, nr, pc > 0);
					for (j = 0; j < nr; j++)
						cp[j] += MR;
				}
			}
		}
	}
}

/* ------------------------------------------------------------------------
 * Work division and the work buffer.
 */

/* Splits [0, n) into parts aligned to gran; returns part i of parts. */
static void split_range(int64_t n, int64_t gran, int64_t parts, int64_t i,
			int64_t *start, int64_t *end)
{
	int64_t units = div_up(n, gran);
	int64_t s = units * i / parts * gran;
	int64_t e = units * (i + 1) / parts * gran;

	*start = s < n ? s : n;
	*end = e < n ? e : n;
}

/* Whether the row kernels read a's rows as they are: rows of a type they
 * know, contiguous along dimension 0. */
static bool a_rows_contiguous(const struct loom_tensor *a)
{
	switch (a->type) {
	case LOOM_TYPE_Q8_0:
		return true;
	case LOOM_TYPE_F32:
		return a->nb[0] == sizeof(float);
	case LOOM_TYPE_F16:
	case LOOM_TYPE_BF16:
		return a->nb[0] == sizeof(uint16_t);
	default:
		return false;
	}
}

/* The GEMM pays for packing once b has enough rows to reuse it. */
static bool use_gemm(const struct loom_tensor *a, int64_t n)
{
	return n > GEMV_NB && a->ne[1] >= MR / 2 && a->ne[0] > 0;
}

static bool b_is_f32_rows(const struct loom_tensor *b)
{
	return b->type == LOOM_TYPE_F32 && b->nb[0] == sizeof(float);
}

/* Whether the product runs on int8 dot products (matmul-q8.c): weights
 * of a type it knows, activations quantized on the fly. */
static bool use_q8(const struct loom_tensor *a)
{
#if defined(CPU_HAVE_Q8)
	return cpu_q8_supports(a->type) && a->ne[0] % 32 == 0;
#else
	(void)a;
	return false;
#endif
}

/* Bytes of n activation rows quantized for the int8 kernels. */
static size_t q8_size(int64_t n, int64_t k)
{
#if defined(CPU_HAVE_Q8)
	return align_up((size_t)n * cpu_q8_col_bytes(k));
#else
	(void)n;
	(void)k;
	return 0;
#endif
}

/* Floats of tmp: NR rows of b, MR rows of an a block, or one a row. */
static size_t scratch_floats(int64_t k)
{
	size_t nb = (size_t)NR * k, na = (size_t)MR * KC;

	return nb > na ? nb : na;
}

static size_t scratch_size(int64_t k)
{
	return align_up((size_t)MC * KC * sizeof(float)) +
	       align_up(scratch_floats(k) * sizeof(float));
}

/* A cursor over the work buffer: hands out aligned pieces. */
static void *take(char **cursor, size_t bytes)
{
	char *p = *cursor;

	*cursor += align_up(bytes);
	return p;
}

static char *work_base(const struct cpu_task *task)
{
	uintptr_t p = (uintptr_t)task->wdata;

	return (char *)((p + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
}

/* Takes this thread's scratch from the nth that follow the cursor. */
static void take_scratch(const struct cpu_task *task, char **cursor,
			 int64_t k, struct scratch *s)
{
	char *p = *cursor + (size_t)task->ith * scratch_size(k);

	s->ap = take(&p, (size_t)MC * KC * sizeof(float));
	s->tmp = take(&p, scratch_floats(k) * sizeof(float));
	*cursor += (size_t)task->nth * scratch_size(k);
}

/* The address of row i1 of batch (i2, i3) of t. */
static inline const char *row_at(const struct loom_tensor *t, int64_t i1,
				 int64_t i2, int64_t i3)
{
	return (const char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] +
	       i3 * t->nb[3];
}

/* GEMV over rows [m0, m1) of a (at base) for any a: rows that are not
 * contiguous along dimension 0 are converted to F32 first. */
static void gemv_any(const struct loom_tensor *a, const char *base,
		     int64_t m0, int64_t m1, const float *const *bv, int nb,
		     float *const *out, float *tmp)
{
	int64_t m;
	int j;

#if defined(HAVE_Q8_I16)
	/* One vector against Q8_0 weights: integer products beat
	 * converting every weight to float. */
	if (a->type == LOOM_TYPE_Q8_0 && nb == 1) {
		int16_t *qb = (int16_t *)tmp;
		float *sb = tmp + a->ne[0] / 2;

		quantize_i16(bv[0], a->ne[0], qb, sb);
		gemv_q8_i16(base, a->nb[1], m0, m1, a->ne[0], qb, sb, out[0]);
		return;
	}
#endif
#if defined(HAVE_F16_ROWS)
	/* One vector against F16 weights: whole lines, more rows. */
	if (a->type == LOOM_TYPE_F16 && nb == 1 && a_rows_contiguous(a)) {
		gemv_f16_rows(base, a->nb[1], m0, m1, a->ne[0], bv[0], out[0]);
		return;
	}
#endif
#if defined(HAVE_BF16_DP)
	/* One vector against BF16 weights, where the CPU has the BF16 dot
	 * product. */
	if (a->type == LOOM_TYPE_BF16 && nb == 1 && a_rows_contiguous(a) &&
	    __builtin_cpu_supports("avx512bf16")) {
		gemv_bf16_dp(base, a->nb[1], m0, m1, a->ne[0], bv[0], out[0]);
		return;
	}
#endif
	if (a_rows_contiguous(a)) {
		gemv_rows(a->type, base, a->nb[1], m0, m1, a->ne[0], bv, nb,
			  out);
		return;
	}
	for (m = m0; m < m1; m++) {
		float *o[GEMV_NB];

		to_f32(a->type, base + m * a->nb[1], a->nb[0], tmp, a->ne[0]);
		for (j = 0; j < nb; j++)
			o[j] = out[j] + m;
		gemv_rows(LOOM_TYPE_F32, (const char *)tmp, 0, 0, 1, a->ne[0],
			  bv, nb, o);
	}
}

/* ------------------------------------------------------------------------
 * mul_mat.
 */

/* Bytes of b as GEMM panels (gemm) or as contiguous F32 rows. */
static size_t b_size(const struct loom_tensor *b, bool gemm)
{
	int64_t batches = b->ne[2] * b->ne[3];
	int64_t rows = gemm ? div_up(b->ne[1], NR) * NR : b->ne[1];

	return align_up((size_t)batches * rows * b->ne[0] * sizeof(float));
}

static size_t mul_mat_id_lists_size(const struct loom_tensor *dst);

size_t cpu_mul_mat_work_size(const struct loom_tensor *dst, int nth)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0];
	size_t size = ALIGN;

	if (nth < 1)
		nth = 1;
	if (dst->op == LOOM_OP_MUL_MAT_ID) {
		const struct loom_tensor *ids = dst->src[2];
		int64_t pairs = ids->ne[0] * ids->ne[1];

		/* The grouped pairs, then every expert's gathered rows or
		 * panels. */
		size += mul_mat_id_lists_size(dst);
		if (use_q8(a))
			size += q8_size(pairs, k);
		else
			size += align_up((size_t)(pairs + a->ne[2] * NR) * k *
					 sizeof(float));
	} else if (use_q8(a)) {
		size += q8_size(b->ne[1] * b->ne[2] * b->ne[3], k);
	} else {
		bool gemm = use_gemm(a, b->ne[1]);

		if (gemm || !b_is_f32_rows(b))
			size += b_size(b, gemm);
	}
	return size + (size_t)nth * scratch_size(k);
}

#if defined(CPU_HAVE_Q8)
/* Row i1 of batch (i2, i3) of b quantized into q; tmp holds a row in
 * conversion. */
static void quantize_b_row(const struct loom_tensor *b, int64_t i1,
			   int64_t i2, int64_t i3, char *q, float *tmp)
{
	const float *x = (const float *)row_at(b, i1, i2, i3);

	if (!b_is_f32_rows(b)) {
		to_f32(b->type, (const char *)x, b->nb[0], tmp, b->ne[0]);
		x = tmp;
	}
	cpu_q8_quantize(x, b->ne[0], q);
}
#endif

/* mul_mat on the int8 kernels: every row of b is quantized once (shared
 * phase), then each thread takes its part of the rows of a against all
 * of b. */
static void mul_mat_q8(const struct cpu_task *task, struct loom_tensor *dst,
		       char *cursor)
{
#if defined(CPU_HAVE_Q8)
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0], m = a->ne[1], n = b->ne[1];
	int64_t b2 = b->ne[2], batches = b2 * b->ne[3];
	int64_t r2 = b2 / a->ne[2], r3 = b->ne[3] / a->ne[3];
	size_t cb = cpu_q8_col_bytes(k);
	char *qb = take(&cursor, q8_size(batches * n, k));
	int64_t mparts, items, it, it1, r;
	struct scratch s;

	take_scratch(task, &cursor, k, &s);
	for (r = task->ith; r < batches * n; r += task->nth)
		quantize_b_row(b, r % n, r / n % b2, r / n / b2, qb + r * cb,
			       s.tmp);
	cpu_barrier(task);

	mparts = batches < 4 * task->nth ? task->nth : 1;
	items = batches * mparts;
	it = items * task->ith / task->nth;
	it1 = items * (task->ith + 1) / task->nth;
	for (; it < it1; it++) {
		int64_t z = it / mparts, i2 = z % b2, i3 = z / b2, m0, m1;
		struct cpu_cols c = {
			.base = (char *)dst->data + i2 * dst->nb[2] +
				i3 * dst->nb[3],
			.stride = dst->nb[1],
		};

		split_range(m, 4, mparts, it % mparts, &m0, &m1);
		if (m0 < m1)
			cpu_q8_mm(a->type, row_at(a, 0, i2 / r2, i3 / r3),
				  a->nb[1], m0, m1, k, qb + z * n * cb, n, &c,
				  s.tmp);
	}
#else
	(void)task;
	(void)dst;
	(void)cursor;
#endif
}

void cpu_op_mul_mat(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0], m = a->ne[1], n = b->ne[1];
	int64_t b2 = b->ne[2], b3 = b->ne[3];
	int64_t r2 = b2 / a->ne[2], r3 = b3 / a->ne[3];
	int64_t batches = b2 * b3;
	bool gemm = use_gemm(a, n);
	int64_t per = gemm ? div_up(n, NR) : n;
	int64_t stride = per * (gemm ? NR : 1) * k;
	char *cursor = work_base(task);
	float *bw = NULL;
	struct scratch s;
	int64_t ngroups, mparts, items, it, it1, r;

	if (use_q8(a)) {
		mul_mat_q8(task, dst, cursor);
		return;
	}
	if (gemm || !b_is_f32_rows(b))
		bw = take(&cursor, b_size(b, gemm));
	take_scratch(task, &cursor, k, &s);

	/* Shared phase: b becomes panels (GEMM) or F32 rows (GEMV). */
	if (bw) {
		for (r = task->ith; r < batches * per; r += task->nth) {
			int64_t z = r / per, i1 = r % per;
			int64_t i2 = z % b2, i3 = z / b2;
			float *o = bw + z * stride;

			if (gemm) {
				const char *rows[NR];
				int64_t n0 = i1 * NR;
				int j, nv = n - n0 < NR ? (int)(n - n0) : NR;

				for (j = 0; j < nv; j++)
					rows[j] = row_at(b, n0 + j, i2, i3);
				pack_b_panel(b->type, rows, b->nb[0], nv, k,
					     o + n0 * k, s.tmp);
			} else {
				to_f32(b->type, row_at(b, i1, i2, i3),
				       b->nb[0], o + i1 * k, k);
			}
		}
		cpu_barrier(task);
	}

	/* Items: batches x groups of b rows x parts of m, in contiguous
	 * runs per thread. */
	ngroups = gemm ? 1 : div_up(n, GEMV_NB);
	mparts = batches * ngroups < 4 * task->nth ? task->nth : 1;
	items = batches * ngroups * mparts;
	it = items * task->ith / task->nth;
	it1 = items * (task->ith + 1) / task->nth;
	for (; it < it1; it++) {
		int64_t z = it / (ngroups * mparts);
		int64_t g = it / mparts % ngroups;
		int64_t i2 = z % b2, i3 = z / b2;
		const char *abase = row_at(a, 0, i2 / r2, i3 / r3);
		char *dbase = (char *)dst->data + i2 * dst->nb[2] +
			      i3 * dst->nb[3];
		int64_t m0, m1;

		split_range(m, gemm ? MR : 16, mparts, it % mparts, &m0, &m1);
		if (m0 >= m1)
			continue;
		if (gemm) {
			struct cpu_cols c = { .base = dbase, .stride = dst->nb[1] };

			gemm_rows(a->type, abase, a->nb[1], a->nb[0], m0, m1, k,
				  bw + z * stride, n, &c, &s);
		} else {
			const float *bv[GEMV_NB];
			float *out[GEMV_NB];
			int j, nb = n - g * GEMV_NB < GEMV_NB ?
				    (int)(n - g * GEMV_NB) : GEMV_NB;

			for (j = 0; j < nb; j++) {
				int64_t i1 = g * GEMV_NB + j;

				bv[j] = bw ? bw + z * stride + i1 * k :
				        (const float *)row_at(b, i1, i2, i3);
				out[j] = (float *)(dbase + i1 * dst->nb[1]);
			}
			gemv_any(a, abase, m0, m1, bv, nb, out, s.tmp);
		}
	}
}

/* ------------------------------------------------------------------------
 * mul_mat_id: the (slot, token) pairs are grouped by expert, so that each
 * expert's weights stream once for all the tokens that chose it.
 */

struct id_lists {
	int64_t *count; /* pairs per expert */
	int64_t *first; /* index of each expert's first pair in pairs[] */
	int64_t *pos;   /* where the next pair of each expert goes */
	int64_t *pairs; /* e + n_used * t, grouped by expert */
	int64_t *offs;  /* the byte offset in dst of each pair's row */
};

static size_t mul_mat_id_lists_size(const struct loom_tensor *dst)
{
	const struct loom_tensor *ids = dst->src[2];

	return align_up((size_t)(3 * dst->src[0]->ne[2] +
				 2 * ids->ne[0] * ids->ne[1]) *
			sizeof(int64_t));
}

static int32_t expert_of(const struct loom_tensor *ids, int64_t p)
{
	int32_t x;

	memcpy(&x, (const char *)ids->data + (p % ids->ne[0]) * ids->nb[0] +
		   (p / ids->ne[0]) * ids->nb[1], sizeof(x));
	return x;
}

/* Groups the pairs by expert with a counting sort, so tokens stay in
 * order within an expert.  A pair whose expert is out of range gets its
 * row of zeros here (loom.h promises it). */
static void group_pairs(const struct loom_tensor *dst, struct id_lists *l)
{
	const struct loom_tensor *ids = dst->src[2];
	int64_t n_expert = dst->src[0]->ne[2], n_used = ids->ne[0];
	int64_t pairs = n_used * ids->ne[1];
	int64_t x, p, next = 0;

	memset(l->count, 0, n_expert * sizeof(int64_t));
	for (p = 0; p < pairs; p++) {
		x = expert_of(ids, p);
		if (x >= 0 && x < n_expert)
			l->count[x]++;
		else
			memset((char *)dst->data + p % n_used * dst->nb[1] +
			       p / n_used * dst->nb[2], 0,
			       dst->ne[0] * sizeof(float));
	}
	for (x = 0; x < n_expert; x++) {
		l->first[x] = next;
		l->pos[x] = next;
		next += l->count[x];
	}
	for (p = 0; p < pairs; p++) {
		x = expert_of(ids, p);
		if (x < 0 || x >= n_expert)
			continue;
		l->pairs[l->pos[x]] = p;
		l->offs[l->pos[x]++] = p % n_used * dst->nb[1] +
				       p / n_used * dst->nb[2];
	}
}

/* mul_mat_id on the int8 kernels: the pairs' rows of b quantized in
 * expert order (shared phase), then every thread takes its share of the
 * rows of each expert. */
static void mul_mat_id_q8(const struct cpu_task *task,
			  struct loom_tensor *dst, const struct id_lists *l,
			  char *cursor)
{
#if defined(CPU_HAVE_Q8)
	const struct loom_tensor *as = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	const struct loom_tensor *ids = dst->src[2];
	int64_t k = as->ne[0], m = as->ne[1], n_used = ids->ne[0];
	int64_t pairs = n_used * ids->ne[1], n_expert = as->ne[2];
	size_t cb = cpu_q8_col_bytes(k);
	char *qb = take(&cursor, q8_size(pairs, k));
	struct scratch s;
	int64_t i, x, total = 0;

	take_scratch(task, &cursor, k, &s);
	for (x = 0; x < n_expert; x++)
		total += l->count[x];
	for (i = task->ith; i < total; i += task->nth) {
		int64_t p = l->pairs[i];

		quantize_b_row(b, p % n_used % b->ne[1], p / n_used, 0,
			       qb + i * cb, s.tmp);
	}
	cpu_barrier(task);
	for (x = 0; x < n_expert; x++) {
		struct cpu_cols c = { .base = dst->data,
				      .offs = l->offs + l->first[x] };
		int64_t m0, m1;

		if (!l->count[x])
			continue;
		split_range(m, 4, task->nth, task->ith, &m0, &m1);
		if (m0 < m1)
			cpu_q8_mm(as->type, (const char *)as->data +
				  x * as->nb[2], as->nb[1], m0, m1, k,
				  qb + l->first[x] * cb, l->count[x], &c,
				  s.tmp);
	}
#else
	(void)task;
	(void)dst;
	(void)l;
	(void)cursor;
#endif
}

void cpu_op_mul_mat_id(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *as = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	const struct loom_tensor *ids = dst->src[2];
	int64_t k = as->ne[0], m = as->ne[1], n_expert = as->ne[2];
	int64_t n_used = ids->ne[0], pairs = n_used * ids->ne[1];
	char *cursor = work_base(task);
	struct id_lists l;
	int64_t *space;
	float *bw;
	struct scratch s;
	int64_t x, r;

	space = take(&cursor, mul_mat_id_lists_size(dst));
	l.count = space;
	l.first = space + n_expert;
	l.pos = space + 2 * n_expert;
	l.pairs = space + 3 * n_expert;
	l.offs = l.pairs + pairs;
	if (use_q8(as)) {
		if (task->ith == 0)
			group_pairs(dst, &l);
		cpu_barrier(task);
		mul_mat_id_q8(task, dst, &l, cursor);
		return;
	}
	bw = take(&cursor, (size_t)(pairs + n_expert * NR) * k *
			   sizeof(float));
	take_scratch(task, &cursor, k, &s);

	if (task->ith == 0)
		group_pairs(dst, &l);
	cpu_barrier(task);

	/* Shared phase: each expert's b rows become GEMM panels or
	 * gathered F32 rows, at offset (first + x * NR) * k. */
	for (x = 0, r = 0; x < n_expert; x++) {
		int64_t cnt = l.count[x];
		const int64_t *px = l.pairs + l.first[x];
		bool gemm = use_gemm(as, cnt);
		float *o = bw + (l.first[x] + x * NR) * k;
		int64_t u, nu = gemm ? div_up(cnt, NR) : cnt;

		for (u = 0; u < nu; u++, r++) {
			const char *rows[NR];
			int j, nv;

			if (r % task->nth != task->ith)
				continue;
			if (!gemm) {
				to_f32(b->type, row_at(b, px[u] % n_used %
						       b->ne[1],
						       px[u] / n_used, 0),
				       b->nb[0], o + u * k, k);
				continue;
			}
			nv = cnt - u * NR < NR ? (int)(cnt - u * NR) : NR;
			for (j = 0; j < nv; j++) {
				int64_t pr = px[u * NR + j];

				rows[j] = row_at(b, pr % n_used % b->ne[1],
						 pr / n_used, 0);
			}
			pack_b_panel(b->type, rows, b->nb[0], nv, k,
				     o + u * NR * k, s.tmp);
		}
	}
	cpu_barrier(task);

	/* Every thread takes its share of the rows of each expert. */
	for (x = 0; x < n_expert; x++) {
		int64_t cnt = l.count[x];
		const int64_t *offs = l.offs + l.first[x];
		const float *o = bw + (l.first[x] + x * NR) * k;
		const char *abase = (const char *)as->data + x * as->nb[2];
		int64_t m0, m1, g;

		if (!cnt)
			continue;
		if (use_gemm(as, cnt)) {
			struct cpu_cols c = { .base = dst->data, .offs = offs };

			split_range(m, MR, task->nth, task->ith, &m0, &m1);
			if (m0 < m1)
				gemm_rows(as->type, abase, as->nb[1],
					  as->nb[0], m0, m1, k, o, cnt, &c,
					  &s);
			continue;
		}
		split_range(m, 16, task->nth, task->ith, &m0, &m1);
		if (m0 >= m1)
			continue;
		for (g = 0; g < cnt; g += GEMV_NB) {
			const float *bv[GEMV_NB];
			float *out[GEMV_NB];
			int j, nb = cnt - g < GEMV_NB ? (int)(cnt - g) :
							GEMV_NB;

			for (j = 0; j < nb; j++) {
				bv[j] = o + (g + j) * k;
				out[j] = (float *)((char *)dst->data +
						   offs[g + j]);
			}
			gemv_any(as, abase, m0, m1, bv, nb, out, s.tmp);
		}
	}
}
