/* SPDX-License-Identifier: MIT */
/* test-util.h - small helpers shared by the tests and loom-conformance: a
 * seeded random generator, filling and reading tensors of any type, NMSE,
 * and loading the uninstalled plugins.  Plain C, without GLib.
 */
#ifndef LOOM_TEST_UTIL_H
#define LOOM_TEST_UTIL_H

#include <loom/loom-backend.h>

#include <stddef.h>
#include <stdint.h>

/* Zeroed memory, and a formatted string; both freed with free().  They
 * abort when memory runs out (test code has nothing to report without
 * it). */
void *loom_test_malloc(size_t size);
char *loom_test_strdup_printf(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/* A seeded generator (splitmix64): the same seed gives the same values on
 * every machine, so a failure can be replayed. */
struct loom_test_rng {
	uint64_t state;
};

void loom_test_rng_seed(struct loom_test_rng *rng, uint64_t seed);
uint64_t loom_test_rng_next(struct loom_test_rng *rng);
/* A double uniform in [lo, hi). */
double loom_test_rng_uniform(struct loom_test_rng *rng, double lo, double hi);
/* An integer uniform in [0, n); n > 0. */
int64_t loom_test_rng_int(struct loom_test_rng *rng, int64_t n);

/* Decoders written from the format definitions, independent of the
 * library's conversions. */
double loom_test_fp16_to_double(uint16_t h);
double loom_test_bf16_to_double(uint16_t h);
/* Decodes n values (whole blocks) of a quantized type into out.  Returns
 * LOOM_E_UNSUPPORTED for a type it has no decoder for. */
int loom_test_decode_blocks(enum loom_type type, const void *blocks,
			    int64_t n, double *out);

/* What split policy fn (with userdata) says of a [ne0, ne1] tensor of
 * type named name, into *out: the policy's status, or that of making
 * the tensor. */
int loom_test_split_of(loom_split_fn fn, void *userdata, const char *name,
		       enum loom_type type, int64_t ne0, int64_t ne1,
		       struct loom_split *out);

/* Sets every element of t (placed, contiguous) from n = loom_tensor_n_elements(t)
 * floats, converted to t's type with loom_type_convert (so quantized types are
 * quantized).  Returns LOOM_OK or the failing call's status. */
int loom_test_set_f32(struct loom_tensor *t, const float *values);
/* Sets every element of t (placed, contiguous, I32). */
int loom_test_set_i32(struct loom_tensor *t, const int32_t *values);
/* Fills t (placed, contiguous, F32/F16/BF16 or quantized) with values uniform in
 * [lo, hi), rounded to t's type. */
int loom_test_fill_uniform(struct loom_tensor *t, struct loom_test_rng *rng,
			   double lo, double hi);

/* Reads t (placed; any layout, any type) back to the host and returns its
 * values as doubles in logical order (dimension 0 fastest), nelements of
 * them.  Quantized tensors need rows contiguous in dimension 0.  Returns
 * NULL with a message in *error (free() both) on failure. */
double *loom_test_get_doubles(const struct loom_tensor *t, char **error);

/* Normalized mean squared error: sum((out - ref)^2) / sum(ref^2).  An
 * all-zero reference gives 0 when out is all zero too, else infinity.
 * Any NaN gives infinity. */
double loom_test_nmse(const double *ref, const double *out, size_t n);

/* Points LOOM_PLUGIN_PATH at LOOM_TEST_PLUGIN_PATH (after any directories
 * already in LOOM_PLUGIN_PATH, so a plugin author's directory is searched
 * first) and loads the plugins LOOM_BACKENDS selects.  Returns
 * loom_load_all()'s status. */
int loom_test_load_plugins(void);
/* Loads the cpu and meta plugins alone with the CPU cut into n
 * partitions and fills cpu[0..n) with them.  Returns 0, or -1 when the
 * plugins or the partitions are not there (the caller skips). */
int loom_test_meta_partitions(int n, loom_dev_t **cpu);

/* Computes y (made in ctx, an output, with the input x) on dev once: the
 * graph of y, made in ctx, checked by loom_meta_check on a meta device, allocated on
 * dev's buffer type, x set from x_values (its elements, F32), and y read
 * back as loom_test_get_doubles does.  Returns NULL with a message in
 * *error (free() both) on failure. */
double *loom_test_compute(loom_dev_t *dev, loom_ctx_t *ctx,
			  struct loom_tensor *y, struct loom_tensor *x, const float *x_values,
			  char **error);

#endif /* LOOM_TEST_UTIL_H */
