/* SPDX-License-Identifier: MIT */
/* bench-gemv.c - decode-shaped matrix-vector products through the public
 * API, `loom-bench gemv`: weight bytes read per second for each weight
 * type beside the STREAM read bandwidth measured in the same run (a
 * GPU's own device-to-device copy bandwidth for a GPU).
 */
#include "bench-util.h"

#include <stdlib.h>

/* Matrices of at least this many bytes, and 4x the last-level cache when
 * that is larger, up to the cap: GEMV must stream from memory. */
#define GEMV_MIN_BYTES (512ull << 20)
#define GEMV_MAX_BYTES (1ull << 30)

static int64_t gemv_rows(const struct bench_opts *o, enum loom_type type,
			 int64_t k)
{
	size_t target = 4 * bench_llc_bytes();

	if (o->rows)
		return o->rows;
	if (target < GEMV_MIN_BYTES)
		target = GEMV_MIN_BYTES;
	if (target > GEMV_MAX_BYTES)
		target = GEMV_MAX_BYTES;
	/* A multiple of 64 rows, as a model's matrices are (and as the
	 * weight layouts of devices may group them). */
	return (int64_t)(target / loom_type_row_size(type, k)) / 64 * 64;
}

int bench_cmd_gemv(const struct bench_opts *o)
{
	static const char *const heads[] = { "GEMV", "type", "k x m",
					     "MiB", "us", "GB/s",
					     "of STREAM read" };
	static const enum loom_type all[] = {
		LOOM_TYPE_F32, LOOM_TYPE_BF16, LOOM_TYPE_F16, LOOM_TYPE_Q8_0,
		LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K, LOOM_TYPE_Q6_K,
	};
	int64_t k = o->size ? o->size : 4096;
	struct bench_opts oo = *o;
	struct bench_stream st = { 0 };
	struct bench_openblas ob;
	double gbps[BENCH_MAX_TYPES], us[BENCH_MAX_TYPES];
	size_t bytes[BENCH_MAX_TYPES];
	int64_t rows[BENCH_MAX_TYPES];
	double ob_gbps = 0, ob_us = 0, t;
	bool have_ob = false;
	struct bench_table *tab;
	loom_dev_t *dev;
	int ret;

	if (!oo.n_types) {
		oo.n_types = (int)(sizeof(all) / sizeof(all[0]));
		for (int i = 0; i < oo.n_types; i++)
			oo.types[i] = all[i];
	}
	for (int i = 0; i < oo.n_types; i++)
		if (k % loom_type_block_size(oo.types[i]))
			return bench_fail("--size must be a multiple of every "
					  "type's block (256 for K-quants)",
					  LOOM_E_INVAL);
	dev = bench_open_device(&oo);
	if (!dev)
		return 1;
	if (!oo.no_limits && bench_dev_is_cpu(dev)) {
		bench_progress("stream", 0, 1);
		ret = bench_stream_measure(bench_limit_threads(&oo), oo.reps,
					   oo.quick, &st);
		if (ret)
			return bench_fail("stream", ret);
	} else if (!oo.no_limits) {
		/* Another device: its own copy bandwidth stands for both. */
		struct bench_device devlim;

		bench_progress("device copy", 0, 1);
		ret = bench_device_limits(dev, &oo, &devlim);
		if (ret)
			return bench_fail("device limits", ret);
		st.read_gbps = st.copy_gbps = devlim.copy_gbps;
		st.bytes = (size_t)1 << 30;
	}
	for (int i = 0; i < oo.n_types; i++) {
		bench_progress("gemv", i, oo.n_types);
		rows[i] = gemv_rows(&oo, oo.types[i], k);
		ret = bench_mm_time(dev, &oo, oo.types[i], rows[i], 1, k, &t,
				    &bytes[i]);
		if (ret)
			return bench_fail(loom_type_name(oo.types[i]), ret);
		gbps[i] = (double)bytes[i] / t * 1e-9;
		us[i] = t * 1e6;
	}
	if (oo.compare_openblas) {
		int64_t m = gemv_rows(&oo, LOOM_TYPE_F32, k);

		bench_progress("openblas", 0, 1);
		ret = bench_openblas_load(bench_limit_threads(&oo), &ob);
		if (!ret)
			ret = bench_openblas_sgemv(&ob, m, k, oo.reps, &t);
		if (ret) {
			bench_warn_last_error();
		} else {
			have_ob = true;
			ob_gbps = (double)(m * k * 4) / t * 1e-9;
			ob_us = t * 1e6;
		}
	}
	bench_progress_end();

	if (oo.json) {
		struct bench_json j;

		bj_begin_run(&j, dev, bench_limit_threads(&oo));
		bj_int(&j, "k", k);
		if (st.read_gbps > 0) {
			bj_num(&j, "stream_gbps", st.read_gbps);
			bj_num(&j, "stream_copy_gbps", st.copy_gbps);
		} else {
			bj_null(&j, "stream_gbps");
		}
		/* gbps: one number per type, keyed by type name. */
		bj_obj_begin(&j, "gbps");
		for (int i = 0; i < oo.n_types; i++)
			bj_num(&j, loom_type_name(oo.types[i]), gbps[i]);
		bj_obj_end(&j);
		bj_obj_begin(&j, "share_of_stream");
		for (int i = 0; i < oo.n_types; i++)
			bj_num(&j, loom_type_name(oo.types[i]),
			       st.read_gbps > 0 ? gbps[i] / st.read_gbps : 0);
		bj_obj_end(&j);
		bj_arr_begin(&j, "types");
		for (int i = 0; i < oo.n_types; i++) {
			bj_obj_begin(&j, NULL);
			bj_str(&j, "type", loom_type_name(oo.types[i]));
			bj_int(&j, "m", rows[i]);
			bj_int(&j, "bytes", (int64_t)bytes[i]);
			bj_num(&j, "us", us[i]);
			bj_num(&j, "gbps", gbps[i]);
			bj_obj_end(&j);
		}
		bj_arr_end(&j);
		if (have_ob) {
			bj_num(&j, "openblas_gbps", ob_gbps);
			bj_str(&j, "openblas_core", ob.core);
		}
		bj_obj_end(&j);
		bj_finish(&j);
		return 0;
	}

	tab = bench_table_new(7, heads);
	if (st.read_gbps > 0)
		bench_table_row(tab, "%s\t-\t-\t%.0f\t-\t%.1f\t100%%",
				bench_dev_is_cpu(dev) ? "STREAM read" :
							"device copy",
				st.bytes / 1048576.0, st.read_gbps);
	for (int i = 0; i < oo.n_types; i++) {
		char share[32];

		bench_fmt_share(share, sizeof(share), gbps[i], st.read_gbps);
		bench_table_row(tab, "loom %s\t%s\t%lldx%lld\t%.0f\t%.0f\t%.1f"
				"\t%s", loom_dev_name(dev),
				loom_type_name(oo.types[i]), (long long)k,
				(long long)rows[i], bytes[i] / 1048576.0, us[i],
				gbps[i], share);
	}
	if (have_ob) {
		char share[32];
		int64_t m = gemv_rows(&oo, LOOM_TYPE_F32, k);

		bench_fmt_share(share, sizeof(share), ob_gbps, st.read_gbps);
		bench_table_row(tab, "OpenBLAS (%s)\tf32\t%lldx%lld\t%.0f\t%.0f"
				"\t%.1f\t%s", ob.core, (long long)k,
				(long long)m, m * k * 4 / 1048576.0, ob_us,
				ob_gbps, share);
	}
	bench_table_print(tab, stdout, NULL);
	bench_print_runs_note(&oo);
	bench_table_free(tab);
	return 0;
}
