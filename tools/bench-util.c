/* SPDX-License-Identifier: MIT */
/* bench-util.c - timing, medians, threads, JSON and table printing, the
 * progress line and device setup shared by loom-bench's subcommands.
 * The limit kernels themselves live in bench-peak.c and bench-stream.c.
 */
#define _GNU_SOURCE
#include "bench-util.h"
#include "app-devices.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------------
 * Timing.
 */
double bench_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
	if (n <= 0)
		return NAN;
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_min(const double *v, int n)
{
	double m = INFINITY;

	for (int i = 0; i < n; i++)
		m = v[i] < m ? v[i] : m;
	return m;
}

int bench_time(bench_fn fn, void *arg, int reps, double *median,
	       double *min)
{
	double *t;
	int ret;

	if (reps < 1)
		reps = 1;
	t = calloc((size_t)reps, sizeof(*t));
	if (!t)
		return LOOM_E_NOMEM;
	ret = fn(arg);
	for (int i = 0; !ret && i < reps; i++) {
		double t0 = bench_now();

		ret = fn(arg);
		t[i] = bench_now() - t0;
	}
	if (!ret) {
		double m = bench_median(t, reps);

		if (median)
			*median = m;
		if (min)
			*min = t[0];
	}
	free(t);
	return ret;
}

/* ------------------------------------------------------------------------
 * Threads.
 */
int bench_online_cpus(void)
{
	cpu_set_t set;

	if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
		return CPU_COUNT(&set);
	return (int)sysconf(_SC_NPROCESSORS_ONLN);
}

int bench_limit_threads(const struct bench_opts *o)
{
	return o->threads > 0 ? o->threads : bench_online_cpus();
}

struct par_thread {
	pthread_t tid;
	int ith, nth, cpu;
	bench_thread_fn fn;
	void *arg;
	pthread_barrier_t *start;
	double t0, t1;
};

static void *par_main(void *p)
{
	struct par_thread *th = p;

	if (th->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(th->cpu, &set);
		pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	pthread_barrier_wait(th->start);
	th->t0 = bench_now();
	th->fn(th->ith, th->nth, th->arg);
	th->t1 = bench_now();
	return NULL;
}

double bench_parallel(int nth, bench_thread_fn fn, void *arg)
{
	struct par_thread *th;
	pthread_barrier_t start;
	cpu_set_t set;
	int cpus[1024], n_cpus = 0;
	double t0 = INFINITY, t1 = 0;

	if (nth < 1)
		nth = 1;
	if (!sched_getaffinity(0, sizeof(set), &set))
		for (int c = 0; c < CPU_SETSIZE && n_cpus < 1024; c++)
			if (CPU_ISSET(c, &set))
				cpus[n_cpus++] = c;
	th = calloc((size_t)nth, sizeof(*th));
	if (!th)
		return NAN;
	pthread_barrier_init(&start, NULL, (unsigned)nth);
	for (int i = 0; i < nth; i++) {
		th[i] = (struct par_thread){
			.ith = i, .nth = nth, .fn = fn, .arg = arg,
			.start = &start,
			.cpu = n_cpus ? cpus[i % n_cpus] : -1,
		};
		if (i > 0)
			pthread_create(&th[i].tid, NULL, par_main, &th[i]);
	}
	par_main(&th[0]);
	for (int i = 1; i < nth; i++)
		pthread_join(th[i].tid, NULL);
	for (int i = 0; i < nth; i++) {
		t0 = th[i].t0 < t0 ? th[i].t0 : t0;
		t1 = th[i].t1 > t1 ? th[i].t1 : t1;
	}
	pthread_barrier_destroy(&start);
	free(th);
	/* The calling thread stays pinned to its last CPU otherwise. */
	sched_setaffinity(0, sizeof(set), &set);
	return t1 - t0;
}

/* ------------------------------------------------------------------------
 * JSON.
 */
void bj_init(struct bench_json *j, FILE *f)
{
	memset(j, 0, sizeof(*j));
	j->f = f;
}

static void bj_str_raw(FILE *f, const char *s)
{
	fputc('"', f);
	for (; s && *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void bj_key(struct bench_json *j, const char *key)
{
	if (j->need_comma[j->depth])
		fputc(',', j->f);
	j->need_comma[j->depth] = true;
	if (j->depth > 0) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	if (key) {
		bj_str_raw(j->f, key);
		fputs(": ", j->f);
	}
}

static void bj_open(struct bench_json *j, const char *key, char c)
{
	bj_key(j, key);
	fputc(c, j->f);
	if (j->depth < 15)
		j->depth++;
	j->need_comma[j->depth] = false;
}

static void bj_close(struct bench_json *j, char c)
{
	bool any = j->need_comma[j->depth];

	if (j->depth > 0)
		j->depth--;
	if (any) {
		fputc('\n', j->f);
		for (int i = 0; i < j->depth; i++)
			fputs("  ", j->f);
	}
	fputc(c, j->f);
}

void bj_obj_begin(struct bench_json *j, const char *key)
{
	bj_open(j, key, '{');
}

void bj_begin_run(struct bench_json *j, loom_dev_t *dev, int threads)
{
	bj_init(j, stdout);
	bj_obj_begin(j, NULL);
	bj_str(j, "device", loom_dev_name(dev));
	bj_int(j, "threads", threads);
}

void bj_obj_end(struct bench_json *j)
{
	bj_close(j, '}');
}

void bj_arr_begin(struct bench_json *j, const char *key)
{
	bj_open(j, key, '[');
}

void bj_arr_end(struct bench_json *j)
{
	bj_close(j, ']');
}

void bj_num(struct bench_json *j, const char *key, double v)
{
	bj_key(j, key);
	if (isfinite(v))
		fprintf(j->f, "%.6g", v);
	else
		fputs("null", j->f);
}

void bj_int(struct bench_json *j, const char *key, int64_t v)
{
	bj_key(j, key);
	fprintf(j->f, "%lld", (long long)v);
}

void bj_str(struct bench_json *j, const char *key, const char *v)
{
	bj_key(j, key);
	if (v)
		bj_str_raw(j->f, v);
	else
		fputs("null", j->f);
}

void bj_bool(struct bench_json *j, const char *key, bool v)
{
	bj_key(j, key);
	fputs(v ? "true" : "false", j->f);
}

void bj_null(struct bench_json *j, const char *key)
{
	bj_key(j, key);
	fputs("null", j->f);
}

void bj_finish(struct bench_json *j)
{
	fputc('\n', j->f);
	fflush(j->f);
}

/* ------------------------------------------------------------------------
 * Tables.
 */
struct bench_table {
	int n_cols, n_rows, cap;
	char **cells; /* n_rows + 1 rows (the header first) of n_cols */
};

struct bench_table *bench_table_new(int n_cols, const char *const *heads)
{
	struct bench_table *t = calloc(1, sizeof(*t));

	if (!t)
		return NULL;
	t->n_cols = n_cols;
	t->cap = 16;
	t->cells = calloc((size_t)(t->cap * n_cols), sizeof(*t->cells));
	if (!t->cells) {
		free(t);
		return NULL;
	}
	for (int c = 0; c < n_cols; c++)
		t->cells[c] = strdup(heads[c]);
	t->n_rows = 1;
	return t;
}

void bench_table_row(struct bench_table *t, const char *fmt, ...)
{
	char buf[1024], *p, *save = NULL;
	va_list ap;
	int c = 0;

	if (!t)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (t->n_rows == t->cap) {
		char **n = realloc(t->cells, (size_t)(2 * t->cap * t->n_cols) *
					     sizeof(*n));

		if (!n)
			return;
		t->cells = n;
		t->cap *= 2;
	}
	for (p = strtok_r(buf, "\t", &save); p && c < t->n_cols;
	     p = strtok_r(NULL, "\t", &save))
		t->cells[t->n_rows * t->n_cols + c++] = strdup(p);
	for (; c < t->n_cols; c++)
		t->cells[t->n_rows * t->n_cols + c] = strdup("");
	t->n_rows++;
}

void bench_table_print(struct bench_table *t, FILE *f, const char *title)
{
	int w[32] = { 0 }, total = 0;

	if (!t)
		return;
	for (int r = 0; r < t->n_rows; r++)
		for (int c = 0; c < t->n_cols && c < 32; c++) {
			const char *s = t->cells[r * t->n_cols + c];
			int len = s ? (int)strlen(s) : 0;

			w[c] = len > w[c] ? len : w[c];
		}
	for (int c = 0; c < t->n_cols && c < 32; c++)
		total += w[c] + (c ? 2 : 0);
	if (title)
		fprintf(f, "\n%s\n", title);
	for (int r = 0; r < t->n_rows; r++) {
		for (int c = 0; c < t->n_cols && c < 32; c++) {
			const char *s = t->cells[r * t->n_cols + c];

			if (c == 0)
				fprintf(f, "%-*s", w[c], s ? s : "");
			else
				fprintf(f, "  %*s", w[c], s ? s : "");
		}
		fputc('\n', f);
		if (r == 0) {
			for (int i = 0; i < total; i++)
				fputc('-', f);
			fputc('\n', f);
		}
	}
	fflush(f);
}

void bench_fmt_share(char *out, size_t size, double v, double limit)
{
	if (limit > 0)
		snprintf(out, size, "%.0f%%", 100 * v / limit);
	else
		snprintf(out, size, "-");
}

void bench_print_runs_note(const struct bench_opts *o)
{
	printf("(limits: best of %d runs on %d threads; kernels: median of "
	       "%d runs after a warm-up)\n", o->reps, bench_limit_threads(o),
	       o->reps);
}

void bench_table_free(struct bench_table *t)
{
	if (!t)
		return;
	for (int i = 0; i < t->n_rows * t->n_cols; i++)
		free(t->cells[i]);
	free(t->cells);
	free(t);
}

/* ------------------------------------------------------------------------
 * Progress.
 */
static bool progress_shown;

void bench_progress(const char *what, int done, int total)
{
	if (!isatty(STDERR_FILENO))
		return;
	fprintf(stderr, "\r\033[K%s %d/%d", what, done, total);
	fflush(stderr);
	progress_shown = true;
}

void bench_progress_end(void)
{
	if (!progress_shown)
		return;
	fprintf(stderr, "\r\033[K");
	fflush(stderr);
	progress_shown = false;
}

/* ------------------------------------------------------------------------
 * Devices.
 */
void bench_warn_last_error(void)
{
	bench_progress_end();
	fprintf(stderr, "loom-bench: %s\n", loom_error_message());
}

int bench_fail(const char *what, int status)
{
	const char *msg = loom_error_message();

	bench_progress_end();
	fprintf(stderr, "loom-bench: %s: %s\n", what,
		msg && *msg ? msg : loom_strerror(status));
	return 1;
}

int bench_load(void)
{
	int ret = loom_load_all();

	if (ret)
		fprintf(stderr, "loom-bench: warning: %s\n",
			loom_error_message());
	if (!loom_dev_count()) {
		fprintf(stderr,
			"loom-bench: no device found (see loom-info)\n");
		return LOOM_E_NOT_FOUND;
	}
	return LOOM_OK;
}

loom_dev_t *bench_open_device(const struct bench_opts *o)
{
	loom_dev_t *dev;

	if (bench_load())
		return NULL;
	dev = bench_pick_device(o);
	if (!dev && o->devices && *o->devices) {
		loom_dev_t *devs[BENCH_MAX_RUNS];
		size_t n;

		/* Its message names the device and how to make it. */
		bench_fail("--devices", app_devices_parse(o->devices, devs,
							  BENCH_MAX_RUNS, &n));
	} else if (!dev)
		bench_fail("no device", loom_error_set(LOOM_E_NOT_FOUND,
						       "none loaded (see "
						       "loom-info)"));
	return dev;
}

int bench_backend(loom_dev_t *dev, const struct bench_opts *o,
		  loom_backend_t **out)
{
	int ret = loom_dev_init_backend(dev, NULL, out);

	if (ret)
		return ret;
	if (o->threads > 0) {
		ret = loom_backend_set_n_threads(*out, o->threads);
		if (ret && ret != LOOM_E_UNSUPPORTED) {
			loom_backend_free(*out);
			*out = NULL;
			return ret;
		}
	}
	return LOOM_OK;
}

struct graph_run {
	loom_backend_t *be;
	loom_graph_t *g;
};

static int graph_compute(void *p)
{
	struct graph_run *r = p;
	int ret = loom_backend_graph_compute(r->be, r->g);

	return ret ? ret : loom_backend_synchronize(r->be);
}

int bench_graph_time(loom_dev_t *dev, const struct bench_opts *o,
		     loom_ctx_t *ctx, struct loom_tensor *out, double *median,
		     int *n_nodes)
{
	struct graph_run r = { 0 };
	loom_galloc_t *ga = NULL;
	int ret;

	loom_tensor_set_flags(out, LOOM_TENSOR_OUTPUT);
	ret = loom_graph_new(ctx, &r.g);
	if (!ret)
		ret = loom_graph_expand(r.g, out);
	if (!ret)
		ret = loom_galloc_new(loom_dev_buffer_type(dev), &ga);
	if (!ret)
		ret = loom_galloc_alloc_graph(ga, r.g);
	if (!ret)
		ret = bench_backend(dev, o, &r.be);
	if (!ret)
		ret = bench_time(graph_compute, &r, o->reps, median, NULL);
	if (!ret && n_nodes)
		*n_nodes = loom_graph_n_nodes(r.g);
	loom_backend_free(r.be);
	loom_galloc_free(ga);
	return ret;
}

loom_dev_t *bench_pick_device(const struct bench_opts *o)
{
	char name[128];
	size_t n;

	if (o->devices && *o->devices) {
		n = strcspn(o->devices, ",");
		if (n >= sizeof(name))
			n = sizeof(name) - 1;
		memcpy(name, o->devices, n);
		name[n] = '\0';
		return loom_dev_by_name(name);
	}
	/* The first non-meta device in priority order. */
	for (size_t i = 0; i < loom_dev_count(); i++)
		if (loom_dev_type(loom_dev_get(i)) != LOOM_DEV_TYPE_META)
			return loom_dev_get(i);
	return NULL;
}

/* Fills t with uniform values: one block of rows is drawn and converted,
 * then written over and over (a bandwidth test needs no better), so that
 * huge matrices fill quickly and with little temporary memory. */
int bench_fill_tensor(struct loom_tensor *t, uint64_t seed, float scale)
{
	size_t row = t->nb[1], rows = (size_t)loom_tensor_n_rows(t);
	size_t chunk_rows = ((size_t)16 << 20) / row;
	int64_t ne0 = t->ne[0];
	uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
	float *f = NULL;
	void *conv = NULL;
	int ret;

	if (!loom_tensor_is_contiguous(t))
		return loom_error_set(LOOM_E_INVAL, "%s is not contiguous",
				      t->name);
	if (chunk_rows < 1)
		chunk_rows = 1;
	if (chunk_rows > rows)
		chunk_rows = rows;
	f = malloc(chunk_rows * (size_t)ne0 * sizeof(*f));
	conv = malloc(chunk_rows * row);
	if (!f || !conv) {
		ret = loom_error_set(LOOM_E_NOMEM, "no memory to fill %s",
				     t->name);
		goto out;
	}
	for (size_t i = 0; i < chunk_rows * (size_t)ne0; i++) {
		s ^= s << 13;
		s ^= s >> 7;
		s ^= s << 17;
		f[i] = scale * ((float)(s >> 40) * (1.0f / 8388608.0f) - 1.0f);
	}
	ret = loom_type_convert(LOOM_TYPE_F32, f, t->type, conv,
			   (int64_t)chunk_rows * ne0);
	for (size_t r = 0; !ret && r < rows; r += chunk_rows) {
		size_t n = rows - r < chunk_rows ? rows - r : chunk_rows;

		ret = loom_tensor_set(t, conv, r * row, n * row);
	}
out:
	free(conv);
	free(f);
	return ret;
}
