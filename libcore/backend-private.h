/* backend-private.h - the core's wrappers around plugin objects (buffer
 * types, buffers, backends, events, devices, regs) and the plugin records.
 * Only buffer.c, backend.c, device.c, registry.c and loader.c see these. */
#ifndef LOOM_BACKEND_PRIVATE_H
#define LOOM_BACKEND_PRIVATE_H

#include "loom-private.h"

#include <stdbool.h>
#include <stddef.h>

#define LOOM__N_OF(a) (sizeof(a) / sizeof(*(a)))

/* Magic numbers let the core refuse pointers no constructor made. */
#define BUFT_MAGIC 0x4c4d4254u
#define BUFFER_MAGIC 0x4c4d4246u
#define BACKEND_MAGIC 0x4c4d4245u
#define EVENT_MAGIC 0x4c4d4556u
#define DEV_MAGIC 0x4c4d4456u
#define REG_MAGIC 0x4c4d5247u

struct loom_buffer_type {
	uint32_t magic;
	struct loom_buffer_type_iface iface; /* zeroed copy, size-limited */
	void *context;
	loom_reg_t *reg;
	loom_dev_t *dev;
	struct loom_buffer_type *next; /* reg's list of owned types */
};

struct loom_buffer {
	uint32_t magic;
	struct loom_buffer_iface iface;
	void *context;
	loom_buffer_type_t *buft;
	size_t size;
	void *base; /* get_base, read once when the buffer is made */
	enum loom_buffer_usage usage;
};

struct loom_backend {
	uint32_t magic;
	struct loom_backend_iface iface;
	void *context;
	loom_dev_t *dev;
};

struct loom_event {
	uint32_t magic;
	loom_dev_t *dev;
	void *context;
};

struct loom_dev {
	uint32_t magic;
	struct loom_dev_iface iface;
	void *context;
	loom_reg_t *reg;
	struct loom_dev *next; /* reg's list of owned devices */
};

struct loom_reg {
	uint32_t magic;
	struct loom_reg_iface iface;
	void *context;
	void *procs[LOOM__PROC_COUNT]; /* resolved once at registration */
	struct loom_dev *devs;         /* every device made for this reg */
	struct loom_buffer_type *bufts;
	bool registered;               /* in the registry */
};

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

/* Copies at most iface size bytes of a plugin table into a zeroed one;
 * refuses a NULL table or size 0 (buffer.c). */
int loom__copy_iface(void *dst, size_t dst_size, const void *src,
		     const char *what);

/* A required slot of an interface table, by offset and name. */
struct loom__slot {
	size_t off;
	const char *name;
};
#define LOOM__SLOT(iface, member) { offsetof(iface, member), #member }
/* The name of the first of slots[0..n) that is NULL in the (copied)
 * table iface, or NULL when every one is filled (buffer.c). */
const char *loom__missing_slot(const void *iface,
			       const struct loom__slot *slots, size_t n);

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
	loom_reg_t *reg; /* when loaded */
	int priority;  /* index in LOOM_BACKENDS, or -1 */
	size_t seq;    /* record order */
	size_t init_order; /* order of successful init (unload reverses) */
};

void loom__registry_lock(void);
void loom__registry_unlock(void);
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
 * it, before dlopen maps it (a truncated file would fault there).
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
