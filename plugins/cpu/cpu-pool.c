/* SPDX-License-Identifier: MIT */
/* cpu-pool.c - the CPU plugin's thread pool: workers pinned to a
 * partition's cores that take jobs from a queue, spinning a while before
 * they sleep, and the barrier the kernels meet at.  While the cores are
 * contended (other work, or more threads than cores), waits hardly spin and fine-grained graphs run
 * on half the threads (see watch_end), or, where that is one, on the
 * thread that posts them (see run_here_locked).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cpu-private.h"

/* How long an idle worker spins for the next job before it sleeps. */
#define CPU_SPIN_NS_DEFAULT 200000

/* How long a caller waiting for its jobs spins before it sleeps: short,
 * because that thread usually shares a core with a worker. */
#define CPU_WAIT_SPIN_NS 30000

/* Spins this many times between looks at the clock. */
#define CPU_SPIN_CHECK 64

/* Spin budgets when there are more busy threads than cores: a spinning
 * thread then takes time from one that has work, so wait briefly. */
#define CPU_CROWDED_SPIN_NS 2000

/* The cores count as contended for CPU_CONTENDED_HOLD_NS once a worker
 * has spent more than 1 / CPU_OFF_SHARE of CPU_WINDOW_NS of jobs neither
 * running nor asleep: runnable, with its core taken by other work or by
 * another of our threads.  Jobs
 * shorter than CPU_CHECK_JOB_NS are not worth the look.  The hold is
 * long: on half the threads a graph often finds a core to itself and
 * sees no contention, and each look on all of them costs a window of
 * slow steps (a decode of 2 threads under 2 busy processes was 1.2-1.4x
 * faster with 1 s than with 0.1 s). */
#define CPU_CONTENDED_HOLD_NS 1000000000
#define CPU_WINDOW_NS 20000000
#define CPU_OFF_SHARE 10
#define CPU_CHECK_JOB_NS 200000

static _Thread_local const struct cpu_pool *current_pool;

/* Nanoseconds the calling thread has slept in wait_change. */
static _Thread_local int64_t slept_ns;

/* Worker threads alive in all pools, and the cores the process may use. */
static _Atomic int live_threads;
static _Atomic int n_cores = 1;

/* Until when (cpu_now_ns) the cores count as contended, 0 when they
 * never were; and whether the last look found them so (for the log). */
static _Atomic int64_t contended_until;
static _Atomic bool was_contended;

/* Whether a job ran on the thread that posted it since the cores last
 * became contended (for the log). */
static _Atomic bool ran_here;

void cpu_set_core_count(int n)
{
	atomic_store(&n_cores, n > 0 ? n : 1);
}

int64_t cpu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static bool contended(void)
{
	int64_t until = atomic_load_explicit(&contended_until,
					     memory_order_relaxed);

	return until && cpu_now_ns() < until;
}

/* CPU time of the calling thread. */
static int64_t thread_cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
		return 0;
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The kernel's scheduler statistics of the calling thread: CPU time,
 * time runnable but waiting for a core, time slices. */
#define CPU_SCHEDSTAT "/proc/thread-self/schedstat"

/* Nanoseconds the calling thread has waited for a core while runnable,
 * as the kernel counts them, read through fd or, where fd < 0, through
 * the file opened for this look; -1 where the kernel does not say. */
static int64_t run_delay_ns(int fd)
{
	unsigned long long cpu, delay;
	char buf[128];
	bool own = fd < 0;
	ssize_t n;

	if (own)
		fd = open(CPU_SCHEDSTAT, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	if (own)
		close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	if (sscanf(buf, "%llu %llu", &cpu, &delay) != 2 ||
	    delay > INT64_MAX)
		return -1;
	return (int64_t)delay;
}

/* A thread's look at its own time: where its job began (wall clock, time
 * waiting for a core, and for where the kernel does not count that, CPU
 * time and time slept), and the sums over the jobs since its last
 * verdict.  fd reads the thread's scheduler statistics (a worker keeps
 * it open; -1 opens them at each look).  Only the wall clock is read for
 * a job that follows a short one: jobs come in runs of alike ones (a
 * decode's graphs, a meta device's pieces between its allreduces), and
 * reading the kernel's counts costs a system call, several microseconds
 * on each of a meta device's dozens of pieces per token. */
struct time_watch {
	int fd;
	bool look;   /* this job's counts were read at its beginning */
	bool skip;   /* the last job was short: do not read them */
	int64_t t0, delay0, cpu0, slept0;
	int64_t wall, off;
};

static void watch_begin(struct time_watch *w)
{
	w->t0 = cpu_now_ns();
	w->look = !w->skip;
	if (!w->look)
		return;
	w->delay0 = run_delay_ns(w->fd);
	w->cpu0 = thread_cpu_ns();
	w->slept0 = slept_ns;
}

/* The time a job spent waiting for a core.  The kernel's count sees
 * every wait; without it, the wall time neither run nor slept misses
 * the wait of a thread woken from sleep for its core, which is most of
 * the wait of threads that sleep at the barriers (more threads than
 * cores). */
static int64_t watch_off(const struct time_watch *w, int64_t wall)
{
	int64_t delay = w->delay0 < 0 ? -1 : run_delay_ns(w->fd);

	if (delay >= 0)
		return delay - w->delay0;
	return wall - (thread_cpu_ns() - w->cpu0) - (slept_ns - w->slept0);
}

/* Called by a worker at the end of a job (before it says the job is
 * done: the caller it wakes then may take its core, and is no other
 * work; between jobs that caller wants a core too, so only the jobs
 * count).  When other work shares the cores, the scheduler gives each
 * runnable thread its turn, and a worker spends a good part of its jobs
 * waiting for one; spinning then only gives that work a thread's turn
 * while the threads awaited wait for theirs, and a thread makes progress
 * only while every thread it meets at the barriers holds a core too.  So
 * once that wait passes a tenth of the time, the cores count as
 * contended for a while: waits hardly spin, and fine-grained graphs run
 * on fewer threads (each running whenever it gets a core, meeting
 * fewer).  The
 * short preemptions of a quiet machine (a kernel thread's turn) stay far
 * below. */
static void watch_end(struct time_watch *w)
{
	int64_t now = cpu_now_ns(), wall = now - w->t0;

	w->skip = wall < CPU_CHECK_JOB_NS;
	if (w->skip || !w->look)
		return;
	w->wall += wall;
	w->off += watch_off(w, wall);
	if (w->wall < CPU_WINDOW_NS)
		return;
	if (w->off * CPU_OFF_SHARE > w->wall) {
		atomic_store_explicit(&contended_until,
				      now + CPU_CONTENDED_HOLD_NS,
				      memory_order_relaxed);
		if (!atomic_exchange(&was_contended, true))
			loom_log(LOOM_LOG_DEBUG, "cpu: the cores are "
				 "contended (by other work, or by more threads "
				 "than cores): short waits, fine-grained "
				 "graphs on half the threads");
	}
	w->wall = w->off = 0;
}

/* The threads a graph job posted now runs on: all, or half (half_bar's
 * count) while the cores are contended and the graph is fine-grained.
 * Such a graph meets at barriers so often that its threads move on
 * together only while all of them hold a core; the big nodes of a
 * prefill keep each thread busy for whole time slices, and every thread
 * that gets a turn then adds to the work done. */
static int graph_threads(const struct cpu_pool *pool,
			 const struct cpu_plan *plan)
{
	if (contended())
		return plan->fine && pool->n_threads > 1 ?
		       pool->n_threads / 2 : pool->n_threads;
	if (atomic_load_explicit(&was_contended, memory_order_relaxed) &&
	    atomic_exchange(&was_contended, false)) {
		atomic_store(&ran_here, false);
		loom_log(LOOM_LOG_DEBUG, "cpu: the cores are no longer "
			 "contended");
	}
	return pool->n_threads;
}

/* The spin budget for a wait by a thread that is (worker) or is not one of
 * the live workers: full when every waiting thread has a core to itself,
 * short when the spinner would share one with another of ours or with
 * other work. */
static int64_t spin_budget(int64_t full, bool worker)
{
	int busy = atomic_load_explicit(&live_threads, memory_order_relaxed);

	if (busy + !worker > atomic_load_explicit(&n_cores,
						  memory_order_relaxed) ||
	    contended())
		return full < CPU_CROWDED_SPIN_NS ? full : CPU_CROWDED_SPIN_NS;
	return full;
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT_PRIVATE, val, NULL,
		NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
	syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE_PRIVATE, INT_MAX,
		NULL, NULL, 0);
}

/* Waits until *word differs from val: spins for spin_ns, then sleeps.
 * sleepers counts the threads asleep so wakers can skip the system call
 * when nobody is.  With yield, the spin gives the core away at every look
 * at the clock to whoever else wants it (another thread of the
 * application, such as an MPI rank's progress between graphs), and keeps
 * it when nobody does. */
static void wait_change(_Atomic uint32_t *word, uint32_t val,
			_Atomic int *sleepers, int64_t spin_ns, bool yield)
{
	int64_t start = 0;
	unsigned int i = 0;

	while (atomic_load_explicit(word, memory_order_acquire) == val) {
		if (++i % CPU_SPIN_CHECK) {
			cpu_relax();
			continue;
		}
		if (!start) {
			start = cpu_now_ns();
			continue;
		}
		if (cpu_now_ns() - start < spin_ns) {
			if (yield)
				sched_yield();
			continue;
		}
		atomic_fetch_add(sleepers, 1);
		if (atomic_load(word) == val) {
			start = cpu_now_ns();
			futex_wait(word, val);
			slept_ns += cpu_now_ns() - start;
		}
		atomic_fetch_sub(sleepers, 1);
		start = 0;
	}
}

static void wake(_Atomic uint32_t *word, _Atomic int *sleepers)
{
	if (atomic_load(sleepers))
		futex_wake_all(word);
}

void cpu_bar_init(struct cpu_bar *b, int n)
{
	atomic_init(&b->count, 0);
	atomic_init(&b->phase, 0);
	atomic_init(&b->sleepers, 0);
	b->n = n;
}

/* A phase barrier: the last thread to arrive resets the count and moves
 * the phase on; the others wait for the phase to move. */
void cpu_bar_wait(struct cpu_bar *b)
{
	uint32_t phase;

	if (b->n <= 1)
		return;
	phase = atomic_load_explicit(&b->phase, memory_order_acquire);
	if (atomic_fetch_add_explicit(&b->count, 1, memory_order_acq_rel) ==
	    b->n - 1) {
		atomic_store_explicit(&b->count, 0, memory_order_relaxed);
		atomic_store(&b->phase, phase + 1);
		wake(&b->phase, &b->sleepers);
		return;
	}
	/* Kernels are balanced: a short spin covers most waits, and sleeping
	 * soon keeps oversubscribed partitions from burning their cores. */
	wait_change(&b->phase, phase, &b->sleepers, spin_budget(50000, true),
		    false);
}

void cpu_barrier(const struct cpu_task *task)
{
	if (task->nth > 1)
		cpu_bar_wait(task->bar);
}

/* Copies below this many bytes are one thread's: splitting them would
 * cost more in cache traffic than it saves. */
#define CPU_COPY_SPLIT (64u << 10)

void cpu_copy_run(const struct cpu_copy *c, int ith, int nth)
{
	size_t lo, hi, per, i;

	if (c->size * c->n < CPU_COPY_SPLIT) {
		nth = 1;
		if (ith)
			return;
	}
	if (c->n == 1) {
		per = ((c->size + nth - 1) / nth + 63) & ~(size_t)63;
		lo = per * ith;
		hi = lo + per < c->size ? lo + per : c->size;
		if (lo < hi)
			memcpy(c->dst + lo, c->src + lo, hi - lo);
		return;
	}
	per = (c->n + nth - 1) / nth;
	lo = per * ith;
	hi = lo + per < c->n ? lo + per : c->n;
	for (i = lo; i < hi; i++)
		memcpy(c->dst + i * c->dst_stride, c->src + i * c->src_stride,
		       c->size);
}

bool cpu_pool_is_worker(const struct cpu_pool *pool)
{
	return current_pool == pool;
}

struct worker_arg {
	struct cpu_pool *pool;
	int ith;
};

static void pin(const struct cpu_pool *pool, int ith)
{
	cpu_set_t set;

	if (pool->n_cpus <= 0)
		return;
	CPU_ZERO(&set);
	CPU_SET(pool->cpus[ith % pool->n_cpus], &set);
	/* Failure (a container's cpuset, a core gone offline) only costs
	 * locality; the thread runs wherever the kernel puts it. */
	if (sched_setaffinity(0, sizeof(set), &set))
		loom_log(LOOM_LOG_DEBUG, "cpu: cannot pin thread %d to core %d",
			 ith, pool->cpus[ith % pool->n_cpus]);
}

/* Marks the jobs before done finished.  Posters waiting for a free slot
 * wake at every job; threads waiting for their jobs to finish only once
 * done reaches drain_at, so that a queue of many small jobs does not wake
 * them (and take a core from a worker) once per job. */
static void finish_job(struct cpu_pool *pool, uint32_t done)
{
	atomic_store(&pool->done, done);
	if (atomic_load(&pool->done_sleepers) ||
	    (atomic_load(&pool->drain_sleepers) &&
	     (int32_t)(done - atomic_load(&pool->drain_at)) >= 0))
		futex_wake_all(&pool->done);
}

/* Lowers drain_at to target, or moves it there from a mark that done has
 * already passed (its waiter is awake).  Called before the waiter counts
 * itself a sleeper, so a worker that sees the sleeper sees the mark. */
static void mark_drain(struct cpu_pool *pool, uint32_t target, uint32_t done)
{
	uint32_t cur = atomic_load(&pool->drain_at);

	while (((int32_t)(cur - done) <= 0 || (int32_t)(target - cur) < 0) &&
	       !atomic_compare_exchange_weak(&pool->drain_at, &cur, target))
		;
}

/* Waits until the jobs before next are done: the jobs a thread passed
 * by may write what its next one reads. */
static void wait_done_before(struct cpu_pool *pool, uint32_t next)
{
	uint32_t d;

	while ((int32_t)(next - (d = atomic_load(&pool->done))) > 0)
		wait_change(&pool->done, d, &pool->done_sleepers,
			    spin_budget(50000, true), false);
}

/* Runs thread ith's share of job (not a stop).  Every job ends with the
 * threads that ran it past a barrier. */
static void run_job(struct cpu_pool *pool, const struct cpu_job *job,
		    int ith)
{
	switch (job->kind) {
	case CPU_JOB_GRAPH:
		cpu_graph_run(job->nth < pool->n_threads ? &pool->half_bar :
			      &pool->bar, job->plan, ith, job->nth,
			      pool->wdata, pool->wsize);
		/* Every thread that ran it is past its last barrier. */
		if (ith == 0)
			free(job->plan);
		break;
	case CPU_JOB_ALLREDUCE:
		if (!job->leader_only) {
			cpu_allreduce_run(job->ar, job->part, ith);
			break;
		}
		/* The others may not start the next job before thread 0 is
		 * through. */
		if (ith == 0)
			cpu_allreduce_run(job->ar, job->part, 0);
		cpu_bar_wait(&pool->bar);
		break;
	case CPU_JOB_COPY:
		cpu_copy_run(&job->copy, ith, job->nth);
		if (job->nth > 1)
			cpu_bar_wait(&pool->bar);
		break;
	case CPU_JOB_STOP:
		break;
	}
}

/* Whether job is one thread ith has no part in. */
static bool not_mine(const struct cpu_job *job, int ith)
{
	return (job->kind == CPU_JOB_GRAPH || job->kind == CPU_JOB_COPY) &&
	       ith >= job->nth;
}

/* A worker's end, at the stop job (number next). */
static void worker_stop(struct cpu_pool *pool, int ith, uint32_t next,
			struct time_watch *watch)
{
	cpu_bar_wait(&pool->bar);
	atomic_fetch_sub(&live_threads, 1);
	if (watch->fd >= 0)
		close(watch->fd);
	if (ith == 0)
		finish_job(pool, next + 1);
}

static void *worker_main(void *p)
{
	struct worker_arg arg = *(struct worker_arg *)p;
	struct cpu_pool *pool = arg.pool;
	int ith = arg.ith;
	uint32_t next;
	struct time_watch watch = { .fd = -1 };
	bool behind = false; /* passed jobs by since the last one it ran */

	free(p);
	current_pool = pool;
	atomic_fetch_add(&live_threads, 1);
	pin(pool, ith);
	watch.fd = open(CPU_SCHEDSTAT, O_RDONLY | O_CLOEXEC);
	next = atomic_load(&pool->done);
	for (;;) {
		const struct cpu_job *job;

		/* Idle between jobs: the spin yields. */
		wait_change(&pool->head, next, &pool->head_sleepers,
			    spin_budget(pool->spin_ns, true), true);
		job = &pool->jobs[next % CPU_POOL_QUEUE];
		if (not_mine(job, ith)) {
			/* Pass it by, without waiting for the threads that
			 * run it (under contention they may wait a while for
			 * a core). */
			atomic_store(&pool->taken[ith], next + 1);
			next++;
			behind = true;
			continue;
		}
		watch_begin(&watch);
		if (behind)
			wait_done_before(pool, next);
		behind = false;
		if (job->kind == CPU_JOB_STOP) {
			worker_stop(pool, ith, next, &watch);
			return NULL;
		}
		run_job(pool, job, ith);
		watch_end(&watch);
		/* It is done once thread 0 says so. */
		if (ith == 0)
			finish_job(pool, next + 1);
		atomic_store(&pool->taken[ith], next + 1);
		next++;
	}
}

static int64_t spin_ns_from_env(void)
{
	const char *s = loom_env_get("LOOM_CPU_SPIN_US");
	char *end;
	long v;

	if (!s || !*s)
		return CPU_SPIN_NS_DEFAULT;
	v = strtol(s, &end, 10);
	if (*end || v < 0)
		return CPU_SPIN_NS_DEFAULT;
	return (int64_t)v * 1000;
}

int cpu_pool_new(int n_threads, const int *cpus, int n_cpus,
		 struct cpu_pool **out)
{
	struct cpu_pool *pool;
	size_t size = (sizeof(*pool) + 63) & ~(size_t)63;
	int i, err;

	pool = aligned_alloc(64, size);
	if (!pool)
		return loom_error_set(LOOM_E_NOMEM, "cpu: out of memory");
	memset(pool, 0, sizeof(*pool));
	if (n_threads < 1)
		n_threads = 1;
	pool->n_threads = n_threads;
	pool->cpus = (int *)cpus;
	pool->n_cpus = n_cpus;
	pool->spin_ns = spin_ns_from_env();
	atomic_init(&pool->head, 0);
	atomic_init(&pool->done, 0);
	atomic_init(&pool->head_sleepers, 0);
	atomic_init(&pool->done_sleepers, 0);
	atomic_init(&pool->drain_sleepers, 0);
	atomic_init(&pool->drain_at, 0);
	cpu_bar_init(&pool->bar, n_threads);
	cpu_bar_init(&pool->half_bar, n_threads / 2);
	pthread_mutex_init(&pool->lock, NULL);
	pool->threads = calloc(n_threads, sizeof(*pool->threads));
	pool->taken = calloc(n_threads, sizeof(*pool->taken));
	if (!pool->threads || !pool->taken)
		goto err_lock;
	for (i = 0; i < n_threads; i++) {
		struct worker_arg *arg = malloc(sizeof(*arg));

		if (!arg)
			goto err_stop;
		arg->pool = pool;
		arg->ith = i;
		err = pthread_create(&pool->threads[i], NULL, worker_main, arg);
		if (err) {
			free(arg);
			goto err_stop;
		}
	}
	*out = pool;
	return LOOM_OK;

err_stop:
	/* The workers already started wait at the stop job's barrier for
	 * the ones that never came: shrink it to those that exist. */
	if (i > 0) {
		struct cpu_job stop = { .kind = CPU_JOB_STOP };
		int j;

		pool->n_threads = i;
		pool->bar.n = i;
		pthread_mutex_lock(&pool->lock);
		cpu_pool_post_locked(pool, &stop);
		pthread_mutex_unlock(&pool->lock);
		for (j = 0; j < i; j++)
			pthread_join(pool->threads[j], NULL);
	}
err_lock:
	free(pool->threads);
	free((void *)pool->taken);
	pthread_mutex_destroy(&pool->lock);
	free(pool);
	return loom_error_set(LOOM_E_NOMEM, "cpu: cannot start %d threads",
			      n_threads);
}

void cpu_pool_free(struct cpu_pool *pool)
{
	struct cpu_job stop = { .kind = CPU_JOB_STOP };
	int i;

	if (!pool)
		return;
	pthread_mutex_lock(&pool->lock);
	cpu_pool_post_locked(pool, &stop);
	pthread_mutex_unlock(&pool->lock);
	for (i = 0; i < pool->n_threads; i++)
		pthread_join(pool->threads[i], NULL);
	free(pool->threads);
	free((void *)pool->taken);
	free(pool->wdata);
	pthread_mutex_destroy(&pool->lock);
	free(pool);
}

/* The jobs taken by the worker furthest behind. */
static uint32_t oldest_taken(const struct cpu_pool *pool, uint32_t head)
{
	uint32_t min = head;
	int i;

	for (i = 0; i < pool->n_threads; i++) {
		uint32_t t = atomic_load(&pool->taken[i]);

		if (head - t > head - min)
			min = t;
	}
	return min;
}

/* The threads a copy runs on: one for a small copy (cpu_copy_run splits
 * none) and while the cores are contended, else all. */
static int copy_threads(const struct cpu_pool *pool, const struct cpu_copy *c)
{
	if (c->size * c->n < CPU_COPY_SPLIT || contended())
		return 1;
	return pool->n_threads;
}

/* The caller's own look at its time, for the jobs it runs itself. */
static _Thread_local struct time_watch caller_watch = { .fd = -1 };

/* Runs a graph or copy job that would take one thread on the thread that
 * posts it, while the cores are contended, nothing is queued before it
 * and no other pool has workers (their work may overlap this one's).
 * Under contention a worker woken for the job often waits for a core,
 * and so does the caller woken when it is done: a decode step pays both
 * waits on every graph.  Running it here pays neither; the caller's time
 * is watched as a worker's is, so that the cores stay contended while
 * this goes on and stop counting so once the other work is gone. */
static bool run_here_locked(struct cpu_pool *pool, const struct cpu_job *job,
			    int nth)
{
	const struct cpu_pool *saved = current_pool;

	if (nth != 1 || !contended() || current_pool == pool ||
	    atomic_load(&live_threads) != pool->n_threads ||
	    !cpu_pool_idle_locked(pool))
		return false;
	if (!atomic_exchange(&ran_here, true))
		loom_log(LOOM_LOG_DEBUG, "cpu: graphs and copies of one "
			 "thread run on the thread that posts them");
	/* Calls the job makes into this backend run inline, as a worker's
	 * do. */
	current_pool = pool;
	watch_begin(&caller_watch);
	if (job->kind == CPU_JOB_GRAPH) {
		cpu_graph_run(NULL, job->plan, 0, 1, pool->wdata, pool->wsize);
		free(job->plan);
	} else {
		cpu_copy_run(&job->copy, 0, 1);
	}
	watch_end(&caller_watch);
	current_pool = saved;
	return true;
}

void cpu_pool_post_locked(struct cpu_pool *pool, const struct cpu_job *job)
{
	uint32_t head = atomic_load_explicit(&pool->head,
					     memory_order_relaxed);
	int nth = 0;

	if (job->kind == CPU_JOB_GRAPH)
		nth = graph_threads(pool, job->plan);
	else if (job->kind == CPU_JOB_COPY)
		nth = copy_threads(pool, &job->copy);
	if (run_here_locked(pool, job, nth))
		return;

	for (;;) {
		uint32_t done = atomic_load(&pool->done);

		if (head - done < CPU_POOL_QUEUE)
			break;
		wait_change(&pool->done, done, &pool->done_sleepers,
			    spin_budget(pool->spin_ns, false), false);
	}
	/* A worker far behind, passing by jobs not its own, may still have
	 * the slot to read: rare, so a short sleep waits for it. */
	while (head - oldest_taken(pool, head) >= CPU_POOL_QUEUE) {
		struct timespec ts = { 0, 20000 };

		nanosleep(&ts, NULL);
	}
	pool->jobs[head % CPU_POOL_QUEUE] = *job;
	if (nth)
		pool->jobs[head % CPU_POOL_QUEUE].nth = nth;
	atomic_store(&pool->head, head + 1);
	wake(&pool->head, &pool->head_sleepers);
}

bool cpu_pool_idle_locked(struct cpu_pool *pool)
{
	/* Acquire: the finished jobs' writes are visible to the caller. */
	return atomic_load_explicit(&pool->done, memory_order_acquire) ==
	       atomic_load_explicit(&pool->head, memory_order_relaxed);
}

void cpu_pool_wait(struct cpu_pool *pool)
{
	uint32_t head = atomic_load(&pool->head);
	int64_t spin = spin_budget(pool->spin_ns < CPU_WAIT_SPIN_NS
					   ? pool->spin_ns
					   : CPU_WAIT_SPIN_NS, false);

	for (;;) {
		uint32_t done = atomic_load(&pool->done);

		if ((int32_t)(head - done) <= 0)
			return;
		mark_drain(pool, head, done);
		wait_change(&pool->done, done, &pool->drain_sleepers, spin,
			    false);
	}
}

int cpu_pool_reserve(struct cpu_pool *pool, size_t size)
{
	void *p;

	if (size <= pool->wsize)
		return LOOM_OK;
	size = (size + 4095) & ~(size_t)4095;
	p = aligned_alloc(64, size);
	if (!p)
		return loom_error_set(LOOM_E_NOMEM,
				      "cpu: cannot allocate %zu bytes of "
				      "work memory", size);
	free(pool->wdata);
	pool->wdata = p;
	pool->wsize = size;
	return LOOM_OK;
}
