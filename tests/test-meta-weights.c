/* SPDX-License-Identifier: MIT */
/* test-meta-weights.c - the meta device's weight buffer type: each
 * member's slice of a matrix placed there sits in that member's weight
 * buffer type (the CPU's interleaved layout), holds the bytes of its rows
 * or columns, and mul_mat over the slices matches a double product of the
 * decoded weights and one device, for every type, split by rows and by
 * columns, evenly and unevenly over 2 and 3 partitions.
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-plugin.h"
#include "test-util.h"

#define WK 768 /* three K-quant blocks per row */
#define WM 80  /* five groups of 16 rows */
#define WN 3

static loom_dev_t *cpu[3];

struct wsplit {
	enum loom_split_state state;
	int64_t granularity;
};

/* The matrix "w" as the test says, everything else whole. */
static int w_split(const struct loom_tensor *t, struct loom_split *out,
		   void *userdata)
{
	const struct wsplit *ws = userdata;

	memset(out, 0, sizeof(*out));
	out->state = LOOM_SPLIT_MIRRORED;
	out->granularity = 1;
	if (!strcmp(t->name, "w")) {
		out->state = ws->state;
		out->granularity = ws->granularity;
	}
	return LOOM_OK;
}

static loom_dev_t *meta_new(int n, const struct wsplit *ws,
			    const float *ratios)
{
	struct loom_meta_opts opts = {
		.size = sizeof(opts),
		.ratios = ratios,
	};
	loom_dev_t *dev = NULL;

	if (loom_meta_dev_new(cpu, (size_t)n, w_split, (void *)ws, &opts,
			      &dev))
		g_error("meta device: %s", loom_error_message());
	return dev;
}

static loom_meta_tensor_slice_fn slice_fn(void)
{
	loom_meta_tensor_slice_fn fn = (loom_meta_tensor_slice_fn)
		loom_reg_proc_address(loom_reg_by_name("meta"),
				      LOOM_PROC_META_TENSOR_SLICE);

	g_assert_nonnull(fn);
	return fn;
}

/* Random weights of type, as bytes; the caller frees them. */
static void *random_weights(enum loom_type type, unsigned seed)
{
	struct loom_test_rng rng;
	float *f = g_new(float, WK * WM);
	void *q = g_malloc(loom_type_row_size(type, WK) * WM);

	loom_test_rng_seed(&rng, seed);
	for (int64_t i = 0; i < WK * WM; i++)
		f[i] = (float)loom_test_rng_uniform(&rng, -1, 1);
	g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, f, type, q,
					  WK * WM), ==, LOOM_OK);
	g_free(f);
	return q;
}

/* y = w x on dev, with w in dev's weight buffer type (or its plain one
 * when plain is true); on a meta device, checks the member slices (cut
 * along axis) against the bytes wq.  Returns y (WM x WN doubles), which the caller frees. */
static double *run(loom_dev_t *dev, enum loom_type type, const void *wq,
		   const float *x, bool plain, enum loom_split_state axis)
{
	loom_buffer_type_t *wbt = plain ? loom_dev_buffer_type(dev) :
				  loom_dev_weight_buffer_type(dev);
	bool meta = loom_dev_type(dev) == LOOM_DEV_TYPE_META;
	size_t nb1 = loom_type_row_size(type, WK), n = nb1 * WM;
	struct loom_tensor *w, *tx, *y;
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	uint8_t *back;
	double *out;
	char *err = NULL;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, type, WK, WM);
	loom_tensor_set_name(w, "w");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, wbt, &wbuf), ==,
			LOOM_OK);
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_tensor_set(w, wq, 0, n), ==, LOOM_OK);
	back = g_malloc(n);
	g_assert_cmpint(loom_tensor_get(w, back, 0, n), ==, LOOM_OK);
	g_assert_cmpmem(back, n, wq, n);

	if (meta) {
		loom_meta_tensor_slice_fn fn = slice_fn();
		int64_t start = 0;
		int members = 0;

		for (size_t j = 0; j < 3; j++) {
			struct loom_tensor *s = NULL;
			int rc = fn(w, j, &s);
			bool d1 = axis == LOOM_SPLIT_DIM1;
			size_t rb;

			if (rc == LOOM_E_INVAL)
				break; /* past the last member */
			g_assert_cmpint(rc, ==, LOOM_OK);
			members++;
			if (!s)
				continue;
			g_assert_nonnull(s->buffer);
			g_assert_true(loom_buffer_get_type(s->buffer) ==
				      (plain ? loom_dev_buffer_type(cpu[j]) :
				       loom_dev_weight_buffer_type(cpu[j])));
			/* The slice holds its rows' or columns' bytes. */
			rb = loom_type_row_size(type, s->ne[0]);
			g_assert_cmpint(loom_tensor_get(s, back, 0, rb * s->ne[1]),
					==, LOOM_OK);
			for (int64_t r = 0; r < s->ne[1]; r++) {
				const uint8_t *want = (const uint8_t *)wq +
					(d1 ? (size_t)(start + r) * nb1 :
					 (size_t)r * nb1 +
					 loom_type_row_size(type, start));

				g_assert_cmpmem(back + (size_t)r * rb, rb, want,
						rb);
			}
			start += d1 ? s->ne[1] : s->ne[0];
		}
		g_assert_cmpint(members, >=, 2);
		g_assert_cmpint(start, ==,
				axis == LOOM_SPLIT_DIM1 ? WM : WK);
		/* A member past the last, a tensor of no meta buffer. */
		g_assert_cmpint(fn(w, 16, &tx), ==, LOOM_E_INVAL);
		g_assert_null(tx);
		g_assert_cmpint(fn(NULL, 0, &tx), ==, LOOM_E_INVAL);
	}
	g_free(back);

	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	tx = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, WK, WN);
	loom_tensor_set_flags(tx, LOOM_TENSOR_INPUT);
	y = loom_mul_mat(gctx, w, tx);
	g_assert_nonnull(y);
	loom_tensor_set_flags(y, LOOM_TENSOR_OUTPUT);
	out = loom_test_compute(dev, gctx, y, tx, x, &err);
	if (!out)
		g_error("%s", err);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
	return out;
}

/* The double product of the decoded weights wq and x. */
static double *reference(enum loom_type type, const void *wq, const float *x)
{
	double *wd = g_new(double, WK * WM), *y = g_new0(double, WM * WN);
	size_t nb1 = loom_type_row_size(type, WK);

	for (int64_t r = 0; r < WM; r++) {
		const uint8_t *row = (const uint8_t *)wq + (size_t)r * nb1;

		if (type == LOOM_TYPE_F32) {
			const float *f = (const float *)row;

			for (int64_t i = 0; i < WK; i++)
				wd[r * WK + i] = f[i];
		} else if (type == LOOM_TYPE_F16) {
			const uint16_t *h = (const uint16_t *)row;

			for (int64_t i = 0; i < WK; i++)
				wd[r * WK + i] = loom_test_fp16_to_double(h[i]);
		} else {
			g_assert_cmpint(loom_test_decode_blocks(type, row, WK,
								wd + r * WK),
					==, LOOM_OK);
		}
	}
	for (int64_t c = 0; c < WN; c++)
		for (int64_t r = 0; r < WM; r++)
			for (int64_t i = 0; i < WK; i++)
				y[c * WM + r] += wd[r * WK + i] *
						 (double)x[c * WK + i];
	g_free(wd);
	return y;
}

static const enum loom_type types[] = {
	LOOM_TYPE_F32,  LOOM_TYPE_F16,  LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0,
	LOOM_TYPE_Q4_1, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
	LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1, LOOM_TYPE_MXFP4, LOOM_TYPE_Q3_K,
	LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
};

/* Rows by 16 (so each slice interleaves), rows by 8 (slices of 8 rows
 * beyond a multiple of 16, which the weight buffer keeps as they are) and
 * columns by the K-quant block, over 2 even, 2 at 3:1 and 3 even
 * partitions. */
static void test_slices(gconstpointer data)
{
	const enum loom_type type = *(const enum loom_type *)data;
	static const struct wsplit by_rows = { LOOM_SPLIT_DIM1, 16 };
	static const struct wsplit by_rows8 = { LOOM_SPLIT_DIM1, 8 };
	static const struct wsplit by_cols = { LOOM_SPLIT_DIM0, 256 };
	static const float r31[2] = { 3, 1 };
	const struct wsplit *splits[3] = { &by_rows, &by_rows8, &by_cols };
	struct loom_test_rng rng;
	float *x = g_new(float, WK * WN);
	void *wq = random_weights(type, 11 + (unsigned)type);
	double *ref, *one, *got;
	/* int8 activations of the quantized kernels */
	double tol = loom_type_block_size(type) > 1 ? 2e-4 : 1e-9;

	loom_test_rng_seed(&rng, 5);
	for (int i = 0; i < WK * WN; i++)
		x[i] = (float)loom_test_rng_uniform(&rng, -1, 1);
	ref = reference(type, wq, x);
	one = run(cpu[0], type, wq, x, false, LOOM_SPLIT_MIRRORED);
	g_assert_cmpfloat(loom_test_nmse(ref, one, WM * WN), <=, tol);
	for (int s = 0; s < 3; s++) {
		for (int k = 0; k < 3; k++) {
			int n = k == 2 ? 3 : 2;
			loom_dev_t *meta = meta_new(n, splits[s],
						    k == 1 ? r31 : NULL);

			for (int plain = 0; plain < 2; plain++) {
				got = run(meta, type, wq, x, plain,
					  splits[s]->state);
				g_assert_cmpfloat(loom_test_nmse(ref, got,
								 WM * WN),
						  <=, tol);
				g_assert_cmpfloat(loom_test_nmse(one, got,
								 WM * WN),
						  <=, 1e-9);
				g_free(got);
			}
		}
	}
	g_free(one);
	g_free(ref);
	g_free(wq);
	g_free(x);
}

/* The meta device has a weight buffer type of its own exactly when a
 * member has; it is the meta device's, and supported there. */
static void test_type(void)
{
	static const struct wsplit ws = { LOOM_SPLIT_DIM1, 16 };
	loom_dev_t *meta = meta_new(2, &ws, NULL);
	loom_buffer_type_t *w = loom_dev_weight_buffer_type(meta);
	char *name;

	g_assert_nonnull(w);
	g_assert_true(loom_buffer_type_device(w) == meta);
	g_assert_true(loom_dev_supports_buft(meta, w));
	if (loom_dev_weight_buffer_type(cpu[0]) ==
	    loom_dev_buffer_type(cpu[0])) {
		g_assert_true(w == loom_dev_buffer_type(meta));
		g_test_skip("cpu0 has no weight buffer type of its own here");
		return;
	}
	g_assert_true(w != loom_dev_buffer_type(meta));
	g_assert_false(loom_dev_supports_buft(meta, loom_dev_weight_buffer_type(
							    cpu[0])));
	name = g_strdup_printf("%s_weights", loom_dev_name(meta));
	g_assert_cmpstr(loom_buffer_type_name(w), ==, name);
	g_free(name);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	if (loom_test_meta_partitions(3, cpu)) {
		g_test_skip("no cpu and meta plugins with 3 partitions");
		return g_test_run();
	}
	g_test_add_func("/meta-weights/type", test_type);
	for (size_t i = 0; i < G_N_ELEMENTS(types); i++) {
		char *path = g_strdup_printf("/meta-weights/slices/%s",
					     loom_type_name(types[i]));

		g_test_add_data_func(path, &types[i], test_slices);
		g_free(path);
	}
	return g_test_run();
}
