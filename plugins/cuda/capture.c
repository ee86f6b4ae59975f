/* SPDX-License-Identifier: MIT */
/* capture.c - CUDA graphs for the CUDA plugin's backends.  A graph that
 * is computed again with the same kernels, shapes, parameters and
 * addresses is captured (on its second run: the first one runs node by
 * node and grows the scratch it needs) and from then on replayed with a
 * single launch.  A backend remembers a few graphs; a new one takes the
 * place of the one used longest ago.  When a remembered graph has the
 * same kernels with other shapes or addresses (a KV window grown by a
 * step), the new one is captured at once into an update of that one's
 * executable graph, moved to its slot; else it is captured on its second
 * run into an update of its slot's, where the topology allows
 * (graph-sig.c chooses).  Graphs with a node
 * that waits for the device on the host are never captured; a capture
 * that fails falls back to running node by node, and after a few
 * failures a backend stops trying.  The kernels are in ops-*.cu, the
 * node-by-node path in compute.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda-plugin.h"
#include "graph-sig.h"

/* Not with HIP (hipBLAS under capture is untried here), nor before CUDA
 * 12 (whose graph calls take other arguments). */
#if defined(LOOM_HIP) || CUDART_VERSION < 12000

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
/* Graphs remembered per backend: a meta device runs several pieces on
 * each member in turn, each its own graph. */
#define GRAPH_SLOTS 8

struct slot {
	struct cuda_sig sig;   /* n == 0: unused */
	bool capturable;       /* every node of it can be captured */
	int runs;              /* computes of it so far */
	uint64_t stamp;        /* last use, for replacing the oldest */
	cudaGraphExec_t exec;  /* NULL: none */
	bool exec_current;     /* exec was captured from sig */
	uint64_t exec_gen;     /* the scratch generation exec uses */
};

struct cuda_graph_cache {
	struct slot slots[GRAPH_SLOTS];
	struct cuda_sig cur; /* the graph being computed */
	uint64_t clock;
	int fails;
};

int cuda_graphs_new(struct cuda_backend *be)
{
	be->graphs = calloc(1, sizeof(*be->graphs));
	if (!be->graphs)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	return LOOM_OK;
}

static void destroy_exec(struct slot *s)
{
	if (s->exec && cudaGraphExecDestroy(s->exec) != cudaSuccess)
		(void)cudaGetLastError();
	s->exec = NULL;
	s->exec_current = false;
}

void cuda_graphs_free(struct cuda_backend *be)
{
	struct cuda_graph_cache *gc = be->graphs;

	if (!gc)
		return;
	for (int i = 0; i < GRAPH_SLOTS; i++) {
		destroy_exec(&gc->slots[i]);
		cuda_sig_free(&gc->slots[i].sig);
	}
	cuda_sig_free(&gc->cur);
	free(gc);
	be->graphs = NULL;
}

/* The slot for gc->cur's graph: its own, or the one it takes the place
 * of, with the executable graph of a graph of the same kernels moved
 * there to be updated by the capture (graph-sig.h); *kin says so. */
static struct slot *slot_for(struct cuda_graph_cache *gc, bool capturable,
			     bool *kin)
{
	struct cuda_slot_view views[GRAPH_SLOTS];
	struct cuda_sig tmp;
	struct slot *s;
	int i, donor;

	for (i = 0; i < GRAPH_SLOTS; i++) {
		views[i].sig = &gc->slots[i].sig;
		views[i].stamp = gc->slots[i].stamp;
		views[i].has_exec = gc->slots[i].exec != NULL;
	}
	i = cuda_sig_pick(views, GRAPH_SLOTS, &gc->cur, &donor);
	s = &gc->slots[i];
	*kin = donor >= 0;
	if (cuda_sig_equal(&s->sig, &gc->cur))
		return s;
	if (donor >= 0 && donor != i) {
		destroy_exec(s);
		s->exec = gc->slots[donor].exec;
		gc->slots[donor].exec = NULL;
		gc->slots[donor].exec_current = false;
	}
	tmp = s->sig;
	s->sig = gc->cur;
	gc->cur = tmp;
	s->capturable = capturable;
	s->runs = 0;
	s->exec_current = false;
	return s;
}

/* A capture that did not work: the graph runs node by node. */
static int give_up(struct cuda_backend *be, struct cuda_graph_cache *gc,
		   struct slot *s, const char *why)
{
	(void)cudaGetLastError();
	s->exec_current = false;
	if (++gc->fails >= GRAPH_MAX_FAILS)
		loom_log(LOOM_LOG_INFO, "%s: graph not captured (%s); CUDA "
			 "graphs off for this backend", be->name, why);
	else
		loom_log(LOOM_LOG_INFO, "%s: graph not captured: %s",
			 be->name, why);
	return LOOM_E_DECLINED;
}

static int launch(struct cuda_backend *be, struct slot *s)
{
	return cuda_error(cudaGraphLaunch(s->exec, be->stream),
			  "graph launch");
}

/* Captures g's kernels into s's executable graph (made, or updated in
 * place) and launches it. */
static int capture(struct cuda_backend *be, struct cuda_graph_cache *gc,
		   struct slot *s, loom_graph_t *g)
{
	const uint64_t gen = be->scratch_gen;
	cudaGraph_t graph = NULL;
	cudaError_t err, end;
	int status;

	err = cudaStreamBeginCapture(be->stream,
				     cudaStreamCaptureModeThreadLocal);
	if (err != cudaSuccess)
		return give_up(be, gc, s, cudaGetErrorString(err));
	be->capturing = true;
	be->capture_broken = false;
	be->capture_grow = false;
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
		if (be->capture_grow && end == cudaSuccess) {
			/* Scratch must grow first: not a failure; the
			 * node-by-node run grows it, the next run captures. */
			(void)cudaGetLastError();
			s->exec_current = false;
			return LOOM_E_DECLINED;
		}
		return give_up(be, gc, s, why);
	}
	if (s->exec) {
		cudaGraphExecUpdateResultInfo info;

		err = cudaGraphExecUpdate(s->exec, graph, &info);
		if (err == cudaSuccess) {
			cuda_note_path(be, CUDA_PATH_GRAPH_UPDATE);
		} else {
			(void)cudaGetLastError();
			destroy_exec(s);
		}
	}
	if (!s->exec) {
		err = cudaGraphInstantiate(&s->exec, graph, 0);
		if (err != cudaSuccess) {
			s->exec = NULL;
			if (cudaGraphDestroy(graph) != cudaSuccess)
				(void)cudaGetLastError();
			return give_up(be, gc, s, cudaGetErrorString(err));
		}
		cuda_note_path(be, CUDA_PATH_GRAPH_CAPTURE);
	}
	if (cudaGraphDestroy(graph) != cudaSuccess)
		(void)cudaGetLastError();
	s->exec_current = true;
	s->exec_gen = be->scratch_gen;
	return launch(be, s);
}

int cuda_graphs_run(struct cuda_backend *be, loom_graph_t *g)
{
	struct cuda_graph_cache *gc = be->graphs;
	struct slot *s;
	bool capturable, kin;
	int status;

	if (gc->fails >= GRAPH_MAX_FAILS)
		return LOOM_E_DECLINED;
	status = cuda_sig_build(&gc->cur, g, cuda_node_capturable,
				&capturable);
	if (status)
		return status;
	if (!gc->cur.n || !capturable)
		return LOOM_E_DECLINED;
	s = slot_for(gc, capturable, &kin);
	s->stamp = ++gc->clock;
	if (s->exec && s->exec_current) {
		/* Scratch moved since the capture (another graph grew it):
		 * capture again; the sizes this graph needs are there. */
		if (s->exec_gen != be->scratch_gen)
			return capture(be, gc, s, g);
		cuda_note_path(be, CUDA_PATH_GRAPH_REPLAY);
		return launch(be, s);
	}
	/* The first run goes node by node: it grows the scratch it needs,
	 * which a capture cannot.  A graph that took the slot of the same
	 * kernels (a KV window grown by a step) is captured at once, into
	 * an update of that slot's executable graph; if it needs more
	 * scratch, it runs node by node this once. */
	if (++s->runs < 2 && !kin)
		return LOOM_E_DECLINED;
	return capture(be, gc, s, g);
}

#endif /* LOOM_HIP || CUDART_VERSION < 12000 */
