/* SPDX-License-Identifier: MIT */
/* ops-cases.c - part of the op suite (ops-suite.c): the case tables of
 * the elementwise, row, softmax, rope, matrix product, row gather and
 * scatter, copy, concatenation, argmax and top-k ops. */
#define _GNU_SOURCE
#include "ops-suite.h"
#include "ref-ops.h"
#include "test-util.h"
#include "ops-suite-int.h"

#include <loom/loom-backend.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const enum loom_type float_types[] = {
	LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16,
};

static const enum loom_type quant_types[] = {
	LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K,
	LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1,
	LOOM_TYPE_Q3_K, LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_NL, LOOM_TYPE_IQ4_XS,
	LOOM_TYPE_MXFP4,
};

/* add, sub, mul, div: shapes, broadcasting, types, views. */
void add_binary_cases(enum loom_op op)
{
	static const int64_t shapes[][4] = {
		{ 1, 1, 1, 1 }, { 3, 2, 1, 1 }, { 17, 3, 2, 1 },
		{ 1023, 2, 1, 1 }, { 16, 5, 4, 3 },
	};
	static const int64_t bcast[][2][4] = {
		{ { 17, 3, 2, 1 }, { 17, 1, 1, 1 } },
		{ { 17, 3, 2, 1 }, { 1, 3, 1, 1 } },
		{ { 17, 3, 2, 1 }, { 17, 3, 1, 1 } },
		{ { 17, 3, 2, 1 }, { 1, 1, 2, 1 } },
		{ { 17, 3, 2, 1 }, { 1, 1, 1, 1 } },
		{ { 1023, 2, 1, 1 }, { 1023, 1, 1, 1 } },
		{ { 16, 5, 4, 3 }, { 16, 1, 4, 1 } },
		{ { 16, 5, 4, 3 }, { 1, 5, 1, 3 } },
		{ { 16, 5, 4, 3 }, { 8, 5, 2, 3 } },
	};
	/* Divisors stay away from zero. */
	double blo = op == LOOM_OP_DIV ? 0.5 : -1;
	double bhi = op == LOOM_OP_DIV ? 2.0 : 1;
	struct op_case *c;
	struct input *b;

#define BIN(ta, a0, a1, a2, a3, la, tb, b0, b1, b2, b3, lb)                  \
	do {                                                                 \
		c = case_new(op, NMSE_F32);                                  \
		case_in(c, ta, a0, a1, a2, a3, la);                          \
		b = case_in(c, tb, b0, b1, b2, b3, lb);                      \
		b->lo = blo;                                                 \
		b->hi = bhi;                                                 \
		case_add(c, NULL);                                           \
	} while (0)

	for (size_t i = 0; i < N_OF(shapes); i++) {
		const int64_t *s = shapes[i];

		BIN(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT,
		    LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT);
	}
	for (size_t i = 0; i < N_OF(bcast); i++) {
		const int64_t *s = bcast[i][0], *t = bcast[i][1];

		BIN(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT,
		    LOOM_TYPE_F32, t[0], t[1], t[2], t[3], LAYOUT_CONT);
	}
	for (size_t i = 1; i < N_OF(float_types); i++) {
		enum loom_type t = float_types[i];

		BIN(t, 17, 3, 2, 1, LAYOUT_CONT,
		    LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT);
		BIN(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT,
		    t, 17, 1, 1, 1, LAYOUT_CONT);
		BIN(t, 17, 3, 2, 1, LAYOUT_CONT, t, 17, 3, 2, 1, LAYOUT_CONT);
	}
	BIN(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_TRANSPOSE,
	    LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT);
	BIN(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT,
	    LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_TRANSPOSE);
	BIN(LOOM_TYPE_F32, 16, 5, 4, 3, LAYOUT_PERMUTE,
	    LOOM_TYPE_F32, 16, 1, 4, 1, LAYOUT_CONT);
	BIN(LOOM_TYPE_F32, 16, 5, 4, 3, LAYOUT_PAD,
	    LOOM_TYPE_F32, 16, 5, 1, 3, LAYOUT_PAD);
	BIN(LOOM_TYPE_F16, 17, 3, 2, 1, LAYOUT_PAD,
	    LOOM_TYPE_F32, 1, 3, 2, 1, LAYOUT_PERMUTE);
	BIN(LOOM_TYPE_F32, 17, 1, 1, 1, LAYOUT_PAD,
	    LOOM_TYPE_F32, 17, 1, 1, 1, LAYOUT_PAD);
	BIN(LOOM_TYPE_F32, 17, 3, 1, 1, LAYOUT_PAD,
	    LOOM_TYPE_F32, 17, 3, 1, 1, LAYOUT_RESHAPE);
	BIN(LOOM_TYPE_F32, 16, 5, 4, 3, LAYOUT_RESHAPE,
	    LOOM_TYPE_F32, 16, 5, 1, 3, LAYOUT_CONT);
#undef BIN
}

/* scale, silu, gelu. */
void add_unary_cases(enum loom_op op, double lo, double hi)
{
	static const int64_t shapes[][4] = {
		{ 1, 1, 1, 1 }, { 3, 2, 1, 1 }, { 17, 3, 2, 1 },
		{ 1023, 2, 1, 1 }, { 16, 5, 4, 3 },
	};
	double nmse = op == LOOM_OP_SCALE ? NMSE_F32 : NMSE_F32_ACC;
	struct op_case *c;
	struct input *a;

#define UN(t, a0, a1, a2, a3, l, s)                                          \
	do {                                                                 \
		c = case_new(op, nmse);                                      \
		a = case_in(c, t, a0, a1, a2, a3, l);                        \
		a->lo = lo;                                                  \
		a->hi = hi;                                                  \
		c->fp[0] = s;                                                \
		case_add(c, op == LOOM_OP_SCALE ? #s : NULL);                \
	} while (0)

	for (size_t i = 0; i < N_OF(shapes); i++) {
		const int64_t *s = shapes[i];

		UN(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT, 0.25);
	}
	for (size_t i = 1; i < N_OF(float_types); i++)
		UN(float_types[i], 17, 3, 2, 1, LAYOUT_CONT, 0.25);
	UN(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_TRANSPOSE, 0.25);
	UN(LOOM_TYPE_F32, 16, 5, 4, 3, LAYOUT_PERMUTE, 0.25);
	UN(LOOM_TYPE_F16, 17, 3, 2, 1, LAYOUT_PAD, 0.25);
	if (op == LOOM_OP_SCALE) {
		UN(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT, -3.5);
		UN(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT, 0.0);
	}
#undef UN
}

/* rms_norm, norm, sum_rows: row ops over dimension 0. */
void add_row_cases(enum loom_op op)
{
	static const int64_t shapes[][4] = {
		{ 1, 3, 1, 1 }, { 3, 2, 1, 1 }, { 17, 3, 2, 1 },
		{ 1023, 2, 1, 1 }, { 64, 5, 4, 3 },
	};
	static const double eps[] = { 1e-6, 1e-5 };
	struct op_case *c;
	int n = 0;

#define ROW(t, a0, a1, a2, a3, l)                                            \
	do {                                                                 \
		c = case_new(op, NMSE_F32);                                  \
		case_in(c, t, a0, a1, a2, a3, l);                            \
		c->fp[0] = eps[n++ % 2];                                     \
		case_add(c, op == LOOM_OP_SUM_ROWS ? NULL :                  \
			 c->fp[0] == 1e-6 ? "eps1e-6" : "eps1e-5");          \
	} while (0)

	for (size_t i = 0; i < N_OF(shapes); i++) {
		const int64_t *s = shapes[i];

		ROW(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT);
	}
	for (size_t i = 1; i < N_OF(float_types); i++)
		ROW(float_types[i], 17, 3, 2, 1, LAYOUT_CONT);
	ROW(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_TRANSPOSE);
	ROW(LOOM_TYPE_F32, 64, 5, 4, 3, LAYOUT_PERMUTE);
	ROW(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_PAD);
	ROW(LOOM_TYPE_BF16, 64, 5, 4, 3, LAYOUT_PAD);
#undef ROW
}

void add_soft_max_cases(void)
{
	struct op_case *c;
	struct input *a, *m;

#define SM(t, a0, a1, a2, a3, l, mt, m1, ml, s, tag)                         \
	do {                                                                 \
		c = case_new(LOOM_OP_SOFT_MAX, NMSE_F32_ACC);                \
		a = case_in(c, t, a0, a1, a2, a3, l);                        \
		a->lo = -3;                                                  \
		a->hi = 3;                                                   \
		if (m1) {                                                    \
			m = case_in(c, mt, a0, m1, 1, 1, ml);                \
			m->fill = FILL_MASK;                                 \
		}                                                            \
		c->fp[0] = s;                                                \
		case_add(c, tag);                                            \
	} while (0)

	SM(LOOM_TYPE_F32, 1, 3, 1, 1, LAYOUT_CONT, 0, 0, 0, 1.0, "scale1");
	SM(LOOM_TYPE_F32, 3, 2, 1, 1, LAYOUT_CONT, 0, 0, 0, 1.0, "scale1");
	SM(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT, 0, 0, 0, 1.0, "scale1");
	SM(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT, 0, 0, 0, 0.125,
	   "scale0.125");
	SM(LOOM_TYPE_F32, 1023, 2, 1, 1, LAYOUT_CONT, 0, 0, 0, 1.0, "scale1");
	SM(LOOM_TYPE_F16, 17, 3, 2, 1, LAYOUT_CONT, 0, 0, 0, 1.0, "scale1");
	SM(LOOM_TYPE_BF16, 17, 3, 2, 1, LAYOUT_CONT, 0, 0, 0, 1.0, "scale1");
	SM(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_PAD, 0, 0, 0, 0.5, "scale0.5");
	SM(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_TRANSPOSE, 0, 0, 0, 1.0,
	   "scale1");
	/* With masks: F32 and F16, exact rows, padded rows, broadcast. */
	SM(LOOM_TYPE_F32, 17, 3, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 3,
	   LAYOUT_CONT, 1.0, "mask_scale1");
	SM(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT, LOOM_TYPE_F32, 3,
	   LAYOUT_CONT, 0.125, "mask_scale0.125");
	SM(LOOM_TYPE_F32, 32, 7, 4, 2, LAYOUT_CONT, LOOM_TYPE_F16, 7,
	   LAYOUT_CONT, 0.125, "mask_scale0.125");
	SM(LOOM_TYPE_F32, 32, 7, 4, 2, LAYOUT_CONT, LOOM_TYPE_F32, 16,
	   LAYOUT_CONT, 1.0, "mask_pad_scale1");
	SM(LOOM_TYPE_F32, 1023, 2, 1, 1, LAYOUT_CONT, LOOM_TYPE_F16, 4,
	   LAYOUT_CONT, 0.5, "mask_pad_scale0.5");
	SM(LOOM_TYPE_F32, 1, 3, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 3,
	   LAYOUT_CONT, 1.0, "mask_scale1");
	SM(LOOM_TYPE_F16, 32, 7, 4, 2, LAYOUT_PERMUTE, LOOM_TYPE_F16, 7,
	   LAYOUT_CONT, 0.125, "mask_scale0.125");
	SM(LOOM_TYPE_F32, 32, 7, 4, 2, LAYOUT_PAD, LOOM_TYPE_F32, 9,
	   LAYOUT_PAD, 0.125, "mask_scale0.125");
#undef SM
}

void add_rope_cases(void)
{
	static const struct {
		int64_t head_dim;
		int n_dims;
		double base, scale;
	} shapes[] = {
		{ 64, 64, 10000, 1 },
		{ 64, 32, 10000, 1 },
		{ 128, 128, 500000, 1 },
		{ 128, 64, 10000, 0.25 },
		{ 18, 10, 10000, 1 },
		{ 2, 2, 10000, 1 },
	};
	struct op_case *c;

#define ROPE(t, hd, nh, nt, l, nd, mode, base, fs)                           \
	do {                                                                 \
		c = case_new(LOOM_OP_ROPE, NMSE_F32_ACC);                    \
		case_in(c, t, hd, nh, nt, 1, l);                             \
		case_ids(c, FILL_IDS, 512, nt, 1, 1);                  \
		c->ip[0] = nd;                                               \
		c->ip[1] = mode;                                             \
		c->fp[0] = base;                                             \
		c->fp[1] = fs;                                               \
		tag = loom_test_strdup_printf("%s_ndims%d_base%g_fscale%g",  \
					      mode == LOOM_ROPE_NEOX ?       \
					      "neox" : "normal",             \
					      nd, base, fs);                 \
		case_add(c, tag);                                            \
		free(tag);                                                   \
	} while (0)

	for (size_t i = 0; i < N_OF(shapes); i++) {
		char *tag;

		for (int neox = 0; neox < 2; neox++) {
			int mode = neox ? LOOM_ROPE_NEOX : LOOM_ROPE_NORMAL;

			ROPE(LOOM_TYPE_F32, shapes[i].head_dim, 4, 5,
			     LAYOUT_CONT, shapes[i].n_dims, mode,
			     shapes[i].base, shapes[i].scale);
		}
	}
	for (int neox = 0; neox < 2; neox++) {
		int mode = neox ? LOOM_ROPE_NEOX : LOOM_ROPE_NORMAL;
		char *tag;

		ROPE(LOOM_TYPE_F16, 64, 4, 5, LAYOUT_CONT, 32, mode, 10000.0,
		     1.0);
		ROPE(LOOM_TYPE_BF16, 64, 4, 5, LAYOUT_CONT, 64, mode, 10000.0,
		     1.0);
		ROPE(LOOM_TYPE_F32, 64, 4, 5, LAYOUT_PAD, 32, mode, 10000.0,
		     1.0);
		ROPE(LOOM_TYPE_F32, 64, 4, 5, LAYOUT_PERMUTE, 64, mode,
		     10000.0, 1.0);
		ROPE(LOOM_TYPE_F32, 128, 8, 1, LAYOUT_CONT, 128, mode,
		     10000.0, 1.0);
	}
#undef ROPE
}

/* The bound for a product with operands of these types. */
double mul_mat_nmse(enum loom_type ta, enum loom_type tb)
{
	if (ta == LOOM_TYPE_F32 && tb == LOOM_TYPE_F32)
		return NMSE_F32_ACC;
	if ((ta == LOOM_TYPE_F32 || ta == LOOM_TYPE_F16) &&
	    (tb == LOOM_TYPE_F32 || tb == LOOM_TYPE_F16))
		return NMSE_F16;
	return NMSE_LOW;
}

void add_mul_mat_cases(void)
{
	static const int64_t kmn[][3] = {
		{ 1, 1, 1 }, { 3, 17, 1 }, { 17, 3, 5 }, { 64, 33, 1 },
		{ 128, 64, 17 },
	};
	/* One block against four rows: the NMSE of a single output is
	 * that of one sum, as large as it is small against its terms. */
	static const int64_t kmn_q[][3] = {
		{ 32, 4, 1 }, { 64, 17, 1 }, { 96, 33, 5 }, { 256, 64, 17 },
	};
	static const enum loom_type all_a[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,
	};
	struct op_case *c;

#define MM(ta, k, m, a2, a3, la, tb, n, b2, b3, lb)                          \
	do {                                                                 \
		c = case_new(LOOM_OP_MUL_MAT, mul_mat_nmse(ta, tb));         \
		case_in(c, ta, k, m, a2, a3, la);                            \
		case_in(c, tb, k, n, b2, b3, lb);                            \
		case_add(c, NULL);                                           \
	} while (0)

	/* Sizes, GEMV (N = 1) and GEMM, every weight type with F32 input. */
	for (size_t i = 0; i < N_OF(kmn); i++)
		for (size_t t = 0; t < N_OF(float_types); t++)
			MM(float_types[t], kmn[i][0], kmn[i][1], 1, 1,
			   LAYOUT_CONT, LOOM_TYPE_F32, kmn[i][2], 1, 1,
			   LAYOUT_CONT);
	for (size_t i = 0; i < N_OF(kmn_q); i++)
		MM(LOOM_TYPE_Q8_0, kmn_q[i][0], kmn_q[i][1], 1, 1,
		   LAYOUT_CONT, LOOM_TYPE_F32, kmn_q[i][2], 1, 1, LAYOUT_CONT);
	/* Every other quantized type: K of one and of several blocks, GEMV
	 * and GEMM; past the CPU plugin's cache block of K (384) and its
	 * GEMV/GEMM switch; batches with a broadcast; F16 input; padded
	 * rows of a. */
	for (size_t t = 1; t < N_OF(quant_types); t++) {
		enum loom_type qt = quant_types[t];
		int64_t bk = loom_type_block_size(qt);

		for (size_t i = 0; i < N_OF(kmn_q); i++)
			MM(qt, kmn_q[i][0] / 32 * bk, kmn_q[i][1], 1, 1,
			   LAYOUT_CONT, LOOM_TYPE_F32, kmn_q[i][2], 1, 1,
			   LAYOUT_CONT);
		MM(qt, 3 * 256, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 8, 1, 1,
		   LAYOUT_CONT);
		MM(qt, 3 * 256, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 26, 1, 1,
		   LAYOUT_CONT);
		MM(qt, 2 * bk, 9, 2, 1, LAYOUT_CONT, LOOM_TYPE_F32, 5, 4, 3,
		   LAYOUT_CONT);
		MM(qt, 2 * bk, 9, 2, 1, LAYOUT_CONT, LOOM_TYPE_F32, 13, 4, 1,
		   LAYOUT_CONT);
		MM(qt, 2 * bk, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_F16, 5, 1, 1,
		   LAYOUT_CONT);
		MM(qt, 2 * bk, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_BF16, 1, 1, 1,
		   LAYOUT_CONT);
		MM(qt, 2 * bk, 9, 2, 1, LAYOUT_PAD, LOOM_TYPE_F32, 5, 2, 1,
		   LAYOUT_PAD);
		MM(qt, bk, 40, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 300, 1, 1,
		   LAYOUT_CONT);
	}
	/* Exactly two and three columns, every quantized type (the CPU
	 * plugin's decode kernels take up to three), rows past a multiple
	 * of four. */
	for (size_t t = 0; t < N_OF(quant_types); t++)
		for (int64_t n = 2; n <= 3; n++)
			MM(quant_types[t], 3 * 256, 37, 1, 1, LAYOUT_CONT,
			   LOOM_TYPE_F32, n, 1, 1, LAYOUT_CONT);
	/* The one large product, with K not a multiple of anything. */
	MM(LOOM_TYPE_F32, 513, 1023, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 17, 1,
	   1, LAYOUT_CONT);
	MM(LOOM_TYPE_Q8_0, 512, 255, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 17, 1,
	   1, LAYOUT_CONT);
	/* Low-precision inputs. */
	for (size_t i = 0; i < N_OF(all_a); i++) {
		MM(all_a[i], 64, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_F16, 5, 1, 1,
		   LAYOUT_CONT);
		MM(all_a[i], 64, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_BF16, 5, 1,
		   1, LAYOUT_CONT);
		MM(all_a[i], 64, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_F16, 1, 1, 1,
		   LAYOUT_CONT);
	}
	/* Batches, and a broadcast over dimensions 2 and 3. */
	for (size_t i = 0; i < N_OF(all_a); i++) {
		MM(all_a[i], 64, 9, 2, 3, LAYOUT_CONT, LOOM_TYPE_F32, 5, 2, 3,
		   LAYOUT_CONT);
		MM(all_a[i], 64, 9, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 5, 3, 2,
		   LAYOUT_CONT);
		MM(all_a[i], 64, 9, 2, 1, LAYOUT_CONT, LOOM_TYPE_F32, 3, 6, 2,
		   LAYOUT_CONT);
		MM(all_a[i], 64, 9, 2, 1, LAYOUT_CONT, LOOM_TYPE_F32, 1, 4, 1,
		   LAYOUT_CONT);
	}
	/* Around the CPU plugin's GEMV/GEMM switch and its cache blocks:
	 * N = 8, 9, 26; K past one block of 384; M not a tile multiple. */
	for (size_t i = 0; i < N_OF(all_a); i++) {
		MM(all_a[i], 416, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 8, 1,
		   1, LAYOUT_CONT);
		MM(all_a[i], 416, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 9, 1,
		   1, LAYOUT_CONT);
		MM(all_a[i], 416, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 26, 1,
		   1, LAYOUT_CONT);
		MM(all_a[i], 64, 9, 2, 1, LAYOUT_CONT, LOOM_TYPE_F32, 13, 6, 2,
		   LAYOUT_CONT);
	}
	/* M and N past the CPU plugin's largest cache blocks (768, 960). */
	for (size_t i = 1; i < N_OF(all_a); i++)
		MM(all_a[i], 64, 800, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 13, 1,
		   1, LAYOUT_CONT);
	MM(LOOM_TYPE_F32, 64, 40, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 1000, 1, 1,
	   LAYOUT_CONT);
	MM(LOOM_TYPE_Q8_0, 64, 40, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 1000, 1,
	   1, LAYOUT_CONT);
	MM(LOOM_TYPE_F16, 416, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_F16, 26, 1, 1,
	   LAYOUT_CONT);
	MM(LOOM_TYPE_BF16, 416, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_BF16, 26, 1,
	   1, LAYOUT_CONT);
	/* BF16 weights in a GEMM of BF16 pairs (where the CPU has them): K
	 * odd, past two of the CPU plugin's blocks of K (768); M and N not
	 * tile multiples; rows padded. */
	MM(LOOM_TYPE_BF16, 801, 70, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 29, 1,
	   1, LAYOUT_CONT);
	MM(LOOM_TYPE_BF16, 33, 40, 2, 1, LAYOUT_PAD, LOOM_TYPE_F32, 13, 2, 1,
	   LAYOUT_CONT);
	/* Products for tiles (AMX, where the CPU has it): K past two of the
	 * CPU plugin's runs of steps (512) and not a multiple of 32, M past
	 * its superblock of rows (128) and not a multiple of 32 on either
	 * thread, N ending in a single panel of 8 columns. */
	MM(LOOM_TYPE_BF16, 1057, 290, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 40, 1,
	   1, LAYOUT_CONT);
	MM(LOOM_TYPE_Q4_K, 1280, 290, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 24, 1,
	   1, LAYOUT_CONT);
	/* Non-contiguous operands, as attention makes them. */
	MM(LOOM_TYPE_F32, 64, 9, 4, 1, LAYOUT_CONT, LOOM_TYPE_F32, 5, 4, 1,
	   LAYOUT_PERMUTE);
	MM(LOOM_TYPE_F16, 64, 9, 4, 1, LAYOUT_PERMUTE, LOOM_TYPE_F32, 5, 4, 1,
	   LAYOUT_PERMUTE);
	MM(LOOM_TYPE_F16, 64, 9, 2, 1, LAYOUT_PERMUTE, LOOM_TYPE_F32, 5, 8, 1,
	   LAYOUT_PERMUTE);
	MM(LOOM_TYPE_F32, 17, 9, 2, 1, LAYOUT_PAD, LOOM_TYPE_F32, 5, 2, 1,
	   LAYOUT_PAD);
	MM(LOOM_TYPE_Q8_0, 64, 9, 2, 1, LAYOUT_PAD, LOOM_TYPE_F32, 5, 2, 1,
	   LAYOUT_PAD);
	MM(LOOM_TYPE_BF16, 64, 9, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 1, 4, 1,
	   LAYOUT_PERMUTE);
	MM(LOOM_TYPE_F32, 64, 9, 2, 1, LAYOUT_RESHAPE, LOOM_TYPE_F32, 5, 2, 3,
	   LAYOUT_RESHAPE);
	MM(LOOM_TYPE_F32, 17, 9, 1, 1, LAYOUT_PAD, LOOM_TYPE_F32, 17, 1, 1,
	   LAYOUT_PAD);
#undef MM
}

void add_mul_mat_id_cases(void)
{
	static const enum loom_type all_a[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,
	};
	const int64_t k = 64, m = 17, n_expert = 4, n_used = 2;
	struct op_case *c;

	for (size_t i = 0; i < N_OF(all_a); i++)
	for (int64_t n_tok = 1; n_tok <= 5; n_tok += 4)
	for (int64_t b1 = 1; b1 <= n_used; b1 += n_used - 1) {
		c = case_new(LOOM_OP_MUL_MAT_ID,
			     mul_mat_nmse(all_a[i], LOOM_TYPE_F32));
		case_in(c, all_a[i], k, m, n_expert, 1, LAYOUT_CONT);
		case_in(c, LOOM_TYPE_F32, k, b1, n_tok, 1, LAYOUT_CONT);
		case_ids(c, FILL_DISTINCT, n_expert, n_used, n_tok, 1);
		case_add(c, NULL);
	}
	/* Enough tokens for a GEMM. */
	for (size_t i = 0; i < N_OF(all_a); i++) {
		c = case_new(LOOM_OP_MUL_MAT_ID,
			     mul_mat_nmse(all_a[i], LOOM_TYPE_F32));
		case_in(c, all_a[i], k, m, n_expert, 1, LAYOUT_CONT);
		case_in(c, LOOM_TYPE_F32, k, n_used, 33, 1, LAYOUT_CONT);
		case_ids(c, FILL_DISTINCT, n_expert, n_used, 33, 1);
		case_add(c, NULL);
	}
	/* b a view with padded rows, as a slice of a larger activation. */
	c = case_new(LOOM_OP_MUL_MAT_ID, NMSE_LOW);
	case_in(c, LOOM_TYPE_Q8_0, k, m, n_expert, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, k, n_used, 5, 1, LAYOUT_PAD);
	case_ids(c, FILL_DISTINCT, n_expert, n_used, 5, 1);
	case_add(c, NULL);
	c = case_new(LOOM_OP_MUL_MAT_ID, NMSE_F32_ACC);
	case_in(c, LOOM_TYPE_F32, k, m, n_expert, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, k, 1, 5, 1, LAYOUT_PERMUTE);
	case_ids(c, FILL_DISTINCT, n_expert, n_used, 5, 1);
	case_add(c, NULL);
	/* More experts than used, a larger M, F16 input. */
	c = case_new(LOOM_OP_MUL_MAT_ID, NMSE_F16);
	case_in(c, LOOM_TYPE_F16, 96, 33, 8, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F16, 96, 1, 7, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 8, 3, 7, 1);
	case_add(c, NULL);
	c = case_new(LOOM_OP_MUL_MAT_ID, NMSE_LOW);
	case_in(c, LOOM_TYPE_BF16, 97, 33, 8, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 97, 3, 33, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 8, 3, 33, 1);
	case_add(c, NULL);
	c = case_new(LOOM_OP_MUL_MAT_ID, NMSE_LOW);
	case_in(c, LOOM_TYPE_Q8_0, 96, 33, 8, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 96, 3, 7, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 8, 3, 7, 1);
	case_add(c, NULL);
	/* Every quantized type, for one token (GEMV) and for enough tokens
	 * for a GEMM. */
	for (size_t t = 0; t < N_OF(quant_types); t++) {
		int64_t kq = 2 * loom_type_block_size(quant_types[t]);

		for (int64_t n_tok = 1; n_tok <= 33; n_tok += 32) {
			c = case_new(LOOM_OP_MUL_MAT_ID, NMSE_LOW);
			case_in(c, quant_types[t], kq, 33, 8, 1, LAYOUT_CONT);
			case_in(c, LOOM_TYPE_F32, kq, 3, n_tok, 1,
				LAYOUT_CONT);
			case_ids(c, FILL_DISTINCT, 8, 3, n_tok, 1);
			case_add(c, NULL);
		}
	}
	/* Ids out of range (here 4 and 5 of 4 experts) give rows of zeros,
	 * whatever the result's memory held (run_case poisons it). */
	for (int64_t n_tok = 5; n_tok <= 33; n_tok += 28) {
		c = case_new(LOOM_OP_MUL_MAT_ID, NMSE_F32_ACC);
		case_in(c, LOOM_TYPE_F32, k, m, n_expert, 1, LAYOUT_CONT);
		case_in(c, LOOM_TYPE_F32, k, n_used, n_tok, 1, LAYOUT_CONT);
		case_ids(c, FILL_IDS, n_expert + 2, n_used, n_tok, 1);
		case_add(c, "out-of-range");
	}
}

void add_get_rows_cases(void)
{
	static const enum loom_type types[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,
		LOOM_TYPE_I32, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K,
		LOOM_TYPE_Q6_K, LOOM_TYPE_Q4_1, LOOM_TYPE_Q5_0, LOOM_TYPE_Q5_1,
		LOOM_TYPE_Q3_K, LOOM_TYPE_Q2_K, LOOM_TYPE_IQ4_NL,
		LOOM_TYPE_IQ4_XS, LOOM_TYPE_MXFP4,
	};
	struct op_case *c;
	struct input *a;

	for (size_t i = 0; i < N_OF(types); i++) {
		enum loom_type t = types[i];
		int64_t q = loom_type_block_size(t);
		int64_t sizes[] = { q > 1 ? q : 1, q > 1 ? 2 * q : 3,
				    q > 1 ? 3 * q : 17 };

		for (size_t s = 0; s < N_OF(sizes); s++) {
			c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
			a = case_in(c, t, sizes[s], 10, 1, 1, LAYOUT_CONT);
			if (t == LOOM_TYPE_I32) {
				a->fill = FILL_IDS;
				a->range = 100000;
			}
			case_ids(c, FILL_IDS, 10, 5, 1, 1);
			case_add(c, NULL);
		}
		c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
		a = case_in(c, t, q > 1 ? 2 * q : 17, 10, 3, 1, LAYOUT_CONT);
		if (t == LOOM_TYPE_I32) {
			a->fill = FILL_IDS;
			a->range = 100000;
		}
		case_ids(c, FILL_IDS, 10, 4, 3, 1);
		case_add(c, NULL);
	}
	c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F32, 1023, 7, 1, 1, LAYOUT_CONT);
	case_ids(c, FILL_IDS, 7, 9, 1, 1);
	case_add(c, NULL);
	c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F32, 17, 10, 2, 3, LAYOUT_CONT);
	case_ids(c, FILL_IDS, 10, 4, 2, 3);
	case_add(c, NULL);
	c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F16, 17, 10, 3, 1, LAYOUT_PAD);
	case_ids(c, FILL_IDS, 10, 4, 3, 1);
	case_add(c, NULL);
	c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
	case_in(c, LOOM_TYPE_Q8_0, 64, 10, 1, 1, LAYOUT_PAD);
	case_ids(c, FILL_IDS, 10, 4, 1, 1);
	case_add(c, NULL);
	c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
	case_in(c, LOOM_TYPE_Q4_K, 512, 10, 1, 1, LAYOUT_PAD);
	case_ids(c, FILL_IDS, 10, 4, 1, 1);
	case_add(c, NULL);
}

/* The bound for values rounded into type t (from F32 or wider). */
static double store_nmse(enum loom_type from, enum loom_type t)
{
	if (t == from || t == LOOM_TYPE_F32 || t == LOOM_TYPE_I32)
		return NMSE_EXACT;
	if (t == LOOM_TYPE_F16)
		return from == LOOM_TYPE_BF16 ? NMSE_F16 : NMSE_F16 / 10;
	if (t == LOOM_TYPE_BF16)
		return NMSE_BF16;
	return NMSE_LOW;
}

void add_set_rows_cases(void)
{
	static const enum loom_type types[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,
	};
	struct op_case *c;

	for (size_t i = 0; i < N_OF(types); i++) {
		enum loom_type t = types[i];
		int64_t ne0 = t == LOOM_TYPE_Q8_0 ? 64 : 17;

		c = case_new(LOOM_OP_SET_ROWS,
			     store_nmse(LOOM_TYPE_F32, t));
		case_in(c, t, ne0, 10, 1, 1, LAYOUT_CONT);
		case_in(c, LOOM_TYPE_F32, ne0, 4, 1, 1, LAYOUT_CONT);
		case_ids(c, FILL_DISTINCT, 10, 4, 1, 1);
		c->result_in = 0;
		case_add(c, NULL);

		c = case_new(LOOM_OP_SET_ROWS,
			     store_nmse(LOOM_TYPE_F32, t));
		case_in(c, t, ne0, 10, 3, 2, LAYOUT_CONT);
		case_in(c, LOOM_TYPE_F32, ne0, 4, 3, 2, LAYOUT_CONT);
		case_ids(c, FILL_DISTINCT, 10, 4, 3, 2);
		c->result_in = 0;
		case_add(c, NULL);

		c = case_new(LOOM_OP_SET_ROWS,
			     store_nmse(LOOM_TYPE_F32, t));
		case_in(c, t, t == LOOM_TYPE_Q8_0 ? 32 : 1, 5, 1, 1,
			LAYOUT_CONT);
		case_in(c, LOOM_TYPE_F32, t == LOOM_TYPE_Q8_0 ? 32 : 1, 1, 1,
			1, LAYOUT_CONT);
		case_ids(c, FILL_DISTINCT, 5, 1, 1, 1);
		c->result_in = 0;
		case_add(c, NULL);
	}
	c = case_new(LOOM_OP_SET_ROWS, store_nmse(LOOM_TYPE_F32,
						  LOOM_TYPE_F16));
	case_in(c, LOOM_TYPE_F16, 1023, 6, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 1023, 3, 1, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 6, 3, 1, 1);
	c->result_in = 0;
	case_add(c, NULL);
}

void add_cpy_cases(void)
{
	static const enum loom_type dst_types[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16, LOOM_TYPE_Q8_0,
	};
	struct op_case *c;
	struct input *a;

#define CPY(ta, a0, a1, a2, a3, la, tb, b0, b1, b2, b3, lb)                  \
	do {                                                                 \
		c = case_new(LOOM_OP_COPY, store_nmse(ta, tb));               \
		case_in(c, ta, a0, a1, a2, a3, la);                          \
		case_in(c, tb, b0, b1, b2, b3, lb);                          \
		c->result_in = 1;                                            \
		case_add(c, NULL);                                           \
	} while (0)

	/* Every conversion, contiguous. */
	for (size_t i = 0; i < N_OF(float_types); i++)
		for (size_t j = 0; j < N_OF(dst_types); j++)
			CPY(float_types[i], 64, 3, 2, 1, LAYOUT_CONT,
			    dst_types[j], 64, 3, 2, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_Q8_0, 64, 3, 2, 1, LAYOUT_CONT,
	    LOOM_TYPE_F32, 64, 3, 2, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_Q8_0, 64, 3, 2, 1, LAYOUT_CONT,
	    LOOM_TYPE_F16, 64, 3, 2, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_Q8_0, 64, 3, 2, 1, LAYOUT_PAD,
	    LOOM_TYPE_Q8_0, 64, 3, 2, 1, LAYOUT_CONT);
	c = case_new(LOOM_OP_COPY, NMSE_EXACT);
	a = case_in(c, LOOM_TYPE_I32, 17, 3, 1, 1, LAYOUT_CONT);
	a->fill = FILL_IDS;
	a->range = 1000000;
	a = case_in(c, LOOM_TYPE_I32, 17, 3, 1, 1, LAYOUT_CONT);
	a->fill = FILL_IDS;
	a->range = 1000000;
	c->result_in = 1;
	case_add(c, NULL);
	/* Sizes and reshaping copies (same count, another shape). */
	CPY(LOOM_TYPE_F32, 1, 1, 1, 1, LAYOUT_CONT,
	    LOOM_TYPE_F16, 1, 1, 1, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_F32, 1023, 3, 1, 1, LAYOUT_CONT,
	    LOOM_TYPE_F16, 1023, 3, 1, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_F32, 17, 6, 1, 1, LAYOUT_CONT,
	    LOOM_TYPE_F32, 51, 2, 1, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_F32, 64, 6, 1, 1, LAYOUT_CONT,
	    LOOM_TYPE_Q8_0, 128, 3, 1, 1, LAYOUT_CONT);
	/* Strided sources and destinations. */
	CPY(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_TRANSPOSE,
	    LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_F16, 17, 3, 2, 1, LAYOUT_TRANSPOSE,
	    LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_F32, 32, 5, 1, 1, LAYOUT_TRANSPOSE,
	    LOOM_TYPE_Q8_0, 32, 5, 1, 1, LAYOUT_CONT);
	CPY(LOOM_TYPE_F32, 16, 5, 4, 3, LAYOUT_PERMUTE,
	    LOOM_TYPE_F16, 16, 5, 4, 3, LAYOUT_CONT);
	CPY(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_CONT,
	    LOOM_TYPE_F16, 17, 3, 2, 1, LAYOUT_PAD);
	CPY(LOOM_TYPE_F32, 64, 3, 2, 1, LAYOUT_CONT,
	    LOOM_TYPE_Q8_0, 64, 3, 2, 1, LAYOUT_PAD);
	CPY(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_PAD,
	    LOOM_TYPE_BF16, 17, 3, 2, 1, LAYOUT_TRANSPOSE);
	CPY(LOOM_TYPE_F16, 16, 5, 4, 3, LAYOUT_CONT,
	    LOOM_TYPE_F16, 16, 5, 4, 3, LAYOUT_PERMUTE);
#undef CPY
}

void add_cont_cases(void)
{
	struct op_case *c;

#define CONT(t, a0, a1, a2, a3, l)                                           \
	do {                                                                 \
		c = case_new(LOOM_OP_CONT, NMSE_EXACT);                      \
		case_in(c, t, a0, a1, a2, a3, l);                            \
		case_add(c, NULL);                                           \
	} while (0)

	for (size_t i = 0; i < N_OF(float_types); i++) {
		CONT(float_types[i], 17, 3, 2, 1, LAYOUT_TRANSPOSE);
		CONT(float_types[i], 16, 5, 4, 3, LAYOUT_PERMUTE);
		CONT(float_types[i], 17, 3, 2, 1, LAYOUT_PAD);
	}
	CONT(LOOM_TYPE_F32, 1, 1, 1, 1, LAYOUT_CONT);
	CONT(LOOM_TYPE_F32, 1023, 3, 1, 1, LAYOUT_TRANSPOSE);
	CONT(LOOM_TYPE_Q8_0, 64, 3, 2, 1, LAYOUT_PAD);
	CONT(LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_RESHAPE);
	CONT(LOOM_TYPE_F16, 17, 1, 1, 1, LAYOUT_PAD);
#undef CONT
}

void add_concat_cases(void)
{
	struct op_case *c;

#define CAT(t, la, lb, dim, a0, a1, a2, a3, bd)                              \
	do {                                                                 \
		c = case_new(LOOM_OP_CONCAT, NMSE_EXACT);                    \
		case_in(c, t, a0, a1, a2, a3, la);                           \
		case_in(c, t, dim == 0 ? bd : a0, dim == 1 ? bd : a1,        \
			dim == 2 ? bd : a2, dim == 3 ? bd : a3, lb);         \
		c->ip[0] = dim;                                              \
		case_add(c, "dim" #dim);                                     \
	} while (0)

	CAT(LOOM_TYPE_F32, LAYOUT_CONT, LAYOUT_CONT, 0, 17, 3, 2, 2, 5);
	CAT(LOOM_TYPE_F32, LAYOUT_CONT, LAYOUT_CONT, 1, 17, 3, 2, 2, 1);
	CAT(LOOM_TYPE_F32, LAYOUT_CONT, LAYOUT_CONT, 2, 17, 3, 2, 2, 3);
	CAT(LOOM_TYPE_F32, LAYOUT_CONT, LAYOUT_CONT, 3, 17, 3, 2, 2, 1);
	CAT(LOOM_TYPE_F32, LAYOUT_CONT, LAYOUT_CONT, 0, 1, 1, 1, 1, 1);
	CAT(LOOM_TYPE_F32, LAYOUT_CONT, LAYOUT_CONT, 0, 1023, 2, 1, 1, 3);
	CAT(LOOM_TYPE_F16, LAYOUT_CONT, LAYOUT_CONT, 0, 17, 3, 2, 2, 5);
	CAT(LOOM_TYPE_F16, LAYOUT_CONT, LAYOUT_CONT, 1, 17, 3, 2, 2, 4);
	CAT(LOOM_TYPE_BF16, LAYOUT_CONT, LAYOUT_CONT, 2, 17, 3, 2, 2, 1);
	CAT(LOOM_TYPE_F32, LAYOUT_TRANSPOSE, LAYOUT_CONT, 2, 17, 3, 2, 1, 2);
	CAT(LOOM_TYPE_F32, LAYOUT_CONT, LAYOUT_PAD, 0, 17, 3, 2, 1, 3);
	CAT(LOOM_TYPE_F32, LAYOUT_PERMUTE, LAYOUT_PERMUTE, 1, 16, 5, 4, 3, 2);
	CAT(LOOM_TYPE_Q8_0, LAYOUT_CONT, LAYOUT_CONT, 1, 64, 3, 2, 1, 2);
	CAT(LOOM_TYPE_Q8_0, LAYOUT_CONT, LAYOUT_CONT, 0, 64, 3, 2, 1, 32);
#undef CAT
	c = case_new(LOOM_OP_CONCAT, NMSE_EXACT);
	case_ids(c, FILL_IDS, 1000000, 5, 3, 1);
	case_ids(c, FILL_IDS, 1000000, 5, 2, 1);
	c->ip[0] = 1;
	case_add(c, "dim1");
}

void add_argmax_cases(void)
{
	static const int64_t shapes[][2] = {
		{ 1, 4 }, { 3, 3 }, { 17, 5 }, { 1023, 3 },
	};
	struct op_case *c;
	struct input *a;

	for (size_t i = 0; i < N_OF(shapes); i++) {
		c = case_new(LOOM_OP_ARGMAX, NMSE_EXACT);
		case_in(c, LOOM_TYPE_F32, shapes[i][0], shapes[i][1], 1, 1,
			LAYOUT_CONT);
		case_add(c, NULL);
	}
	for (size_t i = 0; i < N_OF(float_types); i++) {
		c = case_new(LOOM_OP_ARGMAX, NMSE_EXACT);
		a = case_in(c, float_types[i], 17, 8, 1, 1, LAYOUT_CONT);
		a->fill = FILL_TIES;
		case_add(c, "ties");
	}
	/* NaN ranks below every number. */
	c = case_new(LOOM_OP_ARGMAX, NMSE_EXACT);
	a = case_in(c, LOOM_TYPE_F32, 17, 8, 1, 1, LAYOUT_CONT);
	a->fill = FILL_NAN;
	case_add(c, "nan");
	c = case_new(LOOM_OP_ARGMAX, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F32, 17, 5, 1, 1, LAYOUT_PAD);
	case_add(c, NULL);
	c = case_new(LOOM_OP_ARGMAX, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F32, 17, 5, 1, 1, LAYOUT_TRANSPOSE);
	case_add(c, NULL);
}

void add_top_k_cases(void)
{
	static const struct {
		int64_t ne[4];
		int k;
		enum loom_type type;
		enum layout layout;
		enum fill fill;
	} cases[] = {
		{ { 1, 1, 1, 1 }, 1, LOOM_TYPE_F32, LAYOUT_CONT, FILL_UNIFORM },
		{ { 3, 2, 1, 1 }, 3, LOOM_TYPE_F32, LAYOUT_CONT, FILL_UNIFORM },
		{ { 17, 3, 2, 1 }, 5, LOOM_TYPE_F32, LAYOUT_CONT, FILL_UNIFORM },
		{ { 64, 3, 1, 1 }, 1, LOOM_TYPE_F32, LAYOUT_CONT, FILL_UNIFORM },
		{ { 1023, 2, 1, 1 }, 8, LOOM_TYPE_F32, LAYOUT_CONT, FILL_UNIFORM },
		{ { 17, 4, 1, 1 }, 6, LOOM_TYPE_F32, LAYOUT_CONT, FILL_TIES },
		{ { 17, 4, 1, 1 }, 17, LOOM_TYPE_F32, LAYOUT_CONT, FILL_TIES },
		{ { 17, 4, 1, 1 }, 6, LOOM_TYPE_F16, LAYOUT_CONT, FILL_TIES },
		{ { 17, 4, 1, 1 }, 6, LOOM_TYPE_BF16, LAYOUT_CONT, FILL_UNIFORM },
		{ { 17, 3, 2, 1 }, 4, LOOM_TYPE_F32, LAYOUT_PAD, FILL_UNIFORM },
		/* Rows with fewer numbers than k: NaN fills the rest, each
		 * index once. */
		{ { 17, 4, 1, 1 }, 12, LOOM_TYPE_F32, LAYOUT_CONT, FILL_NAN },
		{ { 300, 3, 1, 1 }, 150, LOOM_TYPE_F32, LAYOUT_CONT, FILL_NAN },
		{ { 17, 3, 2, 1 }, 4, LOOM_TYPE_F32, LAYOUT_TRANSPOSE, FILL_TIES },
	};

	for (size_t i = 0; i < N_OF(cases); i++) {
		struct op_case *c = case_new(LOOM_OP_TOP_K, NMSE_EXACT);
		struct input *a;
		char tag[32];

		a = case_in(c, cases[i].type, cases[i].ne[0], cases[i].ne[1],
			    cases[i].ne[2], cases[i].ne[3], cases[i].layout);
		a->fill = cases[i].fill;
		c->ip[0] = cases[i].k;
		snprintf(tag, sizeof(tag), "k%d%s", cases[i].k,
			 cases[i].fill == FILL_TIES  ? "_ties" :
			 cases[i].fill == FILL_NAN ? "_nan" : "");
		case_add(c, tag);
	}
}

/* Shapes with many rows, so that every thread of a device has several
 * and the last has a remainder. */
