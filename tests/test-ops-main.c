/* SPDX-License-Identifier: MIT */
/* test-ops-main.c - tests/test-ops: the op-conformance suite (ops-suite.c)
 * as GLib tests on every device the registry offers, the reference checked
 * on values worked out by hand, and the API's answers to a caller's
 * mistakes.
 *
 * Each case is a GLib test named /ops/<device>/<op>/<case>.  A device
 * whose supports_op refuses a node of a case skips that case, saying
 * which.  loom-conformance (tools/) runs the same cases on an installed
 * Loom; to test a plugin of your own, built out of tree, here:
 *
 *     LOOM_PLUGIN_PATH=/path/to/your/plugin/dir LOOM_BACKENDS=yours \
 *         tests/test-ops
 *
 * runs the suite on every device of your plugin.  Narrow it with
 *     LOOM_TEST_DEVICES=yours0,cpu0   devices by name (comma list)
 *     LOOM_TEST_OPS=mul_mat,add       ops by name (as loom_op_name says;
 *                                     "graph" for the composite cases)
 * and the usual GLib options (-p /ops/yours0/mul_mat, --verbose, -l).
 * A failing case prints its NMSE and bound, or the first elements that
 * differ; --verbose prints every case's NMSE.  On a machine with a GPU,
 * LOOM_TEST_DEVICES=cuda0 runs the suite on that device alone;
 * LOOM_CPU_DEVICES=2 LOOM_META_DEVICES=cpu0,cpu1 adds CPU partitions and
 * a meta device over them.
 * Under `make check`, LOOM_TEST_PLUGIN_PATH points at the uninstalled
 * plugins and is searched after LOOM_PLUGIN_PATH.
 */
#include "ops-suite.h"
#include "ref-ops.h"
#include "test-util.h"

#include <loom/loom-backend.h>

#include <glib.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

struct test_data {
	const struct op_case *c;
	struct ops_dev *d;
};

static GPtrArray *all_devs;  /* of struct ops_dev */
static GPtrArray *all_tests; /* of struct test_data, freed at exit even
			      * for tests that -p left out */

/* ------------------------------------------------------------------------
 * Caller errors through the public API.  Each runs in a subprocess, so a
 * crash or abort fails that test and not the suite.
 */

/* Says why a check failed: on stderr in a subprocess (its stdout is not
 * shown), else as a test message. */
static void G_GNUC_PRINTF(1, 2) note(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (g_test_subprocess())
		g_printerr("%s\n", msg);
	else
		g_test_message("%s", msg);
	g_free(msg);
}

/* Expects expr to give NULL with a message on ctx and on the thread. */
#define EXPECT_NULL(ctx, expr)                                               \
	do {                                                                 \
		struct loom_tensor *r_;                                      \
									     \
		loom_ctx_clear_error(ctx);                                   \
		r_ = (expr);                                                 \
		if (r_) {                                                    \
			note("%s: gave a tensor, expected NULL", #expr);     \
			g_test_fail();                                       \
		} else if (!*loom_ctx_error(ctx) || !*loom_error_message()) {   \
			note("%s: NULL without a message", #expr);           \
			g_test_fail();                                       \
		}                                                            \
	} while (0)

/* Expects call to return the status want (or any error if want is 1). */
#define EXPECT_STATUS(call, want)                                            \
	do {                                                                 \
		int st_ = (call);                                            \
									     \
		if ((want) == 1 ? st_ >= 0 : st_ != (want)) {                \
			note("%s: gave %d (%s), expected %s", #call, st_,    \
			     loom_strerror(st_),                             \
			     (want) == 1 ? "an error" : loom_strerror(want)); \
			g_test_fail();                                       \
		} else if ((want) != LOOM_OK && !*loom_error_message()) {       \
			note("%s: error without a message", #call);          \
			g_test_fail();                                       \
		}                                                            \
	} while (0)

#define ANY_ERROR 1

static void errors_shapes(void)
{
	struct loom_tensor *f4x3, *f3x3, *f4x1, *i4, *q32, *f4x3x2, *t;
	struct loom_tensor *pos3, *pos2, *f32x2, *q32x2, *mask, *ids;
	int64_t bad_ne[LOOM_MAX_DIMS + 1] = { -1, 3, 1, 1, 1 };
	loom_ctx_t *ctx;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	f4x3 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 3);
	f3x3 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 3, 3);
	f4x1 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 1);
	f4x3x2 = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 4, 3, 2);
	i4 = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 4);
	q32 = loom_tensor_new_2d(ctx, LOOM_TYPE_Q8_0, 32, 2);
	f32x2 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 32, 2);
	q32x2 = loom_tensor_new_3d(ctx, LOOM_TYPE_Q8_0, 32, 2, 4);
	pos3 = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 3);
	pos2 = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 2);
	mask = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 5, 3);
	ids = loom_tensor_new_2d(ctx, LOOM_TYPE_I32, 2, 3);
	g_assert_nonnull(f4x3);
	g_assert_nonnull(f3x3);
	g_assert_nonnull(f4x1);
	g_assert_nonnull(f4x3x2);
	g_assert_nonnull(i4);
	g_assert_nonnull(q32);
	g_assert_nonnull(f32x2);
	g_assert_nonnull(q32x2);
	g_assert_nonnull(pos3);
	g_assert_nonnull(pos2);
	g_assert_nonnull(mask);
	g_assert_nonnull(ids);

	/* New tensors. */
	EXPECT_NULL(ctx, loom_tensor_new(ctx, LOOM_TYPE_F32, 2, bad_ne));
	bad_ne[0] = 2;
	EXPECT_NULL(ctx, loom_tensor_new(ctx, LOOM_TYPE_F32, 5, bad_ne));
	EXPECT_NULL(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, 33));
	EXPECT_NULL(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_COUNT, 4));
	/* Binary ops: b must repeat over a; NULL sources; types. */
	EXPECT_NULL(ctx, loom_add(ctx, f4x3, f3x3));
	EXPECT_NULL(ctx, loom_mul(ctx, f4x1, f4x3));
	EXPECT_NULL(ctx, loom_sub(ctx, f4x3, NULL));
	EXPECT_NULL(ctx, loom_div(ctx, NULL, f4x3));
	EXPECT_NULL(ctx, loom_add(ctx, i4, i4));
	EXPECT_NULL(ctx, loom_silu(ctx, NULL));
	EXPECT_NULL(ctx, loom_scale(ctx, i4, 2.0f));
	EXPECT_NULL(ctx, loom_rms_norm(ctx, q32, 1e-6f));
	/* mul_mat: K must agree, b is not quantized, batches repeat. */
	EXPECT_NULL(ctx, loom_mul_mat(ctx, f4x3, f32x2));
	EXPECT_NULL(ctx, loom_mul_mat(ctx, q32, q32));
	EXPECT_NULL(ctx, loom_mul_mat(ctx, f4x3x2,
				      loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							 4, 3, 3)));
	EXPECT_NULL(ctx, loom_mul_mat(ctx, f4x3, i4));
	/* mul_mat_id: ids I32 [n_used, n_tokens]; B1 is 1 or n_used. */
	EXPECT_NULL(ctx, loom_mul_mat_id(ctx, q32x2,
					 loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							    32, 1, 3),
					 f3x3));
	EXPECT_NULL(ctx, loom_mul_mat_id(ctx, q32x2,
					 loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							    32, 3, 3),
					 ids));
	EXPECT_NULL(ctx, loom_mul_mat_id(ctx, q32x2,
					 loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							    16, 1, 3),
					 ids));
	/* Rows. */
	EXPECT_NULL(ctx, loom_get_rows(ctx, f4x3, f4x1));
	EXPECT_NULL(ctx, loom_set_rows(ctx, f4x3, f3x3, pos3));
	EXPECT_NULL(ctx, loom_set_rows(ctx, f4x3, f4x3, f4x1));
	/* rope: n_dims even and <= head_dim; I32 positions, one a token. */
	t = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 8, 2, 3);
	EXPECT_NULL(ctx, loom_rope(ctx, t, pos3, 7, LOOM_ROPE_NORMAL, 1e4f,
				   1.0f));
	EXPECT_NULL(ctx, loom_rope(ctx, t, pos3, 10, LOOM_ROPE_NEOX, 1e4f,
				   1.0f));
	EXPECT_NULL(ctx, loom_rope(ctx, t, pos2, 8, LOOM_ROPE_NORMAL, 1e4f,
				   1.0f));
	EXPECT_NULL(ctx, loom_rope(ctx, t, f3x3, 8, LOOM_ROPE_NORMAL, 1e4f,
				   1.0f));
	/* soft_max: the mask has a's ne0 and at least its rows. */
	EXPECT_NULL(ctx, loom_soft_max(ctx, f4x3, mask, 1.0f));
	EXPECT_NULL(ctx, loom_soft_max(ctx, f4x3, f4x1, 1.0f));
	EXPECT_NULL(ctx, loom_soft_max(ctx, f4x3,
				       loom_tensor_new_2d(ctx, LOOM_TYPE_I32,
							  4, 3), 1.0f));
	/* concat, copy, top_k, argmax. */
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3, f3x3, 1));
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3, f4x3, 4));
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3, f4x3, -1));
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3,
				     loom_tensor_new_2d(ctx, LOOM_TYPE_F16,
							4, 3), 0));
	EXPECT_NULL(ctx, loom_copy(ctx, f4x3, f3x3));
	EXPECT_NULL(ctx, loom_copy(ctx, f4x3, NULL));
	EXPECT_NULL(ctx, loom_top_k(ctx, f4x3, 5));
	EXPECT_NULL(ctx, loom_top_k(ctx, f4x3, -1));
	EXPECT_NULL(ctx, loom_argmax(ctx, f4x3x2));
	/* Views. */
	EXPECT_NULL(ctx, loom_reshape_2d(ctx, f4x3, 5, 2));
	EXPECT_NULL(ctx, loom_reshape_1d(ctx, loom_transpose(ctx, f4x3), 12));
	EXPECT_NULL(ctx, loom_view_1d(ctx, f4x3, 13, 0));
	EXPECT_NULL(ctx, loom_view_1d(ctx, f4x3, 4, 40));
	EXPECT_NULL(ctx, loom_view_2d(ctx, f4x3, 4, 4, 16, 0));
	EXPECT_NULL(ctx, loom_permute(ctx, f4x3, 0, 0, 1, 2));
	EXPECT_NULL(ctx, loom_permute(ctx, f4x3, 0, 1, 2, 4));
	EXPECT_NULL(ctx, loom_transpose(ctx, NULL));
	loom_ctx_free(ctx);
}

/* A device for the data tests: the first CPU device, else the first. */
static loom_dev_t *data_device(void)
{
	loom_dev_t *dev = loom_dev_by_type(LOOM_DEV_TYPE_CPU);

	return dev ? dev : loom_dev_count() ? loom_dev_get(0) : NULL;
}

static void errors_data(void)
{
	loom_dev_t *dev = data_device();
	loom_buffer_type_t *buft;
	loom_buffer_t *buf = NULL, *buf2 = NULL;
	struct loom_tensor *t, *u, *q;
	loom_ctx_t *ctx;
	uint8_t host[256] = { 0 };
	size_t align;

	if (!dev) {
		g_test_skip("no device");
		return;
	}
	buft = loom_dev_buffer_type(dev);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	t = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);      /* 64 bytes */
	q = loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, 64);     /* 68 bytes */
	g_assert_nonnull(t);
	g_assert_nonnull(q);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, buft, &buf), ==,
			LOOM_OK);
	g_assert_nonnull(buf);
	/* Nothing left to place: no buffer, no error. */
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, buft, &buf2), ==,
			LOOM_OK);
	g_assert_null(buf2);
	u = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);      /* never placed */
	g_assert_nonnull(u);

	EXPECT_STATUS(loom_tensor_set(t, host, 0, 64), LOOM_OK);
	EXPECT_STATUS(loom_tensor_get(t, host, 0, 64), LOOM_OK);
	EXPECT_STATUS(loom_tensor_set(t, host, 60, 8), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set(t, host, 0, 65), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set(t, host, 64, 1), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get(t, host, 1, 64), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get(t, host, SIZE_MAX - 2, 4),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set(t, host, 8, SIZE_MAX - 4),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_memset(t, 0, 32, 33), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get(q, host, 0, 69), LOOM_E_RANGE);
	/* 2D: rows past the end, and rows that overlap. */
	EXPECT_STATUS(loom_tensor_set_2d(t, host, 0, 16, 4, 16, 16), LOOM_OK);
	EXPECT_STATUS(loom_tensor_set_2d(t, host, 0, 16, 3, 32, 16),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get_2d(t, host, 8, 16, 4, 16, 16),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get_2d(t, host, 0, 16, 2, SIZE_MAX / 2, 16),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set_2d(t, host, 0, 16, 2, 8, 16),
		      ANY_ERROR);
	/* Unplaced tensors. */
	EXPECT_STATUS(loom_tensor_set(u, host, 0, 4), LOOM_E_STATE);
	EXPECT_STATUS(loom_tensor_get(u, host, 0, 4), LOOM_E_STATE);
	EXPECT_STATUS(loom_tensor_get_2d(u, host, 0, 4, 2, 4, 4),
		      LOOM_E_STATE);
	/* Placing at a misaligned offset, past the end, or twice. */
	align = loom_buffer_type_alignment(buft);
	if (align > 1)
		EXPECT_STATUS(loom_tensor_place(u, buf, 1), LOOM_E_ALIGN);
	EXPECT_STATUS(loom_tensor_place(u, buf, loom_buffer_size(buf) +
					align), ANY_ERROR);

	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* Computing a graph whose tensors have no memory is a caller's mistake
 * too: an error, not a crash. */
static void errors_compute(void)
{
	loom_dev_t *dev = data_device();
	loom_backend_t *be;
	struct loom_tensor *a, *b, *r;
	loom_graph_t *g;
	loom_ctx_t *ctx;

	if (!dev) {
		g_test_skip("no device");
		return;
	}
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);
	b = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);
	r = loom_add(ctx, a, b);
	g_assert_nonnull(r);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, r), ==, LOOM_OK);
	EXPECT_STATUS(loom_backend_graph_compute(be, g), ANY_ERROR);
	EXPECT_STATUS(loom_graph_expand(g, NULL), ANY_ERROR);
	EXPECT_STATUS(loom_backend_synchronize(be), LOOM_OK);
	loom_ctx_free(ctx);
	loom_backend_free(be);
}

static void errors_misc(void)
{
	enum loom_type type;

	g_assert_cmpstr(loom_strerror(LOOM_E_RANGE), !=, "");
	g_assert_cmpstr(loom_strerror(12345), !=, "");
	EXPECT_STATUS(loom_type_from_name("no-such-type", &type),
		      LOOM_E_NOT_FOUND);
	g_assert_null(loom_dev_by_name("no-such-device0"));
	{
		float src[33] = { 0 };
		struct loom_block_q8_0 dst[2];

		EXPECT_STATUS(loom_type_convert(LOOM_TYPE_F32, src, LOOM_TYPE_Q8_0,
					   dst, 33), ANY_ERROR);
		EXPECT_STATUS(loom_type_convert(LOOM_TYPE_F32, src, LOOM_TYPE_I32,
					   dst, 4), LOOM_E_UNSUPPORTED);
	}
}

/* Test functions that run fn in a subprocess of the test program. */
#define IN_SUBPROCESS(fn, needs_device)                                      \
	static void test_##fn(void)                                          \
	{                                                                    \
		if (g_test_subprocess()) {                                   \
			fn();                                                \
			return;                                              \
		}                                                            \
		if ((needs_device) && !data_device()) {                      \
			g_test_skip("no device");                            \
			return;                                              \
		}                                                            \
		g_test_trap_subprocess(NULL, 0,                              \
				       G_TEST_SUBPROCESS_INHERIT_STDERR);    \
		if (!g_test_trap_has_passed()) {                             \
			g_test_message("%s failed or crashed (its reasons "  \
				       "are on stderr)", #fn);               \
			g_test_fail();                                       \
		}                                                            \
	}

IN_SUBPROCESS(errors_shapes, false)
IN_SUBPROCESS(errors_data, true)
IN_SUBPROCESS(errors_compute, true)
IN_SUBPROCESS(errors_misc, false)

/* ------------------------------------------------------------------------
 * The reference and the helpers checked on values worked out by hand, so
 * that a device and the reference cannot agree on a misreading.
 */

static void reference_helpers(void)
{
	const double ref[3] = { 1, -2, 0 }, out[3] = { 1, -2, 0.5 };

	g_assert_cmpfloat(loom_test_fp16_to_double(0x3c00), ==, 1.0);
	g_assert_cmpfloat(loom_test_fp16_to_double(0xc000), ==, -2.0);
	g_assert_cmpfloat(loom_test_fp16_to_double(0x0001), ==, ldexp(1, -24));
	g_assert_cmpfloat(loom_test_fp16_to_double(0x7bff), ==, 65504.0);
	g_assert_true(isinf(loom_test_fp16_to_double(0xfc00)));
	g_assert_cmpfloat(loom_test_bf16_to_double(0x3f80), ==, 1.0);
	g_assert_cmpfloat(loom_test_bf16_to_double(0xc040), ==, -3.0);
	g_assert_cmpfloat(loom_test_nmse(ref, ref, 3), ==, 0.0);
	g_assert_cmpfloat(fabs(loom_test_nmse(ref, out, 3) - 0.05), <, 1e-15);
}

static void reference_ops(void)
{
	const int64_t ne_rope[4] = { 4, 1, 2, 1 }, ne_pos[4] = { 2, 1, 1, 1 };
	const int64_t ne_a[4] = { 2, 2, 1, 1 }, ne_b[4] = { 2, 1, 2, 1 };
	const int64_t ne_row[4] = { 5, 1, 1, 1 }, ne_ids[4] = { 2, 1, 1, 1 };
	struct ref_tensor x, pos, r, a, b, ids;

	/* rope at position 1, n_dims 4: pair 0 turns by 1 radian, pair 1
	 * by 1/base^(1/2).  Normal pairs (x0, x1); neox pairs (x0, x2). */
	ref_tensor_init(&x, ne_rope);
	ref_tensor_init(&pos, ne_pos);
	for (int t = 0; t < 2; t++)
		*ref_at(&x, 0, 0, t, 0) = 1;
	pos.data[0] = 0;
	pos.data[1] = 1;
	ref_rope(&x, &pos, 4, LOOM_ROPE_NORMAL, 100, 1, &r);
	g_assert_cmpfloat(*ref_at(&r, 0, 0, 0, 0), ==, 1);
	g_assert_cmpfloat(*ref_at(&r, 1, 0, 0, 0), ==, 0);
	g_assert_cmpfloat(fabs(*ref_at(&r, 0, 0, 1, 0) - cos(1)), <, 1e-15);
	g_assert_cmpfloat(fabs(*ref_at(&r, 1, 0, 1, 0) - sin(1)), <, 1e-15);
	ref_tensor_free(&r);
	*ref_at(&x, 0, 0, 1, 0) = 0;
	*ref_at(&x, 3, 0, 1, 0) = 1;
	ref_rope(&x, &pos, 4, LOOM_ROPE_NEOX, 100, 0.5, &r);
	/* (x1, x3) = (0, 1) turns by 0.5 / 10. */
	g_assert_cmpfloat(fabs(*ref_at(&r, 1, 0, 1, 0) + sin(0.05)), <, 1e-15);
	g_assert_cmpfloat(fabs(*ref_at(&r, 3, 0, 1, 0) - cos(0.05)), <, 1e-15);
	ref_tensor_free(&r);
	ref_tensor_free(&x);
	ref_tensor_free(&pos);

	/* mul_mat: a is one 2x2 matrix per batch, a2 = 1 broadcasts. */
	ref_tensor_init(&a, ne_a);
	ref_tensor_init(&b, ne_b);
	a.data[0] = 1;
	a.data[1] = 2;
	a.data[2] = 3;
	a.data[3] = 4;
	b.data[0] = 1;
	b.data[1] = 1;
	b.data[2] = 1;
	b.data[3] = -1;
	ref_mul_mat(&a, &b, &r);
	g_assert_cmpint(r.ne[0], ==, 2);
	g_assert_cmpint(r.ne[2], ==, 2);
	g_assert_cmpfloat(r.data[0], ==, 3);
	g_assert_cmpfloat(r.data[1], ==, 7);
	g_assert_cmpfloat(r.data[2], ==, -1);
	g_assert_cmpfloat(r.data[3], ==, -1);
	ref_tensor_free(&r);
	ref_tensor_free(&b);

	/* soft_max with a mask: -inf gives 0, the rest sums to 1. */
	ref_tensor_init(&b, ne_a);
	b.data[1] = -INFINITY;
	b.data[2] = -INFINITY;
	ref_soft_max(&a, &b, 2, &r);
	g_assert_cmpfloat(r.data[0], ==, 1);
	g_assert_cmpfloat(r.data[1], ==, 0);
	g_assert_cmpfloat(r.data[2], ==, 0);
	g_assert_cmpfloat(r.data[3], ==, 1);
	ref_tensor_free(&r);
	ref_tensor_free(&b);
	ref_tensor_free(&a);

	/* top_k and argmax on ties: lower index first. */
	ref_tensor_init(&x, ne_row);
	x.data[0] = 1;
	x.data[1] = 3;
	x.data[2] = 1;
	x.data[3] = 3;
	x.data[4] = 2;
	ref_top_k(&x, 5, &r);
	g_assert_cmpfloat(r.data[0], ==, 1);
	g_assert_cmpfloat(r.data[1], ==, 3);
	g_assert_cmpfloat(r.data[2], ==, 4);
	g_assert_cmpfloat(r.data[3], ==, 0);
	g_assert_cmpfloat(r.data[4], ==, 2);
	ref_tensor_free(&r);
	ref_argmax(&x, &r);
	g_assert_cmpfloat(r.data[0], ==, 1);
	ref_tensor_free(&r);

	/* get_rows picks the rows ids name. */
	ref_tensor_init(&ids, ne_ids);
	ids.data[0] = 4;
	ids.data[1] = 1;
	{
		const int64_t ne_col[4] = { 1, 5, 1, 1 };
		struct ref_tensor col = { { 0 }, NULL };

		ref_cpy(&x, ne_col, &col);
		ref_get_rows(&col, &ids, &r);
		g_assert_cmpfloat(r.data[0], ==, 2);
		g_assert_cmpfloat(r.data[1], ==, 3);
		ref_tensor_free(&r);
		ref_tensor_free(&col);
	}
	ref_tensor_free(&ids);
	ref_tensor_free(&x);
}

/* loom_test_get_doubles on a device's memory: types, and a strided view. */
static void reference_get_doubles(void)
{
	loom_dev_t *dev = data_device();
	const float v[6] = { 0.5f, -1, 2, 3.25f, -4, 0 };
	struct loom_tensor *f32, *f16, *q, *t;
	loom_buffer_t *buf;
	loom_ctx_t *ctx;
	float qv[64];
	double *d;
	char *err = NULL;

	if (!dev) {
		g_test_skip("no device");
		return;
	}
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	f32 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 3, 2);
	f16 = loom_tensor_new_2d(ctx, LOOM_TYPE_F16, 3, 2);
	q = loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, 64);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_test_set_f32(f32, v), ==, LOOM_OK);
	g_assert_cmpint(loom_test_set_f32(f16, v), ==, LOOM_OK);
	/* With a block maximum of 127/32 the scale is 1/32, and multiples of
	 * 1/32 quantize exactly. */
	for (int i = 0; i < 64; i++)
		qv[i] = (float)((i * 37) % 255 - 127) / 32;
	qv[5] = 127.0f / 32;
	qv[40] = -127.0f / 32;
	g_assert_cmpint(loom_test_set_f32(q, qv), ==, LOOM_OK);

	t = loom_transpose(ctx, f32);
	g_assert_nonnull(t);
	g_assert_nonnull(t->data);
	d = loom_test_get_doubles(t, &err);
	g_assert_nonnull(d);
	/* t[i0, i1] = f32[i1, i0]: 0.5, 3.25, -1, -4, 2, 0. */
	g_assert_cmpfloat(d[0], ==, 0.5);
	g_assert_cmpfloat(d[1], ==, 3.25);
	g_assert_cmpfloat(d[2], ==, -1);
	g_assert_cmpfloat(d[5], ==, 0);
	g_free(d);
	d = loom_test_get_doubles(f16, &err);
	g_assert_nonnull(d);
	for (int i = 0; i < 6; i++)
		g_assert_cmpfloat(d[i], ==, v[i]);
	g_free(d);
	d = loom_test_get_doubles(q, &err);
	g_assert_nonnull(d);
	for (int i = 0; i < 64; i++)
		g_assert_cmpfloat(d[i], ==, qv[i]);
	g_free(d);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

IN_SUBPROCESS(reference_get_doubles, true)

/* ------------------------------------------------------------------------
 * Registration.
 */

static void report_message(const char *msg, void *data)
{
	g_test_message("%s", msg);
}

static void report_fail(void *data)
{
	g_test_fail();
}

static void report_skip(const char *why, void *data)
{
	g_test_skip(why);
}

static const struct ops_report glib_report = {
	.message = report_message,
	.fail = report_fail,
	.skip = report_skip,
};

static void run_case(gconstpointer data)
{
	const struct test_data *td = data;

	ops_case_run(td->c, td->d);
}

static void skip_with(gconstpointer reason)
{
	g_test_skip(reason);
}

static void fail_load(gconstpointer msg)
{
	g_test_message("%s", (const char *)msg);
	g_test_fail();
}

static void free_dev(gpointer p)
{
	struct ops_dev *d = p;

	ops_dev_clear(d);
	g_free(d);
}

int main(int argc, char **argv)
{
	static char load_error[512];
	char **args = g_new0(char *, argc + 2);
	int st, ret;

	/* One failing case must not hide the others. */
	for (int i = 0; i < argc; i++)
		args[i] = argv[i];
	args[argc++] = (char *)"--keep-going";
	argv = args;
	g_test_init(&argc, &argv, NULL);
	all_devs = g_ptr_array_new_with_free_func(free_dev);
	all_tests = g_ptr_array_new_with_free_func(g_free);
	ops_set_report(&glib_report);

	st = loom_test_load_plugins();
	if (st != LOOM_OK) {
		g_snprintf(load_error, sizeof(load_error),
			   "loom_load_all: %s: %s", loom_strerror(st),
			   loom_error_message());
		if (g_getenv("LOOM_BACKENDS"))
			g_test_add_data_func("/ops/load", load_error,
					     fail_load);
		else
			g_test_message("%s", load_error);
	}

	g_test_add_func("/ops/reference/helpers", reference_helpers);
	g_test_add_func("/ops/reference/ops", reference_ops);
	g_test_add_func("/ops/reference/get-doubles",
			test_reference_get_doubles);
	g_test_add_func("/ops/errors/shapes", test_errors_shapes);
	g_test_add_func("/ops/errors/data", test_errors_data);
	g_test_add_func("/ops/errors/compute", test_errors_compute);
	g_test_add_func("/ops/errors/misc", test_errors_misc);

	ops_cases_make();
	for (size_t i = 0; i < loom_dev_count(); i++) {
		loom_dev_t *dev = loom_dev_get(i);
		struct ops_dev *d;

		if (!ops_list_has(g_getenv("LOOM_TEST_DEVICES"),
				  loom_dev_name(dev)))
			continue;
		d = g_new0(struct ops_dev, 1);
		d->dev = dev;
		d->name = loom_dev_name(dev);
		g_ptr_array_add(all_devs, d);
	}
	if (!all_devs->len)
		g_test_add_data_func("/ops/no-device",
				     "no device selected (see "
				     "LOOM_PLUGIN_PATH, LOOM_BACKENDS, "
				     "LOOM_TEST_DEVICES)",
				     skip_with);
	for (guint i = 0; i < all_devs->len; i++) {
		struct ops_dev *d = all_devs->pdata[i];

		for (size_t j = 0; j < ops_case_count(); j++) {
			const struct op_case *c = ops_case_get(j);
			struct test_data *td;
			char *path;

			if (!ops_list_has(g_getenv("LOOM_TEST_OPS"),
					  ops_case_op(c)))
				continue;
			td = g_new0(struct test_data, 1);
			td->c = c;
			td->d = d;
			g_ptr_array_add(all_tests, td);
			path = g_strdup_printf("/ops/%s/%s/%s", d->name,
					       ops_case_op(c),
					       ops_case_name(c));
			g_test_add_data_func(path, td, run_case);
			g_free(path);
		}
	}

	ret = g_test_run();

	g_ptr_array_free(all_tests, TRUE);
	g_ptr_array_free(all_devs, TRUE);
	ops_cases_free();
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	g_free(args);
	return ret;
}
