/* SPDX-License-Identifier: MIT */
/* cpu-simd.h - the vector primitives the CPU plugin's matrix kernels
 * are written in: a float vector VF of VLEN lanes for the variant's
 * widest unit (none in the baseline), loads that widen F16, BF16 and
 * int8 to it, and a horizontal sum of 256-bit vectors.
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

#endif
