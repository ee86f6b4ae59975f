/* SPDX-License-Identifier: MIT */
/* cpu-allreduce.c - the "allreduce" entry point for CPU partitions: every
 * thread of every partition's pool (for small tensors, each pool's first
 * thread) sums its own share of the elements over all the tensors and
 * writes the sum back into each of them.  No thread gathers the whole;
 * the pools meet at a barrier before and after.  When every pool is idle
 * and the tensors are small, the calling thread sums them itself: waking
 * the pools would cost more than the sum.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu-private.h"

/* Elements per share are a multiple of this (one cache line of F32). */
#define AR_ALIGN 16
/* Elements summed per step, kept in a small stack block. */
#define AR_BLOCK 256
/* Up to this many bytes only each pool's thread 0 takes part: fewer
 * threads meet at the barriers, and the shares are small anyway. */
#define AR_LEADERS_MAX (64u << 10)
/* Up to this many bytes the caller sums idle pools' tensors itself. */
#define AR_INLINE_MAX (256u << 10)

struct cpu_allreduce {
	struct cpu_bar bar;   /* every thread of every pool */
	_Atomic int refs;     /* threads still inside */
	int n;                /* tensors */
	int total;            /* threads over all pools */
	int64_t ne;           /* elements per tensor */
	int *base;            /* first global thread index of each pool */
	float **ptr;
};

/* Sums ptr[0..n)[lo, hi) and writes the sum into each. */
static void reduce_range(float *const *ptr, int n, int64_t lo, int64_t hi)
{
	int64_t j, k;
	int i;

	if (n == 2) {
		float *restrict a = ptr[0], *restrict b = ptr[1];

		for (j = lo; j < hi; j++) {
			float s = a[j] + b[j];

			a[j] = s;
			b[j] = s;
		}
		return;
	}
	for (j = lo; j < hi; j += AR_BLOCK) {
		float acc[AR_BLOCK];
		int64_t m = hi - j < AR_BLOCK ? hi - j : AR_BLOCK;

		for (k = 0; k < m; k++)
			acc[k] = ptr[0][j + k];
		for (i = 1; i < n; i++) {
			const float *p = ptr[i] + j;

			for (k = 0; k < m; k++)
				acc[k] += p[k];
		}
		for (i = 0; i < n; i++)
			memcpy(ptr[i] + j, acc, m * sizeof(float));
	}
}

void cpu_allreduce_run(struct cpu_allreduce *ar, int part, int ith)
{
	int g = ar->base[part] + ith;
	int64_t per = ((ar->ne + ar->total - 1) / ar->total + AR_ALIGN - 1) &
		      ~(int64_t)(AR_ALIGN - 1);
	int64_t lo = per * g;
	int64_t hi = lo + per < ar->ne ? lo + per : ar->ne;

	/* Every pool has finished the work queued before this. */
	cpu_bar_wait(&ar->bar);
	if (lo < hi)
		reduce_range(ar->ptr, ar->n, lo, hi);
	/* Nobody goes on to read a tensor others are still writing. */
	cpu_bar_wait(&ar->bar);
	if (atomic_fetch_sub(&ar->refs, 1) == 1)
		free(ar);
}

static bool overlaps(const struct loom_tensor *a, const struct loom_tensor *b)
{
	const char *pa = a->data, *pb = b->data;
	size_t na = loom_tensor_n_bytes(a), nb = loom_tensor_n_bytes(b);

	return pa < pb + nb && pb < pa + na;
}

/* The reasons to decline, or NULL when the call is ours to serve. */
static const char *check(loom_backend_t *const *backends,
			 struct loom_tensor *const *tensors, size_t n,
			 const struct loom_allreduce_opts *opts,
			 struct cpu_backend **cbs)
{
	size_t i, j;

	if (opts && opts->size >= sizeof(*opts) &&
	    opts->reduce_type != LOOM_TYPE_F32 &&
	    opts->reduce_type != LOOM_TYPE_BF16)
		return "reduce type is neither F32 nor BF16";
	for (i = 0; i < n; i++) {
		const struct loom_tensor *t = tensors[i];

		cbs[i] = cpu_backend_of(backends[i]);
		if (!cbs[i])
			return "a backend of another plugin";
		if (cpu_pool_is_worker(cbs[i]->pool))
			return "called from inside a pool";
		if (!t || !t->data || t->type != LOOM_TYPE_F32)
			return "a tensor that is not placed F32";
		if (!loom_tensor_is_contiguous(t) ||
		    !loom_tensor_same_shape(t, tensors[0]))
			return "tensors of different shapes or layouts";
		if (t->buffer &&
		    !loom_buffer_type_is_host(loom_buffer_get_type(t->buffer)))
			return "a tensor outside host memory";
		for (j = 0; j < i; j++) {
			if (cbs[j] == cbs[i])
				return "the same backend twice";
			if (overlaps(tensors[j], t))
				return "the same memory twice";
		}
	}
	return NULL;
}

/* Sums the tensors on the calling thread when no pool has work queued,
 * holding every pool's lock so that nothing is posted meanwhile.  False
 * when a pool is busy: the sum must then queue behind its work. */
static bool reduce_inline(struct cpu_backend *const *cbs,
			  struct loom_tensor *const *tensors, size_t n)
{
	float *stack_ptr[8], **ptr = stack_ptr;
	struct cpu_reg *cr = cbs[0]->cd->cr;
	bool idle = true;
	size_t i;

	if (n > 8)
		return false;
	pthread_mutex_lock(&cr->post_lock);
	for (i = 0; i < n; i++) {
		pthread_mutex_lock(&cbs[i]->pool->lock);
		idle = idle && cpu_pool_idle_locked(cbs[i]->pool);
		ptr[i] = tensors[i]->data;
	}
	if (idle)
		reduce_range(ptr, (int)n, 0, loom_tensor_n_elements(tensors[0]));
	while (i--)
		pthread_mutex_unlock(&cbs[i]->pool->lock);
	pthread_mutex_unlock(&cr->post_lock);
	return idle;
}

/* The entry point.  A BF16 reduce type asks to halve the bytes a
 * transport moves; partitions share memory and move none, so the sum is
 * always taken in F32.  The work is queued on every partition's pool
 * behind what is already there and the call returns at once, unless it
 * was small enough to finish inline. */
int cpu_allreduce(loom_backend_t *const *backends,
		  struct loom_tensor *const *tensors, size_t n,
		  const struct loom_allreduce_opts *opts)
{
	struct cpu_backend *stack_cbs[8], **cbs = stack_cbs;
	struct cpu_allreduce *ar;
	struct cpu_reg *cr;
	const char *why;
	size_t i, size;
	int total = 0, err = LOOM_OK;
	bool leader_only;

	if (!backends || !tensors || n == 0 || n > 4096)
		return loom_error_set(LOOM_E_INVAL,
				      "cpu: allreduce of %zu tensors", n);
	if (n > 8) {
		cbs = calloc(n, sizeof(*cbs));
		if (!cbs)
			return loom_error_set(LOOM_E_NOMEM,
					      "cpu: out of memory");
	}
	why = check(backends, tensors, n, opts, cbs);
	if (why) {
		err = loom_error_set(LOOM_E_DECLINED, "cpu: allreduce: %s",
				     why);
		goto out;
	}
	if (n == 1 || loom_tensor_n_elements(tensors[0]) == 0)
		goto out;
	if (loom_tensor_n_bytes(tensors[0]) <= AR_INLINE_MAX &&
	    reduce_inline(cbs, tensors, n))
		goto out;

	/* One block: the header, then the per-pool bases and pointers. */
	size = sizeof(*ar) + n * sizeof(int) + n * sizeof(float *);
	ar = calloc(1, size);
	if (!ar) {
		err = loom_error_set(LOOM_E_NOMEM, "cpu: out of memory");
		goto out;
	}
	ar->ptr = (float **)(ar + 1);
	ar->base = (int *)(ar->ptr + n);
	ar->n = (int)n;
	ar->ne = loom_tensor_n_elements(tensors[0]);
	leader_only = ar->ne * sizeof(float) <= AR_LEADERS_MAX;
	for (i = 0; i < n; i++) {
		ar->ptr[i] = tensors[i]->data;
		ar->base[i] = total;
		total += leader_only ? 1 : cbs[i]->pool->n_threads;
	}
	ar->total = total;
	atomic_init(&ar->refs, total);
	cpu_bar_init(&ar->bar, total);

	/* Jobs that span pools are posted under one lock, so every pool
	 * sees them in the same order. */
	cr = cbs[0]->cd->cr;
	pthread_mutex_lock(&cr->post_lock);
	for (i = 0; i < n; i++) {
		struct cpu_pool *pool = cbs[i]->pool;
		struct cpu_job job = {
			.kind = CPU_JOB_ALLREDUCE,
			.ar = ar,
			.part = (int)i,
			.leader_only = leader_only,
		};

		pthread_mutex_lock(&pool->lock);
		cpu_pool_post_locked(pool, &job);
		pthread_mutex_unlock(&pool->lock);
	}
	pthread_mutex_unlock(&cr->post_lock);
out:
	if (cbs != stack_cbs)
		free(cbs);
	return err;
}
