/* SPDX-License-Identifier: MIT */
/* bench-allreduce.c - `loom-bench allreduce`: the CPU plugin's allreduce
 * entry point over N CPU partitions, latency and bandwidth from 16 B to
 * 64 MiB as nccl-tests defines them (algbw = bytes / time, busbw = algbw *
 * 2(n-1)/n), beside the STREAM bandwidth measured in the same run.
 * Partitions share one memory, so the last column sets the traffic an
 * in-place sum must cause (every tensor read and written once: 2n bytes
 * per byte reduced) against STREAM copy, which counts the same way.
 */
#include "bench-util.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom-backend.h>

#define AR_MIN_BYTES 16
#define AR_MAX_PARTS 64

struct ar_run {
	loom_allreduce_fn fn;
	loom_backend_t *be[AR_MAX_PARTS];
	struct loom_tensor *t[AR_MAX_PARTS];
	size_t n;
	int iters;
	struct loom_allreduce_opts opts;
};

static int ar_once(struct ar_run *r)
{
	int ret = r->fn(r->be, r->t, r->n, &r->opts);

	for (size_t i = 0; !ret && i < r->n; i++)
		ret = loom_backend_synchronize(r->be[i]);
	return ret;
}

static int ar_iters(void *p)
{
	struct ar_run *r = p;
	int ret = 0;

	for (int i = 0; !ret && i < r->iters; i++)
		ret = ar_once(r);
	return ret;
}

/* Sets partition j's tensor to j + 1, reduces once, and checks that every
 * partition holds n (n + 1) / 2. */
static int ar_check(struct ar_run *r, int64_t ne)
{
	float *v = malloc((size_t)ne * sizeof(*v));
	float want = (float)(r->n * (r->n + 1) / 2);
	int ret = 0;

	if (!v)
		return LOOM_E_NOMEM;
	for (size_t j = 0; !ret && j < r->n; j++) {
		for (int64_t i = 0; i < ne; i++)
			v[i] = (float)(j + 1);
		ret = loom_tensor_set(r->t[j], v, 0, (size_t)ne * sizeof(*v));
	}
	if (!ret)
		ret = ar_once(r);
	for (size_t j = 0; !ret && j < r->n; j++) {
		ret = loom_tensor_get(r->t[j], v, 0, (size_t)ne * sizeof(*v));
		for (int64_t i = 0; !ret && i < ne; i++)
			if (v[i] != want)
				ret = loom_error_set(
					LOOM_E_DEVICE,
					"allreduce gave %g, not %g (partition "
					"%zu, element %lld of %lld)", v[i],
					want, j, (long long)i, (long long)ne);
	}
	for (size_t j = 0; !ret && j < r->n; j++)
		ret = loom_tensor_memset(r->t[j], 0, 0,
					 (size_t)ne * sizeof(float));
	free(v);
	return ret;
}

void bench_allreduce_parts_env(const struct bench_opts *o)
{
	char parts[16];

	snprintf(parts, sizeof(parts), "%d", o->parts);
	setenv("LOOM_CPU_DEVICES", parts, 0);
}

int bench_allreduce_parts(const struct bench_opts *o, size_t min_bytes,
			  struct bench_ar_result *res, int *n_out,
			  size_t *n_parts)
{
	struct ar_run r = { .opts = { .size = sizeof(r.opts),
				      .reduce_type = LOOM_TYPE_F32 } };
	loom_ctx_t *ctx[AR_MAX_PARTS] = { 0 };
	loom_buffer_t *buf[AR_MAX_PARTS] = { 0 };
	loom_reg_t *reg = loom_reg_by_name("cpu");
	int ret = 0, status = 1, n_res = 0;

	if (!reg)
		return bench_fail("the cpu plugin is not loaded",
				  LOOM_E_NOT_FOUND);
	r.n = loom_reg_dev_count(reg);
	if (r.n < 2 || r.n > AR_MAX_PARTS) {
		fprintf(stderr, "loom-bench: allreduce needs >= 2 CPU "
				"partitions (LOOM_CPU_DEVICES=%s gave %zu)\n",
			getenv("LOOM_CPU_DEVICES"), r.n);
		return 1;
	}
	*(void **)&r.fn = loom_reg_proc_address(reg, LOOM_PROC_ALLREDUCE);
	if (!r.fn)
		return bench_fail("the cpu plugin has no allreduce",
				  LOOM_E_UNSUPPORTED);
	for (size_t i = 0; i < r.n; i++) {
		loom_dev_t *dev = loom_reg_dev(reg, i);

		ret = loom_ctx_new(0, &ctx[i]);
		if (!ret) {
			r.t[i] = loom_tensor_new_1d(ctx[i], LOOM_TYPE_F32,
						    (int64_t)o->max_bytes / 4);
			ret = r.t[i] ? loom_ctx_alloc_tensors(ctx[i],
				       loom_dev_buffer_type(dev), &buf[i])
				     : LOOM_E_NOMEM;
		}
		if (!ret)
			ret = bench_backend(dev, o, &r.be[i]);
		if (ret) {
			bench_fail(loom_dev_name(dev), ret);
			goto out;
		}
	}

	for (size_t bytes = AR_MIN_BYTES; bytes <= o->max_bytes; bytes *= 4) {
		int64_t ne = (int64_t)(bytes / 4);
		struct loom_tensor *full[AR_MAX_PARTS];
		double t;

		if (bytes < min_bytes)
			continue;
		bench_progress("allreduce", n_res, 12);
		for (size_t i = 0; i < r.n; i++) {
			full[i] = r.t[i];
			r.t[i] = loom_view_1d(ctx[i], full[i], ne, 0);
			ret = r.t[i] ? loom_tensor_init_view(r.t[i])
				     : LOOM_E_NOMEM;
			if (ret)
				break;
		}
		if (!ret)
			ret = ar_check(&r, ne);
		/* Enough calls per sample for about 20 ms. */
		r.iters = 1;
		if (!ret) {
			double t1 = bench_now();

			ret = ar_iters(&r);
			t1 = bench_now() - t1;
			r.iters = t1 > 0 ? (int)(0.02 / t1) : 2000;
			r.iters = r.iters < 1 ? 1 : r.iters > 2000 ? 2000
								    : r.iters;
		}
		if (!ret)
			ret = bench_time(ar_iters, &r, o->reps, &t, NULL);
		for (size_t i = 0; i < r.n; i++)
			r.t[i] = full[i];
		if (ret) {
			bench_fail("allreduce", ret);
			goto out;
		}
		t /= r.iters;
		res[n_res].bytes = bytes;
		res[n_res].us = t * 1e6;
		res[n_res].algbw = (double)bytes / t * 1e-9;
		res[n_res].busbw = res[n_res].algbw * 2.0 *
				   (double)(r.n - 1) / (double)r.n;
		n_res++;
	}
	*n_out = n_res;
	*n_parts = r.n;
	status = 0;
out:
	bench_progress_end();
	for (size_t i = 0; i < r.n && i < AR_MAX_PARTS; i++) {
		loom_backend_free(r.be[i]);
		loom_buffer_free(buf[i]);
		loom_ctx_free(ctx[i]);
	}
	return status;
}

int bench_cmd_allreduce(const struct bench_opts *o)
{
	static const char *const heads[] = { "allreduce", "bytes", "us",
					     "algbw GB/s", "busbw GB/s",
					     "busbw of copy",
					     "traffic of copy" };
	struct bench_ar_result res[BENCH_AR_MAX_SIZES];
	struct bench_stream st = { 0 };
	size_t n_parts;
	int n_res, ret;

	if (o->world)
		return bench_cmd_allreduce_world(o);
	/* Partitions must exist before the CPU plugin loads. */
	bench_allreduce_parts_env(o);
	if (bench_load())
		return 1;
	if (!o->no_limits) {
		bench_progress("stream", 0, 1);
		ret = bench_stream_measure(bench_limit_threads(o), o->reps,
					   o->quick, &st);
		if (ret)
			return bench_fail("stream", ret);
	}
	if (bench_allreduce_parts(o, 0, res, &n_res, &n_parts))
		return 1;
	if (o->json) {
		struct bench_json j;

		bj_init(&j, stdout);
		bj_obj_begin(&j, NULL);
		bj_int(&j, "parts", (int64_t)n_parts);
		bj_str(&j, "plugin", "cpu");
		if (st.read_gbps > 0) {
			bj_num(&j, "stream_gbps", st.read_gbps);
			bj_num(&j, "stream_copy_gbps", st.copy_gbps);
		}
		bj_arr_begin(&j, "allreduce");
		for (int i = 0; i < n_res; i++) {
			bj_obj_begin(&j, NULL);
			bj_int(&j, "bytes", (int64_t)res[i].bytes);
			bj_num(&j, "us", res[i].us);
			bj_num(&j, "algbw", res[i].algbw);
			bj_num(&j, "busbw", res[i].busbw);
			bj_obj_end(&j);
		}
		bj_arr_end(&j);
		bj_obj_end(&j);
		bj_finish(&j);
	} else {
		struct bench_table *tab = bench_table_new(7, heads);
		char title[128];

		for (int i = 0; i < n_res; i++) {
			char share[32], traffic[32];

			bench_fmt_share(share, sizeof(share), res[i].busbw,
					st.copy_gbps);
			bench_fmt_share(traffic, sizeof(traffic),
					2.0 * (double)n_parts * res[i].algbw,
					st.copy_gbps);
			bench_table_row(tab,
					"cpu x%zu\t%zu\t%.2f\t%.2f\t%.2f\t%s\t%s",
					n_parts, res[i].bytes, res[i].us,
					res[i].algbw, res[i].busbw, share,
					traffic);
		}
		snprintf(title, sizeof(title),
			 "allreduce over %zu CPU partitions (F32, in place)",
			 n_parts);
		bench_table_print(tab, stdout, title);
		if (st.read_gbps > 0)
			printf("(STREAM read %.1f GB/s, copy %.1f GB/s; "
			       "busbw = algbw * 2(n-1)/n; traffic = algbw * "
			       "2n, each tensor read and written once)\n",
			       st.read_gbps, st.copy_gbps);
		bench_table_free(tab);
	}
	return 0;
}
