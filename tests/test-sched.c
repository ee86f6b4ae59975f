/* SPDX-License-Identifier: MIT */
/* test-sched.c - the scheduler: a decoder-like graph over a two-op
 * accelerator plugin (acme: add and mul_mat only, memory the CPU cannot
 * address) and the CPU, matching the CPU alone; whole decoder layers of
 * the example model over acme and the CPU, over two CPU partitions and
 * over a meta device and the CPU, matching the CPU alone; an input read
 * by ten nodes (and ten pieces) on another device copied once; copies
 * made while the previous piece runs; supports_op asked once per node;
 * plans reused for graphs of one shape; a graph nothing runs; and the
 * caller's mistakes.
 */
#include "test-util.h"

#include <glib.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "../model/decoder.h"

/* A counter of plugin reg ("acme" or "acmes"): "acme_n_compute",
 * "acme_n_supports", "acme_n_queued". */
static int plugin_count(const char *reg, const char *name)
{
	int (*f)(void) = NULL;

	*(void **)&f = loom_reg_proc_address(loom_reg_by_name(reg), name);
	g_assert_nonnull(f);
	return f();
}

static int acme_count(const char *name)
{
	return plugin_count("acme", name);
}

enum { K = 64, T = 5, V = 40, H = 48, O = 32 };

/* Weights of the little model: emb and w2 in one device's memory, w1
 * and b1 in another's (or the same). */
struct model {
	loom_ctx_t *ctx[2];
	loom_buffer_t *buf[2];
	struct loom_tensor *emb, *w1, *b1, *w2;
};

static void model_new(struct model *m, loom_dev_t *dev_w2, loom_dev_t *dev_w1)
{
	struct loom_test_rng rng;

	memset(m, 0, sizeof(*m));
	for (int i = 0; i < 2; i++)
		g_assert_cmpint(loom_ctx_new(0, &m->ctx[i]), ==, LOOM_OK);
	m->emb = loom_tensor_new_2d(m->ctx[0], LOOM_TYPE_F32, K, V);
	m->w2 = loom_tensor_new_2d(m->ctx[0], LOOM_TYPE_F32, H, O);
	m->w1 = loom_tensor_new_2d(m->ctx[1], LOOM_TYPE_F32, K, H);
	m->b1 = loom_tensor_new_1d(m->ctx[1], LOOM_TYPE_F32, H);
	loom_tensor_set_name(m->emb, "token_embd.weight");
	loom_tensor_set_name(m->w1, "blk.0.w1");
	loom_tensor_set_name(m->b1, "blk.0.b1");
	loom_tensor_set_name(m->w2, "blk.1.w2");
	g_assert_cmpint(loom_ctx_alloc_tensors(m->ctx[0],
					       loom_dev_buffer_type(dev_w2),
					       &m->buf[0]), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(m->ctx[1],
					       loom_dev_buffer_type(dev_w1),
					       &m->buf[1]), ==, LOOM_OK);
	for (int i = 0; i < 2; i++)
		loom_buffer_set_usage(m->buf[i], LOOM_BUFFER_USAGE_WEIGHTS);
	loom_test_rng_seed(&rng, 17);
	g_assert_cmpint(loom_test_fill_uniform(m->emb, &rng, -1, 1), ==, 0);
	g_assert_cmpint(loom_test_fill_uniform(m->w1, &rng, -1, 1), ==, 0);
	g_assert_cmpint(loom_test_fill_uniform(m->b1, &rng, -1, 1), ==, 0);
	g_assert_cmpint(loom_test_fill_uniform(m->w2, &rng, -1, 1), ==, 0);
}

static void model_free(struct model *m)
{
	for (int i = 0; i < 2; i++) {
		loom_buffer_free(m->buf[i]);
		loom_ctx_free(m->ctx[i]);
	}
}

/* The named nodes of the graph. */
struct net {
	loom_ctx_t *ctx;
	loom_graph_t *g;
	struct loom_tensor *ids, *rows, *norm, *mm1, *add1, *act, *mm2, *sum,
		*out;
};

/* emb[ids] -> rms_norm -> w1 x + b1 -> silu -> w2 x -> (x + x) ->
 * soft_max: acme runs what it can of it, the CPU the rest. */
static void net_new(struct net *n, struct model *m)
{
	memset(n, 0, sizeof(*n));
	g_assert_cmpint(loom_ctx_new(0, &n->ctx), ==, LOOM_OK);
	n->ids = loom_tensor_new_1d(n->ctx, LOOM_TYPE_I32, T);
	loom_tensor_set_flags(n->ids, LOOM_TENSOR_INPUT);
	n->rows = loom_get_rows(n->ctx, m->emb, n->ids);
	n->norm = loom_rms_norm(n->ctx, n->rows, 1e-5f);
	n->mm1 = loom_mul_mat(n->ctx, m->w1, n->norm);
	n->add1 = loom_add(n->ctx, n->mm1, m->b1);
	n->act = loom_silu(n->ctx, n->add1);
	n->mm2 = loom_mul_mat(n->ctx, m->w2, n->act);
	n->sum = loom_add(n->ctx, n->mm2, n->mm2);
	n->out = loom_soft_max(n->ctx, n->sum, NULL, 0.5f);
	g_assert_nonnull(n->out);
	loom_tensor_set_flags(n->out, LOOM_TENSOR_OUTPUT);
	loom_tensor_set_name(n->rows, "rows");
	loom_tensor_set_name(n->mm1, "mm1");
	loom_tensor_set_name(n->add1, "add1");
	loom_tensor_set_name(n->act, "act");
	loom_tensor_set_name(n->mm2, "mm2");
	loom_tensor_set_name(n->sum, "sum");
	g_assert_cmpint(loom_graph_new(n->ctx, &n->g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(n->g, n->out), ==, LOOM_OK);
}

static void set_ids(struct loom_tensor *ids)
{
	int32_t v[T] = { 3, 0, 39, 7, 3 };

	g_assert_cmpint(loom_tensor_set(ids, v, 0, sizeof(v)), ==, LOOM_OK);
}

/* The output of the net on cpu0 alone, weights on cpu0, as doubles. */
static double *reference(void)
{
	loom_dev_t *cpu = loom_dev_by_name("cpu0");
	loom_backend_t *be;
	loom_galloc_t *ga;
	struct model m;
	struct net n;
	double *out;
	char *err = NULL;

	model_new(&m, cpu, cpu);
	net_new(&n, &m);
	g_assert_cmpint(loom_dev_init_backend(cpu, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(loom_dev_buffer_type(cpu), &ga), ==,
			LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, n.g), ==, LOOM_OK);
	set_ids(n.ids);
	g_assert_cmpint(loom_backend_graph_compute(be, n.g), ==, LOOM_OK);
	out = loom_test_get_doubles(n.out, &err);
	g_assert_nonnull(out);
	loom_galloc_free(ga);
	loom_backend_free(be);
	loom_ctx_free(n.ctx);
	model_free(&m);
	return out;
}

static const char *be_of(loom_sched_t *s, const struct loom_tensor *t)
{
	loom_backend_t *be = loom_sched_node_backend(s, t);

	return be ? loom_dev_name(loom_backend_device(be)) : "(none)";
}

static void test_offload(void)
{
	loom_dev_t *acme = loom_dev_by_name("acme0");
	loom_dev_t *cpu = loom_dev_by_name("cpu0");
	loom_backend_t *be[2];
	loom_sched_t *s;
	struct model m;
	struct net n;
	double *ref = reference(), *got, nmse;
	char *err = NULL;

	g_assert_nonnull(acme);
	model_new(&m, cpu, acme);
	net_new(&n, &m);
	g_assert_cmpint(loom_dev_init_backend(acme, NULL, &be[0]), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(cpu, NULL, &be[1]), ==, 0);
	g_assert_cmpint(loom_sched_new(be, 2, &s), ==, LOOM_OK);
	g_assert_cmpint(loom_sched_alloc_graph(s, n.g), ==, LOOM_OK);
	set_ids(n.ids);
	for (int rep = 0; rep < 2; rep++) {
		g_assert_cmpint(loom_sched_compute(s, n.g), ==, LOOM_OK);
		got = loom_test_get_doubles(n.out, &err);
		g_assert_nonnull(got);
		nmse = loom_test_nmse(ref, got, O * T);
		g_test_message("acme + cpu against cpu alone: nmse %g", nmse);
		g_assert_cmpfloat(nmse, <=, 1e-10);
		g_free(got);
	}
	/* Where each node ran, and why it could not be elsewhere. */
	g_assert_cmpstr(be_of(s, n.rows), ==, "cpu0");  /* acme lacks it */
	g_assert_cmpstr(be_of(s, n.mm1), ==, "acme0");  /* w1 is there */
	g_assert_cmpstr(be_of(s, n.add1), ==, "acme0"); /* b1 is there */
	g_assert_cmpstr(be_of(s, n.act), ==, "cpu0");   /* acme lacks it */
	g_assert_cmpstr(be_of(s, n.mm2), ==, "cpu0");   /* w2 is there */
	g_assert_cmpstr(be_of(s, n.sum), ==, "cpu0");   /* reads mm2 there */
	g_assert_cmpuint(loom_sched_n_pieces(s), ==, 3);
	/* norm into acme, add1 back to the CPU. */
	g_assert_cmpuint(loom_sched_n_copies(s), ==, 2);
	g_assert_cmpuint(loom_sched_n_plans(s), ==, 1);
	g_assert_cmpuint(loom_sched_buffer_size(s, 0), >, 0);
	g_assert_cmpuint(loom_sched_buffer_size(s, 1), >, 0);
	/* The caller's intermediate results are readable where they ran. */
	got = loom_test_get_doubles(n.mm1, &err);
	g_assert_nonnull(got);
	g_free(got);

	loom_sched_free(s);
	loom_backend_free(be[1]);
	loom_backend_free(be[0]);
	loom_ctx_free(n.ctx);
	model_free(&m);
	g_free(ref);
}

/* x made on the CPU and read by ten adds on acme is copied once. */
static void test_copied_once(void)
{
	enum { N = 10, E = 96 };
	loom_dev_t *acme = loom_dev_by_name("acme0");
	loom_dev_t *cpu = loom_dev_by_name("cpu0");
	loom_dev_t *devs[2] = { acme, cpu };
	double *res[2], nmse;
	char *err = NULL;

	for (int pass = 0; pass < 2; pass++) {
		/* Pass 0: acme and the CPU; pass 1: the CPU alone. */
		loom_dev_t *wdev = devs[pass];
		struct loom_tensor *in, *x, *acc = NULL, *w[N];
		loom_backend_t *be[2];
		loom_buffer_t *wbuf;
		loom_ctx_t *wctx, *ctx;
		loom_graph_t *g;
		loom_sched_t *s;
		struct loom_test_rng rng;

		loom_test_rng_seed(&rng, 5);
		g_assert_cmpint(loom_ctx_new(0, &wctx), ==, 0);
		for (int i = 0; i < N; i++)
			w[i] = loom_tensor_new_1d(wctx, LOOM_TYPE_F32, E);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					wctx, loom_dev_buffer_type(wdev),
					&wbuf), ==, 0);
		loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
		for (int i = 0; i < N; i++)
			g_assert_cmpint(loom_test_fill_uniform(w[i], &rng, -1,
							       1), ==, 0);
		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, 0);
		in = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, E);
		x = loom_silu(ctx, in);
		for (int i = 0; i < N; i++) {
			struct loom_tensor *y = loom_add(ctx, w[i], x);

			acc = acc ? loom_add(ctx, acc, y) : y;
		}
		g_assert_cmpint(loom_graph_new(ctx, &g), ==, 0);
		g_assert_cmpint(loom_graph_expand(g, acc), ==, 0);
		g_assert_cmpint(loom_dev_init_backend(acme, NULL, &be[0]), ==,
				0);
		g_assert_cmpint(loom_dev_init_backend(cpu, NULL, &be[1]), ==,
				0);
		g_assert_cmpint(loom_sched_new(pass ? be + 1 : be,
					       pass ? 1 : 2, &s), ==, 0);
		g_assert_cmpint(loom_sched_alloc_graph(s, g), ==, 0);
		g_assert_cmpint(loom_test_fill_uniform(in, &rng, -1, 1), ==, 0);
		g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_OK);
		if (!pass) {
			g_assert_cmpstr(be_of(s, x), ==, "cpu0");
			g_assert_cmpstr(be_of(s, acc), ==, "acme0");
			g_assert_cmpuint(loom_sched_n_copies(s), ==, 1);
		} else {
			g_assert_cmpuint(loom_sched_n_copies(s), ==, 0);
		}
		res[pass] = loom_test_get_doubles(acc, &err);
		g_assert_nonnull(res[pass]);
		loom_sched_free(s);
		loom_backend_free(be[1]);
		loom_backend_free(be[0]);
		loom_ctx_free(ctx);
		loom_buffer_free(wbuf);
		loom_ctx_free(wctx);
	}
	nmse = loom_test_nmse(res[1], res[0], E);
	g_assert_cmpfloat(nmse, <=, 1e-12);
	g_free(res[1]);
	g_free(res[0]);
}

/* Ten pieces on acme read x, made on the CPU: it is copied to acme once
 * per compute, not once per piece. */
static void test_copied_once_pieces(void)
{
	enum { N = 10, E = 64 };
	loom_dev_t *acme = loom_dev_by_name("acme0");
	loom_dev_t *cpu = loom_dev_by_name("cpu0");
	double *res[2], nmse;
	char *err = NULL;

	for (int pass = 0; pass < 2; pass++) {
		loom_dev_t *wdev = pass ? cpu : acme;
		struct loom_tensor *in, *x, *acc = NULL, *w[N];
		struct loom_sched_stats st = { .size = sizeof(st) };
		loom_backend_t *be[2];
		loom_buffer_t *wbuf;
		loom_ctx_t *wctx, *ctx;
		loom_graph_t *g;
		loom_sched_t *s;
		struct loom_test_rng rng;

		loom_test_rng_seed(&rng, 9);
		g_assert_cmpint(loom_ctx_new(0, &wctx), ==, 0);
		for (int i = 0; i < N; i++)
			w[i] = loom_tensor_new_1d(wctx, LOOM_TYPE_F32, E);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					wctx, loom_dev_buffer_type(wdev),
					&wbuf), ==, 0);
		loom_buffer_set_usage(wbuf, LOOM_BUFFER_USAGE_WEIGHTS);
		for (int i = 0; i < N; i++)
			g_assert_cmpint(loom_test_fill_uniform(w[i], &rng, -1,
							       1), ==, 0);
		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, 0);
		in = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, E);
		loom_tensor_set_flags(in, LOOM_TENSOR_INPUT);
		x = loom_silu(ctx, in);
		for (int i = 0; i < N; i++) {
			/* add on acme (its weight), silu back on the CPU */
			struct loom_tensor *z = loom_silu(ctx,
							  loom_add(ctx, w[i],
								   x));

			acc = acc ? loom_add(ctx, acc, z) : z;
		}
		g_assert_cmpint(loom_graph_new(ctx, &g), ==, 0);
		g_assert_cmpint(loom_graph_expand(g, acc), ==, 0);
		g_assert_cmpint(loom_dev_init_backend(acme, NULL, &be[0]), ==,
				0);
		g_assert_cmpint(loom_dev_init_backend(cpu, NULL, &be[1]), ==,
				0);
		g_assert_cmpint(loom_sched_new(pass ? be + 1 : be,
					       pass ? 1 : 2, &s), ==, 0);
		g_assert_cmpint(loom_sched_alloc_graph(s, g), ==, 0);
		g_assert_cmpint(loom_test_fill_uniform(in, &rng, -1, 1), ==, 0);
		g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_OK);
		g_assert_cmpint(loom_sched_get_stats(s, &st), ==, LOOM_OK);
		if (!pass) {
			/* cpu, then (acme, cpu) ten times. */
			g_assert_cmpuint(loom_sched_n_pieces(s), ==, 2 * N + 1);
			/* x to acme once; each add's result to the CPU. */
			g_assert_cmpuint(loom_sched_n_copies(s), ==, N + 1);
			g_assert_cmpuint(st.copy_bytes, ==,
					 (N + 1) * E * sizeof(float));
			g_assert_cmpstr(be_of(s, x), ==, "cpu0");
			g_assert_cmpstr(be_of(s, acc), ==, "cpu0");
		} else {
			g_assert_cmpuint(loom_sched_n_pieces(s), ==, 1);
			g_assert_cmpuint(loom_sched_n_copies(s), ==, 0);
		}
		res[pass] = loom_test_get_doubles(acc, &err);
		g_assert_nonnull(res[pass]);
		loom_sched_free(s);
		loom_backend_free(be[1]);
		loom_backend_free(be[0]);
		loom_ctx_free(ctx);
		loom_buffer_free(wbuf);
		loom_ctx_free(wctx);
	}
	nmse = loom_test_nmse(res[1], res[0], E);
	g_assert_cmpfloat(nmse, <=, 1e-12);
	g_free(res[1]);
	g_free(res[0]);
}

/* supports_op is asked once per node while planning, never while
 * computing; a graph built again the same way in another context reuses
 * the plan (no new supports_op question), another shape gets its own,
 * and going back finds the first plan again. */
static void test_plan_reuse(void)
{
	loom_dev_t *acme = loom_dev_by_name("acme0");
	loom_dev_t *cpu = loom_dev_by_name("cpu0");
	struct loom_sched_stats st = { .size = sizeof(st) };
	loom_backend_t *be[2];
	loom_sched_t *s;
	struct model m;
	struct net n[2];
	double *ref = reference(), *got;
	char *err = NULL;
	int asked;

	model_new(&m, cpu, acme);
	g_assert_cmpint(loom_dev_init_backend(acme, NULL, &be[0]), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(cpu, NULL, &be[1]), ==, 0);
	g_assert_cmpint(loom_sched_new(be, 2, &s), ==, LOOM_OK);
	asked = acme_count("acme_n_supports");
	for (int k = 0; k < 2; k++) {
		net_new(&n[k], &m);
		for (int rep = 0; rep < 3; rep++) {
			g_assert_cmpint(loom_sched_alloc_graph(s, n[k].g), ==,
					LOOM_OK);
			set_ids(n[k].ids);
			g_assert_cmpint(loom_sched_compute(s, n[k].g), ==,
					LOOM_OK);
			got = loom_test_get_doubles(n[k].out, &err);
			g_assert_nonnull(got);
			g_assert_cmpfloat(loom_test_nmse(ref, got, O * T), <=,
					  1e-10);
			g_free(got);
		}
		if (k == 0) {
			/* At most once per node that is not a view (the
			 * acme backend is asked about all of them). */
			asked = acme_count("acme_n_supports") - asked;
			g_assert_cmpint(asked, >, 0);
			g_assert_cmpint(asked, <=, 8);
			asked = acme_count("acme_n_supports");
		}
	}
	g_assert_cmpint(acme_count("acme_n_supports"), ==, asked);
	g_assert_cmpuint(loom_sched_n_plans(s), ==, 1);
	g_assert_cmpint(loom_sched_get_stats(s, &st), ==, LOOM_OK);
	g_assert_cmpuint(st.n_plans, ==, 1);
	g_assert_cmpuint(st.n_reused, ==, 1);
	g_assert_cmpuint(st.n_computes, ==, 6);
	g_assert_cmpuint(st.n_supports_op, >=, 8);
	g_assert_cmpuint(st.n_supports_op, <=, 16);
	/* The first graph again: its plan, bound back to it. */
	g_assert_cmpint(loom_sched_compute(s, n[0].g), ==, LOOM_OK);
	g_assert_cmpuint(loom_sched_n_plans(s), ==, 1);
	/* A node added changes the shape: planned anew. */
	{
		struct loom_tensor *more = loom_scale(n[0].ctx, n[0].out, 2.0f);

		g_assert_cmpint(loom_graph_expand(n[0].g, more), ==, LOOM_OK);
		g_assert_cmpint(loom_sched_compute(s, n[0].g), ==, LOOM_OK);
		g_assert_cmpuint(loom_sched_n_plans(s), ==, 2);
		got = loom_test_get_doubles(more, &err);
		g_assert_nonnull(got);
		for (int i = 0; i < O * T; i++)
			got[i] /= 2;
		g_assert_cmpfloat(loom_test_nmse(ref, got, O * T), <=, 1e-10);
		g_free(got);
	}
	/* The second graph's shape is still known. */
	set_ids(n[1].ids);
	g_assert_cmpint(loom_sched_compute(s, n[1].g), ==, LOOM_OK);
	g_assert_cmpuint(loom_sched_n_plans(s), ==, 2);
	got = loom_test_get_doubles(n[1].out, &err);
	g_assert_nonnull(got);
	g_assert_cmpfloat(loom_test_nmse(ref, got, O * T), <=, 1e-10);
	g_free(got);

	loom_sched_free(s);
	loom_backend_free(be[1]);
	loom_backend_free(be[0]);
	for (int k = 0; k < 2; k++)
		loom_ctx_free(n[k].ctx);
	model_free(&m);
	g_free(ref);
}

/* Pieces cpu0, cpu1, cpu0, cpu1: the last one reads an input of cpu0's,
 * ready from the start, whose copy is made while the third piece runs. */
static void test_overlap(void)
{
	enum { E = 96 };
	loom_dev_t *c0 = loom_dev_by_name("cpu0"), *c1 = loom_dev_by_name("cpu1");
	struct loom_sched_stats st = { .size = sizeof(st) };
	struct loom_tensor *w[4], *in, *a, *b, *c, *d;
	loom_backend_t *be[3];
	loom_buffer_t *wbuf[2];
	loom_ctx_t *wctx[2], *ctx;
	loom_graph_t *g;
	loom_sched_t *s;
	struct loom_test_rng rng;
	double *res[2], nmse;
	char *err = NULL;

	if (!c1) {
		g_test_skip("one CPU device (LOOM_CPU_DEVICES=2 gives two)");
		return;
	}
	loom_test_rng_seed(&rng, 21);
	for (int k = 0; k < 2; k++) {
		g_assert_cmpint(loom_ctx_new(0, &wctx[k]), ==, 0);
		for (int i = k; i < 4; i += 2)
			w[i] = loom_tensor_new_2d(wctx[k], LOOM_TYPE_F32, E, E);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					wctx[k], loom_dev_buffer_type(k ? c1 : c0),
					&wbuf[k]), ==, 0);
		loom_buffer_set_usage(wbuf[k], LOOM_BUFFER_USAGE_WEIGHTS);
	}
	for (int i = 0; i < 4; i++)
		g_assert_cmpint(loom_test_fill_uniform(w[i], &rng, -0.2, 0.2),
				==, 0);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, 0);
	in = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, E, 1);
	loom_tensor_set_flags(in, LOOM_TENSOR_INPUT);
	a = loom_mul_mat(ctx, w[0], in); /* cpu0 */
	b = loom_mul_mat(ctx, w[1], a);  /* cpu1 */
	c = loom_mul_mat(ctx, w[2], b);  /* cpu0 */
	d = loom_add(ctx, loom_mul_mat(ctx, w[3], c), in); /* cpu1 */
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, 0);
	g_assert_cmpint(loom_graph_expand(g, d), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(c0, NULL, &be[0]), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(c1, NULL, &be[1]), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(c0, NULL, &be[2]), ==, 0);
	for (int pass = 0; pass < 2; pass++) {
		/* Pass 1: one backend reads both partitions' weights. */
		g_assert_cmpint(loom_sched_new(pass ? be + 2 : be,
					       pass ? 1 : 2, &s), ==, 0);
		g_assert_cmpint(loom_sched_alloc_graph(s, g), ==, 0);
		loom_test_rng_seed(&rng, 4);
		g_assert_cmpint(loom_test_fill_uniform(in, &rng, -1, 1), ==, 0);
		for (int rep = 0; rep < 3; rep++)
			g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_OK);
		g_assert_cmpint(loom_sched_get_stats(s, &st), ==, LOOM_OK);
		if (!pass) {
			g_assert_cmpuint(st.n_pieces, ==, 4);
			/* a, b, c and the input: the input's copy each time
			 * while c is computed. */
			g_assert_cmpuint(st.n_copies, ==, 4);
			g_assert_cmpuint(st.n_copies_early, ==, 3);
			g_assert_cmpstr(be_of(s, d), ==, "cpu1");
		}
		res[pass] = loom_test_get_doubles(d, &err);
		g_assert_nonnull(res[pass]);
		loom_sched_free(s);
	}
	nmse = loom_test_nmse(res[1], res[0], E);
	g_assert_cmpfloat(nmse, <=, 1e-12);
	g_free(res[1]);
	g_free(res[0]);
	for (int i = 0; i < 3; i++)
		loom_backend_free(be[i]);
	loom_ctx_free(ctx);
	for (int k = 0; k < 2; k++) {
		loom_buffer_free(wbuf[k]);
		loom_ctx_free(wctx[k]);
	}
}

/* y = w x on the host, w [E, E] (rows of E), in doubles. */
static void host_mv(const double *w, const double *x, double *y, int e)
{
	for (int m = 0; m < e; m++) {
		double acc = 0;

		for (int k = 0; k < e; k++)
			acc += w[k + (size_t)m * e] * x[k];
		y[m] = acc;
	}
}

/* Two devices of one plugin with real events whose streams run nothing
 * until they must (acmes): copies between them are queued behind the
 * event of the piece that makes their source, and the CPU's input waits
 * for its piece's event.  Each compute has a new input, so a copy made
 * before its source was computed reads the last compute's value and the
 * check fails. */
static void test_streams(void)
{
	enum { E = 48, REPS = 3 };
	loom_dev_t *dv[3] = { loom_dev_by_name("acmes0"),
			      loom_dev_by_name("acmes1"),
			      loom_dev_by_name("cpu0") };
	struct loom_sched_stats st = { .size = sizeof(st) };
	struct loom_tensor *w[4], *in, *a, *b, *c, *d, *e;
	loom_backend_t *be[3];
	loom_buffer_t *wbuf[2];
	loom_ctx_t *wctx[2], *ctx;
	loom_graph_t *g;
	loom_sched_t *s;
	struct loom_test_rng rng;
	char *err = NULL;
	int queued;

	g_assert_nonnull(dv[0]);
	g_assert_nonnull(dv[1]);
	g_assert_cmpuint(loom_dev_caps(dv[0]) & LOOM_DEV_CAP_EVENTS, !=, 0);
	loom_test_rng_seed(&rng, 77);
	for (int k = 0; k < 2; k++) {
		g_assert_cmpint(loom_ctx_new(0, &wctx[k]), ==, 0);
		for (int i = k; i < 4; i += 2)
			w[i] = loom_tensor_new_2d(wctx[k], LOOM_TYPE_F32, E, E);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					wctx[k], loom_dev_buffer_type(dv[k]),
					&wbuf[k]), ==, 0);
		loom_buffer_set_usage(wbuf[k], LOOM_BUFFER_USAGE_WEIGHTS);
	}
	for (int i = 0; i < 4; i++)
		g_assert_cmpint(loom_test_fill_uniform(w[i], &rng, -0.3, 0.3),
				==, 0);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, 0);
	in = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, E, 1);
	loom_tensor_set_flags(in, LOOM_TENSOR_INPUT);
	a = loom_mul_mat(ctx, w[0], in);                   /* acmes0 */
	b = loom_mul_mat(ctx, w[1], a);                    /* acmes1 */
	c = loom_mul_mat(ctx, w[2], b);                    /* acmes0 */
	d = loom_add(ctx, loom_mul_mat(ctx, w[3], c), a);  /* acmes1 */
	e = loom_silu(ctx, d);                             /* cpu0 */
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, 0);
	g_assert_cmpint(loom_graph_expand(g, e), ==, 0);
	for (int j = 0; j < 3; j++)
		g_assert_cmpint(loom_dev_init_backend(dv[j], NULL, &be[j]), ==,
				0);
	g_assert_cmpint(loom_sched_new(be, 3, &s), ==, LOOM_OK);
	g_assert_cmpint(loom_sched_alloc_graph(s, g), ==, LOOM_OK);
	queued = plugin_count("acmes", "acme_n_queued");
	for (int rep = 0; rep < REPS; rep++) {
		double *x, *wd[4], t1[E], t2[E], t3[E], t4[E], ref[E], *got;

		g_assert_cmpint(loom_test_fill_uniform(in, &rng, -1, 1), ==, 0);
		g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_OK);
		x = loom_test_get_doubles(in, &err);
		for (int i = 0; i < 4; i++)
			wd[i] = loom_test_get_doubles(w[i], &err);
		host_mv(wd[0], x, t1, E);
		host_mv(wd[1], t1, t2, E);
		host_mv(wd[2], t2, t3, E);
		host_mv(wd[3], t3, t4, E);
		for (int i = 0; i < E; i++) {
			double v = t4[i] + t1[i];

			ref[i] = v / (1 + exp(-v));
		}
		got = loom_test_get_doubles(e, &err);
		g_assert_nonnull(got);
		g_assert_cmpfloat(loom_test_nmse(ref, got, E), <=, 1e-10);
		g_free(got);
		for (int i = 0; i < 4; i++)
			g_free(wd[i]);
		g_free(x);
	}
	g_assert_cmpstr(be_of(s, a), ==, "acmes0");
	g_assert_cmpstr(be_of(s, b), ==, "acmes1");
	g_assert_cmpstr(be_of(s, e), ==, "cpu0");
	g_assert_cmpint(loom_sched_get_stats(s, &st), ==, LOOM_OK);
	g_assert_cmpuint(st.n_pieces, ==, 5);
	/* a, b, c between the streams (a once for its two readers), d to
	 * the CPU. */
	g_assert_cmpuint(st.n_copies, ==, 4);
	g_assert_cmpint(plugin_count("acmes", "acme_n_queued") - queued, ==,
			3 * REPS);
	loom_sched_free(s);
	for (int j = 0; j < 3; j++)
		loom_backend_free(be[j]);
	loom_ctx_free(ctx);
	for (int k = 0; k < 2; k++) {
		loom_buffer_free(wbuf[k]);
		loom_ctx_free(wctx[k]);
	}
}

/* ---- whole decoder layers of the example model ---- */

enum { L_PROMPT = 6, L_DECODE = 3 };

/* Prefill then decode on a model placed as pl through backends be[0..n),
 * (n == 0: the model's device alone, no scheduler); logits of every step
 * (n_vocab each) into out. */
static void run_llama(const struct llama_hparams *hp,
		      const struct llama_placement *pl, loom_dev_t *const *devs,
		      size_t n, float *out, struct loom_sched_stats *st)
{
	static const int32_t tok[L_PROMPT + L_DECODE] = {
		3, 17, 200, 5, 99, 1, 42, 7, 128,
	};
	struct llama_model *m;
	loom_backend_t *be[3] = { NULL };
	loom_sched_t *s = NULL;
	int64_t nv = hp->n_vocab;

	g_assert_cmpint(llama_model_new_placed(hp, pl, 11, &m), ==, LOOM_OK);
	for (size_t j = 0; j < (n ? n : 1); j++)
		g_assert_cmpint(loom_dev_init_backend(n ? devs[j] : pl->first,
						      NULL, &be[j]), ==, 0);
	if (n) {
		g_assert_cmpint(loom_sched_new(be, n, &s), ==, LOOM_OK);
		g_assert_cmpint(llama_model_reserve_sched(m, s, L_PROMPT), ==,
				LOOM_OK);
		/* Compute memory for activations, not for the weights the
		 * caller placed. */
		g_assert_cmpuint(loom_sched_buffer_size(s, 0) +
				 loom_sched_buffer_size(s, 1), <,
				 llama_model_weight_bytes(m) / 4);
		if (llama_eval_sched(m, s, tok, L_PROMPT, 0, false, out))
			g_error("prefill: %s", loom_error_message());
	} else {
		g_assert_cmpint(llama_eval(m, be[0], tok, L_PROMPT, 0, false,
					   out), ==, LOOM_OK);
	}
	for (int i = 0; i < L_DECODE; i++) {
		const int32_t *t = &tok[L_PROMPT + i];
		float *o = out + nv * (1 + i);

		if (n)
			g_assert_cmpint(llama_eval_sched(m, s, t, 1,
							 L_PROMPT + i, false,
							 o), ==, LOOM_OK);
		else
			g_assert_cmpint(llama_eval(m, be[0], t, 1,
						   L_PROMPT + i, false, o), ==,
					LOOM_OK);
	}
	if (s && st) {
		st->size = sizeof(*st);
		g_assert_cmpint(loom_sched_get_stats(s, st), ==, LOOM_OK);
	}
	loom_sched_free(s);
	for (size_t j = 0; j < 3; j++)
		loom_backend_free(be[j]);
	llama_model_free(m);
}

static double nmse_f(const float *ref, const float *x, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		num += ((double)x[i] - ref[i]) * ((double)x[i] - ref[i]);
		den += (double)ref[i] * ref[i];
	}
	return num / den;
}

/* The model placed over (first, rest) through the scheduler against the
 * model on cpu0 alone. */
static void check_llama(int64_t n_layer, int64_t n_first, loom_dev_t *first,
			loom_dev_t *rest, struct loom_sched_stats *st)
{
	struct llama_hparams hp;
	struct llama_placement one = { .first = loom_dev_by_name("cpu0") };
	struct llama_placement pl = { first, rest, n_first };
	loom_dev_t *devs[2] = { first, rest };
	size_t n_out;
	float *ref, *got;
	double e;

	g_assert_cmpint(llama_hparams_preset("tiny", &hp), ==, LOOM_OK);
	hp.n_layer = n_layer;
	hp.n_ctx = 64;
	n_out = (size_t)hp.n_vocab * (1 + L_DECODE);
	ref = g_malloc0(n_out * sizeof(float));
	got = g_malloc0(n_out * sizeof(float));
	run_llama(&hp, &one, NULL, 0, ref, NULL);
	run_llama(&hp, &pl, devs, 2, got, st);
	e = nmse_f(ref, got, n_out);
	g_test_message("%s + %s, %lld of %lld layers on the first: nmse %g",
		       loom_dev_name(first), loom_dev_name(rest),
		       (long long)n_first, (long long)n_layer, e);
	g_assert_cmpfloat(e, <=, 1e-6);
	g_free(got);
	g_free(ref);
}

/* A whole decoder layer with acme's matrices: acme runs what it can of
 * it (the projections, the residual adds), the CPU the rest. */
static void test_llama_acme(void)
{
	struct loom_sched_stats st;
	int ran = acme_count("acme_n_compute");

	check_llama(1, 1, loom_dev_by_name("acme0"), loom_dev_by_name("cpu0"),
		    &st);
	g_assert_cmpint(acme_count("acme_n_compute"), >, ran);
	g_assert_cmpuint(st.n_pieces, >, 2);
	g_assert_cmpuint(st.n_copies, >, 0);
	/* The prefill graph and the decode graph, each planned once. */
	g_assert_cmpuint(st.n_plans, ==, 2 + 2);
	/* reserve's two graphs, prefill, three decode steps. */
	g_assert_cmpuint(st.n_computes, ==, 1 + L_DECODE);
}

/* Layer 0 on cpu0, layer 1 on cpu1. */
static void test_llama_partitions(void)
{
	loom_dev_t *c1 = loom_dev_by_name("cpu1");
	struct loom_sched_stats st;

	if (!c1) {
		g_test_skip("one CPU device (LOOM_CPU_DEVICES=2 gives two)");
		return;
	}
	check_llama(2, 1, loom_dev_by_name("cpu0"), c1, &st);
	/* Few cuts: the embeddings and layer 1 on cpu1, layer 0 between. */
	g_assert_cmpuint(st.n_pieces, <=, 5);
	g_assert_cmpuint(st.n_copies, <=, 12);
}

/* A meta device over both partitions and the CPU: layer 0 tensor
 * parallel, layer 1 on cpu0. */
static void test_llama_meta(void)
{
	/* The meta device keeps the shape it splits by. */
	static struct loom_meta_model shape;
	loom_dev_t *c[2] = { loom_dev_by_name("cpu0"), loom_dev_by_name("cpu1") };
	struct loom_sched_stats st;
	struct llama_hparams hp;
	loom_dev_t *meta;

	if (!c[1] || !loom_reg_by_name("meta")) {
		g_test_skip("needs two CPU devices and the meta plugin");
		return;
	}
	g_assert_cmpint(llama_hparams_preset("tiny", &hp), ==, LOOM_OK);
	llama_meta_model(&hp, &shape);
	g_assert_cmpint(loom_meta_dev_new(c, 2, loom_meta_split_default, &shape,
					  NULL, &meta), ==, LOOM_OK);
	check_llama(2, 1, meta, c[0], &st);
	g_assert_cmpuint(st.n_pieces, >=, 2);
}

/* A graph with a node no backend of the list runs fails, naming it. */
static void test_unsupported(void)
{
	loom_dev_t *acme = loom_dev_by_name("acme0");
	struct loom_tensor *x, *y;
	loom_backend_t *be;
	loom_graph_t *g;
	loom_ctx_t *ctx;
	loom_sched_t *s;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, 0);
	x = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 8);
	y = loom_silu(ctx, loom_add(ctx, x, x));
	loom_tensor_set_name(y, "the_silu");
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, 0);
	g_assert_cmpint(loom_graph_expand(g, y), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(acme, NULL, &be), ==, 0);
	g_assert_cmpint(loom_sched_new(&be, 1, &s), ==, 0);
	g_assert_cmpint(loom_sched_reserve(s, g), ==, LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "'the_silu'"));
	g_assert_nonnull(strstr(loom_error_message(), "silu"));
	g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_E_UNSUPPORTED);
	loom_sched_free(s);
	g_assert_cmpint(loom_sched_new(NULL, 1, &s), ==, LOOM_E_INVAL);
	loom_backend_free(be);
	loom_ctx_free(ctx);
}

/* The caller's mistakes: errors with messages, never a crash. */
static void test_mistakes(void)
{
	loom_dev_t *acme = loom_dev_by_name("acme0");
	loom_dev_t *cpu = loom_dev_by_name("cpu0");
	struct loom_sched_stats st = { .size = 0 };
	struct loom_tensor *cache, *rows, *ids, *w, *x, *y;
	loom_backend_t *be[2], *dup[2];
	loom_buffer_t *buf;
	loom_ctx_t *wctx, *ctx;
	loom_graph_t *g;
	loom_sched_t *s;

	g_assert_cmpint(loom_dev_init_backend(acme, NULL, &be[0]), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(cpu, NULL, &be[1]), ==, 0);
	g_assert_cmpint(loom_sched_new(be, 0, &s), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_sched_new(be, 2, NULL), ==, LOOM_E_INVAL);
	dup[0] = dup[1] = be[1];
	g_assert_cmpint(loom_sched_new(dup, 2, &s), ==, LOOM_E_INVAL);
	g_assert_nonnull(strstr(loom_error_message(), "also backend 0"));
	g_assert_null(s);
	g_assert_cmpint(loom_sched_new(be, 2, &s), ==, LOOM_OK);
	g_assert_cmpint(loom_sched_compute(s, NULL), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_sched_reserve(NULL, NULL), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_sched_get_stats(s, &st), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_sched_get_stats(s, NULL), ==, LOOM_E_INVAL);
	g_assert_cmpuint(loom_sched_n_pieces(NULL), ==, 0);
	g_assert_null(loom_sched_node_backend(s, NULL));
	g_assert_cmpuint(loom_sched_buffer_size(s, 7), ==, 0);
	/* A short stats struct (an older caller's) gets its part only. */
	st.size = offsetof(struct loom_sched_stats, n_reused);
	st.n_reused = 12345;
	g_assert_cmpint(loom_sched_get_stats(s, &st), ==, LOOM_OK);
	g_assert_cmpuint(st.n_reused, ==, 12345);

	/* set_rows into acme's memory: acme lacks set_rows, and the CPU
	 * cannot write there; writing into a copy would lose the write. */
	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, 0);
	cache = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, 8, 4);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, 8, 8);
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, loom_dev_buffer_type(acme),
					       &buf), ==, 0);
	g_assert_cmpint(loom_tensor_memset(w, 0, 0, loom_tensor_n_bytes(w)),
			==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, 0);
	rows = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 1);
	ids = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 1);
	y = loom_set_rows(ctx, cache, rows, ids);
	loom_tensor_set_name(y, "the_write");
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, 0);
	g_assert_cmpint(loom_graph_expand(g, y), ==, 0);
	g_assert_cmpint(loom_sched_alloc_graph(s, g), ==, LOOM_E_UNSUPPORTED);
	g_assert_nonnull(strstr(loom_error_message(), "'the_write'"));
	g_assert_cmpuint(loom_sched_n_plans(s), ==, 0);

	/* A backend freed under the scheduler: an error, not a crash. */
	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 1);
	y = loom_silu(ctx, loom_mul_mat(ctx, w, x));
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, 0);
	g_assert_cmpint(loom_graph_expand(g, y), ==, 0);
	g_assert_cmpint(loom_sched_alloc_graph(s, g), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_memset(x, 0, 0, loom_tensor_n_bytes(x)),
			==, LOOM_OK);
	g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_OK);
	loom_backend_free(be[0]);
	g_assert_cmpint(loom_sched_compute(s, g), ==, LOOM_E_INVAL);
	loom_sched_free(s);
	loom_backend_free(be[1]);
	loom_ctx_free(ctx);
	loom_buffer_free(buf);
	loom_ctx_free(wctx);
}

/* Two CPU partitions, each holding one layer's weights: each layer runs
 * where its weights are; the result is the single device's. */
static void test_partitions(void)
{
	loom_dev_t *c0 = loom_dev_by_name("cpu0"), *c1 = loom_dev_by_name("cpu1");
	loom_backend_t *be[2];
	loom_sched_t *s;
	struct model m;
	struct net n;
	double *ref, *got, nmse;
	char *err = NULL;

	if (!c1) {
		g_test_skip("one CPU device (LOOM_CPU_DEVICES=2 gives two)");
		return;
	}
	ref = reference();
	model_new(&m, c0, c1);
	net_new(&n, &m);
	g_assert_cmpint(loom_dev_init_backend(c0, NULL, &be[0]), ==, 0);
	g_assert_cmpint(loom_dev_init_backend(c1, NULL, &be[1]), ==, 0);
	g_assert_cmpint(loom_sched_new(be, 2, &s), ==, LOOM_OK);
	g_assert_cmpint(loom_sched_alloc_graph(s, n.g), ==, LOOM_OK);
	set_ids(n.ids);
	g_assert_cmpint(loom_sched_compute(s, n.g), ==, LOOM_OK);
	got = loom_test_get_doubles(n.out, &err);
	g_assert_nonnull(got);
	nmse = loom_test_nmse(ref, got, O * T);
	g_assert_cmpfloat(nmse, <=, 1e-12);
	g_assert_cmpstr(be_of(s, n.mm1), ==, "cpu1");
	g_assert_cmpstr(be_of(s, n.add1), ==, "cpu1");
	g_assert_cmpstr(be_of(s, n.rows), ==, "cpu0");
	g_assert_cmpstr(be_of(s, n.mm2), ==, "cpu0");
	g_assert_cmpuint(loom_sched_n_pieces(s), >=, 2);
	g_free(got);
	loom_sched_free(s);
	loom_backend_free(be[1]);
	loom_backend_free(be[0]);
	loom_ctx_free(n.ctx);
	model_free(&m);
	g_free(ref);
}

int main(int argc, char **argv)
{
	const char *b = g_getenv("LOOM_TEST_BUILDDIR");
	char *acme = g_strdup_printf("%s/tests/acme/.libs:%s/tests/acmes/.libs",
				     b ? b : ".", b ? b : ".");
	int ret;

	g_test_init(&argc, &argv, NULL);
	/* The acme plugin's directory first, then the tree's plugins. */
	g_setenv("LOOM_PLUGIN_PATH", acme, TRUE);
	g_free(acme);
	g_setenv("LOOM_CPU_DEVICES", "2", FALSE);
	g_setenv("LOOM_BACKENDS", "acme,acmes,cpu,meta", TRUE);
	g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
	g_test_add_func("/sched/offload", test_offload);
	g_test_add_func("/sched/copied_once", test_copied_once);
	g_test_add_func("/sched/unsupported", test_unsupported);
	g_test_add_func("/sched/partitions", test_partitions);
	g_test_add_func("/sched/copied_once_pieces", test_copied_once_pieces);
	g_test_add_func("/sched/plan_reuse", test_plan_reuse);
	g_test_add_func("/sched/overlap", test_overlap);
	g_test_add_func("/sched/streams", test_streams);
	g_test_add_func("/sched/llama_acme", test_llama_acme);
	g_test_add_func("/sched/llama_partitions", test_llama_partitions);
	g_test_add_func("/sched/llama_meta", test_llama_meta);
	g_test_add_func("/sched/mistakes", test_mistakes);
	ret = g_test_run();
	loom_unload_all();
	return ret;
}
