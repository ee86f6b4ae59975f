/* SPDX-License-Identifier: MIT */
/* capture.c - CUDA graphs for the CUDA plugin's backends.  A graph that
 * is computed again with the same kernels, shapes, parameters and
 * addresses is captured (on its second run: the first one runs node by
 * node and grows the scratch it needs) and from then on replayed with a
 * single launch.  A backend remembers a few graphs; a new one takes the
 * place of the one used longest ago and, when captured, updates that
 * one's executable graph in place where the topology allows.  Graphs with a node that waits
 * for the device on the host are never captured; a capture that fails
 * falls back to running node by node, and after a few failures a backend
 * stops trying.  The kernels are in ops-*.cu, the node-by-node path in
 * compute.c.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda-plugin.h"

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

/* A list of the kernel nodes of a graph. */
struct sig {
	struct node_sig *v;
	size_t n, cap;
};

struct slot {
	struct sig sig;        /* n == 0: unused */
	bool capturable;       /* every node of it can be captured */
	int runs;              /* computes of it so far */
	uint64_t stamp;        /* last use, for replacing the oldest */
	cudaGraphExec_t exec;  /* NULL: none */
	bool exec_current;     /* exec was captured from sig */
	uint64_t exec_gen;     /* the scratch generation exec uses */
};

struct cuda_graph_cache {
	struct slot slots[GRAPH_SLOTS];
	struct sig cur; /* the graph being computed */
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
		free(gc->slots[i].sig.v);
	}
	free(gc->cur.v);
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

static void node_sig_of(struct node_sig *s, const struct loom_tensor *t)
{
	memset(s, 0, sizeof(*s));
	s->op = (int32_t)t->op;
	memcpy(s->op_params, t->op_params, sizeof(s->op_params));
	operand_of(&s->t, t);
	for (int i = 0; i < LOOM_MAX_SRC; i++)
		if (t->src[i])
			operand_of(&s->src[i], t->src[i]);
}

/* Builds g's list into gc->cur; *capturable says whether every node of
 * it can be captured. */
static int sig_build(struct cuda_graph_cache *gc, loom_graph_t *g,
		     bool *capturable)
{
	struct sig *c = &gc->cur;
	size_t n = loom_graph_n_nodes(g);

	c->n = 0;
	*capturable = true;
	for (size_t i = 0; i < n; i++) {
		const struct loom_tensor *t = loom_graph_node(g, i);

		if (!has_kernel(t))
			continue;
		if (c->n == c->cap) {
			size_t cap = c->cap ? 2 * c->cap : 256;
			struct node_sig *p = realloc(c->v, cap * sizeof(*p));

			if (!p)
				return loom_error_set(LOOM_E_NOMEM,
						      "out of memory");
			c->v = p;
			c->cap = cap;
		}
		node_sig_of(&c->v[c->n++], t);
		*capturable = *capturable && cuda_node_capturable(t);
	}
	return LOOM_OK;
}

/* The slot holding gc->cur's graph, or NULL. */
static struct slot *lookup(struct cuda_graph_cache *gc)
{
	for (int i = 0; i < GRAPH_SLOTS; i++) {
		struct slot *s = &gc->slots[i];

		if (s->sig.n == gc->cur.n && s->sig.n &&
		    !memcmp(s->sig.v, gc->cur.v,
			    gc->cur.n * sizeof(*gc->cur.v)))
			return s;
	}
	return NULL;
}

/* Gives gc->cur's graph the slot used longest ago; its executable graph
 * stays, to be updated by the next capture. */
static struct slot *replace(struct cuda_graph_cache *gc, bool capturable)
{
	struct slot *s = &gc->slots[0];
	struct sig tmp;

	for (int i = 1; i < GRAPH_SLOTS; i++)
		if (gc->slots[i].stamp < s->stamp)
			s = &gc->slots[i];
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
	bool capturable;
	int status;

	if (gc->fails >= GRAPH_MAX_FAILS)
		return LOOM_E_DECLINED;
	status = sig_build(gc, g, &capturable);
	if (status)
		return status;
	if (!gc->cur.n || !capturable)
		return LOOM_E_DECLINED;
	s = lookup(gc);
	if (!s)
		s = replace(gc, capturable);
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
	 * which a capture cannot. */
	if (++s->runs < 2)
		return LOOM_E_DECLINED;
	return capture(be, gc, s, g);
}

#endif /* LOOM_HIP || CUDART_VERSION < 12000 */
