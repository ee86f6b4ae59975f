/* SPDX-License-Identifier: MIT */
/* cpu-weights.c - the weight buffer type ("weight_buffer_type"): host
 * memory whose matrices of a type with fields in cpu-types.h are stored 16
 * rows to a group, interleaved block by block, so that the decode kernels
 * (matmul-w.c) read 16 rows' blocks as whole vectors.  A group's block
 * holds each field of the 16 rows' blocks in turn: a half as 16 halves,
 * a single byte (MXFP4's exponent) as 16 bytes, any other field as
 * 64-byte chunks, chunk i holding bytes 4i..4i+3 of each row's field,
 * row after row.  Every other tensor is stored as usual.  Set, get and
 * memset take the usual layout at any offset, through the groups they
 * touch; only mul_mat reads an interleaved matrix (as its weights),
 * every other op that would is refused.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-private.h"
#include "matmul-q8.h"

#if defined(CPU_HAVE_WEIGHTS)

/* NULL for a type the buffer stores as it is. */
static const struct w_field *fields_of(enum loom_type type)
{
	return cpu_type_of(type)->w;
}

static size_t elem_bytes(const struct w_field *f)
{
	return f->bytes == 1 ? 1 : f->bytes % 4 ? 2 : 4;
}

/* An element of w bytes (1, 2 or 4), copied by a constant-size move. */
static inline void move_elem(char *dst, const char *src, size_t w)
{
	if (w == 1)
		*dst = *src;
	else if (w == 2)
		memcpy(dst, src, 2);
	else
		memcpy(dst, src, 4);
}

bool cpu_w_available(void)
{
	const char *env = loom_env_get("LOOM_CPU_WEIGHTS");

	return cpu_q8_vnni() && !(env && !strcmp(env, "0"));
}

/* The entry point, also the mark that a device is this plugin's. */
loom_buffer_type_t *cpu_weight_buffer_type(loom_dev_t *dev)
{
	struct cpu_device *cd = loom_dev_context(dev);

	return cd ? cd->wbuft : NULL;
}

/* The weight buffers alive, so that whether a tensor's buffer is one is
 * answered without a lock: every node of every compute asks.  A slot
 * holds a buffer from its allocation to its free; w_top is one past the
 * highest slot ever used.  Buffers beyond the slots (w_spilled of them)
 * are asked of the core, under its lock, as before. */
#define CPU_W_SLOTS 64
static _Atomic(loom_buffer_t *) w_slots[CPU_W_SLOTS];
static atomic_size_t w_top;
static atomic_size_t w_spilled;

/* Records buf as a weight buffer; true when a slot holds it. */
static bool w_slot_take(loom_buffer_t *buf)
{
	for (size_t i = 0; i < CPU_W_SLOTS; i++) {
		loom_buffer_t *none = NULL;
		size_t top;

		if (!atomic_compare_exchange_strong(&w_slots[i], &none, buf))
			continue;
		top = atomic_load(&w_top);
		while (top < i + 1 &&
		       !atomic_compare_exchange_weak(&w_top, &top, i + 1))
			;
		return true;
	}
	atomic_fetch_add(&w_spilled, 1);
	return false;
}

/* Forgets buf, at its free. */
static void w_slot_give(loom_buffer_t *buf)
{
	size_t top = atomic_load(&w_top);

	for (size_t i = 0; i < top; i++) {
		loom_buffer_t *want = buf;

		if (atomic_compare_exchange_strong(&w_slots[i], &want, NULL))
			return;
	}
	atomic_fetch_sub(&w_spilled, 1);
}

/* Whether buf, alive (a tensor's, in a graph computed or checked), is a
 * weight buffer of this plugin: lock-free, but for spilled buffers. */
static bool w_slot_has(const loom_buffer_t *buf)
{
	size_t top = atomic_load_explicit(&w_top, memory_order_acquire);

	for (size_t i = 0; i < top; i++)
		if (atomic_load_explicit(&w_slots[i], memory_order_acquire) ==
		    buf)
			return true;
	return false;
}

/* Whether buf is this plugin's weight buffer, asked of the core: which
 * device its type is of, and that device's plugin. */
static bool w_buffer_asked(loom_buffer_t *buf)
{
	loom_buffer_type_t *buft = loom_buffer_get_type(buf);
	loom_dev_t *dev = buft ? loom_buffer_type_device(buft) : NULL;

	if (!dev || loom_reg_proc_address(loom_dev_reg(dev),
					  LOOM_PROC_WEIGHT_BUFFER_TYPE) !=
			    (void *)cpu_weight_buffer_type)
		return false;
	return buft == cpu_weight_buffer_type(dev);
}

static bool cpu_w_buffer(loom_buffer_t *buf)
{
	if (!buf)
		return false;
	if (w_slot_has(buf))
		return true;
	return atomic_load_explicit(&w_spilled, memory_order_relaxed) &&
	       w_buffer_asked(buf);
}

bool cpu_w_interleaved(const struct loom_tensor *t)
{
	return t && !t->view_src && t->op == LOOM_OP_NONE &&
	       fields_of(t->type) &&
	       t->ne[0] % loom_type_block_size(t->type) == 0 &&
	       t->ne[1] % CPU_W_ROWS == 0 && t->ne[1] > 0 &&
	       t->ne[2] == 1 && t->ne[3] == 1 &&
	       t->nb[1] == (size_t)(t->ne[0] / loom_type_block_size(t->type)) *
				   loom_type_size(t->type) &&
	       cpu_w_buffer(t->buffer);
}

/* The tensor whose bytes t's are. */
static const struct loom_tensor *root_of(const struct loom_tensor *t)
{
	return t->view_src ? t->view_src : t;
}

const struct loom_tensor *cpu_w_misread(const struct loom_tensor *op)
{
	int i;

	if (op->op == LOOM_OP_NONE || loom_op_is_view(op->op))
		return NULL;
	if (cpu_w_interleaved(root_of(op)))
		return root_of(op);
	for (i = 0; i < LOOM_MAX_SRC; i++) {
		const struct loom_tensor *s = op->src[i];

		if (!s || !cpu_w_interleaved(root_of(s)))
			continue;
		if (op->op != LOOM_OP_MUL_MAT || i != 0 || s->view_src)
			return root_of(s);
	}
	return NULL;
}

void cpu_w_pack(enum loom_type type, const char *rows, size_t arow,
		int64_t k, char *group)
{
	const struct w_field *f, *fs = fields_of(type);
	size_t bs = loom_type_size(type);

	for (int64_t j = 0; j < k / loom_type_block_size(type); j++) {
		char *g = group + j * CPU_W_ROWS * bs;

		for (f = fs; f->bytes; f++) {
			size_t w = elem_bytes(f);

			for (int r = 0; r < CPU_W_ROWS; r++)
				for (size_t i = 0; i < f->bytes / w; i++)
					move_elem(g + CPU_W_ROWS *
							  (f->off + w * i) +
						  w * r,
						  rows + r * arow + j * bs +
							  f->off + w * i,
						  w);
		}
	}
}

/* Four chunks c of a field (16 bytes of every row) back to its rows x:
 * transposed 4 x 4 within each 128-bit lane, lane L of u[v] is row
 * 4 L + v's 16 bytes. */
static inline __attribute__((always_inline)) void
unpack16(const char *c, char *x, size_t arow)
{
	__m512i c0 = _mm512_loadu_si512(c);
	__m512i c1 = _mm512_loadu_si512(c + 64);
	__m512i c2 = _mm512_loadu_si512(c + 128);
	__m512i c3 = _mm512_loadu_si512(c + 192);
	__m512i t0 = _mm512_unpacklo_epi32(c0, c1);
	__m512i t1 = _mm512_unpackhi_epi32(c0, c1);
	__m512i t2 = _mm512_unpacklo_epi32(c2, c3);
	__m512i t3 = _mm512_unpackhi_epi32(c2, c3);
	__m512i u[4] = {
		_mm512_unpacklo_epi64(t0, t2),
		_mm512_unpackhi_epi64(t0, t2),
		_mm512_unpacklo_epi64(t1, t3),
		_mm512_unpackhi_epi64(t1, t3),
	};
	__m128i l[4];

	for (int v = 0; v < 4; v++) {
		l[0] = _mm512_castsi512_si128(u[v]);
		l[1] = _mm512_extracti32x4_epi32(u[v], 1);
		l[2] = _mm512_extracti32x4_epi32(u[v], 2);
		l[3] = _mm512_extracti32x4_epi32(u[v], 3);
		for (int L = 0; L < 4; L++)
			_mm_storeu_si128((__m128i *)(x + (4 * L + v) * arow),
					 l[L]);
	}
}

/* Per block, per field: 16 bytes of every row at a time through
 * unpack16, the rest (bytes, halves, Q4_K's 12 scale bytes) element by
 * element.  Inlined per type, so that the fields are constants. */
static inline __attribute__((always_inline)) void
unpack_fields(const struct w_field *fs, size_t bs, int64_t nb,
	      const char *group, char *rows, size_t arow)
{
	const struct w_field *f;

	for (int64_t j = 0; j < nb; j++) {
		const char *g = group + j * CPU_W_ROWS * bs;
		char *x = rows + j * bs;

		for (f = fs; f->bytes; f++) {
			size_t w = elem_bytes(f), i = 0;

			if (w == 4)
				for (; i + 16 <= f->bytes; i += 16)
					unpack16(g + CPU_W_ROWS * (f->off + i),
						 x + f->off + i, arow);
			for (; i < f->bytes; i += w)
				for (int r = 0; r < CPU_W_ROWS; r++)
					move_elem(x + r * arow + f->off + i,
						  g + CPU_W_ROWS * (f->off + i) +
							  w * r,
						  w);
		}
	}
}

void cpu_w_unpack(enum loom_type type, const char *group, int64_t k,
		  char *rows, size_t arow)
{
	int64_t nb = k / loom_type_block_size(type);
	size_t bs = loom_type_size(type);

	switch (type) {
#define CASE(T)                                                      \
	case T:                                                      \
		unpack_fields(fields_of(T), bs, nb, group, rows, arow); \
		break;
	CPU_W_TYPES(CASE)
#undef CASE
	default:
		break;
	}
}

enum access { W_SET, W_GET, W_FILL };

/* Bytes [offset, offset + size) of t in the usual layout: written from
 * data, read into data, or filled with value.  A group only partly
 * covered goes through a copy in the usual layout. */
static int w_access(const struct loom_tensor *t, size_t offset, size_t size,
		    enum access how, void *data, uint8_t value)
{
	const struct loom_tensor *r = root_of(t);
	size_t gb = CPU_W_ROWS * r->nb[1];
	size_t o = (size_t)((const char *)t->data - (const char *)r->data) +
		   offset;
	size_t end = o + size, g;
	char *tmp = NULL, *p = data;

	for (g = o / gb; g * gb < end; g++) {
		size_t g0 = g * gb, lo = o > g0 ? o : g0;
		size_t hi = end < g0 + gb ? end : g0 + gb;
		char *grp = (char *)r->data + g0;

		if (lo == g0 && hi == g0 + gb && how != W_FILL) {
			if (how == W_SET)
				cpu_w_pack(r->type, p, r->nb[1], r->ne[0],
					   grp);
			else
				cpu_w_unpack(r->type, grp, r->ne[0], p,
					     r->nb[1]);
		} else {
			if (!tmp && !(tmp = malloc(gb)))
				return loom_error_set(LOOM_E_NOMEM,
						      "cpu: no memory for a "
						      "group of %s",
						      r->name);
			cpu_w_unpack(r->type, grp, r->ne[0], tmp, r->nb[1]);
			if (how == W_GET)
				memcpy(p, tmp + (lo - g0), hi - lo);
			else if (how == W_SET)
				memcpy(tmp + (lo - g0), p, hi - lo);
			else
				memset(tmp + (lo - g0), value, hi - lo);
			if (how != W_GET)
				cpu_w_pack(r->type, tmp, r->nb[1], r->ne[0],
					   grp);
		}
		if (p)
			p += hi - lo;
	}
	free(tmp);
	return LOOM_OK;
}

int cpu_w_set(const struct loom_tensor *t, const void *data, size_t offset,
	      size_t size)
{
	return w_access(t, offset, size, W_SET, (void *)data, 0);
}

int cpu_w_get(const struct loom_tensor *t, void *data, size_t offset,
	      size_t size)
{
	return w_access(t, offset, size, W_GET, data, 0);
}

int cpu_w_memset(const struct loom_tensor *t, uint8_t value, size_t offset,
		 size_t size)
{
	return w_access(t, offset, size, W_FILL, NULL, value);
}

bool cpu_w_tensor(const struct loom_tensor *t)
{
	return t && cpu_w_interleaved(root_of(t));
}

static const char *buft_get_name(loom_buffer_type_t *buft)
{
	struct cpu_device *cd = loom_buffer_type_context(buft);

	return cd->wname;
}

/* The host buffers' methods: they take interleaved matrices through
 * w_access, and a clear is the same bytes in either layout.  But free,
 * which forgets the buffer first. */
static struct loom_buffer_iface w_buffer_iface;
static pthread_once_t w_iface_once = PTHREAD_ONCE_INIT;

static void w_buffer_free(loom_buffer_t *buf)
{
	w_slot_give(buf);
	cpu_host_free(buf);
}

static void w_iface_init(void)
{
	w_buffer_iface = cpu_buffer_iface;
	w_buffer_iface.free_buffer = w_buffer_free;
}

static int buft_alloc_buffer(loom_buffer_type_t *buft, size_t size,
			     loom_buffer_t **out)
{
	int st;

	pthread_once(&w_iface_once, w_iface_init);
	st = cpu_host_alloc(loom_buffer_type_context(buft), buft,
			    &w_buffer_iface, size, out);
	if (!st)
		w_slot_take(*out);
	return st;
}

/* Not host memory to anyone else: its bytes are not the usual ones. */
static bool buft_is_host(loom_buffer_type_t *buft)
{
	return false;
}

static const struct loom_buffer_type_iface w_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = buft_get_name,
	.alloc_buffer = buft_alloc_buffer,
	.get_alignment = cpu_buft_get_alignment,
	.is_host = buft_is_host,
};

int cpu_wbuft_create(struct cpu_reg *cr, struct cpu_device *cd)
{
	/* The layout serves only the kernel that reads it. */
	if (!cpu_w_available())
		return LOOM_OK;
	snprintf(cd->wname, sizeof(cd->wname), "%s_weights", cd->name);
	return loom_buffer_type_new(cr->reg, cd->dev, &w_buft_iface, cd,
				    &cd->wbuft);
}

#else

bool cpu_w_available(void)
{
	return false;
}

loom_buffer_type_t *cpu_weight_buffer_type(loom_dev_t *dev)
{
	return NULL;
}

int cpu_wbuft_create(struct cpu_reg *cr, struct cpu_device *cd)
{
	return LOOM_OK;
}

bool cpu_w_tensor(const struct loom_tensor *t)
{
	return false;
}

int cpu_w_set(const struct loom_tensor *t, const void *data, size_t offset,
	      size_t size)
{
	return LOOM_E_STATE;
}

int cpu_w_get(const struct loom_tensor *t, void *data, size_t offset,
	      size_t size)
{
	return LOOM_E_STATE;
}

int cpu_w_memset(const struct loom_tensor *t, uint8_t value, size_t offset,
		 size_t size)
{
	return LOOM_E_STATE;
}

const struct loom_tensor *cpu_w_misread(const struct loom_tensor *op)
{
	return NULL;
}

#endif
