/* SPDX-License-Identifier: MIT */
/* ops-attn.c - attention as one kernel: the three nodes
 *
 *     kq  = mul_mat(k, q)
 *     sm  = soft_max(kq, mask, scale)
 *     out = mul_mat(v, sm)
 *
 * run per row of q, without writing kq or sm: the scores of the row's
 * unmasked positions (the span between its first and last finite mask
 * value: a causal mask's prefix), their softmax, then the weighted sum of
 * v's rows (v holds a row per output value, over the positions: the
 * layout attention reads from a transposed cache).  Where the mask is
 * causal this skips the half of the products the separate nodes compute
 * only to have the softmax zero them.  The backend fuses the nodes only
 * where nothing else reads kq or sm and neither is marked as an output
 * (attn_fuses in cpu-backend.c), so no result the caller may read goes
 * missing.
 */
#include "cpu-ops.h"
#include "cpu-simd.h"

#if defined(__AVX2__) && defined(__FMA__)
#define ATTN_FUSED 1

/* Types the rows of k and v may have (read straight from memory). */
static bool row_type(enum loom_type t)
{
	return t == LOOM_TYPE_F32 || t == LOOM_TYPE_F16;
}

static bool packed_rows(const struct loom_tensor *t)
{
	return t->nb[0] == (size_t)loom_type_size(t->type);
}
#endif

bool cpu_attn_shape_ok(const struct loom_tensor *out)
{
#if defined(ATTN_FUSED)
	const struct loom_tensor *v = out->src[0], *sm = out->src[1];
	const struct loom_tensor *kq, *k, *q, *mask;

	if (out->op != LOOM_OP_MUL_MAT || !sm || sm->op != LOOM_OP_SOFT_MAX)
		return false;
	kq = sm->src[0];
	mask = sm->src[1];
	if (!kq || kq->op != LOOM_OP_MUL_MAT)
		return false;
	k = kq->src[0];
	q = kq->src[1];
	/* Rows read straight: k and v F32 or F16, q F32, out F32, each
	 * with packed rows. */
	if (!row_type(k->type) || !row_type(v->type) ||
	    q->type != LOOM_TYPE_F32 || out->type != LOOM_TYPE_F32 ||
	    kq->type != LOOM_TYPE_F32 || sm->type != LOOM_TYPE_F32 ||
	    !packed_rows(k) || !packed_rows(v) || !packed_rows(q) ||
	    !packed_rows(out))
		return false;
	if (mask && mask->type != LOOM_TYPE_F32 &&
	    mask->type != LOOM_TYPE_F16)
		return false;
	/* v's positions are k's; sm is kq's shape. */
	return v->ne[0] == k->ne[1] && sm->ne[2] % v->ne[2] == 0 &&
	       sm->ne[3] % v->ne[3] == 0;
#else
	(void)out;
	return false;
#endif
}

#if defined(ATTN_FUSED)
#define ATTN_INLINE static inline __attribute__((always_inline))

/* r[i] = the sum of a[i]'s lanes, for eight vectors. */
ATTN_INLINE __m256 sum8(const VF *a)
{
	__m256 h[8], s01, s23, s45, s67, lo, hi;
	int i;

	for (i = 0; i < 8; i++) {
#if VLEN == 16
		h[i] = _mm256_add_ps(_mm512_castps512_ps256(a[i]),
				     _mm256_castpd_ps(_mm512_extractf64x4_pd(
					     _mm512_castps_pd(a[i]), 1)));
#else
		h[i] = a[i];
#endif
	}
	s01 = _mm256_hadd_ps(h[0], h[1]);
	s23 = _mm256_hadd_ps(h[2], h[3]);
	s45 = _mm256_hadd_ps(h[4], h[5]);
	s67 = _mm256_hadd_ps(h[6], h[7]);
	s01 = _mm256_hadd_ps(s01, s23);
	s45 = _mm256_hadd_ps(s45, s67);
	lo = _mm256_permute2f128_ps(s01, s45, 0x20);
	hi = _mm256_permute2f128_ps(s01, s45, 0x31);
	return _mm256_add_ps(lo, hi);
}

/* VLEN values of a row of type t (F32 or F16) at p. */
ATTN_INLINE VF load_row(enum loom_type t, const char *p)
{
	return t == LOOM_TYPE_F32 ? vload((const float *)p) :
				    vload_f16((const uint16_t *)p);
}

ATTN_INLINE float load_one(enum loom_type t, const char *p)
{
	uint16_t h;

	if (t == LOOM_TYPE_F32)
		return *(const float *)p;
	memcpy(&h, p, sizeof(h));
	return cpu_f16_to_f32(h);
}

/* dot(x[0..n), row of type t at p) for eight rows p[0..7]; t is a
 * constant where it is called, so that the loads take no branch.  The
 * sums stay in named registers (an array of them went to memory). */
ATTN_INLINE __m256 dot8(enum loom_type t, const char *const *p,
			const float *x, int64_t n)
{
	const size_t es = t == LOOM_TYPE_F32 ? 4 : 2;
	const char *p0 = p[0], *p1 = p[1], *p2 = p[2], *p3 = p[3];
	const char *p4 = p[4], *p5 = p[5], *p6 = p[6], *p7 = p[7];
	VF a0 = vzero(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0,
	   a6 = a0, a7 = a0;
	__m256 r;
	int64_t i = 0;

	for (; i + VLEN <= n; i += VLEN) {
		const VF xv = vload(x + i);
		const size_t o = (size_t)i * es;

		a0 = vfma(load_row(t, p0 + o), xv, a0);
		a1 = vfma(load_row(t, p1 + o), xv, a1);
		a2 = vfma(load_row(t, p2 + o), xv, a2);
		a3 = vfma(load_row(t, p3 + o), xv, a3);
		a4 = vfma(load_row(t, p4 + o), xv, a4);
		a5 = vfma(load_row(t, p5 + o), xv, a5);
		a6 = vfma(load_row(t, p6 + o), xv, a6);
		a7 = vfma(load_row(t, p7 + o), xv, a7);
	}
	{
		const VF acc[8] = { a0, a1, a2, a3, a4, a5, a6, a7 };

		r = sum8(acc);
	}
	if (i < n) {
		float tail[8];

		for (int j = 0; j < 8; j++) {
			tail[j] = 0.0f;
			for (int64_t m = i; m < n; m++)
				tail[j] += load_one(t, p[j] + m * es) * x[m];
		}
		r = _mm256_add_ps(r, _mm256_loadu_ps(tail));
	}
	return r;
}

ATTN_INLINE float dot1(enum loom_type t, const char *p, const float *x,
			 int64_t n)
{
	size_t es = t == LOOM_TYPE_F32 ? 4 : 2;
	VF acc = vzero();
	float s;
	int64_t i = 0;

	for (; i + VLEN <= n; i += VLEN)
		acc = vfma(load_row(t, p + i * es), vload(x + i), acc);
	s = vhsum(acc);
	for (; i < n; i++)
		s += load_one(t, p + i * es) * x[i];
	return s;
}

/* The address of row (i1, i2, i3) of t, i2 and i3 broadcast from t's
 * smaller batch dimensions as mul_mat broadcasts its first operand. */
static inline const char *bcast_row(const struct loom_tensor *t, int64_t i1,
				    int64_t i2, int64_t i3, int64_t n2,
				    int64_t n3)
{
	return (const char *)t->data + i1 * t->nb[1] +
	       i2 / (n2 / t->ne[2]) * t->nb[2] +
	       i3 / (n3 / t->ne[3]) * t->nb[3];
}

/* One row of q into y: softmax(scale * k q + mask) over the span
 * [lo, hi), times v. */
ATTN_INLINE void attn_row_t(const enum loom_type kt, const enum loom_type vt,
			    const struct loom_tensor *out, int64_t i1,
			    int64_t i2, int64_t i3, float *s, float *m,
			    float scale, float *y)
{
	const struct loom_tensor *v = out->src[0], *sm = out->src[1];
	const struct loom_tensor *kq = sm->src[0], *mask = sm->src[1];
	const struct loom_tensor *k = kq->src[0], *q = kq->src[1];
	const int64_t n = k->ne[1], d = k->ne[0], dv = out->ne[0];
	const int64_t n2 = sm->ne[2], n3 = sm->ne[3];
	const float *x = (const float *)((const char *)q->data +
					 i1 * q->nb[1] + i2 * q->nb[2] +
					 i3 * q->nb[3]);
	const char *kb = bcast_row(k, 0, i2, i3, n2, n3);
	const char *vb = bcast_row(v, 0, i2, i3, n2, n3);
	int64_t lo = 0, hi = n, j, c;
	float max, sum;

	if (mask) {
		cpu_load_f32(mask->type, (const char *)mask->data +
			     i1 * mask->nb[1] +
			     i2 % mask->ne[2] * mask->nb[2] +
			     i3 % mask->ne[3] * mask->nb[3],
			     mask->nb[0], m, n);
		while (lo < hi && m[lo] == -INFINITY)
			lo++;
		while (hi > lo && m[hi - 1] == -INFINITY)
			hi--;
	}
	/* Scores of the span, eight positions at a time. */
	for (j = lo; j + 8 <= hi; j += 8) {
		const char *p[8];
		__m256 r;

		for (c = 0; c < 8; c++)
			p[c] = kb + (j + c) * k->nb[1];
		r = _mm256_mul_ps(dot8(kt, p, x, d), _mm256_set1_ps(scale));
		if (mask)
			r = _mm256_add_ps(r, _mm256_loadu_ps(m + j));
		_mm256_storeu_ps(s + j, r);
	}
	for (; j < hi; j++)
		s[j] = dot1(kt, kb + j * k->nb[1], x, d) * scale +
		       (mask ? m[j] : 0.0f);
	max = cpu_vec_max(s + lo, hi - lo);
	if (max == -INFINITY) {
		/* Everything masked: no weight anywhere, as soft_max. */
		memset(y, 0, (size_t)dv * sizeof(float));
		return;
	}
	for (j = lo; j + 8 <= hi; j += 8)
		_mm256_storeu_ps(s + j, cpu_exp256(_mm256_sub_ps(
			_mm256_loadu_ps(s + j), _mm256_set1_ps(max))));
	for (; j < hi; j++)
		s[j] = cpu_expf(s[j] - max);
	sum = 1.0f / cpu_vec_sum(s + lo, hi - lo);
	/* Each output value: v's row over the span times the weights. */
	for (c = 0; c + 8 <= dv; c += 8) {
		const char *p[8];
		int e;

		for (e = 0; e < 8; e++)
			p[e] = vb + (c + e) * v->nb[1] +
			       lo * loom_type_size(vt);
		_mm256_storeu_ps(y + c, _mm256_mul_ps(
			dot8(vt, p, s + lo, hi - lo),
			_mm256_set1_ps(sum)));
	}
	for (; c < dv; c++)
		y[c] = dot1(vt, vb + c * v->nb[1] +
			    lo * loom_type_size(vt), s + lo, hi - lo) *
		       sum;
}

/* attn_row_t for k's and v's types, each one compiled apart. */
static void attn_row(const struct loom_tensor *out, int64_t i1, int64_t i2,
		     int64_t i3, float *s, float *m, float scale, float *y)
{
	const enum loom_type kt = out->src[1]->src[0]->src[0]->type;
	const enum loom_type vt = out->src[0]->type;

	if (kt == LOOM_TYPE_F32 && vt == LOOM_TYPE_F32)
		attn_row_t(LOOM_TYPE_F32, LOOM_TYPE_F32, out, i1, i2, i3, s, m,
			   scale, y);
	else if (kt == LOOM_TYPE_F16 && vt == LOOM_TYPE_F16)
		attn_row_t(LOOM_TYPE_F16, LOOM_TYPE_F16, out, i1, i2, i3, s, m,
			   scale, y);
	else if (kt == LOOM_TYPE_F32)
		attn_row_t(LOOM_TYPE_F32, LOOM_TYPE_F16, out, i1, i2, i3, s, m,
			   scale, y);
	else
		attn_row_t(LOOM_TYPE_F16, LOOM_TYPE_F32, out, i1, i2, i3, s, m,
			   scale, y);
}
#endif

/* Where the results wait in the work buffer: after every thread's
 * scratch rows of the softmax node (the scores and the mask row). */
static size_t stage_offset(const struct loom_tensor *out, int nth)
{
	return ((size_t)nth * CPU_SCRATCH_ROWS *
		cpu_scratch_row_bytes(out->src[1]) + 63) & ~(size_t)63;
}

size_t cpu_attn_work_size(const struct loom_tensor *out, int nth)
{
	return stage_offset(out, nth) + (size_t)loom_tensor_n_rows(out) *
	       (size_t)out->ne[0] * sizeof(float);
}

void cpu_op_attn(const struct cpu_task *task, struct loom_tensor *out)
{
#if defined(ATTN_FUSED)
	const struct loom_tensor *sm = out->src[1];
	float scale = loom_tensor_op_param_f32(sm, 0);
	int64_t rows = loom_tensor_n_rows(out), r, dv = out->ne[0];
	float *s = cpu_scratch(task, sm, 0), *m = cpu_scratch(task, sm, 1);
	float *stage = (float *)((char *)task->wdata +
				 stage_offset(out, task->nth));

	/* The results go to the work buffer first: the graph's allocator
	 * counted q dead once kq was computed, so out may lie where q
	 * does.  Rows in turn over the threads: a causal mask makes later
	 * rows longer, and neighbours share k and v. */
	for (r = task->ith; r < rows; r += task->nth) {
		int64_t i1, i2, i3;

		cpu_row_coords(out, r, &i1, &i2, &i3);
		attn_row(out, i1, i2, i3, s, m, scale, stage + r * dv);
	}
	cpu_barrier(task);
	for (r = task->ith; r < rows; r += task->nth) {
		int64_t i1, i2, i3;

		cpu_row_coords(out, r, &i1, &i2, &i3);
		memcpy((char *)out->data + i1 * out->nb[1] + i2 * out->nb[2] +
		       i3 * out->nb[3], stage + r * dv, dv * sizeof(float));
	}
#else
	(void)task;
	(void)out;
#endif
}
