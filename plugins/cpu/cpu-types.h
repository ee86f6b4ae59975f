/* SPDX-License-Identifier: MIT */
/* cpu-types.h - the CPU plugin's table of weight types (as ggml's
 * type_traits_cpu): for each quantized type its block as the int8
 * kernels read it, the activations it wants, its decode kernel and its
 * layout in the weight buffer.  A type is one entry here, in
 * CPU_Q8_TYPES, plus its kernels: its bytes (block_u8 in matmul-q8.h) and,
 * for a super-block, its scales (cpu_q8_row_scales in matmul-q8.c).
 * Conversions to F32 are libcore's.
 */
#ifndef LOOM_CPU_TYPES_H
#define LOOM_CPU_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loom/loom.h"

/* X(type) for every type the int8 kernels take (the switches that
 * compile a kernel per type go through it). */
#define CPU_Q8_TYPES(X)                                                  \
	X(LOOM_TYPE_Q8_0) X(LOOM_TYPE_Q4_0) X(LOOM_TYPE_Q4_K)            \
	X(LOOM_TYPE_Q5_K) X(LOOM_TYPE_Q6_K) X(LOOM_TYPE_Q4_1)            \
	X(LOOM_TYPE_Q5_0) X(LOOM_TYPE_Q5_1) X(LOOM_TYPE_Q3_K)            \
	X(LOOM_TYPE_Q2_K) X(LOOM_TYPE_IQ4_NL) X(LOOM_TYPE_IQ4_XS)        \
	X(LOOM_TYPE_MXFP4)

/* X(type) for every type the weight buffer interleaves (those with
 * fields below; matmul-w.c has their decode kernels). */
#define CPU_W_TYPES(X)                                                   \
	X(LOOM_TYPE_Q8_0) X(LOOM_TYPE_Q4_0) X(LOOM_TYPE_Q4_K)            \
	X(LOOM_TYPE_Q5_K) X(LOOM_TYPE_Q6_K) X(LOOM_TYPE_Q4_1)            \
	X(LOOM_TYPE_IQ4_NL) X(LOOM_TYPE_Q3_K) X(LOOM_TYPE_Q2_K)          \
	X(LOOM_TYPE_IQ4_XS) X(LOOM_TYPE_Q5_0) X(LOOM_TYPE_Q5_1)          \
	X(LOOM_TYPE_MXFP4)

/* The decode kernel of a type (matmul-q8v.c): a 32-value block with its
 * step first, a half or an E8M0 exponent (CPU_GV_BLOCK); a super-block of
 * 256 (CPU_GV_SUPER: its scales decoded per super-block, in vectors); or
 * the generic tile on the row's scales (matmul-q8.c).  A super-block
 * type whose group is 32 takes the float kernel without VNNI too. */
enum cpu_gv { CPU_GV_TILE, CPU_GV_BLOCK, CPU_GV_SUPER };

/* How a CPU_GV_BLOCK block's offset enters the sum: none; off times the
 * column's sum of q, as integers; or the block's half min at byte 2
 * times the column's d * sum(q). */
enum cpu_off { CPU_OFF_NONE, CPU_OFF_INT, CPU_OFF_MIN };

/* A field of a block, in the weight buffer: its offset and bytes.  In a
 * group's block it starts 16 times as far in, element i (w bytes: 1 for
 * a single byte, 2 for a half, else 4) of row r at 16 * i * w + r * w. */
struct w_field {
	uint8_t off, bytes;
};

struct cpu_type {
	uint16_t bytes;	 /* of a block; 0: the int8 kernels do not take it */
	uint16_t block;	 /* values of a block: 32, or a super-block's 256 */
	uint16_t group;	 /* values per scale of the activations it wants */
	uint8_t span;	 /* values per scale of the weights: 16 or 32 */
	uint8_t umax;	 /* largest |byte| block_u8 gives */
	bool is_signed;	 /* block_u8's bytes are signed (offset 0) */
	uint8_t gv;	 /* enum cpu_gv */
	uint8_t off;	 /* enum cpu_off, for CPU_GV_BLOCK */
	int8_t off_int;	 /* the integer offset of CPU_OFF_INT */
	bool e8m0;	 /* the step is an E8M0 byte (2^(e - 128) here), not
			    a half */
	const struct w_field *w; /* the weight buffer's fields in order, or
				    NULL: the buffer stores it as it is */
};

#define W_FIELD(T, f) { offsetof(struct T, f), sizeof(((struct T *)0)->f) }

static const struct w_field cpu_w_q4_0[] = {
	W_FIELD(loom_block_q4_0, d), W_FIELD(loom_block_q4_0, qs), { 0 },
};
static const struct w_field cpu_w_q8_0[] = {
	W_FIELD(loom_block_q8_0, d), W_FIELD(loom_block_q8_0, qs), { 0 },
};
static const struct w_field cpu_w_q4_1[] = {
	W_FIELD(loom_block_q4_1, d), W_FIELD(loom_block_q4_1, m),
	W_FIELD(loom_block_q4_1, qs), { 0 },
};
static const struct w_field cpu_w_iq4_nl[] = {
	W_FIELD(loom_block_iq4_nl, d), W_FIELD(loom_block_iq4_nl, qs), { 0 },
};
static const struct w_field cpu_w_q5_0[] = {
	W_FIELD(loom_block_q5_0, d), W_FIELD(loom_block_q5_0, qh),
	W_FIELD(loom_block_q5_0, qs), { 0 },
};
static const struct w_field cpu_w_q5_1[] = {
	W_FIELD(loom_block_q5_1, d), W_FIELD(loom_block_q5_1, m),
	W_FIELD(loom_block_q5_1, qh), W_FIELD(loom_block_q5_1, qs), { 0 },
};
static const struct w_field cpu_w_mxfp4[] = {
	W_FIELD(loom_block_mxfp4, e), W_FIELD(loom_block_mxfp4, qs), { 0 },
};
static const struct w_field cpu_w_q4_k[] = {
	W_FIELD(loom_block_q4_k, d), W_FIELD(loom_block_q4_k, dmin),
	W_FIELD(loom_block_q4_k, scales), W_FIELD(loom_block_q4_k, qs),
	{ 0 },
};
static const struct w_field cpu_w_q5_k[] = {
	W_FIELD(loom_block_q5_k, d), W_FIELD(loom_block_q5_k, dmin),
	W_FIELD(loom_block_q5_k, scales), W_FIELD(loom_block_q5_k, qh),
	W_FIELD(loom_block_q5_k, qs), { 0 },
};
static const struct w_field cpu_w_q6_k[] = {
	W_FIELD(loom_block_q6_k, ql), W_FIELD(loom_block_q6_k, qh),
	W_FIELD(loom_block_q6_k, scales), W_FIELD(loom_block_q6_k, d),
	{ 0 },
};
static const struct w_field cpu_w_q3_k[] = {
	W_FIELD(loom_block_q3_k, hmask), W_FIELD(loom_block_q3_k, qs),
	W_FIELD(loom_block_q3_k, scales), W_FIELD(loom_block_q3_k, d),
	{ 0 },
};
static const struct w_field cpu_w_q2_k[] = {
	W_FIELD(loom_block_q2_k, scales), W_FIELD(loom_block_q2_k, qs),
	W_FIELD(loom_block_q2_k, d), W_FIELD(loom_block_q2_k, dmin),
	{ 0 },
};
static const struct w_field cpu_w_iq4_xs[] = {
	W_FIELD(loom_block_iq4_xs, d), W_FIELD(loom_block_iq4_xs, scales_h),
	W_FIELD(loom_block_iq4_xs, scales_l), W_FIELD(loom_block_iq4_xs, qs),
	{ 0 },
};

/* Constant, so that kernels compiled per type fold their entry. */
static const struct cpu_type cpu_types[LOOM_TYPE_COUNT] = {
	[LOOM_TYPE_Q8_0] = {
		.bytes = sizeof(struct loom_block_q8_0), .block = 32,
		.group = 32, .span = 32, .umax = 128, .is_signed = true,
		.gv = CPU_GV_BLOCK, .w = cpu_w_q8_0,
	},
	[LOOM_TYPE_Q4_0] = {
		.bytes = sizeof(struct loom_block_q4_0), .block = 32,
		.group = 32, .span = 32, .umax = 15, .gv = CPU_GV_BLOCK,
		.off = CPU_OFF_INT, .off_int = -8, .w = cpu_w_q4_0,
	},
	/* The super-block kernels without VNNI keep integer sums over the
	 * super-block, so want one activation scale per 256. */
	[LOOM_TYPE_Q4_K] = {
		.bytes = sizeof(struct loom_block_q4_k), .block = 256,
		.group = 256, .span = 32, .umax = 15, .gv = CPU_GV_SUPER,
		.w = cpu_w_q4_k,
	},
	[LOOM_TYPE_Q5_K] = {
		.bytes = sizeof(struct loom_block_q5_k), .block = 256,
		.group = 256, .span = 32, .umax = 31, .gv = CPU_GV_SUPER,
		.w = cpu_w_q5_k,
	},
	[LOOM_TYPE_Q6_K] = {
		.bytes = sizeof(struct loom_block_q6_k), .block = 256,
		.group = 256, .span = 16, .umax = 63, .gv = CPU_GV_SUPER,
		.w = cpu_w_q6_k,
	},
	[LOOM_TYPE_Q4_1] = {
		.bytes = sizeof(struct loom_block_q4_1), .block = 32,
		.group = 32, .span = 32, .umax = 15, .gv = CPU_GV_BLOCK,
		.off = CPU_OFF_MIN, .w = cpu_w_q4_1,
	},
	[LOOM_TYPE_Q5_0] = {
		.bytes = sizeof(struct loom_block_q5_0), .block = 32,
		.group = 32, .span = 32, .umax = 31, .gv = CPU_GV_BLOCK,
		.off = CPU_OFF_INT, .off_int = -16, .w = cpu_w_q5_0,
	},
	[LOOM_TYPE_Q5_1] = {
		.bytes = sizeof(struct loom_block_q5_1), .block = 32,
		.group = 32, .span = 32, .umax = 31, .gv = CPU_GV_BLOCK,
		.off = CPU_OFF_MIN, .w = cpu_w_q5_1,
	},
	[LOOM_TYPE_Q3_K] = {
		.bytes = sizeof(struct loom_block_q3_k), .block = 256,
		.group = 32, .span = 16, .umax = 7, .gv = CPU_GV_SUPER,
		.w = cpu_w_q3_k,
	},
	[LOOM_TYPE_Q2_K] = {
		.bytes = sizeof(struct loom_block_q2_k), .block = 256,
		.group = 32, .span = 16, .umax = 3, .gv = CPU_GV_SUPER,
		.w = cpu_w_q2_k,
	},
	[LOOM_TYPE_IQ4_NL] = {
		.bytes = sizeof(struct loom_block_iq4_nl), .block = 32,
		.group = 32, .span = 32, .umax = 127, .is_signed = true,
		.gv = CPU_GV_BLOCK, .w = cpu_w_iq4_nl,
	},
	[LOOM_TYPE_IQ4_XS] = {
		.bytes = sizeof(struct loom_block_iq4_xs), .block = 256,
		.group = 32, .span = 32, .umax = 127, .is_signed = true,
		.gv = CPU_GV_SUPER, .w = cpu_w_iq4_xs,
	},
	[LOOM_TYPE_MXFP4] = {
		.bytes = sizeof(struct loom_block_mxfp4), .block = 32,
		.group = 32, .span = 32, .umax = 12, .is_signed = true,
		.gv = CPU_GV_BLOCK, .e8m0 = true, .w = cpu_w_mxfp4,
	},
};

/* The bits of the float 2^(e - 128): MXFP4's step, half its exponent's
 * (its codes are doubled). */
static inline uint32_t cpu_e8m0_half_bits(uint8_t e)
{
	return e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
}

/* type's entry (zeros for a type the int8 kernels do not take). */
static inline const struct cpu_type *cpu_type_of(enum loom_type type)
{
	static const struct cpu_type none;

	return (unsigned)type < LOOM_TYPE_COUNT ? &cpu_types[type] : &none;
}

#endif
