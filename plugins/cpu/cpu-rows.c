/* SPDX-License-Identifier: MIT */
/* cpu-rows.c - row access for the CPU kernels: converting strided rows of
 * any storage type to contiguous F32 and back, and the per-thread scratch
 * rows the conversions use.
 */
#include "cpu-ops.h"
#include "cpu-simd.h"

/* Packed F16 or BF16 rows to F32: the variant's vector loads, the
 * library's conversion for what they leave. */
static void half_to_f32_row(enum loom_type type, const uint16_t *s, float *d,
			    int64_t n)
{
	int64_t i = 0;

#if defined(VF)
	if (type == LOOM_TYPE_F16)
		for (; i + VLEN <= n; i += VLEN)
			vstore(d + i, vload_f16(s + i));
	else
		for (; i + VLEN <= n; i += VLEN)
			vstore(d + i, vload_bf16(s + i));
#endif
	if (i < n)
		loom_type_convert(type, s + i, LOOM_TYPE_F32, d + i, n - i);
}

/* F32 to packed F16 (F16C where the variant has it) or BF16 rows. */
static void f32_to_half_row(enum loom_type type, const float *s, uint16_t *d,
			    int64_t n)
{
	int64_t i = 0;

#if defined(__F16C__) && defined(__AVX__)
	if (type == LOOM_TYPE_F16)
		for (; i + 8 <= n; i += 8)
			_mm_storeu_si128((__m128i *)(d + i),
					 _mm256_cvtps_ph(_mm256_loadu_ps(s + i),
						_MM_FROUND_TO_NEAREST_INT |
						_MM_FROUND_NO_EXC));
#endif
	if (i < n)
		loom_type_convert(LOOM_TYPE_F32, s + i, type, d + i, n - i);
}

/* n values of quantized blocks to or from F32 by the core's conversions,
 * so that every device quantizes and decodes alike: in one call when the
 * blocks are packed, else a block at a time (sb and db: the bytes from one
 * block's start to the next in src and dst). */
static void convert_blocks(enum loom_type st, const char *src, size_t sb,
			   enum loom_type dt, char *dst, size_t db, int64_t n)
{
	enum loom_type q = st == LOOM_TYPE_F32 ? dt : st;
	int64_t bs = loom_type_block_size(q), i;

	n -= n % bs;
	if (sb == loom_type_row_size(st, bs) &&
	    db == loom_type_row_size(dt, bs)) {
		loom_type_convert(st, src, dt, dst, n);
		return;
	}
	for (i = 0; i < n / bs; i++)
		loom_type_convert(st, src + i * sb, dt, dst + i * db, bs);
}

size_t cpu_scratch_row_bytes(const struct loom_tensor *node)
{
	int64_t n = node->ne[0];
	int i;

	for (i = 0; i < LOOM_MAX_SRC; i++)
		if (node->src[i] && node->src[i]->ne[0] > n)
			n = node->src[i]->ne[0];
	/* Room for a whole block past the end, rounded to lines. */
	return ((size_t)(n + LOOM_QK_K) * sizeof(float) + 63) & ~(size_t)63;
}

float *cpu_scratch(const struct cpu_task *task,
		   const struct loom_tensor *node, int slot)
{
	size_t row = cpu_scratch_row_bytes(node);

	return (float *)((char *)task->wdata +
			 ((size_t)task->ith * CPU_SCRATCH_ROWS + slot) * row);
}

void cpu_load_f32(enum loom_type type, const char *src, size_t nb0,
		  float *dst, int64_t n)
{
	int64_t i;

	switch (type) {
	case LOOM_TYPE_F32:
		if (nb0 == sizeof(float)) {
			memcpy(dst, src, n * sizeof(float));
			break;
		}
		for (i = 0; i < n; i++)
			memcpy(&dst[i], src + i * nb0, sizeof(float));
		break;
	case LOOM_TYPE_F16:
	case LOOM_TYPE_BF16:
		if (nb0 == sizeof(uint16_t)) {
			half_to_f32_row(type, (const uint16_t *)src, dst, n);
			break;
		}
		for (i = 0; i < n; i++) {
			uint16_t h;

			memcpy(&h, src + i * nb0, sizeof(h));
			dst[i] = type == LOOM_TYPE_F16 ? cpu_f16_to_f32(h) :
							 loom_bf16_to_f32(h);
		}
		break;
	case LOOM_TYPE_I32:
		for (i = 0; i < n; i++) {
			int32_t v;

			memcpy(&v, src + i * nb0, sizeof(v));
			dst[i] = (float)v;
		}
		break;
	default:
		convert_blocks(type, src, nb0, LOOM_TYPE_F32, (char *)dst,
			       sizeof(float) * loom_type_block_size(type), n);
		break;
	}
}

void cpu_store_f32(enum loom_type type, char *dst, size_t nb0,
		   const float *src, int64_t n)
{
	int64_t i;

	switch (type) {
	case LOOM_TYPE_F32:
		if (nb0 == sizeof(float)) {
			memcpy(dst, src, n * sizeof(float));
			break;
		}
		for (i = 0; i < n; i++)
			memcpy(dst + i * nb0, &src[i], sizeof(float));
		break;
	case LOOM_TYPE_F16:
	case LOOM_TYPE_BF16:
		if (nb0 == sizeof(uint16_t)) {
			f32_to_half_row(type, src, (uint16_t *)dst, n);
			break;
		}
		for (i = 0; i < n; i++) {
			uint16_t h = type == LOOM_TYPE_F16 ?
				     cpu_f32_to_f16(src[i]) :
				     loom_f32_to_bf16(src[i]);

			memcpy(dst + i * nb0, &h, sizeof(h));
		}
		break;
	case LOOM_TYPE_I32:
		for (i = 0; i < n; i++) {
			int32_t v = (int32_t)src[i];

			memcpy(dst + i * nb0, &v, sizeof(v));
		}
		break;
	default:
		convert_blocks(LOOM_TYPE_F32, (const char *)src,
			       sizeof(float) * loom_type_block_size(type), type,
			       dst, nb0, n);
		break;
	}
}

const float *cpu_row_f32(const struct loom_tensor *t, int64_t i1, int64_t i2,
			 int64_t i3, float *buf)
{
	const char *p = cpu_row_ptr(t, i1, i2, i3);

	if (t->type == LOOM_TYPE_F32 && t->nb[0] == sizeof(float))
		return (const float *)p;
	cpu_load_f32(t->type, p, t->nb[0], buf, t->ne[0]);
	return buf;
}

float *cpu_row_out(struct loom_tensor *dst, int64_t i1, int64_t i2,
		   int64_t i3, float *buf)
{
	if (dst->type == LOOM_TYPE_F32 && dst->nb[0] == sizeof(float))
		return (float *)cpu_row_ptr(dst, i1, i2, i3);
	return buf;
}

void cpu_row_put(struct loom_tensor *dst, int64_t i1, int64_t i2, int64_t i3,
		 const float *row)
{
	char *p = cpu_row_ptr(dst, i1, i2, i3);

	if ((const char *)row == p)
		return;
	cpu_store_f32(dst->type, p, dst->nb[0], row, dst->ne[0]);
}
