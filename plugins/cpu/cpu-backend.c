/* SPDX-License-Identifier: MIT */
/* cpu-backend.c - the CPU backend: a stream whose work runs on its own
 * pool of threads.  graph_compute checks the graph, queues it and returns;
 * synchronize waits.  Also which ops the device supports, the work size
 * of each node and the dispatch from node to kernel.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-ops.h"
#include "cpu-private.h"

static bool is_float(enum loom_type t)
{
	return t == LOOM_TYPE_F32 || t == LOOM_TYPE_F16 ||
	       t == LOOM_TYPE_BF16;
}

static bool is_storage(enum loom_type t)
{
	return is_float(t) || loom_type_is_quantized(t);
}

static bool src_is(const struct loom_tensor *op, int i, enum loom_type t)
{
	return op->src[i] && op->src[i]->type == t;
}

static bool src_float(const struct loom_tensor *op, int i)
{
	return op->src[i] && is_float(op->src[i]->type);
}

/* ------------------------------------------------------------------------
 * What the kernels run: per op, whether they compute a node as loom.h
 * defines it (the types they read and write), the kernel, and the work
 * memory it needs beyond the scratch rows.
 */
static bool runs_binary(const struct loom_tensor *op)
{
	return op->type == LOOM_TYPE_F32 && src_float(op, 0) &&
	       src_float(op, 1) && loom_tensor_can_repeat(op->src[1], op->src[0]);
}

/* Unary and row ops: f32 out of a float source. */
static bool runs_rows(const struct loom_tensor *op)
{
	return op->type == LOOM_TYPE_F32 && src_float(op, 0);
}

static bool runs_soft_max(const struct loom_tensor *op)
{
	return runs_rows(op) && (!op->src[1] || src_float(op, 1));
}

static bool runs_rope(const struct loom_tensor *op)
{
	int mode = loom_tensor_op_param_i32(op, 1);
	int n_dims = loom_tensor_op_param_i32(op, 0);

	return runs_rows(op) && src_is(op, 1, LOOM_TYPE_I32) &&
	       (mode == LOOM_ROPE_NORMAL || mode == LOOM_ROPE_NEOX) &&
	       n_dims >= 0 && n_dims % 2 == 0 && n_dims <= op->src[0]->ne[0];
}

static bool runs_soft_max_sinks(const struct loom_tensor *op)
{
	return runs_soft_max(op) && src_is(op, 2, LOOM_TYPE_F32);
}

static bool runs_add_id(const struct loom_tensor *op)
{
	return op->type == LOOM_TYPE_F32 && src_float(op, 0) &&
	       src_float(op, 1) && src_is(op, 2, LOOM_TYPE_I32);
}

static bool runs_mul_mat(const struct loom_tensor *op)
{
	const struct loom_tensor *a = op->src[0];

	return op->type == LOOM_TYPE_F32 && a && is_storage(a->type) &&
	       src_float(op, 1);
}

static bool runs_mul_mat_id(const struct loom_tensor *op)
{
	return runs_mul_mat(op) && src_is(op, 2, LOOM_TYPE_I32);
}

static bool runs_get_rows(const struct loom_tensor *op)
{
	const struct loom_tensor *a = op->src[0];

	return a && src_is(op, 1, LOOM_TYPE_I32) &&
	       (is_storage(op->type) ||
		(op->type == LOOM_TYPE_I32 && a->type == LOOM_TYPE_I32)) &&
	       (is_storage(a->type) || a->type == LOOM_TYPE_I32);
}

static bool runs_set_rows(const struct loom_tensor *op)
{
	return is_storage(op->type) && src_float(op, 1) &&
	       src_is(op, 2, LOOM_TYPE_I32);
}

static bool runs_copy(const struct loom_tensor *op)
{
	const struct loom_tensor *a = op->src[0];

	if (!a)
		return false;
	return a->type == op->type ||
	       (is_storage(a->type) && is_storage(op->type));
}

static bool runs_concat(const struct loom_tensor *op)
{
	const struct loom_tensor *a = op->src[0], *b = op->src[1];
	int dim = loom_tensor_op_param_i32(op, 0);

	return a && b && a->type == op->type && b->type == op->type &&
	       dim >= 0 && dim < 4;
}

static bool runs_index(const struct loom_tensor *op)
{
	return op->type == LOOM_TYPE_I32 && src_float(op, 0);
}

static size_t mul_mat_work(const struct loom_tensor *node, int nth)
{
	/* Room for the attention kernel, should the plan fuse. */
	size_t w = cpu_mul_mat_work_size(node, nth);

	if (cpu_attn_shape_ok(node) && cpu_attn_work_size(node, nth) > w)
		w = cpu_attn_work_size(node, nth);
	return w;
}

struct cpu_op {
	void (*run)(const struct cpu_task *task, struct loom_tensor *node);
	bool (*runs)(const struct loom_tensor *node);
	/* NULL: CPU_SCRATCH_ROWS scratch rows per thread */
	size_t (*work_size)(const struct loom_tensor *node, int nth);
};

static const struct cpu_op cpu_ops[LOOM_OP_COUNT] = {
	[LOOM_OP_ADD] = { .run = cpu_op_binary, .runs = runs_binary },
	[LOOM_OP_SUB] = { .run = cpu_op_binary, .runs = runs_binary },
	[LOOM_OP_MUL] = { .run = cpu_op_binary, .runs = runs_binary },
	[LOOM_OP_DIV] = { .run = cpu_op_binary, .runs = runs_binary },
	[LOOM_OP_SCALE] = { .run = cpu_op_unary, .runs = runs_rows },
	[LOOM_OP_SILU] = { .run = cpu_op_unary, .runs = runs_rows },
	[LOOM_OP_GELU] = { .run = cpu_op_unary, .runs = runs_rows },
	[LOOM_OP_RMS_NORM] = { .run = cpu_op_norm, .runs = runs_rows },
	[LOOM_OP_NORM] = { .run = cpu_op_norm, .runs = runs_rows },
	[LOOM_OP_SOFT_MAX] = { .run = cpu_op_soft_max, .runs = runs_soft_max },
	[LOOM_OP_ROPE] = { .run = cpu_op_rope, .runs = runs_rope },
	[LOOM_OP_MUL_MAT] = { .run = cpu_op_mul_mat, .runs = runs_mul_mat,
			      .work_size = mul_mat_work },
	[LOOM_OP_MUL_MAT_ID] = { .run = cpu_op_mul_mat_id,
				 .runs = runs_mul_mat_id,
				 .work_size = cpu_mul_mat_work_size },
	[LOOM_OP_GET_ROWS] = { .run = cpu_op_get_rows, .runs = runs_get_rows },
	[LOOM_OP_SET_ROWS] = { .run = cpu_op_set_rows, .runs = runs_set_rows },
	[LOOM_OP_COPY] = { .run = cpu_op_copy, .runs = runs_copy },
	[LOOM_OP_CONT] = { .run = cpu_op_copy, .runs = runs_copy },
	[LOOM_OP_CONCAT] = { .run = cpu_op_concat, .runs = runs_concat },
	[LOOM_OP_SUM_ROWS] = { .run = cpu_op_sum_rows, .runs = runs_rows },
	[LOOM_OP_ARGMAX] = { .run = cpu_op_argmax, .runs = runs_index },
	[LOOM_OP_TOP_K] = { .run = cpu_op_top_k, .runs = runs_index },
	[LOOM_OP_SOFT_MAX_SINKS] = { .run = cpu_op_soft_max,
				     .runs = runs_soft_max_sinks },
	[LOOM_OP_ROPE_YARN] = { .run = cpu_op_rope, .runs = runs_rope },
	[LOOM_OP_SWIGLU_OAI] = { .run = cpu_op_swiglu_oai, .runs = runs_binary },
	[LOOM_OP_ADD_ID] = { .run = cpu_op_add_id, .runs = runs_add_id },
};

/* Leaves and views: no kernel runs. */
static bool no_kernel(enum loom_op op)
{
	return loom_op_flags(op) & LOOM_OPF_NO_KERNEL;
}

static bool runs_op(const struct loom_tensor *op)
{
	if (no_kernel(op->op))
		return true;
	return (unsigned)op->op < LOOM_OP_COUNT && cpu_ops[op->op].runs &&
	       cpu_ops[op->op].runs(op);
}

bool cpu_supports_op(const struct loom_tensor *op)
{
	return runs_op(op) && !cpu_w_misread(op);
}

/* True for nodes no kernel runs for. */
static bool is_noop(const struct loom_tensor *node)
{
	return no_kernel(node->op) || loom_tensor_n_elements(node) == 0;
}

size_t cpu_op_work_size(const struct loom_tensor *node, int nth)
{
	const struct cpu_op *k = &cpu_ops[node->op];

	if (k->work_size)
		return k->work_size(node, nth);
	return (size_t)nth * CPU_SCRATCH_ROWS * cpu_scratch_row_bytes(node);
}

/* Runs node's kernel; check_graph has made sure there is one. */
static void compute_node(const struct cpu_task *task, struct loom_tensor *n)
{
	cpu_ops[n->op].run(task, n);
}

void cpu_graph_run(struct cpu_bar *bar, const struct cpu_plan *plan,
		   int ith, int nth, void *wdata, size_t wsize)
{
	struct cpu_task task = {
		.ith = ith,
		.nth = nth,
		.wdata = wdata,
		.wsize = wsize,
		.bar = bar,
	};
	const struct cpu_step *steps = plan->steps;
	size_t i, n = plan->n;

	for (i = 0; i < n; i++) {
		if (steps[i].attn)
			cpu_op_attn(&task, steps[i].node);
		else
			compute_node(&task, steps[i].node);
		/* The next node may read anything this one wrote. */
		if (nth > 1)
			cpu_bar_wait(bar);
	}
	/* A job ends with every thread past a barrier (the pool reuses its
	 * slot then), even when no node ran. */
	if (nth > 1 && n == 0)
		cpu_bar_wait(bar);
}

/* Mean work per node, in multiply-adds or values written, under which a
 * graph counts as fine-grained: a decode step's. */
#define CPU_FINE_NODE_WORK 2000000

/* A rough measure of a node's work: multiply-adds of a product, else
 * the values it writes. */
static double node_work(const struct loom_tensor *node)
{
	const struct loom_tensor *a = node->src[0];
	double v = (double)loom_tensor_n_elements(node);

	if (node->op == LOOM_OP_MUL_MAT || node->op == LOOM_OP_MUL_MAT_ID)
		v *= (double)a->ne[0];
	return v;
}

/* Whether a and b each have one reader in g (a node that has it as a
 * source or views it), found in one pass over the nodes. */
static bool read_once(loom_graph_t *g, const struct loom_tensor *a,
		      const struct loom_tensor *b)
{
	size_t i, n = loom_graph_n_nodes(g);
	int na = 0, nb = 0, j;

	for (i = 0; i < n; i++) {
		const struct loom_tensor *node = loom_graph_node(g, i);

		na += node->view_src == a;
		nb += node->view_src == b;
		for (j = 0; j < LOOM_MAX_SRC; j++) {
			na += node->src[j] == a;
			nb += node->src[j] == b;
		}
	}
	return na == 1 && nb == 1;
}

/* Whether node i of g (out = mul_mat(v, sm)) and the two steps before it
 * in the plan (kq = mul_mat(k, q), sm = soft_max(kq, ...)) run as one
 * attention kernel: the shapes suit it, and kq and sm are read by nothing
 * else and are not outputs, so that leaving them unwritten loses nothing. */
static bool attn_fuses(loom_graph_t *g, size_t i, const struct cpu_plan *plan)
{
	const struct loom_tensor *out = loom_graph_node(g, i);
	const struct loom_tensor *sm, *kq;

	if (plan->n < 2 || !cpu_attn_shape_ok(out))
		return false;
	sm = out->src[1];
	kq = sm->src[0];
	if (plan->steps[plan->n - 1].node != sm ||
	    plan->steps[plan->n - 2].node != kq ||
	    plan->steps[plan->n - 2].attn ||
	    (sm->flags | kq->flags) & LOOM_TENSOR_OUTPUT)
		return false;
	return read_once(g, kq, sm);
}

/* The steps of g: the nodes a kernel runs for, attention fused where it
 * can be; NULL when out of memory.  The caller frees it (or the pool,
 * once the job has run). */
static struct cpu_plan *plan_new(loom_graph_t *g)
{
	size_t i, n = loom_graph_n_nodes(g);
	struct cpu_plan *plan;
	double work = 0;

	plan = malloc(sizeof(*plan) + n * sizeof(plan->steps[0]));
	if (!plan) {
		loom_error_set(LOOM_E_NOMEM,
			       "cpu: out of memory for a graph of %zu nodes",
			       n);
		return NULL;
	}
	plan->n = 0;
	for (i = 0; i < n; i++) {
		struct loom_tensor *node = loom_graph_node(g, i);

		if (is_noop(node))
			continue;
		work += node_work(node);
		if (node->op == LOOM_OP_MUL_MAT && attn_fuses(g, i, plan)) {
			plan->n -= 2;
			plan->steps[plan->n++] = (struct cpu_step){ node, true };
			loom_log(LOOM_LOG_DEBUG, "cpu: mul_mat, soft_max and "
				 "mul_mat into '%s' run as one attention "
				 "kernel", *node->name ? node->name :
				 "(unnamed)");
			continue;
		}
		plan->steps[plan->n++] = (struct cpu_step){ node, false };
	}
	plan->fine = work < (double)CPU_FINE_NODE_WORK * (double)plan->n;
	return plan;
}

/* Checks what the kernels rely on and returns the work size g needs. */
static int check_graph(loom_graph_t *g, int nth, size_t *wsize)
{
	int i, j, n = loom_graph_n_nodes(g);
	size_t need = 0;

	for (i = 0; i < n; i++) {
		const struct loom_tensor *node = loom_graph_node(g, i);
		size_t w;

		if (is_noop(node))
			continue;
		if (cpu_w_misread(node))
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "cpu: %s (%s) reads %s, which the "
					      "weight buffer stores interleaved: "
					      "only mul_mat reads it, whole, as "
					      "its weights",
					      loom_op_name(node->op),
					      node->name,
					      cpu_w_misread(node)->name);
		if (!cpu_supports_op(node))
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "cpu: %s (%s, %s) is not "
					      "supported",
					      loom_op_name(node->op),
					      node->name,
					      loom_type_name(node->type));
		if (!node->data)
			return loom_error_set(LOOM_E_STATE,
					      "cpu: node %s (%s) has no memory",
					      node->name,
					      loom_op_name(node->op));
		for (j = 0; j < LOOM_MAX_SRC; j++) {
			const struct loom_tensor *s = node->src[j];

			if (s && !s->data && loom_tensor_n_elements(s) > 0)
				return loom_error_set(
					LOOM_E_STATE,
					"cpu: source %d (%s) of %s has no "
					"memory", j, s->name, node->name);
		}
		w = cpu_op_work_size(node, nth);
		if (w > need)
			need = w;
	}
	*wsize = need;
	return LOOM_OK;
}

/* check_graph, remembered per graph version and thread count. */
static int check_graph_cached(struct cpu_backend *cb, loom_graph_t *g,
			      int nth, size_t *wsize)
{
	uint64_t version = loom_graph_version(g);
	uint64_t x = (uint64_t)(uintptr_t)g;
	struct cpu_checked *c;
	int err;

	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	c = &cb->checked[x % CPU_CHECKED_GRAPHS];
	if (c->g == g && c->version == version && c->nth == nth) {
		*wsize = c->wsize;
		return LOOM_OK;
	}
	err = check_graph(g, nth, wsize);
	if (err)
		return err;
	c->g = g;
	c->version = version;
	c->nth = nth;
	c->wsize = *wsize;
	return LOOM_OK;
}

static const char *be_get_name(loom_backend_t *be)
{
	struct cpu_backend *cb = loom_backend_context(be);

	return cb->name;
}

static void be_free(loom_backend_t *be)
{
	struct cpu_backend *cb = loom_backend_context(be);

	cpu_pool_free(cb->pool);
	free(cb);
}

static int be_synchronize(loom_backend_t *be)
{
	struct cpu_backend *cb = loom_backend_context(be);

	if (!cpu_pool_is_worker(cb->pool))
		cpu_pool_wait(cb->pool);
	return LOOM_OK;
}

/* Runs g on the calling thread alone: for calls made from inside the
 * pool itself, which cannot wait for their own queue. */
static int run_inline(struct cpu_backend *cb, loom_graph_t *g, size_t wsize)
{
	void *w = wsize ? aligned_alloc(64, (wsize + 63) & ~(size_t)63) : NULL;
	struct cpu_plan *plan;

	if (wsize && !w)
		return loom_error_set(LOOM_E_NOMEM,
				      "cpu: cannot allocate %zu bytes of work "
				      "memory", wsize);
	plan = plan_new(g);
	if (!plan) {
		free(w);
		return LOOM_E_NOMEM;
	}
	cpu_graph_run(NULL, plan, 0, 1, w, wsize);
	free(plan);
	free(w);
	return LOOM_OK;
}

static int be_graph_compute(loom_backend_t *be, loom_graph_t *g)
{
	struct cpu_backend *cb = loom_backend_context(be);
	struct cpu_pool *pool = cb->pool;
	struct cpu_job job = { .kind = CPU_JOB_GRAPH };
	size_t wsize;
	int err;

	if (cpu_pool_is_worker(pool)) {
		err = check_graph(g, 1, &wsize);
		return err ? err : run_inline(cb, g, wsize);
	}
	err = check_graph_cached(cb, g, pool->n_threads, &wsize);
	if (err)
		return err;
	job.plan = plan_new(g);
	if (!job.plan)
		return LOOM_E_NOMEM;
	pthread_mutex_lock(&pool->lock);
	if (wsize > pool->wsize) {
		/* Queued graphs use the old scratch: let them finish. */
		cpu_pool_wait(pool);
		err = cpu_pool_reserve(pool, wsize);
		if (err) {
			pthread_mutex_unlock(&pool->lock);
			free(job.plan);
			return err;
		}
	}
	cpu_pool_post_locked(pool, &job);
	pthread_mutex_unlock(&pool->lock);
	return LOOM_OK;
}

/* Queues a copy behind the backend's work; from inside the pool it is
 * done at once. */
static int post_copy(struct cpu_backend *cb, const struct cpu_copy *c)
{
	struct cpu_job job = { .kind = CPU_JOB_COPY, .copy = *c };

	if (cpu_pool_is_worker(cb->pool)) {
		cpu_copy_run(c, 0, 1);
		return LOOM_OK;
	}
	pthread_mutex_lock(&cb->pool->lock);
	cpu_pool_post_locked(cb->pool, &job);
	pthread_mutex_unlock(&cb->pool->lock);
	return LOOM_OK;
}

/* The weight buffer's interleaved matrices are copied at once, in order
 * behind the backend's work. */
static int w_copy(loom_backend_t *be, const struct loom_tensor *t,
		  void *data, size_t offset, size_t size, size_t n,
		  size_t stride_tensor, size_t stride_data, bool get)
{
	int err = be_synchronize(be);

	for (size_t i = 0; i < n && !err; i++) {
		char *d = (char *)data + i * stride_data;
		size_t o = offset + i * stride_tensor;

		err = get ? cpu_w_get(t, d, o, size) : cpu_w_set(t, d, o, size);
	}
	return err;
}

static int be_set_tensor_async(loom_backend_t *be, struct loom_tensor *t,
			       const void *data, size_t offset, size_t size)
{
	struct cpu_copy c = {
		.dst = (char *)t->data + offset,
		.src = data,
		.size = size,
		.n = 1,
	};

	if (cpu_w_tensor(t))
		return w_copy(be, t, (void *)data, offset, size, 1, 0, 0,
			      false);
	return post_copy(loom_backend_context(be), &c);
}

static int be_get_tensor_async(loom_backend_t *be,
			       const struct loom_tensor *t, void *data,
			       size_t offset, size_t size)
{
	struct cpu_copy c = {
		.dst = data,
		.src = (const char *)t->data + offset,
		.size = size,
		.n = 1,
	};

	if (cpu_w_tensor(t))
		return w_copy(be, t, data, offset, size, 1, 0, 0, true);
	return post_copy(loom_backend_context(be), &c);
}

int cpu_set_tensor_2d_async(loom_backend_t *be, struct loom_tensor *t,
			    const void *data, size_t offset, size_t size,
			    size_t n_copies, size_t stride_tensor,
			    size_t stride_data)
{
	struct cpu_copy c = {
		.dst = (char *)t->data + offset,
		.src = data,
		.size = size,
		.n = n_copies,
		.dst_stride = stride_tensor,
		.src_stride = stride_data,
	};

	if (cpu_w_tensor(t))
		return w_copy(be, t, (void *)data, offset, size, n_copies,
			      stride_tensor, stride_data, false);
	return post_copy(loom_backend_context(be), &c);
}

int cpu_get_tensor_2d_async(loom_backend_t *be, const struct loom_tensor *t,
			    void *data, size_t offset, size_t size,
			    size_t n_copies, size_t stride_tensor,
			    size_t stride_data)
{
	struct cpu_copy c = {
		.dst = data,
		.src = (const char *)t->data + offset,
		.size = size,
		.n = n_copies,
		.dst_stride = stride_data,
		.src_stride = stride_tensor,
	};

	if (cpu_w_tensor(t))
		return w_copy(be, t, data, offset, size, n_copies,
			      stride_tensor, stride_data, true);
	return post_copy(loom_backend_context(be), &c);
}

/* Copies within one backend's stream, from host memory; anything that
 * would need a second stream's order is the core's to do blocking. */
static int be_copy_tensor_async(loom_backend_t *be_src, loom_backend_t *be_dst,
			       const struct loom_tensor *src,
			       struct loom_tensor *dst)
{
	struct cpu_copy c = {
		.dst = dst->data,
		.src = src->data,
		.size = loom_tensor_n_bytes(src),
		.n = 1,
	};

	if (be_src != be_dst || !src->buffer || !src->data ||
	    !loom_buffer_type_is_host(loom_buffer_get_type(src->buffer)) ||
	    cpu_w_tensor(dst))
		return LOOM_E_DECLINED;
	return post_copy(loom_backend_context(be_dst), &c);
}

static const struct loom_backend_iface cpu_backend_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = be_get_name,
	.free = be_free,
	.set_tensor_async = be_set_tensor_async,
	.get_tensor_async = be_get_tensor_async,
	.copy_tensor_async = be_copy_tensor_async,
	.synchronize = be_synchronize,
	.graph_compute = be_graph_compute,
};

/* A backend is ours when its plugin's allreduce entry point is this
 * very function: true for this module only, whatever else is loaded. */
struct cpu_backend *cpu_backend_of(loom_backend_t *be)
{
	loom_dev_t *dev;

	if (!be)
		return NULL;
	dev = loom_backend_device(be);
	if (!dev || loom_reg_proc_address(loom_dev_reg(dev),
					  LOOM_PROC_ALLREDUCE) !=
			    (void *)cpu_allreduce)
		return NULL;
	return loom_backend_context(be);
}

/* Parses a positive thread count; 0 when s is not one. */
static int parse_threads(const char *s)
{
	char *end;
	long v;

	if (!s || !*s)
		return 0;
	v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 4096)
		return 0;
	return (int)v;
}

int cpu_env_threads(void)
{
	const char *env = loom_env_get("LOOM_CPU_THREADS");
	int n = parse_threads(env);

	if (env && *env && !n)
		loom_log(LOOM_LOG_WARN,
			 "cpu: LOOM_CPU_THREADS=%s is not a thread count (1 "
			 "to 4096); using one thread per core", env);
	return n;
}

int cpu_default_threads(const struct cpu_device *cd)
{
	/* One thread per physical core: SMT siblings share the FMA units
	 * and the caches the kernels are blocked for. */
	return cd->cr->env_threads ? cd->cr->env_threads : cd->n_cores;
}

/* params: NULL, "" or "threads=N". */
int cpu_backend_init(struct cpu_device *cd, const char *params,
		     loom_backend_t **out)
{
	struct cpu_backend *cb;
	int n_threads = cpu_default_threads(cd);
	int err;

	if (params && *params) {
		if (strncmp(params, "threads=", 8) ||
		    !(n_threads = parse_threads(params + 8)))
			return loom_error_set(LOOM_E_INVAL,
					      "cpu: unknown backend parameters "
					      "'%s' (expected threads=N)",
					      params);
	}
	cb = calloc(1, sizeof(*cb));
	if (!cb)
		return loom_error_set(LOOM_E_NOMEM, "cpu: out of memory");
	cb->cd = cd;
	snprintf(cb->name, sizeof(cb->name), "%s", cd->name);
	err = cpu_pool_new(n_threads, cd->cpus, cd->n_cpus, &cb->pool);
	if (err)
		goto err_free_cb;
	err = loom_backend_new(cd->dev, &cpu_backend_iface, cb, &cb->be);
	if (err)
		goto err_pool;
	*out = cb->be;
	return LOOM_OK;

err_pool:
	cpu_pool_free(cb->pool);
err_free_cb:
	free(cb);
	return err;
}

int cpu_backend_set_n_threads(loom_backend_t *be, int n_threads)
{
	struct cpu_backend *cb = cpu_backend_of(be);
	struct cpu_pool *fresh;
	int err;

	if (!cb)
		return loom_error_set(LOOM_E_INVAL,
				      "cpu: set_n_threads on a backend of "
				      "another plugin");
	if (n_threads < 1 || n_threads > 4096)
		return loom_error_set(LOOM_E_INVAL,
				      "cpu: %d is not a thread count",
				      n_threads);
	if (cpu_pool_is_worker(cb->pool))
		return loom_error_set(LOOM_E_STATE,
				      "cpu: set_n_threads from inside the "
				      "backend's own work");
	if (n_threads == cb->pool->n_threads)
		return LOOM_OK;
	/* Start the new pool first, so a failure leaves the old one. */
	err = cpu_pool_new(n_threads, cb->cd->cpus, cb->cd->n_cpus, &fresh);
	if (err)
		return err;
	cpu_pool_free(cb->pool);
	cb->pool = fresh;
	return LOOM_OK;
}
