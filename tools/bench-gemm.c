/* SPDX-License-Identifier: MIT */
/* bench-gemm.c - the framework's matrix product through the public API
 * (one mul_mat node on a device), `loom-bench gemm`: GFLOP/s beside the
 * FMA peak measured in the same run (a GPU's BF16 peak for a GPU), and
 * beside OpenBLAS on request.
 */
#include "bench-util.h"

#include <stdlib.h>

int bench_mm_time(loom_dev_t *dev, const struct bench_opts *o,
		  enum loom_type type, int64_t m, int64_t n, int64_t k,
		  double *median, size_t *a_bytes)
{
	/* The weights where a model's go: in the device's own layout. */
	loom_buffer_type_t *buft = loom_dev_weight_buffer_type(dev);
	struct loom_tensor *a, *b, *c;
	loom_buffer_t *buf = NULL;
	loom_ctx_t *ctx;
	int ret;

	ret = loom_ctx_new(0, &ctx);
	if (ret)
		return ret;
	a = loom_tensor_new_2d(ctx, type, k, m);
	b = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, k, n);
	if (!a || !b) {
		ret = loom_error_set(LOOM_E_INVAL, "%s", loom_ctx_error(ctx));
		goto out;
	}
	loom_tensor_set_name(a, "a");
	loom_tensor_set_name(b, "b");
	ret = loom_ctx_alloc_tensors(ctx, buft, &buf);
	if (ret)
		goto out;
	loom_buffer_set_usage(buf, LOOM_BUFFER_USAGE_WEIGHTS);
	ret = bench_fill_tensor(a, 1, 0.1f);
	if (!ret)
		ret = bench_fill_tensor(b, 2, 1.0f);
	if (ret)
		goto out;
	c = loom_mul_mat(ctx, a, b);
	if (!c) {
		ret = loom_error_set(LOOM_E_INVAL, "%s", loom_ctx_error(ctx));
		goto out;
	}
	ret = bench_graph_time(dev, o, ctx, c, median, NULL);
	if (a_bytes)
		*a_bytes = loom_tensor_n_bytes(a);
out:
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	return ret;
}

int bench_cmd_gemm(const struct bench_opts *o)
{
	const bool shaped = o->shape[0] > 0;
	const char *const heads[] = { "GEMM", "type",
				      shaped ? "m x n x k" : "m=n=k", "ms",
				      "GFLOP/s", "of peak", "vs OpenBLAS" };
	int64_t s = o->size ? o->size : 2048;
	int64_t m = shaped ? o->shape[0] : s, n = shaped ? o->shape[1] : s;
	int64_t k = shaped ? o->shape[2] : s;
	double flops = 2.0 * (double)m * (double)n * (double)k;
	char dims[64];
	struct bench_opts oo = *o;
	struct bench_peak peak = { 0 };
	struct bench_device devlim = { 0 };
	struct bench_openblas ob;
	double gflops[BENCH_MAX_TYPES] = { 0 }, ob_gflops = 0, t;
	bool have_ob = false;
	struct bench_table *tab;
	loom_dev_t *dev;
	int ret;

	if (!oo.n_types) {
		oo.n_types = 1;
		oo.types[0] = LOOM_TYPE_F32;
	}
	for (int i = 0; i < oo.n_types; i++)
		if (k % loom_type_block_size(oo.types[i]))
			return bench_fail(shaped ? "--shape: k must be a "
					  "multiple of every type's block "
					  "(256 for K-quants)" :
					  "--size must be a multiple of every "
					  "type's block (256 for K-quants)",
					  LOOM_E_INVAL);
	if (shaped)
		snprintf(dims, sizeof(dims), "%lldx%lldx%lld", (long long)m,
			 (long long)n, (long long)k);
	else
		snprintf(dims, sizeof(dims), "%lld", (long long)s);
	dev = bench_open_device(&oo);
	if (!dev)
		return 1;
	if (!oo.no_limits && bench_dev_is_cpu(dev)) {
		ret = bench_peak_measure(bench_limit_threads(&oo), oo.reps,
					 &peak);
		if (ret)
			return bench_fail("peak", ret);
	} else if (!oo.no_limits) {
		/* Another device: its own peak, the datasheet's first. */
		ret = bench_device_limits(dev, &oo, &devlim);
		if (ret)
			return bench_fail("device limits", ret);
		peak.gflops = 1e3 * (devlim.datasheet_tflops > 0 ?
					     devlim.datasheet_tflops :
					     devlim.boost_tflops);
		peak.isa = devlim.datasheet_tflops > 0 ? "bf16, datasheet" :
							 "bf16, boost clock";
	}
	for (int i = 0; i < oo.n_types; i++) {
		bench_progress("gemm", i, oo.n_types);
		ret = bench_mm_time(dev, &oo, oo.types[i], m, n, k, &t, NULL);
		if (ret)
			return bench_fail(loom_type_name(oo.types[i]), ret);
		gflops[i] = flops / t * 1e-9;
	}
	if (oo.compare_openblas) {
		bench_progress("openblas", 0, 1);
		ret = bench_openblas_load(bench_limit_threads(&oo), &ob);
		if (!ret)
			ret = bench_openblas_sgemm(&ob, m, n, k, oo.reps, &t);
		if (ret) {
			bench_warn_last_error();
		} else {
			have_ob = true;
			ob_gflops = flops / t * 1e-9;
		}
	}
	bench_progress_end();

	if (oo.json) {
		struct bench_json j;

		bj_begin_run(&j, dev, bench_limit_threads(&oo));
		bj_int(&j, "m", m);
		bj_int(&j, "n", n);
		bj_int(&j, "k", k);
		bj_str(&j, "type", loom_type_name(oo.types[0]));
		bj_num(&j, "gflops", gflops[0]);
		if (devlim.boost_tflops > 0)
			bj_num(&j, "boost_clock_peak_gflops",
			       1e3 * devlim.boost_tflops);
		if (peak.gflops > 0) {
			bj_num(&j, "peak_gflops", peak.gflops);
			bj_str(&j, "peak_isa", peak.isa);
			bj_num(&j, "share_of_peak", gflops[0] / peak.gflops);
		} else {
			bj_null(&j, "peak_gflops");
		}
		if (have_ob) {
			bj_num(&j, "openblas_gflops", ob_gflops);
			bj_num(&j, "vs_openblas", gflops[0] / ob_gflops);
			bj_str(&j, "openblas_core", ob.core);
			bj_str(&j, "openblas_forced_core", ob.forced);
		} else {
			bj_null(&j, "openblas_gflops");
		}
		bj_arr_begin(&j, "types");
		for (int i = 0; i < oo.n_types; i++) {
			bj_obj_begin(&j, NULL);
			bj_str(&j, "type", loom_type_name(oo.types[i]));
			bj_num(&j, "gflops", gflops[i]);
			bj_obj_end(&j);
		}
		bj_arr_end(&j);
		bj_obj_end(&j);
		bj_finish(&j);
		return 0;
	}

	tab = bench_table_new(7, heads);
	if (peak.gflops > 0 && bench_dev_is_cpu(dev))
		bench_table_row(tab, "FMA peak (%s)\tf32\t-\t-\t%.1f\t100%%\t-",
				peak.isa, peak.gflops);
	else if (peak.gflops > 0)
		bench_table_row(tab, "peak (%s)\tbf16\t-\t-\t%.1f\t100%%\t-",
				peak.isa, peak.gflops);
	if (devlim.datasheet_tflops > 0 && devlim.boost_tflops > 0)
		bench_table_row(tab, "peak (bf16, boost clock)\tbf16\t-\t-"
				"\t%.1f\t-\t-", 1e3 * devlim.boost_tflops);
	for (int i = 0; i < oo.n_types; i++) {
		char share[32], vs[32] = "-";

		bench_fmt_share(share, sizeof(share), gflops[i], peak.gflops);
		if (have_ob)
			snprintf(vs, sizeof(vs), "%.2fx",
				 gflops[i] / ob_gflops);
		bench_table_row(tab, "loom %s\t%s\t%s\t%.1f\t%.1f\t%s\t%s",
				loom_dev_name(dev), loom_type_name(oo.types[i]),
				dims, flops / gflops[i] * 1e-6,
				gflops[i], share, vs);
	}
	if (have_ob) {
		char share[32];

		bench_fmt_share(share, sizeof(share), ob_gflops, peak.gflops);
		bench_table_row(tab,
				"OpenBLAS (%s%s)\tf32\t%s\t%.1f\t%.1f\t%s"
				"\t1.00x", ob.core,
				ob.forced[0] ? ", forced" : "",
				dims, flops / ob_gflops * 1e-6,
				ob_gflops, share);
	}
	bench_table_print(tab, stdout, NULL);
	bench_print_runs_note(&oo);
	bench_table_free(tab);
	return 0;
}
