/* SPDX-License-Identifier: MIT */
/* bench-stream.c - the machine's memory bandwidth, STREAM style: copy
 * (read + write) and read (a sum kept in registers) over arrays much
 * larger than the last-level cache, on every thread; `loom-bench stream`.
 * Each is the best of a plain kernel and a tuned one (non-temporal stores
 * for copy, software prefetch for read): the limit is what the machine
 * can do, not what one way of asking gets.
 */
#include "bench-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

/* Never more than this per array pair: the machine is shared. */
#define STREAM_MAX_BYTES (2ull << 30)
#define STREAM_MIN_BYTES (256ull << 20)

struct stream_arg {
	float *a; /* source */
	float *b; /* copy destination */
	size_t n; /* floats per array */
	int kind; /* 2: AVX-512, 1: AVX2, 0: plain */
	int op;   /* an enum stream_op */
	float sink[64];
};

size_t bench_llc_bytes(void)
{
	size_t best = 0;

	for (int i = 0; i < 8; i++) {
		char path[128], buf[64];
		FILE *f;
		size_t v;
		char unit = 0;

		snprintf(path, sizeof(path),
			 "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(buf, sizeof(buf), f) &&
		    sscanf(buf, "%zu%c", &v, &unit) >= 1) {
			if (unit == 'K')
				v <<= 10;
			else if (unit == 'M')
				v <<= 20;
			best = v > best ? v : best;
		}
		fclose(f);
	}
	return best;
}

enum stream_op {
	OP_TOUCH,
	OP_COPY,          /* memcpy */
	OP_COPY_STREAMING, /* non-temporal stores */
	OP_READ,
	OP_READ_PREFETCH, /* software prefetch, STREAM_PREFETCH ahead */
};

/* Bytes ahead that the prefetching read asks for. */
#define STREAM_PREFETCH 3072

#if defined(__x86_64__)
__attribute__((target("avx512f"))) static float read_avx512(const float *p,
							     size_t n,
							     bool prefetch)
{
	__m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	size_t i = 0;

	for (; i + 64 <= n; i += 64) {
		if (prefetch) {
			const char *q = (const char *)(p + i) +
					STREAM_PREFETCH;

			_mm_prefetch(q, _MM_HINT_T0);
			_mm_prefetch(q + 64, _MM_HINT_T0);
			_mm_prefetch(q + 128, _MM_HINT_T0);
			_mm_prefetch(q + 192, _MM_HINT_T0);
		}
		s0 = _mm512_add_ps(s0, _mm512_load_ps(p + i));
		s1 = _mm512_add_ps(s1, _mm512_load_ps(p + i + 16));
		s2 = _mm512_add_ps(s2, _mm512_load_ps(p + i + 32));
		s3 = _mm512_add_ps(s3, _mm512_load_ps(p + i + 48));
	}
	s0 = _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3));
	return _mm512_reduce_add_ps(s0);
}

__attribute__((target("avx2"))) static float read_avx2(const float *p,
							size_t n,
							bool prefetch)
{
	__m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
	float out[8];
	size_t i = 0;

	for (; i + 32 <= n; i += 32) {
		if (prefetch) {
			const char *q = (const char *)(p + i) +
					STREAM_PREFETCH;

			_mm_prefetch(q, _MM_HINT_T0);
			_mm_prefetch(q + 64, _MM_HINT_T0);
		}
		s0 = _mm256_add_ps(s0, _mm256_load_ps(p + i));
		s1 = _mm256_add_ps(s1, _mm256_load_ps(p + i + 8));
		s2 = _mm256_add_ps(s2, _mm256_load_ps(p + i + 16));
		s3 = _mm256_add_ps(s3, _mm256_load_ps(p + i + 24));
	}
	s0 = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
	_mm256_storeu_ps(out, s0);
	return out[0] + out[7];
}

/* Copies n floats (a multiple of 16, 64-byte aligned) around the caches. */
__attribute__((target("avx512f"))) static void copy_streaming_avx512(
	float *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i += 16)
		_mm512_stream_ps(dst + i, _mm512_load_ps(src + i));
	_mm_sfence();
}

__attribute__((target("avx2"))) static void copy_streaming_avx2(
	float *dst, const float *src, size_t n)
{
	for (size_t i = 0; i < n; i += 8)
		_mm256_stream_ps(dst + i, _mm256_load_ps(src + i));
	_mm_sfence();
}
#endif

static float read_plain(const float *p, size_t n)
{
	float s[8] = { 0 };

	for (size_t i = 0; i + 8 <= n; i += 8)
		for (int j = 0; j < 8; j++)
			s[j] += p[i + j];
	return s[0] + s[7];
}

static void stream_thread(int ith, int nth, void *p)
{
	struct stream_arg *a = p;
	/* Chunks of 64 floats (four cache lines), contiguous per thread. */
	size_t lines = a->n / 64, per = (lines + (size_t)nth - 1) / (size_t)nth;
	size_t lo = per * (size_t)ith * 64, hi = lo + per * 64;
	float r = 0;

	if (hi > a->n)
		hi = a->n;
	if (lo >= hi)
		return;
	switch (a->op) {
	case OP_TOUCH:
		memset(a->a + lo, 0, (hi - lo) * sizeof(float));
		memset(a->b + lo, 0, (hi - lo) * sizeof(float));
		break;
	case OP_COPY_STREAMING:
#if defined(__x86_64__)
		if (a->kind == 2) {
			copy_streaming_avx512(a->b + lo, a->a + lo, hi - lo);
			break;
		}
		if (a->kind == 1) {
			copy_streaming_avx2(a->b + lo, a->a + lo, hi - lo);
			break;
		}
#endif
		/* fall through */
	case OP_COPY:
		memcpy(a->b + lo, a->a + lo, (hi - lo) * sizeof(float));
		break;
	default:
#if defined(__x86_64__)
		if (a->kind == 2)
			r = read_avx512(a->a + lo, hi - lo,
					a->op == OP_READ_PREFETCH);
		else if (a->kind == 1)
			r = read_avx2(a->a + lo, hi - lo,
				      a->op == OP_READ_PREFETCH);
		else
#endif
			r = read_plain(a->a + lo, hi - lo);
		break;
	}
	a->sink[ith % 64] = r;
}

static void *big_alloc(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		return NULL;
	madvise(p, bytes, MADV_HUGEPAGE);
	return p;
}

/* The fastest of reps timed runs of op, after one to warm up. */
static double time_op(struct stream_arg *a, int threads, int op, int reps,
		      double *t)
{
	a->op = op;
	bench_parallel(threads, stream_thread, a);
	for (int i = 0; i < reps; i++)
		t[i] = bench_parallel(threads, stream_thread, a);
	return bench_min(t, reps);
}

int bench_stream_measure(int threads, int reps, bool quick,
			 struct bench_stream *out)
{
	struct stream_arg *a = calloc(1, sizeof(*a));
	size_t bytes = 4 * bench_llc_bytes();
	double *t, plain, tuned;
	int ret = LOOM_OK;

	if (reps < 1)
		reps = 1;
	if (!bytes || bytes > STREAM_MAX_BYTES)
		bytes = STREAM_MAX_BYTES;
	if (quick)
		bytes /= 2;
	if (bytes < STREAM_MIN_BYTES)
		bytes = STREAM_MIN_BYTES;
	bytes &= ~(size_t)4095;
	t = calloc((size_t)reps, sizeof(*t));
	if (!a || !t) {
		ret = LOOM_E_NOMEM;
		goto out;
	}
	/* Copy: two arrays of bytes / 2; read: one array of bytes. */
	a->a = big_alloc(bytes);
	a->b = a->a ? (float *)((char *)a->a + bytes / 2) : NULL;
	if (!a->a) {
		ret = loom_error_set(LOOM_E_NOMEM, "cannot map %zu bytes",
				     bytes);
		goto out;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	a->kind = __builtin_cpu_supports("avx512f") ? 2 :
		  __builtin_cpu_supports("avx2") ? 1 : 0;
#endif
	a->n = bytes / 2 / sizeof(float);
	a->op = OP_TOUCH;
	bench_parallel(threads, stream_thread, a);
	plain = time_op(a, threads, OP_COPY, reps, t);
	tuned = a->kind ? time_op(a, threads, OP_COPY_STREAMING, reps, t)
			: INFINITY;
	out->copy_how = tuned < plain ? "non-temporal stores" : "memcpy";
	out->copy_gbps = (double)bytes / fmin(plain, tuned) * 1e-9;
	a->n = bytes / sizeof(float);
	plain = time_op(a, threads, OP_READ, reps, t);
	tuned = a->kind ? time_op(a, threads, OP_READ_PREFETCH, reps, t)
			: INFINITY;
	out->read_how = tuned < plain ? "software prefetch" : "plain loads";
	out->read_gbps = (double)bytes / fmin(plain, tuned) * 1e-9;
	out->bytes = bytes;
	out->threads = threads;
	munmap(a->a, bytes);
out:
	free(t);
	free(a);
	return ret;
}

/* `loom-bench stream --devices NAME` for a device that is not the CPU:
 * its own copy bandwidth beside the memory's nominal one. */
static int device_stream(loom_dev_t *dev, const struct bench_opts *o)
{
	struct bench_device d;
	int ret = bench_device_limits(dev, o, &d);

	if (ret)
		return bench_fail("device copy", ret);
	if (o->json) {
		struct bench_json j;

		bj_begin_run(&j, dev, 0);
		bj_num(&j, "copy_gbps", d.copy_gbps);
		if (d.hbm_gbps > 0)
			bj_num(&j, "nominal_gbps", d.hbm_gbps);
		else
			bj_null(&j, "nominal_gbps");
		bj_obj_end(&j);
		bj_finish(&j);
		return 0;
	}
	printf("%s: device-to-device copy of 1 GiB: %.0f GB/s (read + "
	       "write)", loom_dev_name(dev), d.copy_gbps);
	if (d.hbm_gbps > 0)
		printf(", %.0f%% of the memory's nominal %.0f GB/s",
		       100 * d.copy_gbps / d.hbm_gbps, d.hbm_gbps);
	printf("\n");
	return 0;
}

int bench_cmd_stream(const struct bench_opts *o)
{
	int threads = bench_limit_threads(o);
	struct bench_stream one, all;
	int ret;

	if (o->devices && *o->devices) {
		loom_dev_t *dev = bench_open_device(o);

		if (!dev)
			return 1;
		if (!bench_dev_is_cpu(dev))
			return device_stream(dev, o);
	}

	ret = bench_stream_measure(1, o->reps, o->quick, &one);
	if (!ret)
		ret = bench_stream_measure(threads, o->reps, o->quick, &all);
	if (ret)
		return bench_fail("stream", ret);
	if (o->json) {
		struct bench_json j;

		bj_init(&j, stdout);
		bj_obj_begin(&j, NULL);
		bj_int(&j, "threads", threads);
		bj_int(&j, "bytes", (int64_t)all.bytes);
		bj_int(&j, "llc_bytes", (int64_t)bench_llc_bytes());
		bj_num(&j, "copy_gbps", all.copy_gbps);
		bj_num(&j, "read_gbps", all.read_gbps);
		bj_num(&j, "stream_gbps", all.read_gbps);
		bj_num(&j, "read_gbps_1thread", one.read_gbps);
		bj_num(&j, "copy_gbps_1thread", one.copy_gbps);
		bj_obj_end(&j);
		bj_finish(&j);
	} else {
		static const char *const heads[] = { "STREAM", "threads",
						     "array", "copy GB/s",
						     "read GB/s" };
		struct bench_table *t = bench_table_new(5, heads);

		bench_table_row(t, "memory\t%d\t%.0f MiB\t%.1f\t%.1f", 1,
				one.bytes / 1048576.0, one.copy_gbps,
				one.read_gbps);
		bench_table_row(t, "memory\t%d\t%.0f MiB\t%.1f\t%.1f", threads,
				all.bytes / 1048576.0, all.copy_gbps,
				all.read_gbps);
		bench_table_print(t, stdout, NULL);
		printf("(last-level cache %.0f MiB; copy counts read + "
		       "write; best copy: %s, best read: %s)\n",
		       bench_llc_bytes() / 1048576.0, all.copy_how,
		       all.read_how);
		bench_table_free(t);
	}
	return 0;
}
