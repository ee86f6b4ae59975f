/* SPDX-License-Identifier: MIT */
/* loom-backend.h - devices, buffers, backends, the plugin registry and
 * loader, the graph allocator, the meta (tensor-parallel) device and the
 * plugins' optional entry points.
 *
 * Applications include this; plugin authors include loom-plugin.h, which
 * includes this.
 */
#ifndef LOOM_BACKEND_H
#define LOOM_BACKEND_H

#include "loom.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct loom_buffer_type loom_buffer_type_t;
typedef struct loom_buffer loom_buffer_t;
typedef struct loom_backend loom_backend_t;
typedef struct loom_event loom_event_t;
typedef struct loom_dev loom_dev_t;
typedef struct loom_reg loom_reg_t;
typedef struct loom_galloc loom_galloc_t;

/* ------------------------------------------------------------------------
 * Ownership: who frees what, and how long it lives.
 *
 * Plugin records, regs, devices and buffer types belong to the core and
 * the plugin that made them.  They live from the load that made them
 * (loom_load_all, loom_load_path, loom_load_static) until loom_unload_all;
 * the application never frees them.  The strings they return live as
 * long.
 *
 * Buffers, backends and events belong to the application, which frees
 * each with loom_buffer_free, loom_backend_free and loom_event_free.
 * Each one keeps its plugin loaded: while any is alive, loom_unload_all
 * unloads nothing and returns LOOM_E_BUSY, naming what is left.  A graph
 * allocator (loom_galloc_free) owns its compute buffer, so it counts as
 * that buffer.  Contexts (loom_ctx_free) own their tensor descriptors and
 * graphs; a tensor's data belongs to the buffer it is placed in, not to
 * the tensor.
 *
 * The core knows every handle it made that is still alive, and checks
 * each one against that record, never by reading the memory it points
 * to.  So using a freed handle is an error, never undefined behaviour:
 *   - freeing it again does nothing but record LOOM_E_INVAL ("... is not
 *     a live buffer (freed already?)") for loom_error_message();
 *   - calls that return a status return LOOM_E_INVAL, getters return
 *     NULL, 0, false or "(null)";
 *   - a tensor placed in a freed buffer reads as not placed: set, get,
 *     copy and compute return LOOM_E_STATE ("... has a freed or foreign
 *     buffer").  Place it again before using it.
 * A freed address that a later object happens to reuse names that later
 * object; hold no handle past its free.
 *
 * Freeing a buffer that queued work of a backend still uses is the
 * application's mistake: synchronize that backend first
 * (loom_backend_free waits for the backend's own work).
 *
 * For plugins: the core owns every wrapper a constructor (loom_reg_new,
 * loom_dev_new, loom_buffer_type_new, loom_buffer_new, loom_backend_new)
 * makes.  The context is set and the table checked before any of the
 * plugin's methods runs on it, and the plugin's free method runs while
 * the handle is still live, so loom_*_context works in both.
 *
 * A plugin's init and ELF constructors must not load or unload plugins:
 * such a call returns LOOM_E_STATE.  Init runs without the registry
 * lock, so a thread it waits for may read the registry (loom_dev_count).
 */

/* ------------------------------------------------------------------------
 * Threads.  Every call may come from any thread.  Loading and unloading
 * are serialised by the core.
 *
 * Regs, devices and buffer types may be queried while another thread
 * loads or unloads: a call through one keeps its plugin loaded until it
 * returns.  loom_unload_all waits for the calls under way on other
 * threads, and calls made while it unloads find their handles gone (as
 * after it: NULL, 0 or "(null)").  Called from inside such a call (a log
 * callback the plugin triggered), loading or unloading returns
 * LOOM_E_STATE.
 *
 * A backend is a stream: its calls must not overlap.  One made while
 * another call on that backend is under way, from another thread or
 * re-entered from the same one, does nothing and returns LOOM_E_BUSY
 * with a message ("... is busy with a call on another thread"); freeing
 * it then is refused the same way (the message is recorded for
 * loom_error_message()).  A scheduler (loom_sched_*) is held to the same
 * rule.  Different backends, also of one device, run in different
 * threads at once.  Threads that share one backend take turns with a
 * lock of their own: on a meta device a node's results are there to read
 * only until that backend computes another graph.
 */

/* ------------------------------------------------------------------------
 * Buffer types: allocators of one kind of memory.
 * Owned by their plugin; valid until loom_unload_all().
 */
LOOM_API const char *loom_buffer_type_name(loom_buffer_type_t *buft);
/* Allocates a buffer of size bytes (0 is allowed).  The caller frees it
 * with loom_buffer_free(). */
LOOM_API int loom_buffer_type_alloc_buffer(loom_buffer_type_t *buft, size_t size,
				    loom_buffer_t **out);
/* Alignment of tensor data in buffers of this type (a power of two). */
LOOM_API size_t loom_buffer_type_alignment(loom_buffer_type_t *buft);
/* Largest buffer one allocation can make. */
LOOM_API size_t loom_buffer_type_max_size(loom_buffer_type_t *buft);
/* Bytes the tensor needs in a buffer of this type (>= loom_tensor_n_bytes). */
LOOM_API size_t loom_buffer_type_alloc_size(loom_buffer_type_t *buft,
				     const struct loom_tensor *t);
/* True when the memory is host memory the CPU can address directly. */
LOOM_API bool loom_buffer_type_is_host(loom_buffer_type_t *buft);
/* The device this type belongs to, or NULL for a device-less type. */
LOOM_API loom_dev_t *loom_buffer_type_device(loom_buffer_type_t *buft);

/* ------------------------------------------------------------------------
 * Buffers.
 */
enum loom_buffer_usage {
	LOOM_BUFFER_USAGE_ANY = 0,
	LOOM_BUFFER_USAGE_WEIGHTS, /* parameters and caches */
	LOOM_BUFFER_USAGE_COMPUTE, /* a graph's intermediates */
};

/* Frees buf and its memory; NULL is a no-op.  Tensors placed in it read
 * as not placed afterwards (LOOM_E_STATE). */
LOOM_API void loom_buffer_free(loom_buffer_t *buf);
LOOM_API size_t loom_buffer_size(loom_buffer_t *buf);
LOOM_API void *loom_buffer_base(loom_buffer_t *buf);
LOOM_API loom_buffer_type_t *loom_buffer_get_type(loom_buffer_t *buf);
LOOM_API int loom_buffer_clear(loom_buffer_t *buf, uint8_t value);
LOOM_API void loom_buffer_set_usage(loom_buffer_t *buf,
				    enum loom_buffer_usage usage);
LOOM_API enum loom_buffer_usage loom_buffer_usage(loom_buffer_t *buf);

/* Places t (and nothing else) at byte offset in buf.  The offset must be a
 * multiple of the buffer type's alignment and the tensor must fit.  Views
 * are placed with loom_tensor_init_view(). */
LOOM_API int loom_tensor_place(struct loom_tensor *t, loom_buffer_t *buf,
			       size_t offset);
/* Gives a view the data of its view source (which must be placed). */
LOOM_API int loom_tensor_init_view(struct loom_tensor *t);

/* Allocates one buffer of type buft holding every tensor of ctx that has no
 * data yet, and places them.  The caller frees *out.  A context with no
 * such tensor gives *out = NULL and LOOM_OK. */
LOOM_API int loom_ctx_alloc_tensors(loom_ctx_t *ctx, loom_buffer_type_t *buft,
				    loom_buffer_t **out);

/* ------------------------------------------------------------------------
 * Tensor data.  Offsets and sizes are in bytes within the tensor; they
 * are checked against loom_tensor_n_bytes() before any plugin sees them
 * (LOOM_E_RANGE), and the tensor must be placed (LOOM_E_STATE).
 * These calls are blocking.
 */
LOOM_API int loom_tensor_set(struct loom_tensor *t, const void *data,
			     size_t offset, size_t size);
LOOM_API int loom_tensor_get(const struct loom_tensor *t, void *data,
			     size_t offset, size_t size);
LOOM_API int loom_tensor_memset(struct loom_tensor *t, uint8_t value,
				size_t offset, size_t size);
/* 2D copies: n_copies rows of size bytes; row i is at offset + i *
 * stride_tensor in the tensor and at i * stride_data in data.  Plugins may
 * do this in one transfer; otherwise it is a loop of 1D copies. */
LOOM_API int loom_tensor_set_2d(struct loom_tensor *t, const void *data,
				size_t offset, size_t size, size_t n_copies,
				size_t stride_tensor, size_t stride_data);
LOOM_API int loom_tensor_get_2d(const struct loom_tensor *t, void *data,
				size_t offset, size_t size, size_t n_copies,
				size_t stride_tensor, size_t stride_data);
/* Copies src into dst (same byte size) across any two buffers. */
LOOM_API int loom_tensor_copy(const struct loom_tensor *src,
			      struct loom_tensor *dst);

/* ------------------------------------------------------------------------
 * Backends: execution streams on a device.
 */
LOOM_API const char *loom_backend_name(loom_backend_t *be);
/* Frees be after waiting for its work; NULL is a no-op. */
LOOM_API void loom_backend_free(loom_backend_t *be);
LOOM_API loom_dev_t *loom_backend_device(loom_backend_t *be);
/* Async data movement on be's stream: done once loom_backend_synchronize()
 * returns.  Host memory passed in must stay valid until then. */
LOOM_API int loom_backend_tensor_set_async(loom_backend_t *be,
					   struct loom_tensor *t,
					   const void *data, size_t offset,
					   size_t size);
LOOM_API int loom_backend_tensor_get_async(loom_backend_t *be,
					   const struct loom_tensor *t,
					   void *data, size_t offset,
					   size_t size);
LOOM_API int loom_backend_tensor_set_2d_async(
	loom_backend_t *be, struct loom_tensor *t, const void *data,
	size_t offset, size_t size, size_t n_copies, size_t stride_tensor,
	size_t stride_data);
LOOM_API int loom_backend_tensor_get_2d_async(
	loom_backend_t *be, const struct loom_tensor *t, void *data,
	size_t offset, size_t size, size_t n_copies, size_t stride_tensor,
	size_t stride_data);
/* Copies src (on be_src's device) into dst (on be_dst's device). */
LOOM_API int loom_backend_tensor_copy_async(loom_backend_t *be_src,
					    loom_backend_t *be_dst,
					    const struct loom_tensor *src,
					    struct loom_tensor *dst);
LOOM_API int loom_backend_synchronize(loom_backend_t *be);
/* Runs g; every node must be placed in memory be's device can use.  The
 * async form may return before the work is done. */
LOOM_API int loom_backend_graph_compute(loom_backend_t *be, loom_graph_t *g);
LOOM_API int loom_backend_graph_compute_async(loom_backend_t *be,
					      loom_graph_t *g);
LOOM_API bool loom_backend_supports_op(loom_backend_t *be,
				       const struct loom_tensor *op);
/* Sets the number of threads be computes with (LOOM_E_UNSUPPORTED when its
 * plugin has no threads to set). */
LOOM_API int loom_backend_set_n_threads(loom_backend_t *be, int n_threads);

/* Events mark a point in a backend's stream. */
LOOM_API int loom_event_new(loom_dev_t *dev, loom_event_t **out);
LOOM_API void loom_event_free(loom_event_t *ev);
LOOM_API int loom_event_record(loom_event_t *ev, loom_backend_t *be);
/* Makes be wait (without blocking the host) until ev has passed. */
LOOM_API int loom_event_wait(loom_backend_t *be, loom_event_t *ev);
/* Blocks the host until ev has passed. */
LOOM_API int loom_event_synchronize(loom_event_t *ev);

/* ------------------------------------------------------------------------
 * Devices.
 */
/* X(NAME, "name"); the numbers are ABI: a new type is appended. */
#define LOOM_DEV_TYPE_MAP(X)                                                 \
	X(CPU, "cpu")                                                        \
	X(GPU, "gpu")                                                        \
	X(IGPU, "igpu")                                                      \
	X(ACCEL, "accel")                                                    \
	X(META, "meta") /* composed of other devices */

enum loom_dev_type {
#define LOOM_X_(name, str) LOOM_DEV_TYPE_##name,
	LOOM_DEV_TYPE_MAP(LOOM_X_)
#undef LOOM_X_
};

/* Capability bits (loom_dev_caps). */
enum {
	LOOM_DEV_CAP_ASYNC = 1u << 0,       /* async copies overlap compute */
	LOOM_DEV_CAP_HOST_BUFFER = 1u << 1, /* offers pinned host memory */
	LOOM_DEV_CAP_EVENTS = 1u << 2,      /* real events */
	LOOM_DEV_CAP_PEER_COPY = 1u << 3,   /* direct device-to-device copy */
};

LOOM_API const char *loom_dev_type_name(enum loom_dev_type type);

/* How readily the default device order takes a device, as GStreamer ranks
 * its elements.  loom_dev_get() lists higher ranks first, then by type:
 * GPU, IGPU, ACCEL, CPU, META.  The plugins shipped with Loom rank their
 * CPU and GPU devices primary; a plugin that declares no rank (every
 * plugin built against ABI 1.0) gets LOOM_DEV_RANK_NONE, so it never
 * comes before them. */
enum loom_dev_rank {
	LOOM_DEV_RANK_NONE = 0,        /* declared none: after every ranked device */
	LOOM_DEV_RANK_MARGINAL = 64,   /* a few ops: when nothing better is there */
	LOOM_DEV_RANK_SECONDARY = 128, /* a good choice, behind the primary ones */
	LOOM_DEV_RANK_PRIMARY = 256,   /* the first choice: runs whole models */
};

/* "none", "marginal", "secondary", "primary"; "unknown" for other values. */
LOOM_API const char *loom_dev_rank_name(enum loom_dev_rank rank);

LOOM_API const char *loom_dev_name(loom_dev_t *dev);
LOOM_API const char *loom_dev_description(loom_dev_t *dev);
LOOM_API enum loom_dev_type loom_dev_type(loom_dev_t *dev);
LOOM_API void loom_dev_memory(loom_dev_t *dev, size_t *free, size_t *total);
LOOM_API uint32_t loom_dev_caps(loom_dev_t *dev);
/* The device's rank; LOOM_DEV_RANK_NONE for a device that declares none
 * (or that is not a live device). */
LOOM_API enum loom_dev_rank loom_dev_rank(loom_dev_t *dev);
/* Makes a backend on dev; params is a plugin-specific string or NULL.  The
 * caller frees it with loom_backend_free(). */
LOOM_API int loom_dev_init_backend(loom_dev_t *dev, const char *params,
				   loom_backend_t **out);
LOOM_API loom_buffer_type_t *loom_dev_buffer_type(loom_dev_t *dev);
/* Pinned host memory for fast transfers to dev, or NULL if none. */
LOOM_API loom_buffer_type_t *loom_dev_host_buffer_type(loom_dev_t *dev);
/* Where to put the weights that only loom_mul_mat reads (as its first
 * source): a buffer type whose layout the device chooses for speed (see
 * "weight_buffer_type" in loom-plugin.h), else loom_dev_buffer_type(dev).
 * Tensors in it are set and read back as usual; an op that reads them any
 * other way is not supported.  NULL only when dev is not a live device. */
LOOM_API loom_buffer_type_t *loom_dev_weight_buffer_type(loom_dev_t *dev);
LOOM_API bool loom_dev_supports_op(loom_dev_t *dev,
				   const struct loom_tensor *op);
LOOM_API bool loom_dev_supports_buft(loom_dev_t *dev,
				     loom_buffer_type_t *buft);
LOOM_API loom_reg_t *loom_dev_reg(loom_dev_t *dev);

/* ------------------------------------------------------------------------
 * The registry: plugins and the devices they bring.
 *
 * loom_load_all() loads the plugins chosen by LOOM_BACKENDS from the search
 * path (LOOM_PLUGIN_PATH, then the installed plugin directory).  It is safe
 * to call more than once; it returns LOOM_E_NOT_FOUND (or the plugin's own
 * error) when a backend named in LOOM_BACKENDS cannot be loaded, with the
 * reason in loom_error_message(); the other plugins are loaded all the same.
 */
LOOM_API int loom_load_all(void);
/* Loads one plugin file, whatever LOOM_BACKENDS says. */
LOOM_API int loom_load_path(const char *path, loom_reg_t **out);
/* Registers a plugin linked into the application. */
struct loom_plugin_desc;
LOOM_API int loom_load_static(const struct loom_plugin_desc *desc,
				  loom_reg_t **out);
/* Unloads every plugin and frees every device, buffer type and record.
 * While a buffer, backend or event made from any plugin is alive it
 * unloads nothing and returns LOOM_E_BUSY, the message naming what is
 * left ("2 buffers and 1 backend of plugin 'cpu' are still alive").
 * Calls through a reg, device or buffer type under way on other threads
 * are waited for (see "Threads" above). */
LOOM_API int loom_unload_all(void);

LOOM_API size_t loom_reg_count(void);
/* The loaded plugins, ordered by their first device in the device order
 * below (plugins without devices last). */
LOOM_API loom_reg_t *loom_reg_get(size_t i);
LOOM_API loom_reg_t *loom_reg_by_name(const char *name);
LOOM_API const char *loom_reg_name(loom_reg_t *reg);
LOOM_API const char *loom_reg_version(loom_reg_t *reg);
LOOM_API size_t loom_reg_dev_count(loom_reg_t *reg);
LOOM_API loom_dev_t *loom_reg_dev(loom_reg_t *reg, size_t i);
/* The plugin's entry point of that name (see loom-plugin.h), or NULL. */
LOOM_API void *loom_reg_proc_address(loom_reg_t *reg, const char *name);

/* All devices, in priority order: the plugins' LOOM_BACKENDS order when
 * it is given; then, among the devices of plugins alike in that, higher
 * rank first (enum loom_dev_rank), then by type (GPU, IGPU, ACCEL, CPU,
 * META), then in the order the plugins were found and the order each
 * lists its devices.  Device 0 is the one to use when the application has
 * no reason to choose. */
LOOM_API size_t loom_dev_count(void);
LOOM_API loom_dev_t *loom_dev_get(size_t i);
LOOM_API loom_dev_t *loom_dev_by_name(const char *name);
/* The first device of that type, or NULL. */
LOOM_API loom_dev_t *loom_dev_by_type(enum loom_dev_type type);

/* What the loader did with each candidate file. */
enum loom_plugin_state {
	LOOM_PLUGIN_LOADED = 0,
	LOOM_PLUGIN_EXCLUDED,       /* not selected by LOOM_BACKENDS */
	LOOM_PLUGIN_NOT_APPLICABLE, /* cannot run on this machine */
	LOOM_PLUGIN_FAILED,         /* broken: see the reason */
	LOOM_PLUGIN_SKIPPED,        /* another file of that name won */
};

struct loom_plugin_info {
	const char *name;    /* plugin name from the file name */
	const char *file;    /* full path, or "(static)" */
	const char *version; /* from the descriptor, or NULL */
	enum loom_plugin_state state;
	const char *reason;  /* "" when loaded */
	int score;
};

LOOM_API const char *loom_plugin_state_name(enum loom_plugin_state state);
LOOM_API size_t loom_plugin_count(void);
/* Fills *out with record i; the strings stay valid until loom_unload_all. */
LOOM_API int loom_plugin_info(size_t i, struct loom_plugin_info *out);
/* The directories searched, in order. */
LOOM_API size_t loom_search_path_count(void);
LOOM_API const char *loom_search_path(size_t i);
/* The installed plugin directory. */
LOOM_API const char *loom_plugin_dir(void);

/* ------------------------------------------------------------------------
 * Graph allocator: places a graph's intermediates in one compute buffer,
 * reusing the memory of tensors no longer needed.
 */
/* The caller frees *out with loom_galloc_free(). */
LOOM_API int loom_galloc_new(loom_buffer_type_t *buft, loom_galloc_t **out);
LOOM_API void loom_galloc_free(loom_galloc_t *ga);
/* Plans g and makes the compute buffer large enough for it. */
LOOM_API int loom_galloc_reserve(loom_galloc_t *ga, loom_graph_t *g);
/* Places every unplaced tensor g needs (reserving first if needed).
 * Leaves without data and the graph's outputs are placed too. */
LOOM_API int loom_galloc_alloc_graph(loom_galloc_t *ga, loom_graph_t *g);
/* Size of the compute buffer (0 before reserve). */
LOOM_API size_t loom_galloc_buffer_size(loom_galloc_t *ga);
LOOM_API loom_buffer_t *loom_galloc_buffer(loom_galloc_t *ga);

/* ------------------------------------------------------------------------
 * The scheduler: one graph over several backends (partial offload: the
 * ops a device lacks fall to the next backend of the list, layers whose
 * weights are on one device run there).
 *
 * Each node runs on a backend of the list: a node that writes into a
 * tensor (copy, set_rows) where that tensor lives (a graph that would
 * have to write into a copy fails instead); a node that uses a weight
 * where the weight lives, when that device supports the op; else on the
 * first backend in the list that supports it and reads all its inputs
 * where they are; else on the one that holds most of its input bytes (on
 * a tie the previous node's, then the first).  Views go with what reads
 * them.  supports_op is asked at most once per node and backend per plan.
 *
 * The graph is cut into pieces of consecutive nodes on one backend.  An
 * input a piece reads from memory its device cannot use, or from another
 * backend's results, is copied once per compute into the reading
 * backend's memory, however many nodes and pieces of that backend read
 * it.  Each backend has one graph allocator for all its pieces
 * (loom_sched_buffer_size), shared by every plan of the scheduler.
 *
 * Pieces run in order.  While a piece runs, the next piece's copies that
 * do not wait for it are made (their sources are inputs, weights or
 * results of earlier pieces), so they overlap its compute.  Between
 * devices of one plugin that both have events and asynchronous copies
 * (LOOM_DEV_CAP_EVENTS and LOOM_DEV_CAP_ASYNC), a copy is queued on the
 * reading backend's stream behind an event of the piece that makes its
 * source, and the host never waits; otherwise the host waits for that
 * piece (its event, or a synchronize of its backend) and copies.
 *
 * The caller's graph is not changed: its nodes and inputs are placed where
 * the scheduler's memory has them, so they are set and read as after any
 * compute (outputs, LOOM_TENSOR_OUTPUT, stay valid after it).
 * LOOM_SCHED_DEBUG=1 prints each node's backend and why, and each copy.
 *
 * Plans are kept (the last four used).  A graph is planned again only
 * when its shape is new: the same ops, parameters, shapes, strides and
 * types, the same sources by position, and inputs in buffers of the same
 * types and usage, as a graph planned before, reuse its plan, whether it
 * is that very graph (unchanged: loom_graph_version) or another built the
 * same way.
 */
typedef struct loom_sched loom_sched_t;

/* Makes a scheduler over backends[0..n), in priority order (each backend
 * once).  The backends stay the caller's and must outlive it; free it
 * with loom_sched_free(). */
LOOM_API int loom_sched_new(loom_backend_t *const *backends, size_t n,
			    loom_sched_t **out);
/* Frees s and the compute memory it holds; NULL is a no-op.  A
 * scheduler is a live handle: freeing it again, or any call after the
 * free, is refused (LOOM_E_INVAL, 0 or NULL), never undefined. */
LOOM_API void loom_sched_free(loom_sched_t *s);
/* Plans g and sizes each backend's compute memory, computing nothing; a
 * later graph that needs no more memory than g does not grow it.  A
 * graph some node of which no backend supports fails with
 * LOOM_E_UNSUPPORTED naming the first such node and its op.  Tensors of
 * graphs allocated before must be allocated again. */
LOOM_API int loom_sched_reserve(loom_sched_t *s, loom_graph_t *g);
/* Plans g if needed and places every tensor it needs that has no place
 * yet (the application then sets its inputs).  Cheap when g is the graph
 * allocated last and unchanged. */
LOOM_API int loom_sched_alloc_graph(loom_sched_t *s, loom_graph_t *g);
/* Allocates g if needed, then runs its pieces in order, copying inputs
 * across devices; returns when every backend is done. */
LOOM_API int loom_sched_compute(loom_sched_t *s, loom_graph_t *g);
/* Of the last plan used: its pieces, the input copies one compute makes,
 * the backend of a node of the graph it was used for, while that graph
 * lives (NULL for views and unknown nodes); the compute memory of backend
 * i; plans made since loom_sched_new(). */
LOOM_API size_t loom_sched_n_pieces(const loom_sched_t *s);
LOOM_API size_t loom_sched_n_copies(const loom_sched_t *s);
LOOM_API uint64_t loom_sched_n_plans(const loom_sched_t *s);
LOOM_API loom_backend_t *loom_sched_node_backend(const loom_sched_t *s,
						 const struct loom_tensor *node);
LOOM_API size_t loom_sched_buffer_size(const loom_sched_t *s, size_t i);

/* What a scheduler has done since loom_sched_new().  The caller sets size
 * to sizeof(struct loom_sched_stats); fields are only ever appended, and
 * the scheduler fills at most size bytes. */
struct loom_sched_stats {
	uint32_t size;
	uint64_t n_plans;       /* graphs planned */
	uint64_t n_reused;      /* new graphs that found a plan of their shape */
	uint64_t n_computes;    /* computes that succeeded */
	uint64_t n_supports_op; /* supports_op questions asked while planning */
	uint64_t n_copies_early; /* copies made while the previous piece ran */
	double plan_s;          /* seconds spent planning */
	double copy_s;          /* seconds the host spent copying */
	double wait_s;          /* seconds the host waited for a piece's
				 * result before copying it */
	/* Of the last plan used. */
	size_t n_pieces;
	size_t n_copies;        /* per compute */
	size_t copy_bytes;      /* per compute */
};

LOOM_API int loom_sched_get_stats(const loom_sched_t *s,
				  struct loom_sched_stats *out);

/* ------------------------------------------------------------------------
 * The meta device: one device made of N devices, tensor parallel.
 * It needs the meta plugin; without it these return LOOM_E_NOT_FOUND.
 */
enum loom_split_state {
	LOOM_SPLIT_DIM0 = 0, /* dimension d cut into N consecutive slices */
	LOOM_SPLIT_DIM1,
	LOOM_SPLIT_DIM2,
	LOOM_SPLIT_DIM3,
	LOOM_SPLIT_MIRRORED, /* whole on every device */
	LOOM_SPLIT_PARTIAL,  /* every device holds a summand */
};

#define LOOM_SPLIT_MAX_SEGMENTS 8

/* What a split callback says of a weight or cache tensor.  The meta device
 * sizes the slices; the callback only gives structure. */
struct loom_split {
	enum loom_split_state state;
	/* Slices along the axis are multiples of this (0 or 1: any). */
	int64_t granularity;
	/* Segments along the axis, each split separately (a fused QKV is
	 * three); 0 segments means one of the whole axis. */
	int n_segments;
	int64_t segments[LOOM_SPLIT_MAX_SEGMENTS];
};

/* Returns LOOM_OK and fills *out, or an error to refuse the tensor. */
typedef int (*loom_split_fn)(const struct loom_tensor *t,
			     struct loom_split *out, void *userdata);

/* Shape facts the default split policy needs for whole heads. */
struct loom_meta_model {
	int64_t head_dim;
	int64_t n_head;
	int64_t n_head_kv;
};

/* The heads of one attention split unit: the fewest u that divide
 * n_heads, leave at least min_units units to share (u * min_units <=
 * n_heads), and make u * head_values (a head's rows, or a GQA group's) a
 * whole number of 256-value blocks, else of 32-value ones; 1 where none
 * does.  Cut in such units, every member's slice of a quantized
 * projection is whole blocks of any type.  The default policy and the
 * model library's cut attention so. */
LOOM_API int64_t loom_meta_head_unit(int64_t n_heads, int64_t head_values,
				     int64_t min_units);

/* The default transformer policy (by tensor name; userdata is a
 * struct loom_meta_model * or NULL):
 *   *attn_q*, *attn_k*, *attn_v*, *attn_qkv*, *ffn_up*, *ffn_gate*
 *       (and their *_exps forms)            SPLIT(1) by whole heads/GQA groups
 *   *attn_output*, *ffn_down*, *ffn_down_exps* SPLIT(0)
 *   *cache_k*, *cache_v*                    split by heads
 *   output, output.weight                   SPLIT(1)
 *   everything else (norms, token_embd)     MIRRORED
 * Names containing "norm", and *ffn_gate_inp* (the MoE router), are
 * MIRRORED.  Granularities: attn_q and attn_output by whole GQA groups
 * (head_dim * n_head / n_head_kv), attn_k and attn_v by whole heads, so
 * that each device holds the query heads of its key/value heads (with
 * one key/value head, attn_q and attn_output by whole query heads, and
 * attn_k, attn_v and the cache MIRRORED); a fused
 * attn_qkv is three segments (q, k, v) when its width matches the model;
 * FFN slices are multiples of 256 when n_ff allows, else of 32 (so
 * up/gate and down agree for any weight type, K-quants included).  The cache is split on the dimension of
 * size n_head_kv, or on a dimension of head_dim * n_head_kv by whole
 * heads.  Without a model the head width is guessed (128, else 64, else
 * 1), which can give slices that do not line up: the meta device then
 * reports an error rather than a wrong result.  Pass the model for GQA.
 */
LOOM_API int loom_meta_split_default(const struct loom_tensor *t,
				     struct loom_split *out, void *userdata);

struct loom_meta_opts {
	uint32_t size;        /* sizeof(struct loom_meta_opts) */
	const float *ratios;  /* n weights, NULL for even; need not sum to 1;
			       * over a world, on one scale on every rank */
	enum loom_type reduce_type; /* F32 (default) or BF16 */
	size_t bf16_min_bytes;      /* with BF16: reduce in BF16 from here */
	bool force_fallback;        /* never use a plugin's allreduce */
	/* The world to span (loom_reg_by_name("mpi") under mpirun): every
	 * rank makes the meta device of its own members with the same
	 * options, the slices are cut over the members of all ranks, and
	 * each rank holds only its own.  NULL: LOOM_META_WORLD decides
	 * ("mpi", or unset for this process alone). */
	loom_reg_t *world;
};

/* Makes (or finds: same members, callback, userdata and options) a meta
 * device over devs (a device may appear twice).  split NULL means
 * loom_meta_split_default.  The device is owned by the meta plugin and
 * keeps userdata, which must stay valid while the device is used. */
LOOM_API int loom_meta_dev_new(loom_dev_t *const *devs, size_t n,
			       loom_split_fn split, void *userdata,
			       const struct loom_meta_opts *opts,
			       loom_dev_t **out);
/* Dry run: plans g on meta device dev as compute would, without memory or
 * computing, and fails where compute would, with its message (an op
 * without a rule for its sources' split states names op, tensor and
 * states). */
LOOM_API int loom_meta_check(loom_dev_t *dev, loom_graph_t *g);

/* ------------------------------------------------------------------------
 * Entry points: optional functions a plugin offers by name (its reg's
 * get_proc_address, loom-plugin.h), which the core resolves once at
 * registration and an application with loom_reg_proc_address().  A
 * plugin offers any subset; the core falls back where one is absent.
 * Every function returns LOOM_OK or a LOOM_E_*.
 */

/* "set_tensor_2d" / "get_tensor_2d": n_copies rows of size bytes, row i at
 * offset + i * stride_tensor in t and at i * stride_data in data.
 * Fallback: a loop of set_tensor / get_tensor. */
#define LOOM_PROC_SET_TENSOR_2D "set_tensor_2d"
#define LOOM_PROC_GET_TENSOR_2D "get_tensor_2d"
typedef int (*loom_set_tensor_2d_fn)(loom_buffer_t *buf,
				     struct loom_tensor *t, const void *data,
				     size_t offset, size_t size,
				     size_t n_copies, size_t stride_tensor,
				     size_t stride_data);
typedef int (*loom_get_tensor_2d_fn)(loom_buffer_t *buf,
				     const struct loom_tensor *t, void *data,
				     size_t offset, size_t size,
				     size_t n_copies, size_t stride_tensor,
				     size_t stride_data);

/* "set_tensor_2d_async" / "get_tensor_2d_async": the same on a backend's
 * stream.  Fallback: a loop of the backend's 1D async copies. */
#define LOOM_PROC_SET_TENSOR_2D_ASYNC "set_tensor_2d_async"
#define LOOM_PROC_GET_TENSOR_2D_ASYNC "get_tensor_2d_async"
typedef int (*loom_set_tensor_2d_async_fn)(loom_backend_t *be,
					   struct loom_tensor *t,
					   const void *data, size_t offset,
					   size_t size, size_t n_copies,
					   size_t stride_tensor,
					   size_t stride_data);
typedef int (*loom_get_tensor_2d_async_fn)(loom_backend_t *be,
					   const struct loom_tensor *t,
					   void *data, size_t offset,
					   size_t size, size_t n_copies,
					   size_t stride_tensor,
					   size_t stride_data);

/* "allreduce": sums tensors[0..n) in place (same shape, F32), tensors[i]
 * on backends[i]'s device; all backends come from this plugin.  The result
 * is ordered on every stream like any other work.  Return LOOM_E_DECLINED
 * to leave the call to the meta device's generic path (a device repeated,
 * a type or size the collective does not serve).  Fallback: the meta
 * device's own reduce over async copies and an add. */
#define LOOM_PROC_ALLREDUCE "allreduce"
struct loom_allreduce_opts {
	uint32_t size;              /* sizeof(struct loom_allreduce_opts) */
	enum loom_type reduce_type; /* F32, or BF16 to halve the bytes */
};
typedef int (*loom_allreduce_fn)(loom_backend_t *const *backends,
				 struct loom_tensor *const *tensors, size_t n,
				 const struct loom_allreduce_opts *opts);

/* "split_buffer_type": a buffer type whose 2D weights are split by rows
 * over devs in proportion to ratios (NULL: even).  Owned by the plugin.
 * No fallback: absent means the feature is absent. */
#define LOOM_PROC_SPLIT_BUFFER_TYPE "split_buffer_type"
typedef int (*loom_split_buffer_type_fn)(loom_dev_t *const *devs, size_t n,
					 const float *ratios,
					 loom_buffer_type_t **out);

/* "host_buffer_type": pinned host memory for dev.  Fallback: none (NULL). */
#define LOOM_PROC_HOST_BUFFER_TYPE "host_buffer_type"
typedef loom_buffer_type_t *(*loom_host_buffer_type_fn)(loom_dev_t *dev);

/* "weight_buffer_type": a buffer type for weights that only
 * loom_mul_mat reads, as its first source, stored in a layout the device
 * chooses (the CPU plugin interleaves Q4_0 rows 16 at a time).  Its
 * buffers' set, get and memset still see the usual layout, at any offset;
 * an op that reads such a tensor otherwise (a view of it, get_rows, a
 * copy) is refused by supports_op and by graph_compute.  is_host is false,
 * so no other plugin reads the bytes directly.  Fallback: the device's
 * buffer type. */
#define LOOM_PROC_WEIGHT_BUFFER_TYPE "weight_buffer_type"
typedef loom_buffer_type_t *(*loom_weight_buffer_type_fn)(loom_dev_t *dev);

/* "set_n_threads".  Fallback: LOOM_E_UNSUPPORTED. */
#define LOOM_PROC_SET_N_THREADS "set_n_threads"
typedef int (*loom_set_n_threads_fn)(loom_backend_t *be, int n_threads);

/* "get_features": a list of name/value pairs ending with a NULL name
 * (e.g. {"AVX512F", "1"}), owned by the plugin.  Fallback: none. */
#define LOOM_PROC_GET_FEATURES "get_features"
struct loom_feature {
	const char *name;
	const char *value;
};
typedef const struct loom_feature *(*loom_get_features_fn)(loom_reg_t *reg);

/* "meta_device_new", "meta_check" and "split_default": a composing
 * plugin's (LOOM_PLUGIN_COMPOSES) implementations of loom_meta_dev_new(),
 * loom_meta_check() and loom_meta_split_default() (a loom_split_fn). */
#define LOOM_PROC_META_DEVICE_NEW "meta_device_new"
#define LOOM_PROC_META_CHECK "meta_check"
#define LOOM_PROC_SPLIT_DEFAULT "split_default"
typedef int (*loom_meta_device_new_fn)(loom_dev_t *const *devs, size_t n,
				       loom_split_fn split, void *userdata,
				       const struct loom_meta_opts *opts,
				       loom_dev_t **out);
typedef int (*loom_meta_check_fn)(loom_dev_t *dev, loom_graph_t *g);

/* "meta_buffer_dev_sizes" / "meta_backend_dev_sizes" (meta plugin): the
 * bytes each member device holds for a meta buffer's tensors, or for a
 * meta backend's compute graphs; sizes[j] for member j, j < n. */
#define LOOM_PROC_META_BUFFER_DEV_SIZES "meta_buffer_dev_sizes"
#define LOOM_PROC_META_BACKEND_DEV_SIZES "meta_backend_dev_sizes"
typedef int (*loom_meta_buffer_dev_sizes_fn)(loom_buffer_t *buf,
					     size_t *sizes, size_t n);
typedef int (*loom_meta_backend_dev_sizes_fn)(loom_backend_t *be,
					      size_t *sizes, size_t n);

/* "meta_tensor_slice" (meta plugin): member j's descriptor of its slice of
 * t, a tensor of a meta buffer, in *out (NULL where member j holds none
 * of it), its memory ready.  The meta buffer owns the descriptor.  Shows
 * where a slice lives (its buffer, of the member's weight buffer type in
 * a buffer of the meta device's). */
#define LOOM_PROC_META_TENSOR_SLICE "meta_tensor_slice"
typedef int (*loom_meta_tensor_slice_fn)(const struct loom_tensor *t,
					 size_t j, struct loom_tensor **out);

/* The world: the processes of one SPMD job (the mpi plugin).  Every rank
 * runs the same application; the collectives below must be called by
 * every rank in the same order.  Host memory only.  A collective that
 * has not completed within the world's timeout (LOOM_MPI_TIMEOUT seconds,
 * default 300) fails with LOOM_E_IO on every rank that waits, naming the
 * ranks that did not answer, and every later call fails with
 * LOOM_E_STATE: a rank that died never leaves the others hanging.  No
 * fallback: without the plugin there is no world. */
#define LOOM_PROC_WORLD "world"
struct loom_world {
	uint32_t size;    /* sizeof(struct loom_world), set by the caller */
	int rank;         /* this process, 0 .. n_ranks - 1 */
	int n_ranks;
	int local_rank;   /* among the ranks on this host */
	int n_local;
};
typedef int (*loom_world_fn)(loom_reg_t *reg, struct loom_world *out);

/* "world_allreduce": sums n values of type (F32 or BF16) in place across
 * every rank; every rank gets the same result. */
#define LOOM_PROC_WORLD_ALLREDUCE "world_allreduce"
typedef int (*loom_world_allreduce_fn)(loom_reg_t *reg, void *data,
				       size_t n, enum loom_type type);

/* "world_allreduce_bare": the same sum as "world_allreduce" (same
 * arguments, checked alike) as one plain blocking MPI_Allreduce, with no
 * deadline: a rank that died hangs the others.  A reference for
 * benchmarks (loom-bench allreduce --world), so that world_allreduce's
 * time over it is the plugin's own overhead; applications use
 * world_allreduce. */
#define LOOM_PROC_WORLD_ALLREDUCE_BARE "world_allreduce_bare"

/* "world_bcast": copies size bytes at data on rank root to data on every
 * other rank. */
#define LOOM_PROC_WORLD_BCAST "world_bcast"
typedef int (*loom_world_bcast_fn)(loom_reg_t *reg, void *data, size_t size,
				   int root);

/* "world_gather": every rank's bytes, one after the other in rank order:
 * rank r gives sizes[r] bytes at mine, and root gets them all in all
 * (sizes[0] + ... + sizes[n_ranks - 1] bytes; rank r's after those of
 * the ranks before it), or every rank does when root is -1.  sizes (one
 * per rank) must be the same on every rank; all is read only where it is
 * written; mine may be the rank's own place in all. */
#define LOOM_PROC_WORLD_GATHER "world_gather"
typedef int (*loom_world_gather_fn)(loom_reg_t *reg, const void *mine,
				    void *all, const size_t *sizes, int root);

/* "world_barrier": returns once every rank has called it. */
#define LOOM_PROC_WORLD_BARRIER "world_barrier"
typedef int (*loom_world_barrier_fn)(loom_reg_t *reg);

/* "allreduce_world": "allreduce" across the ranks of a world, for a
 * plugin whose collective spans processes by itself (NCCL, its id sent
 * from world rank 0 with the world's "world_bcast"): every rank passes
 * its own members' tensors and each gets the sum over all members of all
 * ranks.  It may decline (LOOM_E_DECLINED) only for what every rank
 * shares (type, shape); anything else is an error.  Fallback: the meta
 * device's local reduce, one "world_allreduce" on host memory, and a
 * local copy back. */
#define LOOM_PROC_ALLREDUCE_WORLD "allreduce_world"
struct loom_world_group {
	uint32_t size;     /* sizeof(struct loom_world_group) */
	loom_reg_t *world; /* the world's plugin */
	int n_members;     /* members over every rank */
	int first;         /* the world index of backends[0]'s member */
	uint64_t key;      /* names the group alike on every rank */
};
typedef int (*loom_allreduce_world_fn)(loom_backend_t *const *backends,
				       struct loom_tensor *const *tensors,
				       size_t n,
				       const struct loom_allreduce_opts *opts,
				       const struct loom_world_group *group);

/* "allreduce_world_prepare": makes now what "allreduce_world" needs for
 * these n devices of this rank in group (its communicators), so that the
 * first compute does not; called by every rank at once, as a collective
 * (a meta device over the world, when it is made).  A rank that fails
 * says so; the meta device then compares every rank's status. */
#define LOOM_PROC_ALLREDUCE_WORLD_PREPARE "allreduce_world_prepare"
typedef int (*loom_allreduce_world_prepare_fn)(
	loom_dev_t *const *devs, size_t n,
	const struct loom_world_group *group);

/* The entry points above but the world's, each once: X(NAME) for
 * LOOM_PROC_NAME.  The core resolves each when a plugin registers, and
 * loom-info lists them; the world's are the world plugin's to its users. */
#define LOOM_PROC_MAP(X)                                                     \
	X(SET_TENSOR_2D)                                                     \
	X(GET_TENSOR_2D)                                                     \
	X(SET_TENSOR_2D_ASYNC)                                               \
	X(GET_TENSOR_2D_ASYNC)                                               \
	X(ALLREDUCE)                                                         \
	X(SPLIT_BUFFER_TYPE)                                                 \
	X(HOST_BUFFER_TYPE)                                                  \
	X(WEIGHT_BUFFER_TYPE)                                                \
	X(SET_N_THREADS)                                                     \
	X(GET_FEATURES)                                                      \
	X(META_DEVICE_NEW)                                                   \
	X(META_CHECK)                                                        \
	X(SPLIT_DEFAULT)                                                     \
	X(META_BUFFER_DEV_SIZES)                                             \
	X(META_BACKEND_DEV_SIZES)                                            \
	X(ALLREDUCE_WORLD)                                                    \
	X(ALLREDUCE_WORLD_PREPARE)

#ifdef __cplusplus
}
#endif

#endif /* LOOM_BACKEND_H */
