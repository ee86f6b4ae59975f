/* SPDX-License-Identifier: MIT */
/* ops-reduce.c - row reductions: sum_rows, argmax and top_k.  Each thread
 * takes whole rows.
 */
#include "cpu-ops.h"

void cpu_op_sum_rows(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	int64_t r, r0, r1;

	cpu_split_rows(task, loom_tensor_n_rows(a), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *x;
		float s;

		cpu_row_coords(a, r, &i1, &i2, &i3);
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		s = cpu_vec_sum(x, a->ne[0]);
		cpu_store_f32(dst->type, cpu_row_ptr(dst, i1, i2, i3),
			      dst->nb[0], &s, 1);
	}
}

/* True when element i ranks before element j: larger, or equal with the
 * lower index; NaN ranks after every number, so the order is total. */
static inline bool ranks_before(const float *x, int32_t i, int32_t j)
{
	bool in = isnan(x[i]), jn = isnan(x[j]);

	if (in != jn)
		return jn;
	if (in)
		return i < j;
	return x[i] > x[j] || (x[i] == x[j] && i < j);
}

static void store_i32(const struct loom_tensor *t, char *p, int64_t i,
		      int32_t v)
{
	memcpy(p + i * t->nb[0], &v, sizeof(v));
}

void cpu_op_argmax(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	int64_t r, r0, r1, i;

	cpu_split_rows(task, loom_tensor_n_rows(a), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3, best = 0;
		const float *x;

		cpu_row_coords(a, r, &i1, &i2, &i3);
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		for (i = 1; i < a->ne[0]; i++)
			if (ranks_before(x, (int32_t)i, (int32_t)best))
				best = i;
		/* dst is [ne1] for a 2D a; its element r in general. */
		cpu_row_coords(dst, r / dst->ne[0], &i1, &i2, &i3);
		store_i32(dst, cpu_row_ptr(dst, i1, i2, i3), r % dst->ne[0],
			  (int32_t)best);
	}
}



/* Sorts idx[0..n) by rank, with tmp as room for n more. */
static void merge_sort(const float *x, int32_t *idx, int32_t *tmp, int64_t n)
{
	int64_t width, lo;

	for (width = 1; width < n; width *= 2) {
		for (lo = 0; lo < n; lo += 2 * width) {
			int64_t mid = lo + width < n ? lo + width : n;
			int64_t hi = lo + 2 * width < n ? lo + 2 * width : n;
			int64_t i = lo, j = mid, o = lo;

			while (i < mid && j < hi)
				tmp[o++] = ranks_before(x, idx[j], idx[i]) ?
						   idx[j++] : idx[i++];
			while (i < mid)
				tmp[o++] = idx[i++];
			while (j < hi)
				tmp[o++] = idx[j++];
		}
		memcpy(idx, tmp, n * sizeof(*idx));
	}
}

/* The k best of x[0..n) into top, by insertion: fast for small k. */
static void select_small(const float *x, int64_t n, int32_t *top, int64_t k)
{
	int64_t have = 0, i;

	for (i = 0; i < n; i++) {
		int64_t j;

		if (have == k && !ranks_before(x, (int32_t)i, top[k - 1]))
			continue;
		j = have < k ? have++ : k - 1;
		while (j > 0 && ranks_before(x, (int32_t)i, top[j - 1])) {
			top[j] = top[j - 1];
			j--;
		}
		top[j] = (int32_t)i;
	}
}

void cpu_op_top_k(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	int64_t k = dst->ne[0];
	int64_t n = a->ne[0];
	int32_t *idx = (int32_t *)cpu_scratch(task, dst, 1);
	int32_t *tmp = (int32_t *)cpu_scratch(task, dst, 2);
	int64_t r, r0, r1, i;

	if (k > n)
		k = n;
	cpu_split_rows(task, loom_tensor_n_rows(a), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3;
		const float *x;
		char *o;

		cpu_row_coords(a, r, &i1, &i2, &i3);
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		if (k <= 32) {
			select_small(x, n, idx, k);
		} else {
			for (i = 0; i < n; i++)
				idx[i] = (int32_t)i;
			merge_sort(x, idx, tmp, n);
		}
		o = cpu_row_ptr(dst, i1, i2, i3);
		for (i = 0; i < k; i++)
			store_i32(dst, o, i, idx[i]);
	}
}
