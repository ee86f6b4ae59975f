/* SPDX-License-Identifier: MIT */
/* cpu-weights.c - the weight buffer type ("weight_buffer_type"): host
 * memory whose Q4_0 matrices are stored 16 rows to a group, interleaved
 * block by block, so that the decode kernel (cpu_w_gv) reads 16 rows'
 * blocks as whole vectors: per block of 32 values, the 16 rows' F16
 * scales, then four 64-byte chunks, chunk i holding bytes 4i..4i+3 of
 * each row's 16 quant bytes, row after row.  Every other tensor is stored
 * as usual.  Set, get and memset take the usual layout at any offset,
 * through the groups they touch; only mul_mat reads an interleaved
 * matrix (as its weights), every other op that would is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-private.h"
#include "matmul-q8.h"

#if defined(CPU_HAVE_WEIGHTS)

#define BLK ((size_t)sizeof(struct loom_block_q4_0))
#define GBLK (CPU_W_ROWS * BLK)

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

static bool cpu_w_buffer(loom_buffer_t *buf)
{
	loom_buffer_type_t *buft = buf ? loom_buffer_get_type(buf) : NULL;
	loom_dev_t *dev = buft ? loom_buffer_type_device(buft) : NULL;

	if (!dev || loom_reg_proc_address(loom_dev_reg(dev),
					  LOOM_PROC_WEIGHT_BUFFER_TYPE) !=
			    (void *)cpu_weight_buffer_type)
		return false;
	return buft == cpu_weight_buffer_type(dev);
}

bool cpu_w_interleaved(const struct loom_tensor *t)
{
	return t && !t->view_src && t->op == LOOM_OP_NONE &&
	       t->type == LOOM_TYPE_Q4_0 && t->ne[0] % 32 == 0 &&
	       t->ne[1] % CPU_W_ROWS == 0 && t->ne[1] > 0 &&
	       t->ne[2] == 1 && t->ne[3] == 1 &&
	       t->nb[1] == (size_t)t->ne[0] / 32 * BLK &&
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

void cpu_w_pack(const char *rows, size_t arow, int64_t k, char *group)
{
	for (int64_t j = 0; j < k / 32; j++) {
		char *g = group + j * GBLK;

		for (int r = 0; r < CPU_W_ROWS; r++) {
			const char *x = rows + r * arow + j * BLK;

			memcpy(g + 2 * r, x, 2);
			for (int i = 0; i < 4; i++)
				memcpy(g + 2 * CPU_W_ROWS + 64 * i + 4 * r,
				       x + 2 + 4 * i, 4);
		}
	}
}

/* Per block: the four chunks, 16 rows' 4 bytes each, transposed 4 x 4
 * within each 128-bit lane, so that lane L of u[x] is row 4 L + x's 16
 * quant bytes. */
void cpu_w_unpack(const char *group, int64_t k, char *rows, size_t arow)
{
	for (int64_t j = 0; j < k / 32; j++) {
		const char *g = group + j * GBLK;
		const char *q = g + 2 * CPU_W_ROWS;
		__m512i c0 = _mm512_loadu_si512(q);
		__m512i c1 = _mm512_loadu_si512(q + 64);
		__m512i c2 = _mm512_loadu_si512(q + 128);
		__m512i c3 = _mm512_loadu_si512(q + 192);
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

		for (int x = 0; x < 4; x++) {
			l[0] = _mm512_castsi512_si128(u[x]);
			l[1] = _mm512_extracti32x4_epi32(u[x], 1);
			l[2] = _mm512_extracti32x4_epi32(u[x], 2);
			l[3] = _mm512_extracti32x4_epi32(u[x], 3);
			for (int L = 0; L < 4; L++)
				_mm_storeu_si128((__m128i *)(rows +
					(4 * L + x) * arow + j * BLK + 2),
					l[L]);
		}
		for (int r = 0; r < CPU_W_ROWS; r++)
			memcpy(rows + r * arow + j * BLK, g + 2 * r, 2);
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
				cpu_w_pack(p, r->nb[1], r->ne[0], grp);
			else
				cpu_w_unpack(grp, r->ne[0], p, r->nb[1]);
		} else {
			if (!tmp && !(tmp = malloc(gb)))
				return loom_error_set(LOOM_E_NOMEM,
						      "cpu: no memory for a "
						      "group of %s",
						      r->name);
			cpu_w_unpack(grp, r->ne[0], tmp, r->nb[1]);
			if (how == W_GET)
				memcpy(p, tmp + (lo - g0), hi - lo);
			else if (how == W_SET)
				memcpy(tmp + (lo - g0), p, hi - lo);
			else
				memset(tmp + (lo - g0), value, hi - lo);
			if (how != W_GET)
				cpu_w_pack(tmp, r->nb[1], r->ne[0], grp);
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

static int buft_alloc_buffer(loom_buffer_type_t *buft, size_t size,
			     loom_buffer_t **out)
{
	/* The host buffers' methods: they take interleaved matrices
	 * through w_access, and a clear is the same bytes in either
	 * layout. */
	return cpu_host_alloc(loom_buffer_type_context(buft), buft,
			      &cpu_buffer_iface, size, out);
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
