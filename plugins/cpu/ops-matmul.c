/* ops-matmul.c - the CPU plugin's mul_mat and mul_mat_id kernels.
 *
 * This first version is a plain, correct reference: b is converted to
 * contiguous F32 rows in the work buffer, then each thread computes whole
 * rows of dst with scalar dot products.
 */
#include <stdint.h>
#include <string.h>

#include "cpu-kernels.h"

/* Half-precision to single, with subnormals, infinities and NaN. */
static inline float fp16_to_fp32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16;
	uint32_t exp = (h >> 10) & 0x1f;
	uint32_t mant = h & 0x3ff;
	uint32_t bits;
	float f;

	if (exp == 0x1f) {
		bits = sign | 0x7f800000u | (mant << 13);
	} else if (exp != 0) {
		bits = sign | ((exp + 112) << 23) | (mant << 13);
	} else if (mant == 0) {
		bits = sign;
	} else {
		/* Subnormal: normalize the mantissa. */
		exp = 113;
		while (!(mant & 0x400)) {
			mant <<= 1;
			exp--;
		}
		bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
	}
	memcpy(&f, &bits, sizeof(f));
	return f;
}

static inline float bf16_to_fp32(uint16_t h)
{
	uint32_t bits = (uint32_t)h << 16;
	float f;

	memcpy(&f, &bits, sizeof(f));
	return f;
}

/* Converts n values of b's type at src (elements nb0 bytes apart) to F32. */
static void row_to_f32(enum loom_type type, const char *src, size_t nb0,
		       float *dst, int64_t n)
{
	int64_t i;

	switch (type) {
	case LOOM_TYPE_F32:
		for (i = 0; i < n; i++)
			memcpy(&dst[i], src + i * nb0, sizeof(float));
		break;
	case LOOM_TYPE_F16:
		for (i = 0; i < n; i++) {
			uint16_t h;

			memcpy(&h, src + i * nb0, sizeof(h));
			dst[i] = fp16_to_fp32(h);
		}
		break;
	case LOOM_TYPE_BF16:
		for (i = 0; i < n; i++) {
			uint16_t h;

			memcpy(&h, src + i * nb0, sizeof(h));
			dst[i] = bf16_to_fp32(h);
		}
		break;
	default:
		memset(dst, 0, n * sizeof(*dst));
		break;
	}
}

/* The dot product of a row of a (its type, contiguous) and F32 x. */
static float dot_row(enum loom_type type, const void *row, const float *x,
		     int64_t k)
{
	double sum = 0.0;
	int64_t i;

	switch (type) {
	case LOOM_TYPE_F32: {
		const float *a = row;

		for (i = 0; i < k; i++)
			sum += (double)a[i] * x[i];
		break;
	}
	case LOOM_TYPE_F16: {
		const uint16_t *a = row;

		for (i = 0; i < k; i++)
			sum += (double)fp16_to_fp32(a[i]) * x[i];
		break;
	}
	case LOOM_TYPE_BF16: {
		const uint16_t *a = row;

		for (i = 0; i < k; i++)
			sum += (double)bf16_to_fp32(a[i]) * x[i];
		break;
	}
	case LOOM_TYPE_Q8_0: {
		const struct loom_block_q8_0 *blk = row;
		int64_t nblk = k / LOOM_QK8_0;

		for (i = 0; i < nblk; i++) {
			float d = fp16_to_fp32(blk[i].d);
			double s = 0.0;
			int j;

			for (j = 0; j < LOOM_QK8_0; j++)
				s += (double)blk[i].qs[j] * x[i * LOOM_QK8_0 + j];
			sum += d * s;
		}
		break;
	}
	default:
		break;
	}
	return (float)sum;
}

/* Bytes of b converted to contiguous F32 rows. */
static size_t b_f32_size(const struct loom_tensor *b)
{
	return (size_t)b->ne[0] * b->ne[1] * b->ne[2] * b->ne[3] *
	       sizeof(float);
}

size_t cpu_mul_mat_work_size(const struct loom_tensor *dst, int nth)
{
	(void)nth;
	return b_f32_size(dst->src[1]) + 64;
}

/* Converts b into contiguous F32 rows in wdata; thread ith of nth takes
 * every nth row.  Returns the rows. */
static float *convert_b(const struct cpu_task *task,
			const struct loom_tensor *b)
{
	float *out = task->wdata;
	int64_t k = b->ne[0];
	int64_t nrows = b->ne[1] * b->ne[2] * b->ne[3];
	int64_t r;

	for (r = task->ith; r < nrows; r += task->nth) {
		int64_t i1 = r % b->ne[1];
		int64_t i2 = (r / b->ne[1]) % b->ne[2];
		int64_t i3 = r / (b->ne[1] * b->ne[2]);
		const char *src = (const char *)b->data + i1 * b->nb[1] +
				  i2 * b->nb[2] + i3 * b->nb[3];

		row_to_f32(b->type, src, b->nb[0], out + r * k, k);
	}
	cpu_barrier(task);
	return out;
}

void cpu_op_mul_mat(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0];
	int64_t m = a->ne[1];
	int64_t nrows = b->ne[1] * b->ne[2] * b->ne[3];
	const float *bf = convert_b(task, b);
	int64_t r;

	/* Each dst row (one row of b) belongs to one thread. */
	for (r = task->ith; r < nrows; r += task->nth) {
		int64_t n = r % b->ne[1];
		int64_t i2 = (r / b->ne[1]) % b->ne[2];
		int64_t i3 = r / (b->ne[1] * b->ne[2]);
		int64_t a2 = i2 / (b->ne[2] / a->ne[2]);
		int64_t a3 = i3 / (b->ne[3] / a->ne[3]);
		const char *abase = (const char *)a->data + a2 * a->nb[2] +
				    a3 * a->nb[3];
		char *d = (char *)dst->data + n * dst->nb[1] + i2 * dst->nb[2] +
			  i3 * dst->nb[3];
		int64_t i;

		for (i = 0; i < m; i++) {
			float v = dot_row(a->type, abase + i * a->nb[1],
					  bf + r * k, k);

			memcpy(d + i * dst->nb[0], &v, sizeof(v));
		}
	}
}

void cpu_op_mul_mat_id(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *as = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	const struct loom_tensor *ids = dst->src[2];
	int64_t k = as->ne[0];
	int64_t m = as->ne[1];
	int64_t n_used = ids->ne[0];
	int64_t n_tokens = ids->ne[1];
	const float *bf = convert_b(task, b);
	int64_t r;

	for (r = task->ith; r < n_used * n_tokens; r += task->nth) {
		int64_t e = r % n_used;
		int64_t t = r / n_used;
		int32_t ex;
		const char *abase;
		const float *x;
		char *d;
		int64_t i;

		memcpy(&ex, (const char *)ids->data + e * ids->nb[0] +
			     t * ids->nb[1], sizeof(ex));
		abase = (const char *)as->data + ex * as->nb[2];
		x = bf + ((e % b->ne[1]) + t * b->ne[1]) * k;
		d = (char *)dst->data + e * dst->nb[1] + t * dst->nb[2];
		for (i = 0; i < m; i++) {
			float v = dot_row(as->type, abase + i * as->nb[1], x,
					  k);

			memcpy(d + i * dst->nb[0], &v, sizeof(v));
		}
	}
}
