/* SPDX-License-Identifier: MIT */
/* loom-private.h - names shared between files of the core (loom__*).
 * Nothing here is part of the API; plugins never see it. */
#ifndef LOOM_PRIVATE_H
#define LOOM_PRIVATE_H

#include "loom/loom-plugin.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* ---- status, log, env (status.c, log.c, env.c) ---- */

/* loom_error_set() with a va_list; returns status. */
int loom__vset_error(int status, const char *fmt, va_list ap)
	__attribute__((format(printf, 2, 0)));
/* Forgets this thread's last error message. */
void loom__clear_error(void);
/* loom_env_get() without logging (for the log level itself). */
const char *loom__getenv_quiet(const char *name);

/* A type's conversions of n values (whole blocks) to F32 and back
 * (quant.c); quantizing rounds to the nearest the block allows. */
struct loom__type_codec {
	void (*to_f32)(const void *src, float *dst, int64_t n);
	void (*from_f32)(const float *src, void *dst, int64_t n);
};

/* type's entry, or NULL for a type that holds no numbers (I32). */
const struct loom__type_codec *loom__type_codec(enum loom_type type);

/* ---- tensors, contexts, graphs (tensor.c, ops.c, graph.c, galloc.c) ---- */

/* Records a message on ctx (when not NULL) and on the thread, and returns
 * status.  Every error of a tensor, op or graph call goes through here. */
int loom__ctx_errorf(loom_ctx_t *ctx, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A new tensor of ctx with contiguous strides, after checking the type and
 * the sizes; NULL with a message naming who otherwise. */
struct loom_tensor *loom__new_tensor(loom_ctx_t *ctx, const char *who,
				     enum loom_type type,
				     const int64_t ne[LOOM_MAX_DIMS]);
/* Sets t's strides to the contiguous ones of its type and ne. */
void loom__tensor_set_contiguous(struct loom_tensor *t);
/* Writes "[ne0, ne1, ne2, ne3] type" into buf; returns buf. */
char *loom__tensor_desc(const struct loom_tensor *t, char *buf, size_t n);
#define LOOM__DESC_MAX 96

/* What an op's rule says a node must be. */
struct loom__op_result {
	enum loom_type type;
	int64_t ne[LOOM_MAX_DIMS];
	size_t nb[LOOM_MAX_DIMS];
	struct loom_tensor *view_src; /* the owner it views, or NULL */
	size_t view_offs;
	bool missing; /* the mistake is a NULL source */
};

/* The rule of t's op (rules.c), applied to t's sources and op_params
 * (and, for views, to its own sizes, strides and view_src): LOOM_OK with
 * *r the result t must be, or LOOM_E_INVAL with the mistake in msg (n
 * bytes; without the op's name).  The op constructors build nodes with
 * it and the graph validator checks nodes with it. */
int loom__op_rule(const struct loom_tensor *t, struct loom__op_result *r,
		  char *msg, size_t n);
/* What a result that views or writes a source is named after that
 * source ("cache_k (view)"); NULL for other ops.  From the table of ops. */
const char *loom__op_suffix(enum loom_op op);

/* bfloat16 to and from F32, rounding to nearest even (a NaN stays a
 * quiet NaN): inline, so that the conversion loops of quant.c vectorize;
 * loom_f32_to_bf16() and loom_bf16_to_f32() are these. */
static inline uint16_t loom__f32_to_bf16(float f)
{
	uint32_t x;

	memcpy(&x, &f, sizeof(x));
	if ((x & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((x >> 16) | 0x40);
	x += 0x7fff + ((x >> 16) & 1);
	return (uint16_t)(x >> 16);
}

static inline float loom__bf16_to_f32(uint16_t h)
{
	uint32_t x = (uint32_t)h << 16;
	float f;

	memcpy(&f, &x, sizeof(f));
	return f;
}

/* Checks g before a plugin computes it (validate.c): every tensor's type
 * and sizes, every node against its op's rule and after the nodes it
 * reads, and every tensor's bytes inside its live buffer.  Messages name
 * the backend be.  Returns LOOM_OK or the status of the first
 * mistake, with a message naming the node and its op. */
int loom__graph_validate(loom_graph_t *g, loom_backend_t *be);
/* Where t is in g (graph.c): its index when it is a node, else
 * LOOM__GRAPH_LEAF or LOOM__NOT_IN_GRAPH. */
#define LOOM__GRAPH_LEAF (-1)
#define LOOM__NOT_IN_GRAPH (-2)
long loom__graph_find(const loom_graph_t *g, const struct loom_tensor *t);
/* The key validate.c stored for the last state of g it found good (0:
 * none yet), and storing it.  Graphs only keep it. */
uint64_t loom__graph_checked(const loom_graph_t *g);
void loom__graph_set_checked(loom_graph_t *g, uint64_t key);
/* Checks a type and sizes as new tensors are checked (tensor.c):
 * LOOM_OK, or LOOM_E_INVAL with a message that starts with who. */
int loom__tensor_check_shape(loom_ctx_t *ctx, const char *who,
			     enum loom_type type,
			     const int64_t ne[LOOM_MAX_DIMS]);

/* The tensor that owns t's data: t itself, or the end of its view chain. */
static inline struct loom_tensor *loom__owner(struct loom_tensor *t)
{
	while (t->view_src)
		t = t->view_src;
	return t;
}

/* The i-th of the LOOM__N_INPUTS tensors t reads (NULL where none): its
 * sources, then its view source when that is not already one of them (a
 * raw node may carry only the latter).  Graphs and the allocator walk
 * the same edges through this. */
#define LOOM__N_INPUTS (LOOM_MAX_SRC + 1)
struct loom_tensor *loom__tensor_input(struct loom_tensor *t, int i);

/* True when buf is ga's compute buffer or one it has outgrown (galloc.c):
 * a tensor there was placed by ga and may be placed again. */
bool loom__galloc_owns(const loom_galloc_t *ga, const loom_buffer_t *buf);

/* Makes ctx free g (with loom__graph_free) when ctx is freed. */
int loom__ctx_own_graph(loom_ctx_t *ctx, loom_graph_t *g);
void loom__graph_free(loom_graph_t *g);

/* A map from addresses to ints: open addressing, grows at half load.
 * Zero-initialise, then put/find; free with loom__ptrmap_free. */
struct loom__ptrmap {
	const void **keys;
	int *vals;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

/* The value stored for key, or NULL. */
int *loom__ptrmap_find(const struct loom__ptrmap *m, const void *key);
/* Stores val for key (replacing any); LOOM_E_NOMEM when it cannot grow. */
int loom__ptrmap_put(struct loom__ptrmap *m, const void *key, int val);
void loom__ptrmap_clear(struct loom__ptrmap *m);
void loom__ptrmap_free(struct loom__ptrmap *m);

/* ---- live handles (handle.c) ---- */

/* What a handle is.  The core adds every object it makes to one table
 * and takes it out when the object is freed; a handle is valid only while
 * it is in the table with its kind, so a freed or foreign pointer is
 * refused without reading the memory it points to. */
enum loom__kind {
	LOOM__KIND_BUFT = 1,
	LOOM__KIND_BUFFER,
	LOOM__KIND_BACKEND,
	LOOM__KIND_EVENT,
	LOOM__KIND_DEV,
	LOOM__KIND_REG,
	LOOM__KIND_CTX,
	LOOM__KIND_GALLOC,
	LOOM__KIND_SCHED,
};

/* Adds h as a live handle of that kind (LOOM_E_NOMEM with a message). */
int loom__handle_add(const void *h, enum loom__kind kind);
/* Takes h out of the table; false when it was not a live handle of that
 * kind (freed already, or never made), so a second free is refused. */
bool loom__handle_take(const void *h, enum loom__kind kind);
/* True while h is a live handle of that kind. */
bool loom__handle_live(const void *h, enum loom__kind kind);

/* Calls on one backend, or one scheduler, must not overlap: each call
 * claims the object's busy flag and is refused (LOOM_E_BUSY) while
 * another holds it.  False when it is held. */
static inline bool loom__claim(bool *busy)
{
	return !__atomic_exchange_n(busy, true, __ATOMIC_ACQUIRE);
}

static inline void loom__unclaim(bool *busy)
{
	__atomic_store_n(busy, false, __ATOMIC_RELEASE);
}

/* Rounds x up to a multiple of a (a power of two) into *out; false when
 * that does not fit in a size_t. */
static inline bool loom__align_up(size_t x, size_t a, size_t *out)
{
	if (x > SIZE_MAX - (a - 1))
		return false;
	*out = (x + a - 1) & ~(a - 1);
	return true;
}

/* ---- buffers, backends, devices, registry, loader ---- */

/* Frees buf's memory (the plugin's free_buffer) but keeps the wrapper, so
 * that its address stays unique: tensors still pointing at it read as
 * placed in a freed buffer, never in some later one.  Finish with
 * loom__buffer_forget(). */
void loom__buffer_release(loom_buffer_t *buf);
void loom__buffer_forget(loom_buffer_t *buf);
/* True when t's data lies in a live buffer (not released or freed, as
 * far as the wrapper can tell). */
bool loom__tensor_in_live_buffer(const struct loom_tensor *t);

/* The optional entry points, resolved by name once when a plugin
 * registers (see loom-plugin.h for names and signatures). */
enum loom__proc {
#define X_(name) LOOM__PROC_##name,
	LOOM_PROC_MAP(X_)
#undef X_
	LOOM__PROC_COUNT
};

/* Calls in flight (inflight.c).  A call through a device, reg or buffer
 * type starts with loom__call_begin (false: the handle is not live, or an
 * unload is under way) and ends with loom__call_end; between the two the
 * plugin stays loaded and the handle alive, since loom_unload_all waits
 * for every call in flight before it frees anything.  Calls nest (one
 * plugin asking the core about another's device). */
bool loom__call_begin(const void *h, enum loom__kind kind);
void loom__call_end(void);
/* A call not through one handle (walking the registry's devices): false
 * while an unload is under way. */
bool loom__calls_hold(void);
/* True while this thread is inside a call into a plugin. */
bool loom__in_call(void);
/* For loom_unload_all, holding the load lock and not inside a call:
 * refuses new calls and waits until none is in flight.  This thread's
 * own calls (a plugin's free method asking the core something) still go
 * through until loom__calls_open. */
void loom__calls_close(void);
void loom__calls_open(void);

/* The entry-point name of p ("set_tensor_2d"). */
const char *loom__proc_name(enum loom__proc p);
/* reg's cached entry point p, or NULL when its plugin has none. */
void *loom__reg_proc(loom_reg_t *reg, enum loom__proc p);
/* The registered reg of that plugin name, or NULL (takes the registry
 * lock; safe to call from a plugin's init). */
loom_reg_t *loom__reg_find(const char *name);

#endif
