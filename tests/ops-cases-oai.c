/* SPDX-License-Identifier: MIT */
/* ops-cases-oai.c - part of the op suite (ops-suite.c): the case tables
 * of the gpt-oss family's ops and of many rows, and making every case in
 * its order. */
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

/* ---- the gpt-oss family's ops ---- */

/* Inputs a, the mask when m1 > 0, and the sinks (last). */
static void add_soft_max_sinks_cases(void)
{
	struct op_case *c;
	struct input *in;

#define SMS(t, a0, a1, a2, a3, l, mt, m1, s, slo, shi, tag)                  \
	do {                                                                 \
		c = case_new(LOOM_OP_SOFT_MAX_SINKS, NMSE_F32_ACC);          \
		in = case_in(c, t, a0, a1, a2, a3, l);                       \
		in->lo = -3;                                                 \
		in->hi = 3;                                                  \
		if (m1)                                                      \
			case_in(c, mt, a0, m1, 1, 1, LAYOUT_CONT)->fill =    \
				FILL_MASK;                                   \
		in = case_in(c, LOOM_TYPE_F32, a2, 1, 1, 1, LAYOUT_CONT);    \
		in->lo = slo;                                                \
		in->hi = shi;                                                \
		c->fp[0] = s;                                                \
		case_add(c, tag);                                            \
	} while (0)

	SMS(LOOM_TYPE_F32, 1, 3, 2, 1, LAYOUT_CONT, 0, 0, 1.0, -3, 3,
	    "scale1");
	SMS(LOOM_TYPE_F32, 17, 3, 4, 1, LAYOUT_CONT, 0, 0, 1.0, -3, 3,
	    "scale1");
	SMS(LOOM_TYPE_F32, 17, 3, 4, 1, LAYOUT_CONT, 0, 0, 0.125, -3, 3,
	    "scale0.125");
	SMS(LOOM_TYPE_F32, 32, 7, 4, 2, LAYOUT_CONT, LOOM_TYPE_F16, 7, 0.125,
	    -3, 3, "mask_scale0.125");
	SMS(LOOM_TYPE_F32, 32, 7, 4, 2, LAYOUT_CONT, LOOM_TYPE_F32, 16, 1.0,
	    -3, 3, "mask_pad_scale1");
	SMS(LOOM_TYPE_F16, 32, 7, 4, 2, LAYOUT_PERMUTE, LOOM_TYPE_F32, 7,
	    0.125, -3, 3, "mask_scale0.125");
	SMS(LOOM_TYPE_BF16, 17, 3, 2, 1, LAYOUT_PAD, 0, 0, 0.5, -3, 3,
	    "scale0.5");
	SMS(LOOM_TYPE_F32, 1023, 2, 3, 1, LAYOUT_CONT, LOOM_TYPE_F16, 4, 0.5,
	    -3, 3, "mask_pad_scale0.5");
	/* Sinks that take nearly all the weight, and none of it. */
	SMS(LOOM_TYPE_F32, 17, 3, 4, 1, LAYOUT_CONT, LOOM_TYPE_F32, 3, 1.0,
	    20, 30, "mask_sinks_high");
	SMS(LOOM_TYPE_F32, 17, 3, 4, 1, LAYOUT_CONT, 0, 0, 1.0, -90, -80,
	    "sinks_low");
#undef SMS
}

static void add_rope_yarn_cases(void)
{
	struct op_case *c;

#define YARN(t, hd, l, nd, mode, fs, ext, attn, range, tag)                  \
	do {                                                                 \
		c = case_new(LOOM_OP_ROPE_YARN, NMSE_F32_ACC);               \
		case_in(c, t, hd, 4, 5, 1, l);                               \
		case_ids(c, FILL_IDS, range, 5, 1, 1);                       \
		c->ip[0] = nd;                                               \
		c->ip[1] = mode;                                             \
		c->ip[2] = 4096;                                             \
		c->fp[0] = 150000;                                           \
		c->fp[1] = fs;                                               \
		c->fp[2] = ext;                                              \
		c->fp[3] = attn;                                             \
		c->fp[4] = 32;                                               \
		c->fp[5] = 1;                                                \
		case_add(c, tag);                                            \
	} while (0)

	for (int neox = 0; neox < 2; neox++) {
		int mode = neox ? LOOM_ROPE_NEOX : LOOM_ROPE_NORMAL;

		/* gpt-oss's: factor 32 over 4096 positions */
		YARN(LOOM_TYPE_F32, 64, LAYOUT_CONT, 64, mode, 1.0 / 32, 1, 1,
		     512, neox ? "neox_ext1" : "normal_ext1");
		YARN(LOOM_TYPE_F32, 64, LAYOUT_CONT, 64, mode, 1.0 / 32, 1, 1,
		     131072, neox ? "neox_ext1_far" : "normal_ext1_far");
		YARN(LOOM_TYPE_F32, 64, LAYOUT_CONT, 32, mode, 0.25, 0.5, 0.8,
		     8192, neox ? "neox_ext0.5_attn0.8" :
				  "normal_ext0.5_attn0.8");
		/* ext_factor 0: plain interpolation, scaled */
		YARN(LOOM_TYPE_F32, 64, LAYOUT_CONT, 64, mode, 0.5, 0, 1.25,
		     512, neox ? "neox_ext0" : "normal_ext0");
		YARN(LOOM_TYPE_F16, 64, LAYOUT_CONT, 64, mode, 1.0 / 32, 1, 1,
		     4096, neox ? "neox_ext1" : "normal_ext1");
		YARN(LOOM_TYPE_F32, 18, LAYOUT_PAD, 10, mode, 1.0 / 8, 1, 1,
		     4096, neox ? "neox_ext1" : "normal_ext1");
	}
#undef YARN
}

static void add_swiglu_oai_cases(void)
{
	static const int64_t shapes[][4] = {
		{ 1, 1, 1, 1 }, { 64, 5, 3, 1 }, { 100, 7, 1, 1 },
		{ 33, 4, 3, 2 },
	};
	struct op_case *c;
	struct input *g, *u;

#define SWI(tg, tu, a0, a1, a2, a3, l, alpha, limit, tag)                    \
	do {                                                                 \
		c = case_new(LOOM_OP_SWIGLU_OAI, NMSE_F32_ACC);              \
		g = case_in(c, tg, a0, a1, a2, a3, l);                       \
		u = case_in(c, tu, a0, a1, a2, a3, l);                       \
		g->lo = u->lo = -10;                                         \
		g->hi = u->hi = 10;                                          \
		c->fp[0] = alpha;                                            \
		c->fp[1] = limit;                                            \
		case_add(c, tag);                                            \
	} while (0)

	for (size_t i = 0; i < N_OF(shapes); i++)
		SWI(LOOM_TYPE_F32, LOOM_TYPE_F32, shapes[i][0], shapes[i][1],
		    shapes[i][2], shapes[i][3], LAYOUT_CONT, 1.702, 7.0,
		    "alpha1.702_limit7");
	SWI(LOOM_TYPE_F32, LOOM_TYPE_F32, 64, 5, 3, 1, LAYOUT_CONT, 1.0, 0.5,
	    "alpha1_limit0.5");
	SWI(LOOM_TYPE_F32, LOOM_TYPE_F32, 64, 5, 3, 1, LAYOUT_CONT, 1.702,
	    INFINITY, "alpha1.702_nolimit");
	SWI(LOOM_TYPE_F16, LOOM_TYPE_BF16, 64, 5, 3, 1, LAYOUT_CONT, 1.702,
	    7.0, "alpha1.702_limit7");
	SWI(LOOM_TYPE_F32, LOOM_TYPE_F32, 17, 3, 2, 1, LAYOUT_TRANSPOSE, 1.702,
	    7.0, "alpha1.702_limit7");
	SWI(LOOM_TYPE_F32, LOOM_TYPE_F16, 64, 5, 4, 3, LAYOUT_PAD, 1.702, 7.0,
	    "alpha1.702_limit7");
#undef SWI
}

static void add_add_id_cases(void)
{
	static const struct {
		int64_t n, n_used, n_tok, n_expert, range;
		enum loom_type ta, tb;
		enum layout la;
	} cases[] = {
		{ 64, 4, 3, 8, 8, LOOM_TYPE_F32, LOOM_TYPE_F32, LAYOUT_CONT },
		{ 1, 1, 1, 1, 1, LOOM_TYPE_F32, LOOM_TYPE_F32, LAYOUT_CONT },
		{ 100, 2, 7, 32, 32, LOOM_TYPE_F32, LOOM_TYPE_F32,
		  LAYOUT_CONT },
		/* ids out of range add nothing */
		{ 64, 4, 3, 8, 11, LOOM_TYPE_F32, LOOM_TYPE_F32, LAYOUT_CONT },
		{ 64, 4, 3, 8, 8, LOOM_TYPE_F16, LOOM_TYPE_BF16, LAYOUT_CONT },
		{ 64, 4, 3, 8, 8, LOOM_TYPE_F32, LOOM_TYPE_F16,
		  LAYOUT_PERMUTE },
		{ 17, 4, 3, 5, 5, LOOM_TYPE_F32, LOOM_TYPE_F32, LAYOUT_PAD },
	};
	struct op_case *c;

	for (size_t i = 0; i < N_OF(cases); i++) {
		c = case_new(LOOM_OP_ADD_ID, NMSE_F32);
		case_in(c, cases[i].ta, cases[i].n, cases[i].n_used,
			cases[i].n_tok, 1, cases[i].la);
		case_in(c, cases[i].tb, cases[i].n, cases[i].n_expert, 1, 1,
			LAYOUT_CONT);
		case_ids(c, FILL_IDS, cases[i].range, cases[i].n_used,
			 cases[i].n_tok, 1);
		case_add(c, cases[i].range > cases[i].n_expert ? "oob" : "");
	}
}

static void add_many_rows_cases(void)
{
	struct op_case *c;
	struct input *in;

	c = case_new(LOOM_OP_ADD, NMSE_F32);
	case_in(c, LOOM_TYPE_F32, 17, 1023, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 17, 1, 1, 1, LAYOUT_CONT);
	case_add(c, "rows");
	c = case_new(LOOM_OP_MUL, NMSE_F32);
	case_in(c, LOOM_TYPE_F16, 1023, 37, 1, 1, LAYOUT_TRANSPOSE);
	case_in(c, LOOM_TYPE_F32, 1023, 37, 1, 1, LAYOUT_CONT);
	case_add(c, "rows");
	c = case_new(LOOM_OP_SILU, NMSE_F32_ACC);
	case_in(c, LOOM_TYPE_F32, 4099, 7, 1, 1, LAYOUT_CONT);
	case_add(c, "rows");
	c = case_new(LOOM_OP_RMS_NORM, NMSE_F32);
	case_in(c, LOOM_TYPE_F32, 64, 333, 1, 1, LAYOUT_CONT);
	c->fp[0] = 1e-6;
	case_add(c, "rows");
	c = case_new(LOOM_OP_NORM, NMSE_F32);
	case_in(c, LOOM_TYPE_F32, 4099, 3, 1, 1, LAYOUT_CONT);
	c->fp[0] = 1e-5;
	case_add(c, "rows");
	c = case_new(LOOM_OP_SOFT_MAX, NMSE_F32_ACC);
	case_in(c, LOOM_TYPE_F32, 33, 257, 3, 1, LAYOUT_CONT);
	in = case_in(c, LOOM_TYPE_F16, 33, 264, 1, 1, LAYOUT_CONT);
	in->fill = FILL_MASK;
	c->fp[0] = 0.125;
	case_add(c, "rows");
	c = case_new(LOOM_OP_ROPE, NMSE_F32_ACC);
	case_in(c, LOOM_TYPE_F32, 64, 7, 37, 1, LAYOUT_CONT);
	case_ids(c, FILL_IDS, 512, 37, 1, 1);
	c->ip[0] = 64;
	c->ip[1] = LOOM_ROPE_NEOX;
	c->fp[0] = 10000;
	c->fp[1] = 1;
	case_add(c, "rows");
	c = case_new(LOOM_OP_GET_ROWS, NMSE_EXACT);
	case_in(c, LOOM_TYPE_Q8_0, 64, 50, 1, 1, LAYOUT_CONT);
	case_ids(c, FILL_IDS, 50, 300, 1, 1);
	case_add(c, "rows");
	c = case_new(LOOM_OP_SET_ROWS, NMSE_F16 / 10);
	case_in(c, LOOM_TYPE_F16, 33, 300, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 33, 200, 1, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 300, 200, 1, 1);
	c->result_in = 0;
	case_add(c, "rows");
	c = case_new(LOOM_OP_COPY, NMSE_F16 / 10);
	case_in(c, LOOM_TYPE_F32, 1023, 33, 1, 1, LAYOUT_TRANSPOSE);
	case_in(c, LOOM_TYPE_F16, 1023, 33, 1, 1, LAYOUT_CONT);
	c->result_in = 1;
	case_add(c, "rows");
	c = case_new(LOOM_OP_SUM_ROWS, NMSE_F32);
	case_in(c, LOOM_TYPE_F32, 17, 1023, 1, 1, LAYOUT_CONT);
	case_add(c, "rows");
	c = case_new(LOOM_OP_ARGMAX, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F32, 1023, 33, 1, 1, LAYOUT_CONT);
	case_add(c, "rows");
	c = case_new(LOOM_OP_TOP_K, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F32, 64, 129, 1, 1, LAYOUT_CONT);
	c->ip[0] = 5;
	case_add(c, "rows_k5");
	c = case_new(LOOM_OP_CONCAT, NMSE_EXACT);
	case_in(c, LOOM_TYPE_F32, 17, 300, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 17, 200, 1, 1, LAYOUT_CONT);
	c->ip[0] = 1;
	case_add(c, "rows_dim1");
}

void ops_cases_make(void)
{
	if (n_cases)
		return;
	add_binary_cases(LOOM_OP_ADD);
	add_binary_cases(LOOM_OP_SUB);
	add_binary_cases(LOOM_OP_MUL);
	add_binary_cases(LOOM_OP_DIV);
	add_unary_cases(LOOM_OP_SCALE, -1, 1);
	add_unary_cases(LOOM_OP_SILU, -6, 6);
	add_unary_cases(LOOM_OP_GELU, -4, 4);
	add_row_cases(LOOM_OP_RMS_NORM);
	add_row_cases(LOOM_OP_NORM);
	add_soft_max_cases();
	add_rope_cases();
	add_mul_mat_cases();
	add_mul_mat_id_cases();
	add_get_rows_cases();
	add_set_rows_cases();
	add_cpy_cases();
	add_cont_cases();
	add_concat_cases();
	add_row_cases(LOOM_OP_SUM_ROWS);
	add_argmax_cases();
	add_top_k_cases();
	add_many_rows_cases();
	add_graph_cases();
	add_soft_max_sinks_cases();
	add_rope_yarn_cases();
	add_swiglu_oai_cases();
	add_add_id_cases();
}
