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

/* Types the kernels read: the float types and the quantized ones the
 * decoders know (a type appended to loom.h stays on the CPU until its
 * decoder is written). */
static bool is_weight_type(enum loom_type type)
{
	return is_float(type) || type == LOOM_TYPE_Q8_0 ||
	       type == LOOM_TYPE_Q4_0 || type == LOOM_TYPE_Q4_K ||
	       type == LOOM_TYPE_Q5_K || type == LOOM_TYPE_Q6_K;
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
	return op == LOOM_OP_NONE || loom_op_is_view(op);
}

/* Says whether the kernels compute t exactly as loom.h defines it. */
bool cuda_supports_op(const struct loom_tensor *t)
{
	const struct loom_tensor *a = t->src[0], *b = t->src[1];
	bool dst_f32 = t->type == LOOM_TYPE_F32;

	if (no_kernel(t->op))
		return true;
	switch (t->op) {
	case LOOM_OP_ADD:
	case LOOM_OP_SUB:
	case LOOM_OP_MUL:
	case LOOM_OP_DIV:
		return dst_f32 && src_ok(a, is_float) && src_ok(b, is_float);
	case LOOM_OP_SCALE:
	case LOOM_OP_SILU:
	case LOOM_OP_GELU:
	case LOOM_OP_RMS_NORM:
	case LOOM_OP_NORM:
	case LOOM_OP_SUM_ROWS:
		return dst_f32 && src_ok(a, is_float);
	case LOOM_OP_SOFT_MAX:
		return dst_f32 && src_ok(a, is_float) &&
		       (!b || b->type == LOOM_TYPE_F32 ||
			b->type == LOOM_TYPE_F16);
	case LOOM_OP_ROPE: {
		int32_t mode = t->op_params[1];

		return dst_f32 && src_ok(a, is_float) && src_ok(b, is_i32) &&
		       (mode == LOOM_ROPE_NORMAL || mode == LOOM_ROPE_NEOX);
	}
	case LOOM_OP_MUL_MAT:
		return dst_f32 && src_ok(a, is_weight_type) &&
		       src_ok(b, is_float);
	case LOOM_OP_MUL_MAT_ID:
		return dst_f32 && src_ok(a, is_weight_type) &&
		       src_ok(b, is_float) && src_ok(t->src[2], is_i32);
	case LOOM_OP_GET_ROWS:
		return dst_f32 && src_ok(a, any_type) && src_ok(b, is_i32);
	case LOOM_OP_SET_ROWS:
		return src_ok(a, is_store_type) && src_ok(b, is_float) &&
		       src_ok(t->src[2], is_i32) && t->type == a->type;
	case LOOM_OP_COPY:
	case LOOM_OP_CONT: {
		enum loom_type st = a ? a->type : LOOM_TYPE_COUNT;

		if (!src_ok(a, any_type))
			return false;
		if (st == t->type)
			return true;
		return is_weight_type(st) && is_store_type(t->type);
	}
	case LOOM_OP_CONCAT:
		return src_ok(a, any_type) && src_ok(b, any_type) &&
		       a->type == b->type && t->type == a->type;
	case LOOM_OP_ARGMAX:
	case LOOM_OP_TOP_K:
		return t->type == LOOM_TYPE_I32 && src_ok(a, is_float);
	default:
		return false;
	}
}

/* The kernel family of each op the plugin computes. */
static int (*const op_kernel[LOOM_OP_COUNT])(struct cuda_backend *,
					     struct loom_tensor *) = {
	[LOOM_OP_ADD] = cuda_op_binary,
	[LOOM_OP_SUB] = cuda_op_binary,
	[LOOM_OP_MUL] = cuda_op_binary,
	[LOOM_OP_DIV] = cuda_op_binary,
	[LOOM_OP_SCALE] = cuda_op_unary,
	[LOOM_OP_SILU] = cuda_op_unary,
	[LOOM_OP_GELU] = cuda_op_unary,
	[LOOM_OP_RMS_NORM] = cuda_op_norm,
	[LOOM_OP_NORM] = cuda_op_norm,
	[LOOM_OP_SOFT_MAX] = cuda_op_softmax,
	[LOOM_OP_ROPE] = cuda_op_rope,
	[LOOM_OP_MUL_MAT] = cuda_op_mul_mat,
	[LOOM_OP_MUL_MAT_ID] = cuda_op_mul_mat_id,
	[LOOM_OP_GET_ROWS] = cuda_op_get_rows,
	[LOOM_OP_SET_ROWS] = cuda_op_set_rows,
	[LOOM_OP_COPY] = cuda_op_copy,
	[LOOM_OP_CONT] = cuda_op_copy,
	[LOOM_OP_CONCAT] = cuda_op_concat,
	[LOOM_OP_SUM_ROWS] = cuda_op_reduce,
	[LOOM_OP_ARGMAX] = cuda_op_reduce,
	[LOOM_OP_TOP_K] = cuda_op_reduce,
};

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
		if (!cuda_supports_op(t) || !op_kernel[t->op])
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "%s: op %s on tensor '%s' is not "
					      "supported", be->name,
					      loom_op_name(t->op), t->name);
		status = check_node(be, t);
		if (!status)
			status = op_kernel[t->op](be, t);
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
