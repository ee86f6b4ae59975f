/* SPDX-License-Identifier: MIT */
/* meta-util.c - test-meta's shared helpers: a split callback driven by a
 * table of names, meta devices over the CPU partitions, and a product of
 * split weights (w1 SPLIT(1), w2 SPLIT(0), silu of the partial sum) run
 * on a device against a double reference. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom-plugin.h>

#include "meta-util.h"

loom_dev_t *cpu[4];

/* ---- a split callback driven by a table of names ---- */

int table_split(const struct loom_tensor *t, struct loom_split *out,
		       void *userdata)
{
	const struct rule *r = userdata;

	memset(out, 0, sizeof(*out));
	out->state = LOOM_SPLIT_MIRRORED;
	for (; r->name; r++) {
		if (strcmp(r->name, t->name))
			continue;
		if (r->fail)
			return loom_error_set(LOOM_E_INVAL, "refused");
		out->state = r->state;
		out->granularity = r->granularity;
		out->n_segments = r->n_seg;
		for (int s = 0; s < r->n_seg && s < 4; s++)
			out->segments[s] = r->seg[s];
		return r->ret;
	}
	return LOOM_OK;
}

loom_dev_t *meta_new(int n, const struct rule *rules,
			    const float *ratios, bool fallback)
{
	struct loom_meta_opts opts = {
		.size = sizeof(opts),
		.ratios = ratios,
		.force_fallback = fallback,
	};
	loom_dev_t *dev = NULL;

	if (loom_meta_dev_new(cpu, (size_t)n, table_split, (void *)rules,
			      &opts, &dev))
		g_error("meta device: %s", loom_error_message());
	return dev;
}

void fill(float *v, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
	}
}

size_t dev_sizes(loom_buffer_t *buf, size_t *sizes, size_t n)
{
	loom_meta_buffer_dev_sizes_fn fn = (loom_meta_buffer_dev_sizes_fn)
		loom_reg_proc_address(loom_reg_by_name("meta"),
				      LOOM_PROC_META_BUFFER_DEV_SIZES);
	size_t sum = 0;

	g_assert_nonnull(fn);
	g_assert_cmpint(fn(buf, sizes, n), ==, LOOM_OK);
	for (size_t j = 0; j < n; j++)
		sum += sizes[j];
	return sum;
}

/* ---- a product of split weights, run on a device ---- */

const struct rule mm_rules[] = {
	{ .name = "w1", .state = LOOM_SPLIT_DIM1 },
	{ .name = "w2", .state = LOOM_SPLIT_DIM0 },
	{ .name = NULL }
};

void mm_reference(const float *w1, const float *w2, const float *x,
			 struct mm_result *r)
{
	for (int t = 0; t < T; t++) {
		for (int i = 0; i < M; i++) {
			double acc = 0;

			for (int k = 0; k < K; k++)
				acc += (double)w1[i * K + k] * x[t * K + k];
			r->y[t * M + i] = (float)acc;
		}
		for (int i = 0; i < N; i++) {
			double acc = 0, v;

			for (int k = 0; k < M; k++)
				acc += (double)w2[i * M + k] * r->y[t * M + k];
			r->z[t * N + i] = (float)acc;
			v = 2 * acc;
			r->s[t * N + i] = (float)(v / (1 + exp(-v)));
		}
	}
}

void mm_run(loom_dev_t *dev, const float *w1, const float *w2,
		   const float *x, struct mm_result *r)
{
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;
	struct loom_tensor *tw1, *tw2, *tx, *y, *z, *s;
	loom_meta_backend_dev_sizes_fn sizes_fn;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	tw1 = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, K, M);
	tw2 = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, M, N);
	loom_tensor_set_name(tw1, "w1");
	loom_tensor_set_name(tw2, "w2");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(dev),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_tensor_set(tw1, w1, 0, sizeof(float) * K * M), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_set(tw2, w2, 0, sizeof(float) * M * N), ==,
			LOOM_OK);

	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	tx = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, K, T);
	loom_tensor_set_name(tx, "x");
	loom_tensor_set_flags(tx, LOOM_TENSOR_INPUT);
	y = loom_mul_mat(gctx, tw1, tx);
	z = loom_mul_mat(gctx, tw2, y);
	s = loom_silu(gctx, loom_scale(gctx, z, 2.0f));
	g_assert_nonnull(s);
	loom_tensor_set_name(y, "y");
	loom_tensor_set_name(z, "z");
	loom_tensor_set_name(s, "s");
	loom_tensor_set_flags(y, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(z, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(s, LOOM_TENSOR_OUTPUT);
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, z), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, s), ==, LOOM_OK);
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META)
		g_assert_cmpint(loom_meta_check(dev, g), ==, LOOM_OK);

	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(dev), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(tx, x, 0, sizeof(float) * K * T), ==,
			LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	/* Twice: the second run reuses the cached plan. */
	for (int i = 0; i < 2; i++)
		if (loom_backend_graph_compute(be, g))
			g_error("compute: %s", loom_error_message());
	g_assert_cmpint(loom_tensor_get(y, r->y, 0, sizeof(r->y)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(z, r->z, 0, sizeof(r->z)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(s, r->s, 0, sizeof(r->s)), ==,
			LOOM_OK);
	memset(r->dev_compute, 0, sizeof(r->dev_compute));
	sizes_fn = (loom_meta_backend_dev_sizes_fn)loom_reg_proc_address(
		loom_reg_by_name("meta"), LOOM_PROC_META_BACKEND_DEV_SIZES);
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META)
		g_assert_cmpint(sizes_fn(be, r->dev_compute, 4), ==, LOOM_OK);

	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* The normalized mean squared error of x against ref. */
double nmse_of(const float *ref, const float *x, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i] - ref[i];

		num += d * d;
		den += (double)ref[i] * ref[i];
	}
	return den > 0 ? num / den : num;
}

void assert_close(const float *ref, const float *x, size_t n)
{
	g_assert_cmpfloat(nmse_of(ref, x, n), <=, 1e-10);
}

void find_cpus(void)
{
	for (int j = 0; j < 4; j++) {
		char name[8];

		g_snprintf(name, sizeof(name), "cpu%d", j);
		cpu[j] = loom_dev_by_name(name);
		g_assert_nonnull(cpu[j]);
	}
}

