/* SPDX-License-Identifier: MIT */
/* test-galloc.c - the graph allocator over a host buffer type registered
 * by a small plugin linked into this test: reuse (smaller than the sum of
 * the intermediates, flat in the layer count) and no overlap between
 * tensors that are live at the same time, checked by walking the graph. */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-plugin.h"

#define ALIGN 64

/* ------------------------------------------------------------------------
 * The in-test host plugin: one device with one malloc buffer type.
 */
static loom_dev_t *host_dev;
static loom_buffer_type_t *host_buft;

static void *buf_base(loom_buffer_t *buf)
{
	return loom_buffer_context(buf);
}

static void buf_free(loom_buffer_t *buf)
{
	free(loom_buffer_context(buf));
}

static int buf_set(loom_buffer_t *buf, struct loom_tensor *t,
		   const void *data, size_t offset, size_t size)
{
	memcpy((char *)t->data + offset, data, size);
	return LOOM_OK;
}

static int buf_get(loom_buffer_t *buf, const struct loom_tensor *t,
		   void *data, size_t offset, size_t size)
{
	memcpy(data, (const char *)t->data + offset, size);
	return LOOM_OK;
}

static int buf_clear(loom_buffer_t *buf, uint8_t value)
{
	memset(loom_buffer_context(buf), value, loom_buffer_size(buf));
	return LOOM_OK;
}

static const struct loom_buffer_iface buf_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buf_free,
	.get_base = buf_base,
	.set_tensor = buf_set,
	.get_tensor = buf_get,
	.clear = buf_clear,
};

static const char *buft_name(loom_buffer_type_t *buft)
{
	return "testhost";
}

static int buft_alloc(loom_buffer_type_t *buft, size_t size,
		      loom_buffer_t **out)
{
	void *mem = aligned_alloc(ALIGN, (size + ALIGN) & ~(size_t)(ALIGN - 1));
	int err;

	if (!mem)
		return LOOM_E_NOMEM;
	err = loom_buffer_new(buft, &buf_iface, mem, size, out);
	if (err)
		free(mem);
	return err;
}

static size_t buft_alignment(loom_buffer_type_t *buft)
{
	return ALIGN;
}

static bool buft_is_host(loom_buffer_type_t *buft)
{
	return true;
}

static const struct loom_buffer_type_iface buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = buft_name,
	.alloc_buffer = buft_alloc,
	.get_alignment = buft_alignment,
	.is_host = buft_is_host,
};

static const char *dev_name(loom_dev_t *dev)
{
	return "testhost0";
}

static enum loom_dev_type dev_type(loom_dev_t *dev)
{
	return LOOM_DEV_TYPE_CPU;
}

static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	return LOOM_E_UNSUPPORTED;
}

static loom_buffer_type_t *dev_buft(loom_dev_t *dev)
{
	return host_buft;
}

static bool dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	return false;
}

static const struct loom_dev_iface dev_iface = {
	.size = sizeof(struct loom_dev_iface),
	.get_name = dev_name,
	.get_type = dev_type,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_buft,
	.supports_op = dev_supports_op,
};

static const char *reg_name(loom_reg_t *reg)
{
	return "testhost";
}

static size_t reg_dev_count(loom_reg_t *reg)
{
	return 1;
}

static loom_dev_t *reg_dev(loom_reg_t *reg, size_t i)
{
	return host_dev;
}

static const struct loom_reg_iface reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = reg_name,
	.get_dev_count = reg_dev_count,
	.get_dev = reg_dev,
};

static int host_init(loom_reg_t **out)
{
	loom_reg_t *reg;
	int err;

	err = loom_reg_new(&reg_iface, NULL, &reg);
	if (err)
		return err;
	err = loom_dev_new(reg, &dev_iface, NULL, &host_dev);
	if (err)
		return err;
	err = loom_buffer_type_new(reg, host_dev, &buft_iface, NULL, &host_buft);
	if (err)
		return err;
	*out = reg;
	return LOOM_OK;
}

static const struct loom_plugin_desc host_desc = {
	.abi_major = LOOM_ABI_MAJOR,
	.abi_minor = LOOM_ABI_MINOR,
	.name = "testhost",
	.version = "1",
	.init = host_init,
	.size = sizeof(struct loom_plugin_desc),
};

/* ------------------------------------------------------------------------
 * Checking a placed graph.
 */
static struct loom_tensor *owner(struct loom_tensor *t)
{
	while (t->view_src)
		t = t->view_src;
	return t;
}

/* Walks g as it runs.  A tensor is live from its step (leaves: from the
 * start) to the last step that reads it or a view of it (to the end when
 * flagged or read by nobody).  Tensors of buf that are live at one step
 * must not share bytes.  Returns the sum of the placed owners' sizes. */
static size_t check_no_overlap(loom_graph_t *g, loom_buffer_t *buf)
{
	int n = loom_graph_n_nodes(g), nl = loom_graph_n_leaves(g);
	GHashTable *first = g_hash_table_new(NULL, NULL);
	GHashTable *last = g_hash_table_new(NULL, NULL);
	GPtrArray *owners = g_ptr_array_new();
	char *base = loom_buffer_base(buf);
	size_t size = loom_buffer_size(buf), sum = 0;

	for (int i = 0; i < nl; i++) {
		struct loom_tensor *l = loom_graph_leaf(g, i);

		g_assert_nonnull(l->data);
		if (l->buffer == buf) {
			g_hash_table_insert(first, l, GINT_TO_POINTER(0));
			g_ptr_array_add(owners, l);
		}
	}
	for (int i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		g_assert_nonnull(t->data);
		if (t->view_src) {
			g_assert_true((char *)t->data ==
				      (char *)t->view_src->data + t->view_offs);
		} else if (t->buffer == buf) {
			g_hash_table_insert(first, t, GINT_TO_POINTER(i + 1));
			g_ptr_array_add(owners, t);
		}
		for (int j = 0; j < LOOM_MAX_SRC; j++)
			if (t->src[j])
				g_hash_table_insert(last, owner(t->src[j]),
						    GINT_TO_POINTER(i + 1));
	}
	for (guint a = 0; a < owners->len; a++) {
		struct loom_tensor *x = owners->pdata[a];
		char *xs = x->data, *xe = xs + loom_tensor_n_bytes(x);
		int xf = GPOINTER_TO_INT(g_hash_table_lookup(first, x));
		int xl = GPOINTER_TO_INT(g_hash_table_lookup(last, x));

		g_assert_true(xs >= base && xe <= base + size);
		g_assert_cmpuint((size_t)(xs - base) % ALIGN, ==, 0);
		if (!xl || (x->flags & (LOOM_TENSOR_INPUT |
					LOOM_TENSOR_OUTPUT)))
			xl = n + 1;
		sum += loom_tensor_n_bytes(x);
		for (guint b = 0; b < owners->len; b++) {
			struct loom_tensor *y = owners->pdata[b];
			char *ys = y->data, *ye = ys + loom_tensor_n_bytes(y);
			int yf = GPOINTER_TO_INT(g_hash_table_lookup(first, y));

			/* y is written while x is still needed. */
			if (y == x || yf < xf || yf > xl)
				continue;
			if (ys < xe && xs < ye)
				g_error("%s (steps %d..%d) and %s (written at "
					"%d) overlap", x->name, xf, xl,
					y->name, yf);
		}
	}
	g_ptr_array_free(owners, TRUE);
	g_hash_table_destroy(first);
	g_hash_table_destroy(last);
	return sum;
}

/* ------------------------------------------------------------------------
 * A stack of identical layers: weights in their own buffer, intermediates
 * through the allocator.  Each layer goes through views, so a view of an
 * intermediate must keep it alive.
 */
#define D 64
#define T 8

struct model {
	loom_ctx_t *wctx;
	loom_ctx_t *ctx;
	loom_buffer_t *wbuf;
	loom_graph_t *g;
	struct loom_tensor *x;
	struct loom_tensor *out;
};

static void model_build(struct model *m, int layers)
{
	struct loom_tensor *x;

	memset(m, 0, sizeof(*m));
	g_assert_cmpint(loom_ctx_new(0, &m->wctx), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &m->ctx), ==, LOOM_OK);
	x = m->x = loom_tensor_new_2d(m->ctx, LOOM_TYPE_F32, D, T);
	loom_tensor_set_name(x, "x");
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	for (int l = 0; l < layers; l++) {
		struct loom_tensor *w, *b, *up, *gate, *down, *h, *r;

		w = loom_tensor_new_2d(m->wctx, LOOM_TYPE_F16, D, D);
		b = loom_tensor_new_1d(m->wctx, LOOM_TYPE_F32, 2 * D);
		up = loom_tensor_new_2d(m->wctx, LOOM_TYPE_Q8_0, D, 4 * D);
		gate = loom_tensor_new_2d(m->wctx, LOOM_TYPE_Q8_0, D, 4 * D);
		down = loom_tensor_new_2d(m->wctx, LOOM_TYPE_F16, 4 * D, D);
		loom_tensor_set_name_fmt(w, "w%d", l);
		loom_tensor_set_name_fmt(b, "b%d", l);

		/* A mixer that goes through views of its intermediates. */
		h = loom_mul_mat(m->ctx, w, loom_rms_norm(m->ctx, x, 1e-5f));
		r = loom_reshape_2d(m->ctx, h, 2 * D, T / 2);
		h = loom_silu(m->ctx, loom_add(m->ctx, r, b));
		h = loom_reshape_2d(m->ctx, h, D, T);
		x = loom_add(m->ctx, x, loom_scale(m->ctx, h, 0.5f));

		/* A feed-forward block four times wider than x. */
		h = loom_rms_norm(m->ctx, x, 1e-5f);
		r = loom_silu(m->ctx, loom_mul_mat(m->ctx, gate, h));
		h = loom_mul(m->ctx, r, loom_mul_mat(m->ctx, up, h));
		x = loom_add(m->ctx, x, loom_mul_mat(m->ctx, down, h));
		loom_tensor_set_name_fmt(x, "x%d", l);
	}
	g_assert_nonnull(x);
	m->out = x;
	loom_tensor_set_flags(x, LOOM_TENSOR_OUTPUT);
	g_assert_cmpint(loom_ctx_alloc_tensors(m->wctx, host_buft, &m->wbuf),
			==, LOOM_OK);
	g_assert_cmpint(loom_graph_new(m->ctx, &m->g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(m->g, x), ==, LOOM_OK);
}

static void model_free(struct model *m)
{
	loom_buffer_free(m->wbuf);
	loom_ctx_free(m->ctx);
	loom_ctx_free(m->wctx);
}

static void test_layers(void)
{
	static const int layer_counts[] = { 2, 8, 32, 256 };
	size_t first_size = 0;

	for (size_t k = 0; k < G_N_ELEMENTS(layer_counts); k++) {
		int layers = layer_counts[k];
		loom_galloc_t *ga;
		struct model m;
		size_t reserved, sum;

		model_build(&m, layers);
		g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
		g_assert_cmpuint(loom_galloc_buffer_size(ga), ==, 0);
		g_assert_cmpint(loom_galloc_reserve(ga, m.g), ==, LOOM_OK);
		reserved = loom_galloc_buffer_size(ga);
		g_assert_cmpuint(reserved, >, 0);
		g_assert_cmpint(loom_buffer_usage(loom_galloc_buffer(ga)), ==,
				LOOM_BUFFER_USAGE_COMPUTE);
		/* reserve places nothing. */
		g_assert_null(m.out->data);
		g_assert_cmpint(loom_galloc_alloc_graph(ga, m.g), ==, LOOM_OK);
		g_assert_cmpuint(loom_galloc_buffer_size(ga), ==, reserved);
		sum = check_no_overlap(m.g, loom_galloc_buffer(ga));
		g_test_message("%d layers: %zu nodes, buffer %zu bytes, "
			       "intermediates %zu bytes",
			       layers, loom_graph_n_nodes(m.g), reserved, sum);
		g_assert_cmpuint(reserved, <, sum);
		if (!first_size)
			first_size = reserved;
		g_assert_cmpuint(reserved, ==, first_size);
		/* Placed tensors are left alone the second time. */
		{
			void *out_data = m.out->data;

			g_assert_cmpint(loom_galloc_alloc_graph(ga, m.g), ==,
					LOOM_OK);
			g_assert_true(m.out->data == out_data);
		}
		loom_galloc_free(ga);
		model_free(&m);
	}
}

/* Leaves without data are placed and kept until read; outputs are never
 * reused; a graph that outgrows the buffer grows it. */
static void test_leaves_outputs_growth(void)
{
	loom_ctx_t *ctx;
	loom_galloc_t *ga;
	loom_graph_t *g, *big;
	struct loom_tensor *a, *b, *keep, *y, *z;
	size_t small;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 32, 4);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 32, 4);
	loom_tensor_set_name(a, "a");
	loom_tensor_set_name(b, "b");
	keep = loom_silu(ctx, a);
	loom_tensor_set_name(keep, "keep");
	loom_tensor_set_flags(keep, LOOM_TENSOR_OUTPUT);
	y = loom_add(ctx, keep, b);
	for (int i = 0; i < 6; i++)
		y = loom_scale(ctx, y, 2);
	loom_tensor_set_name(y, "y");
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, y), ==, LOOM_OK);

	g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	small = loom_galloc_buffer_size(ga);
	g_assert_nonnull(a->data);
	g_assert_nonnull(b->data);
	check_no_overlap(g, loom_galloc_buffer(ga));
	for (size_t i = 0; i < loom_graph_n_nodes(g); i++) {
		struct loom_tensor *n = loom_graph_node(g, i);
		char *ks = keep->data, *ns = n->data;

		if (n != keep)
			g_assert_true(ns + loom_tensor_n_bytes(n) <= ks ||
				      ks + loom_tensor_n_bytes(keep) <= ns);
	}

	/* The same graph, grown after it was placed: it moves into the
	 * grown buffer whole, and nothing overlaps. */
	{
		struct loom_tensor *w = loom_tensor_new_2d(ctx, LOOM_TYPE_F32,
							   512, 16);

		w = loom_add(ctx, loom_silu(ctx, w), loom_sum_rows(ctx, w));
		w = loom_add(ctx, loom_scale(ctx, w, 2), loom_sum_rows(ctx, y));
		g_assert_cmpint(loom_graph_expand(g, w), ==, LOOM_OK);
		g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
		g_assert_cmpuint(loom_galloc_buffer_size(ga), >, small);
		check_no_overlap(g, loom_galloc_buffer(ga));
		g_assert_nonnull(y->data);
		g_assert_true(y->buffer == loom_galloc_buffer(ga));
		small = loom_galloc_buffer_size(ga);
	}

	/* A wider graph in a new context needs more: alloc_graph grows. */
	{
		loom_ctx_t *ctx2;

		g_assert_cmpint(loom_ctx_new(0, &ctx2), ==, LOOM_OK);
		z = loom_tensor_new_2d(ctx2, LOOM_TYPE_F32, 1024, 16);
		z = loom_gelu(ctx2, loom_silu(ctx2, z));
		g_assert_cmpint(loom_graph_new(ctx2, &big), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(big, z), ==, LOOM_OK);
		g_assert_cmpint(loom_galloc_alloc_graph(ga, big), ==,
				LOOM_OK);
		g_assert_cmpuint(loom_galloc_buffer_size(ga), >, small);
		check_no_overlap(big, loom_galloc_buffer(ga));
		loom_ctx_free(ctx2);
	}

	g_assert_cmpint(loom_galloc_reserve(NULL, g), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, NULL), ==, LOOM_E_INVAL);
	{
		loom_galloc_t *none;

		g_assert_cmpint(loom_galloc_new(NULL, &none), ==,
				LOOM_E_INVAL);
		g_assert_null(none);
	}
	loom_galloc_free(ga);
	loom_galloc_free(NULL);
	loom_ctx_free(ctx);
}

/* A view of an intermediate read late keeps the intermediate alive, and
 * a set_rows into a cache outside the compute buffer gets the cache's
 * memory. */
static void test_views_keep_alive(void)
{
	loom_ctx_t *ctx, *wctx;
	loom_buffer_t *wbuf;
	loom_galloc_t *ga;
	loom_graph_t *g;
	struct loom_tensor *x, *h, *v, *y, *cache, *ids, *st, *out;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	cache = loom_tensor_new_2d(wctx, LOOM_TYPE_F16, 64, 16);
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, host_buft, &wbuf), ==,
			LOOM_OK);
	/* A view of a placed tensor has its data at once. */
	v = loom_view_1d(ctx, cache, 64, cache->nb[1]);
	g_assert_true((char *)v->data == (char *)cache->data + cache->nb[1]);
	g_assert_true(v->buffer == wbuf);

	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, 4);
	ids = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 4);
	h = loom_silu(ctx, x);
	loom_tensor_set_name(h, "h");
	v = loom_view_1d(ctx, h, 64, 64 * sizeof(float));
	y = h;
	for (int i = 0; i < 8; i++)
		y = loom_scale(ctx, y, 1.5f);
	st = loom_set_rows(ctx, cache, y, ids);
	out = loom_add(ctx, loom_view_2d(ctx, st, 64, 4, st->nb[1], 0),
		       loom_add(ctx, y, v));
	g_assert_nonnull(out);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, out), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	check_no_overlap(g, loom_galloc_buffer(ga));
	g_assert_true((char *)v->data == (char *)h->data + 256);
	g_assert_true(st->data == cache->data);
	g_assert_true(cache->buffer == wbuf);
	loom_galloc_free(ga);
	loom_buffer_free(wbuf);
	loom_ctx_free(ctx);
	loom_ctx_free(wctx);
}

/* Ops whose result is a view of a weight (copy into a weight's view,
 * set_rows into a cache) write in place: the allocator places nothing for
 * them, and the compute buffer is the size it is without them.  A view of
 * a view of an intermediate read last keeps the intermediate alive. */
static void test_in_place_and_views_of_views(void)
{
	loom_ctx_t *ctx, *wctx;
	loom_buffer_t *wbuf, *cbuf;
	loom_galloc_t *ga;
	loom_graph_t *g1, *g2;
	struct loom_tensor *w, *cache, *ids, *x, *h, *y, *wv, *c1, *s1;
	struct loom_tensor *v1, *v2, *late;
	size_t size1;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &wctx), ==, LOOM_OK);
	w = loom_tensor_new_2d(wctx, LOOM_TYPE_F32, 64, 16);
	cache = loom_tensor_new_2d(wctx, LOOM_TYPE_F16, 64, 32);
	ids = loom_tensor_new_1d(wctx, LOOM_TYPE_I32, 4);
	g_assert_cmpint(loom_ctx_alloc_tensors(wctx, host_buft, &wbuf), ==,
			LOOM_OK);

	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, 4);
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	h = loom_silu(ctx, x);
	y = loom_scale(ctx, h, 0.5f);
	g_assert_cmpint(loom_graph_new(ctx, &g1), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g1, y), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_reserve(ga, g1), ==, LOOM_OK);
	size1 = loom_galloc_buffer_size(ga);
	loom_galloc_free(ga);

	wv = loom_view_2d(ctx, w, 64, 4, w->nb[1], 4 * w->nb[1]);
	c1 = loom_copy(ctx, y, wv);
	s1 = loom_set_rows(ctx, cache, y, ids);
	g_assert_nonnull(c1);
	g_assert_nonnull(s1);
	g_assert_cmpint(loom_graph_new(ctx, &g2), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g2, c1), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g2, s1), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g2), ==, LOOM_OK);
	cbuf = loom_galloc_buffer(ga);
	g_assert_cmpuint(loom_galloc_buffer_size(ga), ==, size1);
	g_assert_true(c1->buffer == wbuf);
	g_assert_true((char *)c1->data == (char *)w->data + 4 * w->nb[1]);
	g_assert_true(s1->buffer == wbuf && s1->data == cache->data);
	g_assert_true(w->buffer == wbuf && cache->buffer == wbuf);
	for (size_t i = 0; i < loom_graph_n_nodes(g2); i++) {
		struct loom_tensor *n = loom_graph_node(g2, i);

		if (n->buffer == cbuf)
			g_assert_true(owner(n) != w && owner(n) != cache);
	}
	check_no_overlap(g2, cbuf);
	loom_galloc_free(ga);

	/* A view of a view of h, read after a long chain: h stays.  (A new
	 * context: the tensors above point into the freed buffer.) */
	loom_ctx_free(ctx);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, 4);
	h = loom_silu(ctx, x);
	y = loom_scale(ctx, h, 0.5f);
	v1 = loom_view_2d(ctx, h, 32, 4, h->nb[1], 32 * sizeof(float));
	v2 = loom_view_1d(ctx, v1, 16, 8 * sizeof(float));
	g_assert_true(v2->view_src == h);
	late = y;
	for (int i = 0; i < 8; i++)
		late = loom_silu(ctx, late);
	late = loom_add(ctx, loom_view_1d(ctx, late, 16, 0), v2);
	g_assert_nonnull(late);
	g_assert_cmpint(loom_graph_new(ctx, &g1), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g1, late), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g1), ==, LOOM_OK);
	check_no_overlap(g1, loom_galloc_buffer(ga));
	g_assert_true((char *)v2->data ==
		      (char *)h->data + 40 * sizeof(float));
	loom_galloc_free(ga);

	loom_buffer_free(wbuf);
	loom_ctx_free(ctx);
	loom_ctx_free(wctx);
}

/* A graph output that is a view (a reshape nobody reads) is an output like
 * any other: what it views must not be reused by the nodes after it. */
static void test_view_outputs_kept(void)
{
	loom_ctx_t *ctx;
	loom_galloc_t *ga;
	loom_graph_t *g;
	struct loom_tensor *x, *a, *r, *z;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	x = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 64, 4);
	loom_tensor_set_flags(x, LOOM_TENSOR_INPUT);
	a = loom_silu(ctx, x);
	r = loom_reshape_1d(ctx, a, 256);
	z = x;
	for (int i = 0; i < 6; i++)
		z = loom_scale(ctx, z, 2);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, r), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, z), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, g), ==, LOOM_OK);
	g_assert_true(r->data == a->data);
	for (size_t i = 0; i < loom_graph_n_nodes(g); i++) {
		struct loom_tensor *n = loom_graph_node(g, i);
		char *as = a->data, *ns = n->data;

		if (owner(n) != a)
			g_assert_true(ns + loom_tensor_n_bytes(n) <= as ||
				      as + loom_tensor_n_bytes(a) <= ns);
	}
	loom_galloc_free(ga);
	loom_ctx_free(ctx);
}

/* One allocator for two graphs, the second larger: growing the buffer for
 * it leaves the first graph's tensors pointing at memory that is gone, so
 * placing the first graph again must move them into the new buffer. */
static void test_outgrown_buffer(void)
{
	loom_ctx_t *ctx;
	loom_galloc_t *ga;
	loom_graph_t *small, *big;
	struct loom_tensor *a, *b, *v;
	void *old_base;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 16, 4);
	a = loom_scale(ctx, loom_silu(ctx, a), 2);
	v = loom_view_1d(ctx, a, 16, 0);
	a = loom_add(ctx, a, v);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 1024, 64);
	b = loom_scale(ctx, loom_silu(ctx, b), 2);
	g_assert_cmpint(loom_graph_new(ctx, &small), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(small, a), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_new(ctx, &big), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(big, b), ==, LOOM_OK);

	g_assert_cmpint(loom_galloc_new(host_buft, &ga), ==, LOOM_OK);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, small), ==, LOOM_OK);
	old_base = loom_buffer_base(loom_galloc_buffer(ga));
	g_assert_true(a->buffer == loom_galloc_buffer(ga));
	g_assert_cmpint(loom_galloc_alloc_graph(ga, big), ==, LOOM_OK);
	g_assert_true(loom_buffer_base(loom_galloc_buffer(ga)) != old_base ||
		      loom_galloc_buffer(ga) != a->buffer);
	/* A view made now of a tensor in the outgrown buffer waits. */
	g_assert_null(loom_view_1d(ctx, a, 8, 0)->data);
	g_assert_cmpint(loom_galloc_alloc_graph(ga, small), ==, LOOM_OK);
	for (size_t i = 0; i < loom_graph_n_nodes(small); i++)
		g_assert_true(loom_graph_node(small, i)->buffer ==
			      loom_galloc_buffer(ga));
	g_assert_true((char *)v->data == (char *)owner(v)->data);
	check_no_overlap(small, loom_galloc_buffer(ga));
	loom_galloc_free(ga);
	loom_ctx_free(ctx);
}

/* loom_ctx_alloc_tensors: every owner aligned, views of views pointed
 * into their owner, nothing placed twice. */
static void test_ctx_alloc(void)
{
	loom_ctx_t *ctx;
	loom_buffer_t *buf, *again;
	struct loom_tensor *a, *b, *c, *v1, *v2;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_1d(ctx, LOOM_TYPE_F16, 5);
	v1 = loom_view_1d(ctx, a, 4, 2);
	v2 = loom_view_1d(ctx, v1, 2, 4);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_Q8_0, 32, 3);
	c = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 1);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, host_buft, &buf), ==,
			LOOM_OK);
	g_assert_true(a->buffer == buf && b->buffer == buf &&
		      c->buffer == buf && v2->buffer == buf);
	g_assert_cmpuint((uintptr_t)a->data % ALIGN, ==, 0);
	g_assert_cmpuint((uintptr_t)b->data % ALIGN, ==, 0);
	g_assert_cmpuint((uintptr_t)c->data % ALIGN, ==, 0);
	g_assert_true((char *)v2->data == (char *)a->data + 6);
	g_assert_cmpuint(loom_buffer_size(buf), ==, 3 * ALIGN + 4);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, host_buft, &again), ==,
			LOOM_OK);
	g_assert_null(again);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

int main(int argc, char **argv)
{
	loom_reg_t *reg;
	int ret;

	g_test_init(&argc, &argv, NULL);
	if (loom_load_static(&host_desc, &reg) != LOOM_OK)
		g_error("cannot register the test plugin: %s",
			loom_error_message());
	g_test_add_func("/galloc/layers", test_layers);
	g_test_add_func("/galloc/leaves-outputs-growth",
			test_leaves_outputs_growth);
	g_test_add_func("/galloc/views-keep-alive", test_views_keep_alive);
	g_test_add_func("/galloc/in-place-views-of-views",
			test_in_place_and_views_of_views);
	g_test_add_func("/galloc/ctx-alloc", test_ctx_alloc);
	g_test_add_func("/galloc/outgrown-buffer", test_outgrown_buffer);
	g_test_add_func("/galloc/view-outputs-kept", test_view_outputs_kept);
	ret = g_test_run();
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	return ret;
}
