/* SPDX-License-Identifier: MIT */
/* matmul-gemv.c - the float GEMV of the CPU plugin: each row of a read
 * once against a few F32 rows of b (decode-sized products), for F32, F16,
 * BF16 and Q8_0 rows as they are and any other type through F32.
 */
#include "cpu-matmul.h"
#include "cpu-simd.h"

/* GEMV: out[j][m] = dot(row m of a, bv[j]) for a few F32 vectors bv[j],
 * reading each row of a once.  A few rows of a go together, so that
 * several streams are in flight and each load of b serves them all.
 */

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

#define GEMV_INLINE static inline __attribute__((always_inline))

/* Value i of a float row (F32, F16 or BF16). */
GEMV_INLINE float row_value(const enum loom_type type, const char *row,
			    int64_t i)
{
	if (type == LOOM_TYPE_F32)
		return ((const float *)row)[i];
	if (type == LOOM_TYPE_F16)
		return cpu_f16_to_f32(((const uint16_t *)row)[i]);
	return loom_bf16_to_f32(((const uint16_t *)row)[i]);
}

#if defined(VF)
/* Q8_0 rows in vectors: acc[r][j] += each block's d times its dot
 * product with bv[j], over all k values. */
GEMV_INLINE void dot_q8_0_v(const char *a, size_t arow, const int nr,
			    const float *const *bv, const int nb, int64_t k,
			    VF acc[GEMV_MAXR][GEMV_NB])
{
	const struct loom_block_q8_0 *blk[GEMV_MAXR];
	int64_t i;
	int r, j, h;

	UNROLL
	for (r = 0; r < nr; r++)
		blk[r] = (const void *)(a + r * arow);
	for (i = 0; i < k; i += LOOM_QK8_0) {
		UNROLL
		for (r = 0; r < nr; r++) {
			const struct loom_block_q8_0 *q = blk[r]++;
			VF d = vset1(cpu_f16_to_f32(q->d));
			VF av[LOOM_QK8_0 / VLEN];

			__builtin_prefetch((const char *)q + GEMV_PF_Q8);
			UNROLL
			for (h = 0; h < LOOM_QK8_0 / VLEN; h++)
				av[h] = vload_q8(q->qs + h * VLEN);
			if (nb == 1) {
				/* Scale the block's sum, not its values. */
				const float *b0 = bv[0] + i;
				VF t = vmul(av[0], vload(b0));

				UNROLL
				for (h = 1; h < LOOM_QK8_0 / VLEN; h++)
					t = vfma(av[h], vload(b0 + h * VLEN),
						 t);
				acc[r][0] = vfma(d, t, acc[r][0]);
				continue;
			}
			UNROLL
			for (h = 0; h < LOOM_QK8_0 / VLEN; h++)
				av[h] = vmul(av[h], d);
			UNROLL
			for (j = 0; j < nb; j++)
				UNROLL
				for (h = 0; h < LOOM_QK8_0 / VLEN; h++)
					acc[r][j] = vfma(av[h], vload(bv[j] +
						i + h * VLEN), acc[r][j]);
		}
	}
}

/* F32, F16 and BF16 rows in vectors: acc[r][j] += their dot product with
 * bv[j] over the whole vectors of k; returns where they end. */
GEMV_INLINE int64_t dot_float_v(const enum loom_type type, const char *a,
				size_t arow, const int nr,
				const float *const *bv, const int nb,
				int64_t k, VF acc[GEMV_MAXR][GEMV_NB])
{
	int64_t i;
	int r, j;

	for (i = 0; i + VLEN <= k; i += VLEN) {
		VF bb[GEMV_NB];

		UNROLL
		for (j = 0; j < nb; j++)
			bb[j] = vload(bv[j] + i);
		UNROLL
		for (r = 0; r < nr; r++) {
			const char *row = a + r * arow;
			const uint16_t *h16 = (const uint16_t *)row;
			VF av;

			/* The same place one group of rows on, into L2: a
			 * fixed distance ahead lands in rows already in
			 * flight when rows are short, as the split halves
			 * of a tensor-parallel layer are. */
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
	return i;
}

/* The vector part of dot_rows: returns where it ends. */
GEMV_INLINE int64_t dot_rows_v(const enum loom_type type, const char *a,
			       size_t arow, const int nr,
			       const float *const *bv, const int nb,
			       int64_t k, float *res)
{
	VF acc[GEMV_MAXR][GEMV_NB];
	int64_t i = k;
	int r, j;

	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (j = 0; j < nb; j++)
			acc[r][j] = vzero();
	if (type == LOOM_TYPE_Q8_0)
		dot_q8_0_v(a, arow, nr, bv, nb, k, acc);
	else
		i = dot_float_v(type, a, arow, nr, bv, nb, k, acc);
	UNROLL
	for (r = 0; r < nr; r++)
		UNROLL
		for (j = 0; j < nb; j++)
			res[r * GEMV_NB + j] = vhsum(acc[r][j]);
	return i;
}
#else
/* The same without vectors: Q8_0 whole, F32 in four sums up to the
 * last multiple of 4 (the tail is the caller's), F16 and BF16 none. */
GEMV_INLINE int64_t dot_rows_v(const enum loom_type type, const char *a,
			       size_t arow, const int nr,
			       const float *const *bv, const int nb,
			       int64_t k, float *res)
{
	int r, j;

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

			for (int64_t i = 0; i < k; i += LOOM_QK8_0, q++) {
				float d = cpu_f16_to_f32(q->d);

				UNROLL
				for (j = 0; j < nb; j++) {
					float s = 0.0f;

					UNROLL
					for (int h = 0; h < LOOM_QK8_0; h++)
						s += q->qs[h] * bv[j][i + h];
					res[r * GEMV_NB + j] += d * s;
				}
			}
		}
		return k;
	}
	if (type != LOOM_TYPE_F32)
		return 0;
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
	return k & ~(int64_t)3;
}
#endif

/* res[r * GEMV_NB + j] = dot(row r of a, bv[j]) for nr rows of type,
 * arow bytes apart.  type, nr and nb are compile-time constants at every
 * call, so the loops unroll and the accumulators stay in registers. */
GEMV_INLINE void dot_rows(const enum loom_type type, const char *a,
			  size_t arow, const int nr, const float *const *bv,
			  const int nb, int64_t k, float *res)
{
	int64_t i = dot_rows_v(type, a, arow, nr, bv, nb, k, res);
	int r, j;

	/* The tail the vector loops left (never for Q8_0). */
	for (; i < k; i++) {
		UNROLL
		for (r = 0; r < nr; r++) {
			float av = row_value(type, a + r * arow, i);

			UNROLL
			for (j = 0; j < nb; j++)
				res[r * GEMV_NB + j] += av * bv[j][i];
		}
	}
}

#if defined(CPU_HAVE_BF16_DP)
/* res[r] = dot(row r of BF16 a, b) for nr (constant) rows, with the
 * AVX512_BF16 pair dot product: b is rounded to BF16 once per 32 values
 * (shared by every row), so each 64-byte line of a costs one load and one
 * vdpbf16ps, and is fetched once, as for F32.  Rounding b to BF16 adds a
 * relative error of 2^-9 per product, the size of the weights' own. */
static inline __attribute__((always_inline)) CPU_BF16_TARGET void
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
			s += loom_bf16_to_f32(row[t]) * b[t];
		res[r] = s;
	}
}

/* out[m] = dot(row m of BF16 a, b) for m in [m0, m1).  Eight rows go
 * together: BF16 rows are half the bytes of F32 ones, so twice the rows
 * keep as many lines in flight. */
static CPU_BF16_TARGET void gemv_bf16_dp(const char *a, size_t arow,
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
			acc[r][0] = vfma(vload_f16((const uint16_t *)row),
					 b0, acc[r][0]);
			acc[r][1] = vfma(vload_f16((const uint16_t *)row + 16),
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

/* GEMV over rows [m0, m1) of a (at base) for any a: rows that are not
 * contiguous along dimension 0 are converted to F32 first. */
void cpu_gemv(const struct loom_tensor *a, const char *base,
		     int64_t m0, int64_t m1, const float *const *bv, int nb,
		     float *const *out, float *tmp)
{
	int64_t m;
	int j;

#if defined(HAVE_F16_ROWS)
	/* One vector against F16 weights: whole lines, more rows. */
	if (a->type == LOOM_TYPE_F16 && nb == 1 && a_rows_contiguous(a)) {
		gemv_f16_rows(base, a->nb[1], m0, m1, a->ne[0], bv[0], out[0]);
		return;
	}
#endif
#if defined(CPU_HAVE_BF16_DP)
	/* One vector against BF16 weights, where the CPU has the BF16 dot
	 * product. */
	if (a->type == LOOM_TYPE_BF16 && nb == 1 && a_rows_contiguous(a) &&
	    cpu_bf16_dp()) {
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
