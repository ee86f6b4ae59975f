/* SPDX-License-Identifier: MIT */
/* test-cpu-partitions.c - LOOM_CPU_DEVICES: the devices it makes and the
 * cores they get, and the CPU plugin's allreduce entry point across
 * partitions against a plain double sum.
 */
#define _GNU_SOURCE
#include <glib.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "loom/loom-plugin.h"

static loom_reg_t *load_cpu(const char *devices)
{
	const char *path = g_getenv("LOOM_TEST_PLUGIN_PATH");
	loom_reg_t *reg;

	if (path)
		g_setenv("LOOM_PLUGIN_PATH", path, TRUE);
	g_setenv("LOOM_BACKENDS", "cpu", TRUE);
	g_setenv("LOOM_CPU_DEVICES", devices, TRUE);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	reg = loom_reg_by_name("cpu");
	g_assert_nonnull(reg);
	return reg;
}

static int allowed_count(void)
{
	cpu_set_t set;

	g_assert_cmpint(sched_getaffinity(0, sizeof(set), &set), ==, 0);
	return CPU_COUNT(&set);
}

/* Reads the "cores 0-3,8" list out of a device description. */
static void parse_cores(const char *desc, cpu_set_t *set)
{
	const char *s = strstr(desc, "cores ");

	CPU_ZERO(set);
	g_assert_nonnull(s);
	s += 6;
	for (;;) {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		g_assert_true(end != s);
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			s = end;
		}
		for (; a <= b; a++)
			CPU_SET(a, set);
		if (*s != ',')
			break;
		s++;
	}
}

static void check_partitions(int n)
{
	char want[16], env[16];
	loom_reg_t *reg;
	cpu_set_t all, seen;
	int cores = allowed_count();
	int i, j;

	snprintf(env, sizeof(env), "%d", n);
	reg = load_cpu(env);
	g_assert_cmpuint(loom_reg_dev_count(reg), ==, n);
	g_assert_cmpint(sched_getaffinity(0, sizeof(all), &all), ==, 0);
	CPU_ZERO(&seen);
	for (i = 0; i < n; i++) {
		loom_dev_t *dev = loom_reg_dev(reg, i);
		cpu_set_t mine, both;
		size_t free, total;

		snprintf(want, sizeof(want), "cpu%d", i);
		g_assert_cmpstr(loom_dev_name(dev), ==, want);
		g_assert_cmpint(loom_dev_type(dev), ==, LOOM_DEV_TYPE_CPU);
		g_assert_nonnull(loom_dev_by_name(want));
		loom_dev_memory(dev, &free, &total);
		g_assert_cmpuint(total, >, 0);
		g_assert_cmpuint(free, <=, total);
		g_test_message("%s: %s", want, loom_dev_description(dev));
		parse_cores(loom_dev_description(dev), &mine);
		g_assert_cmpint(CPU_COUNT(&mine), >=, 1);
		CPU_AND(&both, &mine, &all);
		g_assert_true(CPU_EQUAL(&both, &mine));
		if (n <= cores) {
			/* Disjoint (whole physical cores each, so with SMT
			 * the counts may differ by a core's siblings). */
			CPU_AND(&both, &mine, &seen);
			g_assert_cmpint(CPU_COUNT(&both), ==, 0);
		} else {
			g_assert_cmpint(CPU_COUNT(&mine), ==, 1);
		}
		CPU_OR(&seen, &seen, &mine);
		/* Every device's buffers are host memory every CPU device
		 * can use. */
		for (j = 0; j < n; j++)
			g_assert_true(loom_dev_supports_buft(
				loom_reg_dev(reg, j),
				loom_dev_buffer_type(dev)));
	}
	if (n <= cores)
		g_assert_true(CPU_EQUAL(&seen, &all));
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

static void test_partitions(void)
{
	check_partitions(1);
	check_partitions(2);
	check_partitions(3);
	check_partitions(allowed_count() + 1);
}

/* One device per NUMA node; big buffers there prefer their node. */
static void test_numa(void)
{
	loom_reg_t *reg = load_cpu("numa");
	const int64_t ne = 1 << 20;
	float *v = g_new(float, ne), *back = g_new(float, ne);
	size_t i, free, total;

	g_assert_cmpuint(loom_reg_dev_count(reg), >=, 1);
	g_test_message("numa: %zu devices", loom_reg_dev_count(reg));
	for (i = 0; i < (size_t)ne; i++)
		v[i] = (float)i;
	for (i = 0; i < loom_reg_dev_count(reg); i++) {
		loom_dev_t *dev = loom_reg_dev(reg, i);
		loom_ctx_t *ctx;
		loom_buffer_t *buf;
		struct loom_tensor *t;

		g_test_message("%s: %s", loom_dev_name(dev),
			       loom_dev_description(dev));
		loom_dev_memory(dev, &free, &total);
		g_assert_cmpuint(total, >, 0);
		g_assert_cmpuint(free, <=, total);
		g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
		t = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, ne);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					ctx, loom_dev_buffer_type(dev), &buf),
				==, LOOM_OK);
		g_assert_cmpint(loom_tensor_set(t, v, 0, ne * sizeof(float)),
				==, LOOM_OK);
		memset(back, 0, ne * sizeof(float));
		g_assert_cmpint(loom_tensor_get(t, back, 0,
						ne * sizeof(float)), ==,
				LOOM_OK);
		g_assert_cmpmem(v, ne * sizeof(float), back,
				ne * sizeof(float));
		loom_buffer_free(buf);
		loom_ctx_free(ctx);
	}
	g_free(v);
	g_free(back);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

struct group {
	int n;
	loom_reg_t *reg;
	loom_allreduce_fn allreduce;
	loom_ctx_t *ctx[4];
	loom_backend_t *be[4];
	loom_buffer_t *buf[4];
	loom_graph_t *g[4];
	struct loom_tensor *t[4];
};

/* n partitions, a backend each with n_threads, and on each an F32 tensor
 * of ne elements with a graph that doubles it in place. */
static void group_init(struct group *gr, int n, int n_threads, int64_t ne)
{
	char env[8];
	int i;

	memset(gr, 0, sizeof(*gr));
	gr->n = n;
	snprintf(env, sizeof(env), "%d", n);
	gr->reg = load_cpu(env);
	g_assert_cmpuint(loom_reg_dev_count(gr->reg), ==, n);
	gr->allreduce = (loom_allreduce_fn)loom_reg_proc_address(
		gr->reg, LOOM_PROC_ALLREDUCE);
	g_assert_nonnull(gr->allreduce);
	for (i = 0; i < n; i++) {
		loom_dev_t *dev = loom_reg_dev(gr->reg, i);
		struct loom_tensor *s;

		g_assert_cmpint(loom_dev_init_backend(dev, NULL, &gr->be[i]),
				==, LOOM_OK);
		g_assert_cmpint(loom_backend_set_n_threads(gr->be[i],
							   n_threads),
				==, LOOM_OK);
		g_assert_cmpint(loom_ctx_new(0, &gr->ctx[i]), ==, LOOM_OK);
		gr->t[i] = loom_tensor_new_1d(gr->ctx[i], LOOM_TYPE_F32, ne);
		s = loom_copy(gr->ctx[i],
			     loom_scale(gr->ctx[i], gr->t[i], 2.0f), gr->t[i]);
		g_assert_nonnull(s);
		g_assert_cmpint(loom_graph_new(gr->ctx[i], &gr->g[i]), ==,
				LOOM_OK);
		g_assert_cmpint(loom_graph_expand(gr->g[i], s), ==, LOOM_OK);
		g_assert_cmpint(loom_ctx_alloc_tensors(
					gr->ctx[i], loom_dev_buffer_type(dev),
					&gr->buf[i]), ==, LOOM_OK);
	}
}

static void group_free(struct group *gr)
{
	int i;

	for (i = 0; i < gr->n; i++) {
		loom_backend_free(gr->be[i]);
		loom_buffer_free(gr->buf[i]);
		loom_ctx_free(gr->ctx[i]);
	}
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

/* Doubles every tensor (queued), reduces (queued behind), then checks
 * each tensor against twice the double sum of the inputs; the last round
 * reduces idle pools' tensors as they are (small ones inline). */
static void check_allreduce(int n, int n_threads, int64_t ne)
{
	struct loom_allreduce_opts opts = {
		.size = sizeof(opts),
		.reduce_type = LOOM_TYPE_F32,
	};
	GRand *r = g_rand_new_with_seed((guint32)(n * 100003 + ne));
	float *host = g_new(float, ne * n), *out = g_new(float, ne);
	double *want = g_new0(double, ne);
	struct group gr;
	int i, rep;
	int64_t j;

	group_init(&gr, n, n_threads, ne);
	for (rep = 0; rep < 3; rep++) {
		double scale = rep < 2 ? 2.0 : 1.0;

		for (i = 0; i < n; i++) {
			for (j = 0; j < ne; j++) {
				host[i * ne + j] = (float)g_rand_double_range(
					r, -1, 1);
				want[j] = (i ? want[j] : 0) +
					  scale * host[i * ne + j];
			}
			loom_tensor_set(gr.t[i], host + i * ne, 0,
					ne * sizeof(float));
		}
		for (i = 0; rep < 2 && i < n; i++)
			g_assert_cmpint(loom_backend_graph_compute_async(
						gr.be[i], gr.g[i]), ==,
					LOOM_OK);
		opts.reduce_type = rep == 1 ? LOOM_TYPE_BF16 : LOOM_TYPE_F32;
		g_assert_cmpint(gr.allreduce(gr.be, gr.t, n, &opts), ==,
				LOOM_OK);
		for (i = 0; i < n; i++)
			g_assert_cmpint(loom_backend_synchronize(gr.be[i]), ==,
					LOOM_OK);
		for (i = 0; i < n; i++) {
			loom_tensor_get(gr.t[i], out, 0, ne * sizeof(float));
			for (j = 0; j < ne; j++)
				g_assert_cmpfloat(fabs(out[j] - want[j]), <=,
						  1e-5 * (1 + fabs(want[j])));
		}
	}
	group_free(&gr);
	g_rand_free(r);
	g_free(host);
	g_free(out);
	g_free(want);
}

static void test_allreduce(void)
{
	static const int64_t sizes[] = { 1, 3, 17, 1023, 4099, 100003 };
	int n, k;

	for (n = 2; n <= 4; n++)
		for (k = 0; k < (int)G_N_ELEMENTS(sizes); k++)
			check_allreduce(n, 1 + (k + n) % 3, sizes[k]);
}

/* What the entry point leaves to the meta device's generic path. */
static void test_allreduce_declines(void)
{
	struct group gr;
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	struct loom_tensor *h, *big, *t[2];
	loom_backend_t *be[2];

	group_init(&gr, 2, 1, 64);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	h = loom_tensor_new_1d(ctx, LOOM_TYPE_F16, 64);
	big = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 65);
	g_assert_cmpint(loom_ctx_alloc_tensors(
				ctx, loom_dev_buffer_type(
					     loom_reg_dev(gr.reg, 1)), &buf),
			==, LOOM_OK);

	/* The same tensor memory twice. */
	t[0] = gr.t[0];
	t[1] = gr.t[0];
	g_assert_cmpint(gr.allreduce(gr.be, t, 2, NULL), ==, LOOM_E_DECLINED);
	/* Not F32. */
	t[1] = h;
	g_assert_cmpint(gr.allreduce(gr.be, t, 2, NULL), ==, LOOM_E_DECLINED);
	/* Different shapes. */
	t[1] = big;
	g_assert_cmpint(gr.allreduce(gr.be, t, 2, NULL), ==, LOOM_E_DECLINED);
	/* The same backend twice. */
	be[0] = gr.be[0];
	be[1] = gr.be[0];
	g_assert_cmpint(gr.allreduce(be, gr.t, 2, NULL), ==, LOOM_E_DECLINED);
	/* And the plain call still works. */
	g_assert_cmpint(gr.allreduce(gr.be, gr.t, 2, NULL), ==, LOOM_OK);
	loom_backend_synchronize(gr.be[0]);
	loom_backend_synchronize(gr.be[1]);

	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	group_free(&gr);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/cpu/partitions/even", test_partitions);
	g_test_add_func("/cpu/partitions/numa", test_numa);
	g_test_add_func("/cpu/allreduce/sum", test_allreduce);
	g_test_add_func("/cpu/allreduce/declines", test_allreduce_declines);
	return g_test_run();
}
