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
 *   mpi-meta kquant even|uneven
 *                      a Llama-7B-shaped layer (d 4096, 32 heads of 128)
 *                      in Q4_K_M's types (Q4_K; Q6_K attn_v, ffn_down and
 *                      output), whose attention the policy cuts in units
 *                      of two heads (one K-quant block of 256): the
 *                      logits of a prompt and of greedy decode steps (the
 *                      world's tokens fed to one device too) agree with
 *                      one device, NMSE <= 1e-3
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

#include <math.h>
#include <stdint.h>
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

/* Runs the prompt (all logits) and N_GEN greedy steps on dev, with the
 * weights of src (NULL: the model library's synthetic ones): out gets
 * every logit, toks the tokens generated, *bytes what this process holds
 * of the model.  With a world, rank 0 picks each token and the others
 * take it from the broadcast; fed (not NULL) gives the tokens instead. */
static int run(const struct llama_hparams *hp,
	       const struct llama_source *src, loom_dev_t *dev,
	       struct world *w, const int32_t *fed, float *out, int32_t *toks,
	       size_t *bytes)
{
	int64_t nv = hp->n_vocab;
	struct llama_model *m = NULL;
	loom_backend_t *be = NULL;
	int32_t prompt[N_PROMPT];
	int ret;

	for (int i = 0; i < N_PROMPT; i++)
		prompt[i] = (int32_t)((i * 37 + 5) % nv);
	ret = src ? llama_model_load(hp, dev, src, &m) :
		    llama_model_new(hp, dev, 7, &m);
	if (!ret)
		ret = loom_dev_init_backend(dev, NULL, &be);
	if (!ret)
		ret = llama_eval(m, be, prompt, N_PROMPT, 0, true, out);
	if (!ret)
		*bytes = held(m, dev);
	for (int s = 0; !ret && s < N_GEN; s++) {
		float *last = out + nv * (N_PROMPT - 1 + s);
		int32_t tok = fed ? fed[s] : argmax(last, nv);

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
	CHECK(run(&hp, NULL, devs[0], NULL, NULL, ref, ref_t, &ref_bytes) ==
	      LOOM_OK, "one device");
	if (meta) {
		CHECK(run(&hp, NULL, meta, &w, NULL, got, got_t, &got_bytes) ==
		      LOOM_OK, "world");
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

/* The K-quant layer's weights: Q4_K_M's types, values drawn once per
 * tensor (a splitmix64 stream keyed on the name) and kept in their type's
 * bytes, so that one device and the world load the same blocks. */
struct kq_weight {
	char name[LOOM_MAX_NAME];
	void *bytes;
	size_t size;
};

struct kq_source {
	struct kq_weight w[32];
	int n;
};

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static int kq_type(void *user, const char *name, enum loom_type def,
		   enum loom_type *out)
{
	(void)user;
	*out = def == LOOM_TYPE_Q4_K && (strstr(name, "attn_v.") ||
					 strstr(name, "ffn_down.") ||
					 !strcmp(name, "output.weight")) ?
		       LOOM_TYPE_Q6_K : def;
	return LOOM_OK;
}

/* Norms 1 +- 0.1, matrices uniform with variance 1 / (3 n_in), the
 * embeddings +- 1. */
static int kq_fill(void *user, struct loom_tensor *t)
{
	struct kq_source *src = user;
	struct kq_weight *w = NULL;
	int64_t n = loom_tensor_n_elements(t);

	for (int i = 0; i < src->n && !w; i++)
		if (!strcmp(src->w[i].name, t->name))
			w = &src->w[i];
	if (!w) {
		bool norm = strstr(t->name, "norm") != NULL;
		bool mat = !norm && strcmp(t->name, "token_embd.weight");
		double scale = mat ? 1.0 / sqrt((double)t->ne[0]) :
				     norm ? 0.1 : 1;
		uint64_t seed = 0xcbf29ce484222325ull;
		float *f = malloc((size_t)n * sizeof(*f));

		if (src->n == (int)(sizeof(src->w) / sizeof(src->w[0])) || !f) {
			free(f);
			return loom_error_set(LOOM_E_NOMEM, "kquant: %s",
					      t->name);
		}
		w = &src->w[src->n++];
		snprintf(w->name, sizeof(w->name), "%s", t->name);
		for (const char *c = t->name; *c; c++)
			seed = (seed ^ (uint8_t)*c) * 0x100000001b3ull;
		for (int64_t i = 0; i < n; i++)
			f[i] = (float)((norm ? 1 : 0) +
				       scale * ((double)(splitmix64(&seed) >>
							 11) * 0x1p-52 -
						1));
		w->size = loom_tensor_n_bytes(t);
		w->bytes = malloc(w->size);
		if (!w->bytes ||
		    loom_type_convert(LOOM_TYPE_F32, f, t->type, w->bytes, n)) {
			free(f);
			return loom_error_set(LOOM_E_NOMEM, "kquant: %s: %s",
					      t->name, loom_error_message());
		}
		free(f);
	}
	if (w->size != loom_tensor_n_bytes(t))
		return loom_error_set(LOOM_E_INVAL, "kquant: %s changed size",
				      t->name);
	return loom_tensor_set(t, w->bytes, 0, w->size);
}

/* The Llama-7B-shaped layer over the world (every rank's partitions)
 * against one device of this process.  Rank 0's greedy tokens are fed to
 * the one device too, so that a near tie cannot make the two runs read
 * different prompts. */
static int check_kquant(bool uneven)
{
	struct world w;
	struct llama_hparams hp;
	struct loom_meta_model model;
	struct loom_meta_opts opts = { .size = sizeof(opts) };
	struct llama_source src = { kq_type, kq_fill, NULL };
	struct kq_source kq = { .n = 0 };
	loom_dev_t *devs[MAX_LOCAL], *meta = NULL;
	float ratios[MAX_LOCAL];
	size_t n_logits, ref_bytes = 0, got_bytes = 0;
	int32_t ref_t[N_GEN], got_t[N_GEN];
	float *ref, *got;
	double e = -1;
	int n, total;

	if (open_world(&w))
		return 1;
	/* 7b-layer's attention; one layer, a short FFN of 5 blocks and a
	 * small vocabulary, so that the uneven remainders show. */
	llama_hparams_preset("7b-layer", &hp);
	hp.n_layer = 1;
	hp.n_ff = 5 * 256;
	hp.n_vocab = 320;
	hp.n_ctx = 16;
	hp.wtype = LOOM_TYPE_Q4_K;
	llama_meta_model(&hp, &model);
	src.user = &kq;
	n = local_members(devs);
	/* Uneven: every member of the world its own weight, 1 to 3. */
	for (int j = 0; j < n; j++)
		ratios[j] = (float)(1 + (rank * n + j) % 3);
	opts.ratios = uneven ? ratios : NULL;
	opts.world = w.reg;
	n_logits = (size_t)hp.n_vocab * (N_PROMPT + N_GEN);
	ref = calloc(n_logits, sizeof(*ref));
	got = calloc(n_logits, sizeof(*got));
	CHECK(ref && got, "no memory");
	CHECK(loom_meta_dev_new(devs, (size_t)n, NULL, &model, &opts, &meta) ==
	      LOOM_OK, "meta device over the world");
	if (meta && ref && got) {
		int st = run(&hp, &src, meta, &w, NULL, got, got_t,
			     &got_bytes);

		CHECK(st == LOOM_OK, "world");
		if (!st) {
			st = run(&hp, &src, devs[0], NULL, got_t, ref, ref_t,
				 &ref_bytes);
			CHECK(st == LOOM_OK, "one device");
		}
		CHECK(st || w.info.n_ranks == 1 || got_bytes < ref_bytes,
		      "this rank holds %zu bytes of a model of %zu", got_bytes,
		      ref_bytes);
		e = st ? -1 : nmse(ref, got, n_logits);
		CHECK(st || e <= 1e-3, "nmse %.3g", e);
	}
	total = verdict(&w);
	if (rank == 0)
		printf("kquant over %d ranks x %d: %s (nmse %.3g)\n",
		       w.info.n_ranks, n, total == 0 ? "ok" : "FAIL", e);
	for (int i = 0; i < kq.n; i++)
		free(kq.w[i].bytes);
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
	if (argc == 3 && !strcmp(argv[1], "kquant"))
		return check_kquant(!strcmp(argv[2], "uneven"));
	if (argc >= 3 && !strcmp(argv[1], "mismatch"))
		return check_mismatch(!strcmp(argv[2], "ratios"));
	if (argc == 4 && !strcmp(argv[1], "nmse"))
		return check_files(argv[2], argv[3]);
	fprintf(stderr, "usage: mpi-meta decoder even|uneven [moe|bf16] | "
		"kquant even|uneven | mismatch shape|ratios | nmse REF GOT\n");
	return 2;
}
