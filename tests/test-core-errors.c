/* SPDX-License-Identifier: MIT */
/* test-core-errors.c - every public function of loom.h and loom-backend.h
 * (and the constructors of loom-plugin.h) called with a caller's mistake:
 * NULL pointers, bad enums, sizes whose products overflow, views outside
 * their source.  Each must return its error (or NULL) with a message in
 * loom_error_message(), and nothing may abort. */
#include <glib.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <loom/loom-plugin.h>

#include "fake-plugin.h"

extern const struct loom_plugin_desc fake_static_desc;

/* Forgets this thread's last error, so that each check sees its own. */
static void reset(void)
{
	loom_error_set(LOOM_OK, "%s", "");
	g_assert_cmpstr(loom_error_message(), ==, "");
}

static void check_msg(const char *what)
{
	if (!*loom_error_message())
		g_error("%s: no message in loom_error_message()", what);
}

/* A status call that must fail with want and say why. */
#define FAILS(want, call)                                                    \
	do {                                                                 \
		reset();                                                     \
		g_assert_cmpint((call), ==, (want));                         \
		check_msg(#call);                                            \
	} while (0)

/* A constructor that must return NULL and say why. */
#define REFUSED(call)                                                        \
	do {                                                                 \
		reset();                                                     \
		g_assert_null(call);                                         \
		check_msg(#call);                                            \
	} while (0)

static GString *logged;

static void capture_log(enum loom_log_level level, const char *msg,
			void *userdata)
{
	g_string_append_printf(logged, "%d %s\n", (int)level, msg);
}

/* ------------------------------------------------------------------------
 * Status, log, types.
 */
static void test_status_log_types(void)
{
	enum loom_type type;
	float f[32];

	g_assert_cmpstr(loom_strerror(12345), ==, "unknown status");
	g_assert_cmpstr(loom_strerror(LOOM_E_IO), ==, "input/output error");
	/* A NULL format is a message of its own, not a crash. */
	g_assert_cmpint(loom_error_set(LOOM_E_INVAL, NULL), ==, LOOM_E_INVAL);
	check_msg("loom_error_set(NULL)");

	logged = g_string_new("");
	loom_log_set_callback(capture_log, NULL);
	loom_log(LOOM_LOG_ERROR, NULL);
	loom_log((enum loom_log_level)99, "%s", "never shown");
	loom_log((enum loom_log_level)-1, "%s", "never shown");
	g_assert_null(strstr(logged->str, "never shown"));
	/* A level outside the enum is refused; the level stays. */
	loom_log_set_level(LOOM_LOG_INFO);
	reset();
	loom_log_set_level((enum loom_log_level)99);
	check_msg("loom_log_set_level(99)");
	g_assert_cmpint(loom_log_get_level(), ==, LOOM_LOG_INFO);
	reset();
	loom_log_set_level((enum loom_log_level)-1);
	check_msg("loom_log_set_level(-1)");
	g_assert_cmpint(loom_log_get_level(), ==, LOOM_LOG_INFO);
	loom_log_set_level(LOOM_LOG_WARN);
	loom_log_set_callback(NULL, NULL);
	g_string_free(logged, TRUE);

	g_assert_cmpstr(loom_type_name((enum loom_type)-1), ==, "unknown");
	g_assert_cmpint(loom_type_block_size(LOOM_TYPE_COUNT), ==, 0);
	g_assert_cmpuint(loom_type_size((enum loom_type)-7), ==, 0);
	g_assert_false(loom_type_is_quantized(LOOM_TYPE_COUNT));
	g_assert_cmpstr(loom_op_name((enum loom_op)-1), ==, "unknown");
	g_assert_false(loom_op_is_view(LOOM_OP_COUNT));
	FAILS(LOOM_E_INVAL, loom_type_from_name(NULL, &type));
	FAILS(LOOM_E_INVAL, loom_type_from_name("f32", NULL));
	/* Row sizes that do not fit in a size_t are 0, not wrapped. */
	g_assert_cmpuint(loom_type_row_size(LOOM_TYPE_F32, INT64_MAX), ==, 0);
	g_assert_cmpuint(loom_type_row_size(LOOM_TYPE_F32, (int64_t)1 << 62), ==,
			 0);
	g_assert_cmpuint(loom_type_row_size(LOOM_TYPE_F16, -2), ==, 0);
	g_assert_cmpuint(loom_type_row_size(LOOM_TYPE_COUNT, 4), ==, 0);
	FAILS(LOOM_E_INVAL,
	      loom_type_convert(LOOM_TYPE_F32, f, (enum loom_type)-1, f, 32));
	FAILS(LOOM_E_INVAL, loom_type_convert(LOOM_TYPE_F32, f, LOOM_TYPE_F16, NULL,
					 32));
	FAILS(LOOM_E_INVAL, loom_type_convert(LOOM_TYPE_F32, f, LOOM_TYPE_F16, f,
					 -1));
	g_assert_cmpstr(loom_dev_type_name((enum loom_dev_type)99), ==,
			"unknown");
	g_assert_cmpstr(loom_plugin_state_name((enum loom_plugin_state)-1), ==,
			"unknown");
}

/* ------------------------------------------------------------------------
 * Contexts, tensors, sizes.
 */
static void test_tensors(void)
{
	const int64_t big = (int64_t)1 << 62;
	loom_ctx_t *ctx;
	struct loom_tensor *a;

	FAILS(LOOM_E_INVAL, loom_ctx_new(0, NULL));
	g_assert_cmpstr(loom_ctx_error(NULL), ==, "");
	loom_ctx_clear_error(NULL);
	g_assert_null(loom_ctx_first_tensor(NULL));
	g_assert_null(loom_ctx_get_tensor(NULL, "x"));
	g_assert_cmpuint(loom_ctx_n_tensors(NULL), ==, 0);
	loom_ctx_free(NULL);

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 4);
	g_assert_nonnull(a);
	g_assert_null(loom_ctx_next_tensor(ctx, NULL));
	g_assert_null(loom_ctx_get_tensor(ctx, NULL));

	REFUSED(loom_tensor_new_1d(NULL, LOOM_TYPE_F32, 4));
	REFUSED(loom_tensor_new(ctx, LOOM_TYPE_F32, 2, NULL));
	REFUSED(loom_tensor_new(ctx, LOOM_TYPE_F32, 0, a->ne));
	REFUSED(loom_tensor_new(ctx, LOOM_TYPE_F32, -1, a->ne));
	REFUSED(loom_tensor_new_1d(ctx, (enum loom_type)-1, 4));
	REFUSED(loom_tensor_new_1d(ctx, LOOM_TYPE_COUNT, 4));
	REFUSED(loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 4, 4, -4));
	REFUSED(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, INT64_MIN));
	/* Sizes whose bytes wrap around a size_t: a row of 2^62 + 1 floats
	 * is 2^64 + 4 bytes, which must not pass as 4. */
	REFUSED(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, big + 1));
	REFUSED(loom_tensor_new_1d(ctx, LOOM_TYPE_F32, INT64_MAX));
	REFUSED(loom_tensor_new_2d(ctx, LOOM_TYPE_I32, 1, big));
	REFUSED(loom_tensor_new_4d(ctx, LOOM_TYPE_F16, 1 << 20, 1 << 20,
				   1 << 20, 1 << 20));
	REFUSED(loom_tensor_new_4d(ctx, LOOM_TYPE_F32, (int64_t)1 << 40,
				   (int64_t)1 << 40, 0, 1));
	REFUSED(loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, INT64_MAX / 32 * 32));
	REFUSED(loom_tensor_dup(ctx, NULL));
	REFUSED(loom_tensor_dup(NULL, a));
	/* A zero-sized dimension is fine. */
	g_assert_nonnull(loom_tensor_new_4d(ctx, LOOM_TYPE_F32, big / 4, 0,
					    big / 4, 1));

	/* Helpers answer for NULL. */
	g_assert_cmpint(loom_tensor_n_rows(NULL), ==, 0);
	g_assert_cmpint(loom_tensor_n_dims(NULL), ==, 0);
	g_assert_false(loom_tensor_same_shape(a, NULL));
	g_assert_false(loom_tensor_can_repeat(a, NULL));
	loom_tensor_set_name(NULL, "x");
	loom_tensor_set_name(a, NULL);
	g_assert_cmpstr(a->name, ==, "");
	g_assert_null(loom_tensor_set_name_fmt(NULL, "%d", 1));
	g_assert_true(loom_tensor_set_name_fmt(a, NULL) == a);
	loom_tensor_set_flags(NULL, LOOM_TENSOR_INPUT);
	g_assert_cmpfloat(loom_tensor_op_param_f32(NULL, 0), ==, 0);
	g_assert_cmpint(loom_tensor_op_param_i32(a, LOOM_MAX_OP_PARAMS), ==, 0);

	/* A span whose strides overflow reads as SIZE_MAX, never small. */
	{
		struct loom_tensor probe = *a;

		probe.ne[1] = 3;
		probe.nb[1] = SIZE_MAX / 2 + 1;
		g_assert_cmpuint(loom_tensor_n_bytes(&probe), ==, SIZE_MAX);
	}
	loom_ctx_free(ctx);
}

/* Every op constructor refuses a NULL context and NULL sources. */
static void test_ops(void)
{
	loom_ctx_t *ctx;
	struct loom_tensor *a, *b, *ids, *pos, *q;
	const int64_t ne[LOOM_MAX_DIMS] = { 8, 4, 1, 1 };
	const int64_t qmax = INT64_MAX / 34 * 32;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 4);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 4);
	ids = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 4);
	pos = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 1);

	REFUSED(loom_add(NULL, a, b));
	REFUSED(loom_sub(ctx, NULL, b));
	REFUSED(loom_mul(ctx, a, NULL));
	REFUSED(loom_div(NULL, NULL, NULL));
	REFUSED(loom_scale(NULL, a, 1));
	REFUSED(loom_silu(NULL, a));
	REFUSED(loom_gelu(ctx, NULL));
	REFUSED(loom_rms_norm(NULL, a, 1e-5f));
	REFUSED(loom_norm(ctx, NULL, 1e-5f));
	REFUSED(loom_norm(ctx, a, INFINITY));
	REFUSED(loom_soft_max(NULL, a, NULL, 1));
	REFUSED(loom_soft_max(ctx, NULL, NULL, 1));
	REFUSED(loom_rope(NULL, a, pos, 8, LOOM_ROPE_NORMAL, 1e4f, 1));
	REFUSED(loom_rope(ctx, a, NULL, 8, LOOM_ROPE_NORMAL, 1e4f, 1));
	REFUSED(loom_rope(ctx, a, pos, 8, (enum loom_rope_mode)7, 1e4f, 1));
	REFUSED(loom_rope(ctx, a, pos, 8, LOOM_ROPE_NORMAL, 1e4f, NAN));
	REFUSED(loom_mul_mat(NULL, a, b));
	REFUSED(loom_mul_mat(ctx, a, NULL));
	REFUSED(loom_mul_mat_id(NULL, a, b, ids));
	REFUSED(loom_mul_mat_id(ctx, a, b, NULL));
	REFUSED(loom_get_rows(NULL, a, ids));
	REFUSED(loom_get_rows(ctx, NULL, ids));
	REFUSED(loom_set_rows(NULL, a, b, ids));
	REFUSED(loom_set_rows(ctx, a, NULL, ids));
	REFUSED(loom_copy(NULL, a, b));
	REFUSED(loom_copy(ctx, a, NULL));
	REFUSED(loom_cont(NULL, a));
	REFUSED(loom_concat(NULL, a, b, 0));
	REFUSED(loom_concat(ctx, a, NULL, 0));
	REFUSED(loom_concat(ctx, a, b, INT32_MIN));
	REFUSED(loom_sum_rows(NULL, a));
	REFUSED(loom_argmax(ctx, NULL));
	REFUSED(loom_top_k(NULL, a, 1));
	REFUSED(loom_top_k(ctx, a, -1));

	/* Two tensors that each fit, whose concatenation does not. */
	q = loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, qmax);
	g_assert_nonnull(q);
	REFUSED(loom_concat(ctx, q, q, 0));

	/* The raw constructor checks its op, type and sizes. */
	REFUSED(loom_tensor_new_op(NULL, LOOM_OP_ADD, LOOM_TYPE_F32, ne, NULL,
				   NULL));
	REFUSED(loom_tensor_new_op(ctx, LOOM_OP_ADD, LOOM_TYPE_F32, NULL, NULL,
				   NULL));
	REFUSED(loom_tensor_new_op(ctx, (enum loom_op)-1, LOOM_TYPE_F32, ne,
				   NULL, NULL));
	REFUSED(loom_tensor_new_op(ctx, LOOM_OP_ADD, LOOM_TYPE_COUNT, ne, NULL,
				   NULL));
	/* View-like ops need what they view or write. */
	REFUSED(loom_tensor_new_op(ctx, LOOM_OP_VIEW, LOOM_TYPE_F32, ne, NULL,
				   NULL));
	{
		struct loom_tensor *srcs[LOOM_MAX_SRC] = { a };

		REFUSED(loom_tensor_new_op(ctx, LOOM_OP_COPY, LOOM_TYPE_F32, ne,
					   srcs, NULL));
		g_assert_nonnull(loom_tensor_new_op(ctx, LOOM_OP_RESHAPE,
						    LOOM_TYPE_F32, ne, srcs,
						    NULL));
	}
	loom_ctx_free(ctx);
}

/* Views: sizes, strides and offsets must stay inside the source. */
static void test_views(void)
{
	const int64_t big = (int64_t)1 << 62;
	loom_ctx_t *ctx;
	struct loom_tensor *a, *v;
	size_t n;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 4);
	n = loom_tensor_n_bytes(a);

	REFUSED(loom_view_1d(NULL, a, 1, 0));
	REFUSED(loom_view_2d(ctx, NULL, 1, 1, 4, 0));
	REFUSED(loom_view_3d(ctx, NULL, 1, 1, 1, 4, 4, 0));
	REFUSED(loom_view_4d(ctx, NULL, 1, 1, 1, 1, 4, 4, 4, 0));
	REFUSED(loom_view_1d(ctx, a, -1, 0));
	REFUSED(loom_view_2d(ctx, a, 8, -4, 32, 0));
	/* 2^62 + 1 floats span 2^64 + 4 bytes, not 4. */
	REFUSED(loom_view_1d(ctx, a, big + 1, 0));
	REFUSED(loom_view_1d(ctx, a, INT64_MAX, 0));
	/* Strides whose products wrap around. */
	REFUSED(loom_view_2d(ctx, a, 1, 3, SIZE_MAX / 2 + 1, 0));
	REFUSED(loom_view_2d(ctx, a, 1, 2, SIZE_MAX, 0));
	REFUSED(loom_view_4d(ctx, a, 1, 1, 1, 2, 4, 4, SIZE_MAX / 2 + 1, 0));
	REFUSED(loom_view_3d(ctx, a, 2, 2, 2, 8, SIZE_MAX - 3, 0));
	/* Offsets past the end, or that overflow with the view's own. */
	REFUSED(loom_view_1d(ctx, a, 1, n));
	REFUSED(loom_view_1d(ctx, a, 0, n + 1));
	REFUSED(loom_view_1d(ctx, a, 1, SIZE_MAX));
	v = loom_view_1d(ctx, a, 4, 16);
	g_assert_nonnull(v);
	REFUSED(loom_view_1d(ctx, v, 1, SIZE_MAX - 15));
	/* A view of a view stays inside the owner, not only the view. */
	g_assert_nonnull(loom_view_1d(ctx, v, 8, 0));
	REFUSED(loom_view_1d(ctx, v, 8, n - 16 - 4 * 7));
	/* Rows that overlap are fine to read; the end still counts. */
	g_assert_nonnull(loom_view_2d(ctx, a, 8, 4, 0, 0));

	REFUSED(loom_reshape_1d(NULL, a, 32));
	REFUSED(loom_reshape_2d(ctx, NULL, 32, 1));
	REFUSED(loom_reshape_2d(ctx, a, -32, -1));
	REFUSED(loom_reshape_4d(ctx, a, (int64_t)1 << 32, (int64_t)1 << 32,
				(int64_t)1 << 32, 0));
	REFUSED(loom_reshape_4d(ctx, a, big, 4, 4, 0));
	REFUSED(loom_permute(NULL, a, 0, 1, 2, 3));
	REFUSED(loom_permute(ctx, NULL, 0, 1, 2, 3));
	REFUSED(loom_permute(ctx, a, 1, 1, 2, 3));
	REFUSED(loom_permute(ctx, a, 0, 0, 0, 0));
	REFUSED(loom_permute(ctx, a, -1, 1, 2, 3));
	REFUSED(loom_permute(ctx, a, 0, 1, 2, INT32_MAX));
	REFUSED(loom_transpose(NULL, a));
	REFUSED(loom_transpose(ctx, NULL));
	loom_ctx_free(ctx);
}

static void test_graphs(void)
{
	loom_ctx_t *ctx;
	loom_graph_t *g;
	struct loom_tensor *a;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_silu(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 4));
	FAILS(LOOM_E_INVAL, loom_graph_new(NULL, &g));
	g_assert_null(g);
	FAILS(LOOM_E_INVAL, loom_graph_new(ctx, NULL));
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	FAILS(LOOM_E_INVAL, loom_graph_expand(NULL, a));
	FAILS(LOOM_E_INVAL, loom_graph_expand(g, NULL));
	FAILS(LOOM_E_INVAL, loom_graph_add_node(NULL, a));
	FAILS(LOOM_E_INVAL, loom_graph_add_node(g, NULL));
	g_assert_cmpint(loom_graph_n_nodes(NULL), ==, 0);
	g_assert_cmpint(loom_graph_n_leaves(NULL), ==, 0);
	g_assert_null(loom_graph_node(NULL, 0));
	g_assert_null(loom_graph_node(g, INT32_MIN));
	g_assert_null(loom_graph_leaf(g, 0));
	g_assert_cmpuint(loom_graph_version(NULL), ==, 0);
	loom_ctx_free(ctx);
}

/* ------------------------------------------------------------------------
 * loom-backend.h and the plugin constructors, before any plugin loads.
 */
static void test_backend_nulls(void)
{
	loom_buffer_t *buf = (loom_buffer_t *)1;
	loom_backend_t *be = (loom_backend_t *)1;
	loom_event_t *ev = (loom_event_t *)1;
	loom_galloc_t *ga = (loom_galloc_t *)1;
	loom_reg_t *reg = (loom_reg_t *)1;
	loom_dev_t *dev = (loom_dev_t *)1;
	loom_buffer_type_t *buft = (loom_buffer_type_t *)1;
	struct loom_plugin_info info;
	char data[16];
	size_t free_ = 1, total = 1;

	g_assert_cmpstr(loom_buffer_type_name(NULL), ==, "(null)");
	FAILS(LOOM_E_INVAL, loom_buffer_type_alloc_buffer(NULL, 16, &buf));
	g_assert_null(buf);
	g_assert_cmpuint(loom_buffer_type_max_size(NULL), ==, 0);
	g_assert_cmpuint(loom_buffer_type_alloc_size(NULL, NULL), ==, 0);
	g_assert_false(loom_buffer_type_is_host(NULL));
	g_assert_null(loom_buffer_type_device(NULL));

	loom_buffer_free(NULL);
	g_assert_cmpuint(loom_buffer_size(NULL), ==, 0);
	g_assert_null(loom_buffer_base(NULL));
	g_assert_null(loom_buffer_get_type(NULL));
	FAILS(LOOM_E_INVAL, loom_buffer_clear(NULL, 0));
	loom_buffer_set_usage(NULL, LOOM_BUFFER_USAGE_COMPUTE);
	g_assert_cmpint(loom_buffer_usage(NULL), ==, LOOM_BUFFER_USAGE_ANY);
	FAILS(LOOM_E_INVAL, loom_tensor_place(NULL, NULL, 0));
	FAILS(LOOM_E_INVAL, loom_tensor_init_view(NULL));
	FAILS(LOOM_E_INVAL, loom_ctx_alloc_tensors(NULL, NULL, &buf));
	g_assert_null(buf);
	FAILS(LOOM_E_INVAL, loom_ctx_alloc_tensors(NULL, NULL, NULL));

	FAILS(LOOM_E_INVAL, loom_tensor_set(NULL, data, 0, 4));
	FAILS(LOOM_E_INVAL, loom_tensor_get(NULL, data, 0, 4));
	FAILS(LOOM_E_INVAL, loom_tensor_memset(NULL, 0, 0, 4));
	FAILS(LOOM_E_INVAL, loom_tensor_set_2d(NULL, data, 0, 4, 2, 4, 4));
	FAILS(LOOM_E_INVAL, loom_tensor_get_2d(NULL, data, 0, 4, 2, 4, 4));
	FAILS(LOOM_E_INVAL, loom_tensor_copy(NULL, NULL));

	g_assert_cmpstr(loom_backend_name(NULL), ==, "(null)");
	loom_backend_free(NULL);
	g_assert_null(loom_backend_device(NULL));
	FAILS(LOOM_E_INVAL,
	      loom_backend_tensor_set_async(NULL, NULL, data, 0, 4));
	FAILS(LOOM_E_INVAL,
	      loom_backend_tensor_get_async(NULL, NULL, data, 0, 4));
	FAILS(LOOM_E_INVAL, loom_backend_tensor_set_2d_async(NULL, NULL, data,
							     0, 4, 2, 4, 4));
	FAILS(LOOM_E_INVAL, loom_backend_tensor_get_2d_async(NULL, NULL, data,
							     0, 4, 2, 4, 4));
	FAILS(LOOM_E_INVAL,
	      loom_backend_tensor_copy_async(NULL, NULL, NULL, NULL));
	FAILS(LOOM_E_INVAL, loom_backend_synchronize(NULL));
	FAILS(LOOM_E_INVAL, loom_backend_graph_compute(NULL, NULL));
	FAILS(LOOM_E_INVAL, loom_backend_graph_compute_async(NULL, NULL));
	g_assert_false(loom_backend_supports_op(NULL, NULL));
	FAILS(LOOM_E_INVAL, loom_backend_set_n_threads(NULL, 2));

	FAILS(LOOM_E_INVAL, loom_event_new(NULL, &ev));
	g_assert_null(ev);
	FAILS(LOOM_E_INVAL, loom_event_new(NULL, NULL));
	loom_event_free(NULL);
	FAILS(LOOM_E_INVAL, loom_event_record(NULL, NULL));
	FAILS(LOOM_E_INVAL, loom_event_wait(NULL, NULL));
	FAILS(LOOM_E_INVAL, loom_event_synchronize(NULL));

	g_assert_cmpstr(loom_dev_name(NULL), ==, "(null)");
	g_assert_cmpstr(loom_dev_description(NULL), ==, "(null)");
	loom_dev_memory(NULL, &free_, &total);
	g_assert_cmpuint(free_, ==, 0);
	g_assert_cmpuint(total, ==, 0);
	loom_dev_memory(NULL, NULL, NULL);
	g_assert_cmpuint(loom_dev_caps(NULL), ==, 0);
	FAILS(LOOM_E_INVAL, loom_dev_init_backend(NULL, NULL, &be));
	g_assert_null(be);
	FAILS(LOOM_E_INVAL, loom_dev_init_backend(NULL, NULL, NULL));
	g_assert_null(loom_dev_buffer_type(NULL));
	g_assert_null(loom_dev_host_buffer_type(NULL));
	g_assert_false(loom_dev_supports_op(NULL, NULL));
	g_assert_false(loom_dev_supports_buft(NULL, NULL));
	g_assert_null(loom_dev_reg(NULL));

	FAILS(LOOM_E_INVAL, loom_load_path(NULL, &reg));
	g_assert_null(reg);
	FAILS(LOOM_E_INVAL, loom_load_path("", NULL));
	FAILS(LOOM_E_INVAL, loom_load_static(NULL, NULL));
	g_assert_null(loom_reg_get(SIZE_MAX));
	g_assert_null(loom_reg_by_name(NULL));
	g_assert_cmpstr(loom_reg_name(NULL), ==, "(null)");
	g_assert_cmpstr(loom_reg_version(NULL), ==, "");
	g_assert_cmpuint(loom_reg_dev_count(NULL), ==, 0);
	g_assert_null(loom_reg_dev(NULL, 0));
	g_assert_null(loom_reg_proc_address(NULL, "allreduce"));
	g_assert_null(loom_dev_get(SIZE_MAX));
	g_assert_null(loom_dev_by_name(NULL));
	REFUSED(loom_dev_by_type((enum loom_dev_type)99));
	REFUSED(loom_dev_by_type((enum loom_dev_type)-1));
	FAILS(LOOM_E_INVAL, loom_plugin_info(0, NULL));
	FAILS(LOOM_E_RANGE, loom_plugin_info(SIZE_MAX, &info));
	g_assert_null(loom_search_path(SIZE_MAX));

	FAILS(LOOM_E_INVAL, loom_galloc_new(NULL, &ga));
	g_assert_null(ga);
	FAILS(LOOM_E_INVAL, loom_galloc_new(NULL, NULL));
	loom_galloc_free(NULL);
	FAILS(LOOM_E_INVAL, loom_galloc_reserve(NULL, NULL));
	FAILS(LOOM_E_INVAL, loom_galloc_alloc_graph(NULL, NULL));
	g_assert_cmpuint(loom_galloc_buffer_size(NULL), ==, 0);
	g_assert_null(loom_galloc_buffer(NULL));

	/* Plugin constructors: NULL tables and owners. */
	FAILS(LOOM_E_INVAL, loom_reg_new(NULL, NULL, &reg));
	g_assert_null(reg);
	FAILS(LOOM_E_INVAL, loom_reg_new(NULL, NULL, NULL));
	FAILS(LOOM_E_INVAL, loom_dev_new(NULL, NULL, NULL, &dev));
	g_assert_null(dev);
	FAILS(LOOM_E_INVAL, loom_buffer_type_new(NULL, NULL, NULL, NULL, &buft));
	g_assert_null(buft);
	FAILS(LOOM_E_INVAL, loom_buffer_new(NULL, NULL, NULL, 0, &buf));
	FAILS(LOOM_E_INVAL, loom_backend_new(NULL, NULL, NULL, &be));
	g_assert_null(loom_reg_context(NULL));
	g_assert_null(loom_dev_context(NULL));
	g_assert_null(loom_buffer_type_context(NULL));
	g_assert_null(loom_buffer_context(NULL));
	g_assert_null(loom_backend_context(NULL));
	g_assert_null(loom_event_context(NULL));
	loom_event_set_context(NULL, NULL);
	g_assert_null(loom_event_device(NULL));
	g_assert_null(loom_env_get(NULL));
}

/* ------------------------------------------------------------------------
 * Bad arguments that reach past the NULL checks, on the static fake
 * device: foreign pointers, sizes, offsets and placed views.
 */
static void test_backend_args(void)
{
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	loom_buffer_t *buf, *nobuf;
	loom_backend_t *be, *nobe;
	loom_ctx_t *ctx;
	struct loom_tensor *a, *b, *v;
	uint64_t junk[32] = { 0 };
	float data[64] = { 0 };

	g_assert_cmpint(loom_load_static(&fake_static_desc, &reg), ==,
			LOOM_OK);
	dev = loom_reg_dev(reg, 0);
	buft = loom_dev_buffer_type(dev);
	g_assert_nonnull(buft);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 4);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 8, 2);
	v = loom_view_1d(ctx, a, 8, 32);

	/* Pointers no constructor made are refused, not followed. */
	FAILS(LOOM_E_INVAL, loom_buffer_type_alloc_buffer((loom_buffer_type_t *)junk,
						   16, &nobuf));
	FAILS(LOOM_E_INVAL, loom_buffer_clear((loom_buffer_t *)junk, 0));
	FAILS(LOOM_E_INVAL, loom_backend_synchronize((loom_backend_t *)junk));
	FAILS(LOOM_E_INVAL, loom_dev_init_backend((loom_dev_t *)junk, NULL,
						  &nobe));
	FAILS(LOOM_E_INVAL, loom_ctx_alloc_tensors(ctx,
						   (loom_buffer_type_t *)junk,
						   &nobuf));
	g_assert_cmpstr(loom_buffer_type_name((loom_buffer_type_t *)junk), ==,
			"(null)");
	g_assert_cmpuint(loom_buffer_type_max_size((loom_buffer_type_t *)junk), ==,
			 0);
	g_assert_false(loom_buffer_type_is_host((loom_buffer_type_t *)junk));
	g_assert_null(loom_buffer_type_device((loom_buffer_type_t *)junk));
	g_assert_cmpint(loom_buffer_type_alloc_buffer(buft, 64, &buf), ==, LOOM_OK);
	reset();
	loom_buffer_set_usage(buf, (enum loom_buffer_usage)7);
	check_msg("loom_buffer_set_usage(7)");
	g_assert_cmpint(loom_buffer_usage(buf), ==, LOOM_BUFFER_USAGE_ANY);
	loom_buffer_free(buf);
	g_assert_cmpuint(loom_buffer_size((loom_buffer_t *)junk), ==, 0);
	g_assert_null(loom_buffer_base((loom_buffer_t *)junk));
	g_assert_cmpstr(loom_dev_name((loom_dev_t *)junk), ==, "(null)");
	g_assert_cmpstr(loom_reg_name((loom_reg_t *)junk), ==, "(null)");

	/* Placing: unplaced views, misaligned and out-of-range offsets. */
	FAILS(LOOM_E_STATE, loom_tensor_init_view(v));
	g_assert_cmpint(loom_buffer_type_alloc_buffer(buft, 256, &buf), ==, LOOM_OK);
	FAILS(LOOM_E_INVAL, loom_tensor_place(a, NULL, 0));
	FAILS(LOOM_E_INVAL, loom_tensor_place(a, (loom_buffer_t *)junk, 0));
	FAILS(LOOM_E_ALIGN, loom_tensor_place(a, buf, 1));
	FAILS(LOOM_E_RANGE, loom_tensor_place(a, buf, 256 - 96));
	FAILS(LOOM_E_RANGE, loom_tensor_place(a, buf, SIZE_MAX & ~(size_t)63));
	FAILS(LOOM_E_INVAL, loom_tensor_place(v, buf, 0));
	g_assert_cmpint(loom_tensor_place(a, buf, 0), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_place(b, buf, 128), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_init_view(v), ==, LOOM_OK);

	/* Data: offsets and sizes that overflow, NULL data, 2D strides. */
	FAILS(LOOM_E_RANGE, loom_tensor_set(a, data, SIZE_MAX, 2));
	FAILS(LOOM_E_RANGE, loom_tensor_get(a, data, 4, SIZE_MAX));
	FAILS(LOOM_E_RANGE, loom_tensor_memset(v, 0, 4, 32));
	FAILS(LOOM_E_INVAL, loom_tensor_get(a, NULL, 0, 4));
	FAILS(LOOM_E_RANGE, loom_tensor_set_2d(a, data, 0, 4, SIZE_MAX, 4,
					       4));
	FAILS(LOOM_E_RANGE, loom_tensor_get_2d(a, data, 0, 4, 3,
					       SIZE_MAX / 2, 4));
	FAILS(LOOM_E_RANGE, loom_tensor_set_2d(a, data, SIZE_MAX - 3, 4, 2, 4,
					       4));
	FAILS(LOOM_E_INVAL, loom_tensor_get_2d(a, data, 0, 8, 2, 4, 8));
	FAILS(LOOM_E_INVAL, loom_tensor_copy(a, b));
	/* Two views of a that share bytes but are not the same bytes. */
	{
		struct loom_tensor *lo = loom_view_1d(ctx, a, 8, 0);
		struct loom_tensor *hi = loom_view_1d(ctx, a, 8, 16);

		FAILS(LOOM_E_INVAL, loom_tensor_copy(lo, hi));
		FAILS(LOOM_E_INVAL,
		      loom_backend_tensor_copy_async(be, be, hi, lo));
		g_assert_cmpint(loom_tensor_copy(lo, lo), ==, LOOM_OK);
		g_assert_cmpint(loom_tensor_copy(lo, v), ==, LOOM_OK);
	}
	FAILS(LOOM_E_RANGE, loom_backend_tensor_set_async(be, v, data, 0,
							  64));
	FAILS(LOOM_E_INVAL, loom_backend_tensor_get_async(be, v, NULL, 0, 4));
	FAILS(LOOM_E_RANGE, loom_backend_tensor_get_2d_async(
				    be, a, data, 0, 4, SIZE_MAX, 8, 4));
	FAILS(LOOM_E_INVAL, loom_backend_tensor_copy_async(be, be, b, a));
	FAILS(LOOM_E_INVAL, loom_backend_set_n_threads(be, -3));

	/* A view whose source was moved outside its buffer by hand is
	 * refused, not placed past the end. */
	{
		void *keep = a->data;

		a->data = (char *)loom_buffer_base(buf) + 512;
		FAILS(LOOM_E_RANGE, loom_tensor_init_view(v));
		a->data = keep;
	}

	/* A graph reading a tensor whose strides were set by hand past any
	 * size: the allocator refuses the plan instead of wrapping. */
	{
		loom_galloc_t *ga;
		loom_graph_t *g;
		struct loom_tensor *h = loom_tensor_new_4d(ctx, LOOM_TYPE_F32,
							   4, 1, 1, 2);

		h->nb[3] = SIZE_MAX / 2 + 1;
		g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g, loom_silu(ctx, h)), ==,
				LOOM_OK);
		g_assert_cmpint(loom_galloc_new(buft, &ga), ==, LOOM_OK);
		FAILS(LOOM_E_NOMEM, loom_galloc_reserve(ga, g));
		FAILS(LOOM_E_NOMEM, loom_galloc_alloc_graph(ga, g));
		g_assert_null(h->data);
		loom_galloc_free(ga);
	}

	/* A graph whose buffer the allocator outgrew (placing a larger
	 * one) is refused by compute until it is placed again. */
	{
		loom_galloc_t *ga;
		loom_graph_t *g1, *g2;
		struct loom_tensor *s1, *s2;

		s1 = loom_silu(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 8));
		s2 = loom_silu(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_F32,
						       4096));
		g_assert_cmpint(loom_graph_new(ctx, &g1), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g1, s1), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_new(ctx, &g2), ==, LOOM_OK);
		g_assert_cmpint(loom_graph_expand(g2, s2), ==, LOOM_OK);
		g_assert_cmpint(loom_galloc_new(buft, &ga), ==, LOOM_OK);
		g_assert_cmpint(loom_galloc_alloc_graph(ga, g1), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g1), ==,
				LOOM_OK);
		g_assert_cmpint(loom_galloc_alloc_graph(ga, g2), ==, LOOM_OK);
		FAILS(LOOM_E_STATE, loom_backend_graph_compute(be, g1));
		FAILS(LOOM_E_STATE, loom_tensor_set(s1, data, 0, 4));
		g_assert_cmpint(loom_galloc_alloc_graph(ga, g1), ==, LOOM_OK);
		g_assert_cmpint(loom_backend_graph_compute(be, g1), ==,
				LOOM_OK);
		loom_galloc_free(ga);
	}

	loom_backend_free(be);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* Each thread has its own last error: a failure on one thread neither
 * shows on nor clears another's. */
static gpointer fail_in_thread(gpointer data)
{
	const char *mine = data;

	for (int i = 0; i < 2000; i++) {
		loom_error_set(LOOM_E_INVAL, "%s %d", mine, i);
		if (strncmp(loom_error_message(), mine, strlen(mine)) != 0)
			return GINT_TO_POINTER(1);
		g_thread_yield();
	}
	return GINT_TO_POINTER(0);
}

static void test_last_error_per_thread(void)
{
	GThread *a, *b;

	loom_error_set(LOOM_E_STATE, "%s", "main thread");
	a = g_thread_new("a", fail_in_thread, "thread a");
	b = g_thread_new("b", fail_in_thread, "thread b");
	g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(a)), ==, 0);
	g_assert_cmpint(GPOINTER_TO_INT(g_thread_join(b)), ==, 0);
	g_assert_cmpstr(loom_error_message(), ==, "main thread");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/core-errors/status-log-types",
			test_status_log_types);
	g_test_add_func("/core-errors/tensors", test_tensors);
	g_test_add_func("/core-errors/ops", test_ops);
	g_test_add_func("/core-errors/views", test_views);
	g_test_add_func("/core-errors/graphs", test_graphs);
	g_test_add_func("/core-errors/backend-nulls", test_backend_nulls);
	g_test_add_func("/core-errors/backend-args", test_backend_args);
	g_test_add_func("/core-errors/last-error-per-thread",
			test_last_error_per_thread);
	return g_test_run();
}
