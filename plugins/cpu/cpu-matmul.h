/* SPDX-License-Identifier: MIT */
/* cpu-matmul.h - what the CPU plugin's matrix kernels share: the tile
 * and cache-block sizes, where a product writes its columns, and the
 * entry points of the GEMM (matmul-gemm.c), the float GEMV
 * (matmul-gemv.c) and the quantized kernels (matmul-q8.c, built where
 * the variant has AVX2, FMA and F16C).  ops-matmul.c divides the work.
 */
#ifndef LOOM_CPU_MATMUL_H
#define LOOM_CPU_MATMUL_H

#include "cpu-ops.h"
#include "cpu-types.h"

#include <stdatomic.h>

/* Micro-kernel tile (MR rows of a by NR rows of b), cache blocks (an
 * MC x KC block of packed a stays in L2 while KC x NR panels of b pass
 * through L1) and how many k steps ahead the micro-kernel fetches a. */
#if defined(__AVX512F__)
#define MR 32
#define NR 12
#define KC 384
#define MC 768
#define PFD 8
#elif defined(__AVX2__) && defined(__FMA__)
#define MR 16
#define NR 6
#define KC 256
#define MC 512
#else
#define MR 8
#define NR 4
#define KC 256
#define MC 256
#endif

/* Rows of b up to which the streaming GEMV beats packing for the GEMM. */
#define GEMV_NB 8

#define ALIGN 64

/* Fully unrolls a loop of constant trip count. */
#define UNROLL _Pragma("GCC unroll 16")

/* What probe() says, asked once: known starts at 0 and keeps 1 for no,
 * 2 for yes.  CPUID can cost microseconds (a virtual machine's
 * hypervisor answers it), and a decode step does hundreds of products. */
static inline bool cpu_probe_once(_Atomic int *known, bool (*probe)(void))
{
	int v = atomic_load_explicit(known, memory_order_relaxed);

	if (!v) {
		v = probe() ? 2 : 1;
		atomic_store_explicit(known, v, memory_order_relaxed);
	}
	return v == 2;
}

static inline size_t align_up(size_t n)
{
	return (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
}

static inline int64_t div_up(int64_t a, int64_t b)
{
	return (a + b - 1) / b;
}

/* Byte offset of element k of a row (k on a block boundary). */
static inline size_t row_offset(enum loom_type type, int64_t k, size_t nb0)
{
	return (size_t)(k / loom_type_block_size(type)) * nb0;
}

/* Converts n values of a row to F32 (see cpu_load_f32). */
#define to_f32 cpu_load_f32

/* Scratch of one thread: an a block in packing and rows in conversion. */
struct cpu_mm_scratch {
	float *ap;  /* MC x KC */
	float *tmp; /* rows in conversion, see scratch_floats() */
};

/* Where a product writes: column j (a row of dst) starts at base +
 * offs[j] bytes, or base + j * stride when offs is NULL. */
struct cpu_cols {
	char *base;
	size_t stride;
	const int64_t *offs;
};

static inline float *cpu_cols_at(const struct cpu_cols *c, int64_t j)
{
	return (float *)(c->base + (c->offs ? (size_t)c->offs[j] :
					      (size_t)j * c->stride));
}

/* Whether the GEMM of weights of type (elements nb0 bytes apart) runs on
 * BF16 pairs: BF16 rows, where the CPU has the BF16 dot product.  Its
 * panels of b must then be packed as pairs (cpu_pack_b_panel). */
bool cpu_gemm_pairs(enum loom_type type, size_t nb0);
/* Columns [0, nb) of c, rows [m0, m1) = rows of a (arow bytes apart,
 * elements nb0 apart, any type) times the nb rows of b packed into
 * panels bp by cpu_pack_b_panel (NR rows per panel, NR x k entries of 4
 * bytes apart), as pairs when cpu_gemm_pairs(type, nb0). */
void cpu_gemm_rows(enum loom_type type, const char *a, size_t arow,
		   size_t nb0, int64_t m0, int64_t m1, int64_t k,
		   const float *bp, int64_t nb, const struct cpu_cols *c,
		   const struct cpu_mm_scratch *s);
/* Packs nv <= NR rows of b (any type; row j at rows[j], elements nb0
 * bytes apart) into the panel p laid out [k][NR] of F32, or with pairs
 * [k / 2 rounded up][NR] of BF16 pairs; zero-padded.  tmp holds NR x k
 * floats for rows that need converting. */
void cpu_pack_b_panel(enum loom_type type, const char *const *rows,
		      size_t nb0, int nv, int64_t k, bool pairs,
		      float *restrict p, float *restrict tmp);
/* out[j][m] = dot(row m of a, bv[j]) for m in [m0, m1), j < nb <=
 * GEMV_NB: rows of a (at base, a->nb[1] apart) of any type; those the
 * row kernels cannot read as they are go through F32 in tmp. */
void cpu_gemv(const struct loom_tensor *a, const char *base, int64_t m0,
	      int64_t m1, const float *const *bv, int nb, float *const *out,
	      float *tmp);

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define CPU_HAVE_Q8 1

/* Whether cpu_q8_mm takes weights of type. */
bool cpu_q8_supports(enum loom_type type);
/* Bytes of one activation row of k values (k a multiple of 32) once
 * quantized by cpu_q8_quantize. */
size_t cpu_q8_col_bytes(int64_t k);
/* Quantizes k floats to 8 bits per value into out (cpu_q8_col_bytes(k)
 * bytes): a scale per 32 values, the same for each group of values (32
 * or 256, k a multiple of it).  Products with K-quant weights take
 * groups of 256, their super-block, which the integer sums of their
 * decode kernel need. */
void cpu_q8_quantize(const float *x, int64_t k, int64_t group, char *out);
/* Floats of scratch cpu_q8_mm needs for rows of k values. */
size_t cpu_q8_tmp_floats(int64_t k);
/* The kernels on packed columns: columns [0, n), rows [m0, m1) of out =
 * rows of a (arow bytes apart, of a type the kernel supports) times the n
 * columns of k values packed at bp, with the kernel's scratch. */
typedef void cpu_rows_mm(enum loom_type type, const char *a, size_t arow,
			 int64_t m0, int64_t m1, int64_t k, const void *bp,
			 int64_t n, const struct cpu_cols *out, void *scratch);

/* Columns packed by cpu_q8_quantize, column j at bp +
 * j * cpu_q8_col_bytes(k); the scratch is cpu_q8_tmp_floats(k) floats. */
cpu_rows_mm cpu_q8_mm;
#endif

#if defined(CPU_HAVE_Q8) && defined(__AVX512BW__) && defined(__x86_64__)
#define CPU_HAVE_AMX 1

/* Columns from which a product takes the AMX tiles. */
#define AMX_MIN 16

/* Whether the CPU has AMX-BF16 and the process may use it (found once;
 * LOOM_CPU_AMX=0 says no). */
bool cpu_amx(void);
/* Whether cpu_amx_mm takes weights of type (elements nb0 apart, rows of
 * k values). */
bool cpu_amx_supports(enum loom_type type, size_t nb0, int64_t k);
/* Bytes of n columns of k values packed by cpu_amx_pack_b, and of one
 * thread's scratch. */
size_t cpu_amx_b_bytes(int64_t n, int64_t k);
size_t cpu_amx_scratch_bytes(int64_t k);
/* Packs nv <= 16 columns (rows of b of any type at rows[], elements nb0
 * apart) as BF16 into the panel p; the panel of columns 16 i starts
 * cpu_amx_b_bytes(16 i, k) bytes in. */
void cpu_amx_pack_b(enum loom_type type, const char *const *rows,
		    size_t nb0, int nv, int64_t k, void *p, void *scratch);
/* Columns packed by cpu_amx_pack_b; the scratch is
 * cpu_amx_scratch_bytes(k). */
cpu_rows_mm cpu_amx_mm;
#endif

#if defined(CPU_HAVE_Q8) && defined(__AVX512BW__)
#define CPU_HAVE_WEIGHTS 1

/* The weight buffer's matrices (cpu-weights.c): rows per group, and
 * rows a wide product unpacks at a time for the kernels of the usual
 * layout. */
#define CPU_W_ROWS 16
#define CPU_W_CHUNK 128

/* Whether t is such a matrix (stored interleaved). */
bool cpu_w_interleaved(const struct loom_tensor *t);
/* 16 rows of k values (arow bytes apart) of type to one group, and
 * back. */
void cpu_w_pack(enum loom_type type, const char *rows, size_t arow,
		int64_t k, char *group);
void cpu_w_unpack(enum loom_type type, const char *group, int64_t k,
		  char *rows, size_t arow);
/* Rows [m0, m1) (multiples of 16) of the interleaved matrix at a, rows
 * of k values and arow bytes, against n <= 3 columns packed by
 * cpu_q8_quantize at qb; needs VNNI (matmul-w.c). */
void cpu_w_gv(enum loom_type type, const char *a, size_t arow, int64_t m0,
	      int64_t m1, int64_t k, const char *qb, int64_t n,
	      const struct cpu_cols *out);
#endif

#endif
