/* SPDX-License-Identifier: MIT */
/* ops-suite-int.h - the op suite's insides, shared by the files of
 * libopsuite: what a case is, building and registering cases
 * (ops-suite.c), the case tables (ops-cases.c, ops-cases-oai.c,
 * ops-composites.c) and running a case (ops-run.c).  Not installed and
 * not for the suite's drivers, which use ops-suite.h.
 */
#ifndef LOOM_TEST_OPS_SUITE_INT_H
#define LOOM_TEST_OPS_SUITE_INT_H

#include "ops-suite.h"
#include "ref-ops.h"

#include <loom/loom-backend.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* ops-suite.c: the cases made so far, messages to the driver's report,
 * and building a case. */
extern size_t n_cases;
struct op_case *case_new(enum loom_op op, double max_nmse);
struct input *case_in(struct op_case *c, enum loom_type type,
		       int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
		       enum layout layout);
struct input *case_ids(struct op_case *c, enum fill fill, int64_t range,
			int64_t ne0, int64_t ne1, int64_t ne2);
void case_add(struct op_case *c, const char *tag);
const char *case_op_name(const struct op_case *c);
void __attribute__((format(printf, 1, 2)))
ops_message(const char *fmt, ...);
void ops_fail(void);
void ops_skip(const char *why);
void __attribute__((format(printf, 3, 4)))
str_append(char *buf, size_t size, const char *fmt, ...);

/* ops-cases.c: the tables of the ops of loom.h (the gpt-oss family's in
 * ops-cases-oai.c, which also makes them all in order). */
void add_binary_cases(enum loom_op op);
void add_unary_cases(enum loom_op op, double lo, double hi);
void add_row_cases(enum loom_op op);
void add_soft_max_cases(void);
void add_rope_cases(void);
double mul_mat_nmse(enum loom_type ta, enum loom_type tb);
void add_mul_mat_cases(void);
void add_mul_mat_id_cases(void);
void add_get_rows_cases(void);
void add_set_rows_cases(void);
void add_cpy_cases(void);
void add_cont_cases(void);
void add_concat_cases(void);
void add_argmax_cases(void);
void add_top_k_cases(void);

/* ops-composites.c: small pieces of a model in one graph. */
void add_graph_cases(void);

/* ops-run.c: inputs as the op reads them, and running one case. */
void view_values(const struct input *in, const struct ref_tensor *leaf,
		 struct ref_tensor *out);
void run_case(const struct op_case *c, struct ops_dev *d);

#endif /* LOOM_TEST_OPS_SUITE_INT_H */
