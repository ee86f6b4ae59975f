/* SPDX-License-Identifier: MIT */
/* cpu-private.h - what the CPU plugin's own files share: partitions,
 * devices, the thread pool and the backend.  The op kernels see only
 * cpu-kernels.h and cpu-ops.h.
 */
#ifndef LOOM_CPU_PRIVATE_H
#define LOOM_CPU_PRIVATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu-kernels.h"

#ifndef CPU_VARIANT
#define CPU_VARIANT "baseline"
#endif

#define CPU_NAME_MAX 32

/* ---- partitions and devices (cpu-device.c) ---- */

/* One device: a set of cores and the host buffer type it hands out. */
struct cpu_reg;

struct cpu_device {
	struct cpu_reg *cr;
	int index;
	char name[CPU_NAME_MAX];
	char description[256];
	int n_cpus;
	int *cpus;             /* its CPUs, first siblings of each core first */
	int n_cores;           /* physical cores among them */
	int numa_node;         /* -1 when not made per NUMA node */
	int n_devices;         /* how many partitions share the memory */
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	loom_buffer_type_t *wbuft; /* the weight buffer type, or NULL */
	char wname[CPU_NAME_MAX + 16];
};

/* The plugin's state, the registry entry's context. */
struct cpu_reg {
	loom_reg_t *reg;
	int n_devices;
	int n_alloc;           /* entries of devices (some maybe unused) */
	struct cpu_device *devices;
	pthread_mutex_t post_lock; /* orders jobs that span several pools */
	int env_threads; /* LOOM_CPU_THREADS; 0: unset or not a count */
};

int cpu_devices_init(struct cpu_reg *cr);
void cpu_devices_free(struct cpu_reg *cr);

/* ---- host buffers (cpu-buffer.c) ---- */

#define CPU_BUFFER_ALIGN 64

int cpu_buft_create(struct cpu_reg *cr, struct cpu_device *cd);
/* Host memory of size bytes for a buffer of buft with iface, aligned (and
 * on huge pages, on cd's NUMA node) as its size asks; the buffer's
 * context is the memory, which cpu_host_free frees. */
int cpu_host_alloc(struct cpu_device *cd, loom_buffer_type_t *buft,
		   const struct loom_buffer_iface *iface, size_t size,
		   loom_buffer_t **out);
void cpu_host_free(loom_buffer_t *buf);
void *cpu_host_base(loom_buffer_t *buf);
/* Host buffers' methods, the weight buffers' too; the alignment of both
 * buffer types. */
extern const struct loom_buffer_iface cpu_buffer_iface;
size_t cpu_buft_get_alignment(loom_buffer_type_t *buft);
int cpu_set_tensor_2d(loom_buffer_t *buf, struct loom_tensor *t,
		      const void *data, size_t offset, size_t size,
		      size_t n_copies, size_t stride_tensor,
		      size_t stride_data);
int cpu_get_tensor_2d(loom_buffer_t *buf, const struct loom_tensor *t,
		      void *data, size_t offset, size_t size, size_t n_copies,
		      size_t stride_tensor, size_t stride_data);

/* ---- the weight buffer type (cpu-weights.c) ---- */

/* Whether this build and CPU have it (the int8 decode kernel for its
 * layout), and the entry point (NULL for a device without it). */
bool cpu_w_available(void);
loom_buffer_type_t *cpu_weight_buffer_type(loom_dev_t *dev);
int cpu_wbuft_create(struct cpu_reg *cr, struct cpu_device *cd);
/* Whether t's bytes lie in a matrix the weight buffer interleaves. */
bool cpu_w_tensor(const struct loom_tensor *t);
/* Bytes [offset, offset + size) of such a t, in the usual layout. */
int cpu_w_set(const struct loom_tensor *t, const void *data, size_t offset,
	      size_t size);
int cpu_w_get(const struct loom_tensor *t, void *data, size_t offset,
	      size_t size);
int cpu_w_memset(const struct loom_tensor *t, uint8_t value, size_t offset,
		 size_t size);
/* The interleaved matrix op would read other than as mul_mat's weights
 * (itself, a view of it, another source), or NULL. */
const struct loom_tensor *cpu_w_misread(const struct loom_tensor *op);

/* ---- the thread pool (cpu-pool.c) ---- */

/* A barrier that spins a while, then sleeps on a futex. */
struct cpu_bar {
	_Atomic int count;
	_Atomic uint32_t phase;
	_Atomic int sleepers;
	int n;
};

void cpu_bar_init(struct cpu_bar *b, int n);
void cpu_bar_wait(struct cpu_bar *b);

enum cpu_job_kind {
	CPU_JOB_GRAPH,
	CPU_JOB_ALLREDUCE,
	CPU_JOB_COPY,
	CPU_JOB_STOP,
};

struct cpu_allreduce;

/* n rows of size bytes, each stride apart on its side. */
struct cpu_copy {
	char *dst;
	const char *src;
	size_t size;
	size_t n;
	size_t dst_stride;
	size_t src_stride;
};

/* The nodes of a graph that a kernel runs for, in order, copied when the
 * graph is queued: workers walk this list and never the caller's graph,
 * which may be freed as soon as compute or synchronize has returned. */
/* A step of a plan: a node's kernel, or with attn the attention kernel
 * for node and the two nodes before it (cpu_op_attn). */
struct cpu_step {
	struct loom_tensor *node;
	bool attn;
};

struct cpu_plan {
	size_t n;
	bool fine; /* little work per node: a barrier every few microseconds */
	struct cpu_step steps[];
};

struct cpu_job {
	enum cpu_job_kind kind;
	struct cpu_plan *plan; /* a graph job's; thread 0 frees it */
	struct cpu_allreduce *ar;
	int part;              /* this pool's index in ar */
	bool leader_only;      /* ar is thread 0's; the others wait */
	int nth;               /* graph, copy: the threads that run it, the
				* first nth (set by cpu_pool_post_locked);
				* the others only pass it by */
	struct cpu_copy copy;
};

#define CPU_POOL_QUEUE 256

struct cpu_pool {
	int n_threads;
	int n_cpus;
	int *cpus;             /* pinning targets, borrowed from the device */
	pthread_t *threads;

	/* Jobs: slots [done, head) are queued or running; a slot is free
	 * again once every worker has taken its job (taken[i]: the jobs
	 * worker i has taken), as a job on fewer threads finishes without
	 * the others. */
	_Alignas(64) _Atomic uint32_t head;
	_Atomic int head_sleepers;
	_Alignas(64) _Atomic uint32_t done;
	_Atomic int done_sleepers;  /* waiting for any job to finish */
	_Atomic int drain_sleepers; /* waiting for their last one */
	_Atomic uint32_t drain_at;  /* the earliest such waiter's head */
	_Alignas(64) struct cpu_bar bar;
	_Alignas(64) struct cpu_bar half_bar; /* graphs on half the threads */
	struct cpu_job jobs[CPU_POOL_QUEUE];
	_Atomic uint32_t *taken;
	pthread_mutex_t lock;  /* serializes posters */

	void *wdata;           /* shared scratch for the nodes */
	size_t wsize;
	int64_t spin_ns;       /* how long idle threads spin before sleeping */
};

/* Starts n_threads workers pinned round-robin to cpus[0..n_cpus) (which
 * must outlive the pool).  Free with cpu_pool_free(). */
int cpu_pool_new(int n_threads, const int *cpus, int n_cpus,
		 struct cpu_pool **out);
/* Waits for the queue, stops and joins the workers, frees pool. */
void cpu_pool_free(struct cpu_pool *pool);
/* Queues a job (copied); waits while the queue is full.  The caller holds
 * pool->lock. */
void cpu_pool_post_locked(struct cpu_pool *pool, const struct cpu_job *job);
/* Waits until every job posted so far has completed. */
void cpu_pool_wait(struct cpu_pool *pool);
/* True when every job posted to pool has finished; hold pool->lock. */
bool cpu_pool_idle_locked(struct cpu_pool *pool);
/* True when the calling thread is one of pool's workers. */
bool cpu_pool_is_worker(const struct cpu_pool *pool);
/* Makes sure the scratch is at least size bytes; the pool must be idle. */
int cpu_pool_reserve(struct cpu_pool *pool, size_t size);
/* Does thread ith's share of a copy (the copy job's body). */
void cpu_copy_run(const struct cpu_copy *c, int ith, int nth);
/* Runs one plan on thread ith of nth, which meet at bar (the graph job's
 * body; bar may be NULL when nth is 1).  Once a thread has passed the
 * barrier after the plan's last node it reads nothing of the plan or of
 * the nodes, so the plan may be freed then. */
void cpu_graph_run(struct cpu_bar *bar, const struct cpu_plan *plan,
		   int ith, int nth, void *wdata, size_t wsize);

/* Tells the pools how many cores the process may use, so waits spin less
 * when threads outnumber them. */
void cpu_set_core_count(int n);
/* Nanoseconds of a monotonic clock. */
int64_t cpu_now_ns(void);
/* Pauses the core briefly inside a spin loop. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield" ::: "memory");
#else
	__asm__ __volatile__("" ::: "memory");
#endif
}

/* ---- backends (cpu-backend.c) ---- */

/* Graphs already checked, so a graph run again (a decode step, the meta
 * device's pieces) is queued without walking its nodes: a slot per graph,
 * found by its address.  A meta device hands each member two pieces per
 * layer, 61 a token for a 30-layer model. */
#define CPU_CHECKED_GRAPHS 256

struct cpu_checked {
	loom_graph_t *g;
	uint64_t version;      /* loom_graph_version: unique per change */
	int nth;
	size_t wsize;
};

struct cpu_backend {
	struct cpu_device *cd;
	loom_backend_t *be;
	char name[CPU_NAME_MAX];
	struct cpu_pool *pool;
	struct cpu_checked checked[CPU_CHECKED_GRAPHS];
};

int cpu_backend_init(struct cpu_device *cd, const char *params,
		     loom_backend_t **out);
int cpu_backend_set_n_threads(loom_backend_t *be, int n_threads);
int cpu_set_tensor_2d_async(loom_backend_t *be, struct loom_tensor *t,
			    const void *data, size_t offset, size_t size,
			    size_t n_copies, size_t stride_tensor,
			    size_t stride_data);
int cpu_get_tensor_2d_async(loom_backend_t *be, const struct loom_tensor *t,
			    void *data, size_t offset, size_t size,
			    size_t n_copies, size_t stride_tensor,
			    size_t stride_data);
/* The plugin's context of be, or NULL when be is not a CPU backend. */
struct cpu_backend *cpu_backend_of(loom_backend_t *be);
bool cpu_supports_op(const struct loom_tensor *op);
/* LOOM_CPU_THREADS, read once when the plugin loads, where loom-info
 * reports a bad value: the count, or 0 (logged) when it is not one. */
int cpu_env_threads(void);
/* Threads a device's pool starts with (LOOM_CPU_THREADS, else its cores). */
int cpu_default_threads(const struct cpu_device *cd);

/* ---- the allreduce entry point (cpu-allreduce.c) ---- */

int cpu_allreduce(loom_backend_t *const *backends,
		  struct loom_tensor *const *tensors, size_t n,
		  const struct loom_allreduce_opts *opts);
/* One pool's share of an allreduce job. */
void cpu_allreduce_run(struct cpu_allreduce *ar, int part, int ith);

/* ---- features (cpu-plugin.c) ---- */

const struct loom_feature *cpu_get_features(loom_reg_t *reg);

#endif
