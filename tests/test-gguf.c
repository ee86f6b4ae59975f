/* SPDX-License-Identifier: MIT */
/* test-gguf.c - the GGUF reader and writer: every metadata type written
 * and read back, version 2 and 3 headers, the mapped file, and corrupted
 * files, each refused with the message that names what is wrong.
 */
#include <fcntl.h>
#include <glib.h>
#include <glib/gstdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../model/gguf.h"

/* ------------------------------------------------------------------------
 * A small file: one pair of every scalar type, arrays of each, and two
 * tensors.
 */
static const char *const strs[] = { "", "hello", "wörld ✓", "a\nb" };
static const float tdata0[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
static const uint16_t tdata1[6] = { 0x3c00, 0x4000, 0x4200, 0x4400, 0,
				    0xbc00 };

static struct gguf_writer *small_writer(uint32_t alignment)
{
	struct gguf_writer *w;
	uint8_t u8 = 200, b = 1;
	int8_t i8 = -100;
	uint16_t u16 = 60000;
	int16_t i16 = -30000;
	uint32_t u32 = 4000000000u;
	int32_t i32 = -2000000000;
	float f32 = 3.5f;
	uint64_t u64 = 18000000000000000000ull;
	int64_t i64 = -9000000000000000000ll;
	double f64 = -1.25e300;
	int32_t ai[5] = { 1, -2, 3, -4, 5 };
	double af[3] = { 0.5, -0.25, 1e-300 };
	uint8_t ab[4] = { 1, 0, 0, 1 };
	int64_t ne0[2] = { 4, 2 }, ne1[2] = { 3, 2 };

	g_assert_cmpint(gguf_writer_new(&w), ==, LOOM_OK);
	if (alignment)
		g_assert_cmpint(gguf_writer_add_u32(w, "general.alignment",
						    alignment), ==, LOOM_OK);
	gguf_writer_add_str(w, "general.architecture", "llama");
	gguf_writer_add(w, "v.u8", GGUF_TYPE_UINT8, &u8);
	gguf_writer_add(w, "v.i8", GGUF_TYPE_INT8, &i8);
	gguf_writer_add(w, "v.u16", GGUF_TYPE_UINT16, &u16);
	gguf_writer_add(w, "v.i16", GGUF_TYPE_INT16, &i16);
	gguf_writer_add(w, "v.u32", GGUF_TYPE_UINT32, &u32);
	gguf_writer_add(w, "v.i32", GGUF_TYPE_INT32, &i32);
	gguf_writer_add(w, "v.f32", GGUF_TYPE_FLOAT32, &f32);
	gguf_writer_add(w, "v.bool", GGUF_TYPE_BOOL, &b);
	gguf_writer_add(w, "v.u64", GGUF_TYPE_UINT64, &u64);
	gguf_writer_add(w, "v.i64", GGUF_TYPE_INT64, &i64);
	gguf_writer_add(w, "v.f64", GGUF_TYPE_FLOAT64, &f64);
	gguf_writer_add_array(w, "a.i32", GGUF_TYPE_INT32, 5, ai);
	gguf_writer_add_array(w, "a.f64", GGUF_TYPE_FLOAT64, 3, af);
	gguf_writer_add_array(w, "a.bool", GGUF_TYPE_BOOL, 4, ab);
	gguf_writer_add_array(w, "a.str", GGUF_TYPE_STRING, 4, strs);
	gguf_writer_add_array(w, "a.empty", GGUF_TYPE_UINT8, 0, NULL);
	gguf_writer_add_tensor(w, "t.f32", 0, 2, ne0, tdata0);
	g_assert_cmpint(gguf_writer_add_tensor(w, "t.f16", 1, 2, ne1, tdata1),
			==, LOOM_OK);
	return w;
}

static void *small_file(uint32_t alignment, size_t *size)
{
	struct gguf_writer *w = small_writer(alignment);
	void *p;

	g_assert_cmpint(gguf_writer_bytes(w, &p, size), ==, LOOM_OK);
	gguf_writer_free(w);
	return p;
}

static const struct gguf_kv *kv_of(struct gguf *g, const char *key,
				   enum gguf_type type)
{
	const struct gguf_kv *kv = gguf_kv_find(g, key);

	g_assert_nonnull(kv);
	g_assert_cmpint(kv->type, ==, type);
	return kv;
}

static void check_small(struct gguf *g, size_t alignment)
{
	const struct gguf_kv *kv;
	const struct gguf_tensor *t;
	int64_t i;
	double d;
	bool b;
	char s[32];

	g_assert_cmpuint(gguf_alignment(g), ==, alignment);
	g_assert_cmpuint(gguf_data_offset(g) % alignment, ==, 0);
	g_assert_cmpuint(gguf_n_kv(g), ==, alignment == 32 ? 17 : 18);
	g_assert_cmpint(gguf_get_string(g, "general.architecture", s,
					sizeof(s)), ==, LOOM_OK);
	g_assert_cmpstr(s, ==, "llama");
	g_assert_cmpint(gguf_get_int(g, "v.u8", &i), ==, 0);
	g_assert_cmpint(i, ==, 200);
	g_assert_cmpint(gguf_get_int(g, "v.i8", &i), ==, 0);
	g_assert_cmpint(i, ==, -100);
	g_assert_cmpint(gguf_get_int(g, "v.u16", &i), ==, 0);
	g_assert_cmpint(i, ==, 60000);
	g_assert_cmpint(gguf_get_int(g, "v.i16", &i), ==, 0);
	g_assert_cmpint(i, ==, -30000);
	g_assert_cmpint(gguf_get_int(g, "v.u32", &i), ==, 0);
	g_assert_cmpint(i, ==, 4000000000ll);
	g_assert_cmpint(gguf_get_int(g, "v.i32", &i), ==, 0);
	g_assert_cmpint(i, ==, -2000000000);
	g_assert_cmpint(gguf_get_int(g, "v.i64", &i), ==, 0);
	g_assert_cmpint(i, ==, -9000000000000000000ll);
	/* A u64 above INT64_MAX is out of range, not wrapped. */
	g_assert_cmpint(gguf_get_int(g, "v.u64", &i), ==, LOOM_E_RANGE);
	kv = kv_of(g, "v.u64", GGUF_TYPE_UINT64);
	g_assert_cmpfloat(gguf_kv_number(kv, 0), ==, 18000000000000000000.0);
	g_assert_cmpint(gguf_get_float(g, "v.f32", &d), ==, 0);
	g_assert_cmpfloat(d, ==, 3.5);
	g_assert_cmpint(gguf_get_float(g, "v.f64", &d), ==, 0);
	g_assert_cmpfloat(d, ==, -1.25e300);
	g_assert_cmpint(gguf_get_bool(g, "v.bool", &b), ==, 0);
	g_assert_true(b);
	/* Wrong types and absent keys say so. */
	g_assert_cmpint(gguf_get_float(g, "v.u8", &d), ==, LOOM_E_INVAL);
	g_assert_cmpstr(loom_error_message(), ==,
			"gguf: key 'v.u8' is a u8, not a float");
	g_assert_cmpint(gguf_get_int(g, "nope", &i), ==, LOOM_E_NOT_FOUND);

	kv = kv_of(g, "a.i32", GGUF_TYPE_ARRAY);
	g_assert_cmpint(kv->arr_type, ==, GGUF_TYPE_INT32);
	g_assert_cmpuint(kv->n, ==, 5);
	for (int k = 0; k < 5; k++)
		g_assert_cmpfloat(gguf_kv_number(kv, k), ==,
				  (k % 2 ? -1 : 1) * (k + 1));
	kv = kv_of(g, "a.f64", GGUF_TYPE_ARRAY);
	g_assert_cmpfloat(gguf_kv_number(kv, 2), ==, 1e-300);
	kv = kv_of(g, "a.bool", GGUF_TYPE_ARRAY);
	g_assert_cmpint(kv->arr_type, ==, GGUF_TYPE_BOOL);
	g_assert_cmpfloat(gguf_kv_number(kv, 3), ==, 1);
	g_assert_cmpfloat(gguf_kv_number(kv, 1), ==, 0);
	kv = kv_of(g, "a.str", GGUF_TYPE_ARRAY);
	g_assert_cmpint(kv->arr_type, ==, GGUF_TYPE_STRING);
	g_assert_cmpuint(kv->n, ==, 4);
	for (int k = 0; k < 4; k++) {
		g_assert_cmpuint(kv->strs[k].n, ==, strlen(strs[k]));
		g_assert_true(!memcmp(kv->strs[k].s, strs[k], kv->strs[k].n));
	}
	kv = kv_of(g, "a.empty", GGUF_TYPE_ARRAY);
	g_assert_cmpuint(kv->n, ==, 0);

	g_assert_cmpuint(gguf_n_tensors(g), ==, 2);
	t = gguf_tensor_find(g, "t.f32");
	g_assert_nonnull(t);
	g_assert_cmpint(t->ne[0], ==, 4);
	g_assert_cmpint(t->ne[1], ==, 2);
	g_assert_cmpint(t->ne[2], ==, 1);
	g_assert_cmpuint(t->size, ==, sizeof(tdata0));
	g_assert_true(!memcmp(t->data, tdata0, sizeof(tdata0)));
	t = gguf_tensor_find(g, "t.f16");
	g_assert_nonnull(t);
	g_assert_cmpuint(t->offset % alignment, ==, 0);
	g_assert_cmpuint(t->size, ==, sizeof(tdata1));
	g_assert_true(!memcmp(t->data, tdata1, sizeof(tdata1)));
}

static void test_round_trip(void)
{
	static const uint32_t aligns[] = { 0, 1, 64, 4096 };

	for (size_t a = 0; a < G_N_ELEMENTS(aligns); a++) {
		size_t size;
		uint8_t *p = small_file(aligns[a], &size);
		struct gguf *g;

		if (gguf_parse(p, size, &g))
			g_error("parse: %s", loom_error_message());
		g_assert_cmpuint(gguf_version(g), ==, 3);
		check_small(g, aligns[a] ? aligns[a] : 32);
		gguf_free(g);
		/* A version 2 file has the same layout. */
		p[4] = 2;
		g_assert_cmpint(gguf_parse(p, size, &g), ==, LOOM_OK);
		g_assert_cmpuint(gguf_version(g), ==, 2);
		gguf_free(g);
		free(p);
	}
}

/* A range that runs past the file (or starts before it) drops only the
 * file's pages: memory mapped right beside the file keeps its bytes. */
static void drop_beside(struct gguf *g)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), size;
	const uint8_t *base = gguf_bytes(g, &size);
	uint8_t *next = (uint8_t *)base + (size + page - 1) / page * page;
	uint8_t *prev = (uint8_t *)base - page;
	uint8_t *got[2] = { next, prev };

	for (int i = 0; i < 2; i++) {
		void *m = mmap(got[i], page, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS |
			       MAP_FIXED_NOREPLACE, -1, 0);

		if (m == MAP_FAILED || m != got[i]) {
			/* Something else lives there; this part can't run. */
			if (m != MAP_FAILED)
				munmap(m, page);
			got[i] = NULL;
			continue;
		}
		memset(m, 0xa5, page);
	}
	gguf_drop_pages(g, base, 1 << 20);
	gguf_drop_pages(g, base - page, 2 * page + size);
	gguf_drop_pages(g, base + size, page);
	for (int i = 0; i < 2; i++) {
		if (!got[i])
			continue;
		for (size_t j = 0; j < page; j++)
			g_assert_cmpuint(got[i][j], ==, 0xa5);
		munmap(got[i], page);
	}
	if (!got[0] && !got[1])
		g_test_message("no free page beside the mapping");
	check_small(g, 32);
}

static void test_open(void)
{
	struct gguf_writer *w = small_writer(0);
	char *dir = g_dir_make_tmp("loom-gguf-XXXXXX", NULL);
	char *path = g_build_filename(dir, "small.gguf", NULL);
	struct gguf *g;

	g_assert_cmpint(gguf_writer_save(w, path), ==, LOOM_OK);
	gguf_writer_free(w);
	if (gguf_open(path, &g))
		g_error("open: %s", loom_error_message());
	check_small(g, 32);
	/* Dropped pages read back from the file. */
	gguf_drop_pages(g, gguf_bytes(g, NULL), 1 << 16);
	check_small(g, 32);
	drop_beside(g);
	gguf_free(g);
	g_unlink(path);
	g_assert_cmpint(gguf_open(path, &g), ==, LOOM_E_IO);
	g_assert_nonnull(strstr(loom_error_message(), "No such file"));
	g_rmdir(dir);
	g_free(path);
	g_free(dir);
}

/* Saves at path a file of one tensor, "big": 64 Ki zeros, F32. */
static void save_big(const char *path)
{
	static const float big[64 << 10];
	struct gguf_writer *w;

	g_assert_cmpint(gguf_writer_new(&w), ==, LOOM_OK);
	gguf_writer_add_tensor(w, "big", 0, 1, (int64_t[]){ 64 << 10 }, big);
	g_assert_cmpint(gguf_writer_save(w, path), ==, LOOM_OK);
	gguf_writer_free(w);
}

/* A file that changes while mapped: truncated under the mapping (its
 * pages then fault), rewritten in place, and a FIFO, refused without
 * waiting for a writer. */
static void test_changed(void)
{
	char *dir = g_dir_make_tmp("loom-gguf-XXXXXX", NULL);
	char *path = g_build_filename(dir, "big.gguf", NULL);
	char *fifo = g_build_filename(dir, "fifo", NULL);
	const struct gguf_tensor *t;
	struct gguf *g;
	struct timespec later[2] = { { 0, UTIME_OMIT }, { 12345, 0 } };

	save_big(path);
	g_assert_cmpint(gguf_open(path, &g), ==, LOOM_OK);
	t = gguf_tensor_find(g, "big");
	g_assert_cmpint(gguf_check_read(g, t->data, t->size), ==, LOOM_OK);
	/* Cut after the header: the tensor's pages are gone. */
	g_assert_cmpint(truncate(path, 4096), ==, 0);
	g_assert_cmpint(gguf_check_read(g, t->data, t->size), ==, LOOM_E_IO);
	g_assert_true(g_str_has_suffix(loom_error_message(),
				       "big.gguf: the file changed while in "
				       "use"));
	gguf_free(g);

	/* The same size, written again. */
	g_assert_cmpint(truncate(path, 0), ==, 0);
	save_big(path);
	g_assert_cmpint(gguf_open(path, &g), ==, LOOM_OK);
	t = gguf_tensor_find(g, "big");
	g_assert_cmpint(utimensat(AT_FDCWD, path, later, 0), ==, 0);
	g_assert_cmpint(gguf_check_read(g, t->data, t->size), ==, LOOM_E_IO);
	gguf_free(g);

	g_assert_cmpint(mkfifo(fifo, 0600), ==, 0);
	g_assert_cmpint(gguf_open(fifo, &g), ==, LOOM_E_IO);
	g_assert_true(g_str_has_suffix(loom_error_message(),
				       "fifo: a FIFO, not a regular file"));
	g_unlink(fifo);
	g_unlink(path);
	g_rmdir(dir);
	g_free(fifo);
	g_free(path);
	g_free(dir);
}

/* ------------------------------------------------------------------------
 * Corruptions.  Each patches the small file and checks the message.
 */
static size_t find(const uint8_t *p, size_t size, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i + n <= size; i++)
		if (!memcmp(p + i, s, n))
			return i;
	g_error("'%s' not in the file", s);
	return 0;
}

static void put64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	memcpy(p, &v, 4);
}

static void refused(const uint8_t *p, size_t size, const char *want)
{
	struct gguf *g = NULL;
	int ret = gguf_parse(p, size, &g);

	g_assert_cmpint(ret, ==, LOOM_E_INVAL);
	g_assert_null(g);
	if (!strstr(loom_error_message(), want))
		g_error("message '%s' lacks '%s'", loom_error_message(), want);
}

/* Offset of the field after tensor name's n_dims and dims. */
static size_t tensor_field(const uint8_t *p, size_t size, const char *name,
			   int field)
{
	size_t at = find(p, size, name) + strlen(name);

	/* n_dims 2: then ne0, ne1 (8 each), type (4), offset (8). */
	static const size_t off[] = { 0, 4, 12, 20, 24 };
	return at + off[field];
}

enum { F_NDIMS, F_NE0, F_NE1, F_TYPE, F_OFFSET };

/* A file whose only key is general.alignment, value as a u32 (or as an
 * f32), is refused with want. */
static void alignment_refused(bool as_f32, uint32_t value, const char *want)
{
	struct gguf_writer *w;
	void *q;
	size_t n;

	g_assert_cmpint(gguf_writer_new(&w), ==, 0);
	if (as_f32)
		gguf_writer_add_f32(w, "general.alignment", (float)value);
	else
		gguf_writer_add_u32(w, "general.alignment", value);
	g_assert_cmpint(gguf_writer_bytes(w, &q, &n), ==, 0);
	refused(q, n, want);
	free(q);
	gguf_writer_free(w);
}

static void test_corrupt(void)
{
	size_t size, at;
	uint8_t *orig = small_file(0, &size), *p = g_malloc(size);
	const struct gguf_tensor *last;
	struct gguf *g;
	size_t data_end;

	g_assert_cmpint(gguf_parse(orig, size, &g), ==, LOOM_OK);
	last = gguf_tensor_find(g, "t.f16");
	data_end = gguf_data_offset(g) + last->offset + last->size;
	gguf_free(g);

#define RESET() memcpy(p, orig, size)
	/* Truncated anywhere before the end of the last tensor's data. */
	for (size_t n = 0; n < data_end; n++) {
		g = NULL;
		g_assert_cmpint(gguf_parse(orig, n, &g), ==, LOOM_E_INVAL);
		g_assert_null(g);
		g_assert_true(g_str_has_prefix(loom_error_message(), "gguf: "));
	}
	refused(orig, 20, "header at offset 16: 8 bytes needed, the file "
		"ends at 20");
	refused(orig, data_end - 1, "tensor 't.f16': data [");
	refused(orig, data_end - 1, "ends past the end of the file");

	RESET();
	p[0] = 'X';
	refused(p, size, "not a GGUF file");
	RESET();
	put32(p + 4, 1);
	refused(p, size, "version 1 is not supported");
	RESET();
	put32(p + 4, 3u << 24);
	refused(p, size, "big-endian");

	/* Counts no file of this size can hold. */
	RESET();
	put64(p + 16, 1ull << 60);
	refused(p, size, "key/value pairs cannot fit");
	RESET();
	put64(p + 8, 1ull << 60);
	refused(p, size, "tensors cannot fit");
	RESET();
	put64(p + 16, 40);
	refused(p, size, "gguf: key ");

	/* A huge string length, in a key and in a value. */
	RESET();
	put64(p + find(p, size, "general.architecture") - 8, 1ull << 62);
	refused(p, size, "key 0 at offset 24: string of 4611686018427387904 "
		"bytes runs past the end of the file");
	RESET();
	at = find(p, size, "llama") - 8;
	put64(p + at, ~0ull);
	refused(p, size, "key 0 ('general.architecture') at offset");
	/* A huge string-array count. */
	RESET();
	at = find(p, size, "a.str") + 5 + 4 + 4;
	put64(p + at, 1ull << 61);
	refused(p, size, "strings cannot fit");
	/* A huge numeric array count. */
	RESET();
	at = find(p, size, "a.i32") + 5 + 4 + 4;
	put64(p + at, 1ull << 62);
	refused(p, size, "key 12 ('a.i32') at offset");
	refused(p, size, "values of 4 bytes run past the end of the file");

	/* Unknown types. */
	RESET();
	put32(p + find(p, size, "v.u8") + 4, 99);
	refused(p, size, "key 1 ('v.u8') at offset");
	refused(p, size, "unknown value type 99");
	RESET();
	put32(p + find(p, size, "a.i32") + 5 + 4, 13);
	refused(p, size, "unknown array element type 13");
	RESET();
	put32(p + find(p, size, "a.i32") + 5 + 4, GGUF_TYPE_ARRAY);
	refused(p, size, "arrays of arrays are not supported");
	RESET();
	put32(p + tensor_field(p, size, "t.f16", F_TYPE), 99);
	refused(p, size, "tensor 't.f16': unknown tensor type 99");
	RESET();
	p[find(p, size, "v.bool") + 6 + 4] = 7;
	refused(p, size, "bool value 7");

	/* Dimensions. */
	RESET();
	put32(p + tensor_field(p, size, "t.f32", F_NDIMS), 5);
	refused(p, size, "tensor 't.f32': 5 dimensions (1 to 4)");
	RESET();
	put64(p + tensor_field(p, size, "t.f32", F_NE1), 1ull << 62);
	refused(p, size, "tensor 't.f32': dimension 1 of 4611686018427387904 "
		"elements");
	RESET();
	put64(p + tensor_field(p, size, "t.f32", F_NE0), 0);
	refused(p, size, "tensor 't.f32': dimension 0 of 0 elements");
	RESET();
	/* q8_0 rows are whole blocks of 32. */
	put32(p + tensor_field(p, size, "t.f16", F_TYPE), 8);
	refused(p, size, "tensor 't.f16': 3 elements per row is not a "
		"multiple of the q8_0 block of 32");
	RESET();
	/* Elements fitting in int64 but bytes overflowing. */
	put64(p + tensor_field(p, size, "t.f32", F_NE0), 1ull << 32);
	put64(p + tensor_field(p, size, "t.f32", F_NE1), 1ull << 30);
	refused(p, size, "tensor 't.f32': its size overflows");

	/* Offsets: off the alignment, past the end, overlapping. */
	RESET();
	put64(p + tensor_field(p, size, "t.f16", F_OFFSET), 33);
	refused(p, size, "tensor 't.f16': data offset 33 is not a multiple "
		"of the alignment 32");
	RESET();
	put64(p + tensor_field(p, size, "t.f16", F_OFFSET), 1ull << 40);
	refused(p, size, "tensor 't.f16': data [1099511627776, "
		"1099511627788) ends past the end of the file");
	RESET();
	put64(p + tensor_field(p, size, "t.f16", F_OFFSET), ~0ull << 5);
	refused(p, size, "ends past the end of the file");
	RESET();
	put64(p + tensor_field(p, size, "t.f16", F_OFFSET), 0);
	refused(p, size, "tensor 't.f16': data [0, 12) overlaps tensor "
		"'t.f32' at 0");
	/* A header that declares one tensor too few: the data section
	 * then starts early and holds bytes no tensor accounts for. */
	RESET();
	put64(p + 8, 1);
	refused(p, size, "of the data section belong to no tensor (does the "
		"header declare too few tensors?)");
	/* Duplicates. */
	RESET();
	memcpy(p + find(p, size, "t.f16"), "t.f32", 5);
	refused(p, size, "tensor 't.f32' appears twice");
	RESET();
	memcpy(p + find(p, size, "v.i16"), "v.u16", 5);
	refused(p, size, "key 'v.u16' appears twice");
	/* A name longer than Loom's tensors hold. */
	RESET();
	put64(p + find(p, size, "t.f32") - 8, 64);
	refused(p, size, "a name of 64 bytes (at most 63");
	g_free(p);
	free(orig);

	/* The alignment must be a power of two, and a u32. */
	alignment_refused(false, 24, "general.alignment 24 is not a power of "
			  "two");
	alignment_refused(true, 32, "general.alignment is a f32, not a u32");
#undef RESET
}

static void test_types(void)
{
	const struct gguf_tensor_type *tt = gguf_tensor_type_get(8);
	struct gguf_tensor t = { .name = "blk.0.ffn_up.weight", .type = 9 };
	enum loom_type lt;

	g_assert_nonnull(tt);
	g_assert_cmpstr(tt->name, ==, "q8_0");
	g_assert_null(gguf_tensor_type_get(4));
	g_assert_null(gguf_tensor_type_get(1000));
	g_assert_cmpint(gguf_tensor_type_of(LOOM_TYPE_BF16), ==, 30);
	g_assert_cmpint(gguf_tensor_type_of(LOOM_TYPE_Q8_0), ==, 8);
	t.type = 30;
	g_assert_cmpint(gguf_tensor_loom_type(&t, &lt), ==, LOOM_OK);
	g_assert_cmpint(lt, ==, LOOM_TYPE_BF16);
	/* Types Loom has, by the format's numbers. */
	static const struct {
		uint32_t id;
		enum loom_type type;
	} have[] = {
		{ 3, LOOM_TYPE_Q4_1 }, { 6, LOOM_TYPE_Q5_0 },
		{ 7, LOOM_TYPE_Q5_1 }, { 10, LOOM_TYPE_Q2_K },
		{ 11, LOOM_TYPE_Q3_K }, { 20, LOOM_TYPE_IQ4_NL },
		{ 23, LOOM_TYPE_IQ4_XS }, { 39, LOOM_TYPE_MXFP4 },
	};
	for (size_t i = 0; i < G_N_ELEMENTS(have); i++) {
		t.type = have[i].id;
		g_assert_cmpint(gguf_tensor_loom_type(&t, &lt), ==, LOOM_OK);
		g_assert_cmpint(lt, ==, have[i].type);
		g_assert_cmpint(gguf_tensor_type_of(have[i].type), ==,
				(int)have[i].id);
	}
	/* A type the format has and Loom lacks is refused by name. */
	t.type = 9;
	g_assert_cmpint(gguf_tensor_loom_type(&t, &lt), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_cmpstr(loom_error_message(), ==,
			"tensor 'blk.0.ffn_up.weight': type q8_1 is not "
			"supported by Loom");
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/gguf/round-trip", test_round_trip);
	g_test_add_func("/gguf/open", test_open);
	g_test_add_func("/gguf/changed", test_changed);
	g_test_add_func("/gguf/corrupt", test_corrupt);
	g_test_add_func("/gguf/types", test_types);
	return g_test_run();
}
