/* SPDX-License-Identifier: MIT */
/* test-gpu-paths.c - the CUDA plugin's fast paths, each run on sizes that
 * take it, checked against a double-precision reference, and seen to run
 * (the plugin logs each path a backend takes, once): the GEMV for every
 * weight type (dp4a for the quantized ones), get_rows of every quantized
 * type bit for bit against libcore, dequantizing for the BLAS
 * (over more than one slab), the GQA broadcast in one BLAS call, the
 * experts grouped into GEMMs (ids out of range included), and CUDA graphs
 * captured, replayed and updated in place, against the same graphs run
 * node by node.  Without a CUDA device every test skips.
 */
#include "test-util.h"

#include <loom/loom-plugin.h>

#include "cuda-types.h"

#include <glib.h>
#include <math.h>
#include <string.h>

static GString *log_text;

static void collect(enum loom_log_level level, const char *msg, void *ud)
{
	g_string_append(log_text, msg);
	g_string_append_c(log_text, '\n');
}

/* The CUDA device, with the plugin's log collected; NULL: skip. */
static loom_dev_t *gpu_begin(void)
{
	loom_dev_t *dev = loom_dev_by_name("cuda0");

	if (!dev) {
		g_test_skip("no CUDA device");
		return NULL;
	}
	g_string_truncate(log_text, 0);
	loom_log_set_callback(collect, NULL);
	loom_log_set_level(LOOM_LOG_INFO);
	return dev;
}

static void gpu_end(void)
{
	loom_log_set_callback(NULL, NULL);
	loom_log_set_level(LOOM_LOG_WARN);
}

/* The plugin said it took path name ("cuda0: path <name>"). */
static void expect_path(const char *name)
{
	char *line = g_strdup_printf(": path %s", name);

	if (!strstr(log_text->str, line))
		g_test_message("log so far:\n%s", log_text->str);
	g_assert_nonnull(strstr(log_text->str, line));
	g_free(line);
}

static double *doubles(const struct loom_tensor *t)
{
	char *err = NULL;
	double *v = loom_test_get_doubles(t, &err);

	if (!v)
		g_test_message("%s", err);
	g_assert_nonnull(v);
	return v;
}

/* A graph of out, its leaves placed on dev and filled: uniform in
 * [-range, range), I32 leaves from ids (when given). */
struct run {
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	loom_graph_t *g;
};

static void run_place(struct run *r, loom_dev_t *dev, struct loom_tensor *out,
		      double range, const int32_t *ids, uint64_t seed)
{
	struct loom_test_rng rng;

	g_assert_nonnull(out);
	loom_test_rng_seed(&rng, seed);
	g_assert_cmpint(loom_graph_new(r->ctx, &r->g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(r->g, out), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(r->ctx,
					       loom_dev_buffer_type(dev),
					       &r->buf), ==, LOOM_OK);
	for (size_t i = 0; i < loom_graph_n_leaves(r->g); i++) {
		struct loom_tensor *t = loom_graph_leaf(r->g, i);

		if (t->type == LOOM_TYPE_I32)
			g_assert_cmpint(loom_test_set_i32(t, ids), ==, LOOM_OK);
		else
			g_assert_cmpint(loom_test_fill_uniform(t, &rng, -range,
							       range), ==,
					LOOM_OK);
	}
}

static void run_compute(struct run *r, loom_backend_t *be)
{
	g_assert_cmpint(loom_backend_graph_compute(be, r->g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
}

static void run_free(struct run *r)
{
	loom_buffer_free(r->buf);
	loom_ctx_free(r->ctx);
	memset(r, 0, sizeof(*r));
}

/* mul_mat of a (ta, [K, M, A2]) by b (F32, [K, N, B2], b permuted from a
 * [K, B2, N] leaf when permute) on be, against the reference. */
static void check_mul_mat(loom_dev_t *dev, loom_backend_t *be,
			  enum loom_type ta, int64_t K, int64_t M, int64_t A2,
			  int64_t N, int64_t B2, bool permute, double bound)
{
	struct run r = { 0 };
	struct loom_tensor *a, *b, *c;
	double *da, *db, *dc, *ref, nmse;
	const int64_t r2 = B2 / A2;

	g_assert_cmpint(loom_ctx_new(0, &r.ctx), ==, LOOM_OK);
	a = loom_tensor_new_3d(r.ctx, ta, K, M, A2);
	if (permute)
		b = loom_permute(r.ctx, loom_tensor_new_3d(r.ctx, LOOM_TYPE_F32,
							   K, B2, N),
				 0, 2, 1, 3);
	else
		b = loom_tensor_new_3d(r.ctx, LOOM_TYPE_F32, K, N, B2);
	c = loom_mul_mat(r.ctx, a, b);
	run_place(&r, dev, c, 1.0, NULL, (uint64_t)(K * 31 + M * 7 + N));
	run_compute(&r, be);
	da = doubles(a);
	db = doubles(b);
	dc = doubles(c);
	ref = g_new0(double, M * N * B2);
	for (int64_t z = 0; z < B2; z++)
		for (int64_t n = 0; n < N; n++)
			for (int64_t m = 0; m < M; m++) {
				const double *x = da + ((z / r2) * M + m) * K;
				const double *y = db + (z * N + n) * K;
				double s = 0;

				for (int64_t k = 0; k < K; k++)
					s += x[k] * y[k];
				ref[(z * N + n) * M + m] = s;
			}
	nmse = loom_test_nmse(ref, dc, (size_t)(M * N * B2));
	g_test_message("mul_mat %s [%lld,%lld,%lld] x [%lld,%lld]%s: nmse %.3g",
		       loom_type_name(ta), (long long)K, (long long)M,
		       (long long)A2, (long long)N, (long long)B2,
		       permute ? " permuted" : "", nmse);
	g_assert_cmpfloat(nmse, <=, bound);
	g_free(ref);
	g_free(dc);
	g_free(db);
	g_free(da);
	run_free(&r);
}

/* Every quantized type the plugin reads (its list). */
static const enum loom_type quant_types[] = {
#define QUANT_TYPE_(name) LOOM_TYPE_##name,
	CUDA_QUANT_TYPES(QUANT_TYPE_)
#undef QUANT_TYPE_
};

/* get_rows of every quantized type on the GPU (ids repeated, out of order
 * and out of range), bit for bit against libcore's conversion of the same
 * blocks: the device's decoders as tests/test-gpu-quant.cc checks them
 * on the host. */
static void test_rows_bits(void)
{
	enum { K = 512, M = 6, N = 5 };
	static const int32_t ids[N] = { 5, 0, 3, 5, 6 };
	loom_dev_t *dev = gpu_begin();
	loom_backend_t *be;

	if (!dev)
		return;
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(quant_types); i++) {
		enum loom_type t = quant_types[i];
		struct run r = { 0 };
		struct loom_tensor *a, *out;
		size_t bytes = loom_type_row_size(t, K) * M;
		uint8_t *blocks = g_malloc(bytes);
		float *want = g_new0(float, (size_t)K * (M + 1));
		float *got = g_new(float, (size_t)K * N);

		g_assert_cmpint(loom_ctx_new(0, &r.ctx), ==, LOOM_OK);
		a = loom_tensor_new_2d(r.ctx, t, K, M);
		out = loom_get_rows(r.ctx, a,
				    loom_tensor_new_1d(r.ctx, LOOM_TYPE_I32,
						       N));
		run_place(&r, dev, out, 3.0, ids, 40 + i);
		g_assert_cmpint(loom_tensor_get(a, blocks, 0, bytes), ==,
				LOOM_OK);
		g_assert_cmpint(loom_type_convert(t, blocks, LOOM_TYPE_F32,
						  want, (int64_t)K * M), ==,
				LOOM_OK);
		run_compute(&r, be);
		g_assert_cmpint(loom_tensor_get(out, got, 0,
						(size_t)K * N * 4), ==,
				LOOM_OK);
		/* Row 6 is out of range: zeros (want's last row). */
		for (int n = 0; n < N; n++)
			if (memcmp(got + n * K, want + ids[n] * K,
				   K * sizeof(float)))
				g_error("%s: get_rows row %d differs from "
					"libcore's values", loom_type_name(t),
					ids[n]);
		g_free(got);
		g_free(want);
		g_free(blocks);
		run_free(&r);
	}
	loom_backend_free(be);
	gpu_end();
}

/* Quantized weights: the GEMV (rows 16-byte aligned and not, whole and
 * partial staging steps, 1 to 8 columns, batches) and the BLAS after
 * dequantizing. */
static void test_quant(void)
{
	loom_dev_t *dev = gpu_begin();
	loom_backend_t *be;

	if (!dev)
		return;
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(quant_types); i++) {
		enum loom_type t = quant_types[i];

		check_mul_mat(dev, be, t, 4096, 301, 1, 1, 1, false, 2e-4);
		check_mul_mat(dev, be, t, 4096, 301, 1, 8, 1, false, 2e-4);
		check_mul_mat(dev, be, t, 1280, 67, 1, 3, 2, false, 2e-4);
		check_mul_mat(dev, be, t, 1280, 67, 2, 5, 4, false, 2e-4);
		check_mul_mat(dev, be, t, 1280, 130, 1, 40, 1, false, 1e-4);
	}
	expect_path("gemv-quantized (dp4a)");
	expect_path("dequantize-blas");
	loom_backend_free(be);
	gpu_end();
}

/* A quantized matrix larger than one dequantizing slab (256 MiB of BF16):
 * Q4_K [4096, 40000] times 16 columns, its rows filled with random bytes
 * under sane scales, checked on rows around the slab's edge and spread
 * over the rest. */
static void test_quant_slabs(void)
{
	enum { K = 4096, M = 40000, N = 16 };
	const size_t row = loom_type_row_size(LOOM_TYPE_Q4_K, K);
	loom_dev_t *dev = gpu_begin();
	struct loom_test_rng rng;
	struct run r = { 0 };
	struct loom_tensor *a, *b, *c;
	loom_backend_t *be;
	uint8_t *raw;
	double *db, *dc, *wrow, err2 = 0, ref2 = 0;
	int checked = 0;

	if (!dev)
		return;
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &r.ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(r.ctx, LOOM_TYPE_Q4_K, K, M);
	b = loom_tensor_new_2d(r.ctx, LOOM_TYPE_F32, K, N);
	c = loom_mul_mat(r.ctx, a, b);
	g_assert_cmpint(loom_graph_new(r.ctx, &r.g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(r.g, c), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(r.ctx, loom_dev_buffer_type(dev),
					       &r.buf), ==, LOOM_OK);
	loom_test_rng_seed(&rng, 5);
	raw = g_malloc(row * M);
	for (size_t i = 0; i < row * M; i++)
		raw[i] = (uint8_t)loom_test_rng_next(&rng);
	for (size_t blk = 0; blk < row * M / 144; blk++) {
		struct loom_block_q4_k *q = (struct loom_block_q4_k *)
			(raw + blk * sizeof(*q));

		q->d = loom_f32_to_f16(1e-3f * (1 + blk % 5));
		q->dmin = loom_f32_to_f16(2e-3f);
	}
	g_assert_cmpint(loom_tensor_set(a, raw, 0, row * M), ==, LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(b, &rng, -1, 1), ==, LOOM_OK);
	run_compute(&r, be);
	db = doubles(b);
	dc = doubles(c);
	wrow = g_new(double, K);
	for (int64_t m = 0; m < M; m++) {
		/* The slab holds 32768 rows. */
		if (m % 613 && (m < 32760 || m >= 32780))
			continue;
		g_assert_cmpint(loom_test_decode_blocks(LOOM_TYPE_Q4_K,
							raw + m * row, K, wrow),
				==, LOOM_OK);
		for (int n = 0; n < N; n++) {
			double s = 0;

			for (int k = 0; k < K; k++)
				s += wrow[k] * db[n * K + k];
			err2 += (dc[n * M + m] - s) * (dc[n * M + m] - s);
			ref2 += s * s;
		}
		checked++;
	}
	g_test_message("q4_k [4096, 40000] x 16, %d rows: nmse %.3g", checked,
		       err2 / ref2);
	g_assert_cmpfloat(err2 / ref2, <=, 1e-4);
	expect_path("dequantize-blas");
	g_free(wrow);
	g_free(dc);
	g_free(db);
	g_free(raw);
	run_free(&r);
	loom_backend_free(be);
	gpu_end();
}

/* Float weights: the GEMV of the own-GEMM backend, and the GQA
 * broadcast: merged columns, and the pointer-array call for a permuted
 * b the BLAS reads as it is. */
static void test_float(void)
{
	static const enum loom_type types[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16,
	};
	loom_dev_t *dev = gpu_begin();
	loom_backend_t *be, *own;

	if (!dev)
		return;
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, "gemm=own", &own), ==,
			LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(types); i++) {
		check_mul_mat(dev, own, types[i], 1030, 77, 1, 1, 1, false,
			      types[i] == LOOM_TYPE_F32 ? 1e-10 : 1e-10);
		check_mul_mat(dev, own, types[i], 1024, 77, 2, 1, 6, true,
			      1e-10);
	}
	expect_path("gemv-float");
	/* GQA: 8 batches of b over 2 matrices of a. */
	check_mul_mat(dev, be, LOOM_TYPE_BF16, 128, 40, 2, 5, 8, false, 5e-5);
	check_mul_mat(dev, be, LOOM_TYPE_F16, 128, 40, 2, 1, 8, true, 1e-5);
	expect_path("broadcast-merged");
	check_mul_mat(dev, be, LOOM_TYPE_F32, 128, 40, 2, 5, 8, true, 1e-6);
	expect_path("broadcast-pointer-array");
	loom_backend_free(own);
	loom_backend_free(be);
	gpu_end();
}

/* mul_mat_id of experts (ta, [K, M, E]) by b (F32 [K, B1, T]) with
 * n_used experts per token; every fifth token has an id out of range in
 * its last slot (-1 or E), whose row must be zeros. */
static void check_experts(loom_dev_t *dev, loom_backend_t *be,
			  enum loom_type ta, int64_t K, int64_t M, int64_t E,
			  int64_t n_used, int64_t B1, int64_t T, double range,
			  double bound)
{
	struct run r = { 0 };
	struct loom_test_rng rng;
	struct loom_tensor *a, *b, *ids, *c;
	int32_t *id = g_new(int32_t, n_used * T);
	double *da, *db, *dc, *ref, nmse;

	for (int64_t t = 0; t < T; t++)
		for (int64_t e = 0; e < n_used; e++) {
			/* Distinct per token (5 is prime to E here). */
			id[t * n_used + e] = (int32_t)((t * 3 + e * 5) % E);
			if (t % 5 == 2 && e == n_used - 1)
				id[t * n_used + e] = t % 2 ? (int32_t)E : -1;
		}
	g_assert_cmpint(loom_ctx_new(0, &r.ctx), ==, LOOM_OK);
	a = loom_tensor_new_3d(r.ctx, ta, K, M, E);
	b = loom_tensor_new_3d(r.ctx, LOOM_TYPE_F32, K, B1, T);
	ids = loom_tensor_new_2d(r.ctx, LOOM_TYPE_I32, n_used, T);
	c = loom_mul_mat_id(r.ctx, a, b, ids);
	run_place(&r, dev, c, 1.0, id, (uint64_t)(K + M + E + T));
	if (range != 1.0) {
		loom_test_rng_seed(&rng, 99);
		g_assert_cmpint(loom_test_fill_uniform(b, &rng, -range, range),
				==, LOOM_OK);
	}
	/* Poison the result: rows of zeros must be written. */
	g_assert_cmpint(loom_tensor_memset(c, 0x7f, 0, loom_tensor_n_bytes(c)),
			==, LOOM_OK);
	run_compute(&r, be);
	da = doubles(a);
	db = doubles(b);
	dc = doubles(c);
	ref = g_new0(double, M * n_used * T);
	for (int64_t t = 0; t < T; t++)
		for (int64_t e = 0; e < n_used; e++) {
			int32_t x = id[t * n_used + e];
			const double *y = db + (t * B1 + e % B1) * K;

			for (int64_t m = 0; m < M; m++) {
				double s = 0;

				if (x < 0 || x >= E) {
					g_assert_cmpfloat(
						dc[(t * n_used + e) * M + m],
						==, 0.0);
					continue;
				}
				for (int64_t k = 0; k < K; k++)
					s += da[(x * M + m) * K + k] * y[k];
				ref[(t * n_used + e) * M + m] = s;
			}
		}
	nmse = loom_test_nmse(ref, dc, (size_t)(M * n_used * T));
	g_test_message("mul_mat_id %s [%lld,%lld,%lld] %lld of them, %lld "
		       "tokens: nmse %.3g", loom_type_name(ta), (long long)K,
		       (long long)M, (long long)E, (long long)n_used,
		       (long long)T, nmse);
	g_assert_cmpfloat(nmse, <=, bound);
	g_free(ref);
	g_free(dc);
	g_free(db);
	g_free(da);
	g_free(id);
	run_free(&r);
}

/* Experts: a GEMV per pair for one and a few tokens, grouped GEMMs for
 * many (float weights as they are, quantized ones dequantized, F16 with
 * activations past F16's range). */
static void test_experts(void)
{
	loom_dev_t *dev = gpu_begin();
	loom_backend_t *be;

	if (!dev)
		return;
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	check_experts(dev, be, LOOM_TYPE_BF16, 2048, 300, 16, 4, 1, 1, 1.0,
		      1e-10);
	check_experts(dev, be, LOOM_TYPE_F32, 512, 65, 8, 3, 3, 5, 1.0, 1e-10);
	expect_path("gemv-float");
	check_experts(dev, be, LOOM_TYPE_Q4_K, 1024, 300, 16, 4, 1, 3, 1.0,
		      2e-4);
	check_experts(dev, be, LOOM_TYPE_Q8_0, 1024, 70, 16, 4, 4, 3, 1.0,
		      2e-4);
	expect_path("gemv-quantized (dp4a)");
	check_experts(dev, be, LOOM_TYPE_BF16, 512, 300, 16, 4, 1, 50, 1.0,
		      1e-4);
	check_experts(dev, be, LOOM_TYPE_F32, 256, 65, 8, 2, 2, 40, 1.0, 1e-6);
	check_experts(dev, be, LOOM_TYPE_Q6_K, 512, 100, 16, 4, 1, 50, 1.0,
		      1e-4);
	check_experts(dev, be, LOOM_TYPE_Q8_0, 512, 100, 16, 4, 4, 50, 1.0,
		      1e-4);
	check_experts(dev, be, LOOM_TYPE_F16, 256, 64, 8, 2, 1, 40, 3e5, 1e-5);
	expect_path("experts-grouped");
	loom_backend_free(be);
	gpu_end();
}

/* A small decode-like graph: y = scale(silu(w x + bias)), w BF16. */
struct dgraph {
	struct run r;
	struct loom_tensor *w, *x, *bias, *y;
};

static void dgraph_make(struct dgraph *d, loom_dev_t *dev, uint64_t seed)
{
	struct loom_tensor *h;

	memset(d, 0, sizeof(*d));
	g_assert_cmpint(loom_ctx_new(0, &d->r.ctx), ==, LOOM_OK);
	d->w = loom_tensor_new_2d(d->r.ctx, LOOM_TYPE_BF16, 256, 96);
	d->x = loom_tensor_new_2d(d->r.ctx, LOOM_TYPE_F32, 256, 1);
	d->bias = loom_tensor_new_2d(d->r.ctx, LOOM_TYPE_F32, 96, 1);
	h = loom_mul_mat(d->r.ctx, d->w, d->x);
	h = loom_silu(d->r.ctx, loom_add(d->r.ctx, h, d->bias));
	d->y = loom_scale(d->r.ctx, h, 0.5f);
	run_place(&d->r, dev, d->y, 1.0, NULL, seed);
}

/* Sets x to a new input, computes, checks y against the reference and
 * returns y (the caller frees it). */
static double *dgraph_step(struct dgraph *d, loom_backend_t *be, int step)
{
	float x[256];
	double *dw, *db, *dy, ref[96], nmse;

	for (int i = 0; i < 256; i++)
		x[i] = (float)sin(0.37 * i + step);
	g_assert_cmpint(loom_tensor_set(d->x, x, 0, sizeof(x)), ==, LOOM_OK);
	run_compute(&d->r, be);
	dw = doubles(d->w);
	db = doubles(d->bias);
	dy = doubles(d->y);
	for (int m = 0; m < 96; m++) {
		double s = db[m];

		for (int k = 0; k < 256; k++)
			s += dw[m * 256 + k] * x[k];
		ref[m] = 0.5 * s / (1 + exp(-s));
	}
	/* cuBLAS multiplies BF16 weights by x rounded to BF16. */
	nmse = loom_test_nmse(ref, dy, 96);
	if (nmse > 5e-5)
		g_test_message("step %d: nmse %.3g", step, nmse);
	g_assert_cmpfloat(nmse, <=, 5e-5);
	g_free(db);
	g_free(dw);
	return dy;
}

/* Graphs: captured on their second run and replayed from the third, new
 * inputs read each time; nine graphs of one topology in turn (eight are
 * remembered: the ninth updates the oldest one's capture in place); a
 * capture redone after another graph grew the scratch; every result the
 * same, bit for bit, as the graph run node by node. */
static void test_graphs(void)
{
	enum { NG = 9 };
	loom_dev_t *dev = gpu_begin();
	loom_backend_t *be, *plain;
	struct dgraph d[NG];
	double *y, *want;

	if (!dev)
		return;
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, "graph=off", &plain), ==,
			LOOM_OK);
	for (int i = 0; i < NG; i++)
		dgraph_make(&d[i], dev, 100 + (uint64_t)i);
	for (int step = 0; step < 6; step++) {
		y = dgraph_step(&d[0], be, step);
		want = dgraph_step(&d[0], plain, step);
		g_assert_cmpmem(y, 96 * sizeof(double), want,
				96 * sizeof(double));
		g_free(want);
		g_free(y);
	}
	expect_path("graph-capture");
	expect_path("graph-replay");
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < NG; i++)
			for (int rep = 0; rep < 3; rep++)
				g_free(dgraph_step(&d[i], be,
						   round * 10 + rep));
	expect_path("graph-update");
	/* Another graph grows the scratch the capture of d[0] points at. */
	check_mul_mat(dev, be, LOOM_TYPE_Q8_0, 4096, 64, 1, 8, 64, false,
		      2e-4);
	for (int step = 0; step < 3; step++)
		g_free(dgraph_step(&d[0], be, 50 + step));
	for (int i = 0; i < NG; i++)
		run_free(&d[i].r);
	g_assert_null(strstr(log_text->str, "graphs off"));
	loom_backend_free(plain);
	loom_backend_free(be);
	gpu_end();
}

int main(int argc, char **argv)
{
	int ret;

	g_test_init(&argc, &argv, NULL);
	log_text = g_string_new(NULL);
	loom_test_load_plugins();
	g_test_add_func("/gpu-paths/quant", test_quant);
	g_test_add_func("/gpu-paths/rows_bits", test_rows_bits);
	g_test_add_func("/gpu-paths/quant_slabs", test_quant_slabs);
	g_test_add_func("/gpu-paths/float", test_float);
	g_test_add_func("/gpu-paths/experts", test_experts);
	g_test_add_func("/gpu-paths/graphs", test_graphs);
	ret = g_test_run();
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	g_string_free(log_text, TRUE);
	return ret;
}
