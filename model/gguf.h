/* SPDX-License-Identifier: MIT */
/* gguf.h - GGUF model files (versions 2 and 3, little-endian): a reader
 * that maps a file and validates every count, length and offset before
 * use, and a writer that builds one in memory.  Uses only the public API.
 */
#ifndef LOOM_MODEL_GGUF_H
#define LOOM_MODEL_GGUF_H

#include <loom/loom.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Metadata value types, numbered as the format numbers them. */
#define GGUF_TYPE_MAP(X)                                                     \
	X(UINT8, 0, "u8", 1)                                                 \
	X(INT8, 1, "i8", 1)                                                  \
	X(UINT16, 2, "u16", 2)                                               \
	X(INT16, 3, "i16", 2)                                                \
	X(UINT32, 4, "u32", 4)                                               \
	X(INT32, 5, "i32", 4)                                                \
	X(FLOAT32, 6, "f32", 4)                                              \
	X(BOOL, 7, "bool", 1)                                                \
	X(STRING, 8, "string", 0)                                            \
	X(ARRAY, 9, "array", 0)                                              \
	X(UINT64, 10, "u64", 8)                                              \
	X(INT64, 11, "i64", 8)                                               \
	X(FLOAT64, 12, "f64", 8)

enum gguf_type {
#define GGUF_X_(name, id, str, size) GGUF_TYPE_##name = id,
	GGUF_TYPE_MAP(GGUF_X_)
#undef GGUF_X_
	GGUF_TYPE_COUNT
};

/* The name of a metadata type ("u32", "string", ...), "?" if unknown. */
const char *gguf_type_name(uint32_t type);

#define GGUF_DEFAULT_ALIGNMENT 32
/* Longest tensor name, terminator excluded (as Loom's tensors hold). */
#define GGUF_MAX_NAME (LOOM_MAX_NAME - 1)

/* The tensor types the format numbers (ggml's numbering).  Loom's type of
 * one, where it has it, is found by name: gguf_tensor_loom_type(). */
struct gguf_tensor_type {
	const char *name;
	int64_t block;     /* elements per block; 0: no such type */
	size_t block_size; /* bytes per block */
};
/* Facts of tensor type id, NULL when the id is not a known type. */
const struct gguf_tensor_type *gguf_tensor_type_get(uint32_t id);
/* The format's id of Loom's type, or -1 if the format has none. */
int gguf_tensor_type_of(enum loom_type type);

/* A string as the file holds it: not NUL-terminated, may hold any bytes. */
struct gguf_str {
	uint64_t n;
	const char *s;
};

struct gguf_kv {
	char *key;               /* NUL-terminated copy */
	enum gguf_type type;
	enum gguf_type arr_type; /* element type when type is ARRAY */
	uint64_t n;              /* elements: 1 for a scalar */
	const void *data;        /* the scalar or elements in the file, any
				  * alignment (read with memcpy) */
	struct gguf_str *strs;   /* n strings when a string or string array */
};

struct gguf_tensor {
	char name[GGUF_MAX_NAME + 1];
	uint32_t n_dims;
	int64_t ne[LOOM_MAX_DIMS]; /* unused dimensions are 1 */
	uint32_t type;             /* the format's tensor type id */
	uint64_t offset;           /* from the start of the data section */
	uint64_t size;             /* bytes */
	const void *data;          /* inside the file */
};

struct gguf;

/* Parses size bytes at data, which must stay valid and unchanged while
 * the result lives (nothing is copied but keys and names).  A malformed
 * file is refused with LOOM_E_INVAL (or LOOM_E_NOMEM) and a message in
 * loom_error_message() naming what is wrong and where.  The caller frees
 * *out with gguf_free(). */
int gguf_parse(const void *data, size_t size, struct gguf **out);
/* Maps path read-only and parses it; LOOM_E_IO when it cannot be opened
 * or mapped, or is not a regular file (a FIFO is refused without waiting
 * for a writer).  The mapping and the open file are released by
 * gguf_free(). */
int gguf_open(const char *path, struct gguf **out);
/* Checks, before the bulk read of [p, p + n) of g's mapping, that the
 * file is as it was mapped: each page of the range is read once on this
 * thread under a SIGBUS guard (a file truncated after it was mapped
 * faults there), then the file's size and modification time are compared.
 * LOOM_E_IO "PATH: the file changed while in use" otherwise; LOOM_OK for
 * bytes not mapped from a file.  The limit: a file that changes after
 * this check, while the bytes are being copied (possibly on a plugin's
 * threads), can still end the process with SIGBUS. */
int gguf_check_read(const struct gguf *g, const void *p, size_t n);
/* Frees g and its mapping, if any; NULL is a no-op. */
void gguf_free(struct gguf *g);
/* Tells the system the mapped pages of [p, p + n) are no longer needed,
 * once their bytes have been copied to a device, so that the weights are
 * not held in memory twice; a no-op for a file not mapped.  The bytes
 * read the same afterwards (the file is read again).  Only the part of
 * the range inside the file counts: memory beside it is never touched. */
void gguf_drop_pages(const struct gguf *g, const void *p, size_t n);

uint32_t gguf_version(const struct gguf *g);
size_t gguf_alignment(const struct gguf *g);
/* The whole file and its data section (offset from the file's start). */
const void *gguf_bytes(const struct gguf *g, size_t *size);
size_t gguf_data_offset(const struct gguf *g);

size_t gguf_n_kv(const struct gguf *g);
const struct gguf_kv *gguf_kv_get(const struct gguf *g, size_t i);
/* The pair called key, NULL when absent. */
const struct gguf_kv *gguf_kv_find(const struct gguf *g, const char *key);

/* Typed reads of a scalar: LOOM_E_NOT_FOUND when absent, LOOM_E_INVAL
 * (naming the key and both types) when of another type.  Any integer
 * type reads through gguf_get_int when its value fits; u32 keys written
 * as i32 (or the other way round) are common in real files. */
int gguf_get_int(const struct gguf *g, const char *key, int64_t *out);
int gguf_get_float(const struct gguf *g, const char *key, double *out);
int gguf_get_bool(const struct gguf *g, const char *key, bool *out);
/* A string value copied NUL-terminated into buf (size bytes); a value
 * with a NUL byte or too long is LOOM_E_RANGE. */
int gguf_get_string(const struct gguf *g, const char *key, char *buf,
		    size_t size);

/* Element i of a numeric array (or a numeric scalar when i == 0) as a
 * double; the caller has checked i < n. */
double gguf_kv_number(const struct gguf_kv *kv, uint64_t i);

size_t gguf_n_tensors(const struct gguf *g);
const struct gguf_tensor *gguf_tensor_get(const struct gguf *g, size_t i);
const struct gguf_tensor *gguf_tensor_find(const struct gguf *g,
					   const char *name);
/* Loom's type of t's type; LOOM_E_UNSUPPORTED naming the tensor and its
 * type when Loom lacks it. */
int gguf_tensor_loom_type(const struct gguf_tensor *t, enum loom_type *out);

/* ------------------------------------------------------------------------
 * Writer.  Pairs and tensors are kept in the order added; the file is
 * produced whole in memory.  General.alignment, when added as a u32,
 * sets the alignment.
 */
struct gguf_writer;

int gguf_writer_new(struct gguf_writer **out);
void gguf_writer_free(struct gguf_writer *w);
/* A scalar of type type at val (a const char * for STRING). */
int gguf_writer_add(struct gguf_writer *w, const char *key,
		    enum gguf_type type, const void *val);
/* An array of n elements of type type (const char *const * for STRING). */
int gguf_writer_add_array(struct gguf_writer *w, const char *key,
			  enum gguf_type type, uint64_t n, const void *vals);
int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v);
int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v);
int gguf_writer_add_str(struct gguf_writer *w, const char *key,
			const char *v);
/* A tensor of the format's type id with n_dims dimensions ne; its bytes
 * (the size the type gives the shape) are copied. */
int gguf_writer_add_tensor(struct gguf_writer *w, const char *name,
			   uint32_t type, uint32_t n_dims, const int64_t *ne,
			   const void *data);
/* The file as bytes: *out (malloc'ed, the caller frees) of *size. */
int gguf_writer_bytes(struct gguf_writer *w, void **out, size_t *size);
/* Writes the file to path. */
int gguf_writer_save(struct gguf_writer *w, const char *path);

#ifdef __cplusplus
}
#endif

#endif /* LOOM_MODEL_GGUF_H */
