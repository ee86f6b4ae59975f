/* SPDX-License-Identifier: MIT */
/* cpu-kernels.h - the contract between the CPU plugin's scheduler and its
 * op kernels.  Every kernel computes the part of dst that belongs to
 * thread ith of nth; the scheduler runs it on all threads of a pool.
 */
#ifndef LOOM_CPU_KERNELS_H
#define LOOM_CPU_KERNELS_H

#include "loom/loom-plugin.h"

struct cpu_bar;

struct cpu_task {
	int ith;             /* this thread, 0 <= ith < nth */
	int nth;             /* threads working on the node */
	void *wdata;         /* scratch shared by the node's threads */
	size_t wsize;        /* its size, as cpu_op_work_size() asked */
	struct cpu_bar *bar; /* where they meet (nth > 1) */
};

/* Waits until every thread of the node has reached this point. */
void cpu_barrier(const struct cpu_task *task);

/* Scratch bytes a node needs (for converted or packed operands). */
size_t cpu_op_work_size(const struct loom_tensor *node, int nth);

/* Matrix kernels (ops-matmul*.c). */
void cpu_op_mul_mat(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_mul_mat_id(const struct cpu_task *task, struct loom_tensor *dst);
size_t cpu_mul_mat_work_size(const struct loom_tensor *dst, int nth);

#endif
