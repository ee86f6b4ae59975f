/* SPDX-License-Identifier: MIT */
/* graph-sig.h - what a backend's CUDA graphs are told apart by: the list
 * of a graph's kernel nodes as the kernels see them, and which
 * remembered graph a new one takes the place of.  Host code only, no
 * CUDA: tests/test-cuda-graph-sig.c runs it without a GPU.  The graphs
 * themselves are capture.c's.
 */
#ifndef LOOM_CUDA_GRAPH_SIG_H
#define LOOM_CUDA_GRAPH_SIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <loom/loom-plugin.h>

#ifdef __cplusplus
extern "C" {
#endif

/* What a kernel sees of one tensor. */
struct cuda_operand_sig {
	const void *data;
	int64_t ne[LOOM_MAX_DIMS];
	size_t nb[LOOM_MAX_DIMS];
	int32_t type;
};

/* What the kernels of one node see: compared byte for byte, so built in
 * zeroed memory (padding included). */
struct cuda_node_sig {
	int32_t op;
	int32_t op_params[LOOM_MAX_OP_PARAMS];
	struct cuda_operand_sig t;
	struct cuda_operand_sig src[LOOM_MAX_SRC];
};

/* The kernel nodes of a graph, in order.  Zeroed is empty; free with
 * cuda_sig_free. */
struct cuda_sig {
	struct cuda_node_sig *v;
	size_t n, cap;
};

/* Builds g's list into s (its memory reused); *capturable says whether
 * capturable() holds for every kernel node.  Returns LOOM_E_NOMEM. */
int cuda_sig_build(struct cuda_sig *s, loom_graph_t *g,
		   bool (*capturable)(const struct loom_tensor *t),
		   bool *capturable_all);
void cuda_sig_free(struct cuda_sig *s);

/* The same graph: every node's kernels see the same operands. */
bool cuda_sig_equal(const struct cuda_sig *a, const struct cuda_sig *b);

/* The same kernels in the same order, launched alike: the same ops,
 * parameters and types and the same operands present, while addresses,
 * strides and the shapes of fewer than half of the nodes may differ, as
 * when a KV window grows (only attention's shapes change; another number
 * of tokens changes nearly every node's, and the kernels taken with it).
 * A graph captured from one updates in place an executable graph
 * captured from the other where the kernels the BLAS picks for the new
 * sizes stay the same. */
bool cuda_sig_same_kernels(const struct cuda_sig *a,
			   const struct cuda_sig *b);

/* A remembered graph, as cuda_sig_pick sees it. */
struct cuda_slot_view {
	const struct cuda_sig *sig; /* n == 0: unused */
	uint64_t stamp;             /* last use: larger is more recent */
	bool has_exec;              /* an executable graph to update */
};

/* Which of the n slots (n >= 1) cur takes: the one holding it (*donor
 * -1), else an unused one or the one used longest ago.  A new graph
 * also gets a donor (*donor >= 0): of the other slots whose executable
 * graph has the same kernels, the one used longest ago; the capture
 * updates that executable graph, moved to cur's slot, instead of making
 * one (a KV window grown by a step; pieces of the same kernels computed
 * in turn each find their own predecessor).  A graph whose executable
 * graph was taken makes its own on its next capture, so graphs computed
 * in turn do not take it from each other twice. */
int cuda_sig_pick(const struct cuda_slot_view *slots, int n,
		  const struct cuda_sig *cur, int *donor);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CUDA_GRAPH_SIG_H */
