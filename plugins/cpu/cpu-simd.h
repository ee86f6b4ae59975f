/* SPDX-License-Identifier: MIT */
/* cpu-simd.h - the vector primitives the CPU plugin's matrix kernels
 * are written in: a float vector VF of VLEN lanes for the variant's
 * widest unit (none in the baseline), loads that widen F16, BF16 and
 * int8 to it, a horizontal sum, 8 x 8 and 16 x 16 transposes of
 * 32-bit values, and the AVX512_BF16 pair dot product, which the AVX-512
 * variant finds at run time.
 */
#ifndef LOOM_CPU_SIMD_H
#define LOOM_CPU_SIMD_H

#include "cpu-ops.h"

#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

#if defined(__AVX__)
static inline float cpu_hsum256(__m256 v)
{
	__m128 s = _mm_add_ps(_mm256_castps256_ps128(v),
			      _mm256_extractf128_ps(v, 1));

	s = _mm_add_ps(s, _mm_movehl_ps(s, s));
	s = _mm_add_ss(s, _mm_movehdup_ps(s));
	return _mm_cvtss_f32(s);
}
#endif

#if defined(__AVX__)
/* Transposes the 8 x 8 32-bit values of r in place (floats, or integers
 * cast to them: the shuffles keep their bits). */
static inline void cpu_transpose8_ps(__m256 r[8])
{
	__m256 t[8], u[8];
	int i;

	for (i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
		t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
	}
	for (i = 0; i < 8; i += 4) {
		u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
		u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xee);
		u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
		u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xee);
	}
	for (i = 0; i < 4; i++) {
		r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
		r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
	}
}
#endif

#if defined(__AVX512F__)
/* Transposes the 16 x 16 32-bit values of r in place: r[i] becomes
 * column i (floats, or integers cast to them). */
static inline __attribute__((always_inline)) void
cpu_transpose16_ps(__m512 r[16])
{
	__m512 t[16];
	int i;

	_Pragma("GCC unroll 16")
	for (i = 0; i < 8; i++) {
		t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
		t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
	}
	_Pragma("GCC unroll 16")
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
	_Pragma("GCC unroll 16")
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
	_Pragma("GCC unroll 16")
	for (i = 0; i < 16; i++)
		r[i] = t[i];
}
#endif

#if defined(__AVX512F__)
#define VF __m512
#define VLEN 16
#define vzero() _mm512_setzero_ps()
#define vfma(a, b, c) _mm512_fmadd_ps(a, b, c)
#define vmul(a, b) _mm512_mul_ps(a, b)
#define vload(p) _mm512_loadu_ps(p)
#define vstore(p, v) _mm512_storeu_ps(p, v)
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
#define vstore(p, v) _mm256_storeu_ps(p, v)
#define vhsum(v) cpu_hsum256(v)

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

#if defined(__AVX2__) && defined(__FMA__)
#define CPU_HAVE_EXP256 1
/* cpu_expf (cpu-ops.h) on eight lanes, step for step: the scalar one
 * does not vectorize (its NaN test). */
static inline __m256 cpu_exp256(__m256 x)
{
	const __m256 magic = _mm256_set1_ps(0x1.8p23f);
	__m256 c, k, r, p;
	__m256i ki;

	c = _mm256_min_ps(x, _mm256_set1_ps(88.3f));
	c = _mm256_max_ps(c, _mm256_set1_ps(-87.0f));
	k = _mm256_sub_ps(_mm256_fmadd_ps(c, _mm256_set1_ps(
		1.44269504088896341f), magic), magic);
	r = _mm256_fnmadd_ps(k, _mm256_set1_ps(0.693145751953125f), c);
	r = _mm256_fnmadd_ps(k, _mm256_set1_ps(1.428606765330187e-06f), r);
	p = _mm256_set1_ps(1.0f / 720.0f);
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
	ki = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(k),
						_mm256_set1_epi32(127)), 23);
	p = _mm256_mul_ps(p, _mm256_castsi256_ps(ki));
	p = _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-87.0f),
					   _CMP_LT_OQ), p);
	/* A NaN passes through. */
	return _mm256_blendv_ps(p, x, _mm256_cmp_ps(x, x, _CMP_UNORD_Q));
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define CPU_HAVE_BF16_DP 1
/* Functions that use vdpbf16ps and vcvtne2ps2bf16: built for them, run
 * only where cpu_bf16_dp() says the CPU has them. */
#define CPU_BF16_TARGET __attribute__((target("avx512bf16")))

static inline bool cpu_bf16_dp(void)
{
	return __builtin_cpu_supports("avx512bf16");
}

/* Rounds n floats of x to BF16 (to nearest even) as pairs: word i of w
 * holds values 2i (low half) and 2i + 1, the odd one out paired with
 * zero.  w may be x itself. */
static inline CPU_BF16_TARGET void cpu_f32_to_bf16_pairs(const float *x,
							 int64_t n,
							 uint32_t *w)
{
	int64_t i = 0;

	for (; i + 32 <= n; i += 32) {
		__m512bh p = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16),
						 _mm512_loadu_ps(x + i));

		_mm512_storeu_si512((void *)(w + i / 2), (__m512i)p);
	}
	if (i < n) {
		int64_t r = n - i;
		__mmask16 lo = r >= 16 ? 0xffff : (__mmask16)((1u << r) - 1);
		__mmask16 hi = r <= 16 ? 0 : (__mmask16)((1u << (r - 16)) - 1);
		__mmask16 out = (__mmask16)((1u << ((r + 1) / 2)) - 1);
		__m512bh p = _mm512_cvtne2ps_pbh(
			_mm512_maskz_loadu_ps(hi, x + i + 16),
			_mm512_maskz_loadu_ps(lo, x + i));

		_mm512_mask_storeu_epi32(w + i / 2, out, (__m512i)p);
	}
}
#endif

#endif
