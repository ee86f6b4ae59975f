/* SPDX-License-Identifier: MIT */
/* mpi-meta.c - run by tests/test-mpi.sh under mpirun: a meta device over
 * the world (every rank's CPU partitions, LOOM_CPU_DEVICES) against one
 * device of this process, on a Llama-style decoder with shapes no member
 * count divides.  Plain C (no GLib: several ranks print).
 *
 *   mpi-meta decoder even|uneven [moe|bf16]
 *                      the logits of a prompt and of greedy decode steps
 *                      (each token chosen by rank 0 and broadcast) agree
 *                      with one device (NMSE <= 1e-6), and so do the
 *                      tokens; with bf16 every allreduce goes in BF16
 *                      (NMSE <= 1e-3, the tokens may differ); rank 0
 *                      prints the verdict of all ranks
 *   mpi-meta mismatch shape|ratios
 *                      rank 1 builds another model, or alone passes
 *                      ratios: every rank is refused, with a message
 *                      naming rank 1
 *   mpi-meta nmse REF GOT
 *                      without mpirun: two files of F32 values (loom-run
 *                      --dump-logits) agree, NMSE <= 1e-6
 */
#include <loom/loom-backend.h>
#include <loom/loom-plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../model/decoder.h"

#define N_PROMPT 6
#define N_GEN 4
#define MAX_LOCAL 8

static int fails;
static int rank;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fails++;                                             \
			fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__,  \
				__LINE__);                                   \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, " (%s)\n", loom_error_message());    \
		}                                                            \
	} while (0)

struct world {
	loom_reg_t *reg;
	struct loom_world info;
	loom_world_allreduce_fn allreduce;
	loom_world_bcast_fn bcast;
};

static int open_world(struct world *w)
{
	const char *p = getenv("LOOM_TEST_PLUGIN_PATH");
	loom_world_fn info;

	if (p)
		setenv("LOOM_PLUGIN_PATH", p, 1);
	setenv("LOOM_BACKENDS", "mpi,cpu,meta", 1);
	unsetenv("LOOM_META_DEVICES");
	unsetenv("LOOM_META_WORLD");
	loom_load_all();
	w->reg = loom_reg_by_name("mpi");
	if (!w->reg || !loom_reg_by_name("meta") || !loom_dev_by_name("cpu0")) {
		fprintf(stderr, "no mpi, meta or cpu plugin: %s\n",
			loom_error_message());
		return -1;
	}
	*(void **)&info = loom_reg_proc_address(w->reg, LOOM_PROC_WORLD);
	*(void **)&w->allreduce = loom_reg_proc_address(
		w->reg, LOOM_PROC_WORLD_ALLREDUCE);
	*(void **)&w->bcast = loom_reg_proc_address(w->reg,
						    LOOM_PROC_WORLD_BCAST);
	w->info.size = sizeof(w->info);
	if (!info || !w->allreduce || !w->bcast || info(w->reg, &w->info)) {
		fprintf(stderr, "no world: %s\n", loom_error_message());
		return -1;
	}
	rank = w->info.rank;
	return 0;
}

/* The sum over the ranks of every rank's failure count, so that all
 * agree on the verdict; -1 when the world cannot say. */
static int verdict(struct world *w)
{
	float v = (float)fails;

	if (w->allreduce(w->reg, &v, 1, LOOM_TYPE_F32))
		return -1;
	return (int)v;
}

/* Shapes no member count divides: 3 KV heads, odd FFN and vocabulary. */
static void shape(struct llama_hparams *hp, bool moe)
{
	llama_hparams_preset(moe ? "tiny-moe" : "tiny", hp);
	hp->n_vocab = 203;
	hp->n_embd = 72;
	hp->n_head = 6;
	hp->n_head_kv = 3;
	hp->head_dim = 12;
	hp->n_ff = moe ? 50 : 100;
	hp->n_layer = 2;
	hp->n_ctx = 32;
	if (moe) {
		hp->n_expert = 4;
		hp->n_expert_used = 2;
	}
}

/* This rank's CPU partitions. */
static int local_members(loom_dev_t **devs)
{
	int n = 0;

	for (; n < MAX_LOCAL; n++) {
		char name[16];

		snprintf(name, sizeof(name), "cpu%d", n);
		devs[n] = loom_dev_by_name(name);
		if (!devs[n])
			break;
	}
	return n;
}

static int argmax(const float *v, int64_t n)
{
	int best = 0;

	for (int64_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = (int)i;
	return best;
}

/* Bytes of weights and cache this process holds for m: its members'
 * slices on a meta device. */
static size_t held(struct llama_model *m, loom_dev_t *dev)
{
	loom_buffer_t *buf = llama_model_weight_buffer(m);
	loom_meta_buffer_dev_sizes_fn fn;
	size_t sizes[MAX_LOCAL] = { 0 }, sum = 0;

	if (loom_dev_type(dev) != LOOM_DEV_TYPE_META)
		return llama_model_held_bytes(m, 0);
	*(void **)&fn = loom_reg_proc_address(loom_dev_reg(dev),
					      LOOM_PROC_META_BUFFER_DEV_SIZES);
	if (!fn || fn(buf, sizes, MAX_LOCAL))
		return 0;
	for (int j = 0; j < MAX_LOCAL; j++)
		sum += sizes[j];
	return sum;
}

/* Runs the prompt (all logits) and N_GEN greedy steps on dev: out gets
 * every logit, toks the tokens generated, *bytes what this process holds
 * of the model.  With a world, rank 0 picks each token and the others
 * take it from the broadcast. */
static int run(const struct llama_hparams *hp, loom_dev_t *dev,
	       struct world *w, float *out, int32_t *toks, size_t *bytes)
{
	int64_t nv = hp->n_vocab;
	struct llama_model *m = NULL;
	loom_backend_t *be = NULL;
	int32_t prompt[N_PROMPT];
	int ret;

	for (int i = 0; i < N_PROMPT; i++)
		prompt[i] = (int32_t)((i * 37 + 5) % nv);
	ret = llama_model_new(hp, dev, 7, &m);
	if (!ret)
		ret = loom_dev_init_backend(dev, NULL, &be);
	if (!ret)
		ret = llama_eval(m, be, prompt, N_PROMPT, 0, true, out);
	if (!ret)
		*bytes = held(m, dev);
	for (int s = 0; !ret && s < N_GEN; s++) {
		float *last = out + nv * (N_PROMPT - 1 + s);
		int32_t tok = argmax(last, nv);

		if (w)
			ret = w->bcast(w->reg, &tok, sizeof(tok), 0);
		toks[s] = tok;
		if (!ret)
			ret = llama_eval(m, be, &tok, 1, N_PROMPT + s, false,
					 last + nv);
	}
	loom_backend_free(be);
	llama_model_free(m);
	return ret;
}

static double nmse(const float *ref, const float *x, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i] - (double)ref[i];

		num += d * d;
		den += (double)ref[i] * (double)ref[i];
	}
	return den > 0 ? num / den : num;
}

static int check_decoder(bool uneven, bool moe, bool bf16)
{
	struct world w;
	struct llama_hparams hp;
	struct loom_meta_model model;
	struct loom_meta_opts opts = { .size = sizeof(opts) };
	loom_dev_t *devs[MAX_LOCAL], *meta = NULL;
	float ratios[MAX_LOCAL];
	size_t n_logits;
	float *ref, *got;
	int32_t ref_t[N_GEN], got_t[N_GEN];
	double e = -1;
	size_t ref_bytes = 0, got_bytes = 0;
	int n, total;

	if (open_world(&w))
		return 1;
	shape(&hp, moe);
	llama_meta_model(&hp, &model);
	n = local_members(devs);
	/* Uneven: every member of the world its own weight, 1 to 3. */
	for (int j = 0; j < n; j++)
		ratios[j] = (float)(1 + (rank * n + j) % 3);
	opts.ratios = uneven ? ratios : NULL;
	opts.world = w.reg;
	if (bf16) {
		opts.reduce_type = LOOM_TYPE_BF16;
		opts.bf16_min_bytes = 0;
	}
	n_logits = (size_t)hp.n_vocab * (N_PROMPT + N_GEN);
	ref = calloc(n_logits, sizeof(*ref));
	got = calloc(n_logits, sizeof(*got));
	CHECK(loom_meta_dev_new(devs, (size_t)n, NULL, &model, &opts, &meta) ==
	      LOOM_OK, "meta device over the world");
	CHECK(!meta || strstr(loom_dev_description(meta), "rank") != NULL,
	      "description '%s' names no rank",
	      meta ? loom_dev_description(meta) : "");
	CHECK(run(&hp, devs[0], NULL, ref, ref_t, &ref_bytes) == LOOM_OK,
	      "one device");
	if (meta) {
		CHECK(run(&hp, meta, &w, got, got_t, &got_bytes) == LOOM_OK,
		      "world");
		/* Each rank holds its slices only (norms and the embedding
		 * table are whole everywhere: on every member, so that
		 * more than 2 members of this tiny model may hold more). */
		CHECK(w.info.n_ranks == 1 || n > 2 || got_bytes < ref_bytes,
		      "this rank holds %zu bytes of a model of %zu", got_bytes,
		      ref_bytes);
		e = nmse(ref, got, n_logits);
		CHECK(e <= (bf16 ? 1e-3 : 1e-6), "nmse %.3g", e);
		/* BF16 sums move the logits by about 1e-5: no reference for
		 * near ties.  They must move them, or BF16 was not used. */
		CHECK(!bf16 || e > 0, "BF16 sums gave F32's logits");
		CHECK(bf16 || !memcmp(ref_t, got_t, sizeof(ref_t)),
		      "greedy tokens "
		      "differ (%d %d %d %d vs %d %d %d %d)", ref_t[0],
		      ref_t[1], ref_t[2], ref_t[3], got_t[0], got_t[1],
		      got_t[2], got_t[3]);
	}
	total = verdict(&w);
	if (rank == 0)
		printf("decoder over %d ranks x %d: %s (nmse %.3g)\n",
		       w.info.n_ranks, n, total == 0 ? "ok" : "FAIL", e);
	free(ref);
	free(got);
	loom_unload_all();
	return total != 0;
}

/* Rank 1 differs; every rank must fail with a message naming it. */
static int check_mismatch(bool ratios)
{
	struct world w;
	struct llama_hparams hp;
	struct loom_meta_model model;
	struct loom_meta_opts opts = { .size = sizeof(opts) };
	loom_dev_t *devs[MAX_LOCAL], *meta = NULL;
	struct llama_model *m = NULL;
	float r[MAX_LOCAL] = { 2, 1, 1, 1 };
	int n, st, total;

	if (open_world(&w))
		return 1;
	shape(&hp, false);
	llama_meta_model(&hp, &model);
	n = local_members(devs);
	opts.world = w.reg;
	if (ratios) {
		opts.ratios = rank == 1 ? r : NULL;
		st = loom_meta_dev_new(devs, (size_t)n, NULL, &model, &opts,
				       &meta);
		CHECK(st == LOOM_E_INVAL, "ratios on rank 1 only: status %d",
		      st);
	} else {
		/* The split policy has no model (the weights tell the
		 * difference): another layer count on rank 1. */
		st = loom_meta_dev_new(devs, (size_t)n, NULL, NULL, &opts,
				       &meta);
		CHECK(st == LOOM_OK, "meta device");
		if (rank == 1)
			hp.n_layer = 3;
		st = meta ? llama_model_new(&hp, meta, 7, &m) : LOOM_OK;
		CHECK(st == LOOM_E_INVAL, "another model on rank 1: status %d",
		      st);
		llama_model_free(m);
	}
	CHECK(strstr(loom_error_message(), "rank 1's") != NULL,
	      "the message names rank 1");
	if (!fails && rank == 0)
		printf("mismatch: %s\n", loom_error_message());
	total = verdict(&w);
	if (rank == 0)
		printf("mismatch %s: %s\n", ratios ? "ratios" : "shape",
		       total == 0 ? "ok" : "FAIL");
	loom_unload_all();
	return total != 0;
}

/* The values of a file of F32, *n of them (malloc'ed), or NULL. */
static float *read_f32(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	float *v = NULL;
	long size;

	if (!f)
		return NULL;
	if (!fseek(f, 0, SEEK_END) && (size = ftell(f)) > 0 &&
	    size % 4 == 0 && !fseek(f, 0, SEEK_SET)) {
		*n = (size_t)size / 4;
		v = malloc((size_t)size);
		if (v && fread(v, 4, *n, f) != *n) {
			free(v);
			v = NULL;
		}
	}
	fclose(f);
	return v;
}

static int check_files(const char *ref_path, const char *got_path)
{
	size_t n_ref = 0, n_got = 0;
	float *ref = read_f32(ref_path, &n_ref), *got = read_f32(got_path,
								&n_got);
	double e = ref && got && n_ref == n_got ? nmse(ref, got, n_ref) : -1;

	printf("nmse %s: %.3g (%zu values)\n",
	       e >= 0 && e <= 1e-6 ? "ok" : "FAIL", e, n_ref);
	free(ref);
	free(got);
	return !(e >= 0 && e <= 1e-6);
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "decoder"))
		return check_decoder(!strcmp(argv[2], "uneven"),
				     argc >= 4 && !strcmp(argv[3], "moe"),
				     argc >= 4 && !strcmp(argv[3], "bf16"));
	if (argc >= 3 && !strcmp(argv[1], "mismatch"))
		return check_mismatch(!strcmp(argv[2], "ratios"));
	if (argc == 4 && !strcmp(argv[1], "nmse"))
		return check_files(argv[2], argv[3]);
	fprintf(stderr, "usage: mpi-meta decoder even|uneven [moe|bf16] | "
		"mismatch shape|ratios | nmse REF GOT\n");
	return 2;
}
