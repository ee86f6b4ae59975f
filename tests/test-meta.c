/* SPDX-License-Identifier: MIT */
/* test-meta.c - the meta device over CPU partitions: composition, slice
 * sizes, set/get of split tensors with offsets, mul_mat splits with the
 * allreduce through the CPU entry point and the generic path, products
 * of quantized weights against one device, memory per device, and the
 * errors of bad callbacks and unsupported combinations.
 * The decoder stack is in test-meta-llama.c.  This file holds main, the
 * composition and the slices and data cases; the others are in
 * test-meta-compute.c, test-meta-errors.c and test-meta-graphs.c, the
 * shared helpers in meta-util.c.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom-plugin.h>

#include "meta-cases.h"
#include "meta-util.h"

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
