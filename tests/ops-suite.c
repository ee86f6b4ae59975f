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
 *
 * This file keeps the cases made and builds them, and the suite's
 * interface; the case tables are in ops-cases.c, ops-cases-oai.c and
 * ops-composites.c, running a case in ops-run.c (ops-suite-int.h).
 */
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

static const char *const layout_tags[] = {
	[LAYOUT_CONT] = "",
	[LAYOUT_TRANSPOSE] = ".T",
	[LAYOUT_PERMUTE] = ".P",
	[LAYOUT_PAD] = ".V",
	[LAYOUT_RESHAPE] = ".R",
};

static struct op_case **all_cases;
size_t n_cases;
static size_t cap_cases;
static const struct ops_report *report;
static bool case_failed, case_skipped;

void __attribute__((format(printf, 1, 2)))
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

void ops_fail(void)
{
	case_failed = true;
	if (report && report->fail)
		report->fail(report->data);
}

void ops_skip(const char *why)
{
	case_skipped = true;
	if (report && report->skip)
		report->skip(why, report->data);
}

/* ------------------------------------------------------------------------
 * Building cases.
 */

/* The op part of a case's path: the op's name, or "graph". */
const char *case_op_name(const struct op_case *c)
{
	return c->graph ? "graph" : loom_op_name(c->op);
}

struct op_case *case_new(enum loom_op op, double max_nmse)
{
	struct op_case *c = loom_test_malloc(sizeof(struct op_case));

	c->op = op;
	c->max_nmse = max_nmse;
	c->result_in = -1;
	return c;
}

struct input *case_in(struct op_case *c, enum loom_type type,
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

struct input *case_ids(struct op_case *c, enum fill fill,
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
void __attribute__((format(printf, 3, 4)))
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
void case_add(struct op_case *c, const char *tag)
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
