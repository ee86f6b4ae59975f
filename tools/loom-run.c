/* SPDX-License-Identifier: MIT */
/* loom-run.c - runs a GGUF model: loads it on one device, a meta device
 * over several, or split by layers over two (--gpu-layers, through the
 * scheduler), evaluates a prompt (or the turns of a conversation, in the
 * file's chat template), samples tokens and streams their text until an
 * end-of-generation token, then reports load time, prefill and decode
 * rates and memory per device.  Templates and the tokens that end a reply
 * are model/chat.c's.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <loom/loom-backend.h>
#include <loom/loom-model.h>

#include "app-devices.h"
#include "app-world.h"

#define MAX_DEVS 16

struct opts {
	const char *model, *prompt, *tokens, *devices, *dump;
	const char *system, *chat_template;
	bool chat, ignore_eos;
	int n_gen, threads;
	int gpu_layers; /* -1: not given */
	int64_t n_ctx;
	enum loom_type cache;
	float temp, top_p;
	int top_k;
	uint64_t seed;
	bool json, no_special;
	bool ctx_given; /* -c: a length asked for, not the default */
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: loom-run -m FILE.gguf (-p TEXT | --tokens 1,2,3 | "
		"--chat) [OPTIONS]\n\n"
		"  -m, --model FILE      the GGUF model file\n"
		"  -p, --prompt TEXT     the prompt, tokenized with the "
		"file's vocabulary\n"
		"      --no-special      special tokens' texts in the prompt "
		"(<|im_start|>, <s>)\n"
		"                        are plain text, not those tokens\n"
		"      --tokens LIST     the prompt as token ids, comma-"
		"separated\n"
		"      --chat, -cnv      the file's chat template: with -p, "
		"one reply to it;\n"
		"                        without, a conversation, a turn per "
		"line of input\n"
		"      --system TEXT     the system message of --chat\n"
		"      --chat-template NAME  chatml, llama3, gemma, phi3, "
		"mistral or gpt-oss,\n"
		"                        not the file's (with -p alone, a "
		"reply to it)\n"
		"      --ignore-eos      go on past the tokens that end a "
		"reply\n"
		"  -n, --n-predict N     tokens to generate (default 32; a chat's "
		"reply: until\n"
		"                        its end or the context's)\n"
		"      --devices LIST    a device (cpu0, cuda0) or several, "
		"which make a\n"
		"                        meta device (cpu0,cpu1); default: "
		"the first GPU, else cpu0\n"
		"      --gpu-layers N    layers 0..N-1 on the first device of "
		"--devices,\n"
		"                        the rest (and ops it lacks) on the "
		"second, else\n"
		"                        on the CPU (cpu0,cpu1 splits two CPU "
		"partitions)\n"
		"  -t, --threads N       threads per device\n"
		"  -c, --ctx N           KV cache length (default 2048, at "
		"most the file's)\n"
		"      --cache-type T    f32 or f16 (default f16)\n"
		"      --temp T          sampling temperature; 0 is greedy "
		"(default 0)\n"
		"      --top-k K         keep the K most likely (default 40, "
		"0: all)\n"
		"      --top-p P         keep the smallest set of mass P "
		"(default 0.95)\n"
		"      --seed S          sampling seed (default 1)\n"
		"      --dump-logits F   write the prompt positions' logits "
		"to F (raw\n"
		"                        little-endian f32, n_vocab per "
		"position)\n"
		"      --json            a JSON summary on stdout instead of "
		"text\n"
		"  -h, --help            this help\n"
		"      --version         the version\n\n"
		"Environment: LOOM_BACKENDS, LOOM_PLUGIN_PATH, LOOM_LOG, "
		"LOOM_CPU_DEVICES, LOOM_META_WORLD\n"
		"(see loom(7)).  Under mpirun every rank runs the model; "
		"rank 0 prints.\n");
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The ranks of an MPI job this process is one of (alone: 0 of 1). */
static struct app_world world;

/* The message goes out as one line in one write, so that the lines of
 * other ranks and of the MPI runtime sharing the terminal or pipe fall
 * between lines, not inside one. */
static int fail(const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int len = snprintf(line, sizeof line, "loom-run: ");

	if (world.n_ranks > 1)
		len += snprintf(line + len, sizeof line - (size_t)len,
				"rank %d: ", world.rank);
	va_start(ap, fmt);
	len += vsnprintf(line + len, sizeof line - (size_t)len, fmt, ap);
	va_end(ap);
	if (len > (int)sizeof line - 2)
		len = (int)sizeof line - 2;
	line[len++] = '\n';
	fwrite(line, 1, (size_t)len, stderr);
	return 1;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static bool parse_long(const char *s, long long lo, long long hi,
		       long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	return !errno && end != s && !*end && *out >= lo && *out <= hi;
}

static bool parse_float(const char *s, float *out)
{
	char *end;

	errno = 0;
	*out = strtof(s, &end);
	return !errno && end != s && !*end && isfinite(*out);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
	enum { O_TOKENS = 256, O_DEVICES, O_CACHE, O_TEMP, O_TOPK, O_TOPP,
	       O_SEED, O_DUMP, O_JSON, O_VERSION, O_NO_SPECIAL, O_GPU_LAYERS,
	       O_CHAT, O_SYSTEM, O_CHAT_TEMPLATE, O_IGNORE_EOS };
	static const struct option long_opts[] = {
		{ "model", required_argument, NULL, 'm' },
		{ "prompt", required_argument, NULL, 'p' },
		{ "n-predict", required_argument, NULL, 'n' },
		{ "threads", required_argument, NULL, 't' },
		{ "ctx", required_argument, NULL, 'c' },
		{ "tokens", required_argument, NULL, O_TOKENS },
		{ "devices", required_argument, NULL, O_DEVICES },
		{ "gpu-layers", required_argument, NULL, O_GPU_LAYERS },
		{ "cache-type", required_argument, NULL, O_CACHE },
		{ "temp", required_argument, NULL, O_TEMP },
		{ "top-k", required_argument, NULL, O_TOPK },
		{ "top-p", required_argument, NULL, O_TOPP },
		{ "seed", required_argument, NULL, O_SEED },
		{ "dump-logits", required_argument, NULL, O_DUMP },
		{ "json", no_argument, NULL, O_JSON },
		{ "no-special", no_argument, NULL, O_NO_SPECIAL },
		{ "chat", no_argument, NULL, O_CHAT },
		{ "system", required_argument, NULL, O_SYSTEM },
		{ "chat-template", required_argument, NULL, O_CHAT_TEMPLATE },
		{ "ignore-eos", no_argument, NULL, O_IGNORE_EOS },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, O_VERSION },
		{ 0 },
	};
	long long v;
	int c;

	*o = (struct opts){ .n_gen = -1, .n_ctx = 2048,
			    .cache = LOOM_TYPE_F16, .top_k = 40,
			    .top_p = 0.95f, .seed = 1, .gpu_layers = -1 };
	/* llama.cpp's spelling of --chat. */
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "-cnv"))
			argv[i] = (char *)"--chat";
	while ((c = getopt_long(argc, argv, "m:p:n:t:c:h", long_opts,
				NULL)) != -1) {
		switch (c) {
		case 'm': o->model = optarg; break;
		case 'p': o->prompt = optarg; break;
		case O_TOKENS: o->tokens = optarg; break;
		case O_DEVICES: o->devices = optarg; break;
		case O_DUMP: o->dump = optarg; break;
		case O_JSON: o->json = true; break;
		case O_NO_SPECIAL: o->no_special = true; break;
		case O_CHAT: o->chat = true; break;
		case O_SYSTEM: o->system = optarg; break;
		case O_CHAT_TEMPLATE: o->chat_template = optarg; break;
		case O_IGNORE_EOS: o->ignore_eos = true; break;
		case 'n':
			if (!parse_long(optarg, 0, 1 << 20, &v))
				return fail("-n: bad count '%s'", optarg);
			o->n_gen = (int)v;
			break;
		case 't':
			if (!parse_long(optarg, 1, 4096, &v))
				return fail("--threads: bad count '%s'",
					    optarg);
			o->threads = (int)v;
			break;
		case 'c':
			if (!parse_long(optarg, 1, INT32_MAX, &v))
				return fail("--ctx: bad length '%s'", optarg);
			o->n_ctx = v;
			o->ctx_given = true;
			break;
		case O_GPU_LAYERS:
			if (!parse_long(optarg, 0, 1 << 20, &v))
				return fail("--gpu-layers: bad count '%s'",
					    optarg);
			o->gpu_layers = (int)v;
			break;
		case O_CACHE:
			if (!strcmp(optarg, "f32"))
				o->cache = LOOM_TYPE_F32;
			else if (!strcmp(optarg, "f16"))
				o->cache = LOOM_TYPE_F16;
			else
				return fail("--cache-type: '%s' (f32 or f16)",
					    optarg);
			break;
		case O_TEMP:
			if (!parse_float(optarg, &o->temp) || o->temp < 0)
				return fail("--temp: bad value '%s'", optarg);
			break;
		case O_TOPK:
			if (!parse_long(optarg, 0, INT32_MAX, &v))
				return fail("--top-k: bad value '%s'", optarg);
			o->top_k = (int)v;
			break;
		case O_TOPP:
			if (!parse_float(optarg, &o->top_p) || o->top_p <= 0 ||
			    o->top_p > 1)
				return fail("--top-p: bad value '%s'", optarg);
			break;
		case O_SEED:
			if (!parse_long(optarg, 0, INT64_MAX, &v))
				return fail("--seed: bad value '%s'", optarg);
			o->seed = (uint64_t)v;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		case O_VERSION:
			printf("loom-run (Loom) %s\n", PACKAGE_VERSION);
			exit(0);
		default:
			usage(stderr);
			return 1;
		}
	}
	if (optind < argc)
		return fail("unexpected argument '%s'", argv[optind]);
	/* A chat's reply ends by itself (or with the context). */
	if (o->n_gen < 0)
		o->n_gen = o->chat || o->chat_template ? INT32_MAX : 32;
	if (!o->model)
		return fail("no model: pass -m FILE.gguf");
	if (o->tokens && (o->chat || o->chat_template))
		return fail("--chat and --chat-template take -p TEXT or turns "
			    "on the input, not --tokens");
	if (!o->tokens && !o->prompt && !o->chat)
		return fail("no prompt: pass -p TEXT, --tokens 1,2,3 or --chat");
	if (o->tokens && o->prompt)
		return fail("pass -p TEXT or --tokens, not both");
	if (o->chat && !o->prompt && o->json)
		return fail("--json: not with a conversation (--chat without "
			    "-p)");
	return 0;
}

/* The comma-separated ids of s, each below n_vocab. */
static int parse_tokens(const char *s, int64_t n_vocab, int32_t **out,
			int *n)
{
	int32_t *t = NULL;
	int cap = 0;
	char *copy = strdup(s), *tok, *save = NULL;

	*n = 0;
	if (!copy)
		return fail("no memory");
	/* strtok_r would pass over an empty id. */
	if (*s == ',' || strstr(s, ",,") || (*s && s[strlen(s) - 1] == ',')) {
		free(copy);
		return fail("--tokens: '%s' has an empty id", s);
	}
	for (tok = strtok_r(copy, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		long long v;

		if (!parse_long(tok, 0, n_vocab - 1, &v)) {
			fail("--tokens: '%s' is not a token id below %lld", tok,
			     (long long)n_vocab);
			free(copy);
			free(t);
			return 1;
		}
		if (*n == cap) {
			int32_t *p;

			cap = cap ? 2 * cap : 64;
			p = realloc(t, (size_t)cap * sizeof(*t));
			if (!p) {
				free(copy);
				free(t);
				return fail("no memory");
			}
			t = p;
		}
		t[(*n)++] = (int32_t)v;
	}
	free(copy);
	if (!*n) {
		free(t);
		return fail("--tokens: no token ids");
	}
	*out = t;
	return 0;
}

/* Over a world, what every rank must run alike: the prompt's length,
 * then its tokens, the options that size the model's buffers, and those
 * of sampling.  A difference fails every rank, naming the first rank
 * that differs. */
static int agree(const struct opts *o, const int32_t *prompt, int n_prompt)
{
	struct {
		int64_t n_ctx;
		uint64_t seed;
		int32_t n_gen, cache, top_k, ignore_eos;
		float temp, top_p;
	} args;
	int r;

	memset(&args, 0, sizeof(args)); /* and its padding, compared too */
	args.n_ctx = o->n_ctx;
	args.seed = o->seed;
	args.n_gen = o->n_gen;
	args.cache = (int32_t)o->cache;
	args.top_k = o->top_k;
	args.ignore_eos = o->ignore_eos;
	args.temp = o->temp;
	args.top_p = o->top_p;

	if (app_world_same(&world, &n_prompt, sizeof(n_prompt), &r))
		return fail("%s", loom_error_message());
	if (r > 0)
		return fail("rank %d's prompt has another length than rank "
			    "0's (every rank runs the same prompt)", r);
	if (app_world_same(&world, prompt,
			   (size_t)n_prompt * sizeof(*prompt), &r))
		return fail("%s", loom_error_message());
	if (r > 0)
		return fail("rank %d's prompt differs from rank 0's", r);
	if (app_world_same(&world, &args, sizeof(args), &r))
		return fail("%s", loom_error_message());
	if (r > 0)
		return fail("rank %d's options (-n, -c, --cache-type, "
			    "--ignore-eos or sampling) differ from rank 0's",
			    r);
	return 0;
}

/* ------------------------------------------------------------------------
 * Sampling (loom_model_sample): greedy at temperature 0, else top-k, then
 * top-p, then a draw.
 */
/* The next token: rank 0's sample, which every rank of a world takes. */
static int decide(const struct opts *o, const float *logits, int64_t nv,
		  uint64_t *rng, int32_t *tok)
{
	struct loom_sample_params sp = {
		.temp = o->temp, .top_k = o->top_k, .top_p = o->top_p,
	};

	if (loom_model_sample(logits, nv, &sp, rng, tok) ||
	    app_world_bcast(&world, tok, sizeof(*tok)))
		return fail("sampling: %s", loom_error_message());
	return 0;
}

/* ------------------------------------------------------------------------
 * Devices.
 */
/* Where the weights go: first, and rest for layers from n_first on (NULL
 * for a model on one device). */
struct placement {
	loom_dev_t *first, *rest;
	int64_t n_first;
};

/* Partial offload: with --gpu-layers, the first device holds layers
 * 0..N-1 and the second (members[1], else a CPU device) the rest; without
 * it, a device that lacks ops of the model gets a CPU device for them.
 * pl->rest stays NULL for a model on one device. */
static int plan_offload(const struct opts *o, const loom_model_t *m,
			loom_dev_t *dev, loom_dev_t **members, int n_members,
			struct placement *pl)
{
	char what[160];

	*pl = (struct placement){ .first = dev };
	if (o->gpu_layers >= 0) {
		pl->first = members[0];
		pl->rest = app_devices_second(members[0], n_members > 1 ?
							  members[1] : NULL);
		pl->n_first = o->gpu_layers;
		return pl->rest ? 0 : fail("--gpu-layers: %s",
					    loom_error_message());
	}
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META ||
	    loom_model_dev_runs(m, dev, what, sizeof(what)) ||
	    !(pl->rest = app_devices_other_cpu(dev)))
		return 0;
	pl->n_first = loom_model_n_layer(m);
	if (!o->json)
		fprintf(stderr, "loom-run: %s lacks %s: %s runs what it "
			"lacks\n", loom_dev_name(dev), what,
			loom_dev_name(pl->rest));
	return 0;
}

static int open_device(const struct opts *o, loom_model_t *m,
		       loom_dev_t **out, loom_dev_t **members, int *n_members)
{
	struct loom_meta_opts mo = { .size = sizeof(mo) };
	loom_split_fn split;
	void *policy;
	size_t n = 0;

	if (!o->devices) {
		members[0] = loom_dev_by_type(LOOM_DEV_TYPE_GPU);
		if (!members[0])
			members[0] = loom_dev_by_name("cpu0");
		if (!members[0])
			return fail("no device found (see loom-info)");
		n = 1;
		goto make;
	}
	if (app_devices_parse(o->devices, members, MAX_DEVS, &n))
		return fail("--devices: %s", loom_error_message());
make:
	*n_members = (int)n;
	if (o->gpu_layers >= 0 && n > 2)
		return fail("--gpu-layers: two devices at most");
	/* Over a world (LOOM_META_WORLD) even one device per rank is a
	 * meta device: its slices are cut over every rank's. */
	if (o->gpu_layers >= 0 ||
	    (n == 1 && (!world.meta ||
			loom_dev_type(members[0]) == LOOM_DEV_TYPE_META))) {
		*out = members[0];
		return 0;
	}
	if (loom_model_split_policy(m, &split, &policy) ||
	    loom_meta_dev_new(members, (size_t)n, split, policy, &mo, out))
		return fail("%s: %s", o->devices ? "--devices" : "meta device",
			    loom_error_message());
	return 0;
}

/* A progress line on a terminal while a large file loads. */
static void progress(size_t done, size_t total, void *user)
{
	int *last = user;
	int pct = total ? (int)(100.0 * (double)done / (double)total) : 100;

	if (pct == *last)
		return;
	*last = pct;
	fprintf(stderr, "\rloading: %3d%% (%.0f of %.0f MiB)", pct,
		(double)done / 1048576.0, (double)total / 1048576.0);
	if (done == total)
		fputc('\n', stderr);
}

/* The weights onto their devices, with a progress line on a terminal for
 * files of 64 MiB and more. */
static int load(const struct opts *o, loom_model_t *m,
		const struct placement *pl)
{
	int last = -1, ret;
	struct loom_model_load_params lp = {
		.size = sizeof(lp), .rest = pl->rest, .n_first = pl->n_first,
		.user = &last,
	};
	struct stat st;
	bool show;

	show = !o->json && isatty(2) && !stat(o->model, &st) &&
	       st.st_size >= (64 << 20);
	lp.progress = show ? progress : NULL;
	ret = loom_model_load_with(m, pl->first, &lp);
	if (ret) {
		if (show && last >= 0 && last < 100)
			fputc('\n', stderr);
		return fail("%s: %s", o->model, loom_error_message());
	}
	return 0;
}

/* Bytes each member holds of the model's buffers (weights and cache, and
 * compute); one entry for a plain device. */
static int member_sizes(const struct loom_model_memory *mem, loom_dev_t *dev,
			loom_sched_t *s, size_t *w, size_t *c, int n)
{
	loom_meta_buffer_dev_sizes_fn fn = NULL;
	loom_buffer_t *cb = mem->compute_buffer;

	memset(w, 0, (size_t)n * sizeof(*w));
	memset(c, 0, (size_t)n * sizeof(*c));
	if (s) {
		/* Split: the two devices' weights and compute memory. */
		w[0] = mem->held_bytes[0];
		w[1] = mem->held_bytes[1];
		c[0] = loom_sched_buffer_size(s, 0);
		c[1] = loom_sched_buffer_size(s, 1);
		return 2;
	}
	if (loom_dev_type(dev) == LOOM_DEV_TYPE_META)
		*(void **)&fn = loom_reg_proc_address(
			loom_dev_reg(dev), LOOM_PROC_META_BUFFER_DEV_SIZES);
	if (!fn) {
		w[0] = mem->held_bytes[0];
		c[0] = cb ? loom_buffer_size(cb) : 0;
		return 1;
	}
	fn(mem->weight_buffer, w, (size_t)n);
	if (mem->matrix_buffer) {
		size_t mw[MAX_DEVS] = { 0 };

		fn(mem->matrix_buffer, mw, (size_t)n);
		for (int j = 0; j < n; j++)
			w[j] += mw[j];
	}
	if (cb)
		fn(cb, c, (size_t)n);
	return n;
}

static double mib(size_t n)
{
	return (double)n / (1024.0 * 1024.0);
}

/* A backend on dev with --threads applied. */
static int open_backend(const struct opts *o, loom_dev_t *dev,
			loom_backend_t **be)
{
	int r;

	if (loom_dev_init_backend(dev, NULL, be))
		return fail("%s: %s", loom_dev_name(dev), loom_error_message());
	r = o->threads > 0 ? loom_backend_set_n_threads(*be, o->threads) : 0;
	if (r && r != LOOM_E_UNSUPPORTED)
		return fail("--threads: %s", loom_error_message());
	return 0;
}

/* The scheduler of a split model: be (the first device's), then a
 * backend of rest. */
static int open_sched(const struct opts *o, loom_dev_t *rest,
		      loom_backend_t *be, loom_backend_t **be_rest,
		      loom_sched_t **s)
{
	loom_backend_t *list[2] = { be, NULL };

	if (open_backend(o, rest, be_rest))
		return 1;
	list[1] = *be_rest;
	if (loom_sched_new(list, 2, s))
		return fail("scheduler: %s", loom_error_message());
	return 0;
}

/* ------------------------------------------------------------------------
 * The run: a session holds what the cache holds and what ends a reply;
 * a prompt, or each turn of a conversation, is fed, then a reply sampled.
 */
struct stats {
	double load_s, prefill_s, decode_s;
	int n_prompt, n_gen, n_decode, cap_gen;
	const int32_t *prompt;
	int32_t *gen; /* the tokens generated */
};

/* Set by SIGINT: the reply ends (and, but in a conversation, the run). */
static volatile sig_atomic_t interrupted;

static void on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

/* SIGINT sets the flag; restart: system calls it interrupts go on (while
 * generating), else they fail (waiting for a turn, which it ends).  Every
 * rank of a world must stop where rank 0 does: it keeps its default
 * there. */
static void catch_sigint(bool restart)
{
	struct sigaction sa = { .sa_handler = on_sigint };

	sa.sa_flags = restart ? SA_RESTART : 0;
	if (world.n_ranks <= 1)
		sigaction(SIGINT, &sa, NULL);
}

struct session {
	const struct opts *o;
	loom_model_t *m;
	loom_backend_t *be;
	loom_sched_t *s;
	int64_t nv, n_ctx;
	float *logits, *last; /* last: the last position's */
	size_t n_logits;
	uint64_t rng;
	int n_past;
	int32_t pending; /* shown but not in the cache yet, or -1 */
	/* A chat without a template (a base model's): a reply ends at its
	 * first blank line, the newlines seen since its last text counted
	 * here. */
	bool paragraphs, seen_text;
	int newlines;
	struct stats st;
};

/* One batch on be, or through s for a model split over two devices. */
static int eval(loom_model_t *m, loom_backend_t *be, loom_sched_t *s,
		const int32_t *tokens, int n, int n_past, bool all,
		float *logits)
{
	return s ? loom_model_eval_sched(m, s, tokens, n, n_past, all, logits)
		 : loom_model_eval(m, be, tokens, n, n_past, all, logits);
}

/* The text of tok on stdout, on the rank that prints. */
static void show(const struct session *ss, int32_t tok)
{
	char text[256];

	if (ss->o->json || !app_world_prints(&world))
		return;
	if (loom_model_token_text(ss->m, tok, text, sizeof(text)) < 0)
		return;
	fputs(text, stdout);
}

/* Evaluates t[0..n) after what the cache holds (the token shown last
 * first, if it is not in the cache yet); the first prompt's logits for
 * every position go to --dump-logits. */
static int feed(struct session *ss, const int32_t *t, int n)
{
	const struct opts *o = ss->o;
	bool dump = o->dump && !ss->n_past;
	int32_t *all = NULL;
	size_t need;
	double t0;

	if (ss->pending >= 0) {
		all = malloc(((size_t)n + 1) * sizeof(*all));
		if (!all)
			return fail("no memory");
		all[0] = ss->pending;
		memcpy(all + 1, t, (size_t)n * sizeof(*t));
		t = all;
		n++;
	}
	if (ss->n_past + n > ss->n_ctx) {
		free(all);
		return fail("a prompt of %d tokens does not fit a context of "
			    "%lld%s", n, (long long)ss->n_ctx,
			    ss->n_past ? " after the conversation so far" : "");
	}
	need = (size_t)ss->nv * (dump ? (size_t)n : 1);
	if (need > ss->n_logits) {
		float *p = realloc(ss->logits, need * sizeof(*p));

		if (!p) {
			free(all);
			return fail("no memory for the logits");
		}
		ss->logits = p;
		ss->n_logits = need;
	}
	t0 = now();
	if (eval(ss->m, ss->be, ss->s, t, n, ss->n_past, dump, ss->logits)) {
		free(all);
		return fail("prompt: %s", loom_error_message());
	}
	ss->st.prefill_s += now() - t0;
	ss->st.n_prompt += n;
	ss->n_past += n;
	ss->pending = -1;
	ss->last = ss->logits + (dump ? (size_t)ss->nv * (size_t)(n - 1) : 0);
	free(all);
	if (dump && app_world_prints(&world)) {
		FILE *f = fopen(o->dump, "wb");

		if (!f || fwrite(ss->logits, sizeof(float), need, f) != need ||
		    fclose(f))
			return fail("--dump-logits: %s: %s", o->dump,
				    strerror(errno));
	}
	return 0;
}

static int record(struct stats *st, int32_t tok)
{
	if (st->n_gen == st->cap_gen) {
		int cap = st->cap_gen ? 2 * st->cap_gen : 64;
		int32_t *p = realloc(st->gen, (size_t)cap * sizeof(*p));

		if (!p)
			return fail("no memory");
		st->gen = p;
		st->cap_gen = cap;
	}
	st->gen[st->n_gen++] = tok;
	return 0;
}

/* Whether tok's text ends a paragraph of the reply: a blank line after
 * some text. */
static bool ends_paragraph(struct session *ss, int32_t tok)
{
	char text[256];

	if (!ss->paragraphs ||
	    loom_model_token_text(ss->m, tok, text, sizeof(text)) < 0)
		return false;
	for (const char *c = text; *c; c++) {
		if (*c == '\n') {
			ss->newlines += ss->seen_text;
		} else if (*c != ' ' && *c != '\t' && *c != '\r') {
			ss->seen_text = true;
			ss->newlines = 0;
		}
	}
	return ss->newlines >= 2;
}

/* Samples up to n tokens after what the cache holds, streaming their
 * text; stops at a token that ends a reply (unless --ignore-eos), at a
 * blank line in a chat without a template (a base model knows no end of
 * turn), at the end of the context, or on SIGINT.  The last token shown
 * stays out of the cache until the next feed. */
static int reply(struct session *ss, int n)
{
	double t0 = now();
	int32_t tok;

	ss->seen_text = false;
	ss->newlines = 0;
	for (int i = 0; i < n && !interrupted; i++) {
		if (decide(ss->o, ss->last, ss->nv, &ss->rng, &tok) ||
		    record(&ss->st, tok))
			return 1;
		if (!ss->o->ignore_eos && loom_model_is_eog(ss->m, tok))
			break;
		show(ss, tok);
		fflush(stdout);
		ss->pending = tok;
		if (i + 1 == n || ss->n_past >= ss->n_ctx ||
		    ends_paragraph(ss, tok))
			break;
		if (eval(ss->m, ss->be, ss->s, &tok, 1, ss->n_past, false,
			 ss->logits))
			return fail("decode: %s", loom_error_message());
		ss->n_past++;
		ss->st.n_decode++;
		ss->pending = -1;
		ss->last = ss->logits;
	}
	ss->st.decode_s += now() - t0;
	return 0;
}

/* The template a chat asks for: --chat-template's, else the file's;
 * *family NULL (with a line saying why) when the text goes as it is, and
 * then a reply ends at a blank line (unless --ignore-eos). */
static int chat_kind(const struct opts *o, struct session *ss,
		     const char **family)
{
	const loom_model_t *m = ss->m;
	const char *k;

	*family = NULL;
	if (!o->chat && !o->chat_template)
		return 0;
	if (o->chat_template) {
		if (loom_model_chat_family(m, o->chat_template, &k))
			return fail("--chat-template: %s", loom_error_message());
	} else if (loom_model_chat_family(m, NULL, &k)) {
		ss->paragraphs = !o->ignore_eos;
		if (!o->json)
			fprintf(stderr, "loom-run: %s: the text goes as it is%s "
				"(--chat-template NAME names one)\n",
				loom_error_message(),
				ss->paragraphs ? ", and a reply ends at a "
						 "blank line" : "");
		return 0;
	}
	*family = k;
	return 0;
}

/* The ids of text (a turn of a chat in family when not NULL), BOS and
 * the like when first. */
static int tokenize(const struct session *ss, const char *family,
		    const char *text, bool first, int32_t **ids, int *n)
{
	const struct opts *o = ss->o;
	unsigned flags = first ? LOOM_MODEL_ADD_SPECIAL : 0;
	char *turn = NULL;
	int ret;

	if (family) {
		if (loom_model_chat_turn(ss->m, family, o->system, text, first,
					 &turn))
			return fail("--chat: %s", loom_error_message());
		text = turn;
	} else if (first && o->system && o->chat) {
		turn = malloc(strlen(o->system) + strlen(text) + 2);
		if (!turn)
			return fail("no memory");
		sprintf(turn, "%s\n%s", o->system, text);
		text = turn;
	}
	if (family || !o->no_special)
		flags |= LOOM_MODEL_PARSE_SPECIAL;
	ret = loom_model_tokenize(ss->m, text, flags, ids, n);
	free(turn);
	if (ret)
		return fail("-p: %s", loom_error_message());
	if (!*n && first)
		return fail("-p: the prompt has no tokens");
	return 0;
}

/* A conversation: a turn per line of the input, each reply streamed;
 * SIGINT ends a reply, and the conversation when it comes at the
 * prompt.  Returns the exit status. */
static int converse(struct session *ss, const char *family)
{
	bool tty = isatty(0), first = true;
	char *line = NULL;
	size_t cap = 0;
	int ret = 0;

	for (;;) {
		int32_t *ids = NULL;
		ssize_t len;
		int n;

		if (tty) {
			fputs("> ", stdout);
			fflush(stdout);
		}
		catch_sigint(false);
		len = getline(&line, &cap, stdin);
		catch_sigint(true);
		if (len < 0) {
			ret = interrupted ? 130 : 0;
			if (tty)
				fputc('\n', stdout);
			break;
		}
		while (len && (line[len - 1] == '\n' || line[len - 1] == '\r'))
			line[--len] = 0;
		if (!len)
			continue;
		if (tokenize(ss, family, line, first, &ids, &n) ||
		    (n && feed(ss, ids, n)) ||
		    reply(ss, ss->o->n_gen)) {
			free(ids);
			ret = 1;
			break;
		}
		free(ids);
		first = false;
		fputc('\n', stdout);
		fflush(stdout);
		interrupted = 0;
	}
	free(line);
	return ret;
}

/* One prompt, its text shown unless it is a chat's turn, then a reply.
 * Returns the exit status: 130 when SIGINT ended the reply. */
static int run(struct session *ss, const int32_t *prompt, int n_prompt,
	       const char *family)
{
	ss->st.prompt = prompt;
	if (feed(ss, prompt, n_prompt))
		return 1;
	if (!family && !ss->o->chat)
		for (int i = 0; i < n_prompt; i++)
			show(ss, prompt[i]);
	fflush(stdout);
	if (reply(ss, ss->o->n_gen))
		return 1;
	if (!ss->o->json && app_world_prints(&world))
		fputc('\n', stdout);
	return interrupted ? 130 : 0;
}

/* This process's peak resident memory (VmHWM), 0 where unknown. */
static size_t peak_rss(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	unsigned long long kib = 0;
	char line[256];

	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "VmHWM: %llu kB", &kib) == 1)
			break;
	if (f)
		fclose(f);
	return (size_t)kib * 1024;
}

static void report(const struct opts *o, const loom_model_t *m,
		   loom_dev_t *dev, loom_sched_t *s, loom_dev_t **members,
		   int n_members, const struct stats *st)
{
	struct loom_model_memory mem = { 0 };
	size_t w[MAX_DEVS], c[MAX_DEVS];
	int n = (loom_model_memory(m, &mem),
		 member_sizes(&mem, dev, s, w, c, n_members));
	size_t compute = mem.compute_bytes + (s ? c[0] + c[1] : 0);
	const char *arch = loom_model_arch(m);
	double pf = st->prefill_s > 0 ? st->n_prompt / st->prefill_s : 0;
	/* Decode steps: a reply's first token comes from the prompt's
	 * logits. */
	double dc = st->n_decode > 0 && st->decode_s > 0 ?
			    st->n_decode / st->decode_s : 0;
	FILE *f = o->json ? stdout : stderr;

	if (o->json) {
		fprintf(f, "{\"model\": \"%s\", \"arch\": \"%s\", "
			"\"device\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, "
			"\"load_s\": %.4f, \"prefill_tok_s\": %.2f, "
			"\"decode_tok_s\": %.2f, \"weight_bytes\": %zu, "
			"\"cache_bytes\": %zu, \"compute_bytes\": %zu, "
			"\"peak_rss_bytes\": %zu, \"devices\": [", o->model,
			arch, loom_dev_name(dev), st->n_prompt, st->n_gen,
			st->load_s, pf, dc, mem.weight_bytes, mem.cache_bytes,
			compute, peak_rss());
		for (int j = 0; j < n; j++)
			fprintf(f, "%s{\"name\": \"%s\", \"buffer_bytes\": "
				"%zu, \"compute_bytes\": %zu}", j ? ", " : "",
				loom_dev_name(members[j]), w[j], c[j]);
		fprintf(f, "], \"prompt_tokens\": [");
		for (int i = 0; i < st->n_prompt; i++)
			fprintf(f, "%s%d", i ? ", " : "", (int)st->prompt[i]);
		fprintf(f, "], \"tokens\": [");
		for (int i = 0; i < st->n_gen; i++)
			fprintf(f, "%s%d", i ? ", " : "", (int)st->gen[i]);
		fprintf(f, "]}\n");
		return;
	}
	fprintf(f, "\nmodel: %s (%s) on %s%s%s\n", o->model, arch,
		loom_dev_name(dev), s ? " and " : "",
		s ? loom_dev_name(mem.rest) : "");
	fprintf(f, "load: %.3f s; prefill: %d tokens, %.1f tok/s; decode: "
		"%d tokens, %.1f tok/s\n", st->load_s, st->n_prompt, pf,
		st->n_gen, dc);
	fprintf(f, "memory: weights %.1f MiB, KV cache %.1f MiB, compute "
		"%.1f MiB; peak resident %.1f MiB\n",
		mib(mem.weight_bytes), mib(mem.cache_bytes), mib(compute),
		mib(peak_rss()));
	for (int j = 0; j < n && n > 1; j++)
		fprintf(f, "  %s: weights and cache %.1f MiB, compute %.1f "
			"MiB\n", loom_dev_name(members[j]), mib(w[j]),
			mib(c[j]));
}

/* The model file's shape and tokenizer, its cache no longer than the
 * model was trained for. */
static int open_model(const struct opts *o, loom_model_t **m)
{
	struct loom_model_params mp = {
		.size = sizeof(mp), .n_ctx = o->n_ctx, .cache_type = o->cache,
	};
	int64_t train;

	if (loom_model_open(o->model, &mp, m))
		return fail("%s: %s", o->model, loom_error_message());
	train = loom_model_n_ctx_train(*m);
	if (train > 0 && train < loom_model_n_ctx(*m)) {
		if (o->ctx_given && app_world_prints(&world))
			fprintf(stderr, "loom-run: warning: --ctx %lld is "
				"longer than the model was trained for; the "
				"cache holds %lld tokens\n",
				(long long)o->n_ctx, (long long)train);
		if (loom_model_set_n_ctx(*m, train))
			return fail("%s", loom_error_message());
	}
	return 0;
}

/* The prompt's ids: --tokens, or -p's text (a chat's turn in family); a
 * vocabulary Loom cannot tokenize fails here, before any weight loads. */
static int prompt_ids(struct session *ss, const char **family,
		      int32_t **prompt, int *n_prompt)
{
	const struct opts *o = ss->o;
	int32_t *none = NULL;
	int n = 0;

	if (o->tokens)
		return parse_tokens(o->tokens, loom_model_n_vocab(ss->m),
				    prompt, n_prompt);
	if (loom_model_tokenize(ss->m, "", 0, &none, &n))
		return fail("%s: %s", o->prompt ? "-p" : "--chat",
			    loom_error_message());
	free(none);
	if (chat_kind(o, ss, family) ||
	    (o->prompt && tokenize(ss, *family, o->prompt, true, prompt,
				   n_prompt)))
		return 1;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	loom_model_t *m = NULL;
	loom_dev_t *dev, *members[MAX_DEVS];
	struct placement pl;
	loom_backend_t *be = NULL, *be_rest = NULL;
	loom_sched_t *sched = NULL;
	struct session ss = { .o = &o, .pending = -1, .rng = 0 };
	const char *family = NULL;
	int32_t *prompt = NULL;
	int n_prompt = 0, n_members = 0, ret = 1;
	double t0;

	if (parse_opts(argc, argv, &o))
		return 1;
	if (loom_load_all() && !loom_dev_count())
		return fail("%s", loom_error_message());
	app_world_open(&world);
	t0 = now();
	if (open_model(&o, &m))
		goto out;
	ss.m = m;
	if (prompt_ids(&ss, &family, &prompt, &n_prompt))
		goto out;
	if (!o.prompt && !o.tokens && world.n_ranks > 1) {
		fail("--chat: a conversation reads the input of one process; "
		     "pass -p TEXT under mpirun");
		goto out;
	}
	if (open_device(&o, m, &dev, members, &n_members))
		goto out;
	if (n_prompt > loom_model_n_ctx(m)) {
		fail("a prompt of %d tokens does not fit a context of %lld",
		     n_prompt, (long long)loom_model_n_ctx(m));
		goto out;
	}
	if (agree(&o, prompt, n_prompt) ||
	    plan_offload(&o, m, dev, members, n_members, &pl) ||
	    load(&o, m, &pl))
		goto out;
	if (open_backend(&o, dev, &be) ||
	    (pl.rest && open_sched(&o, pl.rest, be, &be_rest, &sched)))
		goto out;
	if (pl.rest) {
		/* The report names the two devices. */
		members[0] = dev;
		members[1] = pl.rest;
		n_members = 2;
	}
	ss.be = be;
	ss.s = sched;
	ss.nv = loom_model_n_vocab(m);
	ss.n_ctx = loom_model_n_ctx(m);
	ss.rng = o.seed;
	catch_sigint(true);
	ss.st.load_s = now() - t0;
	ret = o.prompt || o.tokens ? run(&ss, prompt, n_prompt, family)
				   : converse(&ss, family);
	if ((!ret || ret == 130) && app_world_prints(&world))
		report(&o, m, dev, sched, members, n_members, &ss.st);
out:
	loom_sched_free(sched);
	loom_backend_free(be_rest);
	loom_backend_free(be);
	loom_model_free(m);
	free(prompt);
	free(ss.st.gen);
	free(ss.logits);
	/* What is still alive here is a leak worth a failure. */
	if (loom_unload_all()) {
		fail("%s", loom_error_message());
		ret = ret ? ret : 1;
	}
	return ret;
}
