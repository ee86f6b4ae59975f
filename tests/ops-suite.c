/* SPDX-License-Identifier: MIT */
/* ops-suite.c - the op-conformance suite: every op of loom.h as cases of
 * seeded inputs, run on a device and compared with a plain double-precision
 * reference (ref-ops.c) by NMSE.  GLib-free, so that loom-conformance, the
 * installed tool, and tests/test-ops share it.
 *
 * Inputs are filled with seeded random values in the device's own buffer
 * type, read back, and the reference is computed from exactly those
 * (rounded or quantized) values.  A device whose supports_op refuses a node
 * of a case skips that case, saying which.  Results go to the driver's
 * report (ops_set_report).
 */
#define _GNU_SOURCE
#include "ops-suite.h"
#include "ref-ops.h"
#include "test-util.h"

#include <loom/loom-backend.h>

#include <assert.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_OF(a) (sizeof(a) / sizeof(*(a)))

/* NMSE bounds: exact copies compare bit for bit (after decoding). */
#define NMSE_EXACT 0.0
#define NMSE_F32 1e-7      /* elementwise and row ops computed in F32 */
#define NMSE_F32_ACC 1e-6  /* transcendental or long accumulations */
#define NMSE_F16 1e-5      /* an F16 operand or result rounding */
#define NMSE_BF16 5e-5     /* a BF16 result rounding */
#define NMSE_LOW 2e-4      /* BF16 or Q8_0 operands, Q8_0 results */

/* How an input reaches the op: the tensor placed in the buffer (the leaf)
 * and the view of it the op reads. */
enum layout {
	LAYOUT_CONT,      /* the leaf itself */
	LAYOUT_TRANSPOSE, /* loom_transpose of a [ne1, ne0, ...] leaf */
	LAYOUT_PERMUTE,   /* loom_permute(0, 2, 1, 3) of [ne0, ne2, ne1, ..] */
	LAYOUT_PAD,       /* a view skipping the first row of a wider leaf
			   * (loom_view_1d/2d/3d/4d by the input's dims) */
	LAYOUT_RESHAPE,   /* loom_reshape_4d of a [ne0 * ne1, ne2, ne3] leaf */
};

static const char *const layout_tags[] = {
	[LAYOUT_CONT] = "",
	[LAYOUT_TRANSPOSE] = ".T",
	[LAYOUT_PERMUTE] = ".P",
	[LAYOUT_PAD] = ".V",
	[LAYOUT_RESHAPE] = ".R",
};

enum fill {
	FILL_UNIFORM,  /* uniform in [lo, hi) */
	FILL_TIES,     /* small integers 0..4, so many values tie */
	FILL_IDS,      /* I32 uniform in [0, range) */
	FILL_DISTINCT, /* I32, distinct within each row, in [0, range) */
	FILL_MASK,     /* uniform in [-1, 0), -INFINITY past a diagonal */
	FILL_NAN,      /* small integers 0..4, about two in three NaN */
};

struct input {
	const char *name; /* the leaf's name (for a meta device's split
			   * policy), NULL for "in<i>" */
	enum loom_type type;
	int64_t ne[4]; /* the shape the op sees */
	enum layout layout;
	enum fill fill;
	double lo, hi;
	int64_t range;
};

#define MAX_INPUTS 6

struct op_case;

/* A case of several ops in one graph: its intermediates live in the
 * allocator's compute buffer, where memory is reused. */
struct composite {
	const char *name;
	struct loom_tensor *(*build)(loom_ctx_t *ctx, const struct op_case *c,
				     struct loom_tensor **s);
	void (*reference)(const struct op_case *c, struct ref_tensor *r,
			  struct ref_tensor *out);
};

struct op_case {
	enum loom_op op;          /* LOOM_OP_NONE for a composite */
	const struct composite *graph;
	char *name;
	int n_in;
	struct input in[MAX_INPUTS];
	int32_t ip[4];  /* integer parameters (n_dims, mode, dim, k) */
	double fp[8];   /* float parameters (eps, scale, freq base/scale) */
	int result_in;  /* copy, set_rows: the input the op writes, else -1 */
	double max_nmse;
	uint64_t seed;
};

static struct op_case **all_cases;
static size_t n_cases, cap_cases;
static const struct ops_report *report;
static bool case_failed, case_skipped;

static void __attribute__((format(printf, 1, 2)))
ops_message(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = NULL;
	va_end(ap);
	if (msg && report && report->message)
		report->message(msg, report->data);
	free(msg);
}

static void ops_fail(void)
{
	case_failed = true;
	if (report && report->fail)
		report->fail(report->data);
}

static void ops_skip(const char *why)
{
	case_skipped = true;
	if (report && report->skip)
		report->skip(why, report->data);
}

/* ------------------------------------------------------------------------
 * Building cases.
 */

/* The op part of a case's path: the op's name, or "graph". */
static const char *case_op_name(const struct op_case *c)
{
	return c->graph ? "graph" : loom_op_name(c->op);
}

static struct op_case *case_new(enum loom_op op, double max_nmse)
{
	struct op_case *c = loom_test_malloc(sizeof(struct op_case));

	c->op = op;
	c->max_nmse = max_nmse;
	c->result_in = -1;
	return c;
}

static struct input *case_in(struct op_case *c, enum loom_type type,
			     int64_t ne0, int64_t ne1, int64_t ne2,
			     int64_t ne3, enum layout layout)
{
	struct input *in;

	assert(c->n_in < MAX_INPUTS);
	in = &c->in[c->n_in++];
	in->type = type;
	in->ne[0] = ne0;
	in->ne[1] = ne1;
	in->ne[2] = ne2;
	in->ne[3] = ne3;
	in->layout = layout;
	in->fill = FILL_UNIFORM;
	in->lo = -1;
	in->hi = 1;
	return in;
}

static struct input *case_ids(struct op_case *c, enum fill fill,
			      int64_t range, int64_t ne0, int64_t ne1,
			      int64_t ne2)
{
	struct input *in = case_in(c, LOOM_TYPE_I32, ne0, ne1, ne2, 1,
				   LAYOUT_CONT);

	in->fill = fill;
	in->range = range;
	return in;
}

/* Appends to the string in buf (of size bytes), truncating. */
static void __attribute__((format(printf, 3, 4)))
str_append(char *buf, size_t size, const char *fmt, ...)
{
	size_t len = strlen(buf);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf + len, size - len, fmt, ap);
	va_end(ap);
}

static bool case_exists(const char *op, const char *name)
{
	for (size_t i = 0; i < n_cases; i++)
		if (!strcmp(case_op_name(all_cases[i]), op) &&
		    !strcmp(all_cases[i]->name, name))
			return true;
	return false;
}

/* The seed of a case: a string hash (h * 33 + c from 5381) of its path,
 * so that a case keeps its values when others are added. */
static uint64_t case_seed(const char *op, const char *name)
{
	uint32_t h = 5381;
	char *key = loom_test_strdup_printf("%s/%s", op, name);

	for (const signed char *p = (const signed char *)key; *p; p++)
		h = (h << 5) + h + (uint32_t)*p;
	free(key);
	return h * 0x9e3779b97f4a7c15ull + 1;
}

/* Names the case from its inputs (type.shape plus a layout tag) and tag,
 * seeds it from the name, and adds it to the list. */
static void case_add(struct op_case *c, const char *tag)
{
	char s[512] = "";

	for (int i = 0; i < c->n_in && !c->graph; i++) {
		const struct input *in = &c->in[i];

		str_append(s, sizeof(s), "%s%s.%" PRId64 "x%" PRId64 "x%"
			   PRId64 "x%" PRId64 "%s", i ? "_" : "",
			   loom_type_name(in->type),
			   in->ne[0], in->ne[1], in->ne[2],
			   in->ne[3], layout_tags[in->layout]);
	}
	if (tag && *tag)
		str_append(s, sizeof(s), "%s%s", *s ? "_" : "", tag);
	c->name = loom_test_strdup_printf("%s", s);
	for (int n = 2; case_exists(case_op_name(c), c->name); n++) {
		free(c->name);
		c->name = loom_test_strdup_printf("%s_%d", s, n);
	}
	c->seed = case_seed(case_op_name(c), c->name);
	if (n_cases == cap_cases) {
		cap_cases = cap_cases ? 2 * cap_cases : 256;
		struct op_case **v = loom_test_malloc(cap_cases *
						      sizeof(*all_cases));

		if (n_cases)
			memcpy(v, all_cases, n_cases * sizeof(*all_cases));
		free(all_cases);
		all_cases = v;
	}
	all_cases[n_cases++] = c;
}

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
static void add_binary_cases(enum loom_op op)
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
static void add_unary_cases(enum loom_op op, double lo, double hi)
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
static void add_row_cases(enum loom_op op)
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

static void add_soft_max_cases(void)
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

static void add_rope_cases(void)
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
static double mul_mat_nmse(enum loom_type ta, enum loom_type tb)
{
	if (ta == LOOM_TYPE_F32 && tb == LOOM_TYPE_F32)
		return NMSE_F32_ACC;
	if ((ta == LOOM_TYPE_F32 || ta == LOOM_TYPE_F16) &&
	    (tb == LOOM_TYPE_F32 || tb == LOOM_TYPE_F16))
		return NMSE_F16;
	return NMSE_LOW;
}

static void add_mul_mat_cases(void)
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

static void add_mul_mat_id_cases(void)
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

static void add_get_rows_cases(void)
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

static void add_set_rows_cases(void)
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

static void add_cpy_cases(void)
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

static void add_cont_cases(void)
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

static void add_concat_cases(void)
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

static void add_argmax_cases(void)
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

static void add_top_k_cases(void)
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

static void add_graph_cases(void);

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

/* ------------------------------------------------------------------------
 * Inputs: leaves, the views the op reads, and their values.
 */

static void leaf_shape(const struct input *in, int64_t ne[4])
{
	memcpy(ne, in->ne, sizeof(in->ne));
	switch (in->layout) {
	case LAYOUT_CONT:
		break;
	case LAYOUT_TRANSPOSE:
		ne[0] = in->ne[1];
		ne[1] = in->ne[0];
		break;
	case LAYOUT_PERMUTE:
		ne[1] = in->ne[2];
		ne[2] = in->ne[1];
		break;
	case LAYOUT_PAD:
		ne[0] += loom_type_is_quantized(in->type) ?
				 loom_type_block_size(in->type) : 3;
		ne[1] += 1;
		break;
	case LAYOUT_RESHAPE:
		ne[0] = in->ne[0] * in->ne[1];
		ne[1] = in->ne[2];
		ne[2] = in->ne[3];
		ne[3] = 1;
		break;
	}
}

/* Where element i of the view lies in the leaf (layout_ne0 is the
 * view's ne0). */
static void leaf_index(enum layout layout, int64_t layout_ne0,
		       const int64_t i[4], int64_t j[4])
{
	memcpy(j, i, 4 * sizeof(*i));
	switch (layout) {
	case LAYOUT_CONT:
		break;
	case LAYOUT_TRANSPOSE:
		j[0] = i[1];
		j[1] = i[0];
		break;
	case LAYOUT_PERMUTE:
		j[1] = i[2];
		j[2] = i[1];
		break;
	case LAYOUT_PAD:
		j[1] = i[1] + 1;
		break;
	case LAYOUT_RESHAPE:
		j[0] = i[0] + i[1] * layout_ne0;
		j[1] = i[2];
		j[2] = i[3];
		j[3] = 0;
		break;
	}
}

static struct loom_tensor *make_view(loom_ctx_t *ctx, struct loom_tensor *leaf,
				     const struct input *in)
{
	switch (in->layout) {
	case LAYOUT_CONT:
		return leaf;
	case LAYOUT_TRANSPOSE:
		return loom_transpose(ctx, leaf);
	case LAYOUT_PERMUTE:
		return loom_permute(ctx, leaf, 0, 2, 1, 3);
	case LAYOUT_PAD:
		/* Each view constructor for the dims it can express. */
		if (in->ne[1] == 1 && in->ne[2] == 1 && in->ne[3] == 1)
			return loom_view_1d(ctx, leaf, in->ne[0],
					    leaf->nb[1]);
		if (in->ne[2] == 1 && in->ne[3] == 1)
			return loom_view_2d(ctx, leaf, in->ne[0], in->ne[1],
					    leaf->nb[1], leaf->nb[1]);
		if (in->ne[3] == 1)
			return loom_view_3d(ctx, leaf, in->ne[0], in->ne[1],
					    in->ne[2], leaf->nb[1],
					    leaf->nb[2], leaf->nb[1]);
		return loom_view_4d(ctx, leaf, in->ne[0], in->ne[1], in->ne[2],
				    in->ne[3], leaf->nb[1], leaf->nb[2],
				    leaf->nb[3], leaf->nb[1]);
	case LAYOUT_RESHAPE:
		return loom_reshape_4d(ctx, leaf, in->ne[0], in->ne[1],
				       in->ne[2], in->ne[3]);
	}
	return NULL;
}

/* Fills one row of ids: uniform in [0, range), or with distinct values
 * (the first n entries of a shuffled 0 .. range - 1). */
static void fill_ids_row(int32_t *p, int64_t n, const struct input *in,
			 struct loom_test_rng *rng)
{
	int32_t *perm;

	if (in->fill != FILL_DISTINCT) {
		for (int64_t i = 0; i < n; i++)
			p[i] = (int32_t)loom_test_rng_int(rng, in->range);
		return;
	}
	perm = loom_test_malloc(sizeof(int32_t) * (size_t)in->range);
	for (int64_t i = 0; i < in->range; i++)
		perm[i] = (int32_t)i;
	for (int64_t i = 0; i < n; i++) {
		int64_t j = i + loom_test_rng_int(rng, in->range - i);
		int32_t tmp = perm[i];

		perm[i] = perm[j];
		perm[j] = tmp;
		p[i] = perm[i];
	}
	free(perm);
}

/* Fills a placed leaf as the input asks. */
static int fill_leaf(struct loom_tensor *leaf, const struct input *in,
		     struct loom_test_rng *rng)
{
	int64_t n = loom_tensor_n_elements(leaf);
	int64_t row = leaf->ne[0];
	int32_t *ids;
	float *v;
	int st;

	if (in->fill == FILL_UNIFORM)
		return loom_test_fill_uniform(leaf, rng, in->lo, in->hi);
	if (leaf->type == LOOM_TYPE_I32) {
		ids = loom_test_malloc(sizeof(int32_t) * (size_t)n);
		for (int64_t r = 0; r < n / row; r++)
			fill_ids_row(ids + r * row, row, in, rng);
		st = loom_test_set_i32(leaf, ids);
		free(ids);
		return st;
	}
	v = loom_test_malloc(sizeof(float) * (size_t)n);
	for (int64_t i = 0; i < n; i++) {
		int64_t i0 = i % row, i1 = (i / row) % leaf->ne[1];

		if (in->fill == FILL_NAN &&
		    loom_test_rng_uniform(rng, 0, 3) < 2)
			v[i] = NAN;
		else if (in->fill == FILL_TIES || in->fill == FILL_NAN)
			v[i] = floorf((float)loom_test_rng_uniform(rng, 0, 5));
		else if (i0 > i1 + row / 2)
			v[i] = -INFINITY;
		else
			v[i] = (float)loom_test_rng_uniform(rng, -1, 0);
	}
	st = loom_test_set_f32(leaf, v);
	free(v);
	return st;
}

/* The values the op sees through input in, from its leaf's values. */
static void view_values(const struct input *in, const struct ref_tensor *leaf,
			struct ref_tensor *out)
{
	ref_tensor_init(out, in->ne);
	for (int64_t i3 = 0; i3 < in->ne[3]; i3++)
	for (int64_t i2 = 0; i2 < in->ne[2]; i2++)
	for (int64_t i1 = 0; i1 < in->ne[1]; i1++)
	for (int64_t i0 = 0; i0 < in->ne[0]; i0++) {
		int64_t i[4] = { i0, i1, i2, i3 }, j[4];

		leaf_index(in->layout, in->ne[0], i, j);
		*ref_at(out, i0, i1, i2, i3) =
			*ref_at(leaf, j[0], j[1], j[2], j[3]);
	}
}

/* The reverse: writes view values into the leaf's values. */
static void scatter_view(const struct input *in, const struct ref_tensor *view,
			 struct ref_tensor *leaf)
{
	for (int64_t i3 = 0; i3 < in->ne[3]; i3++)
	for (int64_t i2 = 0; i2 < in->ne[2]; i2++)
	for (int64_t i1 = 0; i1 < in->ne[1]; i1++)
	for (int64_t i0 = 0; i0 < in->ne[0]; i0++) {
		int64_t i[4] = { i0, i1, i2, i3 }, j[4];

		leaf_index(in->layout, in->ne[0], i, j);
		*ref_at(leaf, j[0], j[1], j[2], j[3]) =
			*ref_at(view, i0, i1, i2, i3);
	}
}


/* ------------------------------------------------------------------------
 * Composite cases: small pieces of a model in one graph.
 */

/* The reference's view of x through a layout's index map (permute(0, 2,
 * 1, 3) or transpose), as view_values() reads inputs. */
static void ref_view(const struct ref_tensor *x, enum layout layout,
		     struct ref_tensor *out)
{
	struct input in = { .layout = layout };

	memcpy(in.ne, x->ne, sizeof(in.ne));
	if (layout == LAYOUT_TRANSPOSE) {
		in.ne[0] = x->ne[1];
		in.ne[1] = x->ne[0];
	} else if (layout == LAYOUT_PERMUTE) {
		in.ne[1] = x->ne[2];
		in.ne[2] = x->ne[1];
	}
	view_values(&in, x, out);
}

/* x + w2 (silu(w1 h) * (w3 h)), h = rms_norm(x) * norm weight.
 * Inputs: x, w1, w3, w2, norm weight, named as a model names them, so a
 * meta device's default policy splits the weights across its devices. */
static struct loom_tensor *ffn_build(loom_ctx_t *ctx, const struct op_case *c,
				     struct loom_tensor **s)
{
	struct loom_tensor *h, *g, *u;

	h = loom_mul(ctx, loom_rms_norm(ctx, s[0], 1e-5f), s[4]);
	g = loom_silu(ctx, loom_mul_mat(ctx, s[1], h));
	u = loom_mul_mat(ctx, s[2], h);
	return loom_add(ctx, s[0], loom_mul_mat(ctx, s[3],
						loom_mul(ctx, g, u)));
}

static void ffn_reference(const struct op_case *c, struct ref_tensor *r,
			  struct ref_tensor *out)
{
	struct ref_tensor n, h, a, g, u, gu, y;

	ref_rms_norm(&r[0], 1e-5f, &n);
	ref_binary(REF_MUL, &n, &r[4], &h);
	ref_mul_mat(&r[1], &h, &a);
	ref_silu(&a, &g);
	ref_mul_mat(&r[2], &h, &u);
	ref_binary(REF_MUL, &g, &u, &gu);
	ref_mul_mat(&r[3], &gu, &y);
	ref_binary(REF_ADD, &r[0], &y, out);
	ref_tensor_free(&n);
	ref_tensor_free(&h);
	ref_tensor_free(&a);
	ref_tensor_free(&g);
	ref_tensor_free(&u);
	ref_tensor_free(&gu);
	ref_tensor_free(&y);
}

static const struct composite ffn = {
	.name = "ffn",
	.build = ffn_build,
	.reference = ffn_reference,
};

/* Attention with GQA over a KV cache: rope on q, k q^T with a causal
 * mask, softmax, times v.  Inputs: q [hd, n_head, n_tok], k and v
 * [hd, n_kv, n_head_kv], mask [n_kv, >= n_tok], positions [n_tok]. */
static struct loom_tensor *attn_build(loom_ctx_t *ctx,
				      const struct op_case *c,
				      struct loom_tensor **s)
{
	struct loom_tensor *q, *kq, *vt, *kqv;
	int64_t hd = c->in[0].ne[0];

	q = loom_rope(ctx, s[0], s[4], (int)hd, LOOM_ROPE_NEOX, 10000.0f,
		      1.0f);
	kq = loom_mul_mat(ctx, s[1], loom_permute(ctx, q, 0, 2, 1, 3));
	kq = loom_soft_max(ctx, kq, s[3], 1.0f / sqrtf((float)hd));
	vt = loom_cont(ctx, loom_transpose(ctx, s[2]));
	kqv = loom_mul_mat(ctx, vt, kq);
	return loom_cont(ctx, loom_permute(ctx, kqv, 0, 2, 1, 3));
}

static void attn_reference(const struct op_case *c, struct ref_tensor *r,
			   struct ref_tensor *out)
{
	struct ref_tensor q, qp, kq, sm, vt, kqv;
	int64_t hd = c->in[0].ne[0];

	ref_rope(&r[0], &r[4], (int)hd, LOOM_ROPE_NEOX, 10000.0f, 1.0f, &q);
	ref_view(&q, LAYOUT_PERMUTE, &qp);
	ref_mul_mat(&r[1], &qp, &kq);
	ref_soft_max(&kq, &r[3], 1.0f / sqrtf((float)hd), &sm);
	ref_view(&r[2], LAYOUT_TRANSPOSE, &vt);
	ref_mul_mat(&vt, &sm, &kqv);
	ref_view(&kqv, LAYOUT_PERMUTE, out);
	ref_tensor_free(&q);
	ref_tensor_free(&qp);
	ref_tensor_free(&kq);
	ref_tensor_free(&sm);
	ref_tensor_free(&vt);
	ref_tensor_free(&kqv);
}

static const struct composite attn = {
	.name = "attention",
	.build = attn_build,
	.reference = attn_reference,
};

/* A chain of row and elementwise ops: sum_rows(gelu(scale(norm(x) * w +
 * b))).  Inputs: x, w, b. */
static struct loom_tensor *chain_build(loom_ctx_t *ctx,
				       const struct op_case *c,
				       struct loom_tensor **s)
{
	struct loom_tensor *t;

	t = loom_mul(ctx, loom_norm(ctx, s[0], 1e-5f), s[1]);
	t = loom_scale(ctx, loom_add(ctx, t, s[2]), 0.5f);
	return loom_sum_rows(ctx, loom_gelu(ctx, t));
}

static void chain_reference(const struct op_case *c, struct ref_tensor *r,
			    struct ref_tensor *out)
{
	struct ref_tensor n, m, a, sc, g;

	ref_norm(&r[0], 1e-5f, &n);
	ref_binary(REF_MUL, &n, &r[1], &m);
	ref_binary(REF_ADD, &m, &r[2], &a);
	ref_scale(&a, 0.5f, &sc);
	ref_gelu(&sc, &g);
	ref_sum_rows(&g, out);
	ref_tensor_free(&n);
	ref_tensor_free(&m);
	ref_tensor_free(&a);
	ref_tensor_free(&sc);
	ref_tensor_free(&g);
}

static const struct composite chain = {
	.name = "chain",
	.build = chain_build,
	.reference = chain_reference,
};

/* A KV-cache write read back in the same graph: mul_mat(set_rows(cache,
 * new rows, ids), q).  Inputs: cache, new rows, ids, q. */
static struct loom_tensor *cache_build(loom_ctx_t *ctx,
				       const struct op_case *c,
				       struct loom_tensor **s)
{
	return loom_mul_mat(ctx, loom_set_rows(ctx, s[0], s[1], s[2]), s[3]);
}

static void cache_reference(const struct op_case *c, struct ref_tensor *r,
			    struct ref_tensor *out)
{
	struct ref_tensor k;

	ref_set_rows(&r[0], &r[1], &r[2], &k);
	ref_mul_mat(&k, &r[3], out);
	ref_tensor_free(&k);
}

static const struct composite cache = {
	.name = "kv_cache",
	.build = cache_build,
	.reference = cache_reference,
};

static void add_graph_cases(void)
{
	static const enum loom_type wtypes[] = {
		LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_Q8_0,
	};
	struct op_case *c;
	struct input *in;
	char tag[64];

	for (size_t i = 0; i < N_OF(wtypes); i++) {
		enum loom_type t = wtypes[i];

		c = case_new(LOOM_OP_NONE, mul_mat_nmse(t, LOOM_TYPE_F32));
		c->graph = &ffn;
		case_in(c, LOOM_TYPE_F32, 64, 5, 1, 1, LAYOUT_CONT);
		in = case_in(c, t, 64, 128, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_gate.weight";
		in = case_in(c, t, 64, 128, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_up.weight";
		in = case_in(c, t, 128, 64, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_down.weight";
		in = case_in(c, LOOM_TYPE_F32, 64, 1, 1, 1, LAYOUT_CONT);
		in->name = "blk.0.ffn_norm.weight";
		snprintf(tag, sizeof(tag), "ffn_%s", loom_type_name(t));
		case_add(c, tag);
	}
	for (int n_tok = 1; n_tok <= 5; n_tok += 4) {
		for (size_t i = 0; i < 2; i++) {
			enum loom_type t = wtypes[i];

			c = case_new(LOOM_OP_NONE,
				     mul_mat_nmse(t, LOOM_TYPE_F32));
			c->graph = &attn;
			case_in(c, LOOM_TYPE_F32, 32, 4, n_tok, 1,
				LAYOUT_CONT);
			case_in(c, t, 32, 7, 2, 1, LAYOUT_CONT);
			case_in(c, t, 32, 7, 2, 1, LAYOUT_CONT);
			in = case_in(c, LOOM_TYPE_F32, 7, 8, 1, 1,
				     LAYOUT_CONT);
			in->fill = FILL_MASK;
			case_ids(c, FILL_IDS, 512, n_tok, 1, 1);
			snprintf(tag, sizeof(tag), "attention_%s_tok%d",
				   loom_type_name(t), n_tok);
			case_add(c, tag);
		}
	}
	c = case_new(LOOM_OP_NONE, NMSE_F32_ACC);
	c->graph = &chain;
	case_in(c, LOOM_TYPE_F32, 33, 6, 2, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 33, 1, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 33, 1, 1, 1, LAYOUT_CONT);
	case_add(c, "chain");
	c = case_new(LOOM_OP_NONE, NMSE_F16);
	c->graph = &cache;
	case_in(c, LOOM_TYPE_F16, 32, 10, 1, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 32, 3, 1, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 10, 3, 1, 1);
	case_in(c, LOOM_TYPE_F32, 32, 2, 1, 1, LAYOUT_CONT);
	case_add(c, "kv_cache_f16");
}

/* ------------------------------------------------------------------------
 * Running a case.
 */

static struct loom_tensor *build_op(loom_ctx_t *ctx, const struct op_case *c,
				    struct loom_tensor **s)
{
	if (c->graph)
		return c->graph->build(ctx, c, s);
	switch (c->op) {
	case LOOM_OP_ADD:
		return loom_add(ctx, s[0], s[1]);
	case LOOM_OP_SUB:
		return loom_sub(ctx, s[0], s[1]);
	case LOOM_OP_MUL:
		return loom_mul(ctx, s[0], s[1]);
	case LOOM_OP_DIV:
		return loom_div(ctx, s[0], s[1]);
	case LOOM_OP_SCALE:
		return loom_scale(ctx, s[0], (float)c->fp[0]);
	case LOOM_OP_SILU:
		return loom_silu(ctx, s[0]);
	case LOOM_OP_GELU:
		return loom_gelu(ctx, s[0]);
	case LOOM_OP_RMS_NORM:
		return loom_rms_norm(ctx, s[0], (float)c->fp[0]);
	case LOOM_OP_NORM:
		return loom_norm(ctx, s[0], (float)c->fp[0]);
	case LOOM_OP_SOFT_MAX:
		return loom_soft_max(ctx, s[0], c->n_in > 1 ? s[1] : NULL,
				     (float)c->fp[0]);
	case LOOM_OP_ROPE:
		return loom_rope(ctx, s[0], s[1], c->ip[0],
				 (enum loom_rope_mode)c->ip[1],
				 (float)c->fp[0], (float)c->fp[1]);
	case LOOM_OP_MUL_MAT:
		return loom_mul_mat(ctx, s[0], s[1]);
	case LOOM_OP_MUL_MAT_ID:
		return loom_mul_mat_id(ctx, s[0], s[1], s[2]);
	case LOOM_OP_GET_ROWS:
		return loom_get_rows(ctx, s[0], s[1]);
	case LOOM_OP_SET_ROWS:
		return loom_set_rows(ctx, s[0], s[1], s[2]);
	case LOOM_OP_COPY:
		return loom_copy(ctx, s[0], s[1]);
	case LOOM_OP_CONT:
		return loom_cont(ctx, s[0]);
	case LOOM_OP_CONCAT:
		return loom_concat(ctx, s[0], s[1], c->ip[0]);
	case LOOM_OP_SUM_ROWS:
		return loom_sum_rows(ctx, s[0]);
	case LOOM_OP_ARGMAX:
		return loom_argmax(ctx, s[0]);
	case LOOM_OP_TOP_K:
		return loom_top_k(ctx, s[0], c->ip[0]);
	case LOOM_OP_SOFT_MAX_SINKS:
		return loom_soft_max_sinks(ctx, s[0],
					   c->n_in > 2 ? s[1] : NULL,
					   s[c->n_in - 1], (float)c->fp[0]);
	case LOOM_OP_ROPE_YARN:
		return loom_rope_yarn(ctx, s[0], s[1], c->ip[0],
				      (enum loom_rope_mode)c->ip[1],
				      (float)c->fp[0], (float)c->fp[1],
				      c->ip[2], (float)c->fp[2],
				      (float)c->fp[3], (float)c->fp[4],
				      (float)c->fp[5]);
	case LOOM_OP_SWIGLU_OAI:
		return loom_swiglu_oai(ctx, s[0], s[1], (float)c->fp[0],
				       (float)c->fp[1]);
	case LOOM_OP_ADD_ID:
		return loom_add_id(ctx, s[0], s[1], s[2]);
	default:
		return NULL;
	}
}

/* The reference result from the inputs' values r[] (as the op sees them);
 * for ops that write into an input, leaf holds that input's leaf values. */
static void reference(const struct op_case *c, struct ref_tensor *r,
		      const struct ref_tensor *leaf, struct ref_tensor *out)
{
	struct ref_tensor tmp;

	if (c->graph) {
		c->graph->reference(c, r, out);
		return;
	}
	switch (c->op) {
	case LOOM_OP_ADD:
		ref_binary(REF_ADD, &r[0], &r[1], out);
		break;
	case LOOM_OP_SUB:
		ref_binary(REF_SUB, &r[0], &r[1], out);
		break;
	case LOOM_OP_MUL:
		ref_binary(REF_MUL, &r[0], &r[1], out);
		break;
	case LOOM_OP_DIV:
		ref_binary(REF_DIV, &r[0], &r[1], out);
		break;
	case LOOM_OP_SCALE:
		ref_scale(&r[0], (float)c->fp[0], out);
		break;
	case LOOM_OP_SILU:
		ref_silu(&r[0], out);
		break;
	case LOOM_OP_GELU:
		ref_gelu(&r[0], out);
		break;
	case LOOM_OP_RMS_NORM:
		ref_rms_norm(&r[0], (float)c->fp[0], out);
		break;
	case LOOM_OP_NORM:
		ref_norm(&r[0], (float)c->fp[0], out);
		break;
	case LOOM_OP_SOFT_MAX:
		ref_soft_max(&r[0], c->n_in > 1 ? &r[1] : NULL,
			     (float)c->fp[0], out);
		break;
	case LOOM_OP_ROPE:
		ref_rope(&r[0], &r[1], c->ip[0], c->ip[1], (float)c->fp[0],
			 (float)c->fp[1], out);
		break;
	case LOOM_OP_MUL_MAT:
		ref_mul_mat(&r[0], &r[1], out);
		break;
	case LOOM_OP_MUL_MAT_ID:
		ref_mul_mat_id(&r[0], &r[1], &r[2], out);
		break;
	case LOOM_OP_GET_ROWS:
		ref_get_rows(&r[0], &r[1], out);
		break;
	case LOOM_OP_SET_ROWS:
		/* The whole destination: rows not named keep their values. */
		ref_set_rows(&r[0], &r[1], &r[2], &tmp);
		ref_cpy(leaf, leaf->ne, out);
		scatter_view(&c->in[0], &tmp, out);
		ref_tensor_free(&tmp);
		break;
	case LOOM_OP_COPY:
		/* The whole destination leaf, the view overwritten. */
		ref_cpy(&r[0], c->in[1].ne, &tmp);
		ref_cpy(leaf, leaf->ne, out);
		scatter_view(&c->in[1], &tmp, out);
		ref_tensor_free(&tmp);
		break;
	case LOOM_OP_CONT:
		ref_cpy(&r[0], r[0].ne, out);
		break;
	case LOOM_OP_CONCAT:
		ref_concat(&r[0], &r[1], c->ip[0], out);
		break;
	case LOOM_OP_SUM_ROWS:
		ref_sum_rows(&r[0], out);
		break;
	case LOOM_OP_ARGMAX:
		ref_argmax(&r[0], out);
		break;
	case LOOM_OP_TOP_K:
		ref_top_k(&r[0], c->ip[0], out);
		break;
	case LOOM_OP_SOFT_MAX_SINKS:
		ref_soft_max_sinks(&r[0], c->n_in > 2 ? &r[1] : NULL,
				   &r[c->n_in - 1], (float)c->fp[0], out);
		break;
	case LOOM_OP_ROPE_YARN:
		ref_rope_yarn(&r[0], &r[1], c->ip[0], c->ip[1],
			      (float)c->fp[0], (float)c->fp[1], c->ip[2],
			      (float)c->fp[2], (float)c->fp[3],
			      (float)c->fp[4], (float)c->fp[5], out);
		break;
	case LOOM_OP_SWIGLU_OAI:
		ref_swiglu_oai(&r[0], &r[1], (float)c->fp[0],
			       (float)c->fp[1], out);
		break;
	case LOOM_OP_ADD_ID:
		ref_add_id(&r[0], &r[1], &r[2], out);
		break;
	default:
		assert(!"unreachable");
	}
}

static enum loom_type result_type(const struct op_case *c)
{
	switch (c->op) {
	case LOOM_OP_ARGMAX:
	case LOOM_OP_TOP_K:
		return LOOM_TYPE_I32;
	case LOOM_OP_CONT:
	case LOOM_OP_CONCAT:
		return c->in[0].type;
	case LOOM_OP_COPY:
		return c->in[1].type;
	case LOOM_OP_SET_ROWS:
		return c->in[0].type;
	default:
		return LOOM_TYPE_F32;
	}
}

/* A short description of a node for skip messages. */
static char *describe_node(const struct loom_tensor *t)
{
	char s[512] = "";

	str_append(s, sizeof(s), "%s(", loom_op_name(t->op));
	for (int i = 0; i < LOOM_MAX_SRC && t->src[i]; i++)
		str_append(s, sizeof(s), "%s%s[%" PRId64 ",%" PRId64 ",%"
			   PRId64 ",%" PRId64 "]%s", i ? ", " : "",
			   loom_type_name(t->src[i]->type),
			   t->src[i]->ne[0], t->src[i]->ne[1],
			   t->src[i]->ne[2], t->src[i]->ne[3],
			   loom_tensor_is_contiguous(t->src[i]) ? "" :
			   " strided");
	str_append(s, sizeof(s), ") -> %s", loom_type_name(t->type));
	return loom_test_strdup_printf("%s", s);
}

/* Compares out with ref exactly (max_nmse 0): every element equal. */
static void compare_exact(const struct op_case *c, const char *dev,
			  const struct ref_tensor *ref, const double *out)
{
	int64_t n = ref_nelements(ref);
	int64_t wrong = 0;

	for (int64_t i = 0; i < n; i++) {
		if (out[i] == ref->data[i] ||
		    (isnan(out[i]) && isnan(ref->data[i])))
			continue;
		if (wrong++ < 8)
			ops_message("%s %s/%s: element %" PRId64
				    " is %.9g, expected %.9g", dev,
				    case_op_name(c), c->name, i, out[i],
				    ref->data[i]);
	}
	if (!wrong)
		return;
	ops_message("%s %s/%s: %" PRId64 " of %" PRId64
		    " elements differ (exact compare; NMSE %.3g)", dev,
		    case_op_name(c), c->name, wrong, n,
		    loom_test_nmse(ref->data, out, n));
	ops_fail();
}

/* NMSE averages: one wrong element among thousands can hide under it,
 * so no element may be off by more than OUTLIER_SIGMAS times the RMS
 * error that max_nmse allows. */
#define OUTLIER_SIGMAS 10

/* Compares out with ref: exactly when max_nmse is 0, else by NMSE and
 * the largest error.  On a mismatch, says where and fails the test. */
static void compare(const struct op_case *c, const char *dev,
		    const struct ref_tensor *ref, const double *out)
{
	int64_t n = ref_nelements(ref), worst = 0;
	double nmse, sum = 0, max_err = 0, limit;
	int shown = 0;

	if (c->max_nmse == NMSE_EXACT) {
		compare_exact(c, dev, ref, out);
		return;
	}
	nmse = loom_test_nmse(ref->data, out, n);
	for (int64_t i = 0; i < n; i++) {
		double e = fabs(out[i] - ref->data[i]);

		if (isfinite(ref->data[i]))
			sum += ref->data[i] * ref->data[i];
		if (out[i] != ref->data[i] && !(e <= max_err)) {
			max_err = e;
			worst = i;
		}
	}
	limit = OUTLIER_SIGMAS * sqrt(c->max_nmse * sum / n);
	ops_message("%s %s/%s: NMSE %.3g (max %.3g), largest error %.3g "
		    "(max %.3g)", dev, case_op_name(c), c->name, nmse,
		    c->max_nmse, max_err, limit);
	if (nmse <= c->max_nmse && max_err <= limit)
		return;
	for (int64_t i = 0; i < n && shown < 8; i++) {
		double d = fabs(out[i] - ref->data[i]);

		if (isnan(d) || d > 1e-3 * (fabs(ref->data[i]) + 1e-3)) {
			ops_message("  element %" PRId64
				    " is %.9g, expected %.9g", i, out[i],
				    ref->data[i]);
			shown++;
		}
	}
	if (nmse > c->max_nmse)
		ops_message("%s %s/%s: NMSE %.3g exceeds %.3g", dev,
			    case_op_name(c), c->name, nmse, c->max_nmse);
	else
		ops_message("%s %s/%s: element %" PRId64 " is "
			    "%.9g, expected %.9g: off by %.3g, more than "
			    "%d times the RMS error NMSE %.3g allows",
			    dev, case_op_name(c), c->name, worst,
			    out[worst], ref->data[worst], max_err,
			    OUTLIER_SIGMAS, c->max_nmse);
	ops_fail();
}

/* Reports a failed call and fails the test; returns true when st failed. */
static bool check_call(int st, const char *what)
{
	if (st == LOOM_OK)
		return false;
	ops_message("%s: %s: %s", what, loom_strerror(st),
		    loom_error_message());
	ops_fail();
	return true;
}

static void run_case(const struct op_case *c, struct ops_dev *d)
{
	struct loom_tensor *leaf[MAX_INPUTS] = { 0 };
	struct loom_tensor *src[MAX_INPUTS] = { 0 };
	struct ref_tensor rin[MAX_INPUTS] = { 0 };
	struct ref_tensor rleaf[MAX_INPUTS] = { 0 };
	struct ref_tensor ref = { 0 };
	struct loom_test_rng rng;
	loom_buffer_type_t *buft = loom_dev_buffer_type(d->dev);
	loom_buffer_t *wbuf = NULL;
	loom_galloc_t *ga = NULL;
	loom_graph_t *g;
	loom_ctx_t *ctx;
	struct loom_tensor *out;
	double *outv = NULL;
	char *err = NULL;

	if (d->be_error) {
		ops_message("%s: %s", d->name, d->be_error);
		ops_fail();
		return;
	}
	if (!d->be && check_call(loom_dev_init_backend(d->dev, NULL, &d->be),
				 "loom_dev_init_backend")) {
		d->be_error = loom_test_strdup_printf("no backend: %s",
						      loom_error_message());
		return;
	}
	if (check_call(loom_ctx_new(0, &ctx), "loom_ctx_new"))
		return;

	/* Leaves first, alone in the context, placed in the device's
	 * memory; then the views and the op, placed by the allocator. */
	for (int i = 0; i < c->n_in; i++) {
		int64_t ne[4];

		leaf_shape(&c->in[i], ne);
		leaf[i] = loom_tensor_new(ctx, c->in[i].type, 4, ne);
		if (!leaf[i]) {
			ops_message("loom_tensor_new: %s",
				    loom_ctx_error(ctx));
			ops_fail();
			goto out_free_ctx;
		}
		if (c->in[i].name)
			loom_tensor_set_name(leaf[i], c->in[i].name);
		else
			loom_tensor_set_name_fmt(leaf[i], "in%d", i);
		loom_tensor_set_flags(leaf[i], LOOM_TENSOR_INPUT);
	}
	if (check_call(loom_ctx_alloc_tensors(ctx, buft, &wbuf),
		       "loom_ctx_alloc_tensors"))
		goto out_free_ctx;
	for (int i = 0; i < c->n_in; i++)
		src[i] = make_view(ctx, leaf[i], &c->in[i]);
	out = build_op(ctx, c, src);
	if (!out) {
		ops_message("building %s/%s: %s", case_op_name(c),
			    c->name, loom_ctx_error(ctx));
		ops_fail();
		goto out_free_buf;
	}
	loom_tensor_set_name(out, "out");
	loom_tensor_set_flags(out, LOOM_TENSOR_OUTPUT);
	if (check_call(loom_graph_new(ctx, &g), "loom_graph_new") ||
	    check_call(loom_graph_expand(g, out), "loom_graph_expand"))
		goto out_free_buf;

	for (size_t i = 0; i < loom_graph_n_nodes(g); i++) {
		struct loom_tensor *node = loom_graph_node(g, i);
		char *what, *msg;

		if (loom_op_is_view(node->op) ||
		    loom_dev_supports_op(d->dev, node))
			continue;
		what = describe_node(node);
		msg = loom_test_strdup_printf("%s does not support %s", d->name, what);
		ops_skip(msg);
		free(msg);
		free(what);
		goto out_free_buf;
	}

	if (check_call(loom_galloc_new(buft, &ga), "loom_galloc_new") ||
	    check_call(loom_galloc_alloc_graph(ga, g),
		       "loom_galloc_alloc_graph"))
		goto out_free_galloc;

	loom_test_rng_seed(&rng, c->seed);
	for (int i = 0; i < c->n_in; i++) {
		double *v;

		if (check_call(fill_leaf(leaf[i], &c->in[i], &rng),
			       "filling an input"))
			goto out_free_refs;
		v = loom_test_get_doubles(leaf[i], &err);
		if (!v) {
			ops_message("reading input %d: %s", i, err);
			ops_fail();
			goto out_free_refs;
		}
		rleaf[i].data = v;
		memcpy(rleaf[i].ne, leaf[i]->ne, sizeof(rleaf[i].ne));
		view_values(&c->in[i], &rleaf[i], &rin[i]);
	}

	/* NaN in every byte of a result of its own, so that what the op
	 * fails to write shows.  A meta device's node has no memory before
	 * the meta backend computes it (its slices are made then), so there
	 * is nothing to fill. */
	if (c->result_in < 0 && out->buffer && !out->view_src &&
	    loom_dev_type(d->dev) != LOOM_DEV_TYPE_META &&
	    check_call(loom_tensor_memset(out, 0xff, 0,
					  loom_tensor_n_bytes(out)),
		       "loom_tensor_memset"))
		goto out_free_refs;
	if (check_call(loom_backend_graph_compute(d->be, g),
		       "loom_backend_graph_compute") ||
	    check_call(loom_backend_synchronize(d->be),
		       "loom_backend_synchronize"))
		goto out_free_refs;

	reference(c, rin, c->result_in >= 0 ? &rleaf[c->result_in] : NULL,
		  &ref);
	if (out->type != result_type(c)) {
		ops_message("result type %s, expected %s",
			    loom_type_name(out->type),
			    loom_type_name(result_type(c)));
		ops_fail();
		goto out_free_refs;
	}
	if (c->result_in >= 0) {
		outv = loom_test_get_doubles(leaf[c->result_in], &err);
	} else {
		for (int i = 0; i < 4; i++) {
			if (out->ne[i] == ref.ne[i])
				continue;
			ops_message("result shape [%" PRId64 ",%"
				    PRId64 ",%" PRId64
				    ",%" PRId64 "], expected [%"
				    PRId64 ",%" PRId64
				    ",%" PRId64 ",%"
				    PRId64 "]", out->ne[0],
				    out->ne[1], out->ne[2], out->ne[3],
				    ref.ne[0], ref.ne[1], ref.ne[2],
				    ref.ne[3]);
			ops_fail();
			goto out_free_refs;
		}
		outv = loom_test_get_doubles(out, &err);
	}
	if (!outv) {
		ops_message("reading the result: %s", err);
		ops_fail();
		goto out_free_refs;
	}
	compare(c, d->name, &ref, outv);

out_free_refs:
	free(outv);
	free(err);
	ref_tensor_free(&ref);
	for (int i = 0; i < c->n_in; i++) {
		ref_tensor_free(&rin[i]);
		ref_tensor_free(&rleaf[i]);
	}
out_free_galloc:
	if (ga)
		loom_galloc_free(ga);
out_free_buf:
	loom_buffer_free(wbuf);
out_free_ctx:
	loom_ctx_free(ctx);
}

/* ------------------------------------------------------------------------
 * The suite's interface (ops-suite.h).
 */

void ops_set_report(const struct ops_report *r)
{
	report = r;
}

void ops_cases_free(void)
{
	for (size_t i = 0; i < n_cases; i++) {
		free(all_cases[i]->name);
		free(all_cases[i]);
	}
	free(all_cases);
	all_cases = NULL;
	n_cases = cap_cases = 0;
}

size_t ops_case_count(void)
{
	return n_cases;
}

const struct op_case *ops_case_get(size_t i)
{
	return i < n_cases ? all_cases[i] : NULL;
}

const char *ops_case_op(const struct op_case *c)
{
	return case_op_name(c);
}

const char *ops_case_name(const struct op_case *c)
{
	return c->name;
}

enum ops_outcome ops_case_run(const struct op_case *c, struct ops_dev *d)
{
	case_failed = case_skipped = false;
	run_case(c, d);
	return case_failed ? OPS_FAIL : case_skipped ? OPS_SKIP : OPS_PASS;
}

void ops_dev_clear(struct ops_dev *d)
{
	loom_backend_free(d->be);
	free(d->be_error);
	d->be = NULL;
	d->be_error = NULL;
}

bool ops_list_has(const char *list, const char *name)
{
	size_t len = strlen(name);

	if (!list || !*list)
		return true;
	for (const char *p = list; *p;) {
		size_t n;

		p += strspn(p, " ,");
		n = strcspn(p, ",");
		while (n && p[n - 1] == ' ')
			n--;
		if (n == len && !strncmp(p, name, len))
			return true;
		p += strcspn(p, ",");
	}
	return false;
}
