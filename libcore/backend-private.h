/* SPDX-License-Identifier: MIT */
/* backend-private.h - the core's wrappers around plugin objects (buffer
 * types, buffers, backends, events, devices, regs) and the plugin records.
 * Only buffer.c, backend.c, device.c, registry.c and loader.c see these. */
#ifndef LOOM_BACKEND_PRIVATE_H
#define LOOM_BACKEND_PRIVATE_H

#include "loom-private.h"

#include <stdbool.h>
#include <stddef.h>

#define LOOM__N_OF(a) (sizeof(a) / sizeof(*(a)))

/* A required slot of an interface table, by offset and name. */
struct loom__slot {
	size_t off;
	const char *name;
};
#define LOOM__SLOT(iface, member) { offsetof(iface, member), #member }

/* Every wrapper is in the table of live handles (handle.c) from the
 * moment its table and context are set until it is freed; the checks
 * below ask the table, never the wrapper's memory. */
static inline bool loom__buft_live(const loom_buffer_type_t *buft)
{
	return loom__handle_live(buft, LOOM__KIND_BUFT);
}

static inline bool loom__buffer_live(const loom_buffer_t *buf)
{
	return loom__handle_live(buf, LOOM__KIND_BUFFER);
}

static inline bool loom__backend_live(const loom_backend_t *be)
{
	return loom__handle_live(be, LOOM__KIND_BACKEND);
}

static inline bool loom__event_live(const loom_event_t *ev)
{
	return loom__handle_live(ev, LOOM__KIND_EVENT);
}

static inline bool loom__dev_live(const loom_dev_t *dev)
{
	return loom__handle_live(dev, LOOM__KIND_DEV);
}

static inline bool loom__reg_live(const loom_reg_t *reg)
{
	return loom__handle_live(reg, LOOM__KIND_REG);
}

/* Calls through a device, reg or buffer type (loom-private.h). */
static inline bool loom__dev_enter(const loom_dev_t *dev)
{
	return loom__call_begin(dev, LOOM__KIND_DEV);
}

static inline bool loom__reg_enter(const loom_reg_t *reg)
{
	return loom__call_begin(reg, LOOM__KIND_REG);
}

static inline bool loom__buft_enter(const loom_buffer_type_t *buft)
{
	return loom__call_begin(buft, LOOM__KIND_BUFT);
}

struct loom_buffer_type {
	struct loom_buffer_type_iface iface; /* zeroed copy, size-limited */
	void *context;
	loom_reg_t *reg;
	loom_dev_t *dev;
	struct loom_buffer_type *next; /* reg's list of owned types */
};

struct loom_buffer {
	struct loom_buffer_iface iface;
	void *context;
	loom_buffer_type_t *buft;
	size_t size;
	void *base; /* get_base, read once when the buffer is made */
	enum loom_buffer_usage usage;
};

struct loom_backend {
	struct loom_backend_iface iface;
	void *context;
	loom_dev_t *dev;
	bool busy; /* a call on it is under way (atomic; backend.c) */
};

struct loom_event {
	loom_dev_t *dev;
	void *context;
};

struct loom_dev {
	struct loom_dev_iface iface;
	void *context;
	loom_reg_t *reg;
	struct loom_dev *next; /* reg's list of owned devices */
};

/* What the application holds of a plugin: each one keeps the plugin
 * loaded (loom_unload_all refuses while any is alive). */
enum loom__ref {
	LOOM__REF_BUFFER,
	LOOM__REF_BACKEND,
	LOOM__REF_EVENT,
	LOOM__REF_COUNT
};

struct loom_reg {
	struct loom_reg_iface iface;
	void *context;
	void *procs[LOOM__PROC_COUNT]; /* resolved once at registration */
	struct loom_dev *devs;         /* every device made for this reg */
	struct loom_buffer_type *bufts;
	bool registered;               /* in the registry */
	/* Live buffers, backends and events made from this plugin (atomic). */
	size_t refs[LOOM__REF_COUNT];
};

/* Counts one more (or one fewer) live object of reg's plugin. */
void loom__reg_ref(loom_reg_t *reg, enum loom__ref what);
void loom__reg_unref(loom_reg_t *reg, enum loom__ref what);

/* How a constructor starts a wrapper around a plugin's table. */
struct loom__wrap {
	const char *kind;     /* "buffer type", for messages */
	enum loom__kind handle;
	const struct loom__slot *required;
	size_t n_required;
	/* The name for a message about a missing slot: called once the
	 * wrapper is complete and live (it may call the plugin's get_name),
	 * or NULL to use the owner's name given to loom__wrap_init. */
	const char *(*name)(void *obj);
};

/* Whether rank is one of enum loom_dev_rank's values (device.c). */
bool loom__dev_rank_valid(int rank);

/* Pushes obj on a reg's list of devices or buffer types: plugins may
 * make them on any thread (a composed device, a buffer type on first use). */
#define LOOM__LIST_PUSH(head, obj)                                          \
	do {                                                                \
		(obj)->next = __atomic_load_n(&(head), __ATOMIC_RELAXED);    \
		while (!__atomic_compare_exchange_n(&(head), &(obj)->next,  \
						    (obj), true,            \
						    __ATOMIC_RELEASE,       \
						    __ATOMIC_RELAXED))      \
			;                                                   \
	} while (0)

/* More devices than this from one plugin is a plugin bug. */
#define LOOM__MAX_DEVS 4096

/* What a plugin says, unchecked (device.c, where each of these methods is
 * called, and only there).  The public getters clamp what is out of
 * range; registration refuses the plugin instead.  The caller is inside
 * a call (loom__call_begin). */
const char *loom__reg_plugin_name(loom_reg_t *reg);
size_t loom__reg_plugin_dev_count(loom_reg_t *reg);
loom_dev_t *loom__reg_plugin_dev(loom_reg_t *reg, size_t i);
const char *loom__dev_plugin_name(loom_dev_t *dev);
unsigned loom__dev_plugin_type(loom_dev_t *dev);
int loom__dev_plugin_rank(loom_dev_t *dev);
loom_buffer_type_t *loom__dev_plugin_buffer_type(loom_dev_t *dev);

/* Frees the wrappers a reg owns (devices, buffer types) and the reg,
 * after calling its plugin's free method (registry.c). */
void loom__reg_destroy(loom_reg_t *reg);

/* Checks the tensor is placed and [offset, offset + size) lies within its
 * bytes; records the message (buffer.c). */
int loom__check_range(const struct loom_tensor *t, size_t offset,
		      size_t size, const char *what);
/* Checks both tensors are placed, have the same bytes, and do not
 * overlap unless they are the same bytes (buffer.c). */
int loom__check_copy(const struct loom_tensor *src,
		     const struct loom_tensor *dst, const char *what);
int loom__check_range_2d(const struct loom_tensor *t, size_t offset,
			 size_t size, size_t n_copies, size_t stride_tensor,
			 size_t stride_data, bool to_host, const char *what);

/* The one start of every wrapper (reg, device, buffer type, buffer,
 * backend): copies at most the plugin table's size bytes into the
 * wrapper's zeroed table iface (iface_size bytes), sets *context_field,
 * makes obj a live handle, then checks the required slots, so no plugin
 * method runs on a half-built wrapper.  A missing slot is recorded as
 * "<kind> '<name>': missing required method <slot>" (owner names it when
 * w->name is NULL) and obj is taken out again.  The caller sets obj's
 * other fields first and frees obj on failure (buffer.c). */
int loom__wrap_init(void *obj, void *iface, size_t iface_size,
		    const void *src, void **context_field, void *context,
		    const struct loom__wrap *w, const char *owner);


/* ------------------------------------------------------------------------
 * The registry's record of one candidate plugin file (or static plugin).
 * registry.c owns the list; loader.c fills records under the lock.
 */
struct loom__plugin {
	char *name;    /* from the file name (or the descriptor) */
	char *file;    /* full path, or "(static)" */
	char *version; /* from the descriptor, once read */
	enum loom_plugin_state state;
	char *reason;  /* "" when loaded */
	int status;    /* LOOM_OK, or why it did not load */
	int score;
	void *dl;      /* dlopen handle, while open */
	const struct loom_plugin_desc *desc;
	uint32_t flags;  /* the descriptor's LOOM_PLUGIN_* flags */
	loom_reg_t *reg; /* when loaded */
	int priority;  /* index in LOOM_BACKENDS, or -1 */
	size_t seq;    /* record order */
	size_t init_order; /* order of successful init (unload reverses) */
};

void loom__registry_lock(void);
void loom__registry_unlock(void);
/* Starts a load or unload (who names the call): LOOM_E_STATE with a
 * message when this thread is already loading or unloading (a plugin's
 * init or ELF constructor calling back), else takes the load lock and
 * the registry lock.  loom__load_end releases both. */
int loom__load_begin(const char *who);
void loom__load_end(void);
/* Appends a record (state FAILED, reason "") and returns it, or NULL when
 * out of memory. */
struct loom__plugin *loom__plugin_add(const char *name, const char *file);
/* Sets state, status and the reason (printf-style). */
void loom__plugin_set(struct loom__plugin *p, enum loom_plugin_state state,
		      int status, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Record i in order, or NULL past the end. */
struct loom__plugin *loom__plugin_by_index(size_t i);
/* The loaded record of that plugin name, or NULL. */
struct loom__plugin *loom__plugin_loaded(const char *name);
/* desc's LOOM_PLUGIN_* flags: 0 from a plugin older than ABI 1.2, whose
 * descriptor ends before them (abi.c). */
uint32_t loom__desc_flags(const struct loom_plugin_desc *desc);
/* Whether plugin p declares it composes other plugins' devices. */
#define loom__plugin_composes(p) (((p)->flags & LOOM_PLUGIN_COMPOSES) != 0)
/* Whether a plugin of ABI major.minor loads into a core of ABI
 * core_major.core_minor: the majors equal, the plugin's minor not above
 * the core's.  Returns LOOM_OK, or LOOM_E_ABI with the reason, naming both
 * versions, written into why (n bytes) (abi.c). */
int loom__abi_check(uint32_t major, uint32_t minor, uint32_t core_major,
		    uint32_t core_minor, char *why, size_t n);
/* Checks that a descriptor of size bytes (its symbol's size) holds what
 * the ABI version it declares promises, reading no byte past size: its
 * version first, then the fields of that version, then its own size
 * field (ABI 1.2).  A version other than this core's passes (the version
 * rule refuses it).  Returns LOOM_OK or LOOM_E_PLUGIN with the reason in
 * why (n bytes, caller's buffer) (abi.c). */
int loom__desc_size_check(const void *desc, size_t size, char *why, size_t n);
/* Checks a descriptor (ABI, name, init) and records it on p; on failure
 * sets p's state and reason and returns the status. */
int loom__plugin_check_desc(struct loom__plugin *p,
			    const struct loom_plugin_desc *desc,
			    bool name_from_file);
/* Calls the descriptor's score (p->score); 0 makes p not applicable. */
int loom__plugin_score(struct loom__plugin *p);
/* Runs init, checks the reg and its devices, resolves the entry points
 * and marks p loaded; on failure sets p's state and reason. */
int loom__plugin_init(struct loom__plugin *p);
/* Records p's reason as the thread's last error and returns p->status. */
int loom__plugin_error(const struct loom__plugin *p);
/* Reads n bytes at offset off of a file into buf; false when they cannot
 * all be read. */
typedef bool (*loom__elf_read_fn)(void *ctx, uint64_t off, void *buf,
				  size_t n);
/* Checks that a file of size bytes, read through read(ctx, ...), is a
 * shared object for this process whose headers and segments lie within
 * it and whose program headers and dynamic section hold what dlopen
 * trusts, before dlopen maps it (a truncated file, or a segment with
 * less memory than file bytes, would fault there).
 * Returns LOOM_OK, or LOOM_E_PLUGIN with the reason written into why
 * (n bytes, caller's buffer) (elf-check.c). */
int loom__elf_check(loom__elf_read_fn read, void *ctx, uint64_t size,
		    char *why, size_t n);
/* Loader state forgotten at unload (loader.c). */
void loom__loader_reset(void);

/* Records "<kind> '<name>': missing required method <slot>" (name may
 * be NULL) and returns LOOM_E_PLUGIN; the loader reads the last such
 * message of the plugin it is initialising (registry.c). */
int loom__missing_method(const char *kind, const char *name,
			 const char *slot);
/* Notes a reg made by loom_reg_new(), so the loader can free the regs a
 * failing init leaves behind (registry.c). */
void loom__reg_made(loom_reg_t *reg);
/* Forgets (NULL) or returns the last missing-method message. */
void loom__missing_reset(void);
const char *loom__missing_last(void);

#endif
