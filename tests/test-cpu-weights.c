/* SPDX-License-Identifier: MIT */
/* test-cpu-weights.c - the CPU plugin's weight buffer type: the
 * matrices of every type it stores interleaved read back as they were
 * written, at any offset and through every path (set, get, memset, 2D,
 * async, copies); mul_mat on
 * them against a plain double product of the decoded blocks; every other
 * op that would read them refused with a message; tensors it does not
 * interleave as in any buffer.  Skips where the CPU has no such type (it
 * needs AVX-512 VNNI).
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-plugin.h"
#include "test-util.h"

struct fixture {
	loom_dev_t *dev;
	loom_buffer_type_t *wbt;
	loom_backend_t *be;
	loom_ctx_t *ctx;
	loom_buffer_t *wbuf, *hbuf;
};

/* The weight buffer type of cpu0, or NULL (and the test skipped). */
static bool setup(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
	f->dev = loom_dev_by_name("cpu0");
	g_assert_nonnull(f->dev);
	f->wbt = loom_dev_weight_buffer_type(f->dev);
	g_assert_nonnull(f->wbt);
	if (f->wbt == loom_dev_buffer_type(f->dev)) {
		g_test_skip("cpu0 has no weight buffer type of its own here");
		return false;
	}
	g_assert_cmpint(loom_dev_init_backend(f->dev, NULL, &f->be), ==,
			LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &f->ctx), ==, LOOM_OK);
	return true;
}

static void teardown(struct fixture *f)
{
	loom_buffer_free(f->wbuf);
	loom_buffer_free(f->hbuf);
	loom_ctx_free(f->ctx);
	loom_backend_free(f->be);
}

/* The types the buffer interleaves. */
static const enum loom_type w_types[] = {
	LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K,
	LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_1, LOOM_TYPE_IQ4_NL, LOOM_TYPE_Q3_K,
	LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_XS, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1,
	LOOM_TYPE_MXFP4,
};

/* Values per row of a test matrix: a few blocks of the type. */
static int64_t row_values(enum loom_type type)
{
	return 3 * loom_type_block_size(type);
}

/* Random blocks of type, their halves (GGUF's d and dmin) plain
 * numbers: the high byte's exponent between 2^-7 and 2^-2; MXFP4's
 * exponent byte between 2^-8 and 2^7. */
static void random_blocks(enum loom_type type, struct loom_test_rng *rng,
			  uint8_t *p, size_t n)
{
	size_t bs = loom_type_size(type), half[2] = { 0, 2 };
	int nh = type == LOOM_TYPE_Q4_K || type == LOOM_TYPE_Q5_K ||
		 type == LOOM_TYPE_Q4_1 || type == LOOM_TYPE_Q5_1 ? 2 : 1;

	if (type == LOOM_TYPE_Q6_K || type == LOOM_TYPE_Q3_K)
		half[0] = bs - 2;
	if (type == LOOM_TYPE_Q2_K) {
		half[0] = bs - 4;
		half[1] = bs - 2;
		nh = 2;
	}
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)loom_test_rng_next(rng);
	for (size_t i = 0; i + bs <= n; i += bs)
		if (type == LOOM_TYPE_MXFP4)
			p[i] = (uint8_t)(119 + loom_test_rng_int(rng, 16));
		else
			for (int h = 0; h < nh; h++)
				p[i + half[h] + 1] = (uint8_t)(
					0x20 + loom_test_rng_int(rng, 16));
}

static struct loom_tensor *w_matrix(loom_ctx_t *ctx, enum loom_type type,
				    int64_t k, int64_t m, const char *name)
{
	struct loom_tensor *t = loom_tensor_new_2d(ctx, type, k, m);

	g_assert_nonnull(t);
	loom_tensor_set_name(t, name);
	return t;
}

static void test_type(void)
{
	struct fixture f;

	g_assert_null(loom_dev_weight_buffer_type(NULL));
	if (!setup(&f))
		return;
	g_assert_false(loom_buffer_type_is_host(f.wbt));
	g_assert_true(loom_dev_supports_buft(f.dev, f.wbt));
	g_assert_true(loom_buffer_type_device(f.wbt) == f.dev);
	g_assert_cmpstr(loom_buffer_type_name(f.wbt), ==, "cpu0_weights");
	teardown(&f);
}

/* Every path in and out keeps the usual bytes; the stored ones differ. */
static void test_bytes(const void *data)
{
	const enum loom_type type = *(const enum loom_type *)data;
	const int64_t k = row_values(type);
	struct loom_test_rng rng;
	struct fixture f;
	struct loom_tensor *t, *u, *h;
	uint8_t *want, *got, *tmp;
	size_t n, i;

	if (!setup(&f))
		return;
	loom_test_rng_seed(&rng, 7);
	t = w_matrix(f.ctx, type, k, 48, "w");
	u = w_matrix(f.ctx, type, k, 24, "u"); /* not 16k rows */
	g_assert_cmpint(loom_ctx_alloc_tensors(f.ctx, f.wbt, &f.wbuf), ==,
			LOOM_OK);
	n = loom_tensor_n_bytes(t);
	want = g_malloc(n);
	got = g_malloc(n);
	tmp = g_malloc(n);
	random_blocks(type, &rng, want, n);

	g_assert_cmpint(loom_tensor_set(t, want, 0, n), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(t, got, 0, n), ==, LOOM_OK);
	g_assert_cmpmem(got, n, want, n);
	/* Stored interleaved: not the bytes written. */
	g_assert_true(memcmp(t->data, want, n) != 0);
	g_assert_cmpint(loom_tensor_set(u, want, 0, loom_tensor_n_bytes(u)),
			==, LOOM_OK);
	g_assert_cmpmem(u->data, loom_tensor_n_bytes(u), want,
			loom_tensor_n_bytes(u));

	/* Pieces at odd offsets, across groups, one byte, a whole group. */
	for (i = 0; i < 40; i++) {
		size_t off = (size_t)loom_test_rng_int(&rng, (int64_t)n);
		size_t len = 1 + (size_t)loom_test_rng_int(&rng,
						(int64_t)(n - off));

		random_blocks(type, &rng, tmp, len);
		switch (i % 4) {
		case 0:
			g_assert_cmpint(loom_tensor_set(t, tmp, off, len), ==,
					LOOM_OK);
			memcpy(want + off, tmp, len);
			break;
		case 1:
			g_assert_cmpint(loom_tensor_memset(t, tmp[0], off, len),
					==, LOOM_OK);
			memset(want + off, tmp[0], len);
			break;
		case 2:
			g_assert_cmpint(loom_backend_tensor_set_async(
				f.be, t, tmp, off, len), ==, LOOM_OK);
			g_assert_cmpint(loom_backend_synchronize(f.be), ==,
					LOOM_OK);
			memcpy(want + off, tmp, len);
			break;
		default:
			g_assert_cmpint(loom_tensor_get(t, got, off, len), ==,
					LOOM_OK);
			g_assert_cmpmem(got, len, want + off, len);
		}
	}
	/* Strided: every other row, 2D and async 2D, in and out. */
	random_blocks(type, &rng, tmp, n);
	g_assert_cmpint(loom_tensor_set_2d(t, tmp, 5, 50, 24, 2 * t->nb[1],
					   t->nb[1]), ==, LOOM_OK);
	for (i = 0; i < 24; i++)
		memcpy(want + 5 + i * 2 * t->nb[1], tmp + i * t->nb[1], 50);
	g_assert_cmpint(loom_backend_tensor_get_2d_async(f.be, t, got, 5, 50,
							 24, 2 * t->nb[1],
							 50), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(f.be), ==, LOOM_OK);
	for (i = 0; i < 24; i++)
		g_assert_cmpmem(got + i * 50, 50, want + 5 + i * 2 * t->nb[1],
				50);
	g_assert_cmpint(loom_tensor_get(t, got, 0, n), ==, LOOM_OK);
	g_assert_cmpmem(got, n, want, n);

	/* Copies to and from host memory go through the usual bytes. */
	h = w_matrix(f.ctx, type, k, 48, "h");
	g_assert_cmpint(loom_ctx_alloc_tensors(f.ctx,
					       loom_dev_buffer_type(f.dev),
					       &f.hbuf), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_copy(t, h), ==, LOOM_OK);
	g_assert_cmpmem(h->data, n, want, n);
	random_blocks(type, &rng, h->data, n);
	memcpy(want, h->data, n);
	g_assert_cmpint(loom_tensor_copy(h, t), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(t, got, 0, n), ==, LOOM_OK);
	g_assert_cmpmem(got, n, want, n);
	/* A clear is the same bytes in either layout. */
	g_assert_cmpint(loom_buffer_clear(f.wbuf, 0x5a), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(t, got, 0, n), ==, LOOM_OK);
	memset(want, 0x5a, n);
	g_assert_cmpmem(got, n, want, n);
	g_free(want);
	g_free(got);
	g_free(tmp);
	teardown(&f);
}

/* mul_mat of w (k x m in the weight buffer) by n random columns, against
 * the decoded blocks times the columns in doubles. */
static void check_product(struct fixture *f, enum loom_type type, int64_t k,
			  int64_t m, int64_t n, struct loom_test_rng *rng)
{
	loom_ctx_t *c;
	loom_buffer_t *wb, *cb;
	struct loom_tensor *w, *x, *y;
	loom_graph_t *g;
	uint8_t *q;
	double *wd, *xd, *yd, *ref;
	char *err = NULL;
	size_t n_q;

	g_assert_cmpint(loom_ctx_new(0, &c), ==, LOOM_OK);
	w = w_matrix(c, type, k, m, "w");
	g_assert_cmpint(loom_ctx_alloc_tensors(c, f->wbt, &wb), ==, LOOM_OK);
	x = loom_tensor_new_2d(c, LOOM_TYPE_F32, k, n);
	y = loom_mul_mat(c, w, x);
	g_assert_nonnull(y);
	g_assert_true(loom_dev_supports_op(f->dev, y));
	g_assert_cmpint(loom_ctx_alloc_tensors(c, loom_dev_buffer_type(f->dev),
					       &cb), ==, LOOM_OK);
	n_q = loom_tensor_n_bytes(w);
	q = g_malloc(n_q);
	random_blocks(type, rng, q, n_q);
	g_assert_cmpint(loom_tensor_set(w, q, 0, n_q), ==, LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(x, rng, -1, 1), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_new(c, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(f->be, g), ==, LOOM_OK);

	wd = g_new(double, k * m);
	g_assert_cmpint(loom_test_decode_blocks(type, q, k * m, wd),
			==, LOOM_OK);
	xd = loom_test_get_doubles(x, &err);
	g_assert_null(err);
	yd = loom_test_get_doubles(y, &err);
	g_assert_null(err);
	ref = g_new0(double, m * n);
	for (int64_t j = 0; j < n; j++)
		for (int64_t i = 0; i < m; i++)
			for (int64_t l = 0; l < k; l++)
				ref[j * m + i] += wd[i * k + l] * xd[j * k + l];
	if (loom_test_nmse(ref, yd, (size_t)(m * n)) > 2e-4)
		g_error("%s k %lld m %lld n %lld: NMSE %g",
			loom_type_name(type), (long long)k,
			(long long)m, (long long)n,
			loom_test_nmse(ref, yd, (size_t)(m * n)));
	g_free(ref);
	free(yd);
	free(xd);
	g_free(wd);
	g_free(q);
	loom_buffer_free(cb);
	loom_buffer_free(wb);
	loom_ctx_free(c);
}

static void test_mul_mat(const void *data)
{
	const enum loom_type type = *(const enum loom_type *)data;
	/* Rows of Q4_0's sizes, in the type's blocks. */
	const int64_t kb = loom_type_block_size(type) / 32;
	/* Decode (1-3 columns), the int8 tiles, AMX where present. */
	static const int64_t kmn[][3] = {
		{ 32, 16, 1 },   { 64, 48, 2 },  { 96, 32, 3 },
		{ 256, 64, 1 },  { 256, 64, 5 }, { 288, 80, 17 },
		{ 4096, 32, 1 }, { 512, 144, 40 },
		{ 64, 24, 1 },   { 64, 24, 20 }, /* not interleaved */
	};
	struct loom_test_rng rng;
	struct fixture f;

	if (!setup(&f))
		return;
	loom_test_rng_seed(&rng, 11);
	for (size_t i = 0; i < G_N_ELEMENTS(kmn); i++)
		check_product(&f, type, kb * kmn[i][0], kmn[i][1],
			      kmn[i][2], &rng);
	teardown(&f);
}

/* Ops that would read the interleaved bytes as the usual ones. */
static void test_refused(const void *data)
{
	const enum loom_type type = *(const enum loom_type *)data;
	const int64_t k = row_values(type);
	struct fixture f;
	struct loom_tensor *w, *ids, *r, *v, *x;
	struct loom_tensor *refused[4];
	loom_buffer_t *cb;
	loom_graph_t *g;

	if (!setup(&f))
		return;
	w = w_matrix(f.ctx, type, k, 32, "w");
	g_assert_cmpint(loom_ctx_alloc_tensors(f.ctx, f.wbt, &f.wbuf), ==,
			LOOM_OK);
	ids = loom_tensor_new_1d(f.ctx, LOOM_TYPE_I32, 2);
	x = loom_tensor_new_2d(f.ctx, LOOM_TYPE_F32, k, 1);
	refused[0] = loom_get_rows(f.ctx, w, ids);
	refused[1] = loom_copy(f.ctx, w,
			      loom_tensor_new_2d(f.ctx, LOOM_TYPE_F32, k, 32));
	v = loom_view_2d(f.ctx, w, k, 16, w->nb[1], 16 * w->nb[1]);
	refused[2] = loom_mul_mat(f.ctx, v, x);
	refused[3] = loom_cont(f.ctx, w);
	g_assert_cmpint(loom_ctx_alloc_tensors(f.ctx,
					       loom_dev_buffer_type(f.dev), &cb),
			==, LOOM_OK);
	g_assert_true(loom_dev_supports_op(f.dev, v));
	g_assert_true(loom_dev_supports_op(f.dev, loom_mul_mat(f.ctx, w, x)));
	for (int i = 0; i < 4; i++) {
		r = refused[i];
		if (!r)
			g_error("refused[%d]: %s", i, loom_error_message());
		g_assert_false(loom_dev_supports_op(f.dev, r));
		g_assert_cmpint(loom_graph_new(f.ctx, &g), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g, r), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(f.be, g), ==,
				LOOM_E_UNSUPPORTED);
		g_assert_nonnull(strstr(loom_error_message(), "interleaved"));
		g_assert_nonnull(strstr(loom_error_message(), "mul_mat"));
	}
	loom_buffer_free(cb);
	teardown(&f);
}

/* Matrices of type in n buffers of buft, one each (in m[], buffers in
 * b[]). */
static void place_each(struct fixture *f, loom_buffer_type_t *buft,
		       enum loom_type type, struct loom_tensor **m,
		       loom_buffer_t **b, int n)
{
	for (int i = 0; i < n; i++) {
		m[i] = w_matrix(f->ctx, type, row_values(type), 16, "m");
		g_assert_cmpint(loom_buffer_type_alloc_buffer(
					buft,
					loom_buffer_type_alloc_size(buft, m[i]),
					&b[i]),
				==, LOOM_OK);
		g_assert_cmpint(loom_tensor_place(m[i], b[i], 0), ==, LOOM_OK);
	}
}

/* More weight buffers than the plugin tracks without a lock, then as many
 * host buffers once they are freed (at the same addresses, as malloc
 * likes): each matrix is refused to get_rows exactly while it is in a
 * weight buffer. */
static void test_many_buffers(void)
{
	enum { N = 80 };
	const enum loom_type type = LOOM_TYPE_Q8_0;
	struct loom_tensor *m[N], *ids, *x;
	loom_buffer_t *b[N];
	struct fixture f;

	if (!setup(&f))
		return;
	ids = loom_tensor_new_1d(f.ctx, LOOM_TYPE_I32, 2);
	x = loom_tensor_new_2d(f.ctx, LOOM_TYPE_F32, row_values(type), 1);
	g_assert_cmpint(loom_ctx_alloc_tensors(f.ctx,
					       loom_dev_buffer_type(f.dev),
					       &f.hbuf),
			==, LOOM_OK);
	for (int round = 0; round < 2; round++) {
		loom_buffer_type_t *buft = round ? loom_dev_buffer_type(f.dev)
						 : f.wbt;

		place_each(&f, buft, type, m, b, N);
		for (int i = 0; i < N; i++) {
			g_assert_true(loom_dev_supports_op(
				f.dev, loom_mul_mat(f.ctx, m[i], x)));
			g_assert_cmpint(loom_dev_supports_op(
						f.dev,
						loom_get_rows(f.ctx, m[i], ids)),
					==, round == 1);
		}
		for (int i = 0; i < N; i++)
			loom_buffer_free(b[i]);
	}
	teardown(&f);
}

/* LOOM_CPU_WEIGHTS=0: the usual buffer type, no entry point. */
static void test_off(void)
{
	loom_dev_t *dev;

	if (g_test_subprocess()) {
		g_setenv("LOOM_CPU_WEIGHTS", "0", TRUE);
		g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
		dev = loom_dev_by_name("cpu0");
		g_assert_nonnull(dev);
		g_assert_true(loom_dev_weight_buffer_type(dev) ==
			      loom_dev_buffer_type(dev));
		g_assert_null(loom_reg_proc_address(
			loom_dev_reg(dev), LOOM_PROC_WEIGHT_BUFFER_TYPE));
		return;
	}
	g_test_trap_subprocess(NULL, 0, G_TEST_SUBPROCESS_DEFAULT);
	g_test_trap_assert_passed();
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/cpu-weights/type", test_type);
	for (size_t i = 0; i < G_N_ELEMENTS(w_types); i++) {
		const char *t = loom_type_name(w_types[i]);
		char *p[3] = {
			g_strdup_printf("/cpu-weights/bytes/%s", t),
			g_strdup_printf("/cpu-weights/mul-mat/%s", t),
			g_strdup_printf("/cpu-weights/refused/%s", t),
		};

		g_test_add_data_func(p[0], &w_types[i], test_bytes);
		g_test_add_data_func(p[1], &w_types[i], test_mul_mat);
		g_test_add_data_func(p[2], &w_types[i], test_refused);
		for (int j = 0; j < 3; j++)
			g_free(p[j]);
	}
	g_test_add_func("/cpu-weights/many-buffers", test_many_buffers);
	g_test_add_func("/cpu-weights/off", test_off);
	return g_test_run();
}
