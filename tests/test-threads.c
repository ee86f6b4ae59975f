/* SPDX-License-Identifier: MIT */
/* test-threads.c - the library under several threads at once: threads
 * computing on backends of their own, two threads on one backend (each
 * compute is done or refused with LOOM_E_BUSY), and plugins loaded and
 * unloaded while other threads enumerate and query devices.  Run under
 * ThreadSanitizer in CI; the single-device cases are in test-ownership.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include <loom/loom-backend.h>

/* One graph of its own per thread: c = mul_mat(a, b) + d, checked against
 * the same sums in double. */
#define K 96
#define M 40
#define N 6

struct work {
	loom_ctx_t *ctx;
	loom_graph_t *g;
	loom_buffer_t *buf;
	struct loom_tensor *c;
	double want[M * N];
};

static void fill(float *v, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++) {
		seed = seed * 1103515245u + 12345u;
		v[i] = (float)((seed >> 8) % 2001) / 1000.0f - 1.0f;
	}
}

static void work_init(struct work *w, loom_dev_t *dev, unsigned seed)
{
	float av[K * M], bv[K * N], dv[M * N];
	struct loom_tensor *a, *b, *d;

	memset(w, 0, sizeof(*w));
	g_assert_cmpint(loom_ctx_new(0, &w->ctx), ==, LOOM_OK);
	a = loom_tensor_new_2d(w->ctx, LOOM_TYPE_F32, K, M);
	b = loom_tensor_new_2d(w->ctx, LOOM_TYPE_F32, K, N);
	d = loom_tensor_new_2d(w->ctx, LOOM_TYPE_F32, M, N);
	w->c = loom_add(w->ctx, loom_mul_mat(w->ctx, a, b), d);
	g_assert_nonnull(w->c);
	g_assert_cmpint(loom_graph_new(w->ctx, &w->g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(w->g, w->c), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_alloc_tensors(w->ctx,
					       loom_dev_buffer_type(dev),
					       &w->buf), ==, LOOM_OK);
	fill(av, K * M, seed);
	fill(bv, K * N, seed + 1);
	fill(dv, M * N, seed + 2);
	g_assert_cmpint(loom_tensor_set(a, av, 0, sizeof(av)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(b, bv, 0, sizeof(bv)), ==, LOOM_OK);
	g_assert_cmpint(loom_tensor_set(d, dv, 0, sizeof(dv)), ==, LOOM_OK);
	for (int n = 0; n < N; n++) {
		for (int m = 0; m < M; m++) {
			double s = dv[n * M + m];

			for (int k = 0; k < K; k++)
				s += (double)av[m * K + k] * bv[n * K + k];
			w->want[n * M + m] = s;
		}
	}
}

/* Reads c back; false (and a message) when it is not what was asked. */
static bool work_check(struct work *w, GString *why)
{
	float got[M * N];
	double err = 0, ref = 0;

	memset(got, 0, sizeof(got));
	if (loom_tensor_get(w->c, got, 0, sizeof(got))) {
		g_string_append_printf(why, "get: %s; ", loom_error_message());
		return false;
	}
	for (int i = 0; i < M * N; i++) {
		err += (got[i] - w->want[i]) * (got[i] - w->want[i]);
		ref += w->want[i] * w->want[i];
	}
	if (!(err / ref < 1e-10)) {
		g_string_append_printf(why, "nmse %g; ", err / ref);
		return false;
	}
	return true;
}

static void work_free(struct work *w)
{
	loom_buffer_free(w->buf);
	loom_ctx_free(w->ctx);
}

/* ------------------------------------------------------------------------
 * Threads computing.
 */
struct job {
	loom_dev_t *dev;
	loom_backend_t *be; /* shared; NULL: the thread makes its own */
	struct work w;
	bool read_later;    /* results are read after the threads end */
	int iters;
	int n_ok, n_busy;
	GString *why; /* anything else that happened */
};

static gpointer compute_loop(gpointer data)
{
	struct job *j = data;
	loom_backend_t *be = j->be;

	if (!be && loom_dev_init_backend(j->dev, NULL, &be)) {
		g_string_append_printf(j->why, "init_backend: %s; ",
				       loom_error_message());
		return NULL;
	}
	for (int i = 0; i < j->iters; i++) {
		int st = loom_backend_graph_compute(be, j->w.g);

		if (st == LOOM_OK && (j->read_later || work_check(&j->w, j->why)))
			j->n_ok++;
		else if (st == LOOM_E_BUSY &&
			 strstr(loom_error_message(), "is busy"))
			j->n_busy++;
		else if (st)
			g_string_append_printf(j->why, "compute: %s (%s); ",
					       loom_strerror(st),
					       loom_error_message());
	}
	if (!j->be)
		loom_backend_free(be);
	return NULL;
}

/* n threads on dev, sharing one backend or each with its own; every
 * compute is right or (shared) refused as busy.  A meta backend keeps a
 * node's results until it computes another graph, which another thread
 * may do at any time: there each graph is run once more and read after
 * the threads end. */
static void run_jobs(loom_dev_t *dev, int n, bool shared, int iters)
{
	loom_backend_t *be = NULL;
	struct job jobs[8];
	GThread *th[8];
	int ok = 0, busy = 0;

	g_assert_nonnull(dev);
	g_assert_cmpint(n, <=, 8);
	if (shared)
		g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==,
				LOOM_OK);
	for (int i = 0; i < n; i++) {
		jobs[i] = (struct job){
			.dev = dev, .be = be, .iters = iters,
			.read_later = shared &&
				      loom_dev_type(dev) == LOOM_DEV_TYPE_META,
			.why = g_string_new(""),
		};
		work_init(&jobs[i].w, dev, 17u * (unsigned)i + 1);
	}
	for (int i = 0; i < n; i++)
		th[i] = g_thread_new("compute", compute_loop, &jobs[i]);
	for (int i = 0; i < n; i++)
		g_thread_join(th[i]);
	for (int i = 0; i < n; i++) {
		if (jobs[i].read_later &&
		    (loom_backend_graph_compute(be, jobs[i].w.g) ||
		     !work_check(&jobs[i].w, jobs[i].why)))
			g_string_append_printf(jobs[i].why, "alone: %s",
					       loom_error_message());
		if (jobs[i].why->len)
			g_error("thread %d on %s: %s", i, loom_dev_name(dev),
				jobs[i].why->str);
		g_string_free(jobs[i].why, TRUE);
		work_free(&jobs[i].w);
		ok += jobs[i].n_ok;
		busy += jobs[i].n_busy;
	}
	g_test_message("%s, %d threads%s: %d computed, %d refused as busy",
		       loom_dev_name(dev), n, shared ? " on one backend" : "",
		       ok, busy);
	g_assert_cmpint(ok + busy, ==, n * iters);
	g_assert_cmpint(ok, >, 0);
	if (!shared)
		g_assert_cmpint(busy, ==, 0);
	loom_backend_free(be);
}

static void load(void)
{
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_nonnull(loom_dev_by_name("cpu0"));
}

static void unload(void)
{
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
}

static void test_own_backends(gconstpointer name)
{
	load();
	run_jobs(loom_dev_by_name(name), 3, false, 20);
	unload();
}

static void test_one_backend(gconstpointer name)
{
	load();
	run_jobs(loom_dev_by_name(name), 2, true, 60);
	unload();
}

/* ------------------------------------------------------------------------
 * Loading and unloading while other threads enumerate and query devices.
 */
struct querier {
	gint *stop;
	unsigned n_passes;
	int n_seen; /* devices seen alive */
	int n_made; /* backends and buffers made and freed */
};

static void query_dev(struct querier *q, loom_dev_t *dev)
{
	loom_buffer_type_t *buft;
	loom_backend_t *be;
	loom_buffer_t *buf;
	size_t f, t;

	loom_dev_memory(dev, &f, &t);
	q->n_seen += t > 0;
	(void)loom_dev_name(dev);
	(void)loom_dev_description(dev);
	(void)loom_dev_type(dev);
	(void)loom_dev_caps(dev);
	(void)loom_dev_rank(dev);
	(void)loom_dev_reg(dev);
	buft = loom_dev_buffer_type(dev);
	(void)loom_buffer_type_name(buft);
	(void)loom_buffer_type_alignment(buft);
	(void)loom_buffer_type_max_size(buft);
	(void)loom_dev_supports_buft(dev, buft);
	/* Now and then an object that keeps the plugin loaded. */
	if (q->n_passes % 64)
		return;
	if (loom_buffer_type_alloc_buffer(buft, 256, &buf) == LOOM_OK) {
		q->n_made++;
		loom_buffer_free(buf);
	}
	if (loom_dev_init_backend(dev, NULL, &be) == LOOM_OK) {
		q->n_made++;
		(void)loom_backend_name(be);
		loom_backend_free(be);
	}
}

static gpointer query_loop(gpointer data)
{
	struct querier *q = data;

	while (!g_atomic_int_get(q->stop)) {
		size_t n = loom_dev_count();

		for (size_t i = 0; i <= n; i++) {
			loom_dev_t *dev = loom_dev_get(i);

			if (dev)
				query_dev(q, dev);
		}
		for (size_t i = 0; i < loom_reg_count(); i++) {
			loom_reg_t *reg = loom_reg_get(i);

			(void)loom_reg_name(reg);
			(void)loom_reg_version(reg);
			if (loom_reg_dev_count(reg))
				(void)loom_reg_dev(reg, 0);
		}
		(void)loom_dev_by_name("meta0");
		(void)loom_dev_by_type(LOOM_DEV_TYPE_CPU);
		q->n_passes++;
	}
	return NULL;
}

static void test_unload_while_querying(void)
{
	struct querier q[2];
	GThread *th[2];
	gint stop = 0;
	int n_unloaded = 0, n_busy = 0;
	/* Two seconds, or longer until one unload got through: a slow run
	 * (valgrind, a loaded machine) may see the queriers hold the plugins
	 * at every try for a while. */
	gint64 end = g_get_monotonic_time() + 2 * G_TIME_SPAN_SECOND;
	gint64 last = end + 118 * G_TIME_SPAN_SECOND;

	for (int i = 0; i < 2; i++) {
		q[i] = (struct querier){ .stop = &stop };
		th[i] = g_thread_new("query", query_loop, &q[i]);
	}
	for (gint64 now = g_get_monotonic_time();
	     (now < end || n_unloaded == 0) && now < last;
	     now = g_get_monotonic_time()) {
		int st;

		g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
		st = loom_unload_all();
		/* A querier's backend or buffer keeps the plugins loaded. */
		if (st == LOOM_E_BUSY) {
			n_busy++;
			g_usleep(100);
		} else {
			g_assert_cmpint(st, ==, LOOM_OK);
			n_unloaded++;
		}
	}
	g_atomic_int_set(&stop, 1);
	for (int i = 0; i < 2; i++)
		g_thread_join(th[i]);
	while (loom_unload_all() == LOOM_E_BUSY)
		g_usleep(1000);
	g_test_message("%d unloads, %d refused as busy; devices seen %d "
		       "times, %d objects made", n_unloaded, n_busy,
		       q[0].n_seen + q[1].n_seen, q[0].n_made + q[1].n_made);
	g_assert_cmpint(n_unloaded, >, 0);
}

/* ------------------------------------------------------------------------
 * A log callback that reads the registry while plugins load and unload:
 * the library logs with no lock of the registry held, so the reads
 * neither deadlock nor see a half-made record.
 */
struct log_reads {
	int n_logs;
	size_t max_devs, max_plugins;
};

static void reading_log(enum loom_log_level level, const char *msg,
			void *userdata)
{
	struct log_reads *r = userdata;
	size_t n_devs = loom_dev_count(), n_plugins = loom_plugin_count();

	(void)level;
	(void)msg;
	r->n_logs++;
	(void)loom_search_path_count();
	(void)loom_dev_by_name("cpu0");
	if (n_devs > r->max_devs)
		r->max_devs = n_devs;
	if (n_plugins > r->max_plugins)
		r->max_plugins = n_plugins;
}

static void test_log_reads_registry(void)
{
	struct log_reads r = { 0 };
	enum loom_log_level old = loom_log_get_level();

	loom_log_set_level(LOOM_LOG_DEBUG);
	loom_log_set_callback(reading_log, &r);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	loom_log_set_callback(NULL, NULL);
	loom_log_set_level(old);
	/* "plugin cpu: loaded" comes once its record is, and the devices
	 * of the plugins loaded before are there to count: cpu0 and cpu1
	 * once meta (last) logs. */
	g_assert_cmpint(r.n_logs, >, 0);
	g_assert_cmpuint(r.max_plugins, >=, 2);
	g_assert_cmpuint(r.max_devs, >=, 2);
}

int main(int argc, char **argv)
{
	const char *path = g_getenv("LOOM_TEST_PLUGIN_PATH");

	g_test_init(&argc, &argv, NULL);
	/* Set once here: the environment is not changed while threads run. */
	if (path)
		g_setenv("LOOM_PLUGIN_PATH", path, TRUE);
	g_setenv("LOOM_BACKENDS", "cpu,meta", TRUE);
	g_setenv("LOOM_CPU_DEVICES", "2", TRUE);
	g_setenv("LOOM_CPU_THREADS", "2", TRUE);
	g_setenv("LOOM_META_DEVICES", "cpu0,cpu1", TRUE);
	if (loom_load_all() || !loom_dev_by_name("meta0")) {
		g_test_skip("no cpu and meta plugins");
		return g_test_run();
	}
	unload();

	g_test_add_data_func("/threads/own-backends/cpu", "cpu0",
			     test_own_backends);
	g_test_add_data_func("/threads/own-backends/meta", "meta0",
			     test_own_backends);
	g_test_add_data_func("/threads/one-backend/cpu", "cpu0",
			     test_one_backend);
	g_test_add_data_func("/threads/one-backend/meta", "meta0",
			     test_one_backend);
	g_test_add_func("/threads/unload-while-querying",
			test_unload_while_querying);
	g_test_add_func("/threads/log-reads-registry",
			test_log_reads_registry);
	return g_test_run();
}
