/* SPDX-License-Identifier: MIT */
/* ops-copy.c - copy and cont (any layout to any layout of the same element
 * count, converting between F32, F16, BF16 and Q8_0) and concat.  Copies
 * within one type move bytes, so they are exact for every type.
 */
#include "cpu-ops.h"

/* Copies n units of us bytes, dnb and snb bytes apart.  The common unit
 * sizes get loops of their own, so each copy is a load and a store. */
static void copy_units(char *d, size_t dnb, const char *s, size_t snb,
		       size_t us, int64_t n)
{
	int64_t i;

	if (dnb == us && snb == us) {
		memcpy(d, s, n * us);
		return;
	}
	switch (us) {
	case 2:
		for (i = 0; i < n; i++)
			memcpy(d + i * dnb, s + i * snb, 2);
		break;
	case 4:
		for (i = 0; i < n; i++)
			memcpy(d + i * dnb, s + i * snb, 4);
		break;
	case sizeof(struct loom_block_q8_0):
		for (i = 0; i < n; i++)
			memcpy(d + i * dnb, s + i * snb,
			       sizeof(struct loom_block_q8_0));
		break;
	default:
		for (i = 0; i < n; i++)
			memcpy(d + i * dnb, s + i * snb, us);
		break;
	}
}

/* Both tensors walked in their logical order, units (elements, or blocks
 * of a quantized type) moved as bytes. */
static void copy_same_type(const struct cpu_task *task,
			  const struct loom_tensor *src,
			  struct loom_tensor *dst)
{
	int64_t bs = loom_type_block_size(dst->type);
	size_t us = loom_type_size(dst->type);
	int64_t nu_s = src->ne[0] / bs;
	int64_t nu_d = dst->ne[0] / bs;
	int64_t r, r0, r1;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3, k = r * nu_d, done = 0;
		char *d;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		d = cpu_row_ptr(dst, i1, i2, i3);
		while (done < nu_d) {
			int64_t rs = k / nu_s, o = k % nu_s;
			int64_t len = nu_s - o;
			int64_t s1, s2, s3;

			if (len > nu_d - done)
				len = nu_d - done;
			cpu_row_coords(src, rs, &s1, &s2, &s3);
			copy_units(d + done * dst->nb[0], dst->nb[0],
				   cpu_row_ptr(src, s1, s2, s3) +
					   o * src->nb[0],
				   src->nb[0], us, len);
			done += len;
			k += len;
		}
	}
}

/* The same walk through F32: each dst row is gathered as F32, then
 * stored in dst's type. */
static void copy_convert(const struct cpu_task *task,
			const struct loom_tensor *src, struct loom_tensor *dst)
{
	int64_t ne_s = src->ne[0];
	int64_t ne_d = dst->ne[0];
	bool quant = loom_type_is_quantized(src->type);
	float *cache = cpu_scratch(task, dst, 1);
	int64_t cached = -1;
	int64_t r, r0, r1;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	if (ne_s == ne_d) {
		/* Rows match: convert each straight from the source row. */
		for (r = r0; r < r1; r++) {
			int64_t i1, i2, i3, s1, s2, s3;

			cpu_row_coords(dst, r, &i1, &i2, &i3);
			cpu_row_coords(src, r, &s1, &s2, &s3);
			cpu_row_put(dst, i1, i2, i3,
				    cpu_row_f32(src, s1, s2, s3,
						cpu_scratch(task, dst, 0)));
		}
		return;
	}
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3, k = r * ne_d, done = 0;
		float *d;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 0));
		while (done < ne_d) {
			int64_t rs = k / ne_s, o = k % ne_s;
			int64_t len = ne_s - o;
			int64_t s1, s2, s3;
			const char *p;

			if (len > ne_d - done)
				len = ne_d - done;
			cpu_row_coords(src, rs, &s1, &s2, &s3);
			p = cpu_row_ptr(src, s1, s2, s3);
			if (quant) {
				/* Blocks dequantize whole: keep the row. */
				if (cached != rs) {
					cpu_load_f32(src->type, p, src->nb[0],
						     cache, ne_s);
					cached = rs;
				}
				memcpy(d + done, cache + o,
				       len * sizeof(float));
			} else {
				cpu_load_f32(src->type, p + o * src->nb[0],
					     src->nb[0], d + done, len);
			}
			done += len;
			k += len;
		}
		cpu_row_put(dst, i1, i2, i3, d);
	}
}

void cpu_op_copy(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *src = dst->src[0];

	/* For CPY the node is a view of src[1], so it is the destination. */
	if (src->type == dst->type)
		copy_same_type(task, src, dst);
	else
		copy_convert(task, src, dst);
}

void cpu_op_concat(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int dim = loom_tensor_op_param_i32(dst, 0);
	int64_t bs = loom_type_block_size(dst->type);
	size_t us = loom_type_size(dst->type);
	int64_t r, r0, r1;

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t c[4];
		char *d;

		cpu_row_coords(dst, r, &c[1], &c[2], &c[3]);
		d = cpu_row_ptr(dst, c[1], c[2], c[3]);
		if (dim == 0) {
			int64_t na = a->ne[0] / bs;

			copy_units(d, dst->nb[0],
				   cpu_row_ptr(a, c[1], c[2], c[3]),
				   a->nb[0], us, na);
			copy_units(d + na * dst->nb[0], dst->nb[0],
				   cpu_row_ptr(b, c[1], c[2], c[3]),
				   b->nb[0], us, b->ne[0] / bs);
		} else if (c[dim] < a->ne[dim]) {
			copy_units(d, dst->nb[0],
				   cpu_row_ptr(a, c[1], c[2], c[3]),
				   a->nb[0], us, a->ne[0] / bs);
		} else {
			c[dim] -= a->ne[dim];
			copy_units(d, dst->nb[0],
				   cpu_row_ptr(b, c[1], c[2], c[3]),
				   b->nb[0], us, b->ne[0] / bs);
		}
	}
}
