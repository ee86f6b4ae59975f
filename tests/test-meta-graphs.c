/* SPDX-License-Identifier: MIT */
/* test-meta-graphs.c - part of test-meta: op rules against one device,
 * plans and the lifetime of results, checking as planning, and
 * reloading. */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom-plugin.h>

#include "meta-cases.h"
#include "meta-util.h"

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

void test_op_rules(void)
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
void test_plan_eviction(void)
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
void test_plan_leaves_replaced(void)
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
void test_check_is_planning(void)
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
void test_reload(void)
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
