/* SPDX-License-Identifier: MIT */
/* ggml-matmul.c - one matrix product timed through llama.cpp's ggml CPU
 * backend, for `tools/bench-llama-cpp.py --kernels`, which builds it
 * against an outside llama.cpp tree; Loom's own build never compiles it.
 *
 *   ggml-matmul [-v] [--no-repack] [-t THREADS] [-r REPS] TYPE M N K
 *
 * The product is ggml_mul_mat of an M x K weight of TYPE (random values
 * quantized by ggml itself) by a K x N F32 activation, as a model's
 * linear layer is.  The weight goes into the first buffer type llama.cpp
 * itself would choose for a CPU weight: the CPU backend's extra buffer
 * types (the repacking one, which stores Q4_0, Q4_K, IQ4_NL in
 * interleaved rows where the CPU has kernels for them) when they take a
 * MUL_MAT of it, else the plain CPU buffer.  After a small product
 * checked against a double-precision one, the median of REPS timed runs
 * after one warm-up is printed as one JSON object.
 */
#include <ggml.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* The check: small enough to take no time, rows a multiple of the
 * repacked layouts' 8, K a multiple of the K-quants' 256; N of 1 takes
 * the vector path, 19 the matrix path and its tail. */
#define CHECK_M 64
#define CHECK_K 512
#define CHECK_NMSE_MAX 1e-3

/* Values are drawn for this many bytes of F32 rows at most, then their
 * quantized rows are repeated: a bandwidth test needs no more. */
#define FILL_CHUNK_BYTES ((size_t)16 << 20)

struct opts {
	enum ggml_type type;
	int64_t m, n, k;
	int threads;
	int reps;
	bool verbose;
	bool no_repack;
};

/* One product, built and allocated: the weight in its own buffer, the
 * activation and the result in a plain CPU buffer. */
struct mm {
	struct ggml_context *wctx, *gctx;
	struct ggml_tensor *a, *b, *c;
	struct ggml_cgraph *gf;
	ggml_backend_buffer_type_t wbuft;
	ggml_backend_buffer_t wbuf, gbuf;
	void *host_a;	/* the weight as quantized, before any repacking */
	bool repacked;	/* the weight sits in an extra buffer type */
};

static uint64_t rng_state;

/* The interleaved layout the repacking buffer last chose, as its log
 * names it ("q4_0_8x8"), and whether the log goes to stderr in full. */
static char repack_layout[64];
static bool log_verbose;

static void log_cb(enum ggml_log_level level, const char *text, void *user)
{
	const char *w = strstr(text, "repack tensor ");

	(void)user;
	if (w && (w = strstr(w, " with "))) {
		w += strlen(" with ");
		snprintf(repack_layout, sizeof(repack_layout), "%.*s",
			 (int)strcspn(w, " \n"), w);
	}
	if (log_verbose || level == GGML_LOG_LEVEL_WARN ||
	    level == GGML_LOG_LEVEL_ERROR)
		fputs(text, stderr);
}

static float rng_uniform(void)
{
	/* xorshift64*, top 24 bits to [-1, 1). */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (float)((rng_state * 0x2545f4914f6cdd1dull) >> 40) /
		       (float)(1 << 23) - 1.0f;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;

	return (a > b) - (a < b);
}

/* A weight type by ggml's name for it, in any case: one that ggml
 * quantizes from F32 without an importance matrix and converts back. */
static bool parse_type(const char *s, enum ggml_type *type)
{
	for (int i = 0; i < GGML_TYPE_COUNT; i++) {
		enum ggml_type t = (enum ggml_type)i;
		const char *name = ggml_type_name(t);

		if (!name || strcasecmp(name, s))
			continue;
		if (t != GGML_TYPE_F32 &&
		    (!ggml_get_type_traits(t)->to_float ||
		     ggml_quantize_requires_imatrix(t)))
			return false;
		*type = t;
		return true;
	}
	return false;
}

/* The CPU device's extra buffer types, NULL-terminated, or NULL. */
static ggml_backend_buffer_type_t *extra_bufts(ggml_backend_dev_t dev)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
	ggml_backend_dev_get_extra_bufts_t fn;

	fn = (ggml_backend_dev_get_extra_bufts_t)
		ggml_backend_reg_get_proc_address(
			reg, "ggml_backend_dev_get_extra_bufts");
	return fn ? fn(dev) : NULL;
}

/* Whether the device runs mm's product with the weight in buft, asked
 * the way llama.cpp's loader asks: through an empty buffer of that type
 * under the weight. */
static bool buft_takes(ggml_backend_dev_t dev, struct mm *mm,
		       ggml_backend_buffer_type_t buft)
{
	ggml_backend_buffer_t probe = ggml_backend_buft_alloc_buffer(buft, 0);
	bool ok;

	if (!probe)
		return false;
	mm->a->buffer = probe;
	ok = ggml_backend_dev_supports_op(dev, mm->c);
	mm->a->buffer = NULL;
	ggml_backend_buffer_free(probe);
	return ok;
}

static ggml_backend_buffer_type_t pick_buft(ggml_backend_dev_t dev,
					    struct mm *mm, bool no_repack)
{
	ggml_backend_buffer_type_t *x = no_repack ? NULL : extra_bufts(dev);

	for (; x && *x; x++)
		if (buft_takes(dev, mm, *x))
			return *x;
	return ggml_backend_dev_buffer_type(dev);
}

/* Fills host with m rows of random values quantized to type: one chunk
 * of rows is drawn and quantized, then copied over the rest. */
static int fill_weight(void *host, enum ggml_type type, int64_t m, int64_t k)
{
	size_t row = ggml_row_size(type, k);
	int64_t rows = (int64_t)(FILL_CHUNK_BYTES / (sizeof(float) * k));
	float *f;

	if (rows < 1)
		rows = 1;
	if (rows > m)
		rows = m;
	f = malloc(sizeof(*f) * (size_t)(rows * k));
	if (!f)
		return -1;
	for (int64_t i = 0; i < rows * k; i++)
		f[i] = rng_uniform();
	ggml_quantize_chunk(type, f, host, 0, rows, k, NULL);
	free(f);
	for (int64_t r = rows; r < m; r += rows) {
		int64_t c = m - r < rows ? m - r : rows;

		memcpy((char *)host + (size_t)r * row, host, (size_t)c * row);
	}
	return 0;
}

static void mm_free(struct mm *mm)
{
	free(mm->host_a);
	if (mm->gbuf)
		ggml_backend_buffer_free(mm->gbuf);
	if (mm->wbuf)
		ggml_backend_buffer_free(mm->wbuf);
	if (mm->gctx)
		ggml_free(mm->gctx);
	if (mm->wctx)
		ggml_free(mm->wctx);
	memset(mm, 0, sizeof(*mm));
}

/* Builds, allocates and fills one product; keep_host keeps the weight's
 * quantized bytes for the check.  Returns 0, or -1 with a message. */
static int mm_init(struct mm *mm, ggml_backend_dev_t dev,
		   const struct opts *o, int64_t m, int64_t n, int64_t k,
		   bool keep_host)
{
	struct ggml_init_params wp = {
		.mem_size = ggml_tensor_overhead(),
		.no_alloc = true,
	};
	struct ggml_init_params gp = {
		.mem_size = 4 * ggml_tensor_overhead() + ggml_graph_overhead(),
		.no_alloc = true,
	};
	float *fb;

	memset(mm, 0, sizeof(*mm));
	mm->wctx = ggml_init(wp);
	mm->gctx = ggml_init(gp);
	if (!mm->wctx || !mm->gctx)
		goto err_free_mm;
	mm->a = ggml_new_tensor_2d(mm->wctx, o->type, k, m);
	mm->b = ggml_new_tensor_2d(mm->gctx, GGML_TYPE_F32, k, n);
	mm->c = ggml_mul_mat(mm->gctx, mm->a, mm->b);
	mm->gf = ggml_new_graph(mm->gctx);
	ggml_build_forward_expand(mm->gf, mm->c);

	mm->wbuft = pick_buft(dev, mm, o->no_repack);
	mm->repacked = mm->wbuft != ggml_backend_dev_buffer_type(dev);
	mm->wbuf = ggml_backend_alloc_ctx_tensors_from_buft(mm->wctx,
							    mm->wbuft);
	mm->gbuf = ggml_backend_alloc_ctx_tensors_from_buft(
		mm->gctx, ggml_backend_dev_buffer_type(dev));
	if (!mm->wbuf || !mm->gbuf)
		goto err_free_mm;
	ggml_backend_buffer_set_usage(mm->wbuf,
				      GGML_BACKEND_BUFFER_USAGE_WEIGHTS);

	/* A repacking buffer rearranges the whole tensor as it is set. */
	mm->host_a = malloc(ggml_nbytes(mm->a));
	fb = malloc(ggml_nbytes(mm->b));
	if (!mm->host_a || !fb || fill_weight(mm->host_a, o->type, m, k)) {
		free(fb);
		goto err_free_mm;
	}
	ggml_backend_tensor_set(mm->a, mm->host_a, 0, ggml_nbytes(mm->a));
	for (int64_t i = 0; i < n * k; i++)
		fb[i] = rng_uniform();
	ggml_backend_tensor_set(mm->b, fb, 0, ggml_nbytes(mm->b));
	free(fb);
	if (!keep_host) {
		free(mm->host_a);
		mm->host_a = NULL;
	}
	return 0;

err_free_mm:
	fprintf(stderr, "ggml-matmul: out of memory for %s %lldx%lldx%lld\n",
		ggml_type_name(o->type), (long long)m, (long long)n,
		(long long)k);
	mm_free(mm);
	return -1;
}

static int compute(ggml_backend_t be, struct mm *mm)
{
	enum ggml_status st = ggml_backend_graph_compute(be, mm->gf);

	if (st != GGML_STATUS_SUCCESS) {
		fprintf(stderr, "ggml-matmul: compute failed (%d)\n", (int)st);
		return -1;
	}
	return 0;
}

/* NMSE of one small product against the double-precision product of
 * the dequantized weight and the F32 activation, or a negative value. */
static double check_one(ggml_backend_t be, ggml_backend_dev_t dev,
			const struct opts *o, int64_t n)
{
	const struct ggml_type_traits *tt = ggml_get_type_traits(o->type);
	const int64_t m = CHECK_M, k = CHECK_K;
	size_t row = ggml_row_size(o->type, k);
	float *w = NULL, *x = NULL, *y = NULL;
	double err = 0, ref2 = 0, nmse = -1;
	struct mm mm;

	if (mm_init(&mm, dev, o, m, n, k, true))
		return -1;
	w = malloc(sizeof(*w) * (size_t)(m * k));
	x = malloc(sizeof(*x) * (size_t)(n * k));
	y = malloc(sizeof(*y) * (size_t)(m * n));
	if (!w || !x || !y || compute(be, &mm))
		goto out;
	for (int64_t r = 0; r < m; r++) {
		const char *src = (const char *)mm.host_a + (size_t)r * row;

		if (o->type == GGML_TYPE_F32)
			memcpy(w + r * k, src, row);
		else
			tt->to_float(src, w + r * k, k);
	}
	ggml_backend_tensor_get(mm.b, x, 0, ggml_nbytes(mm.b));
	ggml_backend_tensor_get(mm.c, y, 0, ggml_nbytes(mm.c));
	for (int64_t j = 0; j < n; j++) {
		for (int64_t i = 0; i < m; i++) {
			double ref = 0, d;

			for (int64_t l = 0; l < k; l++)
				ref += (double)w[i * k + l] *
				       (double)x[j * k + l];
			d = (double)y[j * m + i] - ref;
			err += d * d;
			ref2 += ref * ref;
		}
	}
	nmse = ref2 > 0 ? err / ref2 : err;
out:
	free(w);
	free(x);
	free(y);
	mm_free(&mm);
	return nmse;
}

/* The CPU backend's features, as one space-separated string. */
static void cpu_features(ggml_backend_dev_t dev, char *buf, size_t len)
{
	ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(dev);
	ggml_backend_get_features_t fn;
	struct ggml_backend_feature *f;
	size_t used = 0;

	buf[0] = '\0';
	fn = (ggml_backend_get_features_t)ggml_backend_reg_get_proc_address(
		reg, "ggml_backend_get_features");
	for (f = fn ? fn(reg) : NULL; f && f->name; f++) {
		int w = snprintf(buf + used, len - used, "%s%s",
				 used ? " " : "", f->name);

		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
}

/* One JSON object on stdout; "layout" is null unless the weight was
 * repacked and ggml named the layout. */
static void print_result(const struct opts *o, const struct mm *mm,
			 double med, double nmse, const char *features)
{
	double flop = 2.0 * (double)o->m * (double)o->n * (double)o->k;
	size_t bytes = ggml_nbytes(mm->a);
	char layout[sizeof(repack_layout) + 2] = "null";

	if (repack_layout[0])
		snprintf(layout, sizeof(layout), "\"%s\"", repack_layout);
	printf("{\"type\": \"%s\", \"m\": %lld, \"n\": %lld, \"k\": %lld, "
	       "\"threads\": %d, \"reps\": %d, \"buffer\": \"%s\", "
	       "\"repacked\": %s, \"layout\": %s, \"weight_bytes\": %zu, "
	       "\"median_s\": %.9g, \"gflops\": %.6g, \"gbps\": %.6g, "
	       "\"check_nmse\": %.3g, \"features\": \"%s\"}\n",
	       ggml_type_name(o->type), (long long)o->m, (long long)o->n,
	       (long long)o->k, o->threads, o->reps,
	       ggml_backend_buft_name(mm->wbuft), mm->repacked ? "true" : "false",
	       layout, bytes, med, flop / med * 1e-9,
	       (double)bytes / med * 1e-9, nmse, features);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ggml-matmul [-v] [--no-repack] [-t THREADS] [-r REPS] "
		"TYPE M N K\n"
		"  TYPE      f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k (others ggml "
		"quantizes too)\n"
		"  M N K     weight M x K, activation K x N\n"
		"  -t N      threads (default 1)\n"
		"  -r N      timed runs after one warm-up (default 5)\n"
		"  -v        print the check's NMSE and the path to stderr\n"
		"  --no-repack  the plain CPU buffer, as llama.cpp's "
		"--no-repack\n");
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	const char *pos[4];
	int n_pos = 0;

	*o = (struct opts){ .threads = 1, .reps = 5 };
	for (int i = 1; i < argc; i++) {
		const char *s = argv[i];

		if (!strcmp(s, "-v")) {
			o->verbose = true;
		} else if (!strcmp(s, "--no-repack")) {
			o->no_repack = true;
		} else if (!strcmp(s, "-t") && i + 1 < argc) {
			o->threads = atoi(argv[++i]);
		} else if (!strcmp(s, "-r") && i + 1 < argc) {
			o->reps = atoi(argv[++i]);
		} else if (s[0] == '-' || n_pos == 4) {
			return -1;
		} else {
			pos[n_pos++] = s;
		}
	}
	if (n_pos != 4 || o->threads < 1 || o->reps < 1)
		return -1;
	if (!parse_type(pos[0], &o->type)) {
		fprintf(stderr, "ggml-matmul: unknown type %s\n", pos[0]);
		return -1;
	}
	o->m = atoll(pos[1]);
	o->n = atoll(pos[2]);
	o->k = atoll(pos[3]);
	if (o->m < 1 || o->n < 1 || o->k < 1 ||
	    o->k % ggml_blck_size(o->type)) {
		fprintf(stderr, "ggml-matmul: M, N, K must be positive, K a "
			"multiple of %s's block of %lld\n",
			ggml_type_name(o->type),
			(long long)ggml_blck_size(o->type));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct ggml_threadpool_params tpp;
	struct ggml_threadpool *tp = NULL;
	ggml_backend_dev_t dev;
	ggml_backend_t be = NULL;
	double *t = NULL, nmse = 0, med;
	char features[512];
	struct mm mm;
	struct opts o;
	int ret = 1;

	if (parse_args(argc, argv, &o)) {
		usage();
		return 2;
	}
	rng_state = 0x9e3779b97f4a7c15ull;
	log_verbose = o.verbose;
	ggml_log_set(log_cb, NULL);
	dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
	be = dev ? ggml_backend_dev_init(dev, NULL) : NULL;
	if (!be) {
		fprintf(stderr, "ggml-matmul: no CPU backend\n");
		return 1;
	}
	/* A pool that lives across runs, as llama-bench attaches one. */
	tpp = ggml_threadpool_params_default(o.threads);
	tp = ggml_threadpool_new(&tpp);
	if (!tp) {
		fprintf(stderr, "ggml-matmul: no thread pool\n");
		goto err_free_backend;
	}
	ggml_backend_cpu_set_threadpool(be, tp);
	ggml_backend_cpu_set_n_threads(be, o.threads);
	cpu_features(dev, features, sizeof(features));

	for (int64_t n = 1; n <= 19; n += 18) {
		double e = check_one(be, dev, &o, n);

		if (e < 0)
			goto err_free_pool;
		if (o.verbose)
			fprintf(stderr, "ggml-matmul: check %s %dx%lldx%d: "
				"NMSE %.3g\n", ggml_type_name(o.type),
				CHECK_M, (long long)n, CHECK_K, e);
		if (e > nmse)
			nmse = e;
	}
	if (!(nmse <= CHECK_NMSE_MAX)) {
		fprintf(stderr, "ggml-matmul: %s product off: NMSE %.3g\n",
			ggml_type_name(o.type), nmse);
		goto err_free_pool;
	}

	repack_layout[0] = '\0';
	if (mm_init(&mm, dev, &o, o.m, o.n, o.k, false))
		goto err_free_pool;
	if (o.verbose)
		fprintf(stderr, "ggml-matmul: weight in %s (%s), features: "
			"%s\n", ggml_backend_buft_name(mm.wbuft),
			mm.repacked ? "repacked" : "as quantized", features);
	t = malloc(sizeof(*t) * (size_t)o.reps);
	if (!t || compute(be, &mm))
		goto err_free_mm;
	for (int i = 0; i < o.reps; i++) {
		double t0 = now_s();

		if (compute(be, &mm))
			goto err_free_mm;
		t[i] = now_s() - t0;
	}
	qsort(t, (size_t)o.reps, sizeof(*t), cmp_double);
	med = o.reps % 2 ? t[o.reps / 2] :
			   0.5 * (t[o.reps / 2 - 1] + t[o.reps / 2]);
	print_result(&o, &mm, med, nmse, features);
	ret = 0;
err_free_mm:
	free(t);
	mm_free(&mm);
err_free_pool:
	ggml_threadpool_free(tp);
err_free_backend:
	ggml_backend_free(be);
	return ret;
}
