/* SPDX-License-Identifier: MIT */
/* gguf-write.c - the GGUF writer: key/value pairs and tensors gathered in
 * order, then laid out as a version 3 little-endian file in memory (and
 * saved).  The reader is in gguf-read.c.
 */
#include "gguf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A growing byte buffer. */
struct bytes {
	uint8_t *p;
	size_t n, cap;
};

struct wtensor {
	char name[GGUF_MAX_NAME + 1];
	uint32_t type, n_dims;
	int64_t ne[LOOM_MAX_DIMS];
	void *data;
	size_t size;
};

struct gguf_writer {
	struct bytes kv;  /* the encoded pairs */
	uint64_t n_kv;
	size_t alignment;
	struct wtensor *t;
	size_t n_t, cap_t;
	int error;        /* the first failure, returned by later calls */
};

static int put(struct gguf_writer *w, struct bytes *b, const void *src,
	       size_t n)
{
	if (w->error)
		return w->error;
	if (n > b->cap - b->n) {
		size_t cap = b->cap ? b->cap : 256;
		uint8_t *p;

		while (cap - b->n < n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p)
			return w->error = loom_error_set(LOOM_E_NOMEM,
							 "gguf writer: no "
							 "memory");
		b->p = p;
		b->cap = cap;
	}
	if (n) /* an empty array may come with no storage */
		memcpy(b->p + b->n, src, n);
	b->n += n;
	return LOOM_OK;
}

static int put_u32(struct gguf_writer *w, struct bytes *b, uint32_t v)
{
	return put(w, b, &v, sizeof(v));
}

static int put_u64(struct gguf_writer *w, struct bytes *b, uint64_t v)
{
	return put(w, b, &v, sizeof(v));
}

static int put_str(struct gguf_writer *w, struct bytes *b, const char *s)
{
	size_t n = s ? strlen(s) : 0;
	int ret = put_u64(w, b, n);

	return ret ? ret : put(w, b, s, n);
}

static size_t value_size(enum gguf_type type)
{
	switch (type) {
#define GGUF_X_(name, id, str, size) case GGUF_TYPE_##name: return size;
	GGUF_TYPE_MAP(GGUF_X_)
#undef GGUF_X_
	default:
		return 0;
	}
}

int gguf_writer_new(struct gguf_writer **out)
{
	struct gguf_writer *w = calloc(1, sizeof(*w));

	if (!w)
		return loom_error_set(LOOM_E_NOMEM, "gguf writer: no memory");
	w->alignment = GGUF_DEFAULT_ALIGNMENT;
	*out = w;
	return LOOM_OK;
}

void gguf_writer_free(struct gguf_writer *w)
{
	if (!w)
		return;
	for (size_t i = 0; i < w->n_t; i++)
		free(w->t[i].data);
	free(w->t);
	free(w->kv.p);
	free(w);
}

static int put_values(struct gguf_writer *w, enum gguf_type type,
		      uint64_t n, const void *vals)
{
	int ret = LOOM_OK;

	if (type == GGUF_TYPE_STRING) {
		const char *const *s = vals;

		for (uint64_t i = 0; i < n && !ret; i++)
			ret = put_str(w, &w->kv, s[i]);
		return ret;
	}
	return put(w, &w->kv, vals, (size_t)n * value_size(type));
}

static int check_type(struct gguf_writer *w, const char *key,
		      enum gguf_type type)
{
	if (w->error)
		return w->error;
	if (!key || (unsigned)type >= GGUF_TYPE_COUNT ||
	    type == GGUF_TYPE_ARRAY)
		return w->error = loom_error_set(LOOM_E_INVAL,
						 "gguf writer: bad key or "
						 "type");
	return LOOM_OK;
}

int gguf_writer_add(struct gguf_writer *w, const char *key,
		    enum gguf_type type, const void *val)
{
	int ret = check_type(w, key, type);

	if (!ret)
		ret = put_str(w, &w->kv, key);
	if (!ret)
		ret = put_u32(w, &w->kv, type);
	if (!ret)
		ret = type == GGUF_TYPE_STRING ?
			      put_str(w, &w->kv, (const char *)val) :
			      put_values(w, type, 1, val);
	if (ret)
		return ret;
	if (!strcmp(key, "general.alignment") && type == GGUF_TYPE_UINT32) {
		uint32_t a;

		memcpy(&a, val, sizeof(a));
		if (a && !(a & (a - 1)))
			w->alignment = a;
	}
	w->n_kv++;
	return LOOM_OK;
}

int gguf_writer_add_array(struct gguf_writer *w, const char *key,
			  enum gguf_type type, uint64_t n, const void *vals)
{
	int ret = check_type(w, key, type);

	if (!ret)
		ret = put_str(w, &w->kv, key);
	if (!ret)
		ret = put_u32(w, &w->kv, GGUF_TYPE_ARRAY);
	if (!ret)
		ret = put_u32(w, &w->kv, type);
	if (!ret)
		ret = put_u64(w, &w->kv, n);
	if (!ret)
		ret = put_values(w, type, n, vals);
	if (!ret)
		w->n_kv++;
	return ret;
}

int gguf_writer_add_u32(struct gguf_writer *w, const char *key, uint32_t v)
{
	return gguf_writer_add(w, key, GGUF_TYPE_UINT32, &v);
}

int gguf_writer_add_f32(struct gguf_writer *w, const char *key, float v)
{
	return gguf_writer_add(w, key, GGUF_TYPE_FLOAT32, &v);
}

int gguf_writer_add_str(struct gguf_writer *w, const char *key,
			const char *v)
{
	return gguf_writer_add(w, key, GGUF_TYPE_STRING, v);
}

int gguf_writer_add_tensor(struct gguf_writer *w, const char *name,
			   uint32_t type, uint32_t n_dims, const int64_t *ne,
			   const void *data)
{
	const struct gguf_tensor_type *tt = gguf_tensor_type_get(type);
	struct wtensor *t;
	size_t size;

	if (w->error)
		return w->error;
	if (!name || strlen(name) > GGUF_MAX_NAME || !tt || n_dims < 1 ||
	    n_dims > LOOM_MAX_DIMS || !ne || ne[0] % tt->block)
		return w->error = loom_error_set(LOOM_E_INVAL,
						 "gguf writer: bad tensor "
						 "'%s'", name ? name : "");
	size = (size_t)(ne[0] / tt->block) * tt->block_size;
	for (uint32_t d = 1; d < n_dims; d++)
		size *= (size_t)ne[d];
	if (w->n_t == w->cap_t) {
		size_t cap = w->cap_t ? 2 * w->cap_t : 16;
		struct wtensor *v = realloc(w->t, cap * sizeof(*v));

		if (!v)
			return w->error = loom_error_set(LOOM_E_NOMEM,
							 "gguf writer: no "
							 "memory");
		w->t = v;
		w->cap_t = cap;
	}
	t = &w->t[w->n_t];
	memset(t, 0, sizeof(*t));
	t->data = malloc(size ? size : 1);
	if (!t->data)
		return w->error = loom_error_set(LOOM_E_NOMEM,
						 "gguf writer: no memory");
	if (data)
		memcpy(t->data, data, size);
	else
		memset(t->data, 0, size);
	strcpy(t->name, name);
	t->type = type;
	t->n_dims = n_dims;
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		t->ne[d] = d < (int)n_dims ? ne[d] : 1;
	t->size = size;
	w->n_t++;
	return LOOM_OK;
}

static size_t pad(size_t n, size_t a)
{
	return (a - n % a) % a;
}

int gguf_writer_bytes(struct gguf_writer *w, void **out, size_t *size)
{
	static const uint8_t zeros[256];
	struct bytes b = { 0 };
	uint64_t off = 0;
	int ret;

	if (w->error)
		return w->error;
	ret = put(w, &b, "GGUF", 4);
	if (!ret)
		ret = put_u32(w, &b, 3);
	if (!ret)
		ret = put_u64(w, &b, w->n_t);
	if (!ret)
		ret = put_u64(w, &b, w->n_kv);
	if (!ret)
		ret = put(w, &b, w->kv.p, w->kv.n);
	for (size_t i = 0; i < w->n_t && !ret; i++) {
		struct wtensor *t = &w->t[i];

		ret = put_str(w, &b, t->name);
		if (!ret)
			ret = put_u32(w, &b, t->n_dims);
		for (uint32_t d = 0; d < t->n_dims && !ret; d++)
			ret = put_u64(w, &b, (uint64_t)t->ne[d]);
		if (!ret)
			ret = put_u32(w, &b, t->type);
		if (!ret)
			ret = put_u64(w, &b, off);
		off += t->size + pad(t->size, w->alignment);
	}
	for (size_t i = 0; i <= w->n_t && !ret; i++) {
		size_t p = pad(b.n, w->alignment);

		while (p && !ret) {
			size_t n = p < sizeof(zeros) ? p : sizeof(zeros);

			ret = put(w, &b, zeros, n);
			p -= n;
		}
		if (i < w->n_t && !ret)
			ret = put(w, &b, w->t[i].data, w->t[i].size);
	}
	if (ret) {
		free(b.p);
		return ret;
	}
	*out = b.p;
	*size = b.n;
	return LOOM_OK;
}

int gguf_writer_save(struct gguf_writer *w, const char *path)
{
	void *p;
	size_t n;
	FILE *f;
	int ret = gguf_writer_bytes(w, &p, &n);

	if (ret)
		return ret;
	f = fopen(path, "wb");
	if (!f) {
		ret = loom_error_set(LOOM_E_IO, "%s: %s", path,
				     strerror(errno));
	} else {
		if (fwrite(p, 1, n, f) != n)
			ret = loom_error_set(LOOM_E_IO, "%s: write failed",
					     path);
		if (fclose(f) && !ret)
			ret = loom_error_set(LOOM_E_IO, "%s: %s", path,
					     strerror(errno));
	}
	free(p);
	return ret;
}
