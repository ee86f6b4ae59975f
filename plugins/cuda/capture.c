/* SPDX-License-Identifier: MIT */
/* capture.c - CUDA graphs for the CUDA plugin's backends.  A graph that
 * is computed again with the same kernels, shapes, parameters and
 * addresses is captured (on its second run: the first one runs node by
 * node and grows the scratch it needs) and from then on replayed with a
 * single launch.  A changed graph captured again updates the executable
 * graph in place when its topology allows.  Graphs with a node that waits
 * for the device on the host are never captured; a capture that fails
 * falls back to running node by node, and after a few failures a backend
 * stops trying.  The kernels are in ops-*.cu, the node-by-node path in
 * compute.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda-plugin.h"

#ifdef LOOM_HIP

int cuda_graphs_new(struct cuda_backend *be)
{
	return loom_error_set(LOOM_E_UNSUPPORTED, "%s: no graph capture",
			      be->name);
}

void cuda_graphs_free(struct cuda_backend *be)
{
}

int cuda_graphs_run(struct cuda_backend *be, loom_graph_t *g)
{
	return LOOM_E_DECLINED;
}

#else

/* Failed captures after which a backend runs everything node by node. */
#define GRAPH_MAX_FAILS 3

/* What a kernel sees of one tensor. */
struct operand_sig {
	const void *data;
	int64_t ne[LOOM_MAX_DIMS];
	size_t nb[LOOM_MAX_DIMS];
	int32_t type;
};

/* What the kernels of one node see: compared byte for byte, so built in
 * zeroed memory (padding included). */
struct node_sig {
	int32_t op;
	int32_t op_params[LOOM_MAX_OP_PARAMS];
	struct operand_sig t;
	struct operand_sig src[LOOM_MAX_SRC];
};

struct cuda_graph_cache {
	struct node_sig *sig; /* the kernel nodes of the last graph */
	size_t n, cap;
	bool valid;           /* sig holds a graph */
	bool capturable;      /* every node of it can be captured */
	int runs;             /* computes of it in a row */
	cudaGraphExec_t exec; /* NULL: none */
	bool exec_current;    /* exec was captured from sig */
	uint64_t exec_gen;    /* the scratch generation exec uses */
	int fails;
};

int cuda_graphs_new(struct cuda_backend *be)
{
	be->graphs = calloc(1, sizeof(*be->graphs));
	if (!be->graphs)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	return LOOM_OK;
}

void cuda_graphs_free(struct cuda_backend *be)
{
	struct cuda_graph_cache *gc = be->graphs;

	if (!gc)
		return;
	if (gc->exec && cudaGraphExecDestroy(gc->exec) != cudaSuccess)
		(void)cudaGetLastError();
	free(gc->sig);
	free(gc);
	be->graphs = NULL;
}

static bool has_kernel(const struct loom_tensor *t)
{
	return t->op != LOOM_OP_NONE && !loom_op_is_view(t->op) &&
	       loom_tensor_n_elements(t) > 0;
}

static void operand_of(struct operand_sig *o, const struct loom_tensor *t)
{
	o->data = t->data;
	o->type = (int32_t)t->type;
	memcpy(o->ne, t->ne, sizeof(o->ne));
	memcpy(o->nb, t->nb, sizeof(o->nb));
}

static void sig_of(struct node_sig *s, const struct loom_tensor *t)
{
	memset(s, 0, sizeof(*s));
	s->op = (int32_t)t->op;
	memcpy(s->op_params, t->op_params, sizeof(s->op_params));
	operand_of(&s->t, t);
	for (int i = 0; i < LOOM_MAX_SRC; i++)
		if (t->src[i])
			operand_of(&s->src[i], t->src[i]);
}

/* Stores g's signature in gc; *same says whether it was the one stored. */
static int sig_update(struct cuda_graph_cache *gc, loom_graph_t *g,
		      bool *same)
{
	size_t n = loom_graph_n_nodes(g), k = 0;
	bool eq = gc->valid, capturable = true;

	for (size_t i = 0; i < n; i++) {
		const struct loom_tensor *t = loom_graph_node(g, i);
		struct node_sig s;

		if (!has_kernel(t))
			continue;
		if (k == gc->cap) {
			size_t cap = gc->cap ? 2 * gc->cap : 256;
			struct node_sig *p = realloc(gc->sig, cap * sizeof(*p));

			if (!p) {
				gc->valid = false;
				return loom_error_set(LOOM_E_NOMEM,
						      "out of memory");
			}
			gc->sig = p;
			gc->cap = cap;
		}
		sig_of(&s, t);
		if (eq && (k >= gc->n || memcmp(&gc->sig[k], &s, sizeof(s))))
			eq = false;
		if (!eq)
			gc->sig[k] = s;
		capturable = capturable && cuda_node_capturable(t);
		k++;
	}
	*same = eq && k == gc->n;
	gc->n = k;
	gc->valid = true;
	gc->capturable = capturable;
	return LOOM_OK;
}

/* A capture that did not work: the graph runs node by node. */
static int give_up(struct cuda_backend *be, struct cuda_graph_cache *gc,
		   const char *why)
{
	(void)cudaGetLastError();
	gc->exec_current = false;
	if (++gc->fails >= GRAPH_MAX_FAILS)
		loom_log(LOOM_LOG_INFO, "%s: graph not captured (%s); CUDA "
			 "graphs off for this backend", be->name, why);
	else
		loom_log(LOOM_LOG_INFO, "%s: graph not captured: %s",
			 be->name, why);
	return LOOM_E_DECLINED;
}

static int launch(struct cuda_backend *be, struct cuda_graph_cache *gc)
{
	cudaError_t err = cudaGraphLaunch(gc->exec, be->stream);

	return cuda_error(err, "graph launch");
}

/* Captures g's kernels, makes or updates gc's executable graph, and
 * launches it. */
static int capture(struct cuda_backend *be, struct cuda_graph_cache *gc,
		   loom_graph_t *g)
{
	const uint64_t gen = be->scratch_gen;
	cudaGraph_t graph = NULL;
	cudaError_t err, end;
	int status;

	err = cudaStreamBeginCapture(be->stream,
				     cudaStreamCaptureModeThreadLocal);
	if (err != cudaSuccess)
		return give_up(be, gc, cudaGetErrorString(err));
	be->capturing = true;
	be->capture_broken = false;
	status = cuda_graph_enqueue(be, g);
	be->capturing = false;
	end = cudaStreamEndCapture(be->stream, &graph);
	if (status || be->capture_broken || end != cudaSuccess || !graph ||
	    gen != be->scratch_gen) {
		const char *why = end != cudaSuccess ? cudaGetErrorString(end) :
				  status ? loom_error_message() :
				  "a kernel path cannot be captured";

		if (graph && cudaGraphDestroy(graph) != cudaSuccess)
			(void)cudaGetLastError();
		return give_up(be, gc, why);
	}
	if (gc->exec) {
		cudaGraphExecUpdateResultInfo info;

		err = cudaGraphExecUpdate(gc->exec, graph, &info);
		if (err == cudaSuccess) {
			cuda_note_path(be, CUDA_PATH_GRAPH_UPDATE);
		} else {
			(void)cudaGetLastError();
			if (cudaGraphExecDestroy(gc->exec) != cudaSuccess)
				(void)cudaGetLastError();
			gc->exec = NULL;
		}
	}
	if (!gc->exec) {
		err = cudaGraphInstantiate(&gc->exec, graph, 0);
		if (err != cudaSuccess) {
			gc->exec = NULL;
			if (cudaGraphDestroy(graph) != cudaSuccess)
				(void)cudaGetLastError();
			return give_up(be, gc, cudaGetErrorString(err));
		}
		cuda_note_path(be, CUDA_PATH_GRAPH_CAPTURE);
	}
	if (cudaGraphDestroy(graph) != cudaSuccess)
		(void)cudaGetLastError();
	gc->exec_current = true;
	gc->exec_gen = be->scratch_gen;
	return launch(be, gc);
}

int cuda_graphs_run(struct cuda_backend *be, loom_graph_t *g)
{
	struct cuda_graph_cache *gc = be->graphs;
	bool same;
	int status;

	if (gc->fails >= GRAPH_MAX_FAILS)
		return LOOM_E_DECLINED;
	status = sig_update(gc, g, &same);
	if (status)
		return status;
	if (!same) {
		gc->runs = 0;
		gc->exec_current = false;
	}
	if (!gc->capturable || gc->n == 0)
		return LOOM_E_DECLINED;
	if (gc->exec && gc->exec_current) {
		/* Scratch moved since the capture (another graph grew it):
		 * capture again; the sizes this graph needs are there. */
		if (gc->exec_gen != be->scratch_gen)
			return capture(be, gc, g);
		cuda_note_path(be, CUDA_PATH_GRAPH_REPLAY);
		return launch(be, gc);
	}
	if (++gc->runs < 2)
		return LOOM_E_DECLINED;
	return capture(be, gc, g);
}

#endif /* LOOM_HIP */
