/* SPDX-License-Identifier: MIT */
/* cpu-ops.h - what the CPU plugin's op kernels (ops-*.c) share: scalar
 * conversions, row access with strides, per-thread scratch and the
 * kernels' entry points.
 */
#ifndef LOOM_CPU_OPS_H
#define LOOM_CPU_OPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__F16C__)
#include <immintrin.h>
#endif

#include "cpu-kernels.h"

/* ---- scalar conversions ---- */

static inline float cpu_bits_f32(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static inline uint32_t cpu_f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* F16 and BF16 values are the library's (loom.h) to convert: here only
 * the F16C instructions, which give the same results, stand in for its
 * calls where the variant has them.  Rows go through cpu_load_f32 and
 * cpu_store_f32, vectors through cpu-simd.h. */
static inline float cpu_f16_to_f32(uint16_t h)
{
#if defined(__F16C__)
	return _cvtsh_ss(h);
#else
	return loom_f16_to_f32(h);
#endif
}

/* Rounds to nearest even. */
static inline uint16_t cpu_f32_to_f16(float f)
{
#if defined(__F16C__)
	return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
#else
	return loom_f32_to_f16(f);
#endif
}

/* ---- vector helpers the compiler turns into SIMD ---- */

#define CPU_LANES 16

static inline float cpu_vec_sum(const float *x, int64_t n)
{
	float acc[CPU_LANES] = { 0 };
	float s = 0.0f;
	int64_t i = 0;
	int j;

	for (; i + CPU_LANES <= n; i += CPU_LANES)
		for (j = 0; j < CPU_LANES; j++)
			acc[j] += x[i + j];
	for (; i < n; i++)
		s += x[i];
	for (j = 0; j < CPU_LANES; j++)
		s += acc[j];
	return s;
}

static inline float cpu_vec_max(const float *x, int64_t n)
{
	float acc[CPU_LANES];
	float m = -INFINITY;
	int64_t i = 0;
	int j;

	for (j = 0; j < CPU_LANES; j++)
		acc[j] = -INFINITY;
	for (; i + CPU_LANES <= n; i += CPU_LANES)
		for (j = 0; j < CPU_LANES; j++)
			acc[j] = acc[j] > x[i + j] ? acc[j] : x[i + j];
	for (; i < n; i++)
		m = m > x[i] ? m : x[i];
	for (j = 0; j < CPU_LANES; j++)
		m = m > acc[j] ? m : acc[j];
	return m;
}

/* e^x for float, within 4 ulp, written so that loops over it vectorize:
 * x = k ln2 + r, |r| <= ln2/2, e^r by a degree-6 polynomial, 2^k built
 * from exponent bits.  Below -87 (where e^x leaves the normal range) it
 * returns 0, so masked softmax entries are exact zeros; above 88.3 it
 * saturates at e^88.3 instead of overflowing.  A NaN gives NaN: the
 * clamps send it to 88.3 (their comparisons are false for NaN), so k
 * always converts to an int, and the last line passes the NaN through. */
static inline float cpu_expf(float x)
{
	float c, k, r, p;
	int32_t ki;

	c = x < 88.3f ? x : 88.3f;
	c = c > -87.0f ? c : -87.0f;
	/* Adding 1.5 * 2^23 rounds to an integer without a libm call. */
	k = c * 1.44269504088896341f + 0x1.8p23f;
	k -= 0x1.8p23f;
	r = c - k * 0.693145751953125f;
	r = r - k * 1.428606765330187e-06f;
	p = 1.0f / 720.0f;
	p = p * r + 1.0f / 120.0f;
	p = p * r + 1.0f / 24.0f;
	p = p * r + 1.0f / 6.0f;
	p = p * r + 0.5f;
	p = p * r + 1.0f;
	p = p * r + 1.0f;
	ki = (int32_t)k;
	p *= cpu_bits_f32((uint32_t)(ki + 127) << 23);
	p = x < -87.0f ? 0.0f : p;
	return x == x ? p : x;
}

/* ---- rows ---- */

/* Scratch rows per thread (each holds the node's widest row as F32). */
#define CPU_SCRATCH_ROWS 4

/* Bytes of one scratch row for node. */
size_t cpu_scratch_row_bytes(const struct loom_tensor *node);
/* Scratch row slot (< CPU_SCRATCH_ROWS) of this thread. */
float *cpu_scratch(const struct cpu_task *task,
		   const struct loom_tensor *node, int slot);

/* The address of element (0, i1, i2, i3) of t. */
static inline char *cpu_row_ptr(const struct loom_tensor *t, int64_t i1,
				int64_t i2, int64_t i3)
{
	return (char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] +
	       i3 * t->nb[3];
}

/* Splits rows [0, nr) over the threads: this thread's [*r0, *r1). */
static inline void cpu_split_rows(const struct cpu_task *task, int64_t nr,
				  int64_t *r0, int64_t *r1)
{
	int64_t per = (nr + task->nth - 1) / task->nth;

	*r0 = per * task->ith;
	*r1 = *r0 + per < nr ? *r0 + per : nr;
	if (*r0 > nr)
		*r0 = nr;
}

/* Row index r of t as coordinates. */
static inline void cpu_row_coords(const struct loom_tensor *t, int64_t r,
				  int64_t *i1, int64_t *i2, int64_t *i3)
{
	*i1 = r % t->ne[1];
	*i2 = (r / t->ne[1]) % t->ne[2];
	*i3 = r / (t->ne[1] * t->ne[2]);
}

/* Converts n values of type at src (elements nb0 bytes apart; for a
 * quantized type, blocks nb0 bytes apart) to F32 in dst. */
void cpu_load_f32(enum loom_type type, const char *src, size_t nb0,
		  float *dst, int64_t n);
/* Converts n F32 values to type at dst (elements, or blocks, nb0 bytes
 * apart). */
void cpu_store_f32(enum loom_type type, char *dst, size_t nb0,
		   const float *src, int64_t n);
/* Row (i1, i2, i3) of t as contiguous F32: the row itself when it already
 * is, else converted into buf. */
const float *cpu_row_f32(const struct loom_tensor *t, int64_t i1, int64_t i2,
			 int64_t i3, float *buf);
/* Where to compute an F32 row of dst: the row itself when it is
 * contiguous F32, else buf (then cpu_row_put writes it back). */
float *cpu_row_out(struct loom_tensor *dst, int64_t i1, int64_t i2,
		   int64_t i3, float *buf);
void cpu_row_put(struct loom_tensor *dst, int64_t i1, int64_t i2, int64_t i3,
		 const float *row);

/* True when t's elements are F32 and packed, dimension 0 first. */
static inline bool cpu_is_f32_contig(const struct loom_tensor *t)
{
	return t->type == LOOM_TYPE_F32 && t->nb[0] == sizeof(float) &&
	       t->nb[1] == t->nb[0] * t->ne[0] &&
	       t->nb[2] == t->nb[1] * t->ne[1] &&
	       t->nb[3] == t->nb[2] * t->ne[2];
}

/* ---- kernels, one per op (ops-<family>.c) ---- */

void cpu_op_binary(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_unary(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_norm(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_soft_max(const struct cpu_task *task, struct loom_tensor *dst);
/* out = mul_mat(v, soft_max(mul_mat(k, q), mask, scale)) in one pass
 * (ops-attn.c): whether this variant runs out's shapes and types so, and
 * the kernel, which writes out alone. */
bool cpu_attn_shape_ok(const struct loom_tensor *out);
size_t cpu_attn_work_size(const struct loom_tensor *out, int nth);
void cpu_op_attn(const struct cpu_task *task, struct loom_tensor *out);
void cpu_op_rope(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_get_rows(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_set_rows(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_copy(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_concat(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_sum_rows(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_argmax(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_top_k(const struct cpu_task *task, struct loom_tensor *dst);
/* ops-oai.c */
void cpu_op_swiglu_oai(const struct cpu_task *task, struct loom_tensor *dst);
void cpu_op_add_id(const struct cpu_task *task, struct loom_tensor *dst);

#endif
