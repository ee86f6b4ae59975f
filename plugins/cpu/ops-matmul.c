/* SPDX-License-Identifier: MIT */
/* ops-matmul.c - the CPU plugin's mul_mat and mul_mat_id: which kernel
 * a product takes (int8 dot products for quantized weights where the
 * variant has them, else a blocked GEMM for wide b and a streaming GEMV
 * for decode-sized b), the work buffer and the division of the work
 * among threads.  The kernels live in matmul-*.c.
 */
#include "cpu-matmul.h"

/* Splits [0, n) into parts aligned to gran; returns part i of parts. */
static void split_range(int64_t n, int64_t gran, int64_t parts, int64_t i,
			int64_t *start, int64_t *end)
{
	int64_t units = div_up(n, gran);
	int64_t s = units * i / parts * gran;
	int64_t e = units * (i + 1) / parts * gran;

	*start = s < n ? s : n;
	*end = e < n ? e : n;
}

/* The GEMM pays for packing once b has enough rows to reuse it. */
static bool use_gemm(const struct loom_tensor *a, int64_t n)
{
	return n > GEMV_NB && a->ne[1] >= MR / 2 && a->ne[0] > 0;
}

static bool b_is_f32_rows(const struct loom_tensor *b)
{
	return b->type == LOOM_TYPE_F32 && b->nb[0] == sizeof(float);
}

/* Whether the product runs on int8 dot products (matmul-q8.c): weights
 * of a type it knows, activations quantized on the fly. */
static bool use_q8(const struct loom_tensor *a)
{
#if defined(CPU_HAVE_Q8)
	return cpu_q8_supports(a->type) && a->ne[0] % 32 == 0;
#else
	(void)a;
	return false;
#endif
}

/* Whether the product runs on AMX tiles (matmul-amx.c): weights of a
 * type they take, and enough columns to fill a tile. */
static bool use_amx(const struct loom_tensor *a, int64_t n)
{
#if defined(CPU_HAVE_AMX)
	return n >= AMX_MIN && cpu_amx_supports(a->type, a->nb[0], a->ne[0]) &&
	       cpu_amx();
#else
	(void)a;
	(void)n;
	return false;
#endif
}

/* Bytes of the AMX kernels' packed columns (n per batch) and of nth
 * threads' scratch. */
static size_t amx_size(int64_t batches, int64_t n, int64_t k, int nth)
{
#if defined(CPU_HAVE_AMX)
	return align_up((size_t)batches * cpu_amx_b_bytes(n, k)) +
	       (size_t)nth * align_up(cpu_amx_scratch_bytes(k));
#else
	(void)batches;
	(void)n;
	(void)k;
	(void)nth;
	return 0;
#endif
}

/* Bytes of n activation rows quantized for the int8 kernels. */
static size_t q8_size(int64_t n, int64_t k)
{
#if defined(CPU_HAVE_Q8)
	return align_up((size_t)n * cpu_q8_col_bytes(k));
#else
	(void)n;
	(void)k;
	return 0;
#endif
}

/* Floats of tmp: NR rows of b, MR rows of an a block, one a row, or
 * the int8 kernels' row scales. */
static size_t scratch_floats(int64_t k)
{
	size_t nb = (size_t)NR * k, na = (size_t)MR * KC;

#if defined(CPU_HAVE_Q8)
	if (cpu_q8_tmp_floats(k) > nb)
		nb = cpu_q8_tmp_floats(k);
#endif
	return nb > na ? nb : na;
}

static size_t scratch_size(int64_t k)
{
	return align_up((size_t)MC * KC * sizeof(float)) +
	       align_up(scratch_floats(k) * sizeof(float));
}

/* A cursor over the work buffer: hands out aligned pieces. */
static void *take(char **cursor, size_t bytes)
{
	char *p = *cursor;

	*cursor += align_up(bytes);
	return p;
}

static char *work_base(const struct cpu_task *task)
{
	uintptr_t p = (uintptr_t)task->wdata;

	return (char *)((p + ALIGN - 1) & ~(uintptr_t)(ALIGN - 1));
}

/* Takes this thread's scratch from the nth that follow the cursor. */
static void take_scratch(const struct cpu_task *task, char **cursor,
			 int64_t k, struct cpu_mm_scratch *s)
{
	char *p = *cursor + (size_t)task->ith * scratch_size(k);

	s->ap = take(&p, (size_t)MC * KC * sizeof(float));
	s->tmp = take(&p, scratch_floats(k) * sizeof(float));
	*cursor += (size_t)task->nth * scratch_size(k);
}

/* Bytes of one thread's rows unpacked from an interleaved matrix a (none
 * for any other a). */
static size_t w_rows_size(const struct loom_tensor *a)
{
#if defined(CPU_HAVE_WEIGHTS)
	if (cpu_w_interleaved(a))
		return align_up((size_t)CPU_W_CHUNK * a->nb[1]);
#endif
	(void)a;
	return 0;
}

/* The address of row i1 of batch (i2, i3) of t. */
static inline const char *row_at(const struct loom_tensor *t, int64_t i1,
				 int64_t i2, int64_t i3)
{
	return (const char *)t->data + i1 * t->nb[1] + i2 * t->nb[2] +
	       i3 * t->nb[3];
}

/* ------------------------------------------------------------------------
 * mul_mat.
 */

/* Bytes of b as GEMM panels (gemm) or as contiguous F32 rows. */
static size_t b_size(const struct loom_tensor *b, bool gemm)
{
	int64_t batches = b->ne[2] * b->ne[3];
	int64_t rows = gemm ? div_up(b->ne[1], NR) * NR : b->ne[1];

	return align_up((size_t)batches * rows * b->ne[0] * sizeof(float));
}

static size_t mul_mat_id_lists_size(const struct loom_tensor *dst);

size_t cpu_mul_mat_work_size(const struct loom_tensor *dst, int nth)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0];
	size_t size = ALIGN;

	if (nth < 1)
		nth = 1;
	if (dst->op == LOOM_OP_MUL_MAT_ID) {
		const struct loom_tensor *ids = dst->src[2];
		int64_t pairs = ids->ne[0] * ids->ne[1];

		/* The grouped pairs, then every expert's gathered rows or
		 * panels. */
		size += mul_mat_id_lists_size(dst);
		if (use_q8(a))
			size += q8_size(pairs, k);
		else
			size += align_up((size_t)(pairs + a->ne[2] * NR) * k *
					 sizeof(float));
	} else if (use_amx(a, b->ne[1])) {
		return size + amx_size(b->ne[2] * b->ne[3], b->ne[1], k, nth) +
		       (size_t)nth * w_rows_size(a);
	} else if (use_q8(a)) {
		size += (size_t)nth * w_rows_size(a);
		size += q8_size(b->ne[1] * b->ne[2] * b->ne[3], k);
	} else {
		bool gemm = use_gemm(a, b->ne[1]);

		if (gemm || !b_is_f32_rows(b))
			size += b_size(b, gemm);
	}
	return size + (size_t)nth * scratch_size(k);
}

#if defined(CPU_HAVE_Q8)
/* This thread's rows for w_mm, from the nth that follow the cursor. */
static char *take_w_rows(const struct cpu_task *task, char **cursor,
			 const struct loom_tensor *a)
{
	char *p = *cursor + (size_t)task->ith * w_rows_size(a);

	*cursor += (size_t)task->nth * w_rows_size(a);
	return p;
}

/* The second phase of the products on packed columns: each thread takes
 * its run of batches x parts of the rows of a (parts rounded to align
 * rows) against all the columns of their batch, which lie bytes apart
 * from bp on. */
static void mm_packed_rows(const struct cpu_task *task,
			   struct loom_tensor *dst, cpu_rows_mm *mm,
			   int64_t align, const char *bp, size_t bytes,
			   void *scratch)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t b2 = b->ne[2], batches = b2 * b->ne[3];
	int64_t r2 = b2 / a->ne[2], r3 = b->ne[3] / a->ne[3];
	int64_t mparts = batches < 4 * task->nth ? task->nth : 1;
	int64_t items = batches * mparts;
	int64_t it = items * task->ith / task->nth;
	int64_t it1 = items * (task->ith + 1) / task->nth;

	for (; it < it1; it++) {
		int64_t z = it / mparts, i2 = z % b2, i3 = z / b2, m0, m1;
		struct cpu_cols c = {
			.base = (char *)dst->data + i2 * dst->nb[2] +
				i3 * dst->nb[3],
			.stride = dst->nb[1],
		};

		split_range(a->ne[1], align, mparts, it % mparts, &m0, &m1);
		if (m0 < m1)
			mm(a->type, row_at(a, 0, i2 / r2, i3 / r3), a->nb[1],
			   m0, m1, a->ne[0], bp + z * bytes, b->ne[1], &c,
			   scratch);
	}
}

#if defined(CPU_HAVE_WEIGHTS)
/* What w_mm hands wide products to: a kernel of the usual layout, the
 * thread's rows to unpack into, and the kernel's scratch. */
struct w_scratch {
	cpu_rows_mm *mm;
	char *rows;
	void *scratch;
};

/* cpu_rows_mm on a matrix the weight buffer interleaves: decode straight
 * from its groups; wider products unpack CPU_W_CHUNK rows at a time for
 * the kernel of the usual layout, which then reads them from the cache.
 * m0 and m1 are multiples of its 16 rows. */
static void w_mm(enum loom_type type, const char *a, size_t arow,
		 int64_t m0, int64_t m1, int64_t k, const void *bp, int64_t n,
		 const struct cpu_cols *out, void *scratch)
{
	const struct w_scratch *ws = scratch;
	int64_t m, r;

	if (n <= 3) {
		cpu_w_gv(type, a, arow, m0, m1, k, bp, n, out);
		return;
	}
	for (m = m0; m < m1; m += CPU_W_CHUNK) {
		int64_t rows = m1 - m < CPU_W_CHUNK ? m1 - m : CPU_W_CHUNK;
		struct cpu_cols c = *out;

		c.base += m * sizeof(float);
		for (r = 0; r < rows; r += CPU_W_ROWS)
			cpu_w_unpack(type, a + (m + r) * arow, k,
				     ws->rows + r * arow, arow);
		ws->mm(type, ws->rows, arow, 0, rows, k, bp, n, &c,
		       ws->scratch);
	}
}
#endif

/* The product's rows of a to the threads, through w_mm where a is
 * interleaved. */
static void mm_rows(const struct cpu_task *task, struct loom_tensor *dst,
		    cpu_rows_mm *mm, int64_t align, const char *bp,
		    size_t bytes, void *scratch, char *w_rows)
{
#if defined(CPU_HAVE_WEIGHTS)
	if (cpu_w_interleaved(dst->src[0])) {
		struct w_scratch ws = { mm, w_rows, scratch };

		mm_packed_rows(task, dst, w_mm, align > CPU_W_ROWS ? align :
			       CPU_W_ROWS, bp, bytes, &ws);
		return;
	}
#endif
	(void)w_rows;
	mm_packed_rows(task, dst, mm, align, bp, bytes, scratch);
}

/* Row i1 of batch (i2, i3) of b quantized into q in the groups the
 * weights' type asks for (cpu-types.h); tmp holds a row in conversion. */
static void quantize_b_row(enum loom_type type, const struct loom_tensor *b,
			   int64_t i1, int64_t i2, int64_t i3, char *q,
			   float *tmp)
{
	const float *x = (const float *)row_at(b, i1, i2, i3);

	if (!b_is_f32_rows(b)) {
		to_f32(b->type, (const char *)x, b->nb[0], tmp, b->ne[0]);
		x = tmp;
	}
	cpu_q8_quantize(x, b->ne[0], cpu_type_of(type)->group, q);
}
#endif

/* mul_mat on the int8 kernels: every row of b is quantized once (shared
 * phase), then each thread takes its part of the rows of a against all
 * of b. */
static void mul_mat_q8(const struct cpu_task *task, struct loom_tensor *dst,
		       char *cursor)
{
#if defined(CPU_HAVE_Q8)
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0], n = b->ne[1];
	int64_t b2 = b->ne[2], batches = b2 * b->ne[3], r;
	size_t cb = cpu_q8_col_bytes(k);
	char *qb = take(&cursor, q8_size(batches * n, k));
	struct cpu_mm_scratch s;

	char *w_rows;

	take_scratch(task, &cursor, k, &s);
	w_rows = take_w_rows(task, &cursor, a);
	for (r = task->ith; r < batches * n; r += task->nth)
		quantize_b_row(a->type, b, r % n, r / n % b2, r / n / b2,
			       qb + r * cb, s.tmp);
	cpu_barrier(task);
	mm_rows(task, dst, cpu_q8_mm, 4, qb, n * cb, s.tmp, w_rows);
#else
	(void)task;
	(void)dst;
	(void)cursor;
#endif
}

/* mul_mat on AMX tiles: b becomes panels of 16 columns in BF16 (shared
 * phase), then each thread takes its part of the rows of a against all
 * of b. */
static void mul_mat_amx(const struct cpu_task *task, struct loom_tensor *dst,
			char *cursor)
{
#if defined(CPU_HAVE_AMX)
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0], n = b->ne[1];
	int64_t b2 = b->ne[2], batches = b2 * b->ne[3];
	int64_t per = div_up(n, 16), r;
	size_t bb = cpu_amx_b_bytes(n, k), panel = cpu_amx_b_bytes(16, k);
	char *bp = take(&cursor, (size_t)batches * bb);
	void *scratch = cursor + (size_t)task->ith *
			align_up(cpu_amx_scratch_bytes(k));
	char *w_cursor = cursor + (size_t)task->nth *
			 align_up(cpu_amx_scratch_bytes(k));
	char *w_rows = take_w_rows(task, &w_cursor, a);

	for (r = task->ith; r < batches * per; r += task->nth) {
		int64_t z = r / per, n0 = r % per * 16;
		const char *rows[16];
		int j, nv = n - n0 < 16 ? (int)(n - n0) : 16;

		for (j = 0; j < nv; j++)
			rows[j] = row_at(b, n0 + j, z % b2, z / b2);
		cpu_amx_pack_b(b->type, rows, b->nb[0], nv, k,
			       bp + z * bb + r % per * panel, scratch);
	}
	cpu_barrier(task);
	mm_rows(task, dst, cpu_amx_mm, 32, bp, bb, scratch, w_rows);
#else
	(void)task;
	(void)dst;
	(void)cursor;
#endif
}

/* The shared phase of a float mul_mat: b becomes GEMM panels (of NR
 * rows) or F32 rows at bw, batch z at z * stride. */
static void mm_prepare_b(const struct cpu_task *task,
			 const struct loom_tensor *a,
			 const struct loom_tensor *b, bool gemm, int64_t per,
			 int64_t stride, float *bw, float *tmp)
{
	int64_t k = a->ne[0], n = b->ne[1], b2 = b->ne[2];
	int64_t batches = b2 * b->ne[3], r;
	bool pairs = gemm && cpu_gemm_pairs(a->type, a->nb[0]);

	for (r = task->ith; r < batches * per; r += task->nth) {
		int64_t z = r / per, i1 = r % per;
		int64_t i2 = z % b2, i3 = z / b2;
		float *o = bw + z * stride;

		if (gemm) {
			const char *rows[NR];
			int64_t n0 = i1 * NR;
			int j, nv = n - n0 < NR ? (int)(n - n0) : NR;

			for (j = 0; j < nv; j++)
				rows[j] = row_at(b, n0 + j, i2, i3);
			cpu_pack_b_panel(b->type, rows, b->nb[0], nv, k, pairs,
					 o + n0 * k, tmp);
		} else {
			to_f32(b->type, row_at(b, i1, i2, i3), b->nb[0],
			       o + i1 * k, k);
		}
	}
}

/* Rows [m0, m1) of a float mul_mat's batch z against its b rows from
 * group g of GEMV_NB on (GEMV), or all of them (GEMM); bz is the
 * batch's prepared b, or NULL for b's own F32 rows. */
static void mm_item(const struct loom_tensor *a, const struct loom_tensor *b,
		    struct loom_tensor *dst, bool gemm, int64_t z, int64_t g,
		    int64_t m0, int64_t m1, const float *bz,
		    struct cpu_mm_scratch *s)
{
	int64_t k = a->ne[0], n = b->ne[1], b2 = b->ne[2];
	int64_t i2 = z % b2, i3 = z / b2;
	const char *abase = row_at(a, 0, i2 / (b2 / a->ne[2]),
				   i3 / (b->ne[3] / a->ne[3]));
	char *dbase = (char *)dst->data + i2 * dst->nb[2] + i3 * dst->nb[3];
	const float *bv[GEMV_NB];
	float *out[GEMV_NB];
	int j, nb;

	if (gemm) {
		struct cpu_cols c = { .base = dbase, .stride = dst->nb[1] };

		cpu_gemm_rows(a->type, abase, a->nb[1], a->nb[0], m0, m1, k, bz,
			      n, &c, s);
		return;
	}
	nb = n - g * GEMV_NB < GEMV_NB ? (int)(n - g * GEMV_NB) : GEMV_NB;
	for (j = 0; j < nb; j++) {
		int64_t i1 = g * GEMV_NB + j;

		bv[j] = bz ? bz + i1 * k : (const float *)row_at(b, i1, i2, i3);
		out[j] = (float *)(dbase + i1 * dst->nb[1]);
	}
	cpu_gemv(a, abase, m0, m1, bv, nb, out, s->tmp);
}

void cpu_op_mul_mat(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *a = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = a->ne[0], m = a->ne[1], n = b->ne[1];
	int64_t batches = b->ne[2] * b->ne[3];
	bool gemm = use_gemm(a, n);
	int64_t per = gemm ? div_up(n, NR) : n;
	int64_t stride = per * (gemm ? NR : 1) * k;
	char *cursor = work_base(task);
	float *bw = NULL;
	struct cpu_mm_scratch s;
	int64_t ngroups, mparts, items, it, it1;

	if (use_amx(a, n)) {
		mul_mat_amx(task, dst, cursor);
		return;
	}
	if (use_q8(a)) {
		mul_mat_q8(task, dst, cursor);
		return;
	}
	if (gemm || !b_is_f32_rows(b))
		bw = take(&cursor, b_size(b, gemm));
	take_scratch(task, &cursor, k, &s);

	/* Shared phase: b becomes panels (GEMM) or F32 rows (GEMV). */
	if (bw) {
		mm_prepare_b(task, a, b, gemm, per, stride, bw, s.tmp);
		cpu_barrier(task);
	}

	/* Items: batches x groups of b rows x parts of m, in contiguous
	 * runs per thread. */
	ngroups = gemm ? 1 : div_up(n, GEMV_NB);
	mparts = batches * ngroups < 4 * task->nth ? task->nth : 1;
	items = batches * ngroups * mparts;
	it = items * task->ith / task->nth;
	it1 = items * (task->ith + 1) / task->nth;
	for (; it < it1; it++) {
		int64_t z = it / (ngroups * mparts);
		int64_t m0, m1;

		split_range(m, gemm ? MR : 16, mparts, it % mparts, &m0, &m1);
		if (m0 < m1)
			mm_item(a, b, dst, gemm, z, it / mparts % ngroups, m0,
				m1, bw ? bw + z * stride : NULL, &s);
	}
}

/* ------------------------------------------------------------------------
 * mul_mat_id: the (slot, token) pairs are grouped by expert, so that each
 * expert's weights stream once for all the tokens that chose it.
 */

struct id_lists {
	int64_t *count; /* pairs per expert */
	int64_t *first; /* index of each expert's first pair in pairs[] */
	int64_t *pos;   /* where the next pair of each expert goes */
	int64_t *pairs; /* e + n_used * t, grouped by expert */
	int64_t *offs;  /* the byte offset in dst of each pair's row */
};

static size_t mul_mat_id_lists_size(const struct loom_tensor *dst)
{
	const struct loom_tensor *ids = dst->src[2];

	return align_up((size_t)(3 * dst->src[0]->ne[2] +
				 2 * ids->ne[0] * ids->ne[1]) *
			sizeof(int64_t));
}

static int32_t expert_of(const struct loom_tensor *ids, int64_t p)
{
	int32_t x;

	memcpy(&x, (const char *)ids->data + (p % ids->ne[0]) * ids->nb[0] +
		   (p / ids->ne[0]) * ids->nb[1], sizeof(x));
	return x;
}

/* Groups the pairs by expert with a counting sort, so tokens stay in
 * order within an expert.  A pair whose expert is out of range gets its
 * row of zeros here (loom.h promises it). */
static void group_pairs(const struct loom_tensor *dst, struct id_lists *l)
{
	const struct loom_tensor *ids = dst->src[2];
	int64_t n_expert = dst->src[0]->ne[2], n_used = ids->ne[0];
	int64_t pairs = n_used * ids->ne[1];
	int64_t x, p, next = 0;

	memset(l->count, 0, n_expert * sizeof(int64_t));
	for (p = 0; p < pairs; p++) {
		x = expert_of(ids, p);
		if (x >= 0 && x < n_expert)
			l->count[x]++;
		else
			memset((char *)dst->data + p % n_used * dst->nb[1] +
			       p / n_used * dst->nb[2], 0,
			       dst->ne[0] * sizeof(float));
	}
	for (x = 0; x < n_expert; x++) {
		l->first[x] = next;
		l->pos[x] = next;
		next += l->count[x];
	}
	for (p = 0; p < pairs; p++) {
		x = expert_of(ids, p);
		if (x < 0 || x >= n_expert)
			continue;
		l->pairs[l->pos[x]] = p;
		l->offs[l->pos[x]++] = p % n_used * dst->nb[1] +
				       p / n_used * dst->nb[2];
	}
}

/* mul_mat_id on the int8 kernels: the pairs' rows of b quantized in
 * expert order (shared phase), then every thread takes its share of the
 * rows of each expert. */
static void mul_mat_id_q8(const struct cpu_task *task,
			  struct loom_tensor *dst, const struct id_lists *l,
			  char *cursor)
{
#if defined(CPU_HAVE_Q8)
	const struct loom_tensor *as = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	const struct loom_tensor *ids = dst->src[2];
	int64_t k = as->ne[0], m = as->ne[1], n_used = ids->ne[0];
	int64_t pairs = n_used * ids->ne[1], n_expert = as->ne[2];
	size_t cb = cpu_q8_col_bytes(k);
	char *qb = take(&cursor, q8_size(pairs, k));
	struct cpu_mm_scratch s;
	int64_t i, x, total = 0;

	take_scratch(task, &cursor, k, &s);
	for (x = 0; x < n_expert; x++)
		total += l->count[x];
	for (i = task->ith; i < total; i += task->nth) {
		int64_t p = l->pairs[i];

		quantize_b_row(as->type, b, p % n_used % b->ne[1],
			       p / n_used, 0, qb + i * cb, s.tmp);
	}
	cpu_barrier(task);
	for (x = 0; x < n_expert; x++) {
		struct cpu_cols c = { .base = dst->data,
				      .offs = l->offs + l->first[x] };
		int64_t m0, m1;

		if (!l->count[x])
			continue;
		split_range(m, 4, task->nth, task->ith, &m0, &m1);
		if (m0 < m1)
			cpu_q8_mm(as->type, (const char *)as->data +
				  x * as->nb[2], as->nb[1], m0, m1, k,
				  qb + l->first[x] * cb, l->count[x], &c,
				  s.tmp);
	}
#else
	(void)task;
	(void)dst;
	(void)l;
	(void)cursor;
#endif
}

/* The shared phase of a float mul_mat_id: each expert's b rows become
 * GEMM panels or gathered F32 rows, at offset (first + x * NR) * k. */
static void id_prepare_b(const struct cpu_task *task,
			 const struct loom_tensor *dst,
			 const struct id_lists *l, float *bw, float *tmp)
{
	const struct loom_tensor *as = dst->src[0];
	const struct loom_tensor *b = dst->src[1];
	int64_t k = as->ne[0], n_expert = as->ne[2];
	int64_t n_used = dst->src[2]->ne[0], x, r;

	for (x = 0, r = 0; x < n_expert; x++) {
		int64_t cnt = l->count[x];
		const int64_t *px = l->pairs + l->first[x];
		bool gemm = use_gemm(as, cnt);
		float *o = bw + (l->first[x] + x * NR) * k;
		int64_t u, nu = gemm ? div_up(cnt, NR) : cnt;

		for (u = 0; u < nu; u++, r++) {
			const char *rows[NR];
			int j, nv;

			if (r % task->nth != task->ith)
				continue;
			if (!gemm) {
				to_f32(b->type, row_at(b, px[u] % n_used %
						       b->ne[1],
						       px[u] / n_used, 0),
				       b->nb[0], o + u * k, k);
				continue;
			}
			nv = cnt - u * NR < NR ? (int)(cnt - u * NR) : NR;
			for (j = 0; j < nv; j++) {
				int64_t pr = px[u * NR + j];

				rows[j] = row_at(b, pr % n_used % b->ne[1],
						 pr / n_used, 0);
			}
			cpu_pack_b_panel(b->type, rows, b->nb[0], nv, k,
					 cpu_gemm_pairs(as->type, as->nb[0]),
					 o + u * NR * k, tmp);
		}
	}
}

/* This thread's share of the rows of expert x against its cnt prepared
 * b rows o, into dst at offs. */
static void id_expert(const struct cpu_task *task,
		      const struct loom_tensor *as, struct loom_tensor *dst,
		      int64_t x, int64_t cnt, const int64_t *offs,
		      const float *o, struct cpu_mm_scratch *s)
{
	int64_t k = as->ne[0], m = as->ne[1], m0, m1, g;
	const char *abase = (const char *)as->data + x * as->nb[2];

	if (use_gemm(as, cnt)) {
		struct cpu_cols c = { .base = dst->data, .offs = offs };

		split_range(m, MR, task->nth, task->ith, &m0, &m1);
		if (m0 < m1)
			cpu_gemm_rows(as->type, abase, as->nb[1], as->nb[0], m0,
				      m1, k, o, cnt, &c, s);
		return;
	}
	split_range(m, 16, task->nth, task->ith, &m0, &m1);
	if (m0 >= m1)
		return;
	for (g = 0; g < cnt; g += GEMV_NB) {
		const float *bv[GEMV_NB];
		float *out[GEMV_NB];
		int j, nb = cnt - g < GEMV_NB ? (int)(cnt - g) : GEMV_NB;

		for (j = 0; j < nb; j++) {
			bv[j] = o + (g + j) * k;
			out[j] = (float *)((char *)dst->data + offs[g + j]);
		}
		cpu_gemv(as, abase, m0, m1, bv, nb, out, s->tmp);
	}
}

void cpu_op_mul_mat_id(const struct cpu_task *task, struct loom_tensor *dst)
{
	const struct loom_tensor *as = dst->src[0];
	const struct loom_tensor *ids = dst->src[2];
	int64_t k = as->ne[0], n_expert = as->ne[2];
	int64_t pairs = ids->ne[0] * ids->ne[1];
	char *cursor = work_base(task);
	struct id_lists l;
	int64_t *space;
	float *bw;
	struct cpu_mm_scratch s;
	int64_t x;

	space = take(&cursor, mul_mat_id_lists_size(dst));
	l.count = space;
	l.first = space + n_expert;
	l.pos = space + 2 * n_expert;
	l.pairs = space + 3 * n_expert;
	l.offs = l.pairs + pairs;
	if (use_q8(as)) {
		if (task->ith == 0)
			group_pairs(dst, &l);
		cpu_barrier(task);
		mul_mat_id_q8(task, dst, &l, cursor);
		return;
	}
	bw = take(&cursor, (size_t)(pairs + n_expert * NR) * k *
			   sizeof(float));
	take_scratch(task, &cursor, k, &s);

	if (task->ith == 0)
		group_pairs(dst, &l);
	cpu_barrier(task);
	id_prepare_b(task, dst, &l, bw, s.tmp);
	cpu_barrier(task);

	/* Every thread takes its share of the rows of each expert. */
	for (x = 0; x < n_expert; x++)
		if (l.count[x])
			id_expert(task, as, dst, x, l.count[x],
				  l.offs + l.first[x],
				  bw + (l.first[x] + x * NR) * k, &s);
}
