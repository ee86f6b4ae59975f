/* SPDX-License-Identifier: MIT */
/* gguf-read.c - the GGUF reader: maps a file and parses its header,
 * metadata, tensor infos and data section, checking every count, length
 * and offset (overflow-safe) before it is used.  The writer is elsewhere.
 */
#define _GNU_SOURCE
#include "gguf.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct gguf {
	const uint8_t *base;
	size_t size;
	bool mapped;
	int fd;             /* the mapped file, kept open to see it change */
	char *path;
	struct stat st;     /* the file as it was mapped */
	uint32_t version;
	size_t alignment;
	size_t data_offset;
	size_t n_kv;
	struct gguf_kv *kv;
	size_t n_tensors;
	struct gguf_tensor *tensors;
};

/* ------------------------------------------------------------------------
 * Types.
 */
const char *gguf_type_name(uint32_t type)
{
	switch (type) {
#define GGUF_X_(name, id, str, size) case id: return str;
	GGUF_TYPE_MAP(GGUF_X_)
#undef GGUF_X_
	}
	return "?";
}

static size_t scalar_size(uint32_t type)
{
	switch (type) {
#define GGUF_X_(name, id, str, size) case id: return size;
	GGUF_TYPE_MAP(GGUF_X_)
#undef GGUF_X_
	}
	return 0;
}

/* Tensor types by id as the format numbers them; gaps are ids that were
 * retired and are refused. */
static const struct gguf_tensor_type tensor_types[] = {
	[0] = { "f32", 1, 4 },        [1] = { "f16", 1, 2 },
	[2] = { "q4_0", 32, 18 },     [3] = { "q4_1", 32, 20 },
	[6] = { "q5_0", 32, 22 },     [7] = { "q5_1", 32, 24 },
	[8] = { "q8_0", 32, 34 },     [9] = { "q8_1", 32, 36 },
	[10] = { "q2_k", 256, 84 },   [11] = { "q3_k", 256, 110 },
	[12] = { "q4_k", 256, 144 },  [13] = { "q5_k", 256, 176 },
	[14] = { "q6_k", 256, 210 },  [15] = { "q8_k", 256, 292 },
	[16] = { "iq2_xxs", 256, 66 }, [17] = { "iq2_xs", 256, 74 },
	[18] = { "iq3_xxs", 256, 98 }, [19] = { "iq1_s", 256, 50 },
	[20] = { "iq4_nl", 32, 18 },  [21] = { "iq3_s", 256, 110 },
	[22] = { "iq2_s", 256, 82 },  [23] = { "iq4_xs", 256, 136 },
	[24] = { "i8", 1, 1 },        [25] = { "i16", 1, 2 },
	[26] = { "i32", 1, 4 },       [27] = { "i64", 1, 8 },
	[28] = { "f64", 1, 8 },       [29] = { "iq1_m", 256, 56 },
	[30] = { "bf16", 1, 2 },      [34] = { "tq1_0", 256, 54 },
	[35] = { "tq2_0", 256, 66 },  [39] = { "mxfp4", 32, 17 },
};

const struct gguf_tensor_type *gguf_tensor_type_get(uint32_t id)
{
	if (id >= sizeof(tensor_types) / sizeof(tensor_types[0]) ||
	    !tensor_types[id].block)
		return NULL;
	return &tensor_types[id];
}

int gguf_tensor_type_of(enum loom_type type)
{
	const char *name = loom_type_name(type);

	for (size_t i = 0; i < sizeof(tensor_types) / sizeof(tensor_types[0]);
	     i++)
		if (tensor_types[i].block && name &&
		    !strcmp(tensor_types[i].name, name))
			return (int)i;
	return -1;
}

/* Loom's type of the same name and layout, so that types Loom gains are
 * read without a change here. */
int gguf_tensor_loom_type(const struct gguf_tensor *t, enum loom_type *out)
{
	const struct gguf_tensor_type *tt = gguf_tensor_type_get(t->type);
	enum loom_type lt;

	if (tt && !loom_type_from_name(tt->name, &lt) &&
	    loom_type_block_size(lt) == tt->block &&
	    loom_type_size(lt) == tt->block_size) {
		*out = lt;
		return LOOM_OK;
	}
	return loom_error_set(LOOM_E_UNSUPPORTED,
			      "tensor '%s': type %s is not supported by Loom",
			      t->name, tt ? tt->name : "?");
}

/* ------------------------------------------------------------------------
 * A cursor over the file.  Every read checks the bytes left first.
 */
struct rd {
	const uint8_t *p;
	size_t size, pos;
};

static int need(struct rd *r, size_t n, const char *what)
{
	if (n > r->size - r->pos)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s at offset %zu: %zu bytes "
				      "needed, the file ends at %zu", what,
				      r->pos, n, r->size);
	return LOOM_OK;
}

static int rd_bytes(struct rd *r, void *dst, size_t n, const char *what)
{
	int ret = need(r, n, what);

	if (!ret) {
		memcpy(dst, r->p + r->pos, n);
		r->pos += n;
	}
	return ret;
}

static int rd_u32(struct rd *r, uint32_t *v, const char *what)
{
	return rd_bytes(r, v, sizeof(*v), what);
}

static int rd_u64(struct rd *r, uint64_t *v, const char *what)
{
	return rd_bytes(r, v, sizeof(*v), what);
}

/* A length-prefixed string left in place. */
static int rd_str(struct rd *r, struct gguf_str *s, const char *what)
{
	size_t at = r->pos;
	int ret = rd_u64(r, &s->n, what);

	if (ret)
		return ret;
	if (s->n > r->size - r->pos) {
		r->pos = at;
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s at offset %zu: string of "
				      "%llu bytes runs past the end of the "
				      "file (%zu bytes)", what, at,
				      (unsigned long long)s->n, r->size);
	}
	s->s = (const char *)r->p + r->pos;
	r->pos += (size_t)s->n;
	return LOOM_OK;
}

/* Prints a key or name for a message: printable ASCII, the rest as '?',
 * at most 64 bytes. */
static const char *printable(const struct gguf_str *s, char buf[68])
{
	size_t n = s->n < 64 ? (size_t)s->n : 64;

	for (size_t i = 0; i < n; i++)
		buf[i] = isprint((unsigned char)s->s[i]) ? s->s[i] : '?';
	if (s->n > 64)
		memcpy(buf + n, "...", 3), n += 3;
	buf[n] = 0;
	return buf;
}

/* ------------------------------------------------------------------------
 * Metadata.
 */
static int parse_value(struct rd *r, struct gguf_kv *kv, const char *what)
{
	size_t esz;
	uint32_t t;
	uint64_t n = 1;
	int ret;

	if (kv->type == GGUF_TYPE_ARRAY) {
		ret = rd_u32(r, &t, what);
		if (!ret)
			ret = rd_u64(r, &n, what);
		if (ret)
			return ret;
		if (t == GGUF_TYPE_ARRAY)
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: %s: arrays of arrays are "
					      "not supported", what);
		if (t >= GGUF_TYPE_COUNT)
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: %s: unknown array element "
					      "type %u", what, t);
		kv->arr_type = (enum gguf_type)t;
	} else {
		t = kv->type;
	}
	kv->n = n;
	kv->data = r->p + r->pos;
	if (t == GGUF_TYPE_STRING) {
		/* Every string takes at least its 8-byte length. */
		if (n > (r->size - r->pos) / 8)
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: %s at offset %zu: %llu "
					      "strings cannot fit in the %zu "
					      "bytes left", what, r->pos,
					      (unsigned long long)n,
					      r->size - r->pos);
		kv->strs = calloc(n ? (size_t)n : 1, sizeof(*kv->strs));
		if (!kv->strs)
			return loom_error_set(LOOM_E_NOMEM,
					      "gguf: %s: no memory for %llu "
					      "strings", what,
					      (unsigned long long)n);
		for (uint64_t i = 0; i < n; i++) {
			ret = rd_str(r, &kv->strs[i], what);
			if (ret)
				return ret;
		}
		return LOOM_OK;
	}
	esz = scalar_size(t);
	if (n > (r->size - r->pos) / esz)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s at offset %zu: %llu values of "
				      "%zu bytes run past the end of the file "
				      "(%zu bytes)", what, r->pos,
				      (unsigned long long)n, esz, r->size);
	if (t == GGUF_TYPE_BOOL)
		for (uint64_t i = 0; i < n; i++)
			if (r->p[r->pos + i] > 1)
				return loom_error_set(LOOM_E_INVAL,
						      "gguf: %s: bool value "
						      "%u at offset %zu",
						      what,
						      r->p[r->pos + i],
						      r->pos + (size_t)i);
	r->pos += (size_t)n * esz;
	return LOOM_OK;
}

static int parse_kv(struct rd *r, struct gguf *g, size_t i)
{
	struct gguf_kv *kv = &g->kv[i];
	struct gguf_str key;
	char what[128], pb[68];
	uint32_t type;
	int ret;

	snprintf(what, sizeof(what), "key %zu", i);
	ret = rd_str(r, &key, what);
	if (ret)
		return ret;
	snprintf(what, sizeof(what), "key %zu ('%s')", i, printable(&key, pb));
	if (memchr(key.s, 0, (size_t)key.n))
		return loom_error_set(LOOM_E_INVAL, "gguf: %s: NUL byte in "
				      "the key", what);
	kv->key = malloc((size_t)key.n + 1);
	if (!kv->key)
		return loom_error_set(LOOM_E_NOMEM, "gguf: no memory");
	memcpy(kv->key, key.s, (size_t)key.n);
	kv->key[key.n] = 0;
	ret = rd_u32(r, &type, what);
	if (ret)
		return ret;
	if (type >= GGUF_TYPE_COUNT)
		return loom_error_set(LOOM_E_INVAL, "gguf: %s at offset %zu: "
				      "unknown value type %u", what,
				      r->pos - 4, type);
	kv->type = (enum gguf_type)type;
	return parse_value(r, kv, what);
}

static int cmp_kv(const void *a, const void *b)
{
	return strcmp((*(struct gguf_kv *const *)a)->key,
		      (*(struct gguf_kv *const *)b)->key);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp((*(struct gguf_tensor *const *)a)->name,
		      (*(struct gguf_tensor *const *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
	uint64_t x = (*(struct gguf_tensor *const *)a)->offset;
	uint64_t y = (*(struct gguf_tensor *const *)b)->offset;

	return x < y ? -1 : x > y;
}

/* Duplicate keys would make lookups depend on order: refused. */
static int check_unique_keys(struct gguf *g)
{
	struct gguf_kv **v;
	int ret = LOOM_OK;

	if (g->n_kv < 2)
		return LOOM_OK;
	v = malloc(g->n_kv * sizeof(*v));
	if (!v)
		return loom_error_set(LOOM_E_NOMEM, "gguf: no memory");
	for (size_t i = 0; i < g->n_kv; i++)
		v[i] = &g->kv[i];
	qsort(v, g->n_kv, sizeof(*v), cmp_kv);
	for (size_t i = 1; i < g->n_kv && !ret; i++)
		if (!strcmp(v[i - 1]->key, v[i]->key))
			ret = loom_error_set(LOOM_E_INVAL,
					     "gguf: key '%s' appears twice",
					     v[i]->key);
	free(v);
	return ret;
}

static int read_alignment(struct gguf *g)
{
	const struct gguf_kv *kv = gguf_kv_find(g, "general.alignment");
	uint32_t a;

	g->alignment = GGUF_DEFAULT_ALIGNMENT;
	if (!kv)
		return LOOM_OK;
	if (kv->type != GGUF_TYPE_UINT32)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: general.alignment is a %s, not "
				      "a u32", gguf_type_name(kv->type));
	memcpy(&a, kv->data, sizeof(a));
	if (!a || (a & (a - 1)))
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: general.alignment %u is not a "
				      "power of two", a);
	g->alignment = a;
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * Tensor infos.
 */
static int parse_tensor(struct rd *r, struct gguf *g, size_t i)
{
	struct gguf_tensor *t = &g->tensors[i];
	const struct gguf_tensor_type *tt;
	struct gguf_str name;
	char what[128], pb[68];
	uint64_t ne, rows = 1;
	int ret;

	snprintf(what, sizeof(what), "tensor %zu", i);
	ret = rd_str(r, &name, what);
	if (ret)
		return ret;
	snprintf(what, sizeof(what), "tensor %zu ('%s')", i,
		 printable(&name, pb));
	if (name.n > GGUF_MAX_NAME || memchr(name.s, 0, (size_t)name.n))
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s: a name of %llu bytes (at "
				      "most %d, no NUL bytes)", what,
				      (unsigned long long)name.n,
				      GGUF_MAX_NAME);
	memcpy(t->name, name.s, (size_t)name.n);
	t->name[name.n] = 0;
	snprintf(what, sizeof(what), "tensor '%s'", t->name);
	ret = rd_u32(r, &t->n_dims, what);
	if (ret)
		return ret;
	if (t->n_dims < 1 || t->n_dims > LOOM_MAX_DIMS)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s: %u dimensions (1 to %d)",
				      what, t->n_dims, LOOM_MAX_DIMS);
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		t->ne[d] = 1;
	for (uint32_t d = 0; d < t->n_dims; d++) {
		ret = rd_u64(r, &ne, what);
		if (ret)
			return ret;
		if (ne < 1 || ne > (uint64_t)INT64_MAX / rows)
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: %s: dimension %u of "
					      "%llu elements (1 and a total "
					      "below 2^63 expected)", what, d,
					      (unsigned long long)ne);
		t->ne[d] = (int64_t)ne;
		rows *= ne;
	}
	ret = rd_u32(r, &t->type, what);
	if (ret)
		return ret;
	tt = gguf_tensor_type_get(t->type);
	if (!tt)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s: unknown tensor type %u", what,
				      t->type);
	if (t->ne[0] % tt->block)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s: %lld elements per row is not "
				      "a multiple of the %s block of %lld",
				      what, (long long)t->ne[0], tt->name,
				      (long long)tt->block);
	/* Bytes: blocks per row times block bytes times rows. */
	rows /= (uint64_t)t->ne[0];
	t->size = (uint64_t)(t->ne[0] / tt->block);
	if (t->size > UINT64_MAX / tt->block_size ||
	    t->size * tt->block_size > UINT64_MAX / rows)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: %s: its size overflows", what);
	t->size = t->size * tt->block_size * rows;
	ret = rd_u64(r, &t->offset, what);
	if (ret)
		return ret;
	return LOOM_OK;
}

/* The data section is the tensors' data back to back, each padded to
 * the alignment (as every writer lays it out): a run of an alignment or
 * more that no tensor holds means the infos are not those of the data,
 * for example a header that declares one tensor too few, whose data
 * section then starts early and every tensor's data is shifted.  v is
 * sorted by offset and overlaps none. */
static int check_covered(const struct gguf *g, struct gguf_tensor *const *v,
			 size_t data_size)
{
	uint64_t end = 0;

	for (size_t i = 0; i <= g->n_tensors; i++) {
		uint64_t next = i < g->n_tensors ? v[i]->offset : data_size;

		if (next - end >= g->alignment)
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: bytes [%llu, %llu) of the "
					      "data section belong to no "
					      "tensor (does the header declare "
					      "too few tensors?)",
					      (unsigned long long)end,
					      (unsigned long long)next);
		if (i < g->n_tensors)
			end = v[i]->offset + v[i]->size;
	}
	return LOOM_OK;
}

/* Offsets on the alignment, data inside the file, no two tensors sharing
 * a byte, no data that is no tensor's. */
static int check_tensor_data(struct gguf *g)
{
	size_t data_size = g->size - g->data_offset;
	struct gguf_tensor **v;
	int ret = LOOM_OK;

	for (size_t i = 0; i < g->n_tensors; i++) {
		struct gguf_tensor *t = &g->tensors[i];

		if (t->offset % g->alignment)
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: tensor '%s': data offset "
					      "%llu is not a multiple of the "
					      "alignment %zu", t->name,
					      (unsigned long long)t->offset,
					      g->alignment);
		if (t->offset > data_size || t->size > data_size - t->offset)
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: tensor '%s': data [%llu, "
					      "%llu) ends past the end of the "
					      "file (%zu bytes of data)",
					      t->name,
					      (unsigned long long)t->offset,
					      (unsigned long long)(t->offset +
								   t->size),
					      data_size);
		t->data = g->base + g->data_offset + t->offset;
	}
	v = malloc((g->n_tensors ? g->n_tensors : 1) * sizeof(*v));
	if (!v)
		return loom_error_set(LOOM_E_NOMEM, "gguf: no memory");
	for (size_t i = 0; i < g->n_tensors; i++)
		v[i] = &g->tensors[i];
	qsort(v, g->n_tensors, sizeof(*v), cmp_name);
	for (size_t i = 1; i < g->n_tensors && !ret; i++)
		if (!strcmp(v[i - 1]->name, v[i]->name))
			ret = loom_error_set(LOOM_E_INVAL,
					     "gguf: tensor '%s' appears twice",
					     v[i]->name);
	qsort(v, g->n_tensors, sizeof(*v), cmp_offset);
	for (size_t i = 1; i < g->n_tensors && !ret; i++)
		if (v[i - 1]->offset + v[i - 1]->size > v[i]->offset)
			ret = loom_error_set(LOOM_E_INVAL,
					     "gguf: tensor '%s': data [%llu, "
					     "%llu) overlaps tensor '%s' at "
					     "%llu", v[i - 1]->name,
					     (unsigned long long)v[i - 1]->offset,
					     (unsigned long long)(v[i - 1]->offset +
								  v[i - 1]->size),
					     v[i]->name,
					     (unsigned long long)v[i]->offset);
	if (!ret)
		ret = check_covered(g, v, data_size);
	free(v);
	return ret;
}

/* ------------------------------------------------------------------------
 * The file.
 */
static int parse_header(struct rd *r, struct gguf *g, uint64_t *n_tensors,
			uint64_t *n_kv)
{
	char magic[4];
	int ret;

	ret = rd_bytes(r, magic, 4, "header");
	if (ret)
		return ret;
	if (memcmp(magic, "GGUF", 4))
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: not a GGUF file (no 'GGUF' magic)");
	ret = rd_u32(r, &g->version, "header");
	if (ret)
		return ret;
	if (g->version == 1)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: version 1 is not supported (2 "
				      "and 3 are)");
	if (g->version != 2 && g->version != 3) {
		if (!(g->version & 0xffff))
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: a big-endian file "
					      "(only little-endian is "
					      "supported)");
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: unknown version %u", g->version);
	}
	ret = rd_u64(r, n_tensors, "header");
	if (!ret)
		ret = rd_u64(r, n_kv, "header");
	if (ret)
		return ret;
	/* A pair takes at least 12 bytes (key length and type), a tensor
	 * info 24 (name length, n_dims, type, offset). */
	if (*n_kv > (r->size - r->pos) / 12)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: header: %llu key/value pairs "
				      "cannot fit in a file of %zu bytes",
				      (unsigned long long)*n_kv, r->size);
	if (*n_tensors > (r->size - r->pos) / 24)
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: header: %llu tensors cannot fit "
				      "in a file of %zu bytes",
				      (unsigned long long)*n_tensors, r->size);
	return LOOM_OK;
}

int gguf_parse(const void *data, size_t size, struct gguf **out)
{
	struct rd r = { .p = data, .size = size };
	struct gguf *g;
	uint64_t n_tensors, n_kv;
	size_t end;
	int ret;

	if (!out || (!data && size))
		return loom_error_set(LOOM_E_INVAL, "gguf: NULL argument");
	*out = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return loom_error_set(LOOM_E_NOMEM, "gguf: no memory");
	g->base = data;
	g->size = size;
	ret = parse_header(&r, g, &n_tensors, &n_kv);
	if (ret)
		goto err;
	g->kv = calloc(n_kv ? (size_t)n_kv : 1, sizeof(*g->kv));
	g->tensors = calloc(n_tensors ? (size_t)n_tensors : 1,
			    sizeof(*g->tensors));
	if (!g->kv || !g->tensors) {
		ret = loom_error_set(LOOM_E_NOMEM, "gguf: no memory");
		goto err;
	}
	for (size_t i = 0; i < n_kv; i++) {
		g->n_kv = i + 1;
		ret = parse_kv(&r, g, i);
		if (ret)
			goto err;
	}
	ret = check_unique_keys(g);
	if (!ret)
		ret = read_alignment(g);
	if (ret)
		goto err;
	for (size_t i = 0; i < n_tensors; i++) {
		g->n_tensors = i + 1;
		ret = parse_tensor(&r, g, i);
		if (ret)
			goto err;
	}
	/* The data section starts on the alignment after the infos; a file
	 * without tensors may end before it. */
	end = r.pos + (g->alignment - r.pos % g->alignment) % g->alignment;
	if (end < r.pos || end > size) {
		if (n_tensors) {
			ret = loom_error_set(LOOM_E_INVAL,
					     "gguf: the data section at %zu "
					     "starts past the end of the file "
					     "(%zu bytes)", end, size);
			goto err;
		}
		end = size;
	}
	g->data_offset = end;
	ret = check_tensor_data(g);
	if (ret)
		goto err;
	*out = g;
	return LOOM_OK;
err:
	gguf_free(g);
	return ret;
}

int gguf_open(const char *path, struct gguf **out)
{
	struct stat st;
	void *p;
	int fd, ret;

	if (!path || !out)
		return loom_error_set(LOOM_E_INVAL, "gguf: NULL argument");
	/* O_NONBLOCK: opening a FIFO for reading would wait for a writer. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return loom_error_set(LOOM_E_IO, "%s: %s", path,
				      strerror(errno));
	if (fstat(fd, &st)) {
		ret = loom_error_set(LOOM_E_IO, "%s: %s", path,
				     strerror(errno));
		close(fd);
		return ret;
	}
	if (!S_ISREG(st.st_mode) || st.st_size == 0) {
		ret = loom_error_set(LOOM_E_IO, "%s: %s", path,
				     S_ISFIFO(st.st_mode) ? "a FIFO, not a "
				     "regular file" : S_ISREG(st.st_mode) ?
				     "empty file" : "not a regular file");
		close(fd);
		return ret;
	}
	p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (p == MAP_FAILED) {
		ret = loom_error_set(LOOM_E_IO, "%s: cannot map: %s", path,
				     strerror(errno));
		close(fd);
		return ret;
	}
	ret = gguf_parse(p, (size_t)st.st_size, out);
	if (ret) {
		munmap(p, (size_t)st.st_size);
		close(fd);
		return loom_error_set(ret, "%s: %s", path,
				      loom_error_message());
	}
	(*out)->mapped = true;
	(*out)->fd = fd;
	(*out)->st = st;
	(*out)->path = strdup(path);
	return LOOM_OK;
}

/* ------------------------------------------------------------------------
 * Reading the mapping of a file that may change under it.  A page of a
 * file truncated after it was mapped raises SIGBUS when read.  While a
 * thread reads pages through read_guarded(), a handler installed for the
 * time being turns that thread's fault inside the mapping into an error;
 * any other SIGBUS goes to the action that was there before.
 */
static pthread_mutex_t bus_lock = PTHREAD_MUTEX_INITIALIZER;
static int bus_users;
static struct sigaction bus_before;
/* volatile: the handler reads them between the reads of the pages. */
static __thread sigjmp_buf *volatile bus_jump;
static __thread const uint8_t *volatile bus_lo, *volatile bus_hi;

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
	const uint8_t *a = si->si_addr;

	if (bus_jump && a >= bus_lo && a < bus_hi)
		siglongjmp(*bus_jump, 1);
	/* Not ours: the previous action, as if we had never been here. */
	if ((bus_before.sa_flags & SA_SIGINFO) && bus_before.sa_sigaction) {
		bus_before.sa_sigaction(sig, si, uc);
	} else if (bus_before.sa_handler != SIG_DFL &&
		   bus_before.sa_handler != SIG_IGN) {
		bus_before.sa_handler(sig);
	} else {
		signal(SIGBUS, SIG_DFL);
		raise(SIGBUS);
	}
}

static void bus_enter(void)
{
	pthread_mutex_lock(&bus_lock);
	if (bus_users++ == 0) {
		struct sigaction sa = { .sa_sigaction = on_sigbus,
					.sa_flags = SA_SIGINFO | SA_NODEFER };

		sigemptyset(&sa.sa_mask);
		sigaction(SIGBUS, &sa, &bus_before);
	}
	pthread_mutex_unlock(&bus_lock);
}

static void bus_leave(void)
{
	pthread_mutex_lock(&bus_lock);
	if (--bus_users == 0)
		sigaction(SIGBUS, &bus_before, NULL);
	pthread_mutex_unlock(&bus_lock);
}

/* Reads one byte of every page of [p, p + n) on this thread; false when
 * one of them is gone from the file. */
static bool read_guarded(const uint8_t *p, size_t n)
{
	long page = sysconf(_SC_PAGESIZE);
	volatile uint8_t sink = 0;
	sigjmp_buf jump;

	if (!n)
		return true;
	bus_enter();
	bus_lo = p;
	bus_hi = p + n;
	if (sigsetjmp(jump, 1) != 0) {
		bus_jump = NULL;
		bus_leave();
		return false;
	}
	bus_jump = &jump;
	for (size_t off = 0; off < n; off += (size_t)page)
		sink ^= ((const volatile uint8_t *)p)[off];
	sink ^= ((const volatile uint8_t *)p)[n - 1];
	bus_jump = NULL;
	bus_leave();
	(void)sink;
	return true;
}

int gguf_check_read(const struct gguf *g, const void *p, size_t n)
{
	struct stat st;

	if (!g->mapped)
		return LOOM_OK;
	if (!read_guarded(p, n) || fstat(g->fd, &st) ||
	    st.st_size != g->st.st_size ||
	    st.st_mtim.tv_sec != g->st.st_mtim.tv_sec ||
	    st.st_mtim.tv_nsec != g->st.st_mtim.tv_nsec)
		return loom_error_set(LOOM_E_IO, "%s: the file changed while "
				      "in use", g->path ? g->path : "gguf");
	return LOOM_OK;
}

void gguf_free(struct gguf *g)
{
	if (!g)
		return;
	for (size_t i = 0; i < g->n_kv; i++) {
		free(g->kv[i].key);
		free(g->kv[i].strs);
	}
	free(g->kv);
	free(g->tensors);
	if (g->mapped) {
		munmap((void *)g->base, g->size);
		close(g->fd);
	}
	free(g->path);
	free(g);
}

void gguf_drop_pages(const struct gguf *g, const void *p, size_t n)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t base = (uintptr_t)g->base, end = base + g->size;
	uintptr_t a = (uintptr_t)p, b, mask;

	/* Only the file's own mapping: pages beyond it may belong to other
	 * memory, which MADV_DONTNEED would zero.  The mapping's last page
	 * is its own to its end. */
	if (!g->mapped || page <= 0 || a >= end)
		return;
	if (a < base) {
		if (n <= base - a)
			return;
		n -= base - a;
		a = base;
	}
	mask = (uintptr_t)page - 1;
	b = n < end - a ? a + n : end;
	if (b == end)
		b = (end + mask) & ~mask;
	a = (a + mask) & ~mask;
	b &= ~mask;
	if (b > a)
		madvise((void *)a, b - a, MADV_DONTNEED);
}

/* ------------------------------------------------------------------------
 * Accessors.
 */
uint32_t gguf_version(const struct gguf *g)
{
	return g->version;
}

size_t gguf_alignment(const struct gguf *g)
{
	return g->alignment;
}

const void *gguf_bytes(const struct gguf *g, size_t *size)
{
	if (size)
		*size = g->size;
	return g->base;
}

size_t gguf_data_offset(const struct gguf *g)
{
	return g->data_offset;
}

size_t gguf_n_kv(const struct gguf *g)
{
	return g->n_kv;
}

const struct gguf_kv *gguf_kv_get(const struct gguf *g, size_t i)
{
	return i < g->n_kv ? &g->kv[i] : NULL;
}

const struct gguf_kv *gguf_kv_find(const struct gguf *g, const char *key)
{
	for (size_t i = 0; i < g->n_kv; i++)
		if (!strcmp(g->kv[i].key, key))
			return &g->kv[i];
	return NULL;
}

double gguf_kv_number(const struct gguf_kv *kv, uint64_t i)
{
	enum gguf_type t = kv->type == GGUF_TYPE_ARRAY ? kv->arr_type :
							  kv->type;
	const uint8_t *p = (const uint8_t *)kv->data +
			   (size_t)i * scalar_size(t);
	union {
		uint8_t u8; int8_t i8; uint16_t u16; int16_t i16;
		uint32_t u32; int32_t i32; float f32; uint64_t u64;
		int64_t i64; double f64;
	} v;

	memcpy(&v, p, scalar_size(t));
	switch (t) {
	case GGUF_TYPE_UINT8: case GGUF_TYPE_BOOL: return v.u8;
	case GGUF_TYPE_INT8: return v.i8;
	case GGUF_TYPE_UINT16: return v.u16;
	case GGUF_TYPE_INT16: return v.i16;
	case GGUF_TYPE_UINT32: return v.u32;
	case GGUF_TYPE_INT32: return v.i32;
	case GGUF_TYPE_FLOAT32: return v.f32;
	case GGUF_TYPE_UINT64: return (double)v.u64;
	case GGUF_TYPE_INT64: return (double)v.i64;
	case GGUF_TYPE_FLOAT64: return v.f64;
	default: return 0;
	}
}

static int find_typed(const struct gguf *g, const char *key,
		      const char *want, bool (*ok)(enum gguf_type),
		      const struct gguf_kv **out)
{
	const struct gguf_kv *kv = gguf_kv_find(g, key);

	if (!kv)
		return loom_error_set(LOOM_E_NOT_FOUND, "gguf: no key '%s'",
				      key);
	if (!ok(kv->type))
		return loom_error_set(LOOM_E_INVAL,
				      "gguf: key '%s' is a %s, not %s", key,
				      gguf_type_name(kv->type), want);
	*out = kv;
	return LOOM_OK;
}

static bool is_int(enum gguf_type t)
{
	return t <= GGUF_TYPE_INT32 || t == GGUF_TYPE_UINT64 ||
	       t == GGUF_TYPE_INT64;
}

static bool is_float(enum gguf_type t)
{
	return t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64;
}

static bool is_bool(enum gguf_type t)
{
	return t == GGUF_TYPE_BOOL;
}

static bool is_string(enum gguf_type t)
{
	return t == GGUF_TYPE_STRING;
}

int gguf_get_int(const struct gguf *g, const char *key, int64_t *out)
{
	const struct gguf_kv *kv = NULL;
	uint64_t u;
	int ret = find_typed(g, key, "an integer", is_int, &kv);

	if (ret)
		return ret;
	if (kv->type == GGUF_TYPE_UINT64) {
		memcpy(&u, kv->data, sizeof(u));
		if (u > INT64_MAX)
			return loom_error_set(LOOM_E_RANGE, "gguf: key '%s': "
					      "%llu is too large", key,
					      (unsigned long long)u);
		*out = (int64_t)u;
	} else if (kv->type == GGUF_TYPE_INT64) {
		memcpy(out, kv->data, sizeof(*out));
	} else {
		*out = (int64_t)gguf_kv_number(kv, 0);
	}
	return LOOM_OK;
}

int gguf_get_float(const struct gguf *g, const char *key, double *out)
{
	const struct gguf_kv *kv = NULL;
	int ret = find_typed(g, key, "a float", is_float, &kv);

	if (ret)
		return ret;
	*out = gguf_kv_number(kv, 0);
	return LOOM_OK;
}

int gguf_get_bool(const struct gguf *g, const char *key, bool *out)
{
	const struct gguf_kv *kv = NULL;
	int ret = find_typed(g, key, "a bool", is_bool, &kv);

	if (ret)
		return ret;
	*out = *(const uint8_t *)kv->data != 0;
	return LOOM_OK;
}

int gguf_get_string(const struct gguf *g, const char *key, char *buf,
		    size_t size)
{
	const struct gguf_kv *kv = NULL;
	int ret = find_typed(g, key, "a string", is_string, &kv);

	if (ret)
		return ret;
	if (kv->strs[0].n >= size ||
	    memchr(kv->strs[0].s, 0, (size_t)kv->strs[0].n))
		return loom_error_set(LOOM_E_RANGE, "gguf: key '%s': string "
				      "too long or with a NUL byte", key);
	memcpy(buf, kv->strs[0].s, (size_t)kv->strs[0].n);
	buf[kv->strs[0].n] = 0;
	return LOOM_OK;
}

size_t gguf_n_tensors(const struct gguf *g)
{
	return g->n_tensors;
}

const struct gguf_tensor *gguf_tensor_get(const struct gguf *g, size_t i)
{
	return i < g->n_tensors ? &g->tensors[i] : NULL;
}

const struct gguf_tensor *gguf_tensor_find(const struct gguf *g,
					   const char *name)
{
	for (size_t i = 0; i < g->n_tensors; i++)
		if (!strcmp(g->tensors[i].name, name))
			return &g->tensors[i];
	return NULL;
}
