/* SPDX-License-Identifier: MIT */
/* test-meta.c - the meta device over CPU partitions: composition, slice
 * sizes, set/get of split tensors with offsets, mul_mat splits with the
 * allreduce through the CPU entry point and the generic path, products
 * of quantized weights against one device, memory per device, and the
 * errors of bad callbacks and unsupported combinations.
 * The decoder stack is in test-meta-llama.c.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom-plugin.h>

static loom_dev_t *cpu[4];

/* ---- a split callback driven by a table of names ---- */

struct rule {
	const char *name;
	enum loom_split_state state;
	int64_t granularity;
	int n_seg;
	int64_t seg[4];
	int fail;
	int ret; /* returned as is, without a message */
};

static int table_split(const struct loom_tensor *t, struct loom_split *out,
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

static loom_dev_t *meta_new(int n, const struct rule *rules,
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

static void fill(float *v, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
	}
}

static size_t dev_sizes(loom_buffer_t *buf, size_t *sizes, size_t n)
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

/* ---- composition ---- */

static void test_compose(void)
{
	loom_dev_t *meta = loom_dev_by_type(LOOM_DEV_TYPE_META);
	loom_buffer_type_t *buft;
	size_t f, t, f0, t0, f1, t1;

	g_assert_nonnull(meta);
	g_assert_cmpstr(loom_dev_name(meta), ==, "meta0");
	g_assert_cmpstr(loom_dev_description(meta), ==, "meta(cpu0,cpu1)");
	g_assert_true(loom_dev_by_name("meta0") == meta);
	loom_dev_memory(meta, &f, &t);
	loom_dev_memory(cpu[0], &f0, &t0);
	loom_dev_memory(cpu[1], &f1, &t1);
	g_assert_cmpuint(t, ==, t0 + t1);
	buft = loom_dev_buffer_type(meta);
	g_assert_cmpuint(loom_buffer_type_alignment(buft), >=,
			 loom_buffer_type_alignment(loom_dev_buffer_type(cpu[0])));
	g_assert_cmpuint(loom_buffer_type_max_size(buft), <=,
			 loom_buffer_type_max_size(loom_dev_buffer_type(cpu[1])));
}

static gpointer make_same(gpointer data)
{
	loom_dev_t *dev = NULL;
	static const float r[2] = { 2, 1 };
	struct loom_meta_opts opts = { .size = sizeof(opts), .ratios = r };

	if (loom_meta_dev_new(cpu, 2, table_split, data, &opts, &dev))
		return NULL;
	return dev;
}

static void test_dedup(void)
{
	static const struct rule none[] = { { .name = NULL } };
	GThread *th[4];
	gpointer got[4];

	for (int i = 0; i < 4; i++)
		th[i] = g_thread_new("meta", make_same, (gpointer)none);
	for (int i = 0; i < 4; i++)
		got[i] = g_thread_join(th[i]);
	g_assert_nonnull(got[0]);
	for (int i = 1; i < 4; i++)
		g_assert_true(got[i] == got[0]);
	g_assert_true(make_same((gpointer)none) == got[0]);
	/* Other ratios, or a fallback option, make another device. */
	g_assert_true(meta_new(2, none, NULL, false) != got[0]);
	g_assert_true(meta_new(2, none, NULL, true) !=
		      meta_new(2, none, NULL, false));
}

/* A world that is none, and LOOM_META_WORLD without the mpi plugin (no
 * launcher here), are refused with the reason. */
static void test_world_refused(void)
{
	struct loom_meta_opts opts = { .size = sizeof(opts) };
	loom_dev_t *dev = NULL;
	size_t before = loom_reg_dev_count(loom_reg_by_name("meta"));

	opts.world = loom_reg_by_name("cpu");
	g_assert_nonnull(opts.world);
	g_assert_cmpint(loom_meta_dev_new(cpu, 2, NULL, NULL, &opts, &dev), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(),
				"plugin cpu has no world entry points"));
	g_assert_null(dev);

	g_setenv("LOOM_META_WORLD", "mpi", TRUE);
	opts.world = NULL;
	g_assert_cmpint(loom_meta_dev_new(cpu, 2, NULL, NULL, &opts, &dev), ==,
			LOOM_E_NOT_FOUND);
	g_assert_nonnull(strstr(loom_error_message(),
				"LOOM_META_WORLD=mpi: plugin mpi is not loaded"));
	g_assert_cmpint(loom_meta_dev_new(cpu, 2, NULL, NULL, NULL, &dev), ==,
			LOOM_E_NOT_FOUND);
	/* split_buffer_type is this process's alone. */
	{
		loom_split_buffer_type_fn fn = (loom_split_buffer_type_fn)
			loom_reg_proc_address(loom_reg_by_name("meta"),
					      LOOM_PROC_SPLIT_BUFFER_TYPE);
		loom_buffer_type_t *buft = NULL;

		g_assert_cmpint(fn(cpu, 2, NULL, &buft), ==, LOOM_OK);
		g_assert_nonnull(buft);
	}
	g_unsetenv("LOOM_META_WORLD");
	/* Nothing half-made was left registered (split_buffer_type's device
	 * may be new). */
	g_assert_cmpuint(loom_reg_dev_count(loom_reg_by_name("meta")), <=,
			 before + 1);
}

static void test_not_meta(void)
{
	loom_dev_t *dev = (loom_dev_t *)0x1;
	loom_dev_t *twice[2];

	g_assert_cmpint(loom_meta_dev_new(cpu, 0, NULL, NULL, NULL, &dev), ==,
			LOOM_E_INVAL);
	g_assert_null(dev);
	twice[0] = cpu[0];
	twice[1] = loom_dev_by_type(LOOM_DEV_TYPE_META);
	g_assert_cmpint(loom_meta_dev_new(twice, 2, NULL, NULL, NULL, &dev),
			==, LOOM_E_UNSUPPORTED);
}

/* ---- slices and data ---- */

/* 7 columns over ratios 0.5/0.3/0.2: quotas 3.5, 2.1, 1.4; the one unit
 * left goes to the largest remainder (device 0): 4, 2, 1. */
static void test_largest_remainder(void)
{
	static const struct rule rules[] = {
		{ .name = "w", .state = LOOM_SPLIT_DIM1 }, { .name = NULL }
	};
	static const float r[3] = { 0.5f, 0.3f, 0.2f };
	loom_dev_t *meta = meta_new(3, rules, r, false);
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *w;
	size_t sizes[3];
	float in[10 * 7], out[10 * 7];

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 10, 7);
	loom_tensor_set_name(w, "w");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta),
					       &buf), ==, LOOM_OK);
	dev_sizes(buf, sizes, 3);
	g_assert_cmpuint(sizes[0], >=, 4 * 40);
	g_assert_cmpuint(sizes[0], <, 4 * 40 + 40);
	g_assert_cmpuint(sizes[1], >=, 2 * 40);
	g_assert_cmpuint(sizes[1], <, 2 * 40 + 40);
	g_assert_cmpuint(sizes[2], >=, 1 * 40);
	g_assert_cmpuint(sizes[2], <, 1 * 40 + 40);
	fill(in, G_N_ELEMENTS(in), 1);
	g_assert_cmpint(loom_tensor_set(w, in, 0, sizeof(in)), ==, LOOM_OK);
	memset(out, 0, sizeof(out));
	g_assert_cmpint(loom_tensor_get(w, out, 0, sizeof(out)), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* Round trips with offsets on row boundaries, for a split of dimension 1
 * in two segments, a split of dimension 0, a MIRRORED and a PARTIAL
 * tensor; a misaligned offset is refused. */
static void test_set_get(void)
{
	static const struct rule rules[] = {
		{ .name = "a", .state = LOOM_SPLIT_DIM1, .n_seg = 2,
		  .seg = { 2, 3 } },
		{ .name = "b", .state = LOOM_SPLIT_DIM0 },
		{ .name = "p", .state = LOOM_SPLIT_PARTIAL },
		{ .name = NULL }
	};
	static const float r[3] = { 1, 2, 1 };
	loom_dev_t *meta = meta_new(3, rules, r, false);
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	loom_backend_t *be;
	struct loom_tensor *a, *b, *m, *p;
	float ha[6 * 5 * 3], hb[9 * 4], hm[11], hp[13], o[6 * 5 * 3];
	float row[6 * 5];
	size_t unit_a = 6 * 5 * 4, unit_b = 9 * 4;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 6, 5, 3);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 9, 4);
	m = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 11);
	p = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 13);
	loom_tensor_set_name(a, "a");
	loom_tensor_set_name(b, "b");
	loom_tensor_set_name(m, "m");
	loom_tensor_set_name(p, "p");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta),
					       &buf), ==, LOOM_OK);
	loom_buffer_set_usage(buf, LOOM_BUFFER_USAGE_WEIGHTS);

	fill(ha, G_N_ELEMENTS(ha), 2);
	fill(hb, G_N_ELEMENTS(hb), 3);
	fill(hm, G_N_ELEMENTS(hm), 4);
	fill(hp, G_N_ELEMENTS(hp), 5);
	g_assert_cmpint(loom_tensor_set(a, ha, 0, sizeof(ha)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(b, hb, 0, sizeof(hb)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(m, hm, 0, sizeof(hm)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(p, hp, 0, sizeof(hp)), ==, LOOM_OK);

	g_assert_cmpint(loom_tensor_get(a, o, 0, sizeof(ha)), ==, LOOM_OK);
	g_assert_cmpmem(o, sizeof(ha), ha, sizeof(ha));
	g_assert_cmpint(loom_tensor_get(b, o, 0, sizeof(hb)), ==, LOOM_OK);
	g_assert_cmpmem(o, sizeof(hb), hb, sizeof(hb));
	g_assert_cmpint(loom_tensor_get(m, o, 0, sizeof(hm)), ==, LOOM_OK);
	g_assert_cmpmem(o, sizeof(hm), hm, sizeof(hm));
	/* PARTIAL: the value read is the sum of the summands. */
	g_assert_cmpint(loom_tensor_get(p, o, 0, sizeof(hp)), ==, LOOM_OK);
	g_assert_cmpmem(o, sizeof(hp), hp, sizeof(hp));

	/* One row of a in the middle, then the last two rows of b. */
	fill(row, G_N_ELEMENTS(row), 9);
	memcpy(ha + 6 * 5, row, sizeof(row));
	g_assert_cmpint(loom_tensor_set(a, row, unit_a, unit_a), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(a, o, 0, sizeof(ha)), ==, LOOM_OK);
	g_assert_cmpmem(o, sizeof(ha), ha, sizeof(ha));
	g_assert_cmpint(loom_tensor_get(a, o, 2 * unit_a, unit_a), ==,
			LOOM_OK);
	g_assert_cmpmem(o, unit_a, ha + 2 * 6 * 5, unit_a);
	fill(hb + 2 * 9, 2 * 9, 10);
	g_assert_cmpint(loom_tensor_set(b, hb + 2 * 9, 2 * unit_b, 2 * unit_b),
			==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(b, o, unit_b, 3 * unit_b), ==,
			LOOM_OK);
	g_assert_cmpmem(o, 3 * unit_b, hb + 9, 3 * unit_b);
	g_assert_cmpint(loom_tensor_get(b, o, 4, unit_b), ==, LOOM_E_INVAL);

	/* The async path. */
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);
	fill(hb, G_N_ELEMENTS(hb), 11);
	g_assert_cmpint(loom_backend_tensor_set_async(be, b, hb, 0,
						      sizeof(hb)), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	memset(o, 0, sizeof(o));
	g_assert_cmpint(loom_backend_tensor_get_async(be, b, o, unit_b,
						      2 * unit_b), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	g_assert_cmpmem(o, 2 * unit_b, hb + 9, 2 * unit_b);
	loom_backend_free(be);

	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* memset of split tensors: the whole of one whose rows are larger than
 * any staged block (a long KV cache split by heads), a part on the rows
 * of another, a PARTIAL one (its sum reads as the bytes set). */
static void test_memset(void)
{
	static const struct rule rules[] = {
		{ .name = "c", .state = LOOM_SPLIT_DIM2 },
		{ .name = "b", .state = LOOM_SPLIT_DIM0 },
		{ .name = "p", .state = LOOM_SPLIT_PARTIAL },
		{ .name = NULL }
	};
	loom_dev_t *meta = meta_new(3, rules, NULL, false);
	enum { C0 = 256, C1 = 300, C2 = 5 };
	size_t c_bytes = (size_t)C0 * C1 * C2 * 4, unit_b = 9 * 4;
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *c, *b, *p;
	float hb[9 * 4], ob[9 * 4], hp[13], op[13];
	uint8_t *oc = g_malloc(c_bytes);

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	c = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, C0, C1, C2);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 9, 4);
	p = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 13);
	loom_tensor_set_name(c, "c");
	loom_tensor_set_name(b, "b");
	loom_tensor_set_name(p, "p");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta),
					       &buf), ==, LOOM_OK);
	loom_buffer_set_usage(buf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpuint(c_bytes, >, 1u << 20);

	g_assert_cmpint(loom_tensor_memset(c, 0x3f, 0, c_bytes), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(c, oc, 0, c_bytes), ==, LOOM_OK);
	for (size_t i = 0; i < c_bytes; i++)
		if (oc[i] != 0x3f)
			g_error("c[%zu] = %#x after memset 0x3f", i, oc[i]);
	/* A split of dimension 2 is one row: a part of it is refused. */
	g_assert_cmpint(loom_tensor_memset(c, 0, 4, 8), ==, LOOM_E_INVAL);

	fill(hb, G_N_ELEMENTS(hb), 3);
	g_assert_cmpint(loom_tensor_set(b, hb, 0, sizeof(hb)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_memset(b, 0, unit_b, 2 * unit_b), ==,
			LOOM_OK);
	memset(hb + 9, 0, 2 * unit_b);
	g_assert_cmpint(loom_tensor_get(b, ob, 0, sizeof(ob)), ==, LOOM_OK);
	g_assert_cmpmem(ob, sizeof(ob), hb, sizeof(hb));

	fill(hp, G_N_ELEMENTS(hp), 5);
	g_assert_cmpint(loom_tensor_set(p, hp, 0, sizeof(hp)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_memset(p, 0, 0, sizeof(hp)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(p, op, 0, sizeof(op)), ==, LOOM_OK);
	memset(hp, 0, sizeof(hp));
	g_assert_cmpmem(op, sizeof(op), hp, sizeof(hp));
	/* A non-zero pattern is the sum: the first summand holds it. */
	g_assert_cmpint(loom_tensor_memset(p, 0x3f, 0, sizeof(hp)), ==,
			LOOM_OK);
	memset(hp, 0x3f, sizeof(hp));
	g_assert_cmpint(loom_tensor_get(p, op, 0, sizeof(op)), ==, LOOM_OK);
	g_assert_cmpmem(op, sizeof(op), hp, sizeof(hp));

	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	g_free(oc);
}

/* ---- compute ---- */

/* w1 [K, M] SPLIT(1) times x gives y SPLIT(0); w2 [M, N] SPLIT(0) times
 * y gives z PARTIAL (read as its sum); silu(2 z) needs the allreduce. */
#define K 10
#define M 9
#define N 7
#define T 3

static const struct rule mm_rules[] = {
	{ .name = "w1", .state = LOOM_SPLIT_DIM1 },
	{ .name = "w2", .state = LOOM_SPLIT_DIM0 },
	{ .name = NULL }
};

struct mm_result {
	float y[M * T], z[N * T], s[N * T];
	size_t dev_compute[4];
};

static void mm_reference(const float *w1, const float *w2, const float *x,
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

static void mm_run(loom_dev_t *dev, const float *w1, const float *w2,
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
static double nmse_of(const float *ref, const float *x, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i] - ref[i];

		num += d * d;
		den += (double)ref[i] * ref[i];
	}
	return den > 0 ? num / den : num;
}

static void assert_close(const float *ref, const float *x, size_t n)
{
	g_assert_cmpfloat(nmse_of(ref, x, n), <=, 1e-10);
}

static void test_mul_mat(void)
{
	static const float r3[3] = { 0.2f, 0.5f, 0.3f };
	float w1[K * M], w2[M * N], x[K * T];
	struct mm_result ref, got, fb;

	fill(w1, G_N_ELEMENTS(w1), 21);
	fill(w2, G_N_ELEMENTS(w2), 22);
	fill(x, G_N_ELEMENTS(x), 23);
	mm_reference(w1, w2, x, &ref);
	for (int n = 2; n <= 4; n++) {
		const float *ratios = n == 3 ? r3 : NULL;

		mm_run(meta_new(n, mm_rules, ratios, false), w1, w2, x, &got);
		mm_run(meta_new(n, mm_rules, ratios, true), w1, w2, x, &fb);
		assert_close(ref.y, got.y, M * T);
		assert_close(ref.z, got.z, N * T);
		assert_close(ref.s, got.s, N * T);
		/* The entry point and the generic allreduce agree. */
		assert_close(got.s, fb.s, N * T);
		for (int j = 0; j < n; j++)
			g_assert_cmpuint(got.dev_compute[j], >, 0);
	}
}

/* Reducing in BF16 from a size on stays within BF16 precision, through
 * the entry point and the generic path alike. */
static void test_bf16_reduce(void)
{
	float w1[K * M], w2[M * N], x[K * T];
	struct mm_result ref, got;

	fill(w1, G_N_ELEMENTS(w1), 51);
	fill(w2, G_N_ELEMENTS(w2), 52);
	fill(x, G_N_ELEMENTS(x), 53);
	mm_reference(w1, w2, x, &ref);
	for (int fb = 0; fb < 2; fb++) {
		struct loom_meta_opts opts = {
			.size = sizeof(opts),
			.reduce_type = LOOM_TYPE_BF16,
			.bf16_min_bytes = 0,
			.force_fallback = fb,
		};
		loom_dev_t *meta;
		double num = 0, den = 0;

		g_assert_cmpint(loom_meta_dev_new(cpu, 2, table_split,
						  (void *)mm_rules, &opts,
						  &meta), ==, LOOM_OK);
		mm_run(meta, w1, w2, x, &got);
		for (int i = 0; i < N * T; i++) {
			double d = (double)got.s[i] - ref.s[i];

			num += d * d;
			den += (double)ref.s[i] * ref.s[i];
		}
		g_assert_cmpfloat(num, <=, 1e-4 * den);
	}
}

/* ---- quantized weights ---- */

/* Products of block-quantized weights, which the CPU computes on int8
 * activations quantized per 32 values: w1 [QK, QM] by rows (SPLIT(1)),
 * w2 [QM, QK] along its three 256-value blocks (SPLIT(0), a PARTIAL sum
 * that silu needs whole), and the same two as experts through
 * mul_mat_id.  Every device quantizes the same blocks of the same values
 * as one device does, so the meta device agrees with one device to the
 * order of the partial sums, far below the int8 rounding (a device on
 * another kernel path, or quantizing other blocks, differs by that
 * rounding); both agree with the double-precision products of the
 * dequantized weights to that rounding. */
#define QK 256
#define QM 768
#define QT 5
#define QE 3
#define QU 2

static const struct rule q_rules[] = {
	{ .name = "w1", .state = LOOM_SPLIT_DIM1, .granularity = 256 },
	{ .name = "w2", .state = LOOM_SPLIT_DIM0, .granularity = 256 },
	{ .name = "e1", .state = LOOM_SPLIT_DIM1, .granularity = 256 },
	{ .name = "e2", .state = LOOM_SPLIT_DIM0, .granularity = 256 },
	{ .name = NULL }
};

struct q_result {
	float y[QM * QT], s[QK * QT];
	float ey[QM * QU * QT], es[QK * QU * QT];
};

static const int32_t q_ids[QU * QT] = { 0, 2, 1, 0, 2, 1, 2, 2, 1, 0 };

static struct loom_tensor *q_weight(loom_ctx_t *ctx, enum loom_type type,
				    int64_t k, int64_t m, int64_t e,
				    const char *name)
{
	struct loom_tensor *t = e ? loom_tensor_new_3d(ctx, type, k, m, e) :
				    loom_tensor_new_2d(ctx, type, k, m);

	g_assert_nonnull(t);
	loom_tensor_set_name(t, name);
	return t;
}

static void q_run(loom_dev_t *dev, enum loom_type type, void *const *q,
		  const float *x, struct q_result *r)
{
	struct loom_tensor *w[4], *tx, *ids, *y, *s, *ey, *es;
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w[0] = q_weight(wctx, type, QK, QM, 0, "w1");
	w[1] = q_weight(wctx, type, QM, QK, 0, "w2");
	w[2] = q_weight(wctx, type, QK, QM, QE, "e1");
	w[3] = q_weight(wctx, type, QM, QK, QE, "e2");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(dev),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	for (int i = 0; i < 4; i++)
		g_assert_cmpint(loom_tensor_set(w[i], q[i], 0,
						loom_tensor_n_bytes(w[i])), ==,
				LOOM_OK);

	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	tx = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, QK, QT);
	ids = loom_tensor_new_2d(gctx, LOOM_TYPE_I32, QU, QT);
	loom_tensor_set_flags(tx, LOOM_TENSOR_INPUT);
	loom_tensor_set_flags(ids, LOOM_TENSOR_INPUT);
	y = loom_mul_mat(gctx, w[0], tx);
	s = loom_silu(gctx, loom_mul_mat(gctx, w[1], y));
	ey = loom_mul_mat_id(gctx, w[2], loom_reshape_3d(gctx, tx, QK, 1, QT),
			     ids);
	es = loom_silu(gctx, loom_mul_mat_id(gctx, w[3], ey, ids));
	g_assert_nonnull(s);
	g_assert_nonnull(es);
	loom_tensor_set_flags(y, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(s, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(ey, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_flags(es, LOOM_TENSOR_OUTPUT);
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, s), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, es), ==, LOOM_OK);
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META)
		g_assert_cmpint(loom_meta_check(dev, g), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(dev), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(tx, x, 0, sizeof(float) * QK * QT), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_set(ids, q_ids, 0, sizeof(q_ids)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	if (loom_backend_graph_compute(be, g))
		g_error("compute: %s", loom_error_message());
	g_assert_cmpint(loom_tensor_get(y, r->y, 0, sizeof(r->y)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(s, r->s, 0, sizeof(r->s)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(ey, r->ey, 0, sizeof(r->ey)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_get(es, r->es, 0, sizeof(r->es)), ==,
			LOOM_OK);
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* out[t][i] = sum_k w[i][k] x[t][k] (w row-major [m][k]). */
static void q_product(const double *w, const double *x, int64_t k,
		      int64_t m, double *out)
{
	for (int64_t i = 0; i < m; i++) {
		double acc = 0;

		for (int64_t j = 0; j < k; j++)
			acc += w[i * k + j] * x[j];
		out[i] = acc;
	}
}

static double silu_d(double v)
{
	return v / (1 + exp(-v));
}

/* The products of the dequantized weights wd (w1, w2, e1, e2) in double. */
static void q_reference(double *const *wd, const float *x,
			struct q_result *r)
{
	double xd[QK], y[QM], z[QK];

	for (int t = 0; t < QT; t++) {
		for (int k = 0; k < QK; k++)
			xd[k] = x[t * QK + k];
		q_product(wd[0], xd, QK, QM, y);
		q_product(wd[1], y, QM, QK, z);
		for (int i = 0; i < QM; i++)
			r->y[t * QM + i] = (float)y[i];
		for (int i = 0; i < QK; i++)
			r->s[t * QK + i] = (float)silu_d(z[i]);
		for (int u = 0; u < QU; u++) {
			int32_t e = q_ids[t * QU + u];
			float *ey = r->ey + (t * QU + u) * QM;

			q_product(wd[2] + (size_t)e * QM * QK, xd, QK, QM, y);
			q_product(wd[3] + (size_t)e * QK * QM, y, QM, QK, z);
			for (int i = 0; i < QM; i++)
				ey[i] = (float)y[i];
			for (int i = 0; i < QK; i++)
				r->es[(t * QU + u) * QK + i] =
					(float)silu_d(z[i]);
		}
	}
}

static void assert_q_close(const struct q_result *ref,
			   const struct q_result *got, double max)
{
	g_assert_cmpfloat(nmse_of(ref->y, got->y, QM * QT), <=, max);
	g_assert_cmpfloat(nmse_of(ref->s, got->s, QK * QT), <=, max);
	g_assert_cmpfloat(nmse_of(ref->ey, got->ey, QM * QU * QT), <=, max);
	g_assert_cmpfloat(nmse_of(ref->es, got->es, QK * QU * QT), <=, max);
}

static void test_quant_mul_mat(void)
{
	static const enum loom_type types[] = {
		LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
		LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_1,
		LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1, LOOM_TYPE_Q3_K,
		LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
		LOOM_TYPE_MXFP4,
	};
	static const float r3[3] = { 0.5f, 0.3f, 0.2f };
	static const int64_t n_el[4] = { QK * QM, QM * QK, QK * QM * QE,
					 QM * QK * QE };
	float x[QK * QT];
	struct q_result *ref = g_new(struct q_result, 1);
	struct q_result *one = g_new(struct q_result, 1);
	struct q_result *got = g_new(struct q_result, 1);

	fill(x, G_N_ELEMENTS(x), 61);
	for (size_t ti = 0; ti < G_N_ELEMENTS(types); ti++) {
		enum loom_type type = types[ti];
		void *q[4];
		double *wd[4];

		for (int i = 0; i < 4; i++) {
			float *f = g_new(float, n_el[i]);

			fill(f, (size_t)n_el[i], 62 + (unsigned)i);
			q[i] = g_malloc(loom_type_row_size(type, n_el[i]));
			g_assert_cmpint(loom_type_convert(LOOM_TYPE_F32, f,
							  type, q[i],
							  n_el[i]), ==,
					LOOM_OK);
			g_assert_cmpint(loom_type_convert(type, q[i],
							  LOOM_TYPE_F32, f,
							  n_el[i]), ==,
					LOOM_OK);
			wd[i] = g_new(double, n_el[i]);
			for (int64_t j = 0; j < n_el[i]; j++)
				wd[i][j] = f[j];
			g_free(f);
		}
		q_reference(wd, x, ref);
		q_run(cpu[0], type, q, x, one);
		/* One device: within the int8 rounding of the activations. */
		assert_q_close(ref, one, 2e-4);
		g_test_message("%s: one device %.3g from the double products",
			       loom_type_name(type),
			       nmse_of(ref->s, one->s, QK * QT));
		/* Two devices, three uneven, four with one left empty, through
		 * the entry point and the generic allreduce. */
		for (int n = 2; n <= 4; n++) {
			for (int fb = 0; fb < 2; fb++) {
				q_run(meta_new(n, q_rules, n == 3 ? r3 : NULL,
					       fb),
				      type, q, x, got);
				assert_q_close(one, got, 1e-10);
			}
		}
		for (int i = 0; i < 4; i++) {
			g_free(q[i]);
			g_free(wd[i]);
		}
	}
	g_free(ref);
	g_free(one);
	g_free(got);
}

/* ---- memory ---- */

static void test_memory(void)
{
	static const struct rule rules[] = {
		{ .name = "big", .state = LOOM_SPLIT_DIM1 },
		{ .name = "q", .state = LOOM_SPLIT_DIM0 },
		{ .name = NULL }
	};
	static const float r[2] = { 3, 1 };
	loom_dev_t *meta = meta_new(2, rules, r, false);
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *big, *q, *mir;
	size_t sizes[2], whole_big = 64 * 256 * 4, whole_mir = 100 * 4;
	size_t whole_q = 2 * 34 * 8, slack = 1024;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	big = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, 256);
	q = loom_tensor_new_2d(ctx, LOOM_TYPE_Q8_0, 64, 8);
	mir = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 100);
	loom_tensor_set_name(big, "big");
	loom_tensor_set_name(q, "q");
	loom_tensor_set_name(mir, "mirror");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta),
					       &buf), ==, LOOM_OK);
	dev_sizes(buf, sizes, 2);
	/* 3:1 of 256 columns; Q8_0 rows by whole blocks: 2 blocks at 3:1
	 * have quotas 1.5 and 0.5, a tie the first device wins, so all of
	 * q is on device 0; the mirrored vector is whole on both. */
	g_assert_cmpuint(sizes[0], >=, whole_big * 3 / 4 + whole_q + whole_mir);
	g_assert_cmpuint(sizes[0], <=, whole_big * 3 / 4 + whole_q +
					       whole_mir + slack);
	g_assert_cmpuint(sizes[1], >=, whole_big / 4 + whole_mir);
	g_assert_cmpuint(sizes[1], <=, whole_big / 4 + whole_mir + slack);
	g_test_message("per device: %zu + %zu bytes, whole %zu", sizes[0],
		       sizes[1], whole_big + whole_q + whole_mir);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* Compute memory per device is about the slices: a wide SPLIT(0) result
 * costs each of 2 devices half of what it costs whole. */
static void test_compute_memory(void)
{
	static const struct rule rules[] = {
		{ .name = "w1", .state = LOOM_SPLIT_DIM1 }, { .name = NULL }
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;
	struct loom_tensor *w, *x, *y;
	size_t sizes[2], whole;
	loom_meta_backend_dev_sizes_fn fn = (loom_meta_backend_dev_sizes_fn)
		loom_reg_proc_address(loom_reg_by_name("meta"),
				      LOOM_PROC_META_BACKEND_DEV_SIZES);

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, 16, 1024);
	loom_tensor_set_name(w, "w1");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(meta),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_clear(wbuf, 0);
	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, 16, 32);
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	loom_tensor_set_name(x, "x");
	y = loom_silu(gctx, loom_mul_mat(gctx, w, x));
	loom_tensor_set_flags(y, LOOM_TENSOR_OUTPUT);
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(meta), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	loom_tensor_memset(x, 0, 0, loom_tensor_n_bytes(x));
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	g_assert_cmpint(fn(be, sizes, 2), ==, LOOM_OK);
	whole = 2 * 1024 * 32 * 4; /* the product and its silu */
	g_test_message("compute per device: %zu, %zu; whole %zu", sizes[0],
		       sizes[1], whole);
	g_assert_cmpuint(sizes[0], <=, whole / 2 + 4096);
	g_assert_cmpuint(sizes[1], <=, whole / 2 + 4096);
	g_assert_cmpuint(sizes[0], >=, whole / 4);
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* ---- errors ---- */

static int alloc_one(loom_dev_t *meta, enum loom_type type, int64_t ne0,
		     int64_t ne1, const char *name)
{
	loom_ctx_t *ctx;
	loom_buffer_t *buf = NULL;
	struct loom_tensor *t;
	int rc;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	t = loom_tensor_new_2d(ctx, type, ne0, ne1);
	loom_tensor_set_name(t, name);
	rc = loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta), &buf);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	return rc;
}

static void test_bad_callbacks(void)
{
	static const struct rule rules[] = {
		{ .name = "sum", .state = LOOM_SPLIT_DIM1, .n_seg = 2,
		  .seg = { 3, 3 } },
		{ .name = "block", .state = LOOM_SPLIT_DIM0,
		  .granularity = 48 },
		{ .name = "gran", .state = LOOM_SPLIT_DIM1, .granularity = 4 },
		{ .name = "refused", .state = LOOM_SPLIT_DIM1, .fail = 1 },
		{ .name = "ok", .state = LOOM_SPLIT_DIM0, .granularity = 64 },
		{ .name = "state", .state = (enum loom_split_state)42 },
		{ .name = "state-neg", .state = (enum loom_split_state)-1 },
		{ .name = "nseg", .state = LOOM_SPLIT_DIM1, .n_seg = 9 },
		{ .name = "nseg-neg", .state = LOOM_SPLIT_DIM1, .n_seg = -1 },
		{ .name = "seg-neg", .state = LOOM_SPLIT_DIM1, .n_seg = 2,
		  .seg = { -2, 8 } },
		{ .name = "seg-huge", .state = LOOM_SPLIT_DIM1, .n_seg = 2,
		  .seg = { INT64_MAX, INT64_MAX } },
		{ .name = "gran-neg", .state = LOOM_SPLIT_DIM1,
		  .granularity = -2 },
		{ .name = "gran-huge", .state = LOOM_SPLIT_DIM1,
		  .granularity = INT64_MAX },
		{ .name = "gran-zero", .state = LOOM_SPLIT_DIM1,
		  .granularity = 0 },
		{ .name = "positive", .state = LOOM_SPLIT_DIM1, .ret = 7 },
		{ .name = "silent", .state = LOOM_SPLIT_DIM1,
		  .ret = LOOM_E_UNSUPPORTED },
		{ .name = NULL }
	};
	static const struct {
		const char *name;
		int rc;
		const char *msg;
	} bad[] = {
		{ "state", LOOM_E_INVAL, "unknown state 42" },
		{ "state-neg", LOOM_E_INVAL, "unknown state -1" },
		{ "nseg", LOOM_E_INVAL, "9 segments" },
		{ "nseg-neg", LOOM_E_INVAL, "-1 segments" },
		{ "seg-neg", LOOM_E_INVAL, "negative segment" },
		{ "seg-huge", LOOM_E_INVAL, "more than its dimension" },
		{ "gran-neg", LOOM_E_INVAL, "granularity -2" },
		{ "gran-huge", LOOM_E_INVAL, "not a multiple" },
		{ "positive", LOOM_E_INVAL, "returned 7" },
		{ "silent", LOOM_E_UNSUPPORTED, "refused silent" },
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);

	/* Garbage from the callback is an error naming the tensor, never
	 * an abort. */
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6,
					  bad[i].name), ==, bad[i].rc);
		g_assert_nonnull(strstr(loom_error_message(), bad[i].name));
		g_assert_nonnull(strstr(loom_error_message(), bad[i].msg));
	}
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6, "gran-zero"), ==,
			LOOM_OK);
	/* The dry run asks the callback of weights not yet placed. */
	for (size_t i = 0; i < G_N_ELEMENTS(bad); i++) {
		loom_ctx_t *ctx;
		loom_graph_t *g;
		struct loom_tensor *w, *x;

		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
		w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 6);
		loom_tensor_set_name(w, bad[i].name);
		loom_tensor_set_flags(w, LOOM_TENSOR_WEIGHT);
		x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 1);
		loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
		g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g, loom_mul_mat(ctx, w, x)),
				==, LOOM_OK);
		g_assert_cmpint(loom_meta_check(meta, g), ==, bad[i].rc);
		g_assert_nonnull(strstr(loom_error_message(), bad[i].msg));
		loom_ctx_free(ctx);
	}

	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 7, "sum"), ==,
			LOOM_E_INVAL);
	g_assert_nonnull(strstr(loom_error_message(), "add up"));
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q8_0, 64, 2, "block"), ==,
			LOOM_E_INVAL);
	g_assert_nonnull(strstr(loom_error_message(), "block"));
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6, "gran"), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_F32, 4, 6, "refused"), !=,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q8_0, 128, 2, "ok"), ==,
			LOOM_OK);
}

/* Splits of dimension 0 fall on a type's blocks: a K-quant's are 256
 * values, so 3 super-blocks over 2 even devices are 2 + 1 (the tie goes to
 * the first), and a granularity of 64 cuts them in units of 256. */
static void test_kquant_blocks(void)
{
	static const enum loom_type super[] = {
		LOOM_TYPE_Q3_K, LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_XS,
	};
	static const enum loom_type small[] = {
		LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1,
		LOOM_TYPE_IQ4_NL, LOOM_TYPE_MXFP4,
	};
	static const struct rule rules[] = {
		{ .name = "k", .state = LOOM_SPLIT_DIM0 },
		{ .name = "k64", .state = LOOM_SPLIT_DIM0, .granularity = 64 },
		{ .name = NULL }
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *k;
	size_t sizes[2], row = 144, slack = 1024;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	k = loom_tensor_new_2d(ctx, LOOM_TYPE_Q4_K, 768, 4);
	loom_tensor_set_name(k, "k");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(meta),
					       &buf), ==, LOOM_OK);
	dev_sizes(buf, sizes, 2);
	g_assert_cmpuint(sizes[0], >=, 2 * row * 4);
	g_assert_cmpuint(sizes[0], <=, 2 * row * 4 + slack);
	g_assert_cmpuint(sizes[1], >=, row * 4);
	g_assert_cmpuint(sizes[1], <, 2 * row * 4);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	/* Granularity 64 meets the block in units of 256; a row of 320
	 * values holds no whole number of them. */
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q6_K, 512, 2, "k64"), ==,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q6_K, 768, 2, "k64"), ==,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q4_0, 64, 2, "k64"), ==,
			LOOM_OK);
	g_assert_cmpint(alloc_one(meta, LOOM_TYPE_Q4_0, 320, 2, "k64"), ==,
			LOOM_OK);
	/* Every other type of 256-value blocks, and of 32. */
	for (size_t i = 0; i < G_N_ELEMENTS(super); i++)
		g_assert_cmpint(alloc_one(meta, super[i], 512, 2, "k64"), ==,
				LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(small); i++)
		g_assert_cmpint(alloc_one(meta, small[i], 64, 2, "k64"), ==,
				LOOM_OK);
}

/* A view of an empty split weight is an error, not a division by its
 * empty rows. */
static void test_empty_split_view(void)
{
	static const struct rule rules[] = {
		{ .name = "empty", .state = LOOM_SPLIT_DIM1 },
		{ .name = NULL }
	};
	loom_dev_t *meta = meta_new(2, rules, NULL, false);
	loom_ctx_t *ctx;
	loom_graph_t *g;
	struct loom_tensor *w, *v;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 0, 4);
	loom_tensor_set_name(w, "empty");
	loom_tensor_set_flags(w, LOOM_TENSOR_WEIGHT);
	v = loom_view_2d(ctx, w, 0, 2, w->nb[1], 0);
	g_assert_nonnull(v);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, loom_cont(ctx, v)), ==, LOOM_OK);
	g_assert_cmpint(loom_meta_check(meta, g), ==, LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "empty split tensor"));
	loom_ctx_free(ctx);
}

/* rms_norm of a SPLIT(0) value has no rule: the dry run and compute both
 * say so, naming op, tensor and state. */
static void test_unsupported(void)
{
	loom_dev_t *meta = meta_new(2, mm_rules, NULL, false);
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;
	struct loom_tensor *w, *x, *y;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, K, M);
	loom_tensor_set_name(w, "w1");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(meta),
					       &wbuf), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(gctx, LOOM_TYPE_F32, K, T);
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	y = loom_rms_norm(gctx, loom_mul_mat(gctx, w, x), 1e-5f);
	loom_tensor_set_name(y, "normed");
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);

	g_assert_cmpint(loom_meta_check(meta, g), ==, LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "rms_norm"));
	g_assert_nonnull(strstr(loom_error_message(), "normed"));
	g_assert_nonnull(strstr(loom_error_message(), "SPLIT(0)"));

	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(meta), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "rms_norm"));
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* ---- op rules against one device ---- */

#define OPS_K 12
#define OPS_H 10 /* per segment of the fused weight */
#define OPS_T 5
#define OPS_V 11

static const struct rule ops_rules[] = {
	{ .name = "w1", .state = LOOM_SPLIT_DIM1 },
	{ .name = "w2", .state = LOOM_SPLIT_DIM0 },
	{ .name = "qkv", .state = LOOM_SPLIT_DIM1, .n_seg = 3,
	  .seg = { OPS_H, OPS_H, OPS_H } },
	{ .name = "table", .state = LOOM_SPLIT_DIM0 },
	{ .name = "dst", .state = LOOM_SPLIT_DIM0 },
	{ .name = "xs", .state = LOOM_SPLIT_DIM1 },
	{ .name = "wr", .state = LOOM_SPLIT_DIM1, .granularity = 2 },
	{ .name = NULL }
};

enum { OPS_OUT = 14 };

struct ops_graph {
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	struct loom_tensor *w[10], *in[3], *out[OPS_OUT];
	int n_w;
};

static struct loom_tensor *weight(struct ops_graph *o, enum loom_type type,
				  int64_t ne0, int64_t ne1, const char *name)
{
	struct loom_tensor *t = loom_tensor_new_2d(o->wctx, type, ne0, ne1);

	loom_tensor_set_name(t, name);
	o->w[o->n_w++] = t;
	return t;
}

/* One graph touching the rules of doc/meta.md beyond the decoder stack:
 * broadcast and full-size MIRRORED operands of split values, the linear
 * ops a PARTIAL value passes through, views of segments, get_rows of a
 * split table, argmax of a split, concat, copy into a split destination. */
static void ops_build(struct ops_graph *o, loom_dev_t *dev)
{
	struct loom_tensor *w1, *w2, *qkv, *table, *bias, *gain, *dst, *xs;
	struct loom_tensor *wv, *x, *ids, *y, *z, *p, *f, *q, *k, *r, *e;
	struct loom_tensor *wr, *pos;
	loom_ctx_t *c;

	memset(o, 0, sizeof(*o));
	g_assert_cmpint(loom_ctx_new(0, &o->wctx), ==, LOOM_OK);
	w1 = weight(o, LOOM_TYPE_F32, OPS_K, 9, "w1");
	w2 = weight(o, LOOM_TYPE_F32, 9, 7, "w2");
	qkv = weight(o, LOOM_TYPE_F32, OPS_K, 3 * OPS_H, "qkv");
	table = weight(o, LOOM_TYPE_F32, 13, OPS_V, "table");
	bias = weight(o, LOOM_TYPE_F32, 9, 1, "bias");
	gain = weight(o, LOOM_TYPE_F32, 7, 1, "gain");
	dst = weight(o, LOOM_TYPE_F32, 9, OPS_T, "dst");
	xs = weight(o, LOOM_TYPE_F32, OPS_K, OPS_T, "xs");
	wv = weight(o, LOOM_TYPE_F32, OPS_K, OPS_V, "wv");
	wr = weight(o, LOOM_TYPE_F32, OPS_K, 16, "wr");
	g_assert_cmpint(loom_ctx_alloc_tensors(o->wctx,
					       loom_dev_buffer_type(dev),
					       &o->wbuf), ==, LOOM_OK);
	loom_buffer_set_usage(o->wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	for (int i = 0; i < o->n_w; i++) {
		size_t n = (size_t)loom_tensor_n_elements(o->w[i]);
		float *v = g_new(float, n);

		fill(v, n, 100u + (unsigned)i);
		g_assert_cmpint(loom_tensor_set(o->w[i], v, 0, n * 4), ==,
				LOOM_OK);
		g_free(v);
	}

	g_assert_cmpint(loom_ctx_new(0, &o->gctx), ==, LOOM_OK);
	c = o->gctx;
	x = loom_tensor_new_2d(c, LOOM_TYPE_F32, OPS_K, OPS_T);
	ids = loom_tensor_new_1d(c, LOOM_TYPE_I32, 4);
	loom_tensor_set_name(x, "x");
	loom_tensor_set_name(ids, "ids");
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	loom_tensor_set_flags(ids, LOOM_TENSOR_INPUT);
	pos = loom_tensor_new_1d(c, LOOM_TYPE_I32, OPS_T);
	loom_tensor_set_name(pos, "pos");
	loom_tensor_set_flags(pos, LOOM_TENSOR_INPUT);
	o->in[0] = x;
	o->in[1] = ids;
	o->in[2] = pos;

	/* SPLIT(0) with a broadcast bias, then a full-size MIRRORED gain. */
	y = loom_add(c, loom_mul_mat(c, w1, x), bias);
	y = loom_scale(c, loom_silu(c, y), 0.5f);
	o->out[0] = y;
	/* PARTIAL through linear ops; sum_rows of a PARTIAL; the sync. */
	z = loom_mul_mat(c, w2, y);
	p = loom_sub(c, loom_add(c, z, z), loom_scale(c, z, 0.25f));
	p = loom_div(c, loom_mul(c, p, gain), gain);
	p = loom_mul(c, p, gain);
	o->out[1] = p;
	o->out[2] = loom_sum_rows(c, p);
	o->out[3] = loom_norm(c, loom_cont(c, loom_transpose(c, p)), 1e-5f);
	/* Segments: views of q and k of a fused projection. */
	f = loom_mul_mat(c, qkv, x);
	q = loom_view_2d(c, f, OPS_H, OPS_T, f->nb[1], 0);
	k = loom_view_2d(c, f, OPS_H, OPS_T, f->nb[1], OPS_H * f->nb[0]);
	o->out[4] = loom_cont(c, loom_mul(c, q, k));
	/* get_rows of a table split by its columns' rows. */
	o->out[5] = loom_get_rows(c, table, ids);
	/* A token-split input: SPLIT(1) through mul_mat, argmax, top_k. */
	r = loom_mul_mat(c, wv, xs);
	o->out[6] = loom_argmax(c, r);
	o->out[7] = loom_soft_max(c, r, NULL, 0.7f);
	/* concat of two SPLIT(0) values along dimension 1. */
	o->out[8] = loom_concat(c, y, loom_gelu(c, y), 1);
	/* copy into a split destination; rms_norm of a MIRRORED value. */
	e = loom_copy(c, y, dst);
	o->out[9] = e;
	o->out[10] = loom_rms_norm(c, loom_mul_mat(c, w2, e), 1e-5f);
	o->out[11] = loom_top_k(c, r, 3);
	/* Two overlapping views of a PARTIAL value, each needed whole: the
	 * value is reduced once. */
	o->out[12] = loom_add(c,
			      loom_silu(c, loom_view_2d(c, p, 7, 2, p->nb[1],
							0)),
			      loom_silu(c, loom_view_2d(c, p, 7, 2, p->nb[1],
							p->nb[1])));
	/* rope of a split head dimension (whole rotation pairs): rotating
	 * 12 of 16 values. */
	o->out[13] = loom_rope(c, loom_reshape_3d(c, loom_mul_mat(c, wr, x),
						  16, 1, OPS_T),
			       pos, 12, LOOM_ROPE_NORMAL, 100.0f, 0.9f);
	for (int i = 0; i < OPS_OUT; i++) {
		if (!o->out[i])
			g_error("out%d: %s", i, loom_ctx_error(c));
		loom_tensor_set_name_fmt(o->out[i], "out%d", i);
		loom_tensor_set_flags(o->out[i], LOOM_TENSOR_OUTPUT);
	}
}

static size_t ops_len[OPS_OUT];

/* Runs the graph on dev; returns the outputs as F32 (I32 converted), one
 * after the other (ops_len[i] values each). */
static GArray *ops_run(loom_dev_t *dev)
{
	struct ops_graph o;
	loom_graph_t *g;
	loom_galloc_t *ga;
	loom_backend_t *be;
	GArray *res = g_array_new(FALSE, FALSE, sizeof(float));
	float x[OPS_K * OPS_T];
	int32_t ids[4] = { 3, 0, 10, 3 };
	int32_t pos[OPS_T] = { 0, 5, 17, 40, 2 };

	ops_build(&o, dev);
	g_assert_cmpint(loom_graph_new(o.gctx, &g), ==, LOOM_OK);
	for (int i = 0; i < OPS_OUT; i++)
		g_assert_cmpint(loom_graph_expand(g, o.out[i]), ==, LOOM_OK);
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META &&
	    loom_meta_check(dev, g))
		g_error("check: %s", loom_error_message());
	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(dev), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	fill(x, G_N_ELEMENTS(x), 7);
	g_assert_cmpint(loom_tensor_set(o.in[0], x, 0, sizeof(x)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(o.in[1], ids, 0, sizeof(ids)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_tensor_set(o.in[2], pos, 0, sizeof(pos)), ==,
			LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	if (loom_backend_graph_compute(be, g))
		g_error("compute on %s: %s", loom_dev_name(dev),
			loom_error_message());
	for (int i = 0; i < OPS_OUT; i++) {
		struct loom_tensor *t = o.out[i];
		size_t n = (size_t)loom_tensor_n_elements(t);
		void *v = g_malloc(n * 4);

		if (loom_tensor_get(t, v, 0, n * 4))
			g_error("get %s: %s", t->name, loom_error_message());
		ops_len[i] = n;
		for (size_t j = 0; j < n; j++) {
			float f = t->type == LOOM_TYPE_I32
					  ? (float)((int32_t *)v)[j]
					  : ((float *)v)[j];

			g_array_append_val(res, f);
		}
		g_free(v);
	}
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(o.gctx);
	loom_buffer_free(o.wbuf);
	loom_ctx_free(o.wctx);
	return res;
}

static void test_op_rules(void)
{
	static const float r3[3] = { 0.45f, 0.2f, 0.35f };
	static const float r4[4] = { 1, 0, 2, 1 }; /* a device with nothing */
	GArray *ref = ops_run(cpu[0]);

	for (int n = 2; n <= 4; n++) {
		const float *ratios = n == 3 ? r3 : n == 4 ? r4 : NULL;

		for (int fb = 0; fb < 2; fb++) {
			GArray *got = ops_run(meta_new(n, ops_rules, ratios,
						       fb));

			size_t at = 0;

			g_assert_cmpuint(got->len, ==, ref->len);
			for (int i = 0; i < OPS_OUT; i++) {
				g_test_message("n %d fallback %d: out%d", n, fb,
					       i);
				assert_close((float *)ref->data + at,
					     (float *)got->data + at,
					     ops_len[i]);
				at += ops_len[i];
			}
			g_array_free(got, TRUE);
		}
	}
	g_array_free(ref, TRUE);
}

/* ---- entry points ---- */

static void test_split_buffer_type(void)
{
	loom_split_buffer_type_fn fn = (loom_split_buffer_type_fn)
		loom_reg_proc_address(loom_reg_by_name("meta"),
				      LOOM_PROC_SPLIT_BUFFER_TYPE);
	static const float r[2] = { 1, 3 };
	loom_buffer_type_t *buft;
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *w;
	float in[8 * 12], out[8 * 12];
	size_t sizes[2];

	g_assert_nonnull(fn);
	g_assert_cmpint(fn(cpu, 2, r, &buft), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 12);
	loom_tensor_set_name(w, "rows");
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, buft, &buf), ==, LOOM_OK);
	dev_sizes(buf, sizes, 2);
	g_assert_cmpuint(sizes[0], >=, 3 * 8 * 4);
	g_assert_cmpuint(sizes[0], <, 3 * 8 * 4 + 64);
	g_assert_cmpuint(sizes[1], >=, 9 * 8 * 4);
	g_assert_cmpuint(sizes[1], <, 9 * 8 * 4 + 64);
	fill(in, G_N_ELEMENTS(in), 31);
	g_assert_cmpint(loom_tensor_set(w, in, 0, sizeof(in)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(w, out, 0, sizeof(out)), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* The same device twice is a valid meta device (the generic allreduce
 * serves it). */
static void test_same_device_twice(void)
{
	loom_dev_t *twice[2] = { cpu[1], cpu[1] };
	loom_dev_t *meta;
	float w1[K * M], w2[M * N], x[K * T];
	struct mm_result ref, got;

	g_assert_cmpint(loom_meta_dev_new(twice, 2, table_split,
					  (void *)mm_rules, NULL, &meta), ==,
			LOOM_OK);
	g_assert_cmpstr(loom_dev_description(meta), ==, "meta(cpu1,cpu1)");
	fill(w1, G_N_ELEMENTS(w1), 41);
	fill(w2, G_N_ELEMENTS(w2), 42);
	fill(x, G_N_ELEMENTS(x), 43);
	mm_reference(w1, w2, x, &ref);
	mm_run(meta, w1, w2, x, &got);
	assert_close(ref.s, got.s, N * T);
}

/* The default policy on Llama-style names and shapes. */
static void test_default_policy(void)
{
	/* head_dim 16, 8 query heads in 2 GQA groups of 4 */
	struct loom_meta_model m = { .head_dim = 16, .n_head = 8,
				     .n_head_kv = 2 };
	static const struct {
		const char *name;
		int64_t ne0, ne1, ne2;
		enum loom_split_state state;
		int64_t granularity;
		int n_seg;
	} cases[] = {
		{ "blk.0.attn_q.weight", 64, 128, 1, LOOM_SPLIT_DIM1, 64, 0 },
		{ "blk.0.attn_k.weight", 64, 32, 1, LOOM_SPLIT_DIM1, 16, 0 },
		{ "blk.0.attn_v.weight", 64, 32, 1, LOOM_SPLIT_DIM1, 16, 0 },
		{ "blk.0.attn_qkv.weight", 64, 192, 1, LOOM_SPLIT_DIM1, 16,
		  3 },
		{ "blk.0.attn_output.weight", 128, 64, 1, LOOM_SPLIT_DIM0, 64,
		  0 },
		{ "blk.0.attn_norm.weight", 64, 1, 1, LOOM_SPLIT_MIRRORED, 1,
		  0 },
		{ "blk.0.attn_q_norm.weight", 16, 1, 1, LOOM_SPLIT_MIRRORED, 1,
		  0 },
		{ "blk.0.ffn_gate.weight", 64, 96, 1, LOOM_SPLIT_DIM1, 32, 0 },
		{ "blk.0.ffn_up.weight", 64, 100, 1, LOOM_SPLIT_DIM1, 1, 0 },
		{ "blk.0.ffn_down.weight", 96, 64, 1, LOOM_SPLIT_DIM0, 32, 0 },
		{ "blk.0.ffn_gate_inp.weight", 64, 4, 1, LOOM_SPLIT_MIRRORED, 1,
		  0 },
		{ "blk.0.ffn_up_exps.weight", 64, 96, 4, LOOM_SPLIT_DIM1, 32,
		  0 },
		{ "blk.0.ffn_down_exps.weight", 96, 64, 4, LOOM_SPLIT_DIM0, 32,
		  0 },
		{ "cache_k.0", 16, 64, 2, LOOM_SPLIT_DIM2, 1, 0 },
		{ "cache_v.0", 32, 64, 1, LOOM_SPLIT_DIM0, 16, 0 },
		{ "output.weight", 64, 1000, 1, LOOM_SPLIT_DIM1, 1, 0 },
		{ "output_norm.weight", 64, 1, 1, LOOM_SPLIT_MIRRORED, 1, 0 },
		{ "token_embd.weight", 64, 1000, 1, LOOM_SPLIT_MIRRORED, 1, 0 },
	};
	loom_ctx_t *ctx;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct loom_tensor *t = loom_tensor_new_3d(
			ctx, LOOM_TYPE_F32, cases[i].ne0, cases[i].ne1,
			cases[i].ne2);
		struct loom_split sp;

		loom_tensor_set_name(t, cases[i].name);
		g_assert_cmpint(loom_meta_split_default(t, &sp, &m), ==,
				LOOM_OK);
		g_test_message("%s", cases[i].name);
		g_assert_cmpint(sp.state, ==, cases[i].state);
		g_assert_cmpint(sp.granularity, ==, cases[i].granularity);
		g_assert_cmpint(sp.n_segments, ==, cases[i].n_seg);
	}
	loom_ctx_free(ctx);
}

static void find_cpus(void)
{
	for (int j = 0; j < 4; j++) {
		char name[8];

		g_snprintf(name, sizeof(name), "cpu%d", j);
		cpu[j] = loom_dev_by_name(name);
		g_assert_nonnull(cpu[j]);
	}
}

/* ---- plans and the lifetime of results ---- */

#define EV_GRAPHS 6 /* more than the plans a meta backend keeps */

#define EV_MAX_TOK 16

/* y = (g + 1) * (w1 x): graph g of the eviction tests, of n_tok tokens. */
static void ev_reference(const float *w1, const float *x, int g, int n_tok,
			 float *y)
{
	for (int t = 0; t < n_tok; t++)
		for (int i = 0; i < M; i++) {
			double acc = 0;

			for (int k = 0; k < K; k++)
				acc += (double)w1[i * K + k] * x[t * K + k];
			y[t * M + i] = (float)((g + 1) * acc);
		}
}

struct ev_graph {
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_galloc_t *ga; /* its own, or shared when given */
	bool own_ga;
	int n_tok;
	struct loom_tensor *x, *y;
};

/* Builds graph i of n_tok tokens and places it with ga, or with a graph
 * allocator of its own when ga is NULL. */
static void ev_build(loom_dev_t *dev, struct loom_tensor *w, int i, int n_tok,
		     loom_galloc_t *ga, struct ev_graph *e)
{
	e->n_tok = n_tok;
	e->ga = ga;
	e->own_ga = !ga;
	g_assert_cmpint(loom_ctx_new(0, &e->ctx), ==, LOOM_OK);
	e->x = loom_tensor_new_2d(e->ctx, LOOM_TYPE_F32, K, n_tok);
	loom_tensor_set_name(e->x, "x");
	loom_tensor_set_flags(e->x, LOOM_TENSOR_INPUT);
	e->y = loom_scale(e->ctx, loom_mul_mat(e->ctx, w, e->x),
			  (float)(i + 1));
	g_assert_nonnull(e->y);
	loom_tensor_set_name_fmt(e->y, "y%d", i);
	loom_tensor_set_flags(e->y, LOOM_TENSOR_OUTPUT);
	g_assert_cmpint(loom_graph_new(e->ctx, &e->g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(e->g, e->y), ==, LOOM_OK);
	if (e->own_ga)
		g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(dev),
						&e->ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(e->ga, e->g), ==, LOOM_OK);
}

static void ev_free(struct ev_graph *e)
{
	if (e->own_ga)
		loom_galloc_free(e->ga);
	loom_ctx_free(e->ctx);
}

/* Computes e on be from x and checks its result against graph i's. */
static void ev_compute_check(loom_backend_t *be, struct ev_graph *e, int i,
			     const float *w1, const float *x)
{
	float ref[M * EV_MAX_TOK], got[M * EV_MAX_TOK];
	size_t n_out = (size_t)M * (size_t)e->n_tok;

	g_assert_cmpint(loom_tensor_set(e->x, x, 0,
					sizeof(float) * K * (size_t)e->n_tok),
			==, LOOM_OK);
	if (loom_backend_graph_compute(be, e->g))
		g_error("compute: %s", loom_error_message());
	g_assert_cmpint(loom_tensor_get(e->y, got, 0, sizeof(float) * n_out),
			==, LOOM_OK);
	ev_reference(w1, x, i, e->n_tok, ref);
	assert_close(ref, got, n_out);
}

/* A node's results live in compute memory the next graph overwrites, and
 * in records its plan owns: after other graphs ran (more than the plans
 * kept), reading the first graph's output is an error that says so, not
 * a read of freed records or of another graph's numbers; computing it
 * again makes it readable again. */
static void test_plan_eviction(void)
{
	loom_dev_t *meta = meta_new(2, mm_rules, NULL, false);
	float w1[K * M], x[K * T], got[M * T];
	struct ev_graph e[EV_GRAPHS];
	loom_ctx_t *wctx;
	loom_buffer_t *wbuf;
	loom_backend_t *be;
	struct loom_tensor *w;

	fill(w1, G_N_ELEMENTS(w1), 41);
	fill(x, G_N_ELEMENTS(x), 42);
	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, K, M);
	loom_tensor_set_name(w, "w1");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(meta),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_tensor_set(w, w1, 0, sizeof(w1)), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);

	for (int i = 0; i < EV_GRAPHS; i++) {
		ev_build(meta, w, i, T, NULL, &e[i]);
		ev_compute_check(be, &e[i], i, w1, x);
	}
	/* y0's plan was dropped; y4's is cached, but y5 ran after it. */
	g_assert_cmpint(loom_tensor_get(e[0].y, got, 0, sizeof(got)), ==,
			LOOM_E_STATE);
	g_assert_nonnull(strstr(loom_error_message(), "y0 has no data on the "
				"meta device any more"));
	g_assert_cmpint(loom_tensor_get(e[4].y, got, 0, sizeof(got)), ==,
			LOOM_E_STATE);
	g_assert_nonnull(strstr(loom_error_message(), "y4 has no data"));
	/* Computed again, both read right, each until the other runs. */
	ev_compute_check(be, &e[0], 0, w1, x);
	ev_compute_check(be, &e[4], 4, w1, x);
	g_assert_cmpint(loom_tensor_get(e[0].y, got, 0, sizeof(got)), ==,
			LOOM_E_STATE);

	/* Freeing the backend drops every plan: nothing stays readable. */
	loom_backend_free(be);
	g_assert_cmpint(loom_tensor_get(e[4].y, got, 0, sizeof(got)), ==,
			LOOM_E_STATE);
	for (int i = 0; i < EV_GRAPHS; i++)
		ev_free(&e[i]);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* A cached plan holds records of its leaves' buffers: when a larger graph
 * made the shared compute buffer grow and the graph is placed again in
 * the new one, the plan is made again instead of reading the records
 * that went with the old buffer. */
static void test_plan_leaves_replaced(void)
{
	loom_dev_t *meta = meta_new(2, mm_rules, NULL, false);
	float w1[K * M], x[K * EV_MAX_TOK];
	struct ev_graph a, b;
	loom_ctx_t *wctx;
	loom_buffer_t *wbuf;
	loom_backend_t *be;
	loom_galloc_t *ga;
	struct loom_tensor *w;

	fill(w1, G_N_ELEMENTS(w1), 43);
	fill(x, G_N_ELEMENTS(x), 44);
	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, K, M);
	loom_tensor_set_name(w, "w1");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(meta),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_tensor_set(w, w1, 0, sizeof(w1)), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(meta), &ga), ==,
			LOOM_OK);

	ev_build(meta, w, 2, 1, ga, &a);
	ev_compute_check(be, &a, 2, w1, x);
	ev_build(meta, w, 3, EV_MAX_TOK, ga, &b);
	ev_compute_check(be, &b, 3, w1, x);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, a.g), ==, LOOM_OK);
	fill(x, G_N_ELEMENTS(x), 45);
	ev_compute_check(be, &a, 2, w1, x);

	loom_backend_free(be);
	ev_free(&a);
	ev_free(&b);
	loom_galloc_free(ga);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* The dry run is the planning walk itself: what only building the
 * per-device graphs finds (here a mirrored Q8_0 weight that a split input
 * would cut off its block size) fails loom_meta_check with the message
 * compute gives. */
static void test_check_is_planning(void)
{
	static const struct rule rules[] = {
		{ .name = "xs", .state = LOOM_SPLIT_DIM0 },
		{ .name = NULL }
	};
	loom_dev_t *meta = meta_new(3, rules, NULL, false);
	loom_ctx_t *wctx, *gctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	loom_backend_t *be;
	struct loom_tensor *w, *x, *y;
	char *msg;

	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_Q8_0, 64, 4);
	loom_tensor_set_name(w, "wq");
	x = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, 64, 2);
	loom_tensor_set_name(x, "xs");
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(meta),
					       &wbuf), ==, LOOM_OK);
	loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_ctx_new(0, &gctx), ==, LOOM_OK);
	y = loom_mul_mat(gctx, w, x);
	g_assert_nonnull(y);
	loom_tensor_set_name(y, "y");
	g_assert_cmpint(loom_graph_new(gctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);

	g_assert_cmpint(loom_meta_check(meta, g), ==, LOOM_E_INVAL);
	msg = g_strdup(loom_error_message());
	g_assert_nonnull(strstr(msg, "slice of wq along dimension 0 is off "
				"its block size"));

	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(meta), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(meta, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==, msg);
	g_free(msg);
	loom_backend_free(be);
	loom_galloc_free(ga);
	loom_ctx_free(gctx);
	loom_buffer_free(wbuf);
	loom_ctx_free(wctx);
}

/* Unloading forgets every meta device; loading again composes anew, here
 * from a list that names one partition twice. */
static void test_reload(void)
{
	loom_dev_t *meta;

	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	g_setenv("LOOM_META_DEVICES", "cpu2,cpu2", TRUE);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	find_cpus();
	meta = loom_dev_by_type(LOOM_DEV_TYPE_META);
	g_assert_nonnull(meta);
	g_assert_cmpstr(loom_dev_name(meta), ==, "meta0");
	g_assert_cmpstr(loom_dev_description(meta), ==, "meta(cpu2,cpu2)");
	g_assert_cmpuint(loom_reg_dev_count(loom_reg_by_name("meta")), ==, 1);
	/* A name that is no device composes nothing (and says so in the
	 * log). */
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	g_setenv("LOOM_META_DEVICES", "cpu0,nosuch0", TRUE);
	loom_log_set_level(LOOM_LOG_NONE);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	loom_log_set_level(LOOM_LOG_WARN);
	find_cpus();
	g_assert_null(loom_dev_by_type(LOOM_DEV_TYPE_META));
}

int main(int argc, char **argv)
{
	const char *path = g_getenv("LOOM_TEST_PLUGIN_PATH");
	loom_dev_t *dev = NULL;
	int ret;

	g_test_init(&argc, &argv, NULL);

	/* Without the meta plugin: a clear LOOM_E_NOT_FOUND (no plugin that
	 * composes devices). */
	g_assert_cmpint(loom_meta_dev_new(cpu, 2, NULL, NULL, NULL, &dev), ==,
			LOOM_E_NOT_FOUND);
	g_assert_nonnull(strstr(loom_error_message(), "composes devices"));
	g_assert_cmpint(loom_meta_check(NULL, NULL), ==, LOOM_E_NOT_FOUND);

	if (path)
		g_setenv("LOOM_PLUGIN_PATH", path, TRUE);
	g_setenv("LOOM_CPU_DEVICES", "4", TRUE);
	g_setenv("LOOM_META_DEVICES", "cpu0,cpu1", TRUE);
	g_setenv("LOOM_BACKENDS", "cpu,meta", TRUE);
	if (loom_load_all() || !loom_reg_by_name("meta") ||
	    !loom_dev_by_name("cpu3")) {
		g_test_skip("no cpu and meta plugins with 4 partitions");
		return g_test_run();
	}
	find_cpus();

	g_test_add_func("/meta/default-policy", test_default_policy);
	g_test_add_func("/meta/compose", test_compose);
	g_test_add_func("/meta/dedup", test_dedup);
	g_test_add_func("/meta/not-meta", test_not_meta);
	g_test_add_func("/meta/world-refused", test_world_refused);
	g_test_add_func("/meta/largest-remainder", test_largest_remainder);
	g_test_add_func("/meta/set-get", test_set_get);
	g_test_add_func("/meta/memset", test_memset);
	g_test_add_func("/meta/mul-mat", test_mul_mat);
	g_test_add_func("/meta/bf16-reduce", test_bf16_reduce);
	g_test_add_func("/meta/quant-mul-mat", test_quant_mul_mat);
	g_test_add_func("/meta/op-rules", test_op_rules);
	g_test_add_func("/meta/memory", test_memory);
	g_test_add_func("/meta/kquant-blocks", test_kquant_blocks);
	g_test_add_func("/meta/compute-memory", test_compute_memory);
	g_test_add_func("/meta/bad-callbacks", test_bad_callbacks);
	g_test_add_func("/meta/unsupported", test_unsupported);
	g_test_add_func("/meta/empty-split-view", test_empty_split_view);
	g_test_add_func("/meta/split-buffer-type", test_split_buffer_type);
	g_test_add_func("/meta/same-device-twice", test_same_device_twice);
	g_test_add_func("/meta/plan-eviction", test_plan_eviction);
	g_test_add_func("/meta/plan-leaves-replaced",
			test_plan_leaves_replaced);
	g_test_add_func("/meta/check-is-planning", test_check_is_planning);
	g_test_add_func("/meta/reload", test_reload);
	ret = g_test_run();
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	return ret;
}
