/* test-ops.c - the op-conformance suite: every op of loom.h on every device
 * the registry offers, compared with a plain double-precision reference
 * (ref-ops.c) by NMSE; and the API's answers to a caller's mistakes.
 *
 * Each case is a GLib test named /ops/<device>/<op>/<case>.  Inputs are
 * filled with seeded random values in the device's own buffer type, read
 * back, and the reference is computed from exactly those (rounded or
 * quantized) values.  A device whose supports_op refuses a node of a case
 * skips that case, saying which.
 *
 * Testing a plugin of your own, built out of tree:
 *
 *     LOOM_PLUGIN_PATH=/path/to/your/plugin/dir LOOM_BACKENDS=yours \
 *         tests/test-ops
 *
 * runs the same suite on every device of your plugin.  Narrow it with
 *     LOOM_TEST_DEVICES=yours0,cpu0   devices by name (comma list)
 *     LOOM_TEST_OPS=mul_mat,add       ops by name (as loom_op_name says;
 *                                     "graph" for the composite cases)
 * and the usual GLib options (-p /ops/yours0/mul_mat, --verbose, -l).
 * A failing case prints its NMSE and bound, or the first elements that
 * differ; --verbose prints every case's NMSE.  On a machine with a GPU,
 * LOOM_TEST_DEVICES=cuda0 runs the suite on that device alone;
 * LOOM_CPU_DEVICES=2 LOOM_META_DEVICES=cpu0,cpu1 adds CPU partitions and
 * a meta device over them.
 * Under `make check`, LOOM_TEST_PLUGIN_PATH points at the uninstalled
 * plugins and is searched after LOOM_PLUGIN_PATH.
 */
#include "ref-ops.h"
#include "test-util.h"

#include <loom/loom-backend.h>

#include <glib.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

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
	double fp[4];   /* float parameters (eps, scale, freq base/scale) */
	int result_in;  /* copy, set_rows: the input the op writes, else -1 */
	double max_nmse;
	uint64_t seed;
};

struct test_dev {
	loom_dev_t *dev;
	const char *name;
	loom_backend_t *be;
	char *be_error; /* why the backend could not be made */
};

struct test_data {
	const struct op_case *c;
	struct test_dev *d;
};

static GPtrArray *all_cases;   /* of struct op_case */
static GPtrArray *all_devs;    /* of struct test_dev */
static GHashTable *case_names; /* "op/case" already used */
static GPtrArray *all_tests;   /* of struct test_data, freed at exit even
				* for tests that -p left out */

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
	struct op_case *c = g_new0(struct op_case, 1);

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

	g_assert(c->n_in < MAX_INPUTS);
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

/* Names the case from its inputs (type.shape plus a layout tag) and tag,
 * seeds it from the name, and adds it to the list. */
static void case_add(struct op_case *c, const char *tag)
{
	GString *s = g_string_new(NULL);
	char *key;

	for (int i = 0; i < c->n_in && !c->graph; i++) {
		const struct input *in = &c->in[i];

		g_string_append_printf(s, "%s%s.%" G_GINT64_FORMAT "x%"
				       G_GINT64_FORMAT "x%" G_GINT64_FORMAT
				       "x%" G_GINT64_FORMAT "%s",
				       i ? "_" : "", loom_type_name(in->type),
				       in->ne[0], in->ne[1], in->ne[2],
				       in->ne[3], layout_tags[in->layout]);
	}
	if (tag && *tag)
		g_string_append_printf(s, "%s%s", s->len ? "_" : "", tag);
	key = g_strdup_printf("%s/%s", case_op_name(c), s->str);
	for (int n = 2; g_hash_table_contains(case_names, key); n++) {
		g_free(key);
		key = g_strdup_printf("%s/%s_%d", case_op_name(c), s->str,
				      n);
	}
	c->name = g_strdup(strchr(key, '/') + 1);
	c->seed = g_str_hash(key) * 0x9e3779b97f4a7c15ull + 1;
	g_hash_table_add(case_names, key);
	g_string_free(s, TRUE);
	g_ptr_array_add(all_cases, c);
}

static const enum loom_type float_types[] = {
	LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16,
};

static const enum loom_type quant_types[] = {
	LOOM_TYPE_Q8_0, LOOM_TYPE_Q4_0, LOOM_TYPE_Q4_K, LOOM_TYPE_Q5_K,
	LOOM_TYPE_Q6_K,
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

	for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
		const int64_t *s = shapes[i];

		BIN(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT,
		    LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(bcast); i++) {
		const int64_t *s = bcast[i][0], *t = bcast[i][1];

		BIN(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT,
		    LOOM_TYPE_F32, t[0], t[1], t[2], t[3], LAYOUT_CONT);
	}
	for (size_t i = 1; i < G_N_ELEMENTS(float_types); i++) {
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

	for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
		const int64_t *s = shapes[i];

		UN(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT, 0.25);
	}
	for (size_t i = 1; i < G_N_ELEMENTS(float_types); i++)
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

	for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
		const int64_t *s = shapes[i];

		ROW(LOOM_TYPE_F32, s[0], s[1], s[2], s[3], LAYOUT_CONT);
	}
	for (size_t i = 1; i < G_N_ELEMENTS(float_types); i++)
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
		tag = g_strdup_printf("%s_ndims%d_base%g_fscale%g",          \
				      mode == LOOM_ROPE_NEOX ? "neox" :      \
							       "normal",     \
				      nd, base, fs);                         \
		case_add(c, tag);                                            \
		g_free(tag);                                                 \
	} while (0)

	for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
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
	static const int64_t kmn_q[][3] = {
		{ 32, 1, 1 }, { 64, 17, 1 }, { 96, 33, 5 }, { 256, 64, 17 },
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
	for (size_t i = 0; i < G_N_ELEMENTS(kmn); i++)
		for (size_t t = 0; t < G_N_ELEMENTS(float_types); t++)
			MM(float_types[t], kmn[i][0], kmn[i][1], 1, 1,
			   LAYOUT_CONT, LOOM_TYPE_F32, kmn[i][2], 1, 1,
			   LAYOUT_CONT);
	for (size_t i = 0; i < G_N_ELEMENTS(kmn_q); i++)
		MM(LOOM_TYPE_Q8_0, kmn_q[i][0], kmn_q[i][1], 1, 1,
		   LAYOUT_CONT, LOOM_TYPE_F32, kmn_q[i][2], 1, 1, LAYOUT_CONT);
	/* Every other quantized type: K of one and of several blocks, GEMV
	 * and GEMM; past the CPU plugin's cache block of K (384) and its
	 * GEMV/GEMM switch; batches with a broadcast; F16 input; padded
	 * rows of a. */
	for (size_t t = 1; t < G_N_ELEMENTS(quant_types); t++) {
		enum loom_type qt = quant_types[t];
		int64_t bk = loom_type_block_size(qt);

		for (size_t i = 0; i < G_N_ELEMENTS(kmn_q); i++)
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
	/* The one large product, with K not a multiple of anything. */
	MM(LOOM_TYPE_F32, 513, 1023, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 17, 1,
	   1, LAYOUT_CONT);
	MM(LOOM_TYPE_Q8_0, 512, 255, 1, 1, LAYOUT_CONT, LOOM_TYPE_F32, 17, 1,
	   1, LAYOUT_CONT);
	/* Low-precision inputs. */
	for (size_t i = 0; i < G_N_ELEMENTS(all_a); i++) {
		MM(all_a[i], 64, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_F16, 5, 1, 1,
		   LAYOUT_CONT);
		MM(all_a[i], 64, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_BF16, 5, 1,
		   1, LAYOUT_CONT);
		MM(all_a[i], 64, 33, 1, 1, LAYOUT_CONT, LOOM_TYPE_F16, 1, 1, 1,
		   LAYOUT_CONT);
	}
	/* Batches, and a broadcast over dimensions 2 and 3. */
	for (size_t i = 0; i < G_N_ELEMENTS(all_a); i++) {
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
	for (size_t i = 0; i < G_N_ELEMENTS(all_a); i++) {
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
	for (size_t i = 1; i < G_N_ELEMENTS(all_a); i++)
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

	for (size_t i = 0; i < G_N_ELEMENTS(all_a); i++)
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
	for (size_t i = 0; i < G_N_ELEMENTS(all_a); i++) {
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
	case_in(c, LOOM_TYPE_Q8_0, 96, 33, 8, 1, LAYOUT_CONT);
	case_in(c, LOOM_TYPE_F32, 96, 3, 7, 1, LAYOUT_CONT);
	case_ids(c, FILL_DISTINCT, 8, 3, 7, 1);
	case_add(c, NULL);
	/* Every quantized type, for one token (GEMV) and for enough tokens
	 * for a GEMM. */
	for (size_t t = 0; t < G_N_ELEMENTS(quant_types); t++) {
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
		LOOM_TYPE_Q6_K,
	};
	struct op_case *c;
	struct input *a;

	for (size_t i = 0; i < G_N_ELEMENTS(types); i++) {
		enum loom_type t = types[i];
		int64_t q = loom_type_block_size(t);
		int64_t sizes[] = { q > 1 ? q : 1, q > 1 ? 2 * q : 3,
				    q > 1 ? 3 * q : 17 };

		for (size_t s = 0; s < G_N_ELEMENTS(sizes); s++) {
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

	for (size_t i = 0; i < G_N_ELEMENTS(types); i++) {
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
	for (size_t i = 0; i < G_N_ELEMENTS(float_types); i++)
		for (size_t j = 0; j < G_N_ELEMENTS(dst_types); j++)
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

	for (size_t i = 0; i < G_N_ELEMENTS(float_types); i++) {
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

	for (size_t i = 0; i < G_N_ELEMENTS(shapes); i++) {
		c = case_new(LOOM_OP_ARGMAX, NMSE_EXACT);
		case_in(c, LOOM_TYPE_F32, shapes[i][0], shapes[i][1], 1, 1,
			LAYOUT_CONT);
		case_add(c, NULL);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(float_types); i++) {
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

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct op_case *c = case_new(LOOM_OP_TOP_K, NMSE_EXACT);
		struct input *a;
		char tag[32];

		a = case_in(c, cases[i].type, cases[i].ne[0], cases[i].ne[1],
			    cases[i].ne[2], cases[i].ne[3], cases[i].layout);
		a->fill = cases[i].fill;
		c->ip[0] = cases[i].k;
		g_snprintf(tag, sizeof(tag), "k%d%s", cases[i].k,
			   cases[i].fill == FILL_TIES  ? "_ties" :
			   cases[i].fill == FILL_NAN ? "_nan" : "");
		case_add(c, tag);
	}
}

/* Shapes with many rows, so that every thread of a device has several
 * and the last has a remainder. */
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

static void make_cases(void)
{
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
	perm = g_new(int32_t, in->range);
	for (int64_t i = 0; i < in->range; i++)
		perm[i] = (int32_t)i;
	for (int64_t i = 0; i < n; i++) {
		int64_t j = i + loom_test_rng_int(rng, in->range - i);
		int32_t tmp = perm[i];

		perm[i] = perm[j];
		perm[j] = tmp;
		p[i] = perm[i];
	}
	g_free(perm);
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
		ids = g_new(int32_t, n);
		for (int64_t r = 0; r < n / row; r++)
			fill_ids_row(ids + r * row, row, in, rng);
		st = loom_test_set_i32(leaf, ids);
		g_free(ids);
		return st;
	}
	v = g_new(float, n);
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
	g_free(v);
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

	for (size_t i = 0; i < G_N_ELEMENTS(wtypes); i++) {
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
		g_snprintf(tag, sizeof(tag), "ffn_%s", loom_type_name(t));
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
			g_snprintf(tag, sizeof(tag), "attention_%s_tok%d",
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
	default:
		g_assert_not_reached();
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
	GString *s = g_string_new(loom_op_name(t->op));

	g_string_append(s, "(");
	for (int i = 0; i < LOOM_MAX_SRC && t->src[i]; i++)
		g_string_append_printf(s, "%s%s[%" G_GINT64_FORMAT ",%"
				       G_GINT64_FORMAT ",%" G_GINT64_FORMAT
				       ",%" G_GINT64_FORMAT "]%s",
				       i ? ", " : "",
				       loom_type_name(t->src[i]->type),
				       t->src[i]->ne[0], t->src[i]->ne[1],
				       t->src[i]->ne[2], t->src[i]->ne[3],
				       loom_tensor_is_contiguous(t->src[i]) ? "" :
				       " strided");
	g_string_append_printf(s, ") -> %s", loom_type_name(t->type));
	return g_string_free(s, FALSE);
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
			g_test_message("%s %s/%s: element %" G_GINT64_FORMAT
				       " is %.9g, expected %.9g", dev,
				       case_op_name(c), c->name, i, out[i],
				       ref->data[i]);
	}
	if (!wrong)
		return;
	g_test_message("%s %s/%s: %" G_GINT64_FORMAT " of %" G_GINT64_FORMAT
		       " elements differ (exact compare; NMSE %.3g)", dev,
		       case_op_name(c), c->name, wrong, n,
		       loom_test_nmse(ref->data, out, n));
	g_test_fail();
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
	g_test_message("%s %s/%s: NMSE %.3g (max %.3g), largest error %.3g "
		       "(max %.3g)", dev, case_op_name(c), c->name, nmse,
		       c->max_nmse, max_err, limit);
	if (nmse <= c->max_nmse && max_err <= limit)
		return;
	for (int64_t i = 0; i < n && shown < 8; i++) {
		double d = fabs(out[i] - ref->data[i]);

		if (isnan(d) || d > 1e-3 * (fabs(ref->data[i]) + 1e-3)) {
			g_test_message("  element %" G_GINT64_FORMAT
				       " is %.9g, expected %.9g", i, out[i],
				       ref->data[i]);
			shown++;
		}
	}
	if (nmse > c->max_nmse)
		g_test_message("%s %s/%s: NMSE %.3g exceeds %.3g", dev,
			       case_op_name(c), c->name, nmse, c->max_nmse);
	else
		g_test_message("%s %s/%s: element %" G_GINT64_FORMAT " is "
			       "%.9g, expected %.9g: off by %.3g, more than "
			       "%d times the RMS error NMSE %.3g allows",
			       dev, case_op_name(c), c->name, worst,
			       out[worst], ref->data[worst], max_err,
			       OUTLIER_SIGMAS, c->max_nmse);
	g_test_fail();
}

/* Reports a failed call and fails the test; returns true when st failed. */
static bool check_call(int st, const char *what)
{
	if (st == LOOM_OK)
		return false;
	g_test_message("%s: %s: %s", what, loom_strerror(st),
		       loom_error_message());
	g_test_fail();
	return true;
}

static void run_case(gconstpointer data)
{
	const struct test_data *td = data;
	const struct op_case *c = td->c;
	struct test_dev *d = td->d;
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
		g_test_message("%s: %s", d->name, d->be_error);
		g_test_fail();
		return;
	}
	if (!d->be && check_call(loom_dev_init_backend(d->dev, NULL, &d->be),
				 "loom_dev_init_backend")) {
		d->be_error = g_strdup_printf("no backend: %s",
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
			g_test_message("loom_tensor_new: %s",
				       loom_ctx_error(ctx));
			g_test_fail();
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
		g_test_message("building %s/%s: %s", case_op_name(c),
			       c->name, loom_ctx_error(ctx));
		g_test_fail();
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
		msg = g_strdup_printf("%s does not support %s", d->name, what);
		g_test_skip(msg);
		g_free(msg);
		g_free(what);
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
			g_test_message("reading input %d: %s", i, err);
			g_test_fail();
			goto out_free_refs;
		}
		rleaf[i].data = v;
		memcpy(rleaf[i].ne, leaf[i]->ne, sizeof(rleaf[i].ne));
		view_values(&c->in[i], &rleaf[i], &rin[i]);
	}

	/* NaN in every byte of a result of its own, so that what the op
	 * fails to write shows. */
	if (c->result_in < 0 && out->buffer && !out->view_src &&
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
		g_test_message("result type %s, expected %s",
			       loom_type_name(out->type),
			       loom_type_name(result_type(c)));
		g_test_fail();
		goto out_free_refs;
	}
	if (c->result_in >= 0) {
		outv = loom_test_get_doubles(leaf[c->result_in], &err);
	} else {
		for (int i = 0; i < 4; i++) {
			if (out->ne[i] == ref.ne[i])
				continue;
			g_test_message("result shape [%" G_GINT64_FORMAT ",%"
				       G_GINT64_FORMAT ",%" G_GINT64_FORMAT
				       ",%" G_GINT64_FORMAT "], expected [%"
				       G_GINT64_FORMAT ",%" G_GINT64_FORMAT
				       ",%" G_GINT64_FORMAT ",%"
				       G_GINT64_FORMAT "]", out->ne[0],
				       out->ne[1], out->ne[2], out->ne[3],
				       ref.ne[0], ref.ne[1], ref.ne[2],
				       ref.ne[3]);
			g_test_fail();
			goto out_free_refs;
		}
		outv = loom_test_get_doubles(out, &err);
	}
	if (!outv) {
		g_test_message("reading the result: %s", err);
		g_test_fail();
		goto out_free_refs;
	}
	compare(c, d->name, &ref, outv);

out_free_refs:
	g_free(outv);
	g_free(err);
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
 * Caller errors through the public API.  Each runs in a subprocess, so a
 * crash or abort fails that test and not the suite.
 */

/* Says why a check failed: on stderr in a subprocess (its stdout is not
 * shown), else as a test message. */
static void G_GNUC_PRINTF(1, 2) note(const char *fmt, ...)
{
	va_list ap;
	char *msg;

	va_start(ap, fmt);
	msg = g_strdup_vprintf(fmt, ap);
	va_end(ap);
	if (g_test_subprocess())
		g_printerr("%s\n", msg);
	else
		g_test_message("%s", msg);
	g_free(msg);
}

/* Expects expr to give NULL with a message on ctx and on the thread. */
#define EXPECT_NULL(ctx, expr)                                               \
	do {                                                                 \
		struct loom_tensor *r_;                                      \
									     \
		loom_ctx_clear_error(ctx);                                   \
		r_ = (expr);                                                 \
		if (r_) {                                                    \
			note("%s: gave a tensor, expected NULL", #expr);     \
			g_test_fail();                                       \
		} else if (!*loom_ctx_error(ctx) || !*loom_error_message()) {   \
			note("%s: NULL without a message", #expr);           \
			g_test_fail();                                       \
		}                                                            \
	} while (0)

/* Expects call to return the status want (or any error if want is 1). */
#define EXPECT_STATUS(call, want)                                            \
	do {                                                                 \
		int st_ = (call);                                            \
									     \
		if ((want) == 1 ? st_ >= 0 : st_ != (want)) {                \
			note("%s: gave %d (%s), expected %s", #call, st_,    \
			     loom_strerror(st_),                             \
			     (want) == 1 ? "an error" : loom_strerror(want)); \
			g_test_fail();                                       \
		} else if ((want) != LOOM_OK && !*loom_error_message()) {       \
			note("%s: error without a message", #call);          \
			g_test_fail();                                       \
		}                                                            \
	} while (0)

#define ANY_ERROR 1

static void errors_shapes(void)
{
	struct loom_tensor *f4x3, *f3x3, *f4x1, *i4, *q32, *f4x3x2, *t;
	struct loom_tensor *pos3, *pos2, *f32x2, *q32x2, *mask, *ids;
	int64_t bad_ne[LOOM_MAX_DIMS + 1] = { -1, 3, 1, 1, 1 };
	loom_ctx_t *ctx;

	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	f4x3 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 3);
	f3x3 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 3, 3);
	f4x1 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 4, 1);
	f4x3x2 = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 4, 3, 2);
	i4 = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 4);
	q32 = loom_tensor_new_2d(ctx, LOOM_TYPE_Q8_0, 32, 2);
	f32x2 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 32, 2);
	q32x2 = loom_tensor_new_3d(ctx, LOOM_TYPE_Q8_0, 32, 2, 4);
	pos3 = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 3);
	pos2 = loom_tensor_new_1d(ctx, LOOM_TYPE_I32, 2);
	mask = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 5, 3);
	ids = loom_tensor_new_2d(ctx, LOOM_TYPE_I32, 2, 3);
	g_assert_nonnull(f4x3);
	g_assert_nonnull(f3x3);
	g_assert_nonnull(f4x1);
	g_assert_nonnull(f4x3x2);
	g_assert_nonnull(i4);
	g_assert_nonnull(q32);
	g_assert_nonnull(f32x2);
	g_assert_nonnull(q32x2);
	g_assert_nonnull(pos3);
	g_assert_nonnull(pos2);
	g_assert_nonnull(mask);
	g_assert_nonnull(ids);

	/* New tensors. */
	EXPECT_NULL(ctx, loom_tensor_new(ctx, LOOM_TYPE_F32, 2, bad_ne));
	bad_ne[0] = 2;
	EXPECT_NULL(ctx, loom_tensor_new(ctx, LOOM_TYPE_F32, 5, bad_ne));
	EXPECT_NULL(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, 33));
	EXPECT_NULL(ctx, loom_tensor_new_1d(ctx, LOOM_TYPE_COUNT, 4));
	/* Binary ops: b must repeat over a; NULL sources; types. */
	EXPECT_NULL(ctx, loom_add(ctx, f4x3, f3x3));
	EXPECT_NULL(ctx, loom_mul(ctx, f4x1, f4x3));
	EXPECT_NULL(ctx, loom_sub(ctx, f4x3, NULL));
	EXPECT_NULL(ctx, loom_div(ctx, NULL, f4x3));
	EXPECT_NULL(ctx, loom_add(ctx, i4, i4));
	EXPECT_NULL(ctx, loom_silu(ctx, NULL));
	EXPECT_NULL(ctx, loom_scale(ctx, i4, 2.0f));
	EXPECT_NULL(ctx, loom_rms_norm(ctx, q32, 1e-6f));
	/* mul_mat: K must agree, b is not quantized, batches repeat. */
	EXPECT_NULL(ctx, loom_mul_mat(ctx, f4x3, f32x2));
	EXPECT_NULL(ctx, loom_mul_mat(ctx, q32, q32));
	EXPECT_NULL(ctx, loom_mul_mat(ctx, f4x3x2,
				      loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							 4, 3, 3)));
	EXPECT_NULL(ctx, loom_mul_mat(ctx, f4x3, i4));
	/* mul_mat_id: ids I32 [n_used, n_tokens]; B1 is 1 or n_used. */
	EXPECT_NULL(ctx, loom_mul_mat_id(ctx, q32x2,
					 loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							    32, 1, 3),
					 f3x3));
	EXPECT_NULL(ctx, loom_mul_mat_id(ctx, q32x2,
					 loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							    32, 3, 3),
					 ids));
	EXPECT_NULL(ctx, loom_mul_mat_id(ctx, q32x2,
					 loom_tensor_new_3d(ctx, LOOM_TYPE_F32,
							    16, 1, 3),
					 ids));
	/* Rows. */
	EXPECT_NULL(ctx, loom_get_rows(ctx, f4x3, f4x1));
	EXPECT_NULL(ctx, loom_set_rows(ctx, f4x3, f3x3, pos3));
	EXPECT_NULL(ctx, loom_set_rows(ctx, f4x3, f4x3, f4x1));
	/* rope: n_dims even and <= head_dim; I32 positions, one a token. */
	t = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, 8, 2, 3);
	EXPECT_NULL(ctx, loom_rope(ctx, t, pos3, 7, LOOM_ROPE_NORMAL, 1e4f,
				   1.0f));
	EXPECT_NULL(ctx, loom_rope(ctx, t, pos3, 10, LOOM_ROPE_NEOX, 1e4f,
				   1.0f));
	EXPECT_NULL(ctx, loom_rope(ctx, t, pos2, 8, LOOM_ROPE_NORMAL, 1e4f,
				   1.0f));
	EXPECT_NULL(ctx, loom_rope(ctx, t, f3x3, 8, LOOM_ROPE_NORMAL, 1e4f,
				   1.0f));
	/* soft_max: the mask has a's ne0 and at least its rows. */
	EXPECT_NULL(ctx, loom_soft_max(ctx, f4x3, mask, 1.0f));
	EXPECT_NULL(ctx, loom_soft_max(ctx, f4x3, f4x1, 1.0f));
	EXPECT_NULL(ctx, loom_soft_max(ctx, f4x3,
				       loom_tensor_new_2d(ctx, LOOM_TYPE_I32,
							  4, 3), 1.0f));
	/* concat, copy, top_k, argmax. */
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3, f3x3, 1));
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3, f4x3, 4));
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3, f4x3, -1));
	EXPECT_NULL(ctx, loom_concat(ctx, f4x3,
				     loom_tensor_new_2d(ctx, LOOM_TYPE_F16,
							4, 3), 0));
	EXPECT_NULL(ctx, loom_copy(ctx, f4x3, f3x3));
	EXPECT_NULL(ctx, loom_copy(ctx, f4x3, NULL));
	EXPECT_NULL(ctx, loom_top_k(ctx, f4x3, 5));
	EXPECT_NULL(ctx, loom_top_k(ctx, f4x3, -1));
	EXPECT_NULL(ctx, loom_argmax(ctx, f4x3x2));
	/* Views. */
	EXPECT_NULL(ctx, loom_reshape_2d(ctx, f4x3, 5, 2));
	EXPECT_NULL(ctx, loom_reshape_1d(ctx, loom_transpose(ctx, f4x3), 12));
	EXPECT_NULL(ctx, loom_view_1d(ctx, f4x3, 13, 0));
	EXPECT_NULL(ctx, loom_view_1d(ctx, f4x3, 4, 40));
	EXPECT_NULL(ctx, loom_view_2d(ctx, f4x3, 4, 4, 16, 0));
	EXPECT_NULL(ctx, loom_permute(ctx, f4x3, 0, 0, 1, 2));
	EXPECT_NULL(ctx, loom_permute(ctx, f4x3, 0, 1, 2, 4));
	EXPECT_NULL(ctx, loom_transpose(ctx, NULL));
	loom_ctx_free(ctx);
}

/* A device for the data tests: the first CPU device, else the first. */
static loom_dev_t *data_device(void)
{
	loom_dev_t *dev = loom_dev_by_type(LOOM_DEV_TYPE_CPU);

	return dev ? dev : loom_dev_count() ? loom_dev_get(0) : NULL;
}

static void errors_data(void)
{
	loom_dev_t *dev = data_device();
	loom_buffer_type_t *buft;
	loom_buffer_t *buf = NULL, *buf2 = NULL;
	struct loom_tensor *t, *u, *q;
	loom_ctx_t *ctx;
	uint8_t host[256] = { 0 };
	size_t align;

	if (!dev) {
		g_test_skip("no device");
		return;
	}
	buft = loom_dev_buffer_type(dev);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	t = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);      /* 64 bytes */
	q = loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, 64);     /* 68 bytes */
	g_assert_nonnull(t);
	g_assert_nonnull(q);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, buft, &buf), ==,
			LOOM_OK);
	g_assert_nonnull(buf);
	/* Nothing left to place: no buffer, no error. */
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, buft, &buf2), ==,
			LOOM_OK);
	g_assert_null(buf2);
	u = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);      /* never placed */
	g_assert_nonnull(u);

	EXPECT_STATUS(loom_tensor_set(t, host, 0, 64), LOOM_OK);
	EXPECT_STATUS(loom_tensor_get(t, host, 0, 64), LOOM_OK);
	EXPECT_STATUS(loom_tensor_set(t, host, 60, 8), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set(t, host, 0, 65), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set(t, host, 64, 1), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get(t, host, 1, 64), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get(t, host, SIZE_MAX - 2, 4),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set(t, host, 8, SIZE_MAX - 4),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_memset(t, 0, 32, 33), LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get(q, host, 0, 69), LOOM_E_RANGE);
	/* 2D: rows past the end, and rows that overlap. */
	EXPECT_STATUS(loom_tensor_set_2d(t, host, 0, 16, 4, 16, 16), LOOM_OK);
	EXPECT_STATUS(loom_tensor_set_2d(t, host, 0, 16, 3, 32, 16),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get_2d(t, host, 8, 16, 4, 16, 16),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_get_2d(t, host, 0, 16, 2, SIZE_MAX / 2, 16),
		      LOOM_E_RANGE);
	EXPECT_STATUS(loom_tensor_set_2d(t, host, 0, 16, 2, 8, 16),
		      ANY_ERROR);
	/* Unplaced tensors. */
	EXPECT_STATUS(loom_tensor_set(u, host, 0, 4), LOOM_E_STATE);
	EXPECT_STATUS(loom_tensor_get(u, host, 0, 4), LOOM_E_STATE);
	EXPECT_STATUS(loom_tensor_get_2d(u, host, 0, 4, 2, 4, 4),
		      LOOM_E_STATE);
	/* Placing at a misaligned offset, past the end, or twice. */
	align = loom_buffer_type_alignment(buft);
	if (align > 1)
		EXPECT_STATUS(loom_tensor_place(u, buf, 1), LOOM_E_ALIGN);
	EXPECT_STATUS(loom_tensor_place(u, buf, loom_buffer_size(buf) +
					align), ANY_ERROR);

	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

/* Computing a graph whose tensors have no memory is a caller's mistake
 * too: an error, not a crash. */
static void errors_compute(void)
{
	loom_dev_t *dev = data_device();
	loom_backend_t *be;
	struct loom_tensor *a, *b, *r;
	loom_graph_t *g;
	loom_ctx_t *ctx;

	if (!dev) {
		g_test_skip("no device");
		return;
	}
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	a = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);
	b = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, 16);
	r = loom_add(ctx, a, b);
	g_assert_nonnull(r);
	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, r), ==, LOOM_OK);
	EXPECT_STATUS(loom_backend_graph_compute(be, g), ANY_ERROR);
	EXPECT_STATUS(loom_graph_expand(g, NULL), ANY_ERROR);
	EXPECT_STATUS(loom_backend_synchronize(be), LOOM_OK);
	loom_ctx_free(ctx);
	loom_backend_free(be);
}

static void errors_misc(void)
{
	enum loom_type type;

	g_assert_cmpstr(loom_strerror(LOOM_E_RANGE), !=, "");
	g_assert_cmpstr(loom_strerror(12345), !=, "");
	EXPECT_STATUS(loom_type_from_name("no-such-type", &type),
		      LOOM_E_NOT_FOUND);
	g_assert_null(loom_dev_by_name("no-such-device0"));
	{
		float src[33] = { 0 };
		struct loom_block_q8_0 dst[2];

		EXPECT_STATUS(loom_type_convert(LOOM_TYPE_F32, src, LOOM_TYPE_Q8_0,
					   dst, 33), ANY_ERROR);
		EXPECT_STATUS(loom_type_convert(LOOM_TYPE_F32, src, LOOM_TYPE_I32,
					   dst, 4), LOOM_E_UNSUPPORTED);
	}
}

/* Test functions that run fn in a subprocess of the test program. */
#define IN_SUBPROCESS(fn, needs_device)                                      \
	static void test_##fn(void)                                          \
	{                                                                    \
		if (g_test_subprocess()) {                                   \
			fn();                                                \
			return;                                              \
		}                                                            \
		if ((needs_device) && !data_device()) {                      \
			g_test_skip("no device");                            \
			return;                                              \
		}                                                            \
		g_test_trap_subprocess(NULL, 0,                              \
				       G_TEST_SUBPROCESS_INHERIT_STDERR);    \
		if (!g_test_trap_has_passed()) {                             \
			g_test_message("%s failed or crashed (its reasons "  \
				       "are on stderr)", #fn);               \
			g_test_fail();                                       \
		}                                                            \
	}

IN_SUBPROCESS(errors_shapes, false)
IN_SUBPROCESS(errors_data, true)
IN_SUBPROCESS(errors_compute, true)
IN_SUBPROCESS(errors_misc, false)

/* ------------------------------------------------------------------------
 * The reference and the helpers checked on values worked out by hand, so
 * that a device and the reference cannot agree on a misreading.
 */

static void reference_helpers(void)
{
	const double ref[3] = { 1, -2, 0 }, out[3] = { 1, -2, 0.5 };

	g_assert_cmpfloat(loom_test_fp16_to_double(0x3c00), ==, 1.0);
	g_assert_cmpfloat(loom_test_fp16_to_double(0xc000), ==, -2.0);
	g_assert_cmpfloat(loom_test_fp16_to_double(0x0001), ==, ldexp(1, -24));
	g_assert_cmpfloat(loom_test_fp16_to_double(0x7bff), ==, 65504.0);
	g_assert_true(isinf(loom_test_fp16_to_double(0xfc00)));
	g_assert_cmpfloat(loom_test_bf16_to_double(0x3f80), ==, 1.0);
	g_assert_cmpfloat(loom_test_bf16_to_double(0xc040), ==, -3.0);
	g_assert_cmpfloat(loom_test_nmse(ref, ref, 3), ==, 0.0);
	g_assert_cmpfloat(fabs(loom_test_nmse(ref, out, 3) - 0.05), <, 1e-15);
}

static void reference_ops(void)
{
	const int64_t ne_rope[4] = { 4, 1, 2, 1 }, ne_pos[4] = { 2, 1, 1, 1 };
	const int64_t ne_a[4] = { 2, 2, 1, 1 }, ne_b[4] = { 2, 1, 2, 1 };
	const int64_t ne_row[4] = { 5, 1, 1, 1 }, ne_ids[4] = { 2, 1, 1, 1 };
	struct ref_tensor x, pos, r, a, b, ids;

	/* rope at position 1, n_dims 4: pair 0 turns by 1 radian, pair 1
	 * by 1/base^(1/2).  Normal pairs (x0, x1); neox pairs (x0, x2). */
	ref_tensor_init(&x, ne_rope);
	ref_tensor_init(&pos, ne_pos);
	for (int t = 0; t < 2; t++)
		*ref_at(&x, 0, 0, t, 0) = 1;
	pos.data[0] = 0;
	pos.data[1] = 1;
	ref_rope(&x, &pos, 4, LOOM_ROPE_NORMAL, 100, 1, &r);
	g_assert_cmpfloat(*ref_at(&r, 0, 0, 0, 0), ==, 1);
	g_assert_cmpfloat(*ref_at(&r, 1, 0, 0, 0), ==, 0);
	g_assert_cmpfloat(fabs(*ref_at(&r, 0, 0, 1, 0) - cos(1)), <, 1e-15);
	g_assert_cmpfloat(fabs(*ref_at(&r, 1, 0, 1, 0) - sin(1)), <, 1e-15);
	ref_tensor_free(&r);
	*ref_at(&x, 0, 0, 1, 0) = 0;
	*ref_at(&x, 3, 0, 1, 0) = 1;
	ref_rope(&x, &pos, 4, LOOM_ROPE_NEOX, 100, 0.5, &r);
	/* (x1, x3) = (0, 1) turns by 0.5 / 10. */
	g_assert_cmpfloat(fabs(*ref_at(&r, 1, 0, 1, 0) + sin(0.05)), <, 1e-15);
	g_assert_cmpfloat(fabs(*ref_at(&r, 3, 0, 1, 0) - cos(0.05)), <, 1e-15);
	ref_tensor_free(&r);
	ref_tensor_free(&x);
	ref_tensor_free(&pos);

	/* mul_mat: a is one 2x2 matrix per batch, a2 = 1 broadcasts. */
	ref_tensor_init(&a, ne_a);
	ref_tensor_init(&b, ne_b);
	a.data[0] = 1;
	a.data[1] = 2;
	a.data[2] = 3;
	a.data[3] = 4;
	b.data[0] = 1;
	b.data[1] = 1;
	b.data[2] = 1;
	b.data[3] = -1;
	ref_mul_mat(&a, &b, &r);
	g_assert_cmpint(r.ne[0], ==, 2);
	g_assert_cmpint(r.ne[2], ==, 2);
	g_assert_cmpfloat(r.data[0], ==, 3);
	g_assert_cmpfloat(r.data[1], ==, 7);
	g_assert_cmpfloat(r.data[2], ==, -1);
	g_assert_cmpfloat(r.data[3], ==, -1);
	ref_tensor_free(&r);
	ref_tensor_free(&b);

	/* soft_max with a mask: -inf gives 0, the rest sums to 1. */
	ref_tensor_init(&b, ne_a);
	b.data[1] = -INFINITY;
	b.data[2] = -INFINITY;
	ref_soft_max(&a, &b, 2, &r);
	g_assert_cmpfloat(r.data[0], ==, 1);
	g_assert_cmpfloat(r.data[1], ==, 0);
	g_assert_cmpfloat(r.data[2], ==, 0);
	g_assert_cmpfloat(r.data[3], ==, 1);
	ref_tensor_free(&r);
	ref_tensor_free(&b);
	ref_tensor_free(&a);

	/* top_k and argmax on ties: lower index first. */
	ref_tensor_init(&x, ne_row);
	x.data[0] = 1;
	x.data[1] = 3;
	x.data[2] = 1;
	x.data[3] = 3;
	x.data[4] = 2;
	ref_top_k(&x, 5, &r);
	g_assert_cmpfloat(r.data[0], ==, 1);
	g_assert_cmpfloat(r.data[1], ==, 3);
	g_assert_cmpfloat(r.data[2], ==, 4);
	g_assert_cmpfloat(r.data[3], ==, 0);
	g_assert_cmpfloat(r.data[4], ==, 2);
	ref_tensor_free(&r);
	ref_argmax(&x, &r);
	g_assert_cmpfloat(r.data[0], ==, 1);
	ref_tensor_free(&r);

	/* get_rows picks the rows ids name. */
	ref_tensor_init(&ids, ne_ids);
	ids.data[0] = 4;
	ids.data[1] = 1;
	{
		const int64_t ne_col[4] = { 1, 5, 1, 1 };
		struct ref_tensor col = { { 0 }, NULL };

		ref_cpy(&x, ne_col, &col);
		ref_get_rows(&col, &ids, &r);
		g_assert_cmpfloat(r.data[0], ==, 2);
		g_assert_cmpfloat(r.data[1], ==, 3);
		ref_tensor_free(&r);
		ref_tensor_free(&col);
	}
	ref_tensor_free(&ids);
	ref_tensor_free(&x);
}

/* loom_test_get_doubles on a device's memory: types, and a strided view. */
static void reference_get_doubles(void)
{
	loom_dev_t *dev = data_device();
	const float v[6] = { 0.5f, -1, 2, 3.25f, -4, 0 };
	struct loom_tensor *f32, *f16, *q, *t;
	loom_buffer_t *buf;
	loom_ctx_t *ctx;
	float qv[64];
	double *d;
	char *err = NULL;

	if (!dev) {
		g_test_skip("no device");
		return;
	}
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	f32 = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, 3, 2);
	f16 = loom_tensor_new_2d(ctx, LOOM_TYPE_F16, 3, 2);
	q = loom_tensor_new_1d(ctx, LOOM_TYPE_Q8_0, 64);
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	g_assert_cmpint(loom_test_set_f32(f32, v), ==, LOOM_OK);
	g_assert_cmpint(loom_test_set_f32(f16, v), ==, LOOM_OK);
	/* With a block maximum of 127/32 the scale is 1/32, and multiples of
	 * 1/32 quantize exactly. */
	for (int i = 0; i < 64; i++)
		qv[i] = (float)((i * 37) % 255 - 127) / 32;
	qv[5] = 127.0f / 32;
	qv[40] = -127.0f / 32;
	g_assert_cmpint(loom_test_set_f32(q, qv), ==, LOOM_OK);

	t = loom_transpose(ctx, f32);
	g_assert_nonnull(t);
	g_assert_nonnull(t->data);
	d = loom_test_get_doubles(t, &err);
	g_assert_nonnull(d);
	/* t[i0, i1] = f32[i1, i0]: 0.5, 3.25, -1, -4, 2, 0. */
	g_assert_cmpfloat(d[0], ==, 0.5);
	g_assert_cmpfloat(d[1], ==, 3.25);
	g_assert_cmpfloat(d[2], ==, -1);
	g_assert_cmpfloat(d[5], ==, 0);
	g_free(d);
	d = loom_test_get_doubles(f16, &err);
	g_assert_nonnull(d);
	for (int i = 0; i < 6; i++)
		g_assert_cmpfloat(d[i], ==, v[i]);
	g_free(d);
	d = loom_test_get_doubles(q, &err);
	g_assert_nonnull(d);
	for (int i = 0; i < 64; i++)
		g_assert_cmpfloat(d[i], ==, qv[i]);
	g_free(d);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
}

IN_SUBPROCESS(reference_get_doubles, true)

/* ------------------------------------------------------------------------
 * Registration.
 */

/* True when name is in the comma list of environment variable var, or
 * the variable is unset or empty. */
static bool selected(const char *var, const char *name)
{
	const char *list = g_getenv(var);
	char **items;
	bool found = false;

	if (!list || !*list)
		return true;
	items = g_strsplit(list, ",", -1);
	for (char **p = items; *p; p++)
		if (!strcmp(g_strstrip(*p), name))
			found = true;
	g_strfreev(items);
	return found;
}

static void skip_with(gconstpointer reason)
{
	g_test_skip(reason);
}

static void fail_load(gconstpointer msg)
{
	g_test_message("%s", (const char *)msg);
	g_test_fail();
}

static void free_case(gpointer p)
{
	struct op_case *c = p;

	g_free(c->name);
	g_free(c);
}

static void free_dev(gpointer p)
{
	struct test_dev *d = p;

	loom_backend_free(d->be);
	g_free(d->be_error);
	g_free(d);
}

int main(int argc, char **argv)
{
	static char load_error[512];
	char **args = g_new0(char *, argc + 2);
	int st, ret;

	/* One failing case must not hide the others. */
	for (int i = 0; i < argc; i++)
		args[i] = argv[i];
	args[argc++] = (char *)"--keep-going";
	argv = args;
	g_test_init(&argc, &argv, NULL);
	all_cases = g_ptr_array_new_with_free_func(free_case);
	all_devs = g_ptr_array_new_with_free_func(free_dev);
	all_tests = g_ptr_array_new_with_free_func(g_free);
	case_names = g_hash_table_new_full(g_str_hash, g_str_equal, g_free,
					   NULL);

	st = loom_test_load_plugins();
	if (st != LOOM_OK) {
		g_snprintf(load_error, sizeof(load_error),
			   "loom_load_all: %s: %s", loom_strerror(st),
			   loom_error_message());
		if (g_getenv("LOOM_BACKENDS"))
			g_test_add_data_func("/ops/load", load_error,
					     fail_load);
		else
			g_test_message("%s", load_error);
	}

	g_test_add_func("/ops/reference/helpers", reference_helpers);
	g_test_add_func("/ops/reference/ops", reference_ops);
	g_test_add_func("/ops/reference/get-doubles",
			test_reference_get_doubles);
	g_test_add_func("/ops/errors/shapes", test_errors_shapes);
	g_test_add_func("/ops/errors/data", test_errors_data);
	g_test_add_func("/ops/errors/compute", test_errors_compute);
	g_test_add_func("/ops/errors/misc", test_errors_misc);

	make_cases();
	for (size_t i = 0; i < loom_dev_count(); i++) {
		loom_dev_t *dev = loom_dev_get(i);
		struct test_dev *d;

		if (!selected("LOOM_TEST_DEVICES", loom_dev_name(dev)))
			continue;
		d = g_new0(struct test_dev, 1);
		d->dev = dev;
		d->name = loom_dev_name(dev);
		g_ptr_array_add(all_devs, d);
	}
	if (!all_devs->len)
		g_test_add_data_func("/ops/no-device",
				     "no device selected (see "
				     "LOOM_PLUGIN_PATH, LOOM_BACKENDS, "
				     "LOOM_TEST_DEVICES)",
				     skip_with);
	for (guint i = 0; i < all_devs->len; i++) {
		struct test_dev *d = all_devs->pdata[i];

		for (guint j = 0; j < all_cases->len; j++) {
			struct op_case *c = all_cases->pdata[j];
			struct test_data *td;
			char *path;

			if (!selected("LOOM_TEST_OPS", case_op_name(c)))
				continue;
			td = g_new0(struct test_data, 1);
			td->c = c;
			td->d = d;
			g_ptr_array_add(all_tests, td);
			path = g_strdup_printf("/ops/%s/%s/%s", d->name,
					       case_op_name(c), c->name);
			g_test_add_data_func(path, td, run_case);
			g_free(path);
		}
	}

	ret = g_test_run();

	g_ptr_array_free(all_tests, TRUE);
	g_ptr_array_free(all_devs, TRUE);
	g_ptr_array_free(all_cases, TRUE);
	g_hash_table_destroy(case_names);
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	g_free(args);
	return ret;
}
