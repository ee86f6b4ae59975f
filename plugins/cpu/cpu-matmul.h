/* cpu-matmul.h - what the CPU plugin's matrix kernels share: where a
 * product writes its columns, and the quantized kernels of matmul-q8.c
 * (built where the variant has AVX2, FMA and F16C).
 */
#ifndef LOOM_CPU_MATMUL_H
#define LOOM_CPU_MATMUL_H

#include "cpu-ops.h"

/* Where a product writes: column j (a row of dst) starts at base +
 * offs[j] bytes, or base + j * stride when offs is NULL. */
struct cpu_cols {
	char *base;
	size_t stride;
	const int64_t *offs;
};

static inline float *cpu_cols_at(const struct cpu_cols *c, int64_t j)
{
	return (float *)(c->base + (c->offs ? (size_t)c->offs[j] :
					      (size_t)j * c->stride));
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CPU_HAVE_Q8 1

/* Whether cpu_q8_mm takes weights of type. */
bool cpu_q8_supports(enum loom_type type);
/* Bytes of one activation row of k values (k a multiple of 32) once
 * quantized by cpu_q8_quantize. */
size_t cpu_q8_col_bytes(int64_t k);
/* Quantizes k floats to 8 bits per value, a scale per 32, into out
 * (cpu_q8_col_bytes(k) bytes). */
void cpu_q8_quantize(const float *x, int64_t k, char *out);
/* Floats of scratch cpu_q8_mm needs for rows of k values. */
size_t cpu_q8_tmp_floats(int64_t k);
/* Column j, rows [m0, m1) of out = rows of a (arow bytes apart, of a
 * type cpu_q8_supports) times quantized column j at qb +
 * j * cpu_q8_col_bytes(k), for j < n. */
void cpu_q8_mm(enum loom_type type, const char *a, size_t arow, int64_t m0,
	       int64_t m1, int64_t k, const char *qb, int64_t n,
	       const struct cpu_cols *out, float *tmp);
#endif

#endif
