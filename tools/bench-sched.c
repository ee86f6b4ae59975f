/* SPDX-License-Identifier: MIT */
/* bench-sched.c - `loom-bench sched`: what the scheduler costs.  Planning
 * a 32-layer decoder graph split over two devices (once), and finding the
 * plan again, for the same graph and for a graph built anew of its
 * shape; then decode of a preset split by layers over the two devices
 * against the first alone, and the share of decode time its copies take.
 * The two devices are --devices A,B, else two CPU partitions.
 */
#include "bench-util.h"
#include "llama.h"

#include <stdlib.h>
#include <string.h>

#define SCHED_GRAPH_LAYERS 32
#define SCHED_PROMPT 16
#define SCHED_SAME_REPS 2000

struct sched_bench {
	const struct bench_opts *o;
	loom_dev_t *dev[2];
	/* Planning. */
	int64_t nodes;
	size_t pieces, copies;
	double build_us, plan_us, same_us, rebuilt_us;
	/* Decode. */
	struct llama_hparams hp;
	int64_t n_first;
	double one_ms, split_ms; /* medians per token */
	double copy_share, wait_share;
	size_t dec_pieces, dec_copies, dec_copy_bytes;
	double nmse;
};

/* The two devices: --devices A,B, else the first two CPU devices. */
static int pick_devices(struct sched_bench *sb)
{
	const char *d = sb->o->devices;
	int n = 0;

	if (d && *d) {
		char buf[256], *p, *save = NULL;

		snprintf(buf, sizeof(buf), "%s", d);
		for (p = strtok_r(buf, ",", &save); p && n < 2;
		     p = strtok_r(NULL, ",", &save))
			if (!(sb->dev[n++] = loom_dev_by_name(p)))
				return loom_error_set(LOOM_E_NOT_FOUND,
						      "no device '%s' (see "
						      "loom-info)", p);
	}
	for (size_t i = 0; n < 2 && i < loom_dev_count(); i++) {
		loom_dev_t *c = loom_dev_get(i);

		if (loom_dev_type(c) == LOOM_DEV_TYPE_CPU && c != sb->dev[0])
			sb->dev[n++] = c;
	}
	if (n < 2)
		return loom_error_set(LOOM_E_NOT_FOUND, "two devices needed "
				      "(--devices A,B, or LOOM_CPU_DEVICES=2)");
	return LOOM_OK;
}

static int new_sched(struct sched_bench *sb, loom_backend_t **be,
		     loom_sched_t **s)
{
	int ret = LOOM_OK;

	be[0] = be[1] = NULL;
	for (int j = 0; j < 2 && !ret; j++)
		ret = bench_backend(sb->dev[j], sb->o, &be[j]);
	if (!ret)
		ret = loom_sched_new(be, 2, s);
	return ret;
}

static void free_sched(loom_backend_t **be, loom_sched_t *s)
{
	loom_sched_free(s);
	loom_backend_free(be[1]);
	loom_backend_free(be[0]);
}

/* Planning cost: the tiny preset's widths with 32 layers (what planning
 * costs depends on the nodes, not on their sizes), half the layers on
 * each device, the graph of one decode token. */
static int measure_planning(struct sched_bench *sb)
{
	const struct bench_opts *o = sb->o;
	struct llama_placement pl = { sb->dev[0], sb->dev[1],
				      SCHED_GRAPH_LAYERS / 2 };
	int reps = o->reps < 5 ? 5 : o->reps;
	double *t = calloc((size_t)reps, sizeof(*t));
	double *tb = calloc((size_t)reps, sizeof(*tb));
	struct llama_hparams hp;
	struct llama_model *m = NULL;
	loom_backend_t *be[2] = { NULL };
	loom_sched_t *s = NULL;
	loom_graph_t *g;
	double t0;
	int ret;

	if (!t || !tb) {
		ret = loom_error_set(LOOM_E_NOMEM, "no memory");
		goto out;
	}
	ret = llama_hparams_preset("tiny", &hp);
	if (ret)
		goto out;
	hp.n_layer = SCHED_GRAPH_LAYERS;
	hp.n_ctx = 64;
	ret = llama_model_new_placed(&hp, &pl, o->seed, &m);
	if (ret)
		goto out;
	/* A new scheduler each time: planned, never found. */
	for (int r = 0; r < reps && !ret; r++) {
		bench_progress("sched: planning", r, reps);
		g = llama_model_graph(m, 1, 0);
		ret = g ? new_sched(sb, be, &s) : LOOM_E_INVAL;
		if (ret)
			break;
		t0 = bench_now();
		ret = loom_sched_alloc_graph(s, g);
		t[r] = bench_now() - t0;
		if (!ret && r + 1 < reps) {
			free_sched(be, s);
			s = NULL;
		}
	}
	if (ret)
		goto out;
	sb->plan_us = bench_median(t, reps) * 1e6;
	sb->nodes = (int64_t)loom_graph_n_nodes(g);
	sb->pieces = loom_sched_n_pieces(s);
	sb->copies = loom_sched_n_copies(s);
	/* The same graph again: nothing to do. */
	t0 = bench_now();
	for (int r = 0; r < SCHED_SAME_REPS && !ret; r++)
		ret = loom_sched_alloc_graph(s, g);
	sb->same_us = (bench_now() - t0) / SCHED_SAME_REPS * 1e6;
	/* A graph built anew of that shape: the plan is found by its shape
	 * and bound to the new graph's tensors. */
	for (int r = 0; r < reps && !ret; r++) {
		t0 = bench_now();
		g = llama_model_graph(m, 1, 0);
		tb[r] = bench_now() - t0;
		t0 = bench_now();
		ret = g ? loom_sched_alloc_graph(s, g) : LOOM_E_INVAL;
		t[r] = bench_now() - t0;
	}
	if (!ret && loom_sched_n_plans(s) != 1)
		ret = loom_error_set(LOOM_E_STATE, "a graph of the same shape "
				     "was planned again");
	if (ret)
		goto out;
	sb->rebuilt_us = bench_median(t, reps) * 1e6;
	sb->build_us = bench_median(tb, reps) * 1e6;
out:
	bench_progress_end();
	free_sched(be, s);
	llama_model_free(m);
	free(tb);
	free(t);
	return ret;
}

/* Decode after a short prompt: per-token seconds into td[0..D), logits
 * of each step into logits (n_vocab each). */
static int decode_run(struct sched_bench *sb, bool split, double *td,
		      float *logits, struct loom_sched_stats *st)
{
	const struct bench_opts *o = sb->o;
	struct llama_placement pl = { sb->dev[0], split ? sb->dev[1] : NULL,
				      sb->n_first };
	struct loom_sched_stats st0 = { .size = sizeof(st0) };
	int32_t *tok = calloc((size_t)sb->hp.n_ctx, sizeof(*tok));
	struct llama_model *m = NULL;
	loom_backend_t *be[2] = { NULL };
	loom_sched_t *s = NULL;
	float *scratch = NULL;
	int64_t V = sb->hp.n_vocab;
	int D = o->decode, ret;
	char what[64];

	scratch = malloc((size_t)V * SCHED_PROMPT * sizeof(*scratch));
	if (!tok || !scratch) {
		ret = loom_error_set(LOOM_E_NOMEM, "no memory");
		goto out;
	}
	for (int64_t i = 0; i < sb->hp.n_ctx; i++)
		tok[i] = (int32_t)((i * 7919 + 13) % V);
	snprintf(what, sizeof(what), "sched: decode on %s",
		 split ? "both" : loom_dev_name(sb->dev[0]));
	bench_progress(what, 0, D);
	ret = llama_model_new_placed(&sb->hp, &pl, o->seed, &m);
	if (!ret)
		ret = split ? new_sched(sb, be, &s)
			    : bench_backend(sb->dev[0], o, &be[0]);
	if (!ret)
		ret = s ? llama_eval_sched(m, s, tok, SCHED_PROMPT, 0, false,
					   scratch)
			: llama_eval(m, be[0], tok, SCHED_PROMPT, 0, false,
				     scratch);
	if (!ret && s)
		ret = loom_sched_get_stats(s, &st0);
	for (int i = 0; i < D && !ret; i++) {
		double t0 = bench_now();
		int pos = SCHED_PROMPT + i;

		ret = s ? llama_eval_sched(m, s, &tok[pos], 1, pos, false,
					   logits + V * i)
			: llama_eval(m, be[0], &tok[pos], 1, pos, false,
				     logits + V * i);
		td[i] = bench_now() - t0;
		if (i % 8 == 0)
			bench_progress(what, i, D);
	}
	if (!ret && s) {
		st->size = sizeof(*st);
		ret = loom_sched_get_stats(s, st);
		st->copy_s -= st0.copy_s;
		st->wait_s -= st0.wait_s;
	}
out:
	bench_progress_end();
	if (s)
		free_sched(be, s);
	else
		loom_backend_free(be[0]);
	llama_model_free(m);
	free(scratch);
	free(tok);
	return ret;
}

static int measure_decode(struct sched_bench *sb)
{
	const struct bench_opts *o = sb->o;
	int D = o->decode;
	size_t n = (size_t)sb->hp.n_vocab * (size_t)D;
	double *td = calloc((size_t)D, sizeof(*td)), sum = 0, num = 0, den = 0;
	float *ref = malloc(n * sizeof(*ref)), *got = malloc(n * sizeof(*got));
	struct loom_sched_stats st = { .size = sizeof(st) };
	int ret;

	if (!td || !ref || !got) {
		ret = loom_error_set(LOOM_E_NOMEM, "no memory");
		goto out;
	}
	ret = decode_run(sb, false, td, ref, NULL);
	if (ret)
		goto out;
	sb->one_ms = bench_median(td, D) * 1e3;
	ret = decode_run(sb, true, td, got, &st);
	if (ret)
		goto out;
	for (int i = 0; i < D; i++)
		sum += td[i];
	sb->split_ms = bench_median(td, D) * 1e3;
	sb->copy_share = sum > 0 ? st.copy_s / sum : 0;
	sb->wait_share = sum > 0 ? st.wait_s / sum : 0;
	sb->dec_pieces = st.n_pieces;
	sb->dec_copies = st.n_copies;
	sb->dec_copy_bytes = st.copy_bytes;
	for (size_t i = 0; i < n; i++) {
		num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
		den += (double)ref[i] * ref[i];
	}
	sb->nmse = den > 0 ? num / den : 0;
out:
	free(got);
	free(ref);
	free(td);
	return ret;
}

static void print_json(const struct sched_bench *sb)
{
	struct bench_json j;

	bj_init(&j, stdout);
	bj_obj_begin(&j, NULL);
	bj_arr_begin(&j, "devices");
	bj_str(&j, NULL, loom_dev_name(sb->dev[0]));
	bj_str(&j, NULL, loom_dev_name(sb->dev[1]));
	bj_arr_end(&j);
	bj_obj_begin(&j, "planning");
	bj_int(&j, "layers", SCHED_GRAPH_LAYERS);
	bj_int(&j, "nodes", sb->nodes);
	bj_int(&j, "pieces", (int64_t)sb->pieces);
	bj_int(&j, "copies", (int64_t)sb->copies);
	bj_num(&j, "plan_us", sb->plan_us);
	bj_num(&j, "same_graph_us", sb->same_us);
	bj_num(&j, "rebuilt_graph_us", sb->rebuilt_us);
	bj_num(&j, "graph_build_us", sb->build_us);
	bj_obj_end(&j);
	if (sb->o->decode) {
		bj_obj_begin(&j, "decode");
		bj_str(&j, "preset", sb->o->preset);
		bj_str(&j, "type", loom_type_name(sb->hp.wtype));
		bj_int(&j, "layers", sb->hp.n_layer);
		bj_int(&j, "gpu_layers", sb->n_first);
		bj_int(&j, "tokens", sb->o->decode);
		bj_num(&j, "one_device_ms", sb->one_ms);
		bj_num(&j, "split_ms", sb->split_ms);
		bj_num(&j, "overhead", sb->split_ms / sb->one_ms - 1);
		bj_int(&j, "pieces", (int64_t)sb->dec_pieces);
		bj_int(&j, "copies", (int64_t)sb->dec_copies);
		bj_int(&j, "copy_bytes", (int64_t)sb->dec_copy_bytes);
		bj_num(&j, "copy_share", sb->copy_share);
		bj_num(&j, "wait_share", sb->wait_share);
		bj_num(&j, "nmse", sb->nmse);
		bj_obj_end(&j);
	}
	bj_obj_end(&j);
	bj_finish(&j);
}

static void print_table(const struct sched_bench *sb)
{
	static const char *const ph[] = { "planning", "us" };
	static const char *const dh[] = { "decode", "ms/token", "vs one" };
	const char *a = loom_dev_name(sb->dev[0]), *b = loom_dev_name(sb->dev[1]);
	struct bench_table *t = bench_table_new(2, ph);
	char title[256];

	snprintf(title, sizeof(title), "scheduling a %d-layer decoder graph "
		 "(%lld nodes; layers 0-%d on %s, the rest on %s: %zu pieces, "
		 "%zu copies)", SCHED_GRAPH_LAYERS, (long long)sb->nodes,
		 SCHED_GRAPH_LAYERS / 2 - 1, a, b, sb->pieces, sb->copies);
	bench_table_row(t, "planned (once per shape)\t%.0f", sb->plan_us);
	bench_table_row(t, "the same graph again\t%.2f", sb->same_us);
	bench_table_row(t, "a graph built anew, same shape\t%.1f",
			sb->rebuilt_us);
	bench_table_row(t, "(building that graph)\t%.1f", sb->build_us);
	bench_table_print(t, stdout, title);
	bench_table_free(t);
	if (!sb->o->decode)
		return;
	printf("\n");
	t = bench_table_new(3, dh);
	snprintf(title, sizeof(title), "decode of %s (%s, %lld layers), %d "
		 "tokens after %d, medians", sb->o->preset,
		 loom_type_name(sb->hp.wtype), (long long)sb->hp.n_layer,
		 sb->o->decode, SCHED_PROMPT);
	bench_table_row(t, "%s alone\t%.2f\t-", a, sb->one_ms);
	bench_table_row(t, "layers 0-%lld on %s, the rest on %s\t%.2f\t%+.1f%%",
			(long long)sb->n_first - 1, a, b, sb->split_ms,
			100 * (sb->split_ms / sb->one_ms - 1));
	bench_table_print(t, stdout, title);
	bench_table_free(t);
	printf("split: %zu pieces, %zu copies (%.1f KiB) per token; copies "
	       "%.2f%% of decode time (goal <= 5%%), waits for a piece "
	       "%.1f%%; NMSE vs one device %.1e\n", sb->dec_pieces,
	       sb->dec_copies, sb->dec_copy_bytes / 1024.0,
	       100 * sb->copy_share, 100 * sb->wait_share, sb->nmse);
}

int bench_cmd_sched(const struct bench_opts *o)
{
	struct sched_bench sb = { .o = o };
	int ret;

	/* Two CPU partitions unless told otherwise. */
	if (!o->devices)
		setenv("LOOM_CPU_DEVICES", "2", 0);
	if (bench_load())
		return 1;
	ret = pick_devices(&sb);
	if (ret)
		return bench_fail("devices", ret);
	ret = measure_planning(&sb);
	if (ret)
		return bench_fail("planning", ret);
	if (o->decode) {
		ret = llama_hparams_preset(o->preset, &sb.hp);
		if (ret)
			return bench_fail("preset", ret);
		if (o->n_types)
			sb.hp.wtype = o->types[0];
		sb.hp.n_ctx = SCHED_PROMPT + o->decode;
		sb.n_first = o->gpu_layers >= 0 ? o->gpu_layers
						: sb.hp.n_layer / 2;
		if (sb.n_first > sb.hp.n_layer)
			sb.n_first = sb.hp.n_layer;
		ret = measure_decode(&sb);
		if (ret)
			return bench_fail("decode", ret);
	}
	if (o->json)
		print_json(&sb);
	else
		print_table(&sb);
	return 0;
}
