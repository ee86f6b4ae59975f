/* SPDX-License-Identifier: MIT */
/* bench-dispatch.c - `loom-bench dispatch`: what a backend costs per op,
 * timed on a chain of many tiny adds (each waits for the one before, so
 * the thread pool wakes and synchronizes once per node).
 */
#include "bench-util.h"

#include <stdlib.h>

#define DISPATCH_NODES 2000
#define DISPATCH_NE 16

int bench_dispatch_measure(loom_dev_t *dev, const struct bench_opts *o,
			   double *us_per_op, int *n_nodes)
{
	loom_buffer_type_t *buft = loom_dev_buffer_type(dev);
	struct loom_tensor *x, *y;
	loom_buffer_t *buf = NULL;
	loom_ctx_t *ctx;
	double t;
	int ret;

	ret = loom_ctx_new(0, &ctx);
	if (ret)
		return ret;
	x = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, DISPATCH_NE);
	if (!x) {
		ret = LOOM_E_NOMEM;
		goto out;
	}
	ret = loom_ctx_alloc_tensors(ctx, buft, &buf);
	if (!ret)
		ret = loom_tensor_memset(x, 0, 0, loom_tensor_n_bytes(x));
	if (ret)
		goto out;
	y = x;
	for (int i = 0; i < DISPATCH_NODES && y; i++)
		y = loom_add(ctx, y, x);
	if (!y) {
		ret = loom_error_set(LOOM_E_INVAL, "%s", loom_ctx_error(ctx));
		goto out;
	}
	ret = bench_graph_time(dev, o, ctx, y, &t, n_nodes);
	if (!ret)
		*us_per_op = t * 1e6 / *n_nodes;
out:
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	return ret;
}

int bench_cmd_dispatch(const struct bench_opts *o)
{
	static const char *const heads[] = { "dispatch", "nodes",
					     "us per op" };
	struct bench_table *tab;
	loom_dev_t *dev;
	double us;
	int n, ret;

	dev = bench_open_device(o);
	if (!dev)
		return 1;
	ret = bench_dispatch_measure(dev, o, &us, &n);
	if (ret)
		return bench_fail("dispatch", ret);
	if (o->json) {
		struct bench_json j;

		bj_begin_run(&j, dev, o->threads);
		bj_int(&j, "nodes", n);
		bj_num(&j, "us_per_op", us);
		bj_obj_end(&j);
		bj_finish(&j);
		return 0;
	}
	tab = bench_table_new(3, heads);
	bench_table_row(tab, "%s: chain of add(%d)\t%d\t%.2f",
			loom_dev_name(dev), DISPATCH_NE, n, us);
	bench_table_print(tab, stdout, NULL);
	bench_table_free(tab);
	return 0;
}
