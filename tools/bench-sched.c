/* SPDX-License-Identifier: MIT */
/* bench-sched.c - `loom-bench sched`: what the scheduler costs.  Planning
 * a 32-layer decoder graph split over two devices (once), and finding the
 * plan again, for the same graph and for a graph built anew of its
 * shape; then decode of a preset split by layers over the two devices
 * against the first alone, and the share of decode time its copies take.
 * The two devices are --devices A,B, else two CPU partitions.
 */
#include "app-devices.h"
#include "bench-util.h"
#include "decoder.h"

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
	double copy_share;
	size_t dec_pieces, dec_copies, dec_copy_bytes;
	double nmse;
};

/* The two devices: --devices A,B, else the first two CPU devices. */
static int pick_devices(struct sched_bench *sb)
{
	const char *d = sb->o->devices;
	size_t n = 0;
	int ret;

	if (d && *d) {
		ret = app_devices_parse(d, sb->dev, 2, &n);
		if (ret)
			return ret;
	} else {
		sb->dev[n++] = app_devices_other_cpu(NULL);
		if (!sb->dev[0])
			return loom_error_set(LOOM_E_NOT_FOUND, "no CPU "
					      "device (see loom-info)");
	}
	if (n < 2)
		sb->dev[1] = app_devices_second(sb->dev[0], NULL);
	return sb->dev[1] ? LOOM_OK : LOOM_E_NOT_FOUND;
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

/* One side of the decode comparison: a model on the first device alone
 * (s NULL), or split over both through a scheduler. */
struct side {
	struct llama_model *m;
	loom_backend_t *be[2];
	loom_sched_t *s;
	double *td;    /* seconds per token */
	float *logits; /* n_vocab per token */
};

static int side_new(struct sched_bench *sb, bool split, struct side *d)
{
	struct llama_placement pl = { sb->dev[0], split ? sb->dev[1] : NULL,
				      sb->n_first };
	size_t nv = (size_t)sb->hp.n_vocab, D = (size_t)sb->o->decode;
	int ret;

	memset(d, 0, sizeof(*d));
	d->td = calloc(D, sizeof(*d->td));
	d->logits = malloc(nv * (D > SCHED_PROMPT ? D : SCHED_PROMPT) *
			   sizeof(*d->logits));
	if (!d->td || !d->logits)
		return loom_error_set(LOOM_E_NOMEM, "no memory");
	ret = llama_model_new_placed(&sb->hp, &pl, sb->o->seed, &d->m);
	if (!ret)
		ret = split ? new_sched(sb, d->be, &d->s)
			    : bench_backend(sb->dev[0], sb->o, &d->be[0]);
	return ret;
}

static void side_free(struct side *d)
{
	if (d->s)
		free_sched(d->be, d->s);
	else
		loom_backend_free(d->be[0]);
	llama_model_free(d->m);
	free(d->logits);
	free(d->td);
}

static int side_eval(struct side *d, const int32_t *tok, int n, int pos,
		     float *logits)
{
	return d->s ? llama_eval_sched(d->m, d->s, tok, n, pos, false, logits)
		    : llama_eval(d->m, d->be[0], tok, n, pos, false, logits);
}

/* Decode after a short prompt on both sides, a token on one then the
 * same token on the other, so that a machine whose speed drifts (a
 * shared one does) slows both alike. */
static int measure_decode(struct sched_bench *sb)
{
	const struct bench_opts *o = sb->o;
	int D = o->decode, ret;
	int64_t nv = sb->hp.n_vocab;
	int32_t *tok = calloc((size_t)sb->hp.n_ctx, sizeof(*tok));
	struct loom_sched_stats st0 = { .size = sizeof(st0) };
	struct loom_sched_stats st = { .size = sizeof(st) };
	struct side one, split;
	double sum = 0, num = 0, den = 0;

	memset(&split, 0, sizeof(split));
	ret = tok ? side_new(sb, false, &one) :
		    loom_error_set(LOOM_E_NOMEM, "no memory");
	if (!ret)
		ret = side_new(sb, true, &split);
	if (ret)
		goto out;
	for (int64_t i = 0; i < sb->hp.n_ctx; i++)
		tok[i] = (int32_t)((i * 7919 + 13) % nv);
	ret = side_eval(&one, tok, SCHED_PROMPT, 0, one.logits);
	if (!ret)
		ret = side_eval(&split, tok, SCHED_PROMPT, 0, split.logits);
	if (!ret)
		ret = loom_sched_get_stats(split.s, &st0);
	for (int i = 0; i < D && !ret; i++) {
		int pos = SCHED_PROMPT + i;

		for (int k = 0; k < 2 && !ret; k++) {
			struct side *d = k ? &split : &one;
			double t0 = bench_now();

			ret = side_eval(d, &tok[pos], 1, pos,
					d->logits + nv * i);
			d->td[i] = bench_now() - t0;
		}
		if (i % 8 == 0)
			bench_progress("sched: decode, one device and split",
				       i, D);
	}
	bench_progress_end();
	if (!ret)
		ret = loom_sched_get_stats(split.s, &st);
	if (ret)
		goto out;
	for (int i = 0; i < D; i++)
		sum += split.td[i];
	for (size_t i = 0; i < (size_t)(nv * D); i++) {
		double e = (double)split.logits[i] - one.logits[i];

		num += e * e;
		den += (double)one.logits[i] * one.logits[i];
	}
	sb->nmse = den > 0 ? num / den : 0;
	sb->copy_share = sum > 0 ? (st.copy_s - st0.copy_s) / sum : 0;
	sb->dec_pieces = st.n_pieces;
	sb->dec_copies = st.n_copies;
	sb->dec_copy_bytes = st.copy_bytes;
	sb->one_ms = bench_median(one.td, D) * 1e3;
	sb->split_ms = bench_median(split.td, D) * 1e3;
out:
	side_free(&split);
	if (tok)
		side_free(&one);
	free(tok);
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
	       "%.2f%% of decode time (goal <= 5%%); NMSE vs one device "
	       "%.1e\n(a token on one side, then on the other: both see the "
	       "same machine)\n", sb->dec_pieces, sb->dec_copies,
	       sb->dec_copy_bytes / 1024.0, 100 * sb->copy_share, sb->nmse);
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
		return bench_fail("--devices", ret);
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
