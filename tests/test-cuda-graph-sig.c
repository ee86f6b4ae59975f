/* SPDX-License-Identifier: MIT */
/* test-cuda-graph-sig.c - the CUDA plugin's graph signatures and slot
 * choice (plugins/cuda/graph-sig.c), host code that needs no GPU: a
 * decode step whose KV window grew is a new graph of the same kernels and
 * takes over the executable graph of the step before, while graphs of
 * other kernels or of another number of tokens, and slots without an
 * executable graph, give none, and of graphs computed in turn each
 * takes its own predecessor's.
 */
#include <glib.h>
#include <string.h>

#include <loom/loom.h>

#include "graph-sig.h"

enum { D = 64, KV = 256 };

/* Fake device addresses: the signatures only compare them. */
static char arena[1 << 20];

static struct loom_tensor *at(struct loom_tensor *t, size_t off)
{
	g_assert_nonnull(t);
	t->data = arena + off;
	return t;
}

/* A decode-like step of n tokens: a query projection, its scores against
 * the first len rows of a KV cache, softmax, the values, the output
 * projection and the residual.  *ctx is made here. */
static loom_graph_t *step(loom_ctx_t **ctx, int64_t len, int64_t n,
			  size_t cache_off)
{
	struct loom_tensor *cache, *x, *q, *k, *s, *p, *o, *out;
	loom_ctx_t *c;
	loom_graph_t *g;

	g_assert_cmpint(loom_ctx_new(0, ctx), ==, LOOM_OK);
	c = *ctx;
	cache = at(loom_tensor_new_2d(c, LOOM_TYPE_F32, D, KV), cache_off);
	x = at(loom_tensor_new_2d(c, LOOM_TYPE_F32, D, n), 4096);
	q = at(loom_mul_mat(c, at(loom_tensor_new_2d(c, LOOM_TYPE_F16, D, D),
				  8192), x), 16384);
	k = at(loom_view_2d(c, cache, D, len, cache->nb[1], 0), cache_off);
	s = at(loom_mul_mat(c, k, q), 20480);
	p = at(loom_soft_max(c, s, NULL, 0.125f), 65536);
	o = at(loom_mul_mat(c, at(loom_tensor_new_2d(c, LOOM_TYPE_F32, len,
						     D), 131072), p), 196608);
	o = at(loom_mul_mat(c, at(loom_tensor_new_2d(c, LOOM_TYPE_F16, D, D),
				  8192), o), 200704);
	out = at(loom_scale(c, at(loom_add(c, o, x), 204800), 0.5f), 208896);
	g_assert_cmpint(loom_graph_new(c, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, out), ==, LOOM_OK);
	return g;
}

static bool all(const struct loom_tensor *t)
{
	return true;
}

static bool no_softmax(const struct loom_tensor *t)
{
	return t->op != LOOM_OP_SOFT_MAX;
}

static void sig_of(struct cuda_sig *s, int64_t len, int64_t n,
		   size_t cache_off)
{
	loom_ctx_t *ctx;
	loom_graph_t *g = step(&ctx, len, n, cache_off);
	bool ok;

	g_assert_cmpint(cuda_sig_build(s, g, all, &ok), ==, LOOM_OK);
	g_assert_true(ok);
	g_assert_cmpint(cuda_sig_build(s, g, no_softmax, &ok), ==, LOOM_OK);
	g_assert_false(ok);
	loom_ctx_free(ctx);
}

/* Kernel nodes only (the view has none), compared as the kernels see
 * them. */
static void test_compare(void)
{
	struct cuda_sig a = { 0 }, b = { 0 }, c = { 0 }, d = { 0 };
	struct cuda_sig e = { 0 }, empty = { 0 };

	sig_of(&a, 32, 1, 0);
	sig_of(&b, 32, 1, 0);
	sig_of(&c, 64, 1, 0);
	sig_of(&d, 32, 1, 16384);
	sig_of(&e, 32, 4, 0);
	g_assert_cmpuint(a.n, ==, 7);
	g_assert_true(cuda_sig_equal(&a, &b));
	g_assert_false(cuda_sig_equal(&a, &c));
	g_assert_false(cuda_sig_equal(&a, &d));
	/* A longer window (the shapes of 3 nodes of 7 change), another
	 * address: the same kernels.  Four tokens for one: every shape
	 * changes, and the kernels with them. */
	g_assert_true(cuda_sig_same_kernels(&a, &c));
	g_assert_true(cuda_sig_same_kernels(&a, &d));
	g_assert_false(cuda_sig_same_kernels(&a, &e));
	g_assert_false(cuda_sig_equal(&a, &e));
	g_assert_false(cuda_sig_equal(&empty, &empty));
	g_assert_false(cuda_sig_same_kernels(&empty, &empty));
	/* Another parameter (the softmax's scale), another type, an
	 * operand more, one node fewer: other kernels. */
	b.v[2].op_params[0] ^= 1;
	g_assert_false(cuda_sig_same_kernels(&a, &b));
	b.v[2].op_params[0] ^= 1;
	b.v[0].src[0].type = LOOM_TYPE_BF16;
	g_assert_false(cuda_sig_same_kernels(&a, &b));
	b.v[0].src[0].type = LOOM_TYPE_F16;
	b.v[2].src[1] = b.v[2].src[0];
	g_assert_false(cuda_sig_same_kernels(&a, &b));
	b.v[2].src[1] = a.v[2].src[1];
	g_assert_true(cuda_sig_equal(&a, &b));
	b.n--;
	g_assert_false(cuda_sig_same_kernels(&a, &b));
	g_assert_false(cuda_sig_equal(&a, &b));
	cuda_sig_free(&a);
	cuda_sig_free(&b);
	cuda_sig_free(&c);
	cuda_sig_free(&d);
	cuda_sig_free(&e);
	g_assert_null(a.v);
}

/* Slots of the given signatures, stamps and executable graphs. */
static void views(struct cuda_slot_view *v, int n,
		  const struct cuda_sig *const *sigs, const uint64_t *stamps,
		  const bool *exec)
{
	for (int i = 0; i < n; i++) {
		v[i].sig = sigs[i];
		v[i].stamp = stamps[i];
		v[i].has_exec = exec[i];
	}
}

static void test_pick(void)
{
	struct cuda_sig w32 = { 0 }, w64 = { 0 }, w96 = { 0 }, far = { 0 };
	struct cuda_sig other = { 0 }, empty = { 0 };
	struct cuda_slot_view v[4];
	int donor;

	sig_of(&w32, 32, 1, 0);
	sig_of(&w64, 64, 1, 0);
	sig_of(&w96, 96, 1, 0);
	sig_of(&far, 32, 1, 32768);
	sig_of(&other, 32, 1, 0);
	other.v[2].op_params[0] ^= 1;

	/* The graph itself: its slot, nothing moved. */
	{
		const struct cuda_sig *s[4] = { &empty, &w32, &other, &empty };
		const uint64_t st[4] = { 0, 5, 4, 0 };
		const bool ex[4] = { false, true, true, false };

		views(v, 4, s, st, ex);
		g_assert_cmpint(cuda_sig_pick(v, 4, &w32, &donor), ==, 1);
		g_assert_cmpint(donor, ==, -1);
		/* The window grew: an unused slot, and the executable
		 * graph of the step before (not the other kernels'). */
		g_assert_cmpint(cuda_sig_pick(v, 4, &w64, &donor), ==, 0);
		g_assert_cmpint(donor, ==, 1);
	}
	/* Without an executable graph of the same kernels: no donor. */
	{
		const struct cuda_sig *s[4] = { &w32, &other, &empty, &empty };
		const uint64_t st[4] = { 5, 4, 0, 0 };
		const bool ex[4] = { false, true, false, false };

		views(v, 4, s, st, ex);
		g_assert_cmpint(cuda_sig_pick(v, 4, &w64, &donor), ==, 2);
		g_assert_cmpint(donor, ==, -1);
	}
	/* Full: the slot used longest ago; two pieces of the same kernels
	 * computed in turn (w32 at 0, far at 32768), each grown: the donor
	 * is the one used longest ago, the first piece's. */
	{
		const struct cuda_sig *s[4] = { &w32, &far, &other, &w96 };
		const uint64_t st[4] = { 7, 8, 9, 3 };
		const bool ex[4] = { true, true, true, false };

		views(v, 4, s, st, ex);
		g_assert_cmpint(cuda_sig_pick(v, 4, &w64, &donor), ==, 3);
		g_assert_cmpint(donor, ==, 0);
		/* The oldest slot is the donor itself. */
		v[0].stamp = 1;
		g_assert_cmpint(cuda_sig_pick(v, 4, &w64, &donor), ==, 0);
		g_assert_cmpint(donor, ==, 0);
		/* Nothing of the same kernels has one: none. */
		v[0].has_exec = v[1].has_exec = false;
		g_assert_cmpint(cuda_sig_pick(v, 4, &w64, &donor), ==, 0);
		g_assert_cmpint(donor, ==, -1);
	}
	/* One slot. */
	{
		const struct cuda_sig *s[1] = { &empty };
		const uint64_t st[1] = { 0 };
		const bool ex[1] = { false };

		views(v, 1, s, st, ex);
		g_assert_cmpint(cuda_sig_pick(v, 1, &w32, &donor), ==, 0);
		g_assert_cmpint(donor, ==, -1);
	}
	cuda_sig_free(&w32);
	cuda_sig_free(&w64);
	cuda_sig_free(&w96);
	cuda_sig_free(&far);
	cuda_sig_free(&other);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/cuda-graph-sig/compare", test_compare);
	g_test_add_func("/cuda-graph-sig/pick", test_pick);
	return g_test_run();
}
