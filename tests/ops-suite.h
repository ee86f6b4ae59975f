/* SPDX-License-Identifier: MIT */
/* ops-suite.h - the op-conformance suite shared by tests/test-ops (GLib,
 * under make check) and loom-conformance (installed): its cases, and
 * running one case on one device.  Plain C, without GLib.
 */
#ifndef LOOM_TEST_OPS_SUITE_H
#define LOOM_TEST_OPS_SUITE_H

#include <loom/loom-backend.h>

#include <stdbool.h>
#include <stddef.h>

/* A case: one op (or a small graph of ops) on seeded inputs of given
 * types, shapes and layouts, with the NMSE it may differ by. */
struct op_case;

/* A device under test.  The suite makes its backend on first use and
 * keeps it (or why it could not) until ops_dev_clear(). */
struct ops_dev {
	loom_dev_t *dev;
	const char *name;
	loom_backend_t *be;
	char *be_error;
};

enum ops_outcome {
	OPS_PASS,
	OPS_FAIL,
	OPS_SKIP, /* the device's supports_op refused a node of the case */
};

/* Where a running case's messages go: each line (what was compared, and
 * on a failure where and by how much), the failure itself, and a skip
 * with its reason.  Any may be NULL. */
struct ops_report {
	void (*message)(const char *msg, void *data);
	void (*fail)(void *data);
	void (*skip)(const char *why, void *data);
	void *data;
};

/* The report used from now on; r must outlive the runs (NULL: none). */
void ops_set_report(const struct ops_report *r);

/* Makes every case (once), and frees them. */
void ops_cases_make(void);
void ops_cases_free(void);
size_t ops_case_count(void);
const struct op_case *ops_case_get(size_t i);
/* The op's name as loom_op_name() gives it, or "graph" for a composite. */
const char *ops_case_op(const struct op_case *c);
/* The case's name within its op (inputs and tag), e.g.
 * "f32.64x3x1x1_f32.64x3x1x1". */
const char *ops_case_name(const struct op_case *c);

/* Runs c on d and compares with the reference. */
enum ops_outcome ops_case_run(const struct op_case *c, struct ops_dev *d);
/* Frees d's backend and message. */
void ops_dev_clear(struct ops_dev *d);

/* True when name is in the comma-separated list, or the list is NULL or
 * empty. */
bool ops_list_has(const char *list, const char *name);

#endif /* LOOM_TEST_OPS_SUITE_H */
