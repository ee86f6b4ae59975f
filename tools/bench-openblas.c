/* SPDX-License-Identifier: MIT */
/* bench-openblas.c - OpenBLAS as a yardstick, loaded at run time
 * (libopenblas.so.0, never linked), with its kernel forced to the best one
 * for this CPU when the environment would pick a weaker one.
 */
#define _GNU_SOURCE
#include "bench-util.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

/* OpenBLAS core names from weakest to strongest for F32 kernels on x86. */
static const char *const core_rank[] = {
	"PRESCOTT", "NEHALEM", "SANDYBRIDGE", "ZEN", "HASWELL",
	"SKYLAKEX", "COOPERLAKE", "SAPPHIRERAPIDS", NULL,
};

static int rank_of(const char *core)
{
	for (int i = 0; core && core_rank[i]; i++)
		if (!strcasecmp(core, core_rank[i]))
			return i;
	return -1;
}

/* The strongest core whose kernels this CPU can run.  Cooper Lake and
 * Sapphire Rapids share SkylakeX's SGEMM, and older OpenBLAS releases do
 * not know them, so SkylakeX is the target whenever AVX-512 is there. */
static const char *best_core(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f") &&
	    __builtin_cpu_supports("avx512bw") &&
	    __builtin_cpu_supports("avx512vl"))
		return "SKYLAKEX";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "HASWELL";
#endif
	return NULL;
}

static void *ob_open(struct bench_openblas *out)
{
	char *(*corename)(void);
	void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);

	if (!h)
		return NULL;
	*(void **)&corename = dlsym(h, "openblas_get_corename");
	snprintf(out->core, sizeof(out->core), "%s",
		 corename ? corename() : "?");
	return h;
}

int bench_openblas_load(int threads, struct bench_openblas *out)
{
	const char *env = getenv("OPENBLAS_CORETYPE");
	const char *best = best_core();
	void (*set_threads)(int);
	char *(*config)(void);
	void *h;

	memset(out, 0, sizeof(*out));
	/* OpenBLAS reads OPENBLAS_CORETYPE once, when it is loaded. */
	if (best && env && rank_of(env) < rank_of(best)) {
		setenv("OPENBLAS_CORETYPE", best, 1);
		snprintf(out->forced, sizeof(out->forced), "%s", best);
	}
	h = ob_open(out);
	if (h && best && !out->forced[0] && rank_of(out->core) >= 0 &&
	    rank_of(out->core) < rank_of(best)) {
		/* Its own detection chose a weaker kernel: load it again. */
		dlclose(h);
		setenv("OPENBLAS_CORETYPE", best, 1);
		snprintf(out->forced, sizeof(out->forced), "%s", best);
		h = ob_open(out);
	}
	if (!h)
		return loom_error_set(LOOM_E_NOT_FOUND,
				      "OpenBLAS not loaded: %s", dlerror());
	out->handle = h;
	*(void **)&out->sgemm = dlsym(h, "cblas_sgemm");
	*(void **)&out->sgemv = dlsym(h, "cblas_sgemv");
	*(void **)&set_threads = dlsym(h, "openblas_set_num_threads");
	*(void **)&config = dlsym(h, "openblas_get_config");
	if (!out->sgemm || !out->sgemv || !set_threads) {
		dlclose(h);
		out->handle = NULL;
		return loom_error_set(LOOM_E_NOT_FOUND,
				      "libopenblas.so.0 lacks cblas_sgemm");
	}
	set_threads(threads);
	snprintf(out->config, sizeof(out->config), "%s",
		 config ? config() : "?");
	return LOOM_OK;
}

static float *rand_floats(size_t n, uint64_t seed)
{
	float *p = malloc(n * sizeof(*p));
	uint64_t s = seed | 1;

	if (!p)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		p[i] = (float)(s >> 40) * (1.0f / 8388608.0f) - 1.0f;
	}
	return p;
}

struct ob_run {
	struct bench_openblas *ob;
	int64_t m, n, k;
	float *a, *b, *c;
};

static int ob_sgemm_run(void *p)
{
	struct ob_run *r = p;

	/* C[n][m] = B[n][:] . A[m][:], the layout of Loom's mul_mat. */
	r->ob->sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_TRANS, (int)r->n,
		     (int)r->m, (int)r->k, 1.0f, r->b, (int)r->k, r->a,
		     (int)r->k, 0.0f, r->c, (int)r->m);
	return 0;
}

static int ob_sgemv_run(void *p)
{
	struct ob_run *r = p;

	r->ob->sgemv(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, (int)r->m, (int)r->k,
		     1.0f, r->a, (int)r->k, r->b, 1, 0.0f, r->c, 1);
	return 0;
}

static int ob_time(struct bench_openblas *ob, int64_t m, int64_t n,
		   int64_t k, int (*fn)(void *), int reps, double *median)
{
	struct ob_run r = { .ob = ob, .m = m, .n = n, .k = k };
	int ret = LOOM_E_NOMEM;

	r.a = rand_floats((size_t)(m * k), 1);
	r.b = rand_floats((size_t)(n * k), 2);
	r.c = calloc((size_t)(m * n), sizeof(float));
	if (r.a && r.b && r.c)
		ret = bench_time(fn, &r, reps, median, NULL);
	free(r.a);
	free(r.b);
	free(r.c);
	return ret;
}

int bench_openblas_sgemm(struct bench_openblas *ob, int64_t m, int64_t n,
			 int64_t k, int reps, double *median)
{
	return ob_time(ob, m, n, k, ob_sgemm_run, reps, median);
}

int bench_openblas_sgemv(struct bench_openblas *ob, int64_t m, int64_t k,
			 int reps, double *median)
{
	return ob_time(ob, m, 1, k, ob_sgemv_run, reps, median);
}
