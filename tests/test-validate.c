/* SPDX-License-Identifier: MIT */
/* test-validate.c - what the core refuses before a plugin computes a
 * graph (raw nodes that break their op's rule, nodes edited after they
 * were placed, bytes outside their buffer, nodes out of order), and the
 * op constructors' own refusals that share those rules: the first message
 * of a chain, misaligned views, overlapping copies.
 */
#include <glib.h>
#include <string.h>

#include "loom/loom-plugin.h"
#include "test-util.h"

/* The CPU device, loaded from the build tree. */
static loom_dev_t *cpu_dev(void)
{
	loom_reg_t *reg;

	g_setenv("LOOM_BACKENDS", "cpu", TRUE);
	g_unsetenv("LOOM_CPU_DEVICES");
	g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
	reg = loom_reg_by_name("cpu");
	g_assert_nonnull(reg);
	return loom_reg_dev(reg, 0);
}

/* The message of the last error contains each of the NULL-ended parts. */
static void expect_message(const char *first, ...)
{
	const char *msg = loom_error_message();
	va_list ap;

	va_start(ap, first);
	for (const char *p = first; p; p = va_arg(ap, const char *))
		if (!strstr(msg, p))
			g_error("message \"%s\" does not say \"%s\"", msg, p);
	va_end(ap);
}

/* One graph on the CPU device: tensors made by the test, then placed
 * with loom_ctx_alloc_tensors and computed by compute(). */
struct fixture {
	loom_dev_t *dev;
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_buffer_t *buf;
	loom_backend_t *be;
};

static void fixture_init(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->dev = cpu_dev();
	g_assert_cmpint(loom_ctx_new(0, &f->ctx), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_new(f->ctx, &f->g), ==, LOOM_OK);
	g_assert_cmpint(loom_dev_init_backend(f->dev, "threads=2", &f->be), ==,
			LOOM_OK);
}

static void fixture_place(struct fixture *f)
{
	g_assert_cmpint(loom_ctx_alloc_tensors(f->ctx,
					       loom_dev_buffer_type(f->dev),
					       &f->buf), ==, LOOM_OK);
	g_assert_cmpint(loom_buffer_clear(f->buf, 0), ==, LOOM_OK);
}

static int compute(struct fixture *f)
{
	return loom_backend_graph_compute(f->be, f->g);
}

static void fixture_fini(struct fixture *f)
{
	loom_backend_free(f->be);
	loom_buffer_free(f->buf);
	loom_ctx_free(f->ctx);
	loom_unload_all();
}

static struct loom_tensor *named(struct loom_tensor *t, const char *name)
{
	g_assert_nonnull(t);
	loom_tensor_set_name(t, name);
	return t;
}

/* A raw copy into a tensor larger than its source would read past the
 * source: refused, naming the node and its op. */
static void test_raw_copy_larger(void)
{
	struct fixture f;
	int64_t ne[4] = { 64, 1, 1, 1 };
	struct loom_tensor *a, *b, *c, *srcs[LOOM_MAX_SRC] = { 0 };

	fixture_init(&f);
	a = named(loom_tensor_new_1d(f.ctx, LOOM_TYPE_F32, 16), "a");
	b = named(loom_tensor_new_1d(f.ctx, LOOM_TYPE_F32, 64), "b");
	srcs[0] = a;
	srcs[1] = b;
	c = named(loom_tensor_new_op(f.ctx, LOOM_OP_COPY, LOOM_TYPE_F32, ne,
				     srcs, NULL), "c");
	g_assert_cmpint(loom_graph_expand(f.g, c), ==, LOOM_OK);
	fixture_place(&f);
	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("backend 'cpu0': node 0 'c' (copy): ",
		       "differ in element count", NULL);
	fixture_fini(&f);
}

/* A raw mul_mat whose a and b differ in K would read past the shorter
 * rows. */
static void test_raw_mul_mat_k(void)
{
	struct fixture f;
	int64_t ne[4] = { 4, 3, 1, 1 };
	struct loom_tensor *w, *x, *y, *srcs[LOOM_MAX_SRC] = { 0 };

	fixture_init(&f);
	w = named(loom_tensor_new_2d(f.ctx, LOOM_TYPE_F32, 7, 4), "w");
	x = named(loom_tensor_new_2d(f.ctx, LOOM_TYPE_F32, 8, 3), "x");
	srcs[0] = w;
	srcs[1] = x;
	y = named(loom_tensor_new_op(f.ctx, LOOM_OP_MUL_MAT, LOOM_TYPE_F32,
				     ne, srcs, NULL), "y");
	g_assert_cmpint(loom_graph_expand(f.g, y), ==, LOOM_OK);
	fixture_place(&f);
	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("node 0 'y' (mul_mat): ",
		       "a [7, 4, 1, 1] f32 and b [8, 3, 1, 1] f32 differ in K",
		       NULL);
	fixture_fini(&f);
}

/* Sizes edited after placement: a node larger than its sources make, a
 * node whose strides were changed, and a leaf grown past its buffer. */
static void test_edited_after_placement(void)
{
	struct fixture f;
	struct loom_tensor *x, *y;

	fixture_init(&f);
	x = named(loom_tensor_new_1d(f.ctx, LOOM_TYPE_F32, 16), "x");
	y = named(loom_add(f.ctx, x, x), "y");
	g_assert_cmpint(loom_graph_expand(f.g, y), ==, LOOM_OK);
	fixture_place(&f);
	g_assert_cmpint(compute(&f), ==, LOOM_OK);

	y->ne[1] = 4096;
	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("node 0 'y' (add) is [16, 4096, 1, 1] f32, its "
		       "sources make [16, 1, 1, 1] f32", NULL);
	y->ne[1] = 1;
	y->nb[1] = 4096;
	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("node 0 'y' (add) has strides (4, 4096, 64, 64), its "
		       "op makes (4, 64, 64, 64)", NULL);
	y->nb[1] = 64;
	g_assert_cmpint(compute(&f), ==, LOOM_OK);

	/* Both grown together agree with the rule, but x no longer fits. */
	x->ne[0] = y->ne[0] = 1 << 20;
	x->nb[1] = x->nb[2] = x->nb[3] = 4u << 20;
	y->nb[1] = y->nb[2] = y->nb[3] = 4u << 20;
	g_assert_cmpint(compute(&f), ==, LOOM_E_RANGE);
	expect_message("backend 'cpu0': leaf 'x'", "lies outside its buffer",
		       NULL);
	/* A type that is no type is refused before anything reads it. */
	x->ne[0] = y->ne[0] = 16;
	x->type = (enum loom_type)99;
	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("leaf 'x': invalid type 99", NULL);
	x->type = LOOM_TYPE_F32;
	fixture_fini(&f);
}

/* Data pointers moved by hand: out of the buffer, and a view that no
 * longer lies where its owner's bytes are. */
static void test_placement(void)
{
	struct fixture f;
	struct loom_tensor *x, *v, *y;
	void *data;

	fixture_init(&f);
	x = named(loom_tensor_new_1d(f.ctx, LOOM_TYPE_F32, 32), "x");
	v = named(loom_view_1d(f.ctx, x, 16, 64), "v");
	y = named(loom_silu(f.ctx, v), "y");
	g_assert_cmpint(loom_graph_expand(f.g, y), ==, LOOM_OK);
	fixture_place(&f);
	g_assert_cmpint(compute(&f), ==, LOOM_OK);

	data = y->data;
	y->data = (char *)loom_buffer_base(f.buf) + loom_buffer_size(f.buf) -
		  8;
	g_assert_cmpint(compute(&f), ==, LOOM_E_RANGE);
	expect_message("node 1 'y' (silu)", "lies outside its buffer", NULL);
	y->data = data;

	data = v->data;
	v->data = (char *)v->data + 4;
	g_assert_cmpint(compute(&f), ==, LOOM_E_STATE);
	expect_message("node 0 'v' (view) does not lie at offset 64 of 'x'",
		       NULL);
	v->data = data;
	g_assert_cmpint(compute(&f), ==, LOOM_OK);
	fixture_fini(&f);
}

/* loom_graph_add_node takes nodes as given: out of order, or in a cycle
 * made by editing a source, compute refuses them. */
static void test_order(void)
{
	struct fixture f;
	struct loom_tensor *x, *h, *s, *a, *b;
	loom_graph_t *g2;

	fixture_init(&f);
	x = named(loom_tensor_new_1d(f.ctx, LOOM_TYPE_F32, 8), "x");
	h = named(loom_add(f.ctx, x, x), "h");
	s = named(loom_silu(f.ctx, h), "s");
	a = named(loom_mul(f.ctx, x, x), "a");
	b = named(loom_add(f.ctx, a, x), "b");
	g_assert_cmpint(loom_graph_add_node(f.g, s), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_add_node(f.g, h), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_new(f.ctx, &g2), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_add_node(g2, a), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_add_node(g2, b), ==, LOOM_OK);
	fixture_place(&f);

	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("node 0 's' (silu) reads 'h' (add), node 1, which "
		       "does not come before it", NULL);

	g_assert_cmpint(loom_backend_graph_compute(f.be, g2), ==, LOOM_OK);
	a->src[1] = b;
	g_assert_cmpint(loom_backend_graph_compute(f.be, g2), ==,
			LOOM_E_INVAL);
	expect_message("node 0 'a' (mul) reads 'b' (add), node 1", NULL);
	/* A source that the graph never saw is refused as well. */
	a->src[1] = h;
	g_assert_cmpint(loom_backend_graph_compute(f.be, g2), ==,
			LOOM_E_INVAL);
	expect_message("node 0 'a' (mul) reads 'h', which is not in the "
		       "graph", NULL);
	a->src[1] = x;
	g_assert_cmpint(loom_backend_graph_compute(f.be, g2), ==, LOOM_OK);
	fixture_fini(&f);
}

/* silu(add(mul_mat(w, a), a)) with w and a differing in K: every call of
 * the chain fails, and the message is mul_mat's. */
static void test_first_error_kept(void)
{
	loom_ctx_t *ctx;
	struct loom_tensor *w, *a, *t;
	const char *want = "mul_mat: a [7, 4, 1, 1] f32 and b [8, 4, 1, 1] "
			   "f32 differ in K (ne0)";

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 7, 4);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 4);
	t = loom_silu(ctx, loom_add(ctx, loom_mul_mat(ctx, w, a), a));
	g_assert_null(t);
	g_assert_cmpstr(loom_ctx_error(ctx), ==, want);
	g_assert_cmpstr(loom_error_message(), ==, want);

	/* A NULL with no mistake before it says so itself. */
	loom_ctx_clear_error(ctx);
	g_assert_null(loom_silu(ctx, NULL));
	g_assert_cmpstr(loom_ctx_error(ctx), ==, "silu: a is NULL");
	loom_ctx_free(ctx);
}

/* Views start and step on element (block) boundaries. */
static void test_misaligned_views(void)
{
	loom_ctx_t *ctx;
	struct loom_tensor *x, *q, *v;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = named(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 32), "x");
	q = named(loom_tensor_new_2d(ctx, LOOM_TYPE_Q8_0, 64, 4), "q");

	g_assert_null(loom_view_1d(ctx, x, 4, 2));
	g_assert_cmpstr(loom_ctx_error(ctx), ==,
			"view: view [4, 1, 1, 1] f32 at offset 2 is not on a "
			"boundary of its 4-byte f32 elements");
	g_assert_null(loom_view_2d(ctx, x, 2, 4, 6, 0));
	g_assert_cmpstr(loom_ctx_error(ctx), ==,
			"view: view [2, 4, 1, 1] f32: stride nb1 = 6 is not a "
			"multiple of its 4-byte f32 elements");
	g_assert_null(loom_view_1d(ctx, q, 32, 17));
	g_assert_cmpstr(loom_ctx_error(ctx), ==,
			"view: view [32, 1, 1, 1] q8_0 at offset 17 is not on "
			"a boundary of its 34-byte q8_0 blocks");
	/* On boundaries they are fine; a view of a view adds offsets. */
	v = loom_view_1d(ctx, x, 8, 4);
	g_assert_nonnull(v);
	g_assert_null(loom_view_1d(ctx, v, 4, 1));
	g_assert_nonnull(strstr(loom_ctx_error(ctx), "at offset 5 is not"));
	g_assert_nonnull(loom_view_1d(ctx, q, 32, 34));
	loom_ctx_free(ctx);
}

/* A raw view node at a misaligned offset is refused at compute. */
static void test_raw_misaligned_view(void)
{
	struct fixture f;
	int64_t ne[4] = { 4, 1, 1, 1 };
	struct loom_tensor *x, *v, *y, *srcs[LOOM_MAX_SRC] = { 0 };

	fixture_init(&f);
	x = named(loom_tensor_new_1d(f.ctx, LOOM_TYPE_F32, 32), "x");
	srcs[0] = x;
	v = named(loom_tensor_new_op(f.ctx, LOOM_OP_VIEW, LOOM_TYPE_F32, ne,
				     srcs, NULL), "v");
	v->view_offs = 6;
	y = named(loom_silu(f.ctx, v), "y");
	g_assert_cmpint(loom_graph_expand(f.g, y), ==, LOOM_OK);
	fixture_place(&f);
	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("node 0 'v' (view): view [4, 1, 1, 1] f32 at offset 6 "
		       "is not on a boundary", NULL);
	fixture_fini(&f);
}

/* loom_copy refuses what loom_tensor_copy refuses: tensors that share
 * bytes.  Both take a tensor copied onto itself (nothing changes). */
static void test_copy_overlap(void)
{
	struct fixture f;
	struct loom_tensor *x, *lo, *hi, *mid, *far, *c, *d;

	fixture_init(&f);
	x = named(loom_tensor_new_1d(f.ctx, LOOM_TYPE_F32, 32), "x");
	lo = named(loom_view_1d(f.ctx, x, 8, 0), "lo");
	hi = named(loom_view_1d(f.ctx, x, 8, 16), "hi");
	mid = named(loom_view_1d(f.ctx, x, 8, 48), "mid");
	far = named(loom_view_1d(f.ctx, x, 8, 64), "far");

	g_assert_null(loom_copy(f.ctx, lo, hi));
	g_assert_cmpstr(loom_ctx_error(f.ctx), ==,
			"copy: 'lo' and 'hi' overlap in their buffer");
	c = loom_copy(f.ctx, lo, far);
	g_assert_nonnull(c);
	g_assert_nonnull(loom_copy(f.ctx, x, x));
	d = loom_silu(f.ctx, mid);
	g_assert_cmpint(loom_graph_expand(f.g, d), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(f.g, c), ==, LOOM_OK);
	fixture_place(&f);

	g_assert_cmpint(loom_tensor_copy(lo, hi), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_tensor_copy: 'lo' and 'hi' overlap in their "
			"buffer");
	g_assert_cmpint(loom_tensor_copy(x, x), ==, LOOM_OK);
	/* Placed, tensors are compared by address. */
	g_assert_null(loom_copy(f.ctx, hi, lo));
	g_assert_cmpstr(loom_ctx_error(f.ctx), ==,
			"copy: 'hi' and 'lo' overlap in their buffer");
	g_assert_cmpint(compute(&f), ==, LOOM_OK);
	/* A copy node whose source was changed to overlap its destination
	 * is refused at compute. */
	c->src[0] = mid;
	g_assert_cmpint(compute(&f), ==, LOOM_E_INVAL);
	expect_message("(copy): 'mid' and 'far' overlap in their buffer",
		       NULL);
	fixture_fini(&f);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/validate/raw-copy-larger", test_raw_copy_larger);
	g_test_add_func("/validate/raw-mul-mat-k", test_raw_mul_mat_k);
	g_test_add_func("/validate/edited-after-placement",
			test_edited_after_placement);
	g_test_add_func("/validate/placement", test_placement);
	g_test_add_func("/validate/order", test_order);
	g_test_add_func("/validate/first-error-kept", test_first_error_kept);
	g_test_add_func("/validate/misaligned-views", test_misaligned_views);
	g_test_add_func("/validate/raw-misaligned-view",
			test_raw_misaligned_view);
	g_test_add_func("/validate/copy-overlap", test_copy_overlap);
	return g_test_run();
}
