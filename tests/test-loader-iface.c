/* SPDX-License-Identifier: MIT */
/* test-loader-iface.c - part of test-loader: the interface constructors
 * check required slots and copy at most size, and data crossing the
 * interface to the statically registered fake device. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <grp.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include <loom/loom-plugin.h>

#include "backend-private.h" /* loom__abi_check, compiled in */
#include "fake-plugin.h"
#include "loader-cases.h"

/* ------------------------------------------------------------------------
 * Interfaces: constructors check required slots and copy at most size.
 */

static const char *t_name(loom_reg_t *reg)
{
	return "tables";
}

static size_t t_count(loom_reg_t *reg)
{
	return 0;
}

static loom_dev_t *t_dev(loom_reg_t *reg, size_t i)
{
	return NULL;
}

static void *t_proc(loom_reg_t *reg, const char *name)
{
	return (void *)t_proc;
}

static void test_tables(void)
{
	struct loom_reg_iface ri = {
		.size = sizeof(ri),
		.get_name = t_name,
		.get_dev_count = t_count,
	};
	struct loom_dev_iface di = { .size = sizeof(di) };
	struct loom_buffer_type_iface bi = { .size = 0 };
	loom_reg_t *reg = (loom_reg_t *)1;
	loom_dev_t *dev = (loom_dev_t *)1;
	loom_buffer_type_t *buft = (loom_buffer_type_t *)1;

	g_assert_cmpint(loom_reg_new(&ri, NULL, &reg), ==, LOOM_E_PLUGIN);
	g_assert_null(reg);
	g_assert_cmpstr(loom_error_message(), ==,
			"reg 'tables': missing required method get_dev");
	g_assert_cmpint(loom_reg_new(NULL, NULL, &reg), ==, LOOM_E_INVAL);

	/* A table from an older plugin: slots past size read NULL. */
	ri.get_dev = t_dev;
	ri.get_proc_address = t_proc;
	ri.size = offsetof(struct loom_reg_iface, get_proc_address);
	g_assert_cmpint(loom_reg_new(&ri, NULL, &reg), ==, LOOM_OK);
	g_assert_null(loom_reg_proc_address(reg, "anything"));

	g_assert_cmpint(loom_dev_new(reg, &di, NULL, &dev), ==, LOOM_E_PLUGIN);
	g_assert_null(dev);
	g_assert_cmpstr(loom_error_message(), ==,
			"device: missing required method get_name");
	g_assert_cmpint(loom_buffer_type_new(reg, NULL, &bi, NULL, &buft), ==,
			LOOM_E_PLUGIN);
	g_assert_null(buft);
	g_assert_nonnull(strstr(loom_error_message(), "interface size 0"));
	g_assert_cmpint(loom_dev_new(NULL, &di, NULL, &dev), ==, LOOM_E_INVAL);

	/* The reg was never registered; it is the test's to forget.  Load
	 * and unload to make sure the registry does not know it. */
	g_assert_cmpuint(loom_reg_count(), ==, 0);
	free(reg);
}

/* ------------------------------------------------------------------------
 * Data crossing the interface (the statically registered fake device).
 */

struct data_fixture {
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	struct fake_control *ctl;
	loom_ctx_t *ctx;
};

static void data_setup(struct data_fixture *d, gconstpointer unused)
{
	fake_control_fn fn;

	logged = g_string_new("");
	loom_log_set_callback(capture_log, NULL);
	g_assert_cmpint(loom_load_static(&fake_static_desc, &d->reg), ==,
			LOOM_OK);
	d->dev = loom_dev_by_name("static0");
	g_assert_nonnull(d->dev);
	d->buft = loom_dev_buffer_type(d->dev);
	g_assert_nonnull(d->buft);
	fn = (fake_control_fn)loom_reg_proc_address(d->reg, FAKE_CONTROL);
	g_assert_nonnull(fn);
	d->ctl = fn();
	g_assert_cmpint(loom_ctx_new(0, &d->ctx), ==, LOOM_OK);
}

static void data_teardown(struct data_fixture *d, gconstpointer unused)
{
	loom_ctx_free(d->ctx);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	loom_log_set_callback(NULL, NULL);
	g_string_free(logged, TRUE);
	logged = NULL;
}

static void test_buffers(struct data_fixture *d, gconstpointer unused)
{
	loom_buffer_t *buf = (loom_buffer_t *)1;

	g_assert_cmpstr(loom_buffer_type_name(d->buft), ==, "static_host");
	g_assert_cmpuint(loom_buffer_type_alignment(d->buft), ==, 32);
	g_assert_cmpuint(loom_buffer_type_max_size(d->buft), ==, (size_t)1 << 30);
	g_assert_true(loom_buffer_type_is_host(d->buft));
	g_assert_true(loom_buffer_type_device(d->buft) == d->dev);
	g_assert_true(loom_dev_supports_buft(d->dev, d->buft));

	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 100, &buf), ==,
			LOOM_OK);
	g_assert_cmpuint(loom_buffer_size(buf), ==, 100);
	g_assert_nonnull(loom_buffer_base(buf));
	g_assert_true(loom_buffer_get_type(buf) == d->buft);
	g_assert_cmpint(loom_buffer_clear(buf, 7), ==, LOOM_OK);
	g_assert_cmpint(((uint8_t *)loom_buffer_base(buf))[99], ==, 7);
	loom_buffer_set_usage(buf, LOOM_BUFFER_USAGE_WEIGHTS);
	g_assert_cmpint(loom_buffer_usage(buf), ==, LOOM_BUFFER_USAGE_WEIGHTS);
	loom_buffer_free(buf);
	loom_buffer_free(NULL);

	/* Larger than the type allows: refused before the plugin runs. */
	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, (size_t)2 << 30, &buf),
			==, LOOM_E_NOMEM);
	g_assert_null(buf);
	/* A plugin returning less than asked is caught. */
	d->ctl->short_alloc = 1;
	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 100, &buf), ==,
			LOOM_E_PLUGIN);
	g_assert_null(buf);
	g_assert_cmpstr(loom_error_message(), ==,
			"buffer type 'static_host': asked for 100 bytes, got "
			"a buffer of 99 bytes");
	d->ctl->short_alloc = 0;
	/* A non-power-of-two alignment is replaced, with a warning. */
	d->ctl->bad_align = 1;
	g_assert_cmpuint(loom_buffer_type_alignment(d->buft), ==, 64);
	g_assert_nonnull(strstr(logged->str, "not a power of two"));
	d->ctl->bad_align = 0;

	g_assert_cmpint(loom_buffer_type_alloc_buffer(NULL, 1, &buf), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 1, NULL), ==,
			LOOM_E_INVAL);
}

static void test_set_get(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *t = loom_tensor_new_1d(d->ctx, LOOM_TYPE_F32, 16);
	struct loom_tensor *u = loom_tensor_new_1d(d->ctx, LOOM_TYPE_F32, 16);
	loom_buffer_t *buf;
	float in[16], out[16];
	size_t nb;

	for (int i = 0; i < 16; i++)
		in[i] = (float)i * 0.5f;
	loom_tensor_set_name(t, "t");
	/* Unplaced. */
	g_assert_cmpint(loom_tensor_set(t, in, 0, 4), ==, LOOM_E_STATE);
	g_assert_cmpstr(loom_error_message(), ==,
			"loom_tensor_set: tensor 't' is not placed in a "
			"buffer");
	g_assert_cmpint(loom_tensor_get(t, out, 0, 4), ==, LOOM_E_STATE);
	g_assert_cmpint(loom_tensor_set(NULL, in, 0, 4), ==, LOOM_E_INVAL);

	g_assert_cmpint(loom_buffer_type_alloc_buffer(d->buft, 256, &buf), ==,
			LOOM_OK);
	/* Misaligned, and too far. */
	g_assert_cmpint(loom_tensor_place(t, buf, 4), ==, LOOM_E_ALIGN);
	g_assert_null(t->data);
	g_assert_cmpint(loom_tensor_place(t, buf, 224), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_place(t, buf, SIZE_MAX - 31), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_place(t, buf, 0), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_place(u, buf, 64), ==, LOOM_OK);
	g_assert_true(t->buffer == buf);
	g_assert_cmpint(d->ctl->n_init_tensor, ==, 2);

	nb = loom_tensor_n_bytes(t);
	g_assert_cmpuint(nb, ==, sizeof(in));
	g_assert_cmpint(loom_tensor_set(t, in, 0, nb), ==, LOOM_OK);
	memset(out, 0, sizeof(out));
	g_assert_cmpint(loom_tensor_get(t, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	/* Bounds: past the end, and offsets that overflow. */
	g_assert_cmpint(loom_tensor_set(t, in, 4, nb), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_get(t, out, nb + 1, 0), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set(t, in, SIZE_MAX, 2), ==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_get(t, out, 8, SIZE_MAX - 4), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set(t, NULL, 0, 4), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_set(t, NULL, 0, 0), ==, LOOM_OK);

	/* memset through the plugin's method. */
	g_assert_cmpint(loom_tensor_memset(t, 0, 8, 8), ==, LOOM_OK);
	g_assert_cmpint(d->ctl->n_memset, ==, 1);
	g_assert_cmpint(loom_tensor_get(t, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpfloat(out[1], ==, in[1]);
	g_assert_cmpfloat(out[2], ==, 0.0f);
	g_assert_cmpfloat(out[3], ==, 0.0f);
	g_assert_cmpfloat(out[4], ==, in[4]);
	g_assert_cmpint(loom_tensor_memset(t, 0, 8, nb), ==, LOOM_E_RANGE);

	/* Copy: through the plugin, declined (staged), and sizes that
	 * differ. */
	g_assert_cmpint(loom_tensor_set(t, in, 0, nb), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_copy(t, u), ==, LOOM_OK);
	g_assert_cmpint(d->ctl->n_copy, ==, 1);
	memset(out, 0, sizeof(out));
	g_assert_cmpint(loom_tensor_get(u, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	d->ctl->decline_copy = 1;
	g_assert_cmpint(loom_tensor_memset(u, 0, 0, nb), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_copy(t, u), ==, LOOM_OK);
	g_assert_cmpint(d->ctl->n_copy, ==, 1);
	g_assert_cmpint(loom_tensor_get(u, out, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	{
		struct loom_tensor *small =
			loom_tensor_new_1d(d->ctx, LOOM_TYPE_F32, 8);

		g_assert_cmpint(loom_tensor_place(small, buf, 128), ==,
				LOOM_OK);
		g_assert_cmpint(loom_tensor_copy(t, small), ==, LOOM_E_INVAL);
	}
	g_assert_cmpint(loom_tensor_copy(NULL, u), ==, LOOM_E_INVAL);
	loom_buffer_free(buf);
}

/* set_2d/get_2d against a plain reference, through the plugin's entry
 * point (dst on the static fake) and through the core's loop. */
static void test_2d(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *t = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 8, 6);
	loom_buffer_t *buf;
	uint8_t host[6 * 40], back[6 * 40], ref[8 * 6 * 4];
	size_t nb;

	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &buf), ==,
			LOOM_OK);
	nb = loom_tensor_n_bytes(t);
	g_assert_cmpuint(nb, ==, sizeof(ref));
	for (size_t i = 0; i < sizeof(host); i++)
		host[i] = (uint8_t)(i * 7 + 3);
	memset(ref, 0, sizeof(ref));
	g_assert_cmpint(loom_tensor_memset(t, 0, 0, nb), ==, LOOM_OK);
	/* Rows of 12 bytes from offset 4, tensor stride 32, host stride 40. */
	for (size_t r = 0; r < 6; r++)
		memcpy(ref + 4 + r * 32, host + r * 40, 12);
	g_assert_cmpint(loom_tensor_set_2d(t, host, 4, 12, 6, 32, 40), ==,
			LOOM_OK);
	g_assert_cmpint(d->ctl->n_set_2d, ==, 1);
	g_assert_cmpint(loom_tensor_get(t, back, 0, nb), ==, LOOM_OK);
	g_assert_cmpmem(ref, nb, back, nb);
	memset(back, 0xee, sizeof(back));
	g_assert_cmpint(loom_tensor_get_2d(t, back, 4, 12, 6, 32, 40), ==,
			LOOM_OK);
	g_assert_cmpint(d->ctl->n_get_2d, ==, 1);
	for (size_t r = 0; r < 6; r++)
		g_assert_cmpmem(back + r * 40, 12, host + r * 40, 12);

	/* Out of bounds by one byte in the last row; overlapping rows;
	 * strides that overflow; NULL data; nothing to copy. */
	g_assert_cmpint(loom_tensor_set_2d(t, host, 21, 12, 6, 32, 40), ==,
			LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set_2d(t, host, 0, 33, 2, 32, 40), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_get_2d(t, back, 0, 12, 2, 32, 8), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_get_2d(t, back, 0, 1, 3, SIZE_MAX / 2, 1),
			==, LOOM_E_RANGE);
	g_assert_cmpint(loom_tensor_set_2d(t, NULL, 0, 4, 2, 32, 4), ==,
			LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_set_2d(t, host, 0, 4, 0, 32, 4), ==,
			LOOM_OK);
	g_assert_cmpint(d->ctl->n_set_2d, ==, 1);
	g_assert_cmpint(d->ctl->n_get_2d, ==, 1);
	loom_buffer_free(buf);
}

static void test_views_alloc(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *a = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 4, 3);
	struct loom_tensor *b = loom_tensor_new_1d(d->ctx, LOOM_TYPE_F16, 5);
	struct loom_tensor *v = loom_view_1d(d->ctx, a, 4, 16);
	loom_buffer_t *buf, *again;
	float row[4] = { 1, 2, 3, 4 }, out[4];

	g_assert_nonnull(v);
	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &buf), ==,
			LOOM_OK);
	g_assert_nonnull(buf);
	g_assert_true(a->buffer == buf && b->buffer == buf &&
		      v->buffer == buf);
	g_assert_true((char *)v->data == (char *)a->data + 16);
	g_assert_cmpuint(((uintptr_t)b->data - (uintptr_t)a->data) % 32, ==, 0);
	g_assert_cmpuint(loom_buffer_size(buf), ==, 64 + 10);
	/* A write through the view lands in its source. */
	g_assert_cmpint(loom_tensor_set(v, row, 0, sizeof(row)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_get(a, out, 16, sizeof(out)), ==, LOOM_OK);
	g_assert_cmpmem(row, sizeof(row), out, sizeof(out));
	/* Nothing left to place. */
	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &again), ==,
			LOOM_OK);
	g_assert_null(again);
	/* Views are placed with init_view, not place. */
	g_assert_cmpint(loom_tensor_place(v, buf, 0), ==, LOOM_E_INVAL);
	g_assert_cmpint(loom_tensor_init_view(a), ==, LOOM_E_INVAL);
	loom_buffer_free(buf);
	{
		loom_ctx_t *ctx;
		struct loom_tensor *big, *w;

		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
		big = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 1 << 15, 1 << 14);
		g_assert_nonnull(big);
		g_assert_cmpint(loom_ctx_alloc_tensors(ctx, d->buft, &again),
				==, LOOM_E_NOMEM);
		g_assert_nonnull(strstr(loom_error_message(), "more than"));
		g_assert_null(big->data);
		w = loom_view_1d(ctx, big, 4, 0);
		g_assert_cmpint(loom_tensor_init_view(w), ==, LOOM_E_STATE);
		loom_ctx_free(ctx);
	}
}

static void test_backend(struct data_fixture *d, gconstpointer unused)
{
	struct loom_tensor *t = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 4, 4);
	struct loom_tensor *u = loom_tensor_new_2d(d->ctx, LOOM_TYPE_F32, 4, 4);
	loom_backend_t *be;
	loom_event_t *ev;
	loom_buffer_t *buf, *buf2;
	loom_graph_t *g;
	float in[16], out[16];

	for (int i = 0; i < 16; i++)
		in[i] = (float)(i * i) - 3.0f;
	g_assert_cmpint(loom_dev_init_backend(d->dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpstr(loom_backend_name(be), ==, "static");
	g_assert_true(loom_backend_device(be) == d->dev);
	g_assert_false(loom_backend_supports_op(be, t));
	g_assert_cmpint(loom_backend_set_n_threads(be, 2), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_cmpint(loom_backend_set_n_threads(be, 0), ==, LOOM_E_INVAL);

	/* Unplaced, then the async fallbacks (synchronize, then blocking). */
	g_assert_cmpint(loom_backend_tensor_set_async(be, t, in, 0, 4), ==,
			LOOM_E_STATE);
	g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft, &buf), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_set_async(be, t, in, 0,
						      sizeof(in)),
			==, LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_set_async(be, t, in, 4,
						      sizeof(in)),
			==, LOOM_E_RANGE);
	g_assert_cmpint(loom_backend_tensor_copy_async(be, be, t, u), ==,
			LOOM_OK);
	g_assert_cmpint(loom_backend_tensor_get_2d_async(be, u, out, 0, 8, 4,
							 16, 8),
			==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	for (int r = 0; r < 4; r++)
		g_assert_cmpmem(out + 2 * r, 8, in + 4 * r, 8);
	g_assert_cmpint(loom_backend_tensor_get_async(be, u, out, 0,
						      sizeof(out)),
			==, LOOM_OK);
	g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
	g_assert_cmpint(loom_backend_tensor_set_2d_async(be, t, in, 60, 8, 1,
							 0, 0),
			==, LOOM_E_RANGE);

	/* Emulated events. */
	g_assert_cmpint(loom_event_new(d->dev, &ev), ==, LOOM_OK);
	g_assert_true(loom_event_device(ev) == d->dev);
	g_assert_cmpint(loom_event_record(ev, be), ==, LOOM_OK);
	g_assert_cmpint(loom_event_wait(be, ev), ==, LOOM_OK);
	g_assert_cmpint(loom_event_synchronize(ev), ==, LOOM_OK);
	loom_event_free(ev);
	g_assert_cmpint(loom_event_record(NULL, be), ==, LOOM_E_INVAL);

	/* Graphs: unplaced nodes are refused before the plugin sees them. */
	g_assert_cmpint(loom_graph_new(d->ctx, &g), ==, LOOM_OK);
	{
		struct loom_tensor *sum = loom_add(d->ctx, t, u);

		g_assert_nonnull(sum);
		g_assert_cmpint(loom_graph_expand(g, sum), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
				LOOM_E_STATE);
		g_assert_cmpint(d->ctl->n_compute, ==, 0);
		g_assert_cmpint(loom_ctx_alloc_tensors(d->ctx, d->buft,
						       &buf2),
				==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g), ==,
				LOOM_OK);
		g_assert_cmpint(d->ctl->n_compute, ==, 1);
		loom_buffer_free(buf2);
	}
	g_assert_cmpint(loom_backend_graph_compute(be, NULL), ==, LOOM_E_INVAL);
	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_backend_free(NULL);
}

void add_iface_tests(void)
{
#define D(path, fn)                                                          \
	g_test_add(path, struct data_fixture, NULL, data_setup, fn,         \
		   data_teardown)
	g_test_add_func("/iface/tables", test_tables);
	D("/iface/buffers", test_buffers);
	D("/iface/set-get", test_set_get);
	D("/iface/2d", test_2d);
	D("/iface/views-alloc", test_views_alloc);
	D("/iface/backend", test_backend);
#undef D
}
