/* SPDX-License-Identifier: MIT */
/* matmul-q8.c - products of quantized weights (every type of
 * CPU_Q8_TYPES) with activations quantized on the fly to 8 bits: int8 x int8 dot
 * products (VNNI where the CPU has it, else AVX2's pair multiplies).  The
 * float kernels and the work division live in ops-matmul.c.
 */
#include "matmul-q8.h"

#if defined(CPU_HAVE_Q8)

#include <cpuid.h>
#include <float.h>
#include <pthread.h>

/* Rows of a and columns (rows of b) a tile computes: as many
 * accumulators as the variant has vector registers for. */
#if defined(__AVX512F__)
#define QR 4
#define QC 4
#else
#define QR 2
#define QC 4
#endif

/* Columns from which a product takes the panels, where the variant has
 * them: their packing costs a pass over the rows. */
#define PANEL_MIN 16

static float f16_table[1 << 16];

static void fill_f16_table(void)
{
	uint32_t h;

	for (h = 0; h < 1u << 16; h++)
		f16_table[h] = cpu_f16_to_f32((uint16_t)h);
}

const float *cpu_q8_f16_table(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, fill_f16_table);
	return f16_table;
}

/* ------------------------------------------------------------------------
 * Activations (the layout is in matmul-q8.h).
 */

size_t cpu_q8_col_bytes(int64_t k)
{
	size_t n32 = (size_t)k / 32, n16 = (size_t)k / 16;

	return ((size_t)k + (3 * n32 + n16) * 4 + 63) & ~(size_t)63;
}

/* The largest |x| of 32 floats, compared as integers, so that an
 * infinity or a NaN among them is what comes back (a NaN's bits are
 * above infinity's; max_ps would drop a NaN depending on its place). */
static inline float amax32(const float *x)
{
	const __m256i abs = _mm256_set1_epi32(0x7fffffff);
	__m256i m = _mm256_setzero_si256();
	__m128i h;
	int i;

	for (i = 0; i < 32; i += 8)
		m = _mm256_max_epi32(m, _mm256_and_si256(_mm256_loadu_si256(
			(const __m256i *)(x + i)), abs));
	h = _mm_max_epi32(_mm256_castsi256_si128(m),
			  _mm256_extracti128_si256(m, 1));
	h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0x4e));
	h = _mm_max_epi32(h, _mm_shuffle_epi32(h, 0xb1));
	return _mm_cvtss_f32(_mm_castsi128_ps(h));
}

/* The sum of the 8 32-bit lanes of v. */
static inline int32_t hsum_epi32(__m256i v)
{
	__m128i h = _mm_add_epi32(_mm256_castsi256_si128(v),
				  _mm256_extracti128_si256(v, 1));

	h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4e));
	h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xb1));
	return _mm_cvtsi128_si32(h);
}

/* q = round(x / d) to nearest even, as lrintf would, 8 at a time.  A
 * group holding an infinity or a NaN has no such d: its blocks get q = 0
 * and d = NaN (their sums too), so that every product with them is NaN,
 * as the float product would be NaN or infinite.  A group whose values
 * are all below 2^-120 in magnitude, where 127 / d would overflow, gets
 * q = 0 and d = 0. */
void cpu_q8_quantize(const float *x, int64_t k, int64_t group, char *out)
{
	int8_t *qs = (int8_t *)out;
	float *d = (float *)(out + k), *s = d + k / 32, *s32 = s + k / 16;
	int32_t *o32 = (int32_t *)(s32 + k / 32);
	int64_t per = group / 32, b;

	/* The largest magnitude of each group, in d of its blocks. */
	for (b = 0; b < k / 32; b += per) {
		float amax = 0.0f;
		int64_t i;

		for (i = 0; i < per; i++) {
			float a = amax32(x + 32 * (b + i));

			/* A NaN, once there, stays. */
			amax = isnan(amax) || a <= amax ? amax : a;
		}
		for (i = 0; i < per; i++)
			d[b + i] = amax;
	}
	for (b = 0; b < k / 32; b++) {
		const float *xb = x + 32 * b;
		float amax = d[b];
		__m256 id = _mm256_set1_ps(amax >= 0x1p-120f ? 127.0f / amax :
					   0.0f);
		__m256i q[4], p;
		int sum0, sum1;

		if (!(amax <= FLT_MAX)) {
			memset(qs + 32 * b, 0, 32);
			d[b] = s[2 * b] = s[2 * b + 1] = s32[b] = NAN;
			o32[b] = 0;
			continue;
		}
		d[b] = amax >= 0x1p-120f ? amax / 127.0f : 0.0f;
		for (int i = 0; i < 4; i++)
			q[i] = _mm256_cvtps_epi32(_mm256_mul_ps(
				_mm256_loadu_ps(xb + 8 * i), id));
		sum0 = hsum_epi32(_mm256_add_epi32(q[0], q[1]));
		sum1 = hsum_epi32(_mm256_add_epi32(q[2], q[3]));
		/* Packing works within 128-bit lanes: put the 32-bit groups
		 * back in order. */
		p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]),
				       _mm256_packs_epi32(q[2], q[3]));
		p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(
			0, 4, 1, 5, 2, 6, 3, 7));
		_mm256_storeu_si256((__m256i *)(qs + 32 * b), p);
		s[2 * b] = d[b] * (float)sum0;
		s[2 * b + 1] = d[b] * (float)sum1;
		s32[b] = d[b] * (float)(sum0 + sum1);
		o32[b] = -8 * (sum0 + sum1);
	}
}

/* cpu_q8_row_scales of a type of 32-value blocks whose step leads the
 * block (a half, or an E8M0 byte), its offset as its entry says. */
static void block_scales(enum loom_type type, const char *row, int64_t k,
			 float *sc, float *o)
{
	const struct cpu_type *ct = cpu_type_of(type);

	for (int64_t b = 0; b < k / 32; b++) {
		const uint8_t *p = (const uint8_t *)row + b * ct->bytes;
		uint16_t h;
		uint32_t bits;
		float d, off = 0.0f;

		if (ct->e8m0) {
			bits = cpu_e8m0_half_bits(p[0]);
			memcpy(&d, &bits, 4);
		} else {
			memcpy(&h, p, 2);
			d = cpu_f16_to_f32(h);
		}
		if (ct->off == CPU_OFF_INT) {
			off = (float)-ct->off_int * d;
		} else if (ct->off == CPU_OFF_MIN) {
			memcpy(&h, p + 2, 2);
			off = -cpu_f16_to_f32(h);
		}
		sc[2 * b] = sc[2 * b + 1] = d;
		o[2 * b] = o[2 * b + 1] = off;
	}
}

/* Q4_K, Q5_K: each 32 values' 6-bit scale times d, min times dmin. */
static void k45_scales(enum loom_type type, const char *row, int64_t k,
		       float *sc, float *o)
{
	for (int64_t b = 0; b < k / 256; b++) {
		const uint8_t *p = (const uint8_t *)row + b * block_bytes(type);
		uint16_t dh, mh;
		float d, dmin;

		memcpy(&dh, p, 2);
		memcpy(&mh, p + 2, 2);
		d = cpu_f16_to_f32(dh);
		dmin = cpu_f16_to_f32(mh);
		for (int i = 0; i < 8; i++) {
			int s, m;

			scale_min_k(p + 4, i, &s, &m);
			sc[16 * b + 2 * i] = sc[16 * b + 2 * i + 1] =
				d * (float)s;
			o[16 * b + 2 * i] = o[16 * b + 2 * i + 1] =
				dmin * (float)m;
		}
	}
}

/* Q6_K: signed 8-bit scales per 16, the offset 32 of every value. */
static void q6_k_row_scales(const char *row, int64_t k, float *sc, float *o)
{
	for (int64_t b = 0; b < k / 256; b++) {
		const struct loom_block_q6_k *x =
			(const struct loom_block_q6_k *)row + b;
		float d = cpu_f16_to_f32(x->d);

		for (int i = 0; i < 16; i++) {
			sc[16 * b + i] = d * (float)x->scales[i];
			o[16 * b + i] = 32.0f * sc[16 * b + i];
		}
	}
}

/* Q3_K: 6-bit scales per 16 less 32 (the low 4 bits in the nibbles of
 * bytes 0-7, the top 2 in bytes 8-11), the offset 4 of every value. */
static void q3_k_row_scales(const char *row, int64_t k, float *sc, float *o)
{
	for (int64_t b = 0; b < k / 256; b++) {
		const struct loom_block_q3_k *x =
			(const struct loom_block_q3_k *)row + b;
		float d = cpu_f16_to_f32(x->d);

		for (int i = 0; i < 16; i++) {
			int lo = i < 8 ? x->scales[i] & 15 :
					 x->scales[i - 8] >> 4;
			int hi = x->scales[8 + i % 4] >> (2 * (i / 4)) & 3;

			sc[16 * b + i] = d * (float)((lo | hi << 4) - 32);
			o[16 * b + i] = 4.0f * sc[16 * b + i];
		}
	}
}

/* Q2_K: per 16 a 4-bit scale times d and a 4-bit min times dmin. */
static void q2_k_row_scales(const char *row, int64_t k, float *sc, float *o)
{
	for (int64_t b = 0; b < k / 256; b++) {
		const struct loom_block_q2_k *x =
			(const struct loom_block_q2_k *)row + b;
		float d = cpu_f16_to_f32(x->d);
		float dmin = cpu_f16_to_f32(x->dmin);

		for (int i = 0; i < 16; i++) {
			sc[16 * b + i] = d * (float)(x->scales[i] & 15);
			o[16 * b + i] = dmin * (float)(x->scales[i] >> 4);
		}
	}
}

/* IQ4_XS: per 32 a 6-bit scale less 32 times d, no offset. */
static void iq4_xs_row_scales(const char *row, int64_t k, float *sc,
			      float *o)
{
	for (int64_t b = 0; b < k / 256; b++) {
		const struct loom_block_iq4_xs *x =
			(const struct loom_block_iq4_xs *)row + b;
		float d = cpu_f16_to_f32(x->d);

		for (int i = 0; i < 8; i++) {
			int ls = (x->scales_l[i / 2] >> (4 * (i % 2)) & 15) |
				 (x->scales_h >> (2 * i) & 3) << 4;

			sc[16 * b + 2 * i] = sc[16 * b + 2 * i + 1] =
				d * (float)(ls - 32);
			o[16 * b + 2 * i] = o[16 * b + 2 * i + 1] = 0.0f;
		}
	}
}

void cpu_q8_row_scales(enum loom_type type, const char *row, int64_t k,
		       float *sc, float *o)
{
	if (cpu_type_of(type)->gv == CPU_GV_BLOCK)
		block_scales(type, row, k, sc, o);
	else if (type == LOOM_TYPE_Q4_K || type == LOOM_TYPE_Q5_K)
		k45_scales(type, row, k, sc, o);
	else if (type == LOOM_TYPE_Q6_K)
		q6_k_row_scales(row, k, sc, o);
	else if (type == LOOM_TYPE_Q3_K)
		q3_k_row_scales(row, k, sc, o);
	else if (type == LOOM_TYPE_Q2_K)
		q2_k_row_scales(row, k, sc, o);
	else if (type == LOOM_TYPE_IQ4_XS)
		iq4_xs_row_scales(row, k, sc, o);
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
		if (cpu_types[type].is_signed) {
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
			QI t = dot_u8s8(q_zero(), u[r],
					cpu_types[type].is_signed ?
					q_signed(a, neg[r]) : a, vnni);

			acc[r][c] = vfma(q_float(t), vmul(s[r], d),
					 acc[r][c]);
		}
	}
}

/* res[r * QC + c] = dot(row r of a, column c) for nr rows and nc columns
 * (constants at every call, so the accumulators stay in registers); sc
 * and o hold each row's cpu_q8_row_scales(), k / 16 apart. */
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

			if (!cpu_types[type].is_signed) {
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

	if (n < QC && cpu_q8_gv(type, vnni, a, arow, m0, m1, k, qb, n, out))
		return;
	if (n >= PANEL_MIN &&
	    cpu_q8_panel(type, vnni, a, arow, m0, m1, k, qb, n, out, tmp))
		return;
	for (jb = 0; jb < n; jb += nblk) {
		int64_t je = jb + nblk < n ? jb + nblk : n;

		for (m = m0; m < m1;) {
			const char *rows[QR];
			int nr = m1 - m < QR ? 1 : QR, r, c;

			for (r = 0; r < nr; r++) {
				rows[r] = a + (m + r) * arow;
				cpu_q8_row_scales(type, rows[r], k,
						  sc + r * (k / 16),
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
	CPU_Q8_TYPES(CASE)
#undef CASE
	default:
		break;
	}
}

bool cpu_q8_supports(enum loom_type type)
{
	return cpu_type_of(type)->bytes != 0;
}

size_t cpu_q8_tmp_floats(int64_t k)
{
	size_t tile = 2 * QR * (size_t)(k / 16), panel = cpu_q8_panel_floats(k);

	return tile > panel ? tile : panel;
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

bool cpu_q8_vnni(void)
{
	static _Atomic int known;

	return cpu_probe_once(&known, probe_vnni);
}

void cpu_q8_mm(enum loom_type type, const char *a, size_t arow, int64_t m0,
	       int64_t m1, int64_t k, const void *bp, int64_t n,
	       const struct cpu_cols *out, void *scratch)
{
	mm(type, cpu_q8_vnni(), a, arow, m0, m1, k, bp, n, out, scratch);
}

#endif /* CPU_HAVE_Q8 */