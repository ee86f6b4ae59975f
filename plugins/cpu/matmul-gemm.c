/* SPDX-License-Identifier: MIT */
/* matmul-gemm.c - the blocked GEMM of the CPU plugin for wide b: b
 * packed once into panels, a packed per cache block into panels, and a
 * register-blocked micro-kernel per instruction set.  Panels hold F32
 * (from any type) or, for BF16 weights where the CPU has AVX512_BF16,
 * BF16 pairs for vdpbf16ps (b rounded to BF16 as it is packed).
 */
#include "cpu-matmul.h"
#include "cpu-simd.h"

/* ------------------------------------------------------------------------
 * The micro-kernel: the MR x NR tile c[j][i] (+)= sum over kc of
 * a[k][i] * b[k][j], from packed panels a (kc x MR) and b (kc x NR).  Only
 * the first mr rows and nr columns are written; acc adds to c.
 */

#if defined(__AVX512F__)
/* The accumulators of an AVX-512 tile: rows 0-15 and 16-31 of column j
 * in cj_0 and cj_1. */
#define TILE_ACC_DECL                                                    \
	__m512 c0_0 = _mm512_setzero_ps(), c0_1 = c0_0, c1_0 = c0_0,     \
	       c1_1 = c0_0, c2_0 = c0_0, c2_1 = c0_0, c3_0 = c0_0,       \
	       c3_1 = c0_0, c4_0 = c0_0, c4_1 = c0_0, c5_0 = c0_0,       \
	       c5_1 = c0_0, c6_0 = c0_0, c6_1 = c0_0, c7_0 = c0_0,       \
	       c7_1 = c0_0, c8_0 = c0_0, c8_1 = c0_0, c9_0 = c0_0,       \
	       c9_1 = c0_0, c10_0 = c0_0, c10_1 = c0_0, c11_0 = c0_0,    \
	       c11_1 = c0_0
#define TILE_EACH(X)                                                     \
	X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

/* The tile's rows of dst are far apart: fetch them early. */
static inline void tile_fetch(float *const *c, int nr)
{
	int j;

	for (j = 0; j < nr; j++) {
		_mm_prefetch((const char *)c[j], _MM_HINT_T0);
		_mm_prefetch((const char *)(c[j] + 16), _MM_HINT_T0);
	}
}

/* Writes (or with acc adds) the first mr rows and nr columns. */
#define TILE_STORE                                                       \
	do {                                                             \
		__mmask16 k0 = mr >= 16 ? 0xffff :                       \
			       (__mmask16)((1u << mr) - 1);               \
		__mmask16 k1 = mr >= 32 ? 0xffff : mr <= 16 ? 0 :        \
			       (__mmask16)((1u << (mr - 16)) - 1);        \
		TILE_EACH(TILE_STORE_COL)                                \
	} while (0)
#define TILE_STORE_COL(j)                                                \
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

static void ukernel(int64_t kc, const float *restrict a,
		    const float *restrict b, float *const *c, int mr, int nr,
		    int acc)
{
	TILE_ACC_DECL;
	int64_t k;

	tile_fetch(c, nr);
	for (k = 0; k < kc; k++) {
		__m512 a0 = _mm512_load_ps(a);
		__m512 a1 = _mm512_load_ps(a + 16);
		__m512 bb;

		_mm_prefetch((const char *)(a + PFD * MR), _MM_HINT_T0);
#define STEP(j)                                                      \
		bb = _mm512_set1_ps(b[j]);                          \
		c##j##_0 = _mm512_fmadd_ps(a0, bb, c##j##_0);       \
		c##j##_1 = _mm512_fmadd_ps(a1, bb, c##j##_1);
		TILE_EACH(STEP)
#undef STEP
		a += MR;
		b += NR;
	}
	TILE_STORE;
}

#if defined(CPU_HAVE_BF16_DP)
/* The same tile from panels of BF16 pairs (kc2 pairs of a x MR, of b x
 * NR, see pack_a_pairs): one vdpbf16ps does the work of two FMAs. */
static CPU_BF16_TARGET void ukernel_pairs(int64_t kc2,
					  const uint32_t *restrict a,
					  const uint32_t *restrict b,
					  float *const *c, int mr, int nr,
					  int acc)
{
	TILE_ACC_DECL;
	int64_t k;

	tile_fetch(c, nr);
	for (k = 0; k < kc2; k++) {
		__m512bh a0 = (__m512bh)_mm512_load_si512((const void *)a);
		__m512bh a1 = (__m512bh)_mm512_load_si512(
			(const void *)(a + 16));
		__m512bh bb;

		_mm_prefetch((const char *)(a + PFD * MR), _MM_HINT_T0);
#define STEP(j)                                                      \
		bb = (__m512bh)_mm512_set1_epi32((int)b[j]);        \
		c##j##_0 = _mm512_dpbf16_ps(c##j##_0, a0, bb);      \
		c##j##_1 = _mm512_dpbf16_ps(c##j##_1, a1, bb);
		TILE_EACH(STEP)
#undef STEP
		a += MR;
		b += NR;
	}
	TILE_STORE;
}
#endif
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
		cpu_transpose16_ps(r);
		for (q = 0; q < cnt; q++)
			_mm512_mask_storeu_ps(dst + (i + q) * ld, cm, r[q]);
	}
#else
#if defined(__AVX2__)
	/* Eight columns at a time, 8 x 8 blocks transposed in registers. */
	for (; ncols % 8 == 0 && i + 8 <= n; i += 8) {
		int h;

		for (h = 0; h < ncols; h += 8) {
			__m256 r[8];

			for (q = 0; q < 8; q++)
				r[q] = h + q < nr ? _mm256_loadu_ps(
					rows[h + q] + i) : _mm256_setzero_ps();
			cpu_transpose8_ps(r);
			for (q = 0; q < 8; q++)
				_mm256_storeu_ps(dst + (i + q) * ld + h, r[q]);
		}
	}
#endif
	for (; i < n; i++) {
		for (q = 0; q < nr; q++)
			dst[i * ld + q] = rows[q][i];
		for (; q < ncols; q++)
			dst[i * ld + q] = 0.0f;
	}
#endif
}

bool cpu_gemm_pairs(enum loom_type type, size_t nb0)
{
#if defined(CPU_HAVE_BF16_DP)
	return type == LOOM_TYPE_BF16 && nb0 == sizeof(uint16_t) &&
	       cpu_bf16_dp();
#else
	(void)type;
	(void)nb0;
	return false;
#endif
}

#if defined(CPU_HAVE_BF16_DP)
/* cpu_pack_b_panel for BF16 pairs: each row rounded to pairs in tmp,
 * then the pairs transposed as 32-bit words. */
static CPU_BF16_TARGET void pack_b_pairs(enum loom_type type,
					 const char *const *rows, size_t nb0,
					 int nv, int64_t k, float *restrict p,
					 float *restrict tmp)
{
	const float *src[NR];
	int j;

	for (j = 0; j < nv; j++) {
		const float *x = (const float *)rows[j];

		if (type != LOOM_TYPE_F32 || nb0 != sizeof(float)) {
			to_f32(type, rows[j], nb0, tmp + j * k, k);
			x = tmp + j * k;
		}
		cpu_f32_to_bf16_pairs(x, k, (uint32_t *)(tmp + j * k));
		src[j] = tmp + j * k;
	}
	transpose_rows(src, nv, (k + 1) / 2, p, NR, NR);
}

/* pack_a_block for BF16 rows (nb0 = 2) as pairs: panels laid out
 * [panel][kc2][MR] of 32-bit words, kc2 = kc / 2 rounded up; an odd last
 * value is paired with zero. */
static void pack_a_pairs(const char *a, size_t arow, int64_t m0,
			 int64_t mc, int64_t k0, int64_t kc,
			 uint32_t *restrict p)
{
	int64_t kc2 = (kc + 1) / 2, full = kc / 2, r0;

	for (r0 = 0; r0 < mc; r0 += MR) {
		int nr = mc - r0 < MR ? (int)(mc - r0) : MR;
		uint32_t *pp = p + r0 * kc2;
		const float *src[MR];
		int q, h;

		for (q = 0; q < nr; q++)
			src[q] = (const float *)(a + (m0 + r0 + q) * arow +
						 k0 * sizeof(uint16_t));
		for (h = 0; h < MR; h += 16) {
			int n = nr - h < 0 ? 0 : nr - h > 16 ? 16 : nr - h;

			transpose_rows(src + h, n, full, (float *)pp + h, MR,
				       16);
		}
		if (kc & 1)
			for (q = 0; q < MR; q++)
				pp[full * MR + q] = q < nr ?
					((const uint16_t *)src[q])[kc - 1] : 0;
	}
}
#endif

/* Packs nv rows of b (any type; row j at rows[j], elements nb0 bytes
 * apart) into the panel p laid out [k][NR] (F32) or [k / 2][NR] (BF16
 * pairs), zero-padded.  tmp holds NR x k floats for rows that need
 * converting. */
void cpu_pack_b_panel(enum loom_type type, const char *const *rows,
		      size_t nb0, int nv, int64_t k, bool pairs,
		      float *restrict p, float *restrict tmp)
{
	const float *src[NR];
	int j;

#if defined(CPU_HAVE_BF16_DP)
	if (pairs) {
		pack_b_pairs(type, rows, nb0, nv, k, p, tmp);
		return;
	}
#endif
	(void)pairs;
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

/* dst column j, rows [m0, m1) = a rows times b row j, for every b row of
 * the packed panels bp (nb rows, NR per panel, k x NR entries apart). */
void cpu_gemm_rows(enum loom_type type, const char *a, size_t arow,
		   size_t nb0, int64_t m0, int64_t m1, int64_t k,
		   const float *bp, int64_t nb, const struct cpu_cols *c,
		   const struct cpu_mm_scratch *s)
{
	/* BF16 pairs take half the bytes of floats: blocks twice as deep
	 * fill the same cache. */
	bool pairs = cpu_gemm_pairs(type, nb0);
	int64_t kmax = pairs ? 2 * KC : KC;
	/* Blocks of even size, so that none is a small leftover. */
	int64_t mcb = div_up(div_up(m1 - m0, div_up(m1 - m0, MC)), MR) * MR;
	int64_t blck = loom_type_block_size(type) > LOOM_QK8_0 ?
		       loom_type_block_size(type) : LOOM_QK8_0;
	int64_t kcb = div_up(div_up(k, div_up(k, kmax)), blck) * blck;
	int64_t pc, ic, jr, ir;

	/* Whole blocks per step, no more than the packing space holds. */
	if (kcb > kmax)
		kcb = kmax / blck * blck;
	for (ic = m0; ic < m1; ic += mcb) {
		int64_t mc = m1 - ic < mcb ? m1 - ic : mcb;

		for (pc = 0; pc < k; pc += kcb) {
			int64_t kc = k - pc < kcb ? k - pc : kcb;
			/* Entries of a panel row: floats or pairs. */
			int64_t ke = pairs ? (kc + 1) / 2 : kc;

#if defined(CPU_HAVE_BF16_DP)
			if (pairs)
				pack_a_pairs(a, arow, ic, mc, pc, kc,
					     (uint32_t *)s->ap);
			else
#endif
				pack_a_block(type, a, arow, nb0, ic, mc, pc,
					     kc, s->ap, s->tmp);
			for (jr = 0; jr < nb; jr += NR) {
				/* pc is even when there are pairs. */
				const float *bpanel = bp + jr * k +
						      (pairs ? pc / 2 : pc) * NR;
				int nr = nb - jr < NR ? (int)(nb - jr) : NR;
				float *cp[NR];
				int j;

				/* The next panel of b comes into L2 while
				 * this one is in use, a few lines per tile. */
				const char *next = (const char *)(bpanel +
								  NR * k);
				int64_t lines = jr + NR < nb ? ke * NR *
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
#if defined(CPU_HAVE_BF16_DP)
					if (pairs)
						ukernel_pairs(ke,
							(const uint32_t *)s->ap +
							ir * ke,
							(const uint32_t *)bpanel,
							cp, mr, nr, pc > 0);
					else
#endif
						ukernel(kc, s->ap + ir * kc,
							bpanel, cp, mr, nr,
							pc > 0);
					for (j = 0; j < nr; j++)
						cp[j] += MR;
				}
			}
		}
	}
}
