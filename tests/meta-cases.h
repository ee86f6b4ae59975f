/* SPDX-License-Identifier: MIT */
/* meta-cases.h - the test-meta cases that test-meta.c's main registers
 * from the other test-meta-*.c files. */
#ifndef LOOM_TESTS_META_CASES_H
#define LOOM_TESTS_META_CASES_H

/* test-meta-compute.c */
void test_mul_mat(void);
void test_bf16_reduce(void);
void test_quant_mul_mat(void);
void test_memory(void);
void test_compute_memory(void);

/* test-meta-errors.c */
void test_bad_callbacks(void);
void test_kquant_blocks(void);
void test_empty_split_view(void);
void test_unsupported(void);
void test_split_buffer_type(void);
void test_same_device_twice(void);
void test_default_policy(void);

/* test-meta-graphs.c */
void test_op_rules(void);
void test_plan_eviction(void);
void test_plan_leaves_replaced(void);
void test_check_is_planning(void);
void test_reload(void);

#endif
