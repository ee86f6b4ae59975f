/* SPDX-License-Identifier: MIT */
/* test-sched.c - the scheduler: a decoder-like graph over a two-op
 * accelerator plugin (acme: add and mul_mat only, memory the CPU cannot
 * address) and the CPU, matching the CPU alone; an input read by ten
 * nodes on another device copied once; a layer split across two CPU
 * partitions by where the weights live; a graph nothing runs; and a plan
 * kept while the graph is unchanged.
 */
#include "test-util.h"

#include <glib.h>
#include <math.h>
#include <string.h>

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
	g_assert_cmpint(loom_sched_new(NULL, 1, &s), ==, LOOM_E_INVAL);
	loom_sched_free(s);
	loom_backend_free(be);
	loom_ctx_free(ctx);
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
	char *acme = g_strdup_printf("%s/tests/acme/.libs", b ? b : ".");
	int ret;

	g_test_init(&argc, &argv, NULL);
	/* The acme plugin's directory first, then the tree's plugins. */
	g_setenv("LOOM_PLUGIN_PATH", acme, TRUE);
	g_free(acme);
	g_setenv("LOOM_CPU_DEVICES", "2", FALSE);
	g_setenv("LOOM_BACKENDS", "acme,cpu", TRUE);
	g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
	g_test_add_func("/sched/offload", test_offload);
	g_test_add_func("/sched/copied_once", test_copied_once);
	g_test_add_func("/sched/unsupported", test_unsupported);
	g_test_add_func("/sched/partitions", test_partitions);
	ret = g_test_run();
	loom_unload_all();
	return ret;
}
