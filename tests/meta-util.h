/* SPDX-License-Identifier: MIT */
/* meta-util.h - what test-meta's files share: the CPU partitions, a
 * split callback driven by a table of names, meta devices over them, and
 * a product of split weights run on a device (tests/meta-util.c). */
#ifndef LOOM_TESTS_META_UTIL_H
#define LOOM_TESTS_META_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <loom/loom-plugin.h>

/* cpu0..cpu3 (find_cpus). */
extern loom_dev_t *cpu[4];

/* A split callback driven by a table of names (table_split's userdata,
 * ended by a NULL name). */
struct rule {
	const char *name;
	enum loom_split_state state;
	int64_t granularity;
	int n_seg;
	int64_t seg[4];
	int fail;
	int ret; /* returned as is, without a message */
};

int table_split(const struct loom_tensor *t, struct loom_split *out,
		void *userdata);
/* A meta device over cpu0..cpu<n-1>, split by rules (ratios may be NULL;
 * fallback forces the generic allreduce). */
loom_dev_t *meta_new(int n, const struct rule *rules, const float *ratios,
		     bool fallback);
/* Seeded values in [-1, 1]. */
void fill(float *v, size_t n, unsigned seed);
/* A meta buffer's bytes on each device, and their sum. */
size_t dev_sizes(loom_buffer_t *buf, size_t *sizes, size_t n);
/* Looks up cpu0..cpu3 into cpu[]. */
void find_cpus(void);

/* w1 [K, M] SPLIT(1) times x gives y SPLIT(0); w2 [M, N] SPLIT(0) times
 * y gives z PARTIAL (read as its sum); silu(2 z) needs the allreduce. */
#define K 10
#define M 9
#define N 7
#define T 3

extern const struct rule mm_rules[];

struct mm_result {
	float y[M * T], z[N * T], s[N * T];
	size_t dev_compute[4];
};

/* The product in double, and run on dev (twice: the second reuses the
 * plan; a meta device also reports its compute memory per device). */
void mm_reference(const float *w1, const float *w2, const float *x,
		  struct mm_result *r);
void mm_run(loom_dev_t *dev, const float *w1, const float *w2,
	    const float *x, struct mm_result *r);
/* The normalized mean squared error of x against ref. */
double nmse_of(const float *ref, const float *x, size_t n);
void assert_close(const float *ref, const float *x, size_t n);

#endif
