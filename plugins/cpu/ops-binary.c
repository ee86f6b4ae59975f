/* SPDX-License-Identifier: MIT */
/* ops-binary.c - add, sub, mul and div, with b broadcast to a's shape.
 * Packed F32 operands of one shape run as one flat vector loop split over
 * the threads; everything else goes row by row through F32 scratch.
 */
#include "cpu-ops.h"

/* d = x op y over n elements; the switch sits outside the loops so each
 * loop vectorizes. */
static void vec_op(enum loom_op op, float *d, const float *x, const float *y,
		   int64_t n)
{
	int64_t i;

	switch (op) {
	case LOOM_OP_ADD:
		for (i = 0; i < n; i++)
			d[i] = x[i] + y[i];
		break;
	case LOOM_OP_SUB:
		for (i = 0; i < n; i++)
			d[i] = x[i] - y[i];
		break;
	case LOOM_OP_MUL:
		for (i = 0; i < n; i++)
			d[i] = x[i] * y[i];
		break;
	case LOOM_OP_DIV:
		for (i = 0; i < n; i++)
			d[i] = x[i] / y[i];
		break;
	default:
		break;
	}
}

/* d = x op y with one y for all n elements. */
static void vec_op_scalar(enum loom_op op, float *d, const float *x, float y,
			  int64_t n)
{
	int64_t i;

	switch (op) {
	case LOOM_OP_ADD:
		for (i = 0; i < n; i++)
			d[i] = x[i] + y;
		break;
	case LOOM_OP_SUB:
		for (i = 0; i < n; i++)
			d[i] = x[i] - y;
		break;
	case LOOM_OP_MUL:
		for (i = 0; i < n; i++)
			d[i] = x[i] * y;
		break;
	case LOOM_OP_DIV:
		for (i = 0; i < n; i++)
			d[i] = x[i] / y;
		break;
	default:
		break;
	}
}

void cpu_op_binary(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t ne0 = dst->ne[0];
	int64_t nb0 = b->ne[0];
	int64_t r, r0, r1;

	if (cpu_is_f32_contig(a) && cpu_is_f32_contig(b) &&
	    cpu_is_f32_contig(dst) && loom_tensor_same_shape(a, b)) {
		/* Whole vectors: split the elements, in 64-byte pieces. */
		int64_t n = loom_tensor_n_elements(dst);
		int64_t per = ((n + task->nth - 1) / task->nth + 15) & ~15;
		int64_t i0 = per * task->ith;
		int64_t i1 = i0 + per < n ? i0 + per : n;

		if (i0 < i1)
			vec_op(dst->op, (float *)dst->data + i0,
			       (const float *)a->data + i0,
			       (const float *)b->data + i0, i1 - i0);
		return;
	}

	cpu_split_rows(task, loom_tensor_n_rows(dst), &r0, &r1);
	for (r = r0; r < r1; r++) {
		int64_t i1, i2, i3, k;
		const float *x, *y;
		float *d;

		cpu_row_coords(dst, r, &i1, &i2, &i3);
		x = cpu_row_f32(a, i1, i2, i3, cpu_scratch(task, dst, 0));
		y = cpu_row_f32(b, i1 % b->ne[1], i2 % b->ne[2],
				i3 % b->ne[3], cpu_scratch(task, dst, 1));
		d = cpu_row_out(dst, i1, i2, i3, cpu_scratch(task, dst, 2));
		if (nb0 == ne0)
			vec_op(dst->op, d, x, y, ne0);
		else if (nb0 == 1)
			vec_op_scalar(dst->op, d, x, y[0], ne0);
		else
			for (k = 0; k < ne0; k += nb0)
				vec_op(dst->op, d + k, x + k, y, nb0);
		cpu_row_put(dst, i1, i2, i3, d);
	}
}
