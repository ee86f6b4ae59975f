/* SPDX-License-Identifier: MIT */
/* bench-util.h - what loom-bench's subcommands share: options, timing and
 * medians, the machine's limits (FMA peak, STREAM), JSON and table
 * printing, a progress line, and device/backend setup.
 */
#ifndef LOOM_BENCH_UTIL_H
#define LOOM_BENCH_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The entry-point types (allreduce) and loom_error_set. */
#include <loom/loom-backend.h>

#define BENCH_MAX_TYPES 8
#define BENCH_MAX_RUNS 8

/* Options of every subcommand (each reads the ones it documents). */
struct bench_opts {
	int threads;          /* --threads; 0: not given */
	bool json;            /* --json */
	const char *devices;  /* --devices a,b / --device a (the first given) */
	/* model: each --devices given, a run each */
	const char *device_lists[BENCH_MAX_RUNS];
	int n_device_lists;
	int reps;             /* --reps, timed runs after the warm-up */
	bool compare_openblas; /* --compare openblas */
	int n_types;          /* --type t[,t...] */
	enum loom_type types[BENCH_MAX_TYPES];
	const char *preset;   /* --preset */
	int prefill;          /* --prefill */
	int decode;           /* --decode */
	int64_t size;         /* --size: GEMM m = n = k, GEMV k */
	int64_t shape[3];     /* --shape MxNxK: GEMM m, n, k; 0: not given */
	int64_t rows;         /* --rows: GEMV m (default: 4x the LLC) */
	int parts;            /* --parts: allreduce partitions */
	bool world;           /* --world: allreduce across MPI ranks */
	size_t max_bytes;     /* --max-bytes: allreduce's largest size */
	uint64_t seed;        /* --seed */
	bool no_limits;       /* --no-limits: skip peak/STREAM measurement */
	bool quick;           /* --quick: shorter limit measurements */
	const char *internal; /* --internal-single FILE (model, child run) */
	int turn_fd;          /* --internal-turns FD: its turns (child run) */
	const char *save;     /* --save FILE.gguf (model: write, not run) */
	const char *gguf;     /* --gguf FILE.gguf (model: this file's model) */
	int gpu_layers;       /* --gpu-layers N (model); -1: not given */
};

/* Threads for the machine-limit measurements: --threads, else every CPU
 * this process may run on. */
int bench_limit_threads(const struct bench_opts *o);
int bench_online_cpus(void);

/* ---- timing ---- */
double bench_now(void); /* seconds, monotonic */
/* The median of v[0..n) (v is reordered). */
double bench_median(double *v, int n);
/* The smallest of v[0..n). */
double bench_min(const double *v, int n);

typedef int (*bench_fn)(void *arg);
/* Runs fn once to warm up, then reps times; *median gets the median
 * seconds of the timed runs, *min the fastest (either may be NULL). */
int bench_time(bench_fn fn, void *arg, int reps, double *median,
	       double *min);

/* ---- machine limits ----
 * A limit is the best of its runs (as STREAM reports it): what the
 * machine can do, against which the kernels' medians are put. */
struct bench_peak {
	double gflops;   /* all threads, F32 FMA */
	const char *isa; /* "avx512f", "avx2+fma", "scalar" */
	int threads;
};
int bench_peak_measure(int threads, int reps, struct bench_peak *out);

struct bench_stream {
	double copy_gbps; /* STREAM copy: 2 x bytes moved / time */
	double read_gbps; /* one read pass, summed in registers */
	const char *copy_how; /* the kernel that was fastest */
	const char *read_how;
	size_t bytes;     /* array size used */
	int threads;
};
/* Arrays of at least 4x the last-level cache (2 GiB if unknown), capped
 * to stay gentle on a shared machine; quick halves the size. */
int bench_stream_measure(int threads, int reps, bool quick,
			 struct bench_stream *out);
size_t bench_llc_bytes(void);

/* A device that is not the CPU brings its own limits: its copy bandwidth
 * measured here (2 x bytes / time of a device-to-device copy), its BF16
 * peak at the boost clock from the plugin (0 if unknown) and the
 * datasheet's for parts it knows (0 otherwise). */
struct bench_device {
	double copy_gbps;
	double hbm_gbps;         /* from the memory clock and bus width */
	double boost_tflops;
	double datasheet_tflops;
};
bool bench_dev_is_cpu(loom_dev_t *dev);
int bench_device_limits(loom_dev_t *dev, const struct bench_opts *o,
			struct bench_device *out);

/* ---- pthread helpers for the limit kernels ---- */
typedef void (*bench_thread_fn)(int ith, int nth, void *arg);
/* Runs fn on nth threads (pinned to the CPUs this process may use), all
 * starting together; returns the wall time of the slowest in seconds. */
double bench_parallel(int nth, bench_thread_fn fn, void *arg);

/* ---- output ---- */
struct bench_json {
	FILE *f;
	int depth;
	bool need_comma[16];
};
void bj_init(struct bench_json *j, FILE *f);
void bj_obj_begin(struct bench_json *j, const char *key);
void bj_obj_end(struct bench_json *j);
void bj_arr_begin(struct bench_json *j, const char *key);
void bj_arr_end(struct bench_json *j);
void bj_num(struct bench_json *j, const char *key, double v);
void bj_int(struct bench_json *j, const char *key, int64_t v);
void bj_str(struct bench_json *j, const char *key, const char *v);
void bj_bool(struct bench_json *j, const char *key, bool v);
void bj_null(struct bench_json *j, const char *key);
/* Starts a document on stdout with one object holding "device" and
 * "threads", as every single-device subcommand's output begins. */
void bj_begin_run(struct bench_json *j, loom_dev_t *dev, int threads);
void bj_finish(struct bench_json *j);

/* A table of text cells: the first column left-aligned, the others right
 * aligned, widths from the widest cell. */
struct bench_table;
struct bench_table *bench_table_new(int n_cols, const char *const *heads);
/* Appends a row; cells are formatted with printf-style strings joined by
 * '\t' in fmt's expansion. */
void bench_table_row(struct bench_table *t, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void bench_table_print(struct bench_table *t, FILE *f, const char *title);
void bench_table_free(struct bench_table *t);
/* Writes v as a whole percentage of limit into out ("57%"), or "-" when
 * the limit was not measured (limit <= 0). */
void bench_fmt_share(char *out, size_t size, double v, double limit);
/* Prints the line under a kernel table saying how limits and kernels
 * were timed. */
void bench_print_runs_note(const struct bench_opts *o);

/* A progress line on stderr, only when it is a terminal. */
void bench_progress(const char *what, int done, int total);
void bench_progress_end(void);

/* ---- devices ---- */
/* Loads the plugins; a warning goes to stderr when some named in
 * LOOM_BACKENDS failed. */
int bench_load(void);
/* Makes a backend on dev with --threads applied when given. */
int bench_backend(loom_dev_t *dev, const struct bench_opts *o,
		  loom_backend_t **out);
/* Marks out as the output, builds its graph in ctx, allocates it on dev
 * and times compute + synchronize on a backend made by bench_backend();
 * *median gets the median seconds, *n_nodes (may be NULL) the graph's
 * node count. The backend and graph allocator are freed before return;
 * ctx and its tensors stay the caller's. */
int bench_graph_time(loom_dev_t *dev, const struct bench_opts *o,
		     loom_ctx_t *ctx, struct loom_tensor *out, double *median,
		     int *n_nodes);
/* The device named by --devices (first name), else the best device. */
loom_dev_t *bench_pick_device(const struct bench_opts *o);
/* bench_load() then bench_pick_device(); NULL (the reason printed to
 * stderr) when there is no device or no such device. */
loom_dev_t *bench_open_device(const struct bench_opts *o);
/* Ends the progress line and prints "loom-bench: <last error>" to
 * stderr, for a step whose failure does not end the run. */
void bench_warn_last_error(void);
/* Prints "loom-bench: what: message" to stderr (the status's name where
 * no message was set); returns 1. */
int bench_fail(const char *what, int status);
/* Fills a tensor with uniform values in [-scale, scale) in its own type. */
int bench_fill_tensor(struct loom_tensor *t, uint64_t seed, float scale);

/* ---- subcommands ---- */
int bench_cmd_model(const struct bench_opts *o);
int bench_cmd_peak(const struct bench_opts *o);
int bench_cmd_stream(const struct bench_opts *o);
int bench_cmd_gemm(const struct bench_opts *o);
int bench_cmd_gemv(const struct bench_opts *o);
int bench_cmd_allreduce(const struct bench_opts *o);
/* bench-world.c: `allreduce --world`, under mpirun. */
int bench_cmd_allreduce_world(const struct bench_opts *o);
int bench_cmd_dispatch(const struct bench_opts *o);
int bench_cmd_sched(const struct bench_opts *o);

/* Median seconds of mul_mat(a [k, m] of type, b [k, n] F32) on dev's
 * backend, a filled with random values; *a_bytes gets a's size. */
int bench_mm_time(loom_dev_t *dev, const struct bench_opts *o,
		  enum loom_type type, int64_t m, int64_t n, int64_t k,
		  double *median, size_t *a_bytes);

/* The CPU plugin's allreduce over o->parts partitions (bench-allreduce.c):
 * bench_allreduce_parts_env() asks for the partitions and must come
 * before the plugins load; bench_allreduce_parts() then times F32 sizes
 * from 16 B (or the first at least min_bytes) to o->max_bytes, each
 * checked, into res; 1 (the reason printed) on failure. */
#define BENCH_AR_MAX_SIZES 16
struct bench_ar_result {
	size_t bytes;
	double us, algbw, busbw;
};
void bench_allreduce_parts_env(const struct bench_opts *o);
int bench_allreduce_parts(const struct bench_opts *o, size_t min_bytes,
			  struct bench_ar_result *res, int *n_res,
			  size_t *n_parts);

/* The dispatch cost per op of the device's backend, in microseconds. */
int bench_dispatch_measure(loom_dev_t *dev, const struct bench_opts *o,
			   double *us_per_op, int *n_nodes);

/* OpenBLAS loaded at run time. */
struct bench_openblas {
	void *handle;
	char core[64];    /* openblas_get_corename() */
	char config[160]; /* openblas_get_config() */
	char forced[32];  /* OPENBLAS_CORETYPE we set, "" if none */
	void (*sgemm)(int order, int ta, int tb, int m, int n, int k,
		      float alpha, const float *a, int lda, const float *b,
		      int ldb, float beta, float *c, int ldc);
	void (*sgemv)(int order, int ta, int m, int n, float alpha,
		      const float *a, int lda, const float *x, int incx,
		      float beta, float *y, int incy);
};
/* Loads libopenblas.so.0 with threads set; LOOM_E_NOT_FOUND when absent
 * (the message says why). */
int bench_openblas_load(int threads, struct bench_openblas *out);
/* Median seconds of an M x N x K SGEMM (row-major C = A * B^T, as Loom's
 * mul_mat). */
int bench_openblas_sgemm(struct bench_openblas *ob, int64_t m, int64_t n,
			 int64_t k, int reps, double *median);
int bench_openblas_sgemv(struct bench_openblas *ob, int64_t m, int64_t k,
			 int reps, double *median);

#endif
