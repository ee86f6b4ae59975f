/* SPDX-License-Identifier: MIT */
/* bench-world.c - `loom-bench allreduce --world`, run by every rank under
 * mpirun: the mpi plugin's world_allreduce against its bare reference (one
 * blocking MPI_Allreduce, no deadline) of the same size in the same run,
 * the two interleaved, F32 and BF16 from 16 KiB to 64 MiB (--max-bytes),
 * beside the CPU
 * partitions' in-process allreduce.  Rank 0 times and prints.
 */
#include "bench-util.h"

#include <stdlib.h>
#include <string.h>

#define W_MIN_BYTES (16u << 10)
#define W_MAX_SIZES 8
#define W_MAX_REPS 1000

struct world {
	loom_reg_t *reg;
	struct loom_world info;
	loom_world_allreduce_fn loom, bare;
	loom_world_bcast_fn bcast;
	loom_world_barrier_fn barrier;
};

/* One timed sample: iters calls of fn on n values at data. */
struct w_run {
	struct world *w;
	loom_world_allreduce_fn fn;
	void *data;
	size_t n;
	enum loom_type type;
	int iters;
};

struct w_result {
	enum loom_type type;
	size_t bytes;
	double us, bare_us;         /* medians */
	double min_us, bare_min_us; /* minima */
};

static int w_iters(struct w_run *r)
{
	int ret = 0;

	for (int i = 0; !ret && i < r->iters; i++)
		ret = r->fn(r->w->reg, r->data, r->n, r->type);
	return ret;
}

/* The plugin, its entry points and this rank's place; 1 (printed) when
 * this process is not a rank of a world. */
static int w_open(struct world *w)
{
	struct loom_plugin_info pi;
	loom_world_fn info;
	int ret;

	w->reg = loom_reg_by_name("mpi");
	if (!w->reg) {
		for (size_t i = 0; i < loom_plugin_count(); i++)
			if (loom_plugin_info(i, &pi) == LOOM_OK &&
			    !strcmp(pi.name, "mpi")) {
				fprintf(stderr, "loom-bench: --world: the mpi "
					"plugin is %s: %s\n",
					loom_plugin_state_name(pi.state),
					pi.reason);
				return 1;
			}
		fprintf(stderr, "loom-bench: --world needs the mpi plugin "
				"(not built or not found) and mpirun\n");
		return 1;
	}
	*(void **)&w->loom = loom_reg_proc_address(w->reg,
						   LOOM_PROC_WORLD_ALLREDUCE);
	*(void **)&w->bare = loom_reg_proc_address(
		w->reg, LOOM_PROC_WORLD_ALLREDUCE_BARE);
	*(void **)&w->bcast = loom_reg_proc_address(w->reg,
						    LOOM_PROC_WORLD_BCAST);
	*(void **)&w->barrier = loom_reg_proc_address(w->reg,
						      LOOM_PROC_WORLD_BARRIER);
	*(void **)&info = loom_reg_proc_address(w->reg, LOOM_PROC_WORLD);
	if (!w->loom || !w->bare || !w->bcast || !w->barrier || !info)
		return bench_fail("the mpi plugin lacks a world entry point",
				  LOOM_E_UNSUPPORTED);
	w->info.size = sizeof(w->info);
	ret = info(w->reg, &w->info);
	if (ret)
		return bench_fail("world", ret);
	if (w->info.n_ranks < 2) {
		fprintf(stderr, "loom-bench: --world needs 2 or more ranks"
			" (mpirun -np 2 loom-bench allreduce --world)\n");
		return 1;
	}
	return 0;
}

static void w_fill(void *data, size_t n, enum loom_type type, float v)
{
	if (type == LOOM_TYPE_F32) {
		for (size_t i = 0; i < n; i++)
			((float *)data)[i] = v;
	} else {
		uint16_t h = loom_f32_to_bf16(v);

		for (size_t i = 0; i < n; i++)
			((uint16_t *)data)[i] = h;
	}
}

/* The values the sum of rank r's r + 1 gives: small integers, exact in
 * both types.  Every rank's verdict is summed, so all ranks agree on it
 * and none waits for a collective the others left. */
static int w_check(struct w_run *r)
{
	int n_ranks = r->w->info.n_ranks;
	float want = (float)(n_ranks * (n_ranks + 1) / 2), bad = 0;
	size_t first = 0;
	int ret;

	w_fill(r->data, r->n, r->type, (float)(r->w->info.rank + 1));
	ret = r->fn(r->w->reg, r->data, r->n, r->type);
	if (ret)
		return ret;
	for (size_t i = 0; i < r->n; i++) {
		float v = r->type == LOOM_TYPE_F32 ?
				  ((float *)r->data)[i] :
				  loom_bf16_to_f32(((uint16_t *)r->data)[i]);

		if (v != want) {
			if (!bad)
				first = i;
			bad = 1;
		}
	}
	if (bad)
		fprintf(stderr, "loom-bench: rank %d: %s gave a wrong %s sum "
			"at element %zu of %zu\n", r->w->info.rank,
			r->fn == r->w->bare ? "world_allreduce_bare" :
					      "world_allreduce",
			loom_type_name(r->type), first, r->n);
	ret = r->w->loom(r->w->reg, &bad, 1, LOOM_TYPE_F32);
	if (!ret && bad)
		ret = loom_error_set(LOOM_E_DEVICE, "a wrong sum on %g rank(s)",
				     bad);
	/* Zeros stay zeros, however often they are summed. */
	memset(r->data, 0, r->n * loom_type_row_size(r->type, 1));
	return ret;
}

/* Rank 0's seconds for r->iters calls, after a barrier. */
static int w_sample(struct w_run *r, double *sec)
{
	int ret = r->w->barrier(r->w->reg);
	double t;

	if (ret)
		return ret;
	t = bench_now();
	ret = w_iters(r);
	*sec = (bench_now() - t) / r->iters;
	return ret;
}

/* Checks both, agrees on the calls per sample (about 20 ms of rank 0's
 * time), then times world_allreduce and the bare reference in turn, a
 * warm-up and o->reps samples each. */
static int w_measure(struct world *w, const struct bench_opts *o,
		     void *data, enum loom_type type, size_t bytes,
		     struct w_result *res)
{
	struct w_run lr = { w, w->loom, data, bytes /
			    loom_type_row_size(type, 1), type, 1 };
	struct w_run br = lr;
	double ls[W_MAX_REPS + 1], bs[W_MAX_REPS + 1], t;
	int ret;

	br.fn = w->bare;
	ret = w_check(&lr);
	if (!ret)
		ret = w_check(&br);
	if (!ret)
		ret = w_sample(&lr, &t);
	if (ret)
		return ret;
	lr.iters = t > 0 ? (int)(0.02 / t) : 1000;
	lr.iters = lr.iters < 1 ? 1 : lr.iters > 1000 ? 1000 : lr.iters;
	ret = w->bcast(w->reg, &lr.iters, sizeof(lr.iters), 0);
	br.iters = lr.iters;
	for (int i = 0; !ret && i <= o->reps; i++) {
		ret = w_sample(&lr, &ls[i]);
		if (!ret)
			ret = w_sample(&br, &bs[i]);
	}
	if (ret)
		return ret;
	res->type = type;
	res->bytes = bytes;
	/* Sample 0 was the warm-up. */
	res->us = bench_median(ls + 1, o->reps) * 1e6;
	res->bare_us = bench_median(bs + 1, o->reps) * 1e6;
	res->min_us = ls[1] * 1e6;
	res->bare_min_us = bs[1] * 1e6;
	for (int i = 2; i <= o->reps; i++) {
		res->min_us = ls[i] * 1e6 < res->min_us ? ls[i] * 1e6
							 : res->min_us;
		res->bare_min_us = bs[i] * 1e6 < res->bare_min_us ?
					   bs[i] * 1e6 : res->bare_min_us;
	}
	return 0;
}

static double algbw(size_t bytes, double us)
{
	return (double)bytes / us * 1e-3;
}

static void w_print_json(const struct world *w, const struct w_result *res,
			 int n_res, const struct bench_ar_result *loc,
			 int n_loc, size_t n_parts)
{
	double f = 2.0 * (w->info.n_ranks - 1) / w->info.n_ranks;
	struct bench_json j;

	bj_init(&j, stdout);
	bj_obj_begin(&j, NULL);
	bj_int(&j, "ranks", w->info.n_ranks);
	bj_arr_begin(&j, "world");
	for (int i = 0; i < n_res; i++) {
		bj_obj_begin(&j, NULL);
		bj_str(&j, "type", loom_type_name(res[i].type));
		bj_int(&j, "bytes", (int64_t)res[i].bytes);
		bj_num(&j, "us", res[i].us);
		bj_num(&j, "algbw", algbw(res[i].bytes, res[i].us));
		bj_num(&j, "busbw", algbw(res[i].bytes, res[i].us) * f);
		bj_num(&j, "bare_us", res[i].bare_us);
		bj_num(&j, "bare_algbw", algbw(res[i].bytes, res[i].bare_us));
		bj_num(&j, "bare_busbw",
		       algbw(res[i].bytes, res[i].bare_us) * f);
		bj_num(&j, "ratio", res[i].us / res[i].bare_us);
		bj_num(&j, "min_us", res[i].min_us);
		bj_num(&j, "bare_min_us", res[i].bare_min_us);
		bj_num(&j, "min_ratio", res[i].min_us / res[i].bare_min_us);
		bj_obj_end(&j);
	}
	bj_arr_end(&j);
	bj_obj_begin(&j, "in_process");
	bj_int(&j, "parts", (int64_t)n_parts);
	bj_arr_begin(&j, "allreduce");
	for (int i = 0; i < n_loc; i++) {
		bj_obj_begin(&j, NULL);
		bj_int(&j, "bytes", (int64_t)loc[i].bytes);
		bj_num(&j, "us", loc[i].us);
		bj_num(&j, "algbw", loc[i].algbw);
		bj_num(&j, "busbw", loc[i].busbw);
		bj_obj_end(&j);
	}
	bj_arr_end(&j);
	bj_obj_end(&j);
	bj_obj_end(&j);
	bj_finish(&j);
}

static void w_print_table(const struct world *w, const struct bench_opts *o,
			  const struct w_result *res, int n_res,
			  const struct bench_ar_result *loc, int n_loc,
			  size_t n_parts)
{
	static const char *const heads[] = {
		"type", "bytes", "loom us", "bare us", "loom/bare",
		"min loom/bare", "algbw GB/s", "busbw GB/s", "bare busbw",
		"in-process us",
	};
	double f = 2.0 * (w->info.n_ranks - 1) / w->info.n_ranks;
	struct bench_table *tab = bench_table_new(10, heads);
	char title[160];

	for (int i = 0; i < n_res; i++) {
		char in[32] = "-";

		for (int k = 0; k < n_loc; k++)
			if (res[i].type == LOOM_TYPE_F32 &&
			    loc[k].bytes == res[i].bytes)
				snprintf(in, sizeof(in), "%.2f", loc[k].us);
		bench_table_row(tab, "%s\t%zu\t%.1f\t%.1f\t%.2fx\t%.2fx"
				"\t%.2f\t%.2f\t%.2f\t%s",
				loom_type_name(res[i].type), res[i].bytes,
				res[i].us, res[i].bare_us,
				res[i].us / res[i].bare_us,
				res[i].min_us / res[i].bare_min_us,
				algbw(res[i].bytes, res[i].us),
				algbw(res[i].bytes, res[i].us) * f,
				algbw(res[i].bytes, res[i].bare_us) * f, in);
	}
	snprintf(title, sizeof(title), "allreduce across %d ranks: "
		 "world_allreduce against a bare MPI_Allreduce (in place, "
		 "medians and minima of %d, interleaved)", w->info.n_ranks, o->reps);
	bench_table_print(tab, stdout, title);
	printf("(rank 0's time; busbw = algbw * 2(n-1)/n; in-process: "
	       "F32 over %zu CPU partitions of rank 0 alone)\n", n_parts);
	bench_table_free(tab);
}

int bench_cmd_allreduce_world(const struct bench_opts *o)
{
	static const enum loom_type types[] = { LOOM_TYPE_F32,
						LOOM_TYPE_BF16 };
	struct w_result res[2 * W_MAX_SIZES];
	struct bench_ar_result loc[BENCH_AR_MAX_SIZES];
	struct world w = { 0 };
	size_t n_parts = 0;
	int n_res = 0, n_loc = 0, ret = 0, bad;
	void *data;

	if (o->reps > W_MAX_REPS)
		return bench_fail("--reps", LOOM_E_INVAL);
	bench_allreduce_parts_env(o);
	if (bench_load() || w_open(&w))
		return 1;
	if (o->max_bytes < W_MIN_BYTES) {
		fprintf(stderr, "loom-bench: --world starts at %u bytes; "
			"--max-bytes %zu is below\n", W_MIN_BYTES,
			o->max_bytes);
		return 1;
	}
	data = aligned_alloc(64, (o->max_bytes + 63) / 64 * 64);
	if (!data)
		return bench_fail("allreduce --world", LOOM_E_NOMEM);
	for (size_t bytes = W_MIN_BYTES; !ret && bytes <= o->max_bytes;
	     bytes *= 4)
		for (int k = 0; !ret && k < 2; k++) {
			if (w.info.rank == 0)
				bench_progress("allreduce --world", n_res,
					       2 * 7);
			ret = w_measure(&w, o, data, types[k], bytes,
					&res[n_res++]);
		}
	free(data);
	if (ret)
		return bench_fail("allreduce --world", ret);
	/* The in-process figures on rank 0 alone, the others waiting, so
	 * that they have the cores to themselves; a failure there is
	 * everyone's. */
	if (w.info.rank == 0)
		bad = bench_allreduce_parts(o, W_MIN_BYTES, loc, &n_loc,
					    &n_parts);
	else
		bad = 0;
	ret = w.bcast(w.reg, &bad, sizeof(bad), 0);
	if (ret)
		return bench_fail("allreduce --world", ret);
	if (bad)
		return 1;
	if (w.info.rank != 0)
		return 0;
	if (o->json)
		w_print_json(&w, res, n_res, loc, n_loc, n_parts);
	else
		w_print_table(&w, o, res, n_res, loc, n_loc, n_parts);
	return 0;
}
