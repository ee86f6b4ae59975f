/* SPDX-License-Identifier: MIT */
/* loom-plugin.h - the plugin ABI: the interface tables a plugin fills, its
 * descriptor, the constructors that wrap its objects, and the optional
 * entry points resolved by name.  doc/plugin-guide.md walks through
 * writing one.
 *
 * Rules that keep this an ABI:
 * - every table starts with `uint32_t size` (sizeof as the plugin was
 *   built) and grows only at the end; the core copies at most `size` bytes
 *   into a zeroed table it owns, so slots newer than the plugin read NULL
 *   (a comment at the end of each version's slots says which ABI they
 *   came with);
 * - the descriptor's ABI major must equal the core's and its minor must
 *   not exceed it: a plugin built against ABI 1.0 loads into a 1.1 core
 *   (its tables are shorter; the core applies each missing slot's
 *   default), a plugin built against 1.1 is refused by a 1.0 core, the
 *   reason naming both versions.  The size of each table, not the minor,
 *   says which slots a plugin filled;
 * - each slot says `required` or `optional: NULL means ...`; a plugin
 *   missing a required slot is refused, naming the slot;
 * - fill tables with designated initializers (.get_name = my_get_name).
 *
 * The contract: what the core promises a plugin and asks of it.
 *
 * What reaches graph_compute.  The graph is the application's own, node
 * for node, in its order: loom_backend_graph_compute() checks it first
 * (every node is what its op's rule makes of its sources: type, sizes,
 * strides and view; each node comes after the nodes it reads; every
 * tensor lies inside a live buffer) and then hands it over unchanged.  So
 * nodes that need no work do reach the plugin: views (VIEW, RESHAPE,
 * PERMUTE, TRANSPOSE, loom_op_is_view()), whose data already points into
 * their source; NONE nodes (a leaf added with loom_graph_add_node()); and
 * nodes with zero elements.  graph_compute skips them.  The core does not
 * ask supports_op first and does not check that the buffers are ones the
 * device can read (the scheduler, loom_sched_*, does both): a node the
 * device cannot run is answered with LOOM_E_UNSUPPORTED naming the op.
 * supports_op is asked about views and NONE nodes too; say true.  The
 * plugin changes nothing of the graph but the bytes of its nodes' data.
 *
 * Memory an output shares with an input.  A view's data is its source's
 * (view_src, at view_offs).  SET_ROWS writes in place: its result is a
 * view of src[0].  COPY's result is a view of src[1], its destination,
 * which shares no bytes with src[0] unless the two are the very same
 * bytes (then there is nothing to do).  Otherwise the graph allocator
 * never places a node's result over bytes a source of that node holds
 * (sources are released only after the node); an application that places
 * tensors itself (loom_tensor_place) may overlap them, and the core does
 * not check that.
 *
 * Alignment.  get_alignment is the alignment of offsets from get_base:
 * every tensor the core places (loom_tensor_place, the context and graph
 * allocators) starts at a multiple of it, and takes get_alloc_size bytes.
 * Return a base aligned at least as much, and the addresses are aligned
 * too; the core does not check the base.  A view starts wherever its
 * offset puts it (a row of a matrix, one head of a cache): never assume a
 * view's data is aligned.
 *
 * get_base.  The address the data pointers of a buffer's tensors are
 * relative to: a tensor placed at offset o has data = base + o.  Read
 * once, when loom_buffer_new() makes the buffer, and never again; not
 * NULL unless the buffer has 0 bytes.  It need not be an address the host
 * can read: a device address, or any fixed non-NULL value for memory
 * reached some other way (the meta device's buffers).  The core never
 * reads or writes through tensor data pointers; every byte moves through
 * the buffer's and backend's methods.
 *
 * Who frees what when init fails.  Every reg that init made with
 * loom_reg_new() and did not hand back registered is destroyed by the
 * core, after init returns: first its free method runs (so it must cope
 * with a half-built plugin: devices or buffer types missing, contexts
 * NULL), then the core frees the wrappers of its devices and buffer
 * types.  The contexts are the plugin's: free them in reg's free method,
 * or before returning when loom_reg_new() was never reached.  A
 * constructor that fails (a required slot missing) made nothing: the
 * context passed to it is still the caller's to free.  Then the file is
 * closed (dlclose), so init must leave no thread running and no handler
 * registered.  The same holds for init returning LOOM_E_NOT_APPLICABLE.
 * At unload, reg's free method runs once every buffer, backend and event
 * of the plugin is gone, latest-loaded plugin first.
 *
 * Threads.  score, init and reg's free are never called concurrently with
 * any other load, unload, score or init.  A backend is a stream: the
 * application calls one backend from one thread at a time, so its
 * methods never overlap one another; different backends (also of one
 * device) may be driven from different threads at once.  Every other
 * method may be called from any thread, several at once, also while
 * backends compute: the queries of regs, devices and buffer types
 * (get_name, get_type, get_rank, get_memory, supports_op, get_alignment,
 * ...), init_backend, alloc_buffer, event_new, and a buffer's set, get,
 * memset and copy for different tensors.  A free method runs once, when
 * nothing else uses its object.  A plugin's methods and its ELF
 * constructors must not load or unload plugins (LOOM_E_STATE).
 *
 * Ranks.  get_rank (ABI 1.1) says how readily the default device order
 * (loom_dev_get) takes the device: higher ranks first, then GPU, IGPU,
 * ACCEL, CPU, META (enum loom_dev_rank in loom-backend.h).  A device that
 * declares none is LOOM_DEV_RANK_NONE and comes after every ranked one.
 * Declare PRIMARY only for a device that runs everything an application
 * may ask of it (Loom's CPU and GPU plugins do); a device of a few ops is
 * MARGINAL.  Ranks are the four named values: any other is refused when
 * the plugin loads.  LOOM_BACKENDS, when set, orders plugins before rank.
 */
#ifndef LOOM_PLUGIN_H
#define LOOM_PLUGIN_H

#include "loom-backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The plugin ABI and libloom's symbol versions tell one story: ABI 1.N
 * is what libloom's version node LOOM_1.N holds (libloom.sym), tables
 * and descriptor fields appended and functions exported alike.  A plugin
 * of ABI 1.N loads into a core of 1.M for N <= M; a plugin that calls a
 * function of a newer node fails with that node's name. */
#define LOOM_ABI_MAJOR 1
#define LOOM_ABI_MINOR 2

/* ------------------------------------------------------------------------
 * Buffer type.
 */
struct loom_buffer_type_iface {
	uint32_t size;
	/* required */
	const char *(*get_name)(loom_buffer_type_t *buft);
	/* required: allocate a buffer of size bytes with loom_buffer_new() */
	int (*alloc_buffer)(loom_buffer_type_t *buft, size_t size,
			    loom_buffer_t **out);
	/* required: a power of two; tensors are placed at offsets from
	 * get_base that are multiples of it (see "Alignment" above) */
	size_t (*get_alignment)(loom_buffer_type_t *buft);
	/* optional: NULL means SIZE_MAX */
	size_t (*get_max_size)(loom_buffer_type_t *buft);
	/* optional: NULL means loom_tensor_n_bytes(t) */
	size_t (*get_alloc_size)(loom_buffer_type_t *buft,
				 const struct loom_tensor *t);
	/* optional: NULL means false */
	bool (*is_host)(loom_buffer_type_t *buft);
	/* Methods above are valid for ABI 1.0. */
};

/* ------------------------------------------------------------------------
 * Buffer.  Offsets and sizes reaching these methods have been checked by
 * the core against the tensor's bytes.
 */
struct loom_buffer_iface {
	uint32_t size;
	/* optional: NULL means nothing to release */
	void (*free_buffer)(loom_buffer_t *buf);
	/* required: the address tensors' data pointers are relative to
	 * (see "get_base" above) */
	void *(*get_base)(loom_buffer_t *buf);
	/* optional: NULL means nothing to do when a tensor is placed */
	int (*init_tensor)(loom_buffer_t *buf, struct loom_tensor *t);
	/* optional: NULL means set_tensor from a filled host block */
	int (*memset_tensor)(loom_buffer_t *buf, struct loom_tensor *t,
			     uint8_t value, size_t offset, size_t size);
	/* required */
	int (*set_tensor)(loom_buffer_t *buf, struct loom_tensor *t,
			  const void *data, size_t offset, size_t size);
	/* required */
	int (*get_tensor)(loom_buffer_t *buf, const struct loom_tensor *t,
			  void *data, size_t offset, size_t size);
	/* optional: copy src (any buffer) into dst (this buffer); return
	 * LOOM_E_DECLINED when it cannot.  NULL means declined: the core
	 * stages the copy through host memory. */
	int (*copy_tensor)(loom_buffer_t *buf, const struct loom_tensor *src,
			  struct loom_tensor *dst);
	/* required: fill the whole buffer */
	int (*clear)(loom_buffer_t *buf, uint8_t value);
	/* Methods above are valid for ABI 1.0. */
};

/* ------------------------------------------------------------------------
 * Backend: a stream of work on one device.
 */
struct loom_backend_iface {
	uint32_t size;
	/* required */
	const char *(*get_name)(loom_backend_t *be);
	/* required: release the context (the core waits first) */
	void (*free)(loom_backend_t *be);
	/* optional: NULL means synchronize, then a blocking set */
	int (*set_tensor_async)(loom_backend_t *be, struct loom_tensor *t,
				const void *data, size_t offset, size_t size);
	/* optional: NULL means synchronize, then a blocking get */
	int (*get_tensor_async)(loom_backend_t *be,
				const struct loom_tensor *t, void *data,
				size_t offset, size_t size);
	/* optional: copy src into dst (dst on this backend's device); return
	 * LOOM_E_DECLINED when it cannot.  NULL means declined: the core
	 * synchronizes both backends and copies blocking. */
	int (*copy_tensor_async)(loom_backend_t *be_src, loom_backend_t *be_dst,
				const struct loom_tensor *src,
				struct loom_tensor *dst);
	/* optional: NULL means the backend never has work in flight */
	int (*synchronize)(loom_backend_t *be);
	/* required: may return before the work is done.  Views, NONE
	 * nodes and empty nodes reach it too and need no work (see "What
	 * reaches graph_compute" above). */
	int (*graph_compute)(loom_backend_t *be, loom_graph_t *g);
	/* optional: NULL means synchronize the backend, then signal */
	int (*event_record)(loom_backend_t *be, loom_event_t *ev);
	/* optional: NULL means nothing to wait for (record synchronized) */
	int (*event_wait)(loom_backend_t *be, loom_event_t *ev);
	/* Methods above are valid for ABI 1.0. */
};

/* ------------------------------------------------------------------------
 * Device.
 */
struct loom_dev_iface {
	uint32_t size;
	/* required: "<plugin><index>", e.g. cuda1 */
	const char *(*get_name)(loom_dev_t *dev);
	/* optional: NULL means the name */
	const char *(*get_description)(loom_dev_t *dev);
	/* optional: NULL means 0 free, 0 total (unknown) */
	void (*get_memory)(loom_dev_t *dev, size_t *free, size_t *total);
	/* required */
	enum loom_dev_type (*get_type)(loom_dev_t *dev);
	/* optional: NULL means no capability bits */
	uint32_t (*get_caps)(loom_dev_t *dev);
	/* required: make a backend with loom_backend_new() */
	int (*init_backend)(loom_dev_t *dev, const char *params,
			    loom_backend_t **out);
	/* required */
	loom_buffer_type_t *(*get_buffer_type)(loom_dev_t *dev);
	/* required */
	bool (*supports_op)(loom_dev_t *dev, const struct loom_tensor *op);
	/* optional: NULL means the device's own buffer type, and host
	 * buffer types when the device is a CPU */
	bool (*supports_buft)(loom_dev_t *dev, loom_buffer_type_t *buft);
	/* optional: NULL means events are emulated by the core */
	int (*event_new)(loom_dev_t *dev, loom_event_t *ev);
	/* optional: NULL means nothing to release */
	void (*event_free)(loom_dev_t *dev, loom_event_t *ev);
	/* optional: NULL means nothing to wait for */
	int (*event_synchronize)(loom_dev_t *dev, loom_event_t *ev);
	/* Methods above are valid for ABI 1.0. */
	/* optional: one of enum loom_dev_rank, the same on every call (see
	 * "Ranks" above).  NULL means LOOM_DEV_RANK_NONE. */
	enum loom_dev_rank (*get_rank)(loom_dev_t *dev);
	/* Methods above are valid for ABI 1.1. */
};

/* ------------------------------------------------------------------------
 * Registry entry: what a plugin's init returns.
 */
struct loom_reg_iface {
	uint32_t size;
	/* required: the plugin's name, e.g. "cuda" */
	const char *(*get_name)(loom_reg_t *reg);
	/* required */
	size_t (*get_dev_count)(loom_reg_t *reg);
	/* required: i < get_dev_count */
	loom_dev_t *(*get_dev)(loom_reg_t *reg, size_t i);
	/* optional: NULL means no entry points */
	void *(*get_proc_address)(loom_reg_t *reg, const char *name);
	/* optional: NULL means nothing to release at unload */
	void (*free)(loom_reg_t *reg);
	/* Methods above are valid for ABI 1.0. */
};

/* ------------------------------------------------------------------------
 * The descriptor: the one symbol a plugin exports, read with dlsym before
 * any plugin function runs.  It grows at the end like the tables; since
 * ABI 1.2 its last field says its size.  The core reads no byte past the
 * symbol's size in the plugin's symbol table: first the ABI version
 * (8 bytes), then the fields that version has (through score before
 * 1.2, through size since), then none past size.  A descriptor too short
 * for what it declares is refused ("descriptor of 2 bytes cannot hold
 * its ABI version").  A descriptor given to loom_load_static() has no
 * symbol: it is read as the version it declares.
 */
#define LOOM_PLUGIN_SYMBOL "loom_plugin_descriptor"

struct loom_plugin_desc {
	uint32_t abi_major; /* must equal the core's */
	uint32_t abi_minor; /* must not exceed the core's */
	const char *name;   /* "cpu"; the file is loom-<name>[-<variant>].so */
	const char *version;
	/* required: make the registry entry with loom_reg_new().  Return
	 * LOOM_E_NOT_APPLICABLE, with loom_error_set() saying why, when the
	 * hardware or driver is absent: the file is then "not-applicable",
	 * not "failed".  A reg with zero devices is loaded as is.  On any
	 * failure the core destroys the regs init made (see "Who frees
	 * what when init fails" above). */
	int (*init)(loom_reg_t **out);
	/* optional: 0 when the plugin cannot run here (then *why says so);
	 * among variants of one name the highest wins.  NULL means 1. */
	int (*score)(const char **why);
	/* Fields above are valid for ABI 1.0. */
	/* sizeof(struct loom_plugin_desc) as the plugin was built. */
	uint32_t size;
	uint32_t flags; /* LOOM_PLUGIN_* */
	/* Fields above are valid for ABI 1.2; the core reads them only from
	 * plugins of ABI 1.2 or later. */
};

/* Descriptor flags: what a plugin declares of itself. */
enum {
	/* Its devices are made of other plugins' devices: it initialises
	 * after every other plugin (and is unloaded before them), and
	 * loom_meta_dev_new(), loom_meta_check() and
	 * loom_meta_split_default() reach it through its entry points. */
	LOOM_PLUGIN_COMPOSES = 1u << 0,
};

/* ------------------------------------------------------------------------
 * Split rules: how a device that holds a tensor in slices (the meta
 * device's split states, loom-backend.h) carries an op's sources' states
 * to its result.  Each op names one in the core's table of ops; the
 * device implements each rule once.  The op's LOOM_OPF_ADDITIVE and
 * LINEAR flags (loom.h) say where PARTIAL values pass.
 */
enum loom_split_rule {
	LOOM_SPLIT_RULE_NONE,     /* no rule: the device refuses the op */
	LOOM_SPLIT_RULE_ELEMENTWISE, /* a op b, b broadcast over a */
	LOOM_SPLIT_RULE_MAP,      /* each value alone: the state passes */
	LOOM_SPLIT_RULE_ROWS,     /* each row of dimension 0 whole */
	LOOM_SPLIT_RULE_ARGMAX,   /* rows whole; the result's dimension 0 is
				     the source's dimension 1 */
	LOOM_SPLIT_RULE_SOFT_MAX, /* rows whole; the mask meets the source */
	LOOM_SPLIT_RULE_ROPE,     /* rotation pairs whole; positions whole */
	LOOM_SPLIT_RULE_MUL_MAT,  /* products over dimension 0 */
	LOOM_SPLIT_RULE_GET_ROWS, /* rows of a table picked by whole ids */
	LOOM_SPLIT_RULE_WRITE,    /* the written source's state */
	LOOM_SPLIT_RULE_CONCAT,   /* not along the split dimension */
	LOOM_SPLIT_RULE_VIEW,     /* the split mapped through the view */
	LOOM_SPLIT_RULE_ADD_ID,   /* a and the biases split alike along
				     dimension 0; ids whole */
	LOOM_SPLIT_RULE_COUNT
};

/* The split rule of op; LOOM_SPLIT_RULE_NONE for an invalid op. */
LOOM_API enum loom_split_rule loom_op_split_rule(enum loom_op op);

/* Defines and exports the descriptor.  Use once per plugin. */
#define LOOM_PLUGIN_DEFINE(name_, version_, init_, score_)                   \
	LOOM_PLUGIN_DEFINE_FLAGS(name_, version_, init_, score_, 0)
/* The same, with LOOM_PLUGIN_* flags. */
#define LOOM_PLUGIN_DEFINE_FLAGS(name_, version_, init_, score_, flags_)     \
	__attribute__((visibility("default"))) const struct loom_plugin_desc \
		loom_plugin_descriptor = {                                   \
			.abi_major = LOOM_ABI_MAJOR,                         \
			.abi_minor = LOOM_ABI_MINOR,                         \
			.name = (name_),                                     \
			.version = (version_),                               \
			.init = (init_),                                     \
			.score = (score_),                                   \
			.flags = (flags_),                                   \
			.size = sizeof(struct loom_plugin_desc),             \
		}

/* ------------------------------------------------------------------------
 * Constructors.  The core copies iface (at most iface->size bytes) and
 * checks required slots; a missing one fails with LOOM_E_PLUGIN naming
 * it.  The core owns the returned wrapper; context stays the plugin's.
 */
/* Freed by the core at unload, after reg's free method. */
LOOM_API int loom_reg_new(const struct loom_reg_iface *iface, void *context,
			  loom_reg_t **out);
/* Freed by the core with reg. */
LOOM_API int loom_dev_new(loom_reg_t *reg, const struct loom_dev_iface *iface,
			  void *context, loom_dev_t **out);
/* Freed by the core with reg; dev may be NULL. */
LOOM_API int loom_buffer_type_new(loom_reg_t *reg, loom_dev_t *dev,
			   const struct loom_buffer_type_iface *iface,
			   void *context, loom_buffer_type_t **out);
/* Freed by loom_buffer_free(), which calls iface->free_buffer first. */
LOOM_API int loom_buffer_new(loom_buffer_type_t *buft,
			     const struct loom_buffer_iface *iface,
			     void *context, size_t size, loom_buffer_t **out);
/* Freed by loom_backend_free(), which calls iface->free. */
LOOM_API int loom_backend_new(loom_dev_t *dev,
			      const struct loom_backend_iface *iface,
			      void *context, loom_backend_t **out);

LOOM_API void *loom_reg_context(loom_reg_t *reg);
LOOM_API void *loom_dev_context(loom_dev_t *dev);
LOOM_API void *loom_buffer_type_context(loom_buffer_type_t *buft);
LOOM_API void *loom_buffer_context(loom_buffer_t *buf);
LOOM_API void *loom_backend_context(loom_backend_t *be);
/* An event's plugin-side state, set by event_new. */
LOOM_API void *loom_event_context(loom_event_t *ev);
LOOM_API void loom_event_set_context(loom_event_t *ev, void *context);
LOOM_API loom_dev_t *loom_event_device(loom_event_t *ev);

/* loom_error_set, loom_log and loom_env_get, which plugins use too, are
 * declared in loom.h. */

/* A raw node, for plugins that rewrite graphs (the meta device): no shape
 * checks beyond the type here, so that its strides and view may be set
 * after; loom_backend_graph_compute refuses a node that breaks its op's
 * rule.  srcs has LOOM_MAX_SRC entries or is NULL; params has
 * LOOM_MAX_OP_PARAMS words or is NULL. */
LOOM_API struct loom_tensor *loom_tensor_new_op(loom_ctx_t *ctx,
						enum loom_op op,
						enum loom_type type,
						const int64_t ne[LOOM_MAX_DIMS],
						struct loom_tensor *const *srcs,
						const int32_t *params);
/* Appends one node as is (its sources are not visited).  Nodes must end
 * up after the nodes they read: compute refuses a graph where one does
 * not. */
LOOM_API int loom_graph_add_node(loom_graph_t *g, struct loom_tensor *t);

/* ------------------------------------------------------------------------
 * Per-tensor plugin state.  A plugin keeps what it knows about a tensor (a
 * meta device's slices, say) in a slot of a table the core owns, and the
 * tensor carries only the slot's handle in t->state, which the plugin sets.
 * Slots belong to a scope, one per plugin object whose life they share (a
 * buffer, a compiled graph); freeing the scope releases all its slots at
 * once.  A handle names its slot and the slot's generation: once the slot
 * is released every copy of the handle reads as stale, and the check reads
 * only the core's table, never the memory the state pointed at.  The state
 * itself stays the plugin's: the core never frees or reads it.  Every
 * call is thread-safe.
 */
typedef uint64_t loom_state_t; /* 0: no state */
typedef struct loom_state_scope loom_state_scope_t;

/* A new, empty scope.  Only lookups passing the same tag (any address
 * unique to the plugin, e.g. of a static variable) see its states, so a
 * tensor handled by another plugin is never taken for one's own.  Freed
 * by loom_state_scope_free(). */
LOOM_API int loom_state_scope_new(const void *tag, loom_state_scope_t **out);
/* Releases every state of scope (their handles are stale from now on) and
 * the scope.  NULL does nothing. */
LOOM_API void loom_state_scope_free(loom_state_scope_t *scope);
/* Stores state (not NULL; still owned by the caller) in a new slot of
 * scope; *out is its handle, never 0. */
LOOM_API int loom_state_new(loom_state_scope_t *scope, void *state,
			    loom_state_t *out);
/* Releases one state of scope before the scope goes; its handle is stale
 * from now on.  A handle that is 0, stale or not of scope is ignored. */
LOOM_API void loom_state_release(loom_state_scope_t *scope, loom_state_t h);
/* The state that h names, looked up with the tag of its scope: LOOM_OK
 * and *out; LOOM_E_NOT_FOUND (*out NULL) when h is 0, not a handle or of
 * another tag; LOOM_E_STATE (*out NULL) when the state was released.  No
 * message is recorded: absence is an answer, not an error. */
LOOM_API int loom_state_get(loom_state_t h, const void *tag, void **out);
/* loom_state_get() of t->state. */
LOOM_API int loom_tensor_state_get(const struct loom_tensor *t,
				   const void *tag, void **out);

/* The optional entry points a plugin may offer (LOOM_PROC_*, their
 * function types and LOOM_PROC_MAP) are in loom-backend.h: applications
 * resolve them too, with loom_reg_proc_address(). */

#ifdef __cplusplus
}
#endif

#endif /* LOOM_PLUGIN_H */
