/* SPDX-License-Identifier: MIT */
/* matmul-q8p.c - wide products of quantized weights (prefill): rows of
 * weights are decoded once into a panel where each 4 bytes of 8 rows sit
 * side by side, one row per 32-bit lane, so that a single dot product
 * takes 4 values of 8 rows (16 in 512-bit vectors) against the same 4
 * activations of a column, broadcast.  A block's 32 values of a row then
 * end in one lane, and its scales multiply all the rows at once.  With
 * AVX2, pair multiplies summed in 16 bits; with AVX-512 VNNI, vpdpbusd
 * on panels of 32 rows.
 */
#include "matmul-q8.h"

#if defined(CPU_HAVE_Q8)

/* Rows of an AVX2 panel (a lane each, PH vectors of 8) and columns of a
 * tile: a step of the tile loads PH vectors of weights and broadcasts PC
 * activations for PH * PC pair multiplies. */
#define PH 2
#define PR (8 * PH)
#define PC 3

/* The same for AVX-512 VNNI: VH vectors of 16 rows, VC columns. */
#define VH 2
#define VC 6

/* Rows of the larger panel. */
#define PR_MAX 32

/* Whether the type's scales are per 16 values (else per 32). */
INLINE bool per16(const enum loom_type type)
{
	return cpu_types[type].span == 16;
}

/* Scale groups of a row: one per 32 values, or per 16. */
INLINE int64_t groups(const enum loom_type type, int64_t k)
{
	return per16(type) ? k / 16 : k / 32;
}

/* Pair products of 4 values, 16 bits each, that may be summed before
 * they overflow: 2 * 127 * max(u) times this stays below 2^15, and it
 * divides the steps of a scale group. */
INLINE int sums16(const enum loom_type type)
{
	int per = per16(type) ? 4 : 8;

	while (per > 1 && 2 * 127 * cpu_types[type].umax * per >= 32768)
		per /= 2;
	return per;
}

/* A panel of k values of pr rows: u[(j * 8 + g) * 4 * pr + 4 * r + i] is
 * value 32 j + 4 g + i of row r (as block_u8 gives it); sc and o hold for
 * each scale group the rows' scales and offsets, pr floats a group.  A
 * panel of 32 rows reads as 4 vectors of 8 rows or 2 of 16 alike. */
struct panel {
	uint8_t *u;
	float *sc;
	float *o;
	int pr;
};

size_t cpu_q8_panel_floats(int64_t k)
{
	/* The panel, and one row's cpu_q8_row_scales. */
	return (size_t)PR_MAX * (k / 4 + 2 * (k / 16)) + 2 * (k / 16);
}

static struct panel panel_at(float *tmp, int64_t k, int pr)
{
	struct panel p = {
		.u = (uint8_t *)tmp,
		.sc = tmp + pr * (k / 4),
		.o = tmp + pr * (k / 4) + pr * (k / 16),
		.pr = pr,
	};

	return p;
}

/* Transposes the 8 x 8 32-bit words of v in place. */
INLINE void transpose8(__m256i v[8])
{
	__m256 f[8];
	int i;

	for (i = 0; i < 8; i++)
		f[i] = _mm256_castsi256_ps(v[i]);
	cpu_transpose8_ps(f);
	for (i = 0; i < 8; i++)
		v[i] = _mm256_castps_si256(f[i]);
}

/* Rows m, m + nr (nr <= p->pr) of a into the panel; the rows past nr
 * are zeros.  rs holds one row's scales and offsets.  With flip, signed
 * bytes get 128 added, so that they are unsigned, and an offset of 128
 * times the scale. */
INLINE void pack(const enum loom_type type, const bool flip, const char *a,
		 size_t arow, int64_t m, int nr, int64_t k,
		 const struct panel *p, float *rs)
{
	const int64_t ng = groups(type, k), n16 = k / 16;
	const int step = per16(type) ? 1 : 2, pr = p->pr;
	const bool q8 = flip && cpu_types[type].is_signed;
	int64_t j, g;
	int r;

	for (r = 0; r < pr; r++) {
		if (r >= nr) {
			for (g = 0; g < ng; g++)
				p->sc[g * pr + r] = p->o[g * pr + r] = 0.0f;
			continue;
		}
		cpu_q8_row_scales(type, a + (m + r) * arow, k, rs, rs + n16);
		/* Per 32 values the halves' scales are one; the offsets
		 * then multiply the column's sums per 32. */
		for (g = 0; g < ng; g++) {
			p->sc[g * pr + r] = rs[step * g];
			p->o[g * pr + r] = q8 ? 128.0f * rs[step * g] :
				rs[n16 + step * g];
		}
	}
	for (j = 0; j < k / 32; j++) {
		__m256i v[8];
		int h;

		for (h = 0; h < pr / 8; h++) {
			for (r = 0; r < 8; r++) {
				v[r] = 8 * h + r < nr ?
					block_u8(type, a + (m + 8 * h + r) *
						 arow, j) :
					_mm256_setzero_si256();
				if (q8)
					v[r] = _mm256_xor_si256(v[r],
						_mm256_set1_epi8((char)0x80));
			}
			transpose8(v);
			for (r = 0; r < 8; r++)
				_mm256_store_si256((__m256i *)(p->u + ((j * 8 +
					r) * (pr / 8) + h) * 32), v[r]);
		}
	}
}

/* acc[h][c] += the panel's scale group g (its rows' scales sc and
 * offsets o) times t[h][c], the integer sums of the group and column c. */
INLINE void scale_group(const enum loom_type type, const struct panel *p,
			const struct qcol *cols, const int nc, int64_t g,
			__m256i t[PH][PC], __m256 acc[PH][PC])
{
	int c, h;

	UNROLL
	for (c = 0; c < nc; c++) {
		/* Groups of 16 share their column's d per 32. */
		__m256 d = _mm256_set1_ps(cols[c].d[per16(type) ? g / 2 : g]);
		__m256 s = _mm256_set1_ps(per16(type) ? cols[c].s[g] :
					  cols[c].s32[g]);

		UNROLL
		for (h = 0; h < PH; h++) {
			__m256 sc = _mm256_load_ps(p->sc + g * PR + 8 * h);

			acc[h][c] = _mm256_fmadd_ps(
				_mm256_cvtepi32_ps(t[h][c]),
				_mm256_mul_ps(sc, d), acc[h][c]);
			if (!cpu_types[type].is_signed)
				acc[h][c] = _mm256_fnmadd_ps(_mm256_load_ps(
					p->o + g * PR + 8 * h), s, acc[h][c]);
		}
	}
}

/* The panel's PR rows against nc <= PC columns: res[c][r] =
 * dot(row r, column c). */
INLINE void tile(const enum loom_type type, const struct panel *p,
		 const struct qcol *cols, const int nc, int64_t k,
		 float res[VC][PR_MAX])
{
	/* Steps of 4 values whose 16-bit sums add up, and per scale. */
	const int per = sums16(type), span = per16(type) ? 4 : 8;
	const __m256i ones = _mm256_set1_epi16(1);
	__m256 acc[PH][PC];
	int64_t j;
	int c, g, h;

	UNROLL
	for (h = 0; h < PH; h++)
		UNROLL
		for (c = 0; c < nc; c++)
			acc[h][c] = _mm256_setzero_ps();
	for (j = 0; j < k / 32; j++) {
		const __m256i *w = (const __m256i *)(p->u + j * 8 * 4 * PR);
		__m256i t[PH][PC], s16[PH][PC];

		UNROLL
		for (g = 0; g < 8; g++) {
			__m256i wg[PH], u[PH];

			UNROLL
			for (h = 0; h < PH; h++) {
				wg[h] = _mm256_load_si256(w + g * PH + h);
				u[h] = cpu_types[type].is_signed ?
					_mm256_abs_epi8(wg[h]) : wg[h];
			}
			UNROLL
			for (c = 0; c < nc; c++) {
				int32_t x;
				__m256i a;

				memcpy(&x, cols[c].qs + 32 * j + 4 * g, 4);
				a = _mm256_set1_epi32(x);
				UNROLL
				for (h = 0; h < PH; h++) {
					__m256i q = _mm256_maddubs_epi16(u[h],
						cpu_types[type].is_signed ?
						_mm256_sign_epi8(a, wg[h]) : a);

					s16[h][c] = g % per ? _mm256_add_epi16(
						s16[h][c], q) : q;
					if (g % per != per - 1)
						continue;
					q = _mm256_madd_epi16(s16[h][c], ones);
					t[h][c] = g % span < per ? q :
						_mm256_add_epi32(t[h][c], q);
				}
			}
			/* A scale per 16 values: every 4 steps. */
			if (per16(type) && g % 4 == 3)
				scale_group(type, p, cols, nc, 2 * j + g / 4,
					    t, acc);
		}
		if (!per16(type))
			scale_group(type, p, cols, nc, j, t, acc);
	}
	UNROLL
	for (h = 0; h < PH; h++)
		UNROLL
		for (c = 0; c < nc; c++)
			_mm256_store_ps(res[c] + 8 * h, acc[h][c]);
}

#if QB == 2
/* ------------------------------------------------------------------------
 * AVX-512 VNNI: 4-byte dot products straight to 32 bits, so a scale
 * group's products are summed without a 16-bit stage, and Q8_0 is
 * flipped to unsigned bytes in the panel (pack) with an offset.
 */

/* acc[h][c] += the panel's scale group g times t[h][c] (as
 * scale_group). */
INLINE void scale_group16(const enum loom_type type, const struct panel *p,
			  const struct qcol *cols, const int nc, int64_t g,
			  __m512i t[VH][VC], __m512 acc[VH][VC])
{
	int c, h;

	UNROLL
	for (c = 0; c < nc; c++) {
		__m512 d = _mm512_set1_ps(cols[c].d[per16(type) ? g / 2 : g]);
		__m512 s = _mm512_set1_ps(per16(type) ? cols[c].s[g] :
					  cols[c].s32[g]);

		UNROLL
		for (h = 0; h < VH; h++) {
			__m512 sc = _mm512_load_ps(p->sc + g * PR_MAX +
						   16 * h);

			acc[h][c] = _mm512_fmadd_ps(
				_mm512_cvtepi32_ps(t[h][c]),
				_mm512_mul_ps(sc, d), acc[h][c]);
			acc[h][c] = _mm512_fnmadd_ps(_mm512_load_ps(
				p->o + g * PR_MAX + 16 * h), s, acc[h][c]);
		}
	}
}

/* The panel's PR_MAX rows against nc <= VC columns: res[c][r] =
 * dot(row r, column c). */
INLINE void tile16(const enum loom_type type, const struct panel *p,
		   const struct qcol *cols, const int nc, int64_t k,
		   float res[VC][PR_MAX])
{
	const int span = per16(type) ? 4 : 8;
	__m512 acc[VH][VC];
	__m512i t[VH][VC];
	int64_t j;
	int c, g, h;

	UNROLL
	for (h = 0; h < VH; h++)
		UNROLL
		for (c = 0; c < nc; c++)
			acc[h][c] = _mm512_setzero_ps();
	for (j = 0; j < k / 32; j++) {
		const __m512i *w = (const __m512i *)(p->u + j * 8 * 4 * PR_MAX);

		UNROLL
		for (g = 0; g < 8; g++) {
			__m512i wg[VH];

			UNROLL
			for (h = 0; h < VH; h++)
				wg[h] = _mm512_load_si512(w + g * VH + h);
			UNROLL
			for (c = 0; c < nc; c++) {
				int32_t x;
				__m512i a;

				memcpy(&x, cols[c].qs + 32 * j + 4 * g, 4);
				a = _mm512_set1_epi32(x);
				UNROLL
				for (h = 0; h < VH; h++)
					t[h][c] = dot_u8s8(g % span ? t[h][c] :
							   q_zero(), wg[h], a,
							   true);
			}
			if (g % span == span - 1)
				scale_group16(type, p, cols, nc,
					      per16(type) ? 2 * j + g / 4 : j,
					      t, acc);
		}
	}
	UNROLL
	for (h = 0; h < VH; h++)
		UNROLL
		for (c = 0; c < nc; c++)
			_mm512_store_ps(res[c] + 16 * h, acc[h][c]);
}
#endif

/* res[c][r] = dot(row r of the panel, column c) for nc columns: VC at
 * most with wide (AVX-512 VNNI), else PC. */
INLINE void run_tile(const enum loom_type type, const bool wide,
		     const struct panel *p, const struct qcol *cols, int nc,
		     int64_t k, float res[VC][PR_MAX])
{
#if QB == 2
	if (wide) {
		switch (nc) {
#define CASE(N)                                                 \
		case N:                                         \
			tile16(type, p, cols, N, k, res);       \
			return;
		CASE(1) CASE(2) CASE(3) CASE(4) CASE(5)
#undef CASE
		default:
			tile16(type, p, cols, VC, k, res);
			return;
		}
	}
#endif
	if (nc == PC)
		tile(type, p, cols, PC, k, res);
	else if (nc == 2)
		tile(type, p, cols, 2, k, res);
	else
		tile(type, p, cols, 1, k, res);
}

/* Rows [m0, m1) of a against n columns at qb, a panel of rows at a time
 * against all the columns, a tile's columns at a time. */
INLINE void panel_typed(const enum loom_type type, const bool wide,
			const char *a, size_t arow, int64_t m0, int64_t m1,
			int64_t k, const char *qb, int64_t n,
			const struct cpu_cols *out, float *tmp)
{
	const int pr = wide ? PR_MAX : PR, pc = wide ? VC : PC;
	size_t cb = cpu_q8_col_bytes(k);
	struct panel p = panel_at(tmp, k, pr);
	float *rs = p.o + pr * groups(type, k);
	int64_t m, j;

	for (m = m0; m < m1; m += pr) {
		int nr = m1 - m < pr ? (int)(m1 - m) : pr, r, c;

		pack(type, wide, a, arow, m, nr, k, &p, rs);
		for (j = 0; j < n; j += pc) {
			int nc = n - j < pc ? (int)(n - j) : pc;
			struct qcol cols[VC];
			float v[VC][PR_MAX] __attribute__((aligned(64)));

			for (c = 0; c < nc; c++)
				cols[c] = col_at(qb + (j + c) * cb, k);
			run_tile(type, wide, &p, cols, nc, k, v);
			for (c = 0; c < nc; c++) {
				float *o = cpu_cols_at(out, j + c) + m;

				for (r = 0; r < nr; r++)
					o[r] = v[c][r];
			}
		}
	}
}

bool cpu_q8_panel(enum loom_type type, bool vnni, const char *a,
		  size_t arow, int64_t m0, int64_t m1, int64_t k,
		  const char *qb, int64_t n, const struct cpu_cols *out,
		  float *tmp)
{
	/* The 512-bit panels want VNNI; without it the AVX2 ones. */
	const bool wide = QB == 2 && vnni;

	switch (type) {
#define CASE(T)                                                          \
	case T:                                                          \
		if (wide)                                                \
			panel_typed(T, true, a, arow, m0, m1, k, qb, n, out, \
				    tmp);                                \
		else                                                     \
			panel_typed(T, false, a, arow, m0, m1, k, qb, n, \
				    out, tmp);                           \
		return true;
	CPU_Q8_TYPES(CASE)
#undef CASE
	default:
		return false;
	}
}

#endif
