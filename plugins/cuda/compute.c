/* SPDX-License-Identifier: MIT */
/* compute.c - the CUDA plugin's graph compute (one kernel family per node,
 * enqueued on the backend's stream) and the table of what it supports.
 * The kernels themselves live in ops-*.cu.
 */
#include "cuda-plugin.h"

static bool is_float(enum loom_type type)
{
	return type == LOOM_TYPE_F32 || type == LOOM_TYPE_F16 ||
	       type == LOOM_TYPE_BF16;
}

/* Types the kernels read: the float types and the quantized ones with
 * decoders (cuda-types.h; a type appended to loom.h stays on the CPU
 * until its decoder is written). */
static bool is_weight_type(enum loom_type type)
{
	return is_float(type) || cuda_quant_type(type);
}

/* Types the kernels write: quantizing into the K-quants and Q4_0 is left
 * to the CPU (their search for scales is long and serial per block). */
static bool is_store_type(enum loom_type type)
{
	return is_float(type) || type == LOOM_TYPE_Q8_0;
}

/* The kernels address every operand through its strides, so only the
 * types matter. */
static bool src_ok(const struct loom_tensor *t,
		   bool (*type_ok)(enum loom_type))
{
	return t && type_ok(t->type);
}

static bool is_i32(enum loom_type type)
{
	return type == LOOM_TYPE_I32;
}

static bool any_type(enum loom_type type)
{
	return type < LOOM_TYPE_COUNT;
}

/* Leaves and views: nothing to compute. */
static bool no_kernel(enum loom_op op)
{
	return loom_op_flags(op) & LOOM_OPF_NO_KERNEL;
}

static bool dst_f32(const struct loom_tensor *t)
{
	return t->type == LOOM_TYPE_F32;
}

static bool runs_binary(const struct loom_tensor *t)
{
	return dst_f32(t) && src_ok(t->src[0], is_float) &&
	       src_ok(t->src[1], is_float);
}

/* Unary and row ops: f32 out of a float source. */
static bool runs_rows(const struct loom_tensor *t)
{
	return dst_f32(t) && src_ok(t->src[0], is_float);
}

static bool runs_softmax(const struct loom_tensor *t)
{
	const struct loom_tensor *mask = t->src[1];

	return runs_rows(t) && (!mask || mask->type == LOOM_TYPE_F32 ||
				mask->type == LOOM_TYPE_F16);
}

static bool runs_rope(const struct loom_tensor *t)
{
	int32_t mode = t->op_params[1];

	return runs_rows(t) && src_ok(t->src[1], is_i32) &&
	       (mode == LOOM_ROPE_NORMAL || mode == LOOM_ROPE_NEOX);
}

static bool runs_mul_mat(const struct loom_tensor *t)
{
	return dst_f32(t) && src_ok(t->src[0], is_weight_type) &&
	       src_ok(t->src[1], is_float);
}

static bool runs_mul_mat_id(const struct loom_tensor *t)
{
	return runs_mul_mat(t) && src_ok(t->src[2], is_i32);
}

/* What load_row reads: the weight types and I32. */
static bool is_read_type(enum loom_type type)
{
	return is_weight_type(type) || type == LOOM_TYPE_I32;
}

static bool runs_get_rows(const struct loom_tensor *t)
{
	return dst_f32(t) && src_ok(t->src[0], is_read_type) &&
	       src_ok(t->src[1], is_i32);
}

static bool runs_set_rows(const struct loom_tensor *t)
{
	const struct loom_tensor *a = t->src[0];

	return src_ok(a, is_store_type) && src_ok(t->src[1], is_float) &&
	       src_ok(t->src[2], is_i32) && t->type == a->type;
}

static bool runs_copy(const struct loom_tensor *t)
{
	const struct loom_tensor *a = t->src[0];

	if (!src_ok(a, any_type))
		return false;
	return a->type == t->type ||
	       (is_weight_type(a->type) && is_store_type(t->type));
}

static bool runs_concat(const struct loom_tensor *t)
{
	const struct loom_tensor *a = t->src[0], *b = t->src[1];

	return src_ok(a, any_type) && src_ok(b, any_type) &&
	       a->type == b->type && t->type == a->type;
}

static bool runs_index(const struct loom_tensor *t)
{
	return t->type == LOOM_TYPE_I32 && src_ok(t->src[0], is_float);
}

/* Per op: whether the kernels compute a node as loom.h defines it (the
 * types they read and write), and the kernel family that enqueues it. */
struct cuda_op {
	bool (*runs)(const struct loom_tensor *t);
	int (*run)(struct cuda_backend *be, struct loom_tensor *t);
};

static const struct cuda_op cuda_ops[LOOM_OP_COUNT] = {
	[LOOM_OP_ADD] = { runs_binary, cuda_op_binary },
	[LOOM_OP_SUB] = { runs_binary, cuda_op_binary },
	[LOOM_OP_MUL] = { runs_binary, cuda_op_binary },
	[LOOM_OP_DIV] = { runs_binary, cuda_op_binary },
	[LOOM_OP_SCALE] = { runs_rows, cuda_op_unary },
	[LOOM_OP_SILU] = { runs_rows, cuda_op_unary },
	[LOOM_OP_GELU] = { runs_rows, cuda_op_unary },
	[LOOM_OP_RMS_NORM] = { runs_rows, cuda_op_norm },
	[LOOM_OP_NORM] = { runs_rows, cuda_op_norm },
	[LOOM_OP_SOFT_MAX] = { runs_softmax, cuda_op_softmax },
	[LOOM_OP_ROPE] = { runs_rope, cuda_op_rope },
	[LOOM_OP_MUL_MAT] = { runs_mul_mat, cuda_op_mul_mat },
	[LOOM_OP_MUL_MAT_ID] = { runs_mul_mat_id, cuda_op_mul_mat_id },
	[LOOM_OP_GET_ROWS] = { runs_get_rows, cuda_op_get_rows },
	[LOOM_OP_SET_ROWS] = { runs_set_rows, cuda_op_set_rows },
	[LOOM_OP_COPY] = { runs_copy, cuda_op_copy },
	[LOOM_OP_CONT] = { runs_copy, cuda_op_copy },
	[LOOM_OP_CONCAT] = { runs_concat, cuda_op_concat },
	[LOOM_OP_SUM_ROWS] = { runs_rows, cuda_op_reduce },
	[LOOM_OP_ARGMAX] = { runs_index, cuda_op_reduce },
	[LOOM_OP_TOP_K] = { runs_index, cuda_op_reduce },
	/* soft_max_sinks, rope_yarn, swiglu_oai, add_id: no kernels yet,
	 * so cuda_supports_op refuses them. */
};

/* Says whether the kernels compute t exactly as loom.h defines it. */
bool cuda_supports_op(const struct loom_tensor *t)
{
	if (no_kernel(t->op))
		return true;
	return (unsigned)t->op < LOOM_OP_COUNT && cuda_ops[t->op].runs &&
	       cuda_ops[t->op].runs(t);
}

/* True when the kernels on be's device may address t: it lives in that
 * device's memory or in pinned host memory (mapped into every device). */
static bool reachable(const struct cuda_backend *be,
		      const struct loom_tensor *t)
{
	loom_buffer_type_t *buft = loom_buffer_get_type(t->buffer);

	return buft == be->dev->buft || buft == be->dev->reg->host_buft;
}

/* A node and its sources must be where the kernels can reach them; a
 * tensor in another device's or plain host memory is a caller's mistake,
 * reported instead of faulting the device. */
static int check_node(const struct cuda_backend *be,
		      const struct loom_tensor *t)
{
	for (int i = -1; i < LOOM_MAX_SRC; i++) {
		const struct loom_tensor *x = i < 0 ? t : t->src[i];

		if (!x)
			continue;
		if (!x->data || !x->buffer)
			return loom_error_set(LOOM_E_STATE,
					      "%s: tensor '%s' is not placed",
					      be->name, x->name);
		if (!reachable(be, x))
			return loom_error_set(
				LOOM_E_INVAL,
				"%s: tensor '%s' is in a buffer of type '%s', "
				"which %s cannot address", be->name, x->name,
				loom_buffer_type_name(loom_buffer_get_type(x->buffer)),
				be->name);
	}
	return LOOM_OK;
}

bool cuda_node_capturable(const struct loom_tensor *t)
{
	/* mul_mat_id for many tokens reads its groups back (ops-moe.cu). */
	return t->op != LOOM_OP_MUL_MAT_ID ||
	       t->ne[1] * t->ne[2] <= CUDA_MOE_MMV_PAIRS;
}

int cuda_graph_enqueue(struct cuda_backend *be, loom_graph_t *g)
{
	size_t n = loom_graph_n_nodes(g);
	int status;

	for (size_t i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		if (no_kernel(t->op) || loom_tensor_n_elements(t) == 0)
			continue;
		if (!cuda_supports_op(t))
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "%s: op %s on tensor '%s' is not "
					      "supported", be->name,
					      loom_op_name(t->op), t->name);
		status = check_node(be, t);
		if (!status)
			status = cuda_ops[t->op].run(be, t);
		if (status)
			return status;
	}
	return LOOM_OK;
}

/* Enqueues every node of g on the backend's stream, or replays g's
 * captured CUDA graph when g repeats, and returns without waiting; the
 * backend's synchronize waits. */
int cuda_graph_compute(struct cuda_backend *be, loom_graph_t *g)
{
	cudaError_t pending;
	int status = cuda_use_dev(be->dev);

	if (status)
		return status;
	/* An error left by earlier asynchronous work (a fault in a kernel of
	 * the previous graph) is reported as such, not blamed on the first
	 * kernel of this one. */
	pending = cudaGetLastError();
	if (pending != cudaSuccess)
		return loom_error_set(LOOM_E_DEVICE, "%s: an earlier operation "
				      "on this device failed: %s", be->name,
				      cudaGetErrorString(pending));
	if (be->graphs) {
		status = cuda_graphs_run(be, g);
		if (status != LOOM_E_DECLINED)
			return status;
	}
	return cuda_graph_enqueue(be, g);
}
