/* SPDX-License-Identifier: MIT */
/* bench-peak.c - the machine's F32 FMA peak: a register-only loop of
 * independent fused multiply-adds on every thread, in the widest
 * instruction set the CPU has (chosen at run time), and `loom-bench peak`.
 */
#include "bench-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Iterations of the inner block; each block is 16 independent FMAs, enough
 * to cover the FMA latency on two ports. */
#define PEAK_ITERS 10000000L

struct peak_arg {
	int kind; /* 2: AVX-512, 1: AVX2+FMA, 0: scalar */
	long iters;
	float seed; /* 0, but the compiler does not know */
	float sink[64];
};

#if defined(__x86_64__)
/* The accumulators start apart (from a value the compiler cannot see), or
 * it would fold the identical chains into one. */
#define INIT16(set, s)                                                       \
	c0 = set(s), c1 = set(s + 1), c2 = set(s + 2), c3 = set(s + 3),      \
	c4 = set(s + 4), c5 = set(s + 5), c6 = set(s + 6), c7 = set(s + 7),  \
	c8 = set(s + 8), c9 = set(s + 9), c10 = set(s + 10),                 \
	c11 = set(s + 11), c12 = set(s + 12), c13 = set(s + 13),             \
	c14 = set(s + 14), c15 = set(s + 15)

__attribute__((target("avx512f"))) static float peak_avx512(long iters,
							     float s)
{
	__m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
	__m512 c0, c1, c2, c3, c4, c5, c6, c7, c8, c9, c10, c11, c12, c13;
	__m512 c14, c15;

	INIT16(_mm512_set1_ps, s);

	for (long i = 0; i < iters; i++) {
		c0 = _mm512_fmadd_ps(a, c0, b);
		c1 = _mm512_fmadd_ps(a, c1, b);
		c2 = _mm512_fmadd_ps(a, c2, b);
		c3 = _mm512_fmadd_ps(a, c3, b);
		c4 = _mm512_fmadd_ps(a, c4, b);
		c5 = _mm512_fmadd_ps(a, c5, b);
		c6 = _mm512_fmadd_ps(a, c6, b);
		c7 = _mm512_fmadd_ps(a, c7, b);
		c8 = _mm512_fmadd_ps(a, c8, b);
		c9 = _mm512_fmadd_ps(a, c9, b);
		c10 = _mm512_fmadd_ps(a, c10, b);
		c11 = _mm512_fmadd_ps(a, c11, b);
		c12 = _mm512_fmadd_ps(a, c12, b);
		c13 = _mm512_fmadd_ps(a, c13, b);
		c14 = _mm512_fmadd_ps(a, c14, b);
		c15 = _mm512_fmadd_ps(a, c15, b);
	}
	c0 = _mm512_add_ps(_mm512_add_ps(c0, c1), _mm512_add_ps(c2, c3));
	c4 = _mm512_add_ps(_mm512_add_ps(c4, c5), _mm512_add_ps(c6, c7));
	c8 = _mm512_add_ps(_mm512_add_ps(c8, c9), _mm512_add_ps(c10, c11));
	c12 = _mm512_add_ps(_mm512_add_ps(c12, c13), _mm512_add_ps(c14, c15));
	c0 = _mm512_add_ps(_mm512_add_ps(c0, c4), _mm512_add_ps(c8, c12));
	return _mm512_reduce_add_ps(c0);
}

__attribute__((target("avx2,fma"))) static float peak_avx2(long iters,
							      float s)
{
	__m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
	__m256 c0 = _mm256_set1_ps(s), c1 = _mm256_set1_ps(s + 1);
	__m256 c2 = _mm256_set1_ps(s + 2), c3 = _mm256_set1_ps(s + 3);
	__m256 c4 = _mm256_set1_ps(s + 4), c5 = _mm256_set1_ps(s + 5);
	__m256 c6 = _mm256_set1_ps(s + 6), c7 = _mm256_set1_ps(s + 7);
	__m256 c8 = _mm256_set1_ps(s + 8), c9 = _mm256_set1_ps(s + 9);
	__m256 c10 = _mm256_set1_ps(s + 10), c11 = _mm256_set1_ps(s + 11);
	float out[8];

	for (long i = 0; i < iters; i++) {
		c0 = _mm256_fmadd_ps(a, c0, b);
		c1 = _mm256_fmadd_ps(a, c1, b);
		c2 = _mm256_fmadd_ps(a, c2, b);
		c3 = _mm256_fmadd_ps(a, c3, b);
		c4 = _mm256_fmadd_ps(a, c4, b);
		c5 = _mm256_fmadd_ps(a, c5, b);
		c6 = _mm256_fmadd_ps(a, c6, b);
		c7 = _mm256_fmadd_ps(a, c7, b);
		c8 = _mm256_fmadd_ps(a, c8, b);
		c9 = _mm256_fmadd_ps(a, c9, b);
		c10 = _mm256_fmadd_ps(a, c10, b);
		c11 = _mm256_fmadd_ps(a, c11, b);
	}
	c0 = _mm256_add_ps(_mm256_add_ps(c0, c1), _mm256_add_ps(c2, c3));
	c4 = _mm256_add_ps(_mm256_add_ps(c4, c5), _mm256_add_ps(c6, c7));
	c8 = _mm256_add_ps(_mm256_add_ps(c8, c9), _mm256_add_ps(c10, c11));
	_mm256_storeu_ps(out, _mm256_add_ps(_mm256_add_ps(c0, c4), c8));
	return out[0] + out[7];
}
#endif

static float peak_scalar(long iters, float s)
{
	float c[8];

	for (int j = 0; j < 8; j++)
		c[j] = s + (float)j;

	for (long i = 0; i < iters; i++)
		for (int j = 0; j < 8; j++)
			c[j] = fmaf(0.999999f, c[j], 1e-7f);
	return c[0] + c[7];
}

/* FLOPs one thread does in peak_*(iters). */
static double peak_flops(int kind, long iters)
{
	switch (kind) {
	case 2:
		return 16.0 * 16 * 2 * (double)iters;
	case 1:
		return 12.0 * 8 * 2 * (double)iters;
	default:
		return 8.0 * 2 * (double)iters;
	}
}

static void peak_thread(int ith, int nth, void *p)
{
	struct peak_arg *a = p;
	float r;

	switch (a->kind) {
#if defined(__x86_64__)
	case 2:
		r = peak_avx512(a->iters, a->seed);
		break;
	case 1:
		r = peak_avx2(a->iters, a->seed);
		break;
#endif
	default:
		r = peak_scalar(a->iters, a->seed);
		break;
	}
	a->sink[ith % 64] = r;
}

static int peak_kind(const char **isa)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f")) {
		*isa = "avx512f";
		return 2;
	}
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
		*isa = "avx2+fma";
		return 1;
	}
#endif
	*isa = "scalar";
	return 0;
}

int bench_peak_measure(int threads, int reps, struct bench_peak *out)
{
	struct peak_arg *a = calloc(1, sizeof(*a));
	double *t;

	if (reps < 1)
		reps = 1;
	t = calloc((size_t)reps, sizeof(*t));
	if (!a || !t) {
		free(a);
		free(t);
		return LOOM_E_NOMEM;
	}
	a->kind = peak_kind(&out->isa);
	a->iters = a->kind ? PEAK_ITERS : PEAK_ITERS / 8;
	bench_parallel(threads, peak_thread, a); /* warm-up, clocks up */
	for (int i = 0; i < reps; i++)
		t[i] = bench_parallel(threads, peak_thread, a);
	out->threads = threads;
	out->gflops = peak_flops(a->kind, a->iters) * threads /
		      bench_min(t, reps) * 1e-9;
	free(t);
	free(a);
	return LOOM_OK;
}

int bench_cmd_peak(const struct bench_opts *o)
{
	int threads = bench_limit_threads(o);
	struct bench_peak one, all;
	int ret;

	ret = bench_peak_measure(1, o->reps, &one);
	if (!ret)
		ret = bench_peak_measure(threads, o->reps, &all);
	if (ret)
		return bench_fail("peak", ret);
	if (o->json) {
		struct bench_json j;

		bj_init(&j, stdout);
		bj_obj_begin(&j, NULL);
		bj_str(&j, "isa", all.isa);
		bj_int(&j, "threads", threads);
		bj_num(&j, "peak_gflops", all.gflops);
		bj_num(&j, "peak_gflops_per_thread", one.gflops);
		bj_obj_end(&j);
		bj_finish(&j);
	} else {
		static const char *const heads[] = {
			"FMA peak (f32)", "threads", "GFLOP/s", "per thread",
		};
		struct bench_table *t = bench_table_new(4, heads);

		bench_table_row(t, "%s\t%d\t%.1f\t%.1f", one.isa, 1,
				one.gflops, one.gflops);
		bench_table_row(t, "%s\t%d\t%.1f\t%.1f", all.isa, threads,
				all.gflops, all.gflops / threads);
		bench_table_print(t, stdout, NULL);
		bench_table_free(t);
	}
	return 0;
}
