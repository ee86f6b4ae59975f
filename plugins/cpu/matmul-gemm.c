/* SPDX-License-Identifier: MIT */
/* matmul-gemm.c - the blocked GEMM of the CPU plugin for wide b: b
 * packed once into F32 panels, a packed per cache block into F32 panels
 * (from any type), and a register-blocked micro-kernel per instruction
 * set.
 */
#include "cpu-matmul.h"
#include "cpu-simd.h"

/* ------------------------------------------------------------------------
 * The micro-kernel: the MR x NR tile c[j][i] (+)= sum over kc of
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
void cpu_pack_b_panel(enum loom_type type, const char *const *rows,
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

/* dst column j, rows [m0, m1) = a rows times b row j, for every b row of
 * the packed panels bp (nb rows, NR per panel, each k x NR). */
void cpu_gemm_rows(enum loom_type type, const char *a, size_t arow,
		      size_t nb0, int64_t m0, int64_t m1, int64_t k,
		      const float *bp, int64_t nb, const struct cpu_cols *c,
		      const struct cpu_mm_scratch *s)
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
