/* SPDX-License-Identifier: MIT */
/* cuda-plugin.h - what the CUDA plugin's host code (plugin.c, compute.c,
 * allreduce.c) and its kernel files (ops-*.cu) share: the device, buffer
 * and backend contexts and the per-op entry points.  Built twice: for CUDA
 * and, with LOOM_HIP, for HIP.
 */
#ifndef LOOM_CUDA_PLUGIN_H
#define LOOM_CUDA_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include <loom/loom-plugin.h>

#include "cuda-compat.h"
#include "cuda-types.h"

#ifdef __cplusplus
extern "C" {
#endif

#define CUDA_MAX_DEVICES 64
#define CUDA_BUFFER_ALIGN 256

/* Scratch slots of a backend: converted matmul operands, reduce staging,
 * the scale of an F16 operand, the BLAS's pointer arrays, the experts'
 * routing and their results. */
enum {
	CUDA_SCRATCH_A = 0,
	CUDA_SCRATCH_B,
	CUDA_SCRATCH_REDUCE,
	CUDA_SCRATCH_SCALE,     /* mul_mat's F16 scale, alpha and beta */
	CUDA_SCRATCH_PTRS,      /* batched GEMM's pointer arrays */
	CUDA_SCRATCH_ROUTE,     /* mul_mat_id: offsets per expert, positions */
	CUDA_SCRATCH_C,         /* mul_mat_id: results per expert */
	CUDA_SCRATCH_COUNT
};

/* The kernel paths a backend can take, each logged (at info) the first
 * time that backend takes it, so a check can see which ran. */
enum cuda_path {
	CUDA_PATH_MMV_Q = 0,    /* quantized GEMV, dp4a */
	CUDA_PATH_MMV_F,        /* float GEMV */
	CUDA_PATH_DEQUANT_BLAS, /* quantized weights dequantized, BLAS */
	CUDA_PATH_GQA_MERGED,   /* broadcast folded into one strided GEMM */
	CUDA_PATH_GQA_PTRS,     /* broadcast as one pointer-array GEMM */
	CUDA_PATH_MOE_GROUPED,  /* mul_mat_id: tokens grouped by expert */
	CUDA_PATH_MOE_DOT,      /* mul_mat_id: dot product per value */
	CUDA_PATH_GRAPH_CAPTURE, /* a graph captured into a CUDA graph */
	CUDA_PATH_GRAPH_UPDATE, /* a captured CUDA graph updated in place */
	CUDA_PATH_GRAPH_REPLAY, /* a captured CUDA graph replayed */
	CUDA_PATH_COUNT
};

struct cuda_graph_cache;

struct cuda_reg;

struct cuda_dev {
	struct cuda_reg *reg;
	int id;                 /* runtime device ordinal */
	int cc;                 /* compute capability, major * 10 + minor */
	bool peer;              /* can reach another device directly */
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	char name[16];
	char description[256];
};

struct cuda_comm_group;

#define CUDA_MAX_FEATURES (8 + 3 * CUDA_MAX_DEVICES)

struct cuda_reg {
	loom_reg_t *reg;
	int n_dev;
	struct cuda_dev devs[CUDA_MAX_DEVICES];
	loom_buffer_type_t *host_buft;
	pthread_mutex_t lock;  /* guards comm_groups and peer_tried */
	struct cuda_comm_group *comm_groups;
	/* [to][from]: peer access was asked for once (see enable_peer). */
	bool peer_tried[CUDA_MAX_DEVICES][CUDA_MAX_DEVICES];
	/* "get_features": name/value pairs, NULL-terminated. */
	struct loom_feature features[CUDA_MAX_FEATURES + 1];
	char feature_text[CUDA_MAX_FEATURES][2][48];
};

/* Device and pinned host buffers share this context. */
struct cuda_buffer {
	struct cuda_dev *dev; /* NULL for pinned host memory */
	void *ptr;
	size_t size;
};

struct cuda_backend {
	struct cuda_dev *dev;
	cudaStream_t stream;
	cudaEvent_t copy_done;  /* for copies between devices */
#ifdef LOOM_HAVE_BLAS
	void *blas;             /* cublasHandle_t */
#endif
	bool own_gemm;          /* use the plugin's GEMM, not the BLAS */
	bool capturing;         /* a CUDA graph is being captured */
	bool capture_broken;    /* something in the capture cannot replay */
	bool capture_grow;      /* the capture needed more scratch */
	void *scratch[CUDA_SCRATCH_COUNT];
	size_t scratch_size[CUDA_SCRATCH_COUNT];
	uint64_t scratch_gen;   /* counts reallocations of any slot */
	void *blas_workspace;
	int32_t *host_small;    /* pinned: what the host reads back */
	size_t host_small_n;
	struct cuda_graph_cache *graphs; /* NULL: CUDA graphs are off */
	uint32_t paths_noted;   /* bit per enum cuda_path */
	char name[32];
};

/* LOOM_OK for cudaSuccess; otherwise records the runtime's error for
 * loom_error_message() and returns LOOM_E_DEVICE (LOOM_E_NOMEM for an
 * allocation failure). */
int cuda_error(cudaError_t err, const char *what);

/* Makes cd the calling thread's current device; every runtime call that
 * acts on a device goes through here, so a failure is reported where it
 * happens instead of being blamed on the next call. */
int cuda_use_dev(const struct cuda_dev *cd);

/* Device memory of at least size bytes in the backend's scratch slot, or
 * NULL (error recorded).  Valid until the next call for the same slot;
 * growing it waits for the backend's stream first.  During a capture it
 * cannot grow: it returns NULL and marks the capture broken. */
void *cuda_scratch(struct cuda_backend *be, int slot, size_t size);

/* Pinned host memory for n int32 values the host reads back from the
 * device, or NULL (error recorded).  Valid until the next call. */
int32_t *cuda_host_small(struct cuda_backend *be, size_t n);

/* Logs, once per backend, that it took path p. */
void cuda_note_path(struct cuda_backend *be, enum cuda_path p);

/* For release paths, which cannot fail: a failure is logged, not lost. */
void cuda_warn_on(cudaError_t err, const char *what);
/* plugin.c: true when reg is this plugin's registry entry. */
bool cuda_reg_is_ours(loom_reg_t *reg);
/* features.c: fills reg's get_features list. */
void cuda_init_features(struct cuda_reg *reg);
/* device.c: makes device i of reg (its handle and buffer type); which
 * devices reach each other directly; lets `to` access `from`'s memory. */
int cuda_init_dev(struct cuda_reg *reg, int i);
void cuda_find_peers(struct cuda_reg *reg);
void cuda_enable_peer(struct cuda_dev *from, struct cuda_dev *to);
/* buffer.c: the device's and pinned host buffers; cuda_drain selects cd
 * and waits for everything queued on it. */
extern const struct loom_buffer_iface cuda_dev_buffer_iface;
extern const struct loom_buffer_iface cuda_host_buffer_iface;
int cuda_drain(const struct cuda_dev *cd);
void cuda_buffer_free_mem(struct cuda_buffer *cb);
/* The device whose memory holds t (a tensor in one of our buffers). */
struct cuda_dev *cuda_buffer_dev(const struct loom_tensor *t);
/* buffer-type.c */
extern const struct loom_buffer_type_iface cuda_dev_buft_iface;
extern const struct loom_buffer_type_iface cuda_host_buft_iface;
/* copy-2d.c: the 2D transfers of loom-plugin.h's entry points. */
int cuda_set_tensor_2d(loom_buffer_t *buf, struct loom_tensor *t,
		       const void *data, size_t offset, size_t size,
		       size_t n_copies, size_t stride_tensor,
		       size_t stride_data);
int cuda_get_tensor_2d(loom_buffer_t *buf, const struct loom_tensor *t,
		       void *data, size_t offset, size_t size, size_t n_copies,
		       size_t stride_tensor, size_t stride_data);
int cuda_set_tensor_2d_async(loom_backend_t *be, struct loom_tensor *t,
			     const void *data, size_t offset, size_t size,
			     size_t n_copies, size_t stride_tensor,
			     size_t stride_data);
int cuda_get_tensor_2d_async(loom_backend_t *be,
			     const struct loom_tensor *t, void *data,
			     size_t offset, size_t size, size_t n_copies,
			     size_t stride_tensor, size_t stride_data);
/* backend.c: a device's init_backend, and waiting for a backend. */
int cuda_dev_init_backend(loom_dev_t *dev, const char *params,
			  loom_backend_t **out);
int cuda_backend_synchronize(loom_backend_t *be);
/* event.c: the device's and the backends' event methods. */
int cuda_dev_event_new(loom_dev_t *dev, loom_event_t *ev);
void cuda_dev_event_free(loom_dev_t *dev, loom_event_t *ev);
int cuda_dev_event_synchronize(loom_dev_t *dev, loom_event_t *ev);
int cuda_backend_event_record(loom_backend_t *be, loom_event_t *ev);
int cuda_backend_event_wait(loom_backend_t *be, loom_event_t *ev);
/* True when t lives in one of this plugin's device buffers. */
bool cuda_tensor_on_device(const struct cuda_reg *reg,
			   const struct loom_tensor *t);

/* True when be is a backend of this plugin. */
bool cuda_backend_is_ours(loom_backend_t *be);

/* compute.c: graph compute and the op support table. */
int cuda_graph_compute(struct cuda_backend *be, loom_graph_t *g);
bool cuda_supports_op(const struct loom_tensor *t);
/* Enqueues g's nodes on be's stream, one kernel family per node. */
int cuda_graph_enqueue(struct cuda_backend *be, loom_graph_t *g);
/* True when t's kernels can be captured into a CUDA graph (none of them
 * waits for the device on the host). */
bool cuda_node_capturable(const struct loom_tensor *t);

/* capture.c: CUDA graphs.  cuda_graphs_run computes g through a captured
 * CUDA graph when g repeats (same nodes, shapes and addresses); it
 * returns LOOM_E_DECLINED when g is to be enqueued node by node. */
int cuda_graphs_new(struct cuda_backend *be);
void cuda_graphs_free(struct cuda_backend *be);
int cuda_graphs_run(struct cuda_backend *be, loom_graph_t *g);

/* allreduce.c */
int cuda_allreduce(loom_backend_t *const *backends,
		   struct loom_tensor *const *tensors, size_t n,
		   const struct loom_allreduce_opts *opts);
int cuda_allreduce_world(loom_backend_t *const *backends,
			 struct loom_tensor *const *tensors, size_t n,
			 const struct loom_allreduce_opts *opts,
			 const struct loom_world_group *group);
int cuda_allreduce_world_prepare(loom_dev_t *const *devs, size_t n,
				 const struct loom_world_group *group);
void cuda_allreduce_free(struct cuda_reg *reg);
/* LOOM_CUDA_ALLREDUCE, read once: whether NCCL serves.  "allreduce_world"
 * is offered only then, so that a meta device over the world sees which
 * ranks differ (its rank digest) and all of them take the same path. */
bool cuda_nccl_enabled(void);

/* Kernels, one entry per op family, each enqueued on be's stream.  They
 * return LOOM_OK or an error recorded with loom_error_set().  binary: add,
 * sub, mul, div; unary: scale, silu, gelu; norm: rms_norm, norm; copy:
 * copy, cont; reduce: sum_rows, argmax, top_k. */
int cuda_op_binary(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_unary(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_norm(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_softmax(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_rope(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_get_rows(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_set_rows(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_copy(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_concat(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_reduce(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_mul_mat(struct cuda_backend *be, struct loom_tensor *t);
int cuda_op_mul_mat_id(struct cuda_backend *be, struct loom_tensor *t);

/* mul_mat_id for up to this many (slot, token) pairs runs as a GEMV per
 * pair (reading each selected expert once per token, capturable); more
 * are grouped by expert into GEMMs (ops-moe.cu). */
#define CUDA_MOE_MMV_PAIRS 32

/* Converts n contiguous F32 values to BF16 and back, for the allreduce. */
int cuda_f32_to_bf16(cudaStream_t stream, const float *src, uint16_t *dst,
		     int64_t n);
int cuda_bf16_to_f32(cudaStream_t stream, const uint16_t *src, float *dst,
		     int64_t n);

#ifdef LOOM_HAVE_BLAS
int cuda_blas_create(struct cuda_backend *be);
void cuda_blas_destroy(struct cuda_backend *be);
#endif

#ifdef __cplusplus
}
#endif

#endif /* LOOM_CUDA_PLUGIN_H */
