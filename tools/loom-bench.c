/* SPDX-License-Identifier: MIT */
/* loom-bench.c - the command line: options, help, and the dispatch to one
 * subcommand (bench-<name>.c).  `model` is the default.
 *
 * --json prints one object whose keys stay stable (more may be added):
 *   model      devices (names), prefill_tok_s and decode_tok_s (by device
 *              name), nmse_vs_single (worst of the runs checked, null with
 *              one device), compute_bytes_per_device (by device name, a
 *              list with one entry per physical device)
 *   gemm       gflops, peak_gflops, openblas_gflops (null when absent)
 *   gemv       gbps (by type name), stream_gbps
 *   allreduce  allreduce: a list of {bytes, us, algbw, busbw}; with
 *              --world: ranks, world (a list of {type, bytes, us, algbw,
 *              busbw, bare_us, bare_algbw, bare_busbw, ratio}) and
 *              in_process {parts, allreduce: as above}
 */
#include "config.h"

#include "bench-util.h"
#include "decoder.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

struct command {
	const char *name;
	int (*run)(const struct bench_opts *o);
	const char *help;
};

static const struct command commands[] = {
	{ "model", bench_cmd_model,
	  "Llama-style decoder: prefill, decode tokens/s; single and meta" },
	{ "peak", bench_cmd_peak, "F32 FMA peak of this CPU" },
	{ "stream", bench_cmd_stream, "memory bandwidth (STREAM copy, read)" },
	{ "gemm", bench_cmd_gemm, "mul_mat GFLOP/s against the FMA peak" },
	{ "gemv", bench_cmd_gemv,
	  "decode mul_mat GB/s per weight type against STREAM" },
	{ "allreduce", bench_cmd_allreduce,
	  "CPU partitions' allreduce: latency, algbw, busbw; --world: "
	  "across MPI ranks" },
	{ "dispatch", bench_cmd_dispatch,
	  "the backend's cost per op on a graph of tiny ops" },
	{ "sched", bench_cmd_sched,
	  "scheduler: cost per graph, decode split by layers over two "
	  "devices" },
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: loom-bench [COMMAND] [OPTIONS]\n"
		"\nCommands (default: model):\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
	fprintf(f,
		"\nOptions:\n"
		"  -t, --threads N     threads per device and for the limits\n"
		"  --devices A[,B...]  the device to run on (also --device);\n"
		"                      model: a list is one meta device over\n"
		"                      them, against the first alone; given\n"
		"                      again, each is a run of its own, the\n"
		"                      first non-meta one the reference\n"
		"  -j, --json          one JSON object on stdout\n"
		"  --reps N            timed runs after a warm-up (default 5)\n"
		"  --type T[,T...]     f32|f16|bf16|q8_0|q4_0|q4_1|q5_0|q5_1|\n"
		"                      q2_k|q3_k|q4_k|q5_k|q6_k|iq4_nl|iq4_xs|\n"
		"                      mxfp4 (gemm: f32; gemv, by default:\n"
		"                      f32 f16 bf16 q8_0 q4_0 q4_k q5_k q6_k)\n"
		"  --compare openblas  gemm, gemv: OpenBLAS in the same table\n"
		"  --preset P          model: ");
	for (const char *const *p = llama_preset_names(); *p; p++)
		fprintf(f, "%s%s", *p, p[1] ? "|" : "\n");
	fprintf(f,
		"  --gguf FILE.gguf    model: measure this file's model "
		"(llama, qwen2,\n"
		"                      qwen3, qwen3moe) instead of a preset\n"
		"  --save FILE.gguf    model: write the preset's synthetic "
		"weights as a\n"
		"                      GGUF file (llama) and exit\n"
		"  --prefill N         model: prompt tokens (default 512)\n"
		"  --decode N          model: generated tokens (default 128)\n"
		"  --gpu-layers N      model: layers 0..N-1 on the first device\n"
		"                      of --devices, the rest (and the ops it\n"
		"                      lacks) on the second, else on the CPU,\n"
		"                      against the second device alone\n"
		"  --size N            gemm: m = n = k (default 2048); "
		"gemv: k\n"
		"  --shape MxNxK       gemm: m, n and k apart (a model's "
		"shapes)\n"
		"  --rows M            gemv: m (default: matrices of 4x the "
		"last-level cache)\n"
		"  --parts N           allreduce: CPU partitions (default 2)\n"
		"  --max-bytes N       allreduce: the largest size (default "
		"64 MiB)\n"
		"  --world             allreduce, under mpirun: across the "
		"ranks, against\n"
		"                      a bare MPI_Allreduce (rank 0 prints)\n"
		"  --seed N            weights' seed (default 42)\n"
		"  --quick             shorter limit measurements\n"
		"  --no-limits         skip the FMA peak and STREAM runs\n"
		"  -h, --help          print this help\n"
		"  -V, --version       print the version and exit\n"
		"\nEnvironment:\n"
		"  LOOM_CPU_DEVICES=N        splits the CPU into N devices\n"
		"  LOOM_META_DEVICES=A,B     composes a meta device of those\n"
		"  LOOM_CPU_THREADS=N        threads per CPU device "
		"(--threads wins)\n"
		"  LOOM_BACKENDS, LOOM_PLUGIN_PATH, LOOM_LOG   as for "
		"loom-info(1)\n"
		"  OPENBLAS_CORETYPE         passed on to OpenBLAS "
		"(--compare openblas)\n");
}

static int parse_types(const char *s, struct bench_opts *o)
{
	char buf[128], *p, *save = NULL;

	snprintf(buf, sizeof(buf), "%s", s);
	o->n_types = 0;
	for (p = strtok_r(buf, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (o->n_types == BENCH_MAX_TYPES ||
		    loom_type_from_name(p, &o->types[o->n_types])) {
			fprintf(stderr, "loom-bench: unknown type '%s'\n", p);
			return -1;
		}
		o->n_types++;
	}
	return 0;
}

/* s as a whole number from lo to hi, or a message naming the option. */
static int parse_int(const char *opt, const char *s, long long lo,
		     long long hi, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = strtoll(s, &end, 10);
	if (*s == '\0' || *end != '\0' || errno || v < lo || v > hi) {
		if (hi == LLONG_MAX)
			fprintf(stderr, "loom-bench: %s takes a whole number "
					"from %lld on, not '%s'\n", opt, lo, s);
		else
			fprintf(stderr, "loom-bench: %s takes a whole number "
					"from %lld to %lld, not '%s'\n", opt,
				lo, hi, s);
		return -1;
	}
	*out = v;
	return 0;
}

/* A name of llama_preset_names(), or a message listing them. */
static int parse_preset(const char *s)
{
	const char *const *names = llama_preset_names();
	char list[160];
	size_t len = 0;

	for (size_t i = 0; names[i]; i++)
		if (!strcmp(s, names[i]))
			return 0;
	list[0] = '\0';
	for (size_t i = 0; names[i] && len < sizeof(list); i++)
		len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s",
					i ? ", " : "", names[i]);
	fprintf(stderr, "loom-bench: --preset: no preset '%s' (%s)\n", s,
		list);
	return -1;
}

enum {
	OPT_THREADS = 256, OPT_DEVICES, OPT_JSON, OPT_REPS, OPT_TYPE,
	OPT_COMPARE, OPT_PRESET, OPT_PREFILL, OPT_DECODE, OPT_SIZE,
	OPT_PARTS, OPT_WORLD, OPT_MAX_BYTES, OPT_SEED, OPT_QUICK,
	OPT_NO_LIMITS, OPT_INTERNAL, OPT_TURNS, OPT_ROWS, OPT_SAVE, OPT_GGUF, OPT_HELP,
	OPT_VERSION, OPT_GPU_LAYERS, OPT_SHAPE,
};

/* "MxNxK" as three whole numbers from 1 to 2^20, or a message. */
static int parse_shape(const char *s, int64_t out[3])
{
	char buf[64], *p, *save = NULL;
	int i = 0;
	long long v;

	snprintf(buf, sizeof(buf), "%s", s);
	for (p = strtok_r(buf, "x", &save); p; p = strtok_r(NULL, "x", &save)) {
		if (i == 3 || parse_int("--shape", p, 1, 1 << 20, &v))
			break;
		out[i++] = v;
	}
	if (p || i != 3) {
		if (!p || i == 3)
			fprintf(stderr, "loom-bench: --shape takes MxNxK, "
					"three whole numbers (got '%s')\n", s);
		return -1;
	}
	return 0;
}

static const struct option long_opts[] = {
	{ "threads", required_argument, NULL, OPT_THREADS },
	{ "devices", required_argument, NULL, OPT_DEVICES },
	{ "device", required_argument, NULL, OPT_DEVICES },
	{ "json", no_argument, NULL, OPT_JSON },
	{ "reps", required_argument, NULL, OPT_REPS },
	{ "type", required_argument, NULL, OPT_TYPE },
	{ "compare", required_argument, NULL, OPT_COMPARE },
	{ "preset", required_argument, NULL, OPT_PRESET },
	{ "prefill", required_argument, NULL, OPT_PREFILL },
	{ "decode", required_argument, NULL, OPT_DECODE },
	{ "size", required_argument, NULL, OPT_SIZE },
	{ "shape", required_argument, NULL, OPT_SHAPE },
	{ "parts", required_argument, NULL, OPT_PARTS },
	{ "world", no_argument, NULL, OPT_WORLD },
	{ "max-bytes", required_argument, NULL, OPT_MAX_BYTES },
	{ "rows", required_argument, NULL, OPT_ROWS },
	{ "seed", required_argument, NULL, OPT_SEED },
	{ "quick", no_argument, NULL, OPT_QUICK },
	{ "no-limits", no_argument, NULL, OPT_NO_LIMITS },
	{ "internal-single", required_argument, NULL, OPT_INTERNAL },
	{ "internal-turns", required_argument, NULL, OPT_TURNS },
	{ "save", required_argument, NULL, OPT_SAVE },
	{ "gguf", required_argument, NULL, OPT_GGUF },
	{ "gpu-layers", required_argument, NULL, OPT_GPU_LAYERS },
	{ "help", no_argument, NULL, OPT_HELP },
	{ "version", no_argument, NULL, OPT_VERSION },
	{ NULL, 0, NULL, 0 },
};

static int parse(int argc, char **argv, struct bench_opts *o)
{
	long long v;
	int c;

	while ((c = getopt_long(argc, argv, "hVt:j", long_opts, NULL)) != -1) {
		switch (c) {
		case 't':
		case OPT_THREADS:
			if (parse_int("--threads", optarg, 1, 4096, &v))
				return -1;
			o->threads = (int)v;
			break;
		case OPT_DEVICES:
			if (o->n_device_lists == BENCH_MAX_RUNS) {
				fprintf(stderr, "loom-bench: --devices: more "
						"than %d runs\n", BENCH_MAX_RUNS);
				return -1;
			}
			o->device_lists[o->n_device_lists++] = optarg;
			if (!o->devices)
				o->devices = optarg;
			break;
		case 'j':
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_REPS:
			if (parse_int("--reps", optarg, 1, 1000, &v))
				return -1;
			o->reps = (int)v;
			break;
		case OPT_TYPE:
			if (parse_types(optarg, o))
				return -1;
			break;
		case OPT_COMPARE:
			if (strcmp(optarg, "openblas")) {
				fprintf(stderr, "loom-bench: can only compare "
						"with openblas\n");
				return -1;
			}
			o->compare_openblas = true;
			break;
		case OPT_PRESET:
			if (parse_preset(optarg))
				return -1;
			o->preset = optarg;
			break;
		case OPT_SAVE:
			o->save = optarg;
			break;
		case OPT_GGUF:
			o->gguf = optarg;
			break;
		case OPT_GPU_LAYERS:
			if (parse_int("--gpu-layers", optarg, 0, 1 << 20, &v))
				return -1;
			o->gpu_layers = (int)v;
			break;
		case OPT_PREFILL:
			if (parse_int("--prefill", optarg, 1, 1 << 20, &v))
				return -1;
			o->prefill = (int)v;
			break;
		case OPT_DECODE:
			if (parse_int("--decode", optarg, 0, 1 << 20, &v))
				return -1;
			o->decode = (int)v;
			break;
		case OPT_SIZE:
			if (parse_int("--size", optarg, 32, 1 << 20, &v))
				return -1;
			o->size = v;
			break;
		case OPT_SHAPE:
			if (parse_shape(optarg, o->shape))
				return -1;
			break;
		case OPT_ROWS:
			if (parse_int("--rows", optarg, 1, LLONG_MAX, &v))
				return -1;
			o->rows = v;
			break;
		case OPT_PARTS:
			if (parse_int("--parts", optarg, 2, 64, &v))
				return -1;
			o->parts = (int)v;
			break;
		case OPT_WORLD:
			o->world = true;
			break;
		case OPT_MAX_BYTES:
			if (parse_int("--max-bytes", optarg, 16, 64 << 20, &v))
				return -1;
			o->max_bytes = (size_t)v;
			break;
		case OPT_SEED:
			if (parse_int("--seed", optarg, 0, LLONG_MAX, &v))
				return -1;
			o->seed = (uint64_t)v;
			break;
		case OPT_QUICK:
			o->quick = true;
			break;
		case OPT_NO_LIMITS:
			o->no_limits = true;
			break;
		case OPT_INTERNAL:
			o->internal = optarg;
			break;
		case OPT_TURNS:
			o->turn_fd = atoi(optarg);
			break;
		case 'h':
		case OPT_HELP:
			usage(stdout);
			exit(0);
		case 'V':
		case OPT_VERSION:
			printf("loom-bench (Loom) %s\n", PACKAGE_VERSION);
			exit(0);
		default:
			usage(stderr);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "loom-bench: unexpected '%s'\n", argv[optind]);
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct bench_opts o = {
		.reps = 5, .preset = "small", .prefill = 512, .decode = 128,
		.seed = 42, .parts = 2, .max_bytes = 64u << 20,
		.gpu_layers = -1,
		.turn_fd = -1,
	};
	const struct command *cmd = &commands[0];
	int ret;

	if (argc > 1 && argv[1][0] != '-') {
		cmd = NULL;
		for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]);
		     i++)
			if (!strcmp(argv[1], commands[i].name))
				cmd = &commands[i];
		if (!cmd) {
			fprintf(stderr, "loom-bench: unknown command '%s'\n",
				argv[1]);
			usage(stderr);
			return 2;
		}
		argv[1] = argv[0];
		argc--;
		argv++;
	}
	if (parse(argc, argv, &o))
		return 2;
	if (o.n_device_lists > 1 && cmd->run != bench_cmd_model) {
		fprintf(stderr, "loom-bench: %s: --devices once (model "
				"alone takes it again for each run)\n",
			cmd->name);
		return 2;
	}
	ret = cmd->run(&o);
	/* Whatever a command left alive is a leak worth a failure. */
	if (loom_unload_all()) {
		fprintf(stderr, "loom-bench: %s\n", loom_error_message());
		ret = ret ? ret : 1;
	}
	return ret;
}
