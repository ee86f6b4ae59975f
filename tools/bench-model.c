/* SPDX-License-Identifier: MIT */
/* bench-model.c - `loom-bench model`: the example Llama-style decoder
 * (model/) run as prefill then decode on the best single device
 * and on a meta device, tokens/s beside the STREAM bandwidth, with the
 * meta output checked against the single device.  With --gpu-layers (or
 * a device that lacks ops of the model) a run spans two devices through
 * the scheduler (partial offload).
 */
#define _GNU_SOURCE
#include "app-devices.h"
#include "app-world.h"
#include "bench-util.h"
#include "decoder.h"
#include "model.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MODEL_MAX_RUNS 8
#define MODEL_MAX_MEMBERS 16
#define MODEL_MAX_NOTES 8
/* Prefill repeats stop once this much time has gone by. */
#define MODEL_PREFILL_BUDGET_S 6.0
#define MODEL_PREFILL_REPS 3

extern char **environ;

struct model_run {
	loom_dev_t *dev;
	char name[LOOM_MAX_NAME];
	char desc[160];
	bool is_meta;
	bool separate; /* measured by a child process on the whole CPU */
	/* A separate run is taken before and after the others; these are
	 * the two decode rates its figures are the mean of. */
	double decode_tok_s_runs[2];
	double build_s;
	double prefill_tok_s, prefill_ms;
	double decode_tok_s, decode_ms_median;
	double gbps;
	size_t weight_bytes, compute_bytes;
	int n_members;
	size_t dev_weights[MODEL_MAX_MEMBERS];
	size_t dev_compute[MODEL_MAX_MEMBERS];
	double nmse;
	bool has_nmse;
	float *logits; /* n_vocab * (1 + decode): prefill's last, each step */
	int graph_nodes;
	char note[160];
	/* Partial offload: layers [0, n_first) on dev, the others and the
	 * ops dev lacks on rest, through the scheduler. */
	loom_dev_t *rest;
	int64_t n_first;
	struct loom_sched_stats sched; /* of the decode steps alone */
	double copy_share;             /* of the decode time */
	double limit_gbps; /* what its decode GB/s is a share of, or 0 */
};

struct model_bench {
	const struct bench_opts *o;
	struct llama_hparams hp;
	int32_t *tokens; /* prefill + decode */
	int n_runs;
	struct model_run runs[MODEL_MAX_RUNS];
	struct bench_stream st;
	size_t decode_bytes, weight_bytes;
	int64_t n_params;
	char notes[MODEL_MAX_NOTES][200];
	int n_notes;
	bool whole_ref; /* the reference is the whole CPU in a child */
	/* With the reference child running beside this process: the
	 * socket the two pass their turns over (-1: none), and whether this
	 * side has yet to let the other go first. */
	int turn_fd;
	bool turn_first;
	bool interleaved; /* the reference was measured so */
	struct gguf *g; /* --gguf: the file's model, not a preset */
	loom_dev_t *single; /* the best single device */
	/* Under mpirun: the ranks, and with LOOM_META_WORLD the median time
	 * of one world_allreduce of n_embd floats (what a layer pays twice
	 * per token beyond one process). */
	struct app_world world;
	double world_allreduce_us;
	/* Devices other than the CPU: each one's own copy bandwidth. */
	loom_dev_t *copy_dev[MODEL_MAX_RUNS];
	double copy_gbps[MODEL_MAX_RUNS];
	int n_copy;
};

static void add_note(struct model_bench *mb, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void add_note(struct model_bench *mb, const char *fmt, ...)
{
	va_list ap;

	if (mb->n_notes == MODEL_MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(mb->notes[mb->n_notes++], sizeof(mb->notes[0]), fmt, ap);
	va_end(ap);
}

/* Per-member bytes of a meta device's buffers and backend, through the
 * meta plugin's entry points; a plain device is its own single member. */
static void member_sizes(struct model_run *r, struct llama_model *m,
			 loom_backend_t *be)
{
	loom_reg_t *reg = loom_dev_reg(r->dev);
	loom_meta_buffer_dev_sizes_fn buf_sizes = NULL;
	loom_meta_backend_dev_sizes_fn be_sizes = NULL;
	size_t w[MODEL_MAX_MEMBERS] = { 0 }, c[MODEL_MAX_MEMBERS] = { 0 };
	size_t extra[MODEL_MAX_MEMBERS] = { 0 }, mw[MODEL_MAX_MEMBERS] = { 0 };
	loom_buffer_t *cbuf = llama_model_compute_buffer(m);
	loom_buffer_t *mbuf = llama_model_matrix_buffer(m);

	r->n_members = 1;
	r->dev_weights[0] = llama_model_held_bytes(m, 0);
	r->dev_compute[0] = r->compute_bytes;
	if (!r->is_meta || !reg)
		return;
	*(void **)&buf_sizes =
		loom_reg_proc_address(reg, LOOM_PROC_META_BUFFER_DEV_SIZES);
	*(void **)&be_sizes =
		loom_reg_proc_address(reg, LOOM_PROC_META_BACKEND_DEV_SIZES);
	if (!buf_sizes ||
	    buf_sizes(llama_model_weight_buffer(m), w, MODEL_MAX_MEMBERS))
		return;
	if (mbuf && !buf_sizes(mbuf, mw, MODEL_MAX_MEMBERS))
		for (int j = 0; j < MODEL_MAX_MEMBERS; j++)
			w[j] += mw[j];
	if (cbuf)
		buf_sizes(cbuf, c, MODEL_MAX_MEMBERS);
	if (be_sizes)
		be_sizes(be, extra, MODEL_MAX_MEMBERS);
	r->n_members = 0;
	for (int j = 0; j < MODEL_MAX_MEMBERS; j++) {
		if (!w[j] && !c[j] && !extra[j])
			continue;
		r->dev_weights[r->n_members] = w[j];
		r->dev_compute[r->n_members] = c[j] + extra[j];
		r->n_members++;
	}
}

/* What a run computes on: one backend, or a scheduler over a backend of
 * each of its two devices. */
struct engine {
	loom_backend_t *be[2];
	loom_sched_t *s;
};

static int engine_new(const struct bench_opts *o, struct model_run *r,
		      struct engine *e)
{
	int ret = bench_backend(r->dev, o, &e->be[0]);

	if (!ret && r->rest)
		ret = bench_backend(r->rest, o, &e->be[1]);
	if (!ret && r->rest)
		ret = loom_sched_new(e->be, 2, &e->s);
	return ret;
}

static void engine_free(struct engine *e)
{
	loom_sched_free(e->s);
	loom_backend_free(e->be[1]);
	loom_backend_free(e->be[0]);
}

static int engine_eval(struct engine *e, struct llama_model *m,
		       const int32_t *tokens, int n, int n_past, float *logits)
{
	return e->s ? llama_eval_sched(m, e->s, tokens, n, n_past, false,
				       logits)
		    : llama_eval(m, e->be[0], tokens, n, n_past, false, logits);
}

/* A split run's memory: weights and cache, and compute, per device. */
static void placed_sizes(struct model_run *r, struct llama_model *m,
			 const struct engine *e)
{
	r->n_members = 2;
	r->dev_weights[0] = llama_model_held_bytes(m, 0);
	r->dev_weights[1] = llama_model_held_bytes(m, 1);
	r->dev_compute[0] = loom_sched_buffer_size(e->s, 0);
	r->dev_compute[1] = loom_sched_buffer_size(e->s, 1);
	r->compute_bytes = r->dev_compute[0] + r->dev_compute[1];
}

/* --internal-turns FD, where FD is a socket: any other is not ours to
 * read or close. */
static int turn_socket(int fd)
{
	struct stat st;

	return fd >= 0 && !fstat(fd, &st) && S_ISSOCK(st.st_mode) ? fd : -1;
}

/* Interleaved runs: the reference child and this process take turns,
 * one step each (a prefill, a decode token), so that both meet the
 * machine as it is at that moment; a shared host's load moves by tens of
 * percent within seconds, which runs one after the other cannot cancel.
 * A side that ends, or a socket that fails, leaves the other to go on
 * alone. */
static void turn_close(struct model_bench *mb)
{
	if (mb->turn_fd >= 0)
		close(mb->turn_fd);
	mb->turn_fd = -1;
}

static void turn_give(struct model_bench *mb)
{
	char c = 0;

	if (mb->turn_fd >= 0 &&
	    send(mb->turn_fd, &c, 1, MSG_NOSIGNAL) != 1)
		turn_close(mb);
}

/* Waits for the other side's step, then for its idle workers to have
 * stopped spinning (CPU_SPIN_NS_DEFAULT, 200 us), untimed. */
static void turn_take(struct model_bench *mb)
{
	struct timespec nap = { 0, 300000 };
	ssize_t n;
	char c;

	if (mb->turn_fd < 0)
		return;
	if (mb->turn_first) {
		mb->turn_first = false;
		turn_give(mb);
		if (mb->turn_fd < 0)
			return;
	}
	do
		n = recv(mb->turn_fd, &c, 1, 0);
	while (n < 0 && errno == EINTR);
	if (n != 1) {
		turn_close(mb);
		return;
	}
	nanosleep(&nap, NULL);
}

/* One step of run_device, in its turn. */
static int eval_turn(struct model_bench *mb, struct engine *e,
		     struct llama_model *m, const int32_t *tokens, int n,
		     int pos, float *logits, double *secs)
{
	double t1;
	int ret;

	turn_take(mb);
	t1 = bench_now();
	ret = engine_eval(e, m, tokens, n, pos, logits);
	if (secs)
		*secs = bench_now() - t1;
	turn_give(mb);
	return ret;
}

/* One device (or two, split): build, warm up, prefill (median of
 * repeats), then decode token by token, keeping every logit vector for
 * the comparison. */
static int run_device(struct model_bench *mb, struct model_run *r)
{
	const struct bench_opts *o = mb->o;
	int64_t V = mb->hp.n_vocab;
	int P = o->prefill, D = o->decode;
	struct llama_placement pl = { r->dev, r->rest, r->n_first };
	struct loom_sched_stats st0 = { .size = sizeof(st0) };
	struct llama_model *m = NULL;
	struct engine e = { .s = NULL };
	double t0, *tp = NULL, *td = NULL, sum = 0;
	char what[96];
	int reps = o->reps < MODEL_PREFILL_REPS ? o->reps : MODEL_PREFILL_REPS;
	int n_p = 0, ret;

	r->logits = calloc((size_t)(V * (1 + D)), sizeof(float));
	tp = calloc((size_t)o->reps, sizeof(*tp));
	td = calloc((size_t)(D + 1), sizeof(*td));
	if (!r->logits || !tp || !td) {
		ret = loom_error_set(LOOM_E_NOMEM, "no memory");
		goto out;
	}
	snprintf(what, sizeof(what), "%s: building", r->name);
	bench_progress(what, 0, 1);
	t0 = bench_now();
	ret = mb->g ? model_load_placed(mb->g, &mb->hp, &pl, NULL, NULL, &m)
		    : llama_model_new_placed(&mb->hp, &pl, o->seed, &m);
	if (!ret)
		ret = engine_new(o, r, &e);
	if (!ret)
		ret = e.s ? llama_model_reserve_sched(m, e.s, P)
			  : llama_model_reserve(m, P);
	if (ret)
		goto out;
	r->build_s = bench_now() - t0;
	r->weight_bytes = llama_model_weight_bytes(m);
	mb->decode_bytes = llama_model_decode_bytes(m);
	mb->weight_bytes = r->weight_bytes;
	mb->n_params = llama_model_n_params(m);

	/* Warm up with the prompt's own batch, as llama-bench does: every
	 * weight is read once and the graph of that shape, its buffers and
	 * its plan exist before the clock starts. */
	snprintf(what, sizeof(what), "%s: prefill", r->name);
	bench_progress(what, 0, reps);
	ret = eval_turn(mb, &e, m, mb->tokens, P, 0, r->logits, NULL);
	t0 = bench_now();
	for (n_p = 0; !ret && n_p < reps; n_p++) {
		ret = eval_turn(mb, &e, m, mb->tokens, P, 0, r->logits,
				&tp[n_p]);
		bench_progress(what, n_p + 1, reps);
		if (bench_now() - t0 > MODEL_PREFILL_BUDGET_S) {
			n_p++;
			break;
		}
	}
	if (ret)
		goto out;
	r->prefill_ms = bench_median(tp, n_p) * 1e3;
	r->prefill_tok_s = P / (r->prefill_ms * 1e-3);

	snprintf(what, sizeof(what), "%s: decode", r->name);
	/* One untimed token builds the decode graph; the timed tokens
	 * start at the same position again. */
	if (D)
		ret = eval_turn(mb, &e, m, &mb->tokens[P], 1, P,
				r->logits + V, NULL);
	if (e.s)
		loom_sched_get_stats(e.s, &st0);
	for (int i = 0; !ret && i < D; i++) {
		ret = eval_turn(mb, &e, m, &mb->tokens[P + i], 1, P + i,
				r->logits + V * (1 + i), &td[i]);
		sum += td[i];
		if (i % 8 == 0)
			bench_progress(what, i, D);
	}
	if (ret)
		goto out;
	if (D) {
		r->decode_tok_s = D / sum;
		r->decode_ms_median = bench_median(td, D) * 1e3;
		r->gbps = (double)mb->decode_bytes * r->decode_tok_s * 1e-9;
	}
	r->compute_bytes = llama_model_compute_bytes(m);
	r->graph_nodes = llama_model_graph_nodes(m);
	if (e.s) {
		placed_sizes(r, m, &e);
		r->sched.size = sizeof(r->sched);
		loom_sched_get_stats(e.s, &r->sched);
		r->copy_share = sum > 0 ? (r->sched.copy_s - st0.copy_s) / sum
					: 0;
	} else {
		member_sizes(r, m, e.be[0]);
	}
out:
	bench_progress_end();
	engine_free(&e);
	llama_model_free(m);
	free(td);
	free(tp);
	return ret;
}

static double nmse(const float *x, const float *ref, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		double d = (double)x[i] - ref[i];

		num += d * d;
		den += (double)ref[i] * ref[i];
	}
	return den > 0 ? num / den : (num > 0 ? INFINITY : 0);
}

static struct model_run *add_run(struct model_bench *mb, loom_dev_t *dev)
{
	struct model_run *r;

	if (mb->n_runs == MODEL_MAX_RUNS)
		return NULL;
	r = &mb->runs[mb->n_runs++];
	memset(r, 0, sizeof(*r));
	r->dev = dev;
	r->is_meta = loom_dev_type(dev) == LOOM_DEV_TYPE_META;
	snprintf(r->name, sizeof(r->name), "%s", loom_dev_name(dev));
	snprintf(r->desc, sizeof(r->desc), "%s", loom_dev_description(dev));
	return r;
}

/* The members of a composed meta device, read from its description
 * "meta(cpu0,cpu1)"; 0 when it does not read that way. */
static size_t meta_members(loom_dev_t *meta, loom_dev_t **devs, size_t max)
{
	const char *d = loom_dev_description(meta);
	char buf[256], *p, *end, *save = NULL;
	size_t n = 0;

	if (!d || strncmp(d, "meta(", 5))
		return 0;
	snprintf(buf, sizeof(buf), "%s", d + 5);
	end = strchr(buf, ')');
	if (!end)
		return 0;
	*end = '\0';
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		while (*p == ' ')
			p++;
		if (n == max || !(devs[n] = loom_dev_by_name(p)))
			return 0;
		n++;
	}
	return n;
}

/* Makes r a split run: layers [0, n_first) on its device, the rest on
 * rest, named "dev+rest". */
static void split_run(struct model_run *r, loom_dev_t *rest, int64_t n_first,
		      int64_t n_layer)
{
	r->rest = rest;
	r->n_first = n_first < n_layer ? n_first : n_layer;
	snprintf(r->name, sizeof(r->name), "%s+%s", loom_dev_name(r->dev),
		 loom_dev_name(rest));
	snprintf(r->desc, sizeof(r->desc), "layers 0-%lld on %s, the rest "
		 "and the ops it lacks on %s", (long long)r->n_first - 1,
		 loom_dev_name(r->dev), loom_dev_name(rest));
	if (r->n_first == 0)
		snprintf(r->desc, sizeof(r->desc), "no layer on %s, all on %s",
			 loom_dev_name(r->dev), loom_dev_name(rest));
}

/* --gpu-layers N: the second device of --devices (else a CPU) alone, the
 * reference, then the split over both. */
static int plan_offload(struct model_bench *mb)
{
	const struct bench_opts *o = mb->o;
	loom_dev_t *devs[2] = { bench_pick_device(o), NULL }, *rest;
	struct model_run *r;
	size_t n = 1;
	int ret;

	if (o->devices) {
		ret = app_devices_parse(o->devices, devs, 2, &n);
		if (ret)
			return ret;
	}
	if (!devs[0])
		return loom_error_set(LOOM_E_NOT_FOUND, "no device (see "
				      "loom-info)");
	rest = app_devices_second(devs[0], n > 1 ? devs[1] : NULL);
	if (!rest)
		return LOOM_E_NOT_FOUND;
	add_run(mb, rest);
	r = add_run(mb, devs[0]);
	split_run(r, rest, o->gpu_layers, mb->hp.n_layer);
	return LOOM_OK;
}

/* A device that lacks ops of the model runs it with a CPU taking what it
 * lacks (all layers on the device). */
static void fall_back(struct model_bench *mb)
{
	for (int i = 0; i < mb->n_runs; i++) {
		struct model_run *r = &mb->runs[i];
		loom_dev_t *cpu;
		char what[160];
		bool runs;

		if (r->is_meta || r->rest || r->separate)
			continue;
		runs = mb->g ? model_dev_runs(mb->g, &mb->hp, r->dev, what,
					      sizeof(what))
			     : llama_dev_runs(&mb->hp, NULL, r->dev, what,
					      sizeof(what));
		if (runs || !(cpu = app_devices_other_cpu(r->dev)))
			continue;
		add_note(mb, "%s lacks %s: %s runs what it lacks", r->name,
			 what, loom_dev_name(cpu));
		split_run(r, cpu, mb->hp.n_layer, mb->hp.n_layer);
	}
}

/* The model's shape, for the meta devices the runs make. */
static struct model_split_state *model_shape(struct model_bench *mb)
{
	/* A meta device keeps the pointer: it must outlive the run. */
	static struct model_split_state shape;

	model_split_state_init(&mb->hp, mb->g, &shape);
	return &shape;
}

/* A composed meta device (LOOM_META_DEVICES) splits without knowing the
 * heads, and guesses them wrong where head_dim is not 64 or 128: a meta
 * device over the same members with the model's shape in its place, or
 * meta itself when that cannot be made. */
static loom_dev_t *meta_with_shape(struct model_bench *mb, loom_dev_t *meta)
{
	loom_dev_t *devs[MODEL_MAX_MEMBERS], *own;
	size_t n = meta_members(meta, devs, MODEL_MAX_MEMBERS);

	if (n >= 1 && !loom_meta_dev_new(devs, n, model_split,
					 model_shape(mb), NULL, &own))
		return own;
	return meta;
}

/* The run of one --devices: a name is that device, a list the meta
 * device over those, as loom-run makes it; *first gets the first device
 * named and *n how many were. */
static int device_run(struct model_bench *mb, const char *list,
		      loom_dev_t **out, loom_dev_t **first, size_t *n)
{
	loom_dev_t *devs[MODEL_MAX_MEMBERS];
	int ret = app_devices_parse(list, devs, MODEL_MAX_MEMBERS, n);

	if (ret)
		return ret;
	*first = devs[0];
	if (*n > 1)
		return loom_meta_dev_new(devs, *n, model_split,
					 model_shape(mb), NULL, out);
	*out = loom_dev_type(devs[0]) == LOOM_DEV_TYPE_META
		       ? meta_with_shape(mb, devs[0])
		       : devs[0];
	return LOOM_OK;
}

/* Whether meta's members are every CPU device, each once: the cores one
 * device over the whole CPU (a child process) has too. */
static bool spans_the_cpu(loom_dev_t *meta)
{
	loom_dev_t *devs[MODEL_MAX_MEMBERS];
	loom_reg_t *cpu = loom_reg_by_name("cpu");
	size_t n = meta_members(meta, devs, MODEL_MAX_MEMBERS);

	if (!cpu || n < 2 || n != loom_reg_dev_count(cpu))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (loom_dev_reg(devs[i]) != cpu)
			return false;
		for (size_t k = 0; k < i; k++)
			if (devs[k] == devs[i])
				return false;
	}
	return true;
}

/* A note for each device the runs leave out, saying why and how to
 * measure it. */
static void note_left_out(struct model_bench *mb, loom_dev_t *meta)
{
	loom_dev_t *members[MODEL_MAX_MEMBERS];
	size_t n = meta ? meta_members(meta, members, MODEL_MAX_MEMBERS) : 0;

	for (size_t i = 0; i < loom_dev_count(); i++) {
		loom_dev_t *d = loom_dev_get(i);
		char what[160];
		bool used = loom_dev_type(d) == LOOM_DEV_TYPE_META;

		for (int k = 0; k < mb->n_runs && !used; k++)
			used = mb->runs[k].dev == d;
		for (size_t k = 0; k < n && !used; k++)
			used = members[k] == d;
		if (used)
			continue;
		if (mb->g ? model_dev_runs(mb->g, &mb->hp, d, what,
					   sizeof(what))
			  : llama_dev_runs(&mb->hp, NULL, d, what,
					   sizeof(what)))
			add_note(mb, "%s not measured: only the first device "
				 "and a meta device are (--devices %s measures "
				 "it)",
				 loom_dev_name(d), loom_dev_name(d));
		else
			add_note(mb, "%s not measured: it lacks %s (--devices "
				 "%s runs it, a CPU taking what it lacks)",
				 loom_dev_name(d), what, loom_dev_name(d));
	}
}

/* The devices to run: each --devices given more than once; else the best
 * single device (the first device of a --devices list) plus a meta device
 * (that of the list, the registered one, or one made over the CPU
 * partitions). */
static int plan_devices(struct model_bench *mb)
{
	const struct bench_opts *o = mb->o;
	loom_dev_t *single = NULL, *meta = NULL, *dev;
	loom_reg_t *cpu = loom_reg_by_name("cpu");
	size_t n = 0;
	int ret;

	if (o->gpu_layers >= 0)
		return plan_offload(mb);
	for (int i = 0; i < o->n_device_lists && o->n_device_lists > 1; i++) {
		ret = device_run(mb, o->device_lists[i], &dev, &single, &n);
		if (ret)
			return ret;
		add_run(mb, dev);
	}
	if (o->n_device_lists > 1)
		return LOOM_OK;
	if (o->n_device_lists == 1) {
		ret = device_run(mb, o->devices, &dev, &single, &n);
		if (ret)
			return ret;
		if (n == 1 || o->internal) {
			add_run(mb, dev);
			return LOOM_OK;
		}
		meta = dev;
	} else {
		single = bench_pick_device(o);
		if (!single)
			return loom_error_set(LOOM_E_NOT_FOUND, "no device");
		if (o->internal) {
			add_run(mb, single);
			return LOOM_OK;
		}
		meta = loom_dev_by_type(LOOM_DEV_TYPE_META);
	}
	/* A registered meta device gets the model's shape; a list's has
	 * it. */
	if (meta && n < 2) {
		meta = meta_with_shape(mb, meta);
	} else if (!meta && cpu && loom_reg_dev_count(cpu) >=
					   (mb->world.meta ? 1u : 2u)) {
		loom_dev_t *devs[MODEL_MAX_MEMBERS];

		n = loom_reg_dev_count(cpu);
		if (n > MODEL_MAX_MEMBERS)
			n = MODEL_MAX_MEMBERS;
		for (size_t i = 0; i < n; i++)
			devs[i] = loom_reg_dev(cpu, i);
		ret = loom_meta_dev_new(devs, n, model_split, model_shape(mb),
					NULL, &meta);
		if (ret) {
			add_note(mb, "meta run skipped: %s", loom_error_message());
			meta = NULL;
		}
	}
	if (!meta && !(cpu && loom_reg_dev_count(cpu) >= 2))
		add_note(mb, "no meta device: set LOOM_CPU_DEVICES=2 (and "
			     "optionally LOOM_META_DEVICES=cpu0,cpu1)");
	/* A meta device over CPU partitions is compared with one device on
	 * all of their cores (a child process), not with one partition. */
	mb->single = single;
	/* Under mpirun a child process would be one more rank. */
	mb->whole_ref = meta && loom_dev_type(single) == LOOM_DEV_TYPE_CPU &&
			spans_the_cpu(meta) && !mb->world.reg;
	if (!mb->whole_ref)
		add_run(mb, single);
	if (meta)
		add_run(mb, meta);
	if (o->n_device_lists == 0)
		note_left_out(mb, meta);
	return LOOM_OK;
}

/* With the CPU split in partitions no device has all the cores; the
 * same model on one device over all of them runs in a child process
 * without LOOM_CPU_DEVICES.  It is the reference, for the logits and for
 * the tensor-parallel overhead at equal cores.  Started with turns, the
 * child takes its steps in turn with this process's (turn_take). */
struct child_run {
	pid_t pid;
	char path[32];
};

static int whole_start(struct model_bench *mb, struct child_run *c,
		       bool turns)
{
	const struct bench_opts *o = mb->o;
	char a_pre[16], a_dec[16], a_reps[16], a_seed[32], a_thr[16];
	char a_type[16], a_turn[16];
	char *argv[32];
	posix_spawn_file_actions_t fa;
	int argc = 0, fd, sv[2] = { -1, -1 };

	if (mb->n_runs == MODEL_MAX_RUNS)
		return LOOM_E_RANGE;
	snprintf(c->path, sizeof(c->path), "/tmp/loom-bench-XXXXXX");
	fd = mkstemp(c->path);
	if (fd < 0)
		return loom_error_set(LOOM_E_IO, "mkstemp: %s",
				      strerror(errno));
	close(fd);
	/* The child inherits its end under its own number; ours closes
	 * there. */
	if (turns && (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) ||
		      fcntl(sv[0], F_SETFD, FD_CLOEXEC))) {
		if (sv[0] >= 0) {
			close(sv[0]);
			close(sv[1]);
		}
		sv[0] = sv[1] = -1;
	}
	snprintf(a_pre, sizeof(a_pre), "%d", o->prefill);
	snprintf(a_dec, sizeof(a_dec), "%d", o->decode);
	snprintf(a_reps, sizeof(a_reps), "%d", o->reps);
	snprintf(a_seed, sizeof(a_seed), "%llu", (unsigned long long)o->seed);
	snprintf(a_thr, sizeof(a_thr), "%d", o->threads);
	snprintf(a_type, sizeof(a_type), "%s", loom_type_name(mb->hp.wtype));
	snprintf(a_turn, sizeof(a_turn), "%d", sv[1]);
	argv[argc++] = "loom-bench";
	argv[argc++] = "model";
	argv[argc++] = "--internal-single";
	argv[argc++] = c->path;
	argv[argc++] = "--preset";
	argv[argc++] = (char *)o->preset;
	argv[argc++] = "--type";
	argv[argc++] = a_type;
	argv[argc++] = "--prefill";
	argv[argc++] = a_pre;
	argv[argc++] = "--decode";
	argv[argc++] = a_dec;
	argv[argc++] = "--reps";
	argv[argc++] = a_reps;
	argv[argc++] = "--seed";
	argv[argc++] = a_seed;
	if (o->gguf) {
		argv[argc++] = "--gguf";
		argv[argc++] = (char *)o->gguf;
	}
	if (o->threads > 0) {
		argv[argc++] = "--threads";
		argv[argc++] = a_thr;
	}
	if (sv[1] >= 0) {
		argv[argc++] = "--internal-turns";
		argv[argc++] = a_turn;
	}
	argv[argc] = NULL;

	/* The child sees the whole CPU as one device; its progress line
	 * shares our terminal. */
	unsetenv("LOOM_CPU_DEVICES");
	unsetenv("LOOM_META_DEVICES");
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null",
					 O_WRONLY, 0);
	fd = posix_spawn(&c->pid, "/proc/self/exe", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	if (sv[1] >= 0)
		close(sv[1]);
	if (fd) {
		if (sv[0] >= 0)
			close(sv[0]);
		unlink(c->path);
		return loom_error_set(LOOM_E_IO, "cannot run a child: %s",
				      strerror(fd));
	}
	mb->turn_fd = sv[0];
	mb->turn_first = true;
	return LOOM_OK;
}

/* Waits for the child of whole_start and appends its run. */
static int whole_finish(struct model_bench *mb, struct child_run *c)
{
	size_t n_logits = (size_t)(mb->hp.n_vocab * (1 + mb->o->decode));
	struct model_run *r = &mb->runs[mb->n_runs];
	int status, ret;
	FILE *f;

	memset(r, 0, sizeof(*r));
	if (waitpid(c->pid, &status, 0) < 0 || !WIFEXITED(status) ||
	    WEXITSTATUS(status)) {
		unlink(c->path);
		return loom_error_set(LOOM_E_DEVICE,
				      "the whole-CPU reference run failed");
	}
	r->logits = malloc(n_logits * sizeof(float));
	f = fopen(c->path, "r");
	if (f && r->logits &&
	    fscanf(f, "%63s %lf %lf %lf %lf %zu %zu", r->name,
		   &r->prefill_tok_s, &r->prefill_ms, &r->decode_tok_s,
		   &r->decode_ms_median, &r->compute_bytes,
		   &r->weight_bytes) == 7 &&
	    fgetc(f) == '\n' &&
	    fread(r->logits, sizeof(float), n_logits, f) == n_logits) {
		r->separate = true;
		r->n_members = 1;
		r->dev_compute[0] = r->compute_bytes;
		r->dev_weights[0] = r->weight_bytes;
		snprintf(r->desc, sizeof(r->desc),
			 "one device on all cores (separate process)");
		mb->n_runs++;
		ret = LOOM_OK;
	} else {
		free(r->logits);
		r->logits = NULL;
		ret = loom_error_set(LOOM_E_IO, "bad reference run output");
	}
	if (f)
		fclose(f);
	unlink(c->path);
	return ret;
}

static int run_whole_cpu(struct model_bench *mb)
{
	struct child_run c;
	int ret = whole_start(mb, &c, false);

	return ret ? ret : whole_finish(mb, &c);
}

/* Folds the reference run just appended into the first one (runs[0]):
 * taken before and after the others, their mean time per token cancels
 * a machine that drifts during the run, as a shared one does. */
static void merge_reference(struct model_bench *mb)
{
	struct model_run *a = &mb->runs[0], *b = &mb->runs[mb->n_runs - 1];

	a->decode_tok_s_runs[0] = a->decode_tok_s;
	a->decode_tok_s_runs[1] = b->decode_tok_s;
	a->prefill_ms = (a->prefill_ms + b->prefill_ms) / 2;
	a->prefill_tok_s = mb->o->prefill / (a->prefill_ms * 1e-3);
	if (a->decode_tok_s > 0 && b->decode_tok_s > 0)
		a->decode_tok_s = 2 / (1 / a->decode_tok_s +
				       1 / b->decode_tok_s);
	a->decode_ms_median = (a->decode_ms_median + b->decode_ms_median) / 2;
	free(b->logits);
	memset(b, 0, sizeof(*b));
	mb->n_runs--;
}

/* The child's side of run_whole_cpu(). */
static int write_internal(struct model_bench *mb, const char *path)
{
	const struct model_run *r = &mb->runs[0];
	size_t n = (size_t)(mb->hp.n_vocab * (1 + mb->o->decode));
	FILE *f = fopen(path, "w");
	int ok;

	if (!f)
		return loom_error_set(LOOM_E_IO, "%s: %s", path,
				      strerror(errno));
	fprintf(f, "%s %.17g %.17g %.17g %.17g %zu %zu\n", r->name,
		r->prefill_tok_s, r->prefill_ms, r->decode_tok_s,
		r->decode_ms_median, r->compute_bytes, r->dev_weights[0]);
	ok = fwrite(r->logits, sizeof(float), n, f) == n;
	ok = !fclose(f) && ok;
	return ok ? LOOM_OK : loom_error_set(LOOM_E_IO, "%s: short write",
					     path);
}

/* Finds the runs the overhead is measured between: the whole-CPU run of
 * a separate process, the first meta run and the first plain device run
 * of this process; each is NULL when there is none. */
static void pick_runs(const struct model_bench *mb,
		      const struct model_run **ref,
		      const struct model_run **meta,
		      const struct model_run **whole)
{
	*ref = *meta = *whole = NULL;
	for (int i = 0; i < mb->n_runs; i++) {
		const struct model_run *r = &mb->runs[i];

		if (r->separate)
			*whole = r;
		else if (r->is_meta && !*meta)
			*meta = r;
		else if (!r->is_meta && !*ref)
			*ref = r;
	}
}

/* Writes key: { run: [bytes per member device] } for the runs of this
 * process, the weight sizes when weights is set, else the compute sizes. */
static void json_member_sizes(struct bench_json *j, struct model_bench *mb,
			      const char *key, bool weights)
{
	bj_obj_begin(j, key);
	for (int i = 0; i < mb->n_runs; i++) {
		const struct model_run *r = &mb->runs[i];
		const size_t *v = weights ? r->dev_weights : r->dev_compute;

		if (r->separate)
			continue;
		bj_arr_begin(j, r->name);
		for (int k = 0; k < r->n_members; k++)
			bj_int(j, NULL, (int64_t)v[k]);
		bj_arr_end(j);
	}
	bj_obj_end(j);
}

/* Over a world: the median of world_allreduce on n_embd floats, the
 * size of the two allreduces per layer of a decode step. */
static int measure_world(struct model_bench *mb)
{
	enum { REPS = 200 };
	size_t n = (size_t)mb->hp.n_embd;
	float *v = calloc(n, sizeof(*v));
	double t[REPS];
	int ret = LOOM_OK;

	if (!v)
		return LOOM_E_NOMEM;
	for (int i = 0; !ret && i < REPS; i++) {
		double t0 = bench_now();

		ret = mb->world.allreduce(mb->world.reg, v, n, LOOM_TYPE_F32);
		t[i] = bench_now() - t0;
	}
	if (!ret)
		mb->world_allreduce_us = bench_median(t, REPS) * 1e6;
	free(v);
	return ret;
}

static void json_world(struct bench_json *j, const struct model_bench *mb)
{
	bj_obj_begin(j, "world");
	bj_int(j, "ranks", mb->world.n_ranks);
	bj_bool(j, "meta", mb->world.meta);
	bj_num(j, "allreduce_us", mb->world_allreduce_us);
	bj_int(j, "allreduces_per_token", 2 * mb->hp.n_layer);
	bj_obj_end(j);
}

static void print_json(struct model_bench *mb)
{
	const struct bench_opts *o = mb->o;
	const struct model_run *ref, *meta, *whole;
	struct bench_json j;
	double worst = -1;

	pick_runs(mb, &ref, &meta, &whole);
	for (int i = 0; i < mb->n_runs; i++)
		if (mb->runs[i].has_nmse && mb->runs[i].nmse > worst)
			worst = mb->runs[i].nmse;
	bj_init(&j, stdout);
	bj_obj_begin(&j, NULL);
	bj_str(&j, "preset", o->gguf ? o->gguf : o->preset);
	bj_str(&j, "type", loom_type_name(mb->hp.wtype));
	bj_int(&j, "n_params", mb->n_params);
	bj_int(&j, "n_layer", mb->hp.n_layer);
	bj_int(&j, "n_expert", mb->hp.n_expert);
	bj_int(&j, "prefill", o->prefill);
	bj_int(&j, "decode", o->decode);
	bj_int(&j, "decode_bytes_per_token", (int64_t)mb->decode_bytes);
	if (mb->st.read_gbps > 0)
		bj_num(&j, "stream_gbps", mb->st.read_gbps);
	else
		bj_null(&j, "stream_gbps");
	bj_arr_begin(&j, "devices");
	for (int i = 0; i < mb->n_runs; i++)
		if (!mb->runs[i].separate)
			bj_str(&j, NULL, mb->runs[i].name);
	bj_arr_end(&j);
	bj_obj_begin(&j, "prefill_tok_s");
	for (int i = 0; i < mb->n_runs; i++)
		if (!mb->runs[i].separate)
			bj_num(&j, mb->runs[i].name, mb->runs[i].prefill_tok_s);
	bj_obj_end(&j);
	bj_obj_begin(&j, "decode_tok_s");
	for (int i = 0; i < mb->n_runs; i++)
		if (!mb->runs[i].separate)
			bj_num(&j, mb->runs[i].name, mb->runs[i].decode_tok_s);
	bj_obj_end(&j);
	if (worst >= 0)
		bj_num(&j, "nmse_vs_single", worst);
	else
		bj_null(&j, "nmse_vs_single");
	if (mb->world.reg)
		json_world(&j, mb);
	json_member_sizes(&j, mb, "compute_bytes_per_device", false);
	json_member_sizes(&j, mb, "weight_bytes_per_device", true);
	if (meta && (whole || ref)) {
		const struct model_run *base = whole ? whole : ref;

		bj_obj_begin(&j, "tp_overhead");
		bj_str(&j, "baseline", whole ? "whole cpu" : base->name);
		bj_bool(&j, "in_turns", mb->interleaved);
		bj_num(&j, "prefill", base->prefill_tok_s / meta->prefill_tok_s
					      - 1);
		if (o->decode)
			bj_num(&j, "decode",
			       base->decode_tok_s / meta->decode_tok_s - 1);
		bj_obj_end(&j);
	}
	bj_arr_begin(&j, "runs");
	for (int i = 0; i < mb->n_runs; i++) {
		const struct model_run *r = &mb->runs[i];

		bj_obj_begin(&j, NULL);
		bj_str(&j, "device", r->name);
		bj_str(&j, "description", r->desc);
		bj_bool(&j, "meta", r->is_meta);
		bj_bool(&j, "separate_process", r->separate);
		bj_num(&j, "prefill_tok_s", r->prefill_tok_s);
		bj_num(&j, "decode_tok_s", r->decode_tok_s);
		if (r->decode_tok_s_runs[1] > 0) {
			bj_arr_begin(&j, "decode_tok_s_before_after");
			bj_num(&j, NULL, r->decode_tok_s_runs[0]);
			bj_num(&j, NULL, r->decode_tok_s_runs[1]);
			bj_arr_end(&j);
		}
		bj_num(&j, "decode_ms_per_token", o->decode ?
			   1e3 / r->decode_tok_s : 0);
		bj_num(&j, "decode_ms_median", r->decode_ms_median);
		bj_num(&j, "decode_gbps", r->gbps);
		if (r->limit_gbps > 0)
			bj_num(&j, "share_of_stream",
			       r->gbps / r->limit_gbps);
		bj_int(&j, "compute_bytes", (int64_t)r->compute_bytes);
		if (r->has_nmse)
			bj_num(&j, "nmse_vs_single", r->nmse);
		if (r->rest) {
			bj_obj_begin(&j, "split");
			bj_str(&j, "first", loom_dev_name(r->dev));
			bj_str(&j, "rest", loom_dev_name(r->rest));
			bj_int(&j, "gpu_layers", r->n_first);
			bj_int(&j, "pieces", (int64_t)r->sched.n_pieces);
			bj_int(&j, "copies", (int64_t)r->sched.n_copies);
			bj_int(&j, "copy_bytes", (int64_t)r->sched.copy_bytes);
			bj_num(&j, "copy_share", r->copy_share);
			bj_obj_end(&j);
		}
		bj_obj_end(&j);
	}
	bj_arr_end(&j);
	bj_obj_end(&j);
	bj_finish(&j);
}

static void fmt_mib_list(char *out, size_t size, const size_t *v, int n)
{
	size_t len = 0;

	out[0] = '\0';
	for (int i = 0; i < n && len < size; i++)
		len += (size_t)snprintf(out + len, size - len, "%s%.1f",
					i ? " + " : "", v[i] / 1048576.0);
}

/* The copy bandwidth of dev (not a CPU), measured once; 0 when that
 * fails. */
static double dev_copy_gbps(struct model_bench *mb, loom_dev_t *dev)
{
	struct bench_device d;

	for (int i = 0; i < mb->n_copy; i++)
		if (mb->copy_dev[i] == dev)
			return mb->copy_gbps[i];
	if (mb->n_copy == MODEL_MAX_RUNS ||
	    bench_device_limits(dev, mb->o, &d))
		return 0;
	mb->copy_dev[mb->n_copy] = dev;
	mb->copy_gbps[mb->n_copy++] = d.copy_gbps;
	return d.copy_gbps;
}

/* The bandwidth a run's decode is a share of: STREAM read on the CPU and
 * on a meta device over CPU partitions (which share that memory), a
 * device's own copy otherwise, summed over the distinct members of a meta
 * device; 0 (no share) for a split run. */
static double run_limit(struct model_bench *mb, const struct model_run *r)
{
	loom_dev_t *devs[MODEL_MAX_MEMBERS];
	size_t n;
	double sum = 0;

	if (r->rest)
		return 0;
	if (bench_dev_is_cpu(r->dev))
		return mb->st.read_gbps;
	if (loom_dev_type(r->dev) != LOOM_DEV_TYPE_META)
		return dev_copy_gbps(mb, r->dev);
	n = meta_members(r->dev, devs, MODEL_MAX_MEMBERS);
	for (size_t i = 0; i < n; i++) {
		bool dup = false;

		if (bench_dev_is_cpu(devs[i]))
			return mb->st.read_gbps;
		for (size_t k = 0; k < i; k++)
			dup = dup || devs[k] == devs[i];
		if (!dup)
			sum += dev_copy_gbps(mb, devs[i]);
	}
	return sum;
}

/* A run's name in the table: the separate run on all cores is marked. */
static void run_label(const struct model_run *r, char *out, size_t size)
{
	snprintf(out, size, "%s%s", r->name, r->separate ? " (all)" : "");
}

static void print_table(struct model_bench *mb)
{
	static const char *const heads[] = {
		"device", "prefill tok/s", "decode tok/s", "GB/s",
		"of STREAM", "weights MiB", "compute MiB", "err vs 1 dev",
	};
	const struct bench_opts *o = mb->o;
	const struct llama_hparams *hp = &mb->hp;
	const struct model_run *ref, *meta, *whole;
	struct bench_table *t = bench_table_new(8, heads);
	char title[320];

	pick_runs(mb, &ref, &meta, &whole);
	for (int i = 0; i < mb->n_runs; i++) {
		const struct model_run *r = &mb->runs[i];
		char share[16] = "-", nm[24] = "-", name[128];
		size_t w = 0, c = 0;

		if (r->limit_gbps > 0 && o->decode)
			snprintf(share, sizeof(share), "%.0f%%",
				 100 * r->gbps / r->limit_gbps);
		if (r->has_nmse)
			snprintf(nm, sizeof(nm), "%.2e", r->nmse);
		else if (i == 0 && !r->is_meta && mb->n_runs > 1)
			snprintf(nm, sizeof(nm), "(reference)");
		for (int k = 0; k < r->n_members; k++) {
			w += r->dev_weights[k];
			c += r->dev_compute[k];
		}
		run_label(r, name, sizeof(name));
		bench_table_row(t, "%s\t%.1f\t%.2f\t%.1f\t%s\t%.1f\t%.1f\t%s",
				name, r->prefill_tok_s, r->decode_tok_s,
				r->gbps, share, w / 1048576.0, c / 1048576.0,
				nm);
	}
	snprintf(title, sizeof(title),
		 "model %s: %s, %.1f M params (%.1f MiB); prefill %d, "
		 "decode %d tokens\n%lld layers, n_embd %lld, heads %lld/%lld "
		 "kv, n_ff %lld%s", o->gguf ? o->gguf : o->preset,
		 loom_type_name(hp->wtype), mb->n_params * 1e-6,
		 mb->weight_bytes / 1048576.0, o->prefill, o->decode,
		 (long long)hp->n_layer, (long long)hp->n_embd,
		 (long long)hp->n_head, (long long)hp->n_head_kv,
		 (long long)hp->n_ff, hp->n_expert ? ", MoE" : "");
	bench_table_print(t, stdout, title);
	bench_table_free(t);
	for (int i = 0; i < mb->n_runs; i++) {
		const struct model_run *r = &mb->runs[i];
		char w[96], c[96], name[128];

		run_label(r, name, sizeof(name));
		printf("  %-10s %s\n", name, r->desc);
		if (r->n_members < 2)
			continue;
		fmt_mib_list(w, sizeof(w), r->dev_weights, r->n_members);
		fmt_mib_list(c, sizeof(c), r->dev_compute, r->n_members);
		printf("  %-10s per device: weights %s MiB, compute %s MiB\n",
		       "", w, c);
	}
	if (mb->st.read_gbps > 0)
		printf("GB/s: %.1f MiB of weights read per decode token; "
		       "STREAM read %.1f GB/s (%d threads, same run)\n",
		       mb->decode_bytes / 1048576.0, mb->st.read_gbps,
		       mb->st.threads);
	for (int i = 0; i < mb->n_copy; i++)
		printf("%s: its own copy %.0f GB/s (read + write) stands for "
		       "STREAM\n", loom_dev_name(mb->copy_dev[i]),
		       mb->copy_gbps[i]);
	if (meta && (whole || ref)) {
		const struct model_run *base = whole ? whole : ref;

		printf("tensor-parallel overhead of %s vs %s%s: "
		       "prefill %+.1f%%", meta->name, base->name,
		       whole ? " on all cores" : "",
		       100 * (base->prefill_tok_s / meta->prefill_tok_s - 1));
		if (o->decode)
			printf(", decode %+.1f%%",
			       100 * (base->decode_tok_s / meta->decode_tok_s -
				      1));
		printf("\n");
		if (whole && mb->interleaved)
			printf("(%s and %s took their steps in turns, a "
			       "prefill or a token each)\n", whole->name,
			       meta->name);
		else if (whole && whole->decode_tok_s_runs[1] > 0)
			printf("(%s: mean of a run before and one after the "
			       "others; decode %.1f and %.1f tok/s)\n",
			       whole->name, whole->decode_tok_s_runs[0],
			       whole->decode_tok_s_runs[1]);
	}
	for (int i = 0; i < mb->n_runs; i++) {
		const struct model_run *r = &mb->runs[i];

		if (!r->rest)
			continue;
		printf("%s: %zu pieces, %zu copies (%.1f KiB) per decode "
		       "token; copies %.2f%% of decode time\n", r->name,
		       r->sched.n_pieces, r->sched.n_copies,
		       r->sched.copy_bytes / 1024.0, 100 * r->copy_share);
	}
	if (mb->world.reg && mb->world.meta)
		printf("world: %d ranks; one world_allreduce of %lld floats "
		       "takes %.1f us here, %lld of them per token: %.3f ms\n",
		       mb->world.n_ranks, (long long)hp->n_embd,
		       mb->world_allreduce_us, (long long)(2 * hp->n_layer),
		       mb->world_allreduce_us * 2e-3 * (double)hp->n_layer);
	for (int i = 0; i < mb->n_notes; i++)
		printf("note: %s\n", mb->notes[i]);
}

static int setup(struct model_bench *mb)
{
	const struct bench_opts *o = mb->o;
	uint64_t s = o->seed * 0x9e3779b97f4a7c15ull + 7;
	int ret;

	if (o->gguf) {
		ret = gguf_open(o->gguf, &mb->g);
		if (!ret)
			ret = model_hparams(mb->g, o->prefill + o->decode,
					    LOOM_TYPE_F32, &mb->hp, NULL);
		if (ret)
			return ret;
	} else {
		ret = llama_hparams_preset(o->preset, &mb->hp);
		if (ret)
			return ret;
		if (o->n_types)
			mb->hp.wtype = o->types[0];
	}
	mb->hp.n_ctx = o->prefill + o->decode;
	ret = llama_hparams_check(&mb->hp);
	if (ret)
		return ret;
	mb->tokens = calloc((size_t)mb->hp.n_ctx, sizeof(*mb->tokens));
	if (!mb->tokens)
		return LOOM_E_NOMEM;
	for (int64_t i = 0; i < mb->hp.n_ctx; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		mb->tokens[i] = (int32_t)(s % (uint64_t)mb->hp.n_vocab);
	}
	return LOOM_OK;
}

/* --save: the synthetic model written as a GGUF file, nothing run. */
static int save_model(struct model_bench *mb)
{
	loom_dev_t *dev = loom_dev_by_name("cpu0");
	struct llama_model *m;
	int ret;

	if (!dev)
		dev = loom_dev_get(0);
	ret = llama_model_new(&mb->hp, dev, mb->o->seed, &m);
	if (ret)
		return ret;
	ret = model_save(m, mb->o->save);
	if (!ret)
		fprintf(stderr, "loom-bench: %s: %s, %zu bytes of weights\n",
			mb->o->save, mb->o->preset,
			llama_model_weight_bytes(m));
	llama_model_free(m);
	return ret;
}

int bench_cmd_model(const struct bench_opts *o)
{
	struct model_bench *mb = calloc(1, sizeof(*mb));
	const struct model_run *ref = NULL;
	int ret, status = 1;

	if (!mb)
		return 1;
	mb->o = o;
	mb->turn_fd = turn_socket(o->turn_fd);
	ret = setup(mb);
	if (ret) {
		/* A file that opened is named; gguf_open's message names
		 * the one that did not. */
		bench_fail(mb->g ? o->gguf : "model", ret);
		goto out;
	}
	if (bench_load())
		goto out;
	app_world_open(&mb->world);
	if (o->save) {
		ret = save_model(mb);
		if (ret)
			bench_fail("save", ret);
		else
			status = 0;
		goto out;
	}
	ret = plan_devices(mb);
	if (ret) {
		bench_fail(o->gpu_layers >= 0 ? "--gpu-layers" : "--devices",
			   ret);
		goto out;
	}
	fall_back(mb);
	if (!o->no_limits && !o->internal) {
		/* A meta device runs on every core whatever --threads says
		 * per device. */
		int threads = bench_limit_threads(o);

		for (int i = 0; i < mb->n_runs; i++)
			if (mb->runs[i].is_meta)
				threads = bench_online_cpus();
		bench_progress("stream", 0, 1);
		ret = bench_stream_measure(threads, 3, o->quick, &mb->st);
		if (ret) {
			bench_fail("stream", ret);
			goto out;
		}
	}
	if (mb->whole_ref) {
		int n = mb->n_runs;
		struct child_run c;

		/* The reference goes first; the planned runs move up.  One
		 * planned run takes its steps in turn with the reference's;
		 * several run after it, and it runs again after them. */
		bench_progress("reference: one device on all cores", 0, 1);
		if (n == 1 && !whole_start(mb, &c, true)) {
			bench_progress_end();
			ret = run_device(mb, &mb->runs[0]);
			turn_close(mb);
			if (ret) {
				bench_fail(mb->runs[0].name, ret);
				whole_finish(mb, &c);
				goto out;
			}
			ret = whole_finish(mb, &c);
			mb->interleaved = !ret;
		} else {
			ret = run_whole_cpu(mb);
			bench_progress_end();
		}
		if (ret) {
			/* Then one partition, in this process, is the
			 * reference. */
			add_note(mb, "%s; the reference is %s", loom_error_message(),
				 loom_dev_name(mb->single));
			add_run(mb, mb->single);
		}
		if (n && mb->n_runs > n) {
			struct model_run tmp = mb->runs[n];

			memmove(&mb->runs[1], &mb->runs[0],
				(size_t)n * sizeof(mb->runs[0]));
			mb->runs[0] = tmp;
		}
		if (!ret)
			ref = &mb->runs[0];
	}
	for (int i = 0; i < mb->n_runs; i++) {
		struct model_run *r = &mb->runs[i];

		if (r->separate)
			continue;
		/* A run taken in turns with the reference has its logits. */
		if (!r->logits) {
			ret = run_device(mb, r);
			if (ret) {
				bench_fail(r->name, ret);
				goto out;
			}
		}
		if (!r->is_meta && !ref) {
			ref = r;
		} else if (ref) {
			r->has_nmse = true;
			r->nmse = nmse(r->logits, ref->logits,
				       (size_t)(mb->hp.n_vocab *
						(1 + o->decode)));
		}
	}
	if (ref && ref->separate && mb->n_runs > 1 && !mb->interleaved) {
		bench_progress("reference again: one device on all cores", 0,
			       1);
		ret = run_whole_cpu(mb);
		bench_progress_end();
		if (!ret)
			merge_reference(mb);
		else
			add_note(mb, "second reference run: %s",
				 loom_error_message());
	}
	for (int i = 0; i < mb->n_runs; i++)
		if (mb->runs[i].separate)
			mb->runs[i].gbps = (double)mb->decode_bytes *
					   mb->runs[i].decode_tok_s * 1e-9;
	if (o->internal) {
		ret = write_internal(mb, o->internal);
		if (ret)
			bench_fail("reference", ret);
		status = ret ? 1 : 0;
		goto out;
	}
	if (mb->world.reg && mb->world.meta) {
		ret = measure_world(mb);
		if (ret) {
			bench_fail("world", ret);
			goto out;
		}
	}

	if (!o->no_limits)
		for (int i = 0; i < mb->n_runs; i++)
			mb->runs[i].limit_gbps = run_limit(mb, &mb->runs[i]);
	/* Under mpirun every rank measured; rank 0 reports. */
	if (app_world_prints(&mb->world) && o->json)
		print_json(mb);
	else if (app_world_prints(&mb->world))
		print_table(mb);
	status = 0;
out:
	for (int i = 0; i < mb->n_runs; i++)
		free(mb->runs[i].logits);
	free(mb->tokens);
	gguf_free(mb->g);
	free(mb);
	return status;
}
