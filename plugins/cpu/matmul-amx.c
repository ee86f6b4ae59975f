/* SPDX-License-Identifier: MIT */
/* matmul-amx.c - wide products on AMX tiles, in the AVX-512 variant
 * where the CPU has AMX-BF16 and the kernel lets the process use it:
 * BF16 weights as they are and quantized weights decoded to BF16,
 * against activations rounded to BF16, summed in F32 by tdpbf16ps.
 *
 * A tile holds 16 rows of 64 bytes.  Weights are the A tiles (16 rows by
 * 32 values of k, rows as they lie in memory), activations the B tiles
 * (16 pairs of k values by 16 columns, packed once for all threads), and
 * the sums the C tiles (16 rows by 16 columns).  Four C tiles take 32
 * rows by 32 columns, so that each step of 32 values of k loads 4 tiles
 * for 4 products.  Rows are decoded a superblock at a time, whose blocks
 * of 32 rows share each pair of column panels while it sits in L2.
 */
#include "matmul-q8.h"

#if defined(CPU_HAVE_AMX)

#include <cpuid.h>
#include <string.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16")))

/* Rows of weights decoded at once (kept in L2), columns per pass over
 * them (their panels in L2 too), and steps of k per pass: 32 rows of
 * one step's run sit in L1 while the columns go by. */
#define SB 128
#define NC 512
#define KS 16

/* Values of k per tile step, and bytes of a tile. */
#define TK 32
#define TILE_BYTES 1024

static inline int64_t kpad(int64_t k)
{
	return div_up(k, TK) * TK;
}

/* ------------------------------------------------------------------------
 * Whether the tiles can be used: the CPU has them, the operating system
 * hands their state to this process, and LOOM_CPU_AMX is not 0.
 */

static bool probe_amx(void)
{
	const char *env = loom_env_get("LOOM_CPU_AMX");
	unsigned int eax, ebx, ecx, edx;

	if (env && strcmp(env, "0") == 0)
		return false;
	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx))
		return false;
	if (!(edx & (1u << 24)) || !(edx & (1u << 22))) /* AMX-TILE, -BF16 */
		return false;
	if (!__builtin_cpu_supports("avx512bf16"))
		return false;
#if defined(__linux__)
	/* Linux gives the 8 KiB of tile data only to processes that ask
	 * (ARCH_REQ_XCOMP_PERM for XTILEDATA); it refuses where the
	 * hypervisor or a small signal stack rules them out. */
	return syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#else
	return false;
#endif
}

bool cpu_amx(void)
{
	static _Atomic int known;

	return cpu_probe_once(&known, probe_amx);
}

bool cpu_amx_supports(enum loom_type type, size_t nb0, int64_t k)
{
	if (type == LOOM_TYPE_BF16)
		return nb0 == sizeof(uint16_t);
	return cpu_q8_supports(type) && k % 32 == 0;
}

size_t cpu_amx_b_bytes(int64_t n, int64_t k)
{
	return (size_t)div_up(n, 16) * 16 * kpad(k) * sizeof(uint16_t);
}

/* Bytes of the sums of SB rows by NC columns, kept between runs of
 * steps. */
#define SUMS_BYTES ((size_t)SB * NC * sizeof(float))

/* The scratch: the sums, a superblock of decoded rows, then 16 rows of
 * BF16 pairs (packing columns), a row of floats and a row's scales. */
size_t cpu_amx_scratch_bytes(int64_t k)
{
	size_t kp = (size_t)kpad(k);

	return SUMS_BYTES + (SB + 16) * kp * sizeof(uint16_t) +
	       kp * sizeof(float) + 2 * (kp / 16) * sizeof(float);
}

/* ------------------------------------------------------------------------
 * Packing.
 */

/* Packs nv <= 16 columns (rows of b of any type, elements nb0 apart)
 * into the panel p: tile s holds, in row i, the pair of values 32 s +
 * 2 i, + 1 of each column, 4 bytes a column.  Missing columns and the
 * values past k are zeros. */
AMX_TARGET void cpu_amx_pack_b(enum loom_type type, const char *const *rows,
			       size_t nb0, int nv, int64_t k, void *p,
			       void *scratch)
{
	const int64_t kp = kpad(k), words = kp / 2;
	uint32_t *w = (uint32_t *)((char *)scratch + SUMS_BYTES +
				   SB * kp * sizeof(uint16_t));
	float *x = (float *)(w + 16 * words);
	int64_t s;
	int c;

	for (c = 0; c < 16; c++) {
		uint32_t *wc = w + c * words;
		int64_t done = 0;

		if (c < nv) {
			const float *src = (const float *)rows[c];

			if (type != LOOM_TYPE_F32 || nb0 != sizeof(float)) {
				cpu_load_f32(type, rows[c], nb0, x, k);
				src = x;
			}
			cpu_f32_to_bf16_pairs(src, k, wc);
			done = (k + 1) / 2;
		}
		memset(wc + done, 0, (size_t)(words - done) * sizeof(*wc));
	}
	for (s = 0; s < kp / TK; s++) {
		__m512 v[16];

		for (c = 0; c < 16; c++)
			v[c] = _mm512_loadu_ps((const void *)(w + c * words +
							      16 * s));
		cpu_transpose16_ps(v);
		for (c = 0; c < 16; c++)
			_mm512_store_ps((char *)p + s * TILE_BYTES + 64 * c,
					v[c]);
	}
}

/* A row of weights (k values) as BF16 in tile rows: values 32 s .. 32 s
 * + 31 at dst + s * TILE_BYTES, zeros past k; rs holds the row's
 * scales. */
static AMX_TARGET void decode_row(const enum loom_type type, const char *row,
				  int64_t k, char *dst, float *rs)
{
	int64_t j;

	if (type == LOOM_TYPE_BF16) {
		const uint16_t *src = (const uint16_t *)row;

		for (j = 0; j < k / TK; j++)
			_mm512_storeu_si512((void *)(dst + j * TILE_BYTES),
					    _mm512_loadu_si512((const void *)(
						    src + TK * j)));
		if (k % TK) {
			const __mmask32 mask = (__mmask32)((1u << (k % TK)) - 1);

			_mm512_storeu_si512((void *)(dst + j * TILE_BYTES),
					    _mm512_maskz_loadu_epi16(
						    mask, src + TK * j));
		}
		return;
	}
	cpu_q8_row_scales(type, row, k, rs, rs + k / 16);
	for (j = 0; j < k / 32; j++) {
		__m256i u = block_u8(type, row, j);
		__m128i u0 = _mm256_castsi256_si128(u);
		__m128i u1 = _mm256_extracti128_si256(u, 1);
		__m512 lo, hi;

		if (cpu_types[type].is_signed) {
			lo = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(u0));
			hi = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(u1));
		} else {
			lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(u0));
			hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(u1));
		}
		lo = _mm512_fmsub_ps(lo, _mm512_set1_ps(rs[2 * j]),
				     _mm512_set1_ps(rs[k / 16 + 2 * j]));
		hi = _mm512_fmsub_ps(hi, _mm512_set1_ps(rs[2 * j + 1]),
				     _mm512_set1_ps(rs[k / 16 + 2 * j + 1]));
		_mm512_storeu_si512((void *)(dst + j * TILE_BYTES),
				    (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
	}
}

/* ------------------------------------------------------------------------
 * The tiles.
 */

/* The palette-1 layout of the tile registers (the format ldtilecfg
 * reads): every tile 16 rows of 64 bytes. */
struct tile_config {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

static AMX_TARGET void tiles_on(void)
{
	struct tile_config c __attribute__((aligned(64)));
	int i;

	memset(&c, 0, sizeof(c));
	c.palette = 1;
	for (i = 0; i < 8; i++) {
		c.colsb[i] = 64;
		c.rows[i] = 16;
	}
	/* The stores above must reach memory first: not every compiler
	 * sees that ldtilecfg reads it. */
	__asm__ __volatile__("" : : "r"(&c) : "memory");
	_tile_loadconfig(&c);
}

/* C tiles 0-3 += the two groups of 16 decoded rows at a0 and a1 times
 * the column panels b0 and b1 (b1 only with two), over steps [s0, s1)
 * of 32 values; the sums, tile i at c + 256 i, are loaded from c (zeros
 * when s0 is 0) and stored to to. */
static inline AMX_TARGET __attribute__((always_inline)) void
block(const char *a0, const char *a1, const char *b0, const char *b1,
      const bool two, int64_t s0, int64_t s1, const float *c, float *to)
{
	int64_t s;

	if (s0) {
		_tile_loadd(0, c, 64);
		_tile_loadd(2, c + 512, 64);
		if (two) {
			_tile_loadd(1, c + 256, 64);
			_tile_loadd(3, c + 768, 64);
		}
	} else {
		_tile_zero(0);
		_tile_zero(2);
		if (two) {
			_tile_zero(1);
			_tile_zero(3);
		}
	}
	for (s = s0; s < s1; s++) {
		_tile_loadd(4, a0 + s * TILE_BYTES, 64);
		_tile_loadd(6, b0 + s * TILE_BYTES, 64);
		_tile_dpbf16ps(0, 4, 6);
		_tile_loadd(5, a1 + s * TILE_BYTES, 64);
		_tile_dpbf16ps(2, 5, 6);
		if (two) {
			_tile_loadd(7, b1 + s * TILE_BYTES, 64);
			_tile_dpbf16ps(1, 4, 7);
			_tile_dpbf16ps(3, 5, 7);
		}
	}
	_tile_stored(0, to, 64);
	_tile_stored(2, to + 512, 64);
	if (two) {
		_tile_stored(1, to + 256, 64);
		_tile_stored(3, to + 768, 64);
	}
}

/* Writes tile t (16 rows by 16 columns at t) to columns j .. j + nc,
 * rows m .. m + nr of out. */
static inline __attribute__((always_inline)) void put_tile(const float *t, const struct cpu_cols *out,
			    int64_t j, int nc, int64_t m, int nr)
{
	const __mmask16 mask = (__mmask16)((1u << nr) - 1);
	__m512 v[16];
	int i;

	for (i = 0; i < 16; i++)
		v[i] = _mm512_load_ps(t + 16 * i);
	cpu_transpose16_ps(v);
	for (i = 0; i < nc; i++)
		_mm512_mask_storeu_ps(cpu_cols_at(out, j + i) + m, mask, v[i]);
}

/* Writes the sums c of rows [m, m + rows) (rows <= 32) by columns
 * [j, j + nc) (nc <= 32) to out. */
static inline __attribute__((always_inline)) void
put_block(const float *c, const struct cpu_cols *out, int64_t j,
		      int nc, int64_t m, int rows)
{
	int top = rows < 16 ? rows : 16, left = nc < 16 ? nc : 16;

	put_tile(c, out, j, left, m, top);
	if (nc > 16)
		put_tile(c + 256, out, j + 16, nc - 16, m, top);
	if (rows <= 16)
		return;
	put_tile(c + 512, out, j, left, m + 16, rows - 16);
	if (nc > 16)
		put_tile(c + 768, out, j + 16, nc - 16, m + 16, rows - 16);
}

AMX_TARGET void cpu_amx_mm(enum loom_type type, const char *a, size_t arow,
			   int64_t m0, int64_t m1, int64_t k, const void *bp,
			   int64_t n, const struct cpu_cols *out,
			   void *scratch)
{
	const int64_t kp = kpad(k), steps = kp / TK;
	const size_t panel = (size_t)16 * kp * sizeof(uint16_t);
	const size_t group = (size_t)steps * TILE_BYTES;
	float *sums = scratch;
	char *ab = (char *)scratch + SUMS_BYTES;
	float *rs = (float *)(ab + (SB + 16) * kp * sizeof(uint16_t)) + kp;
	float last[1024] __attribute__((aligned(64)));
	int64_t m, jc, s0, j, r;

	tiles_on();
	for (m = m0; m < m1; m += SB) {
		int64_t nr = m1 - m < SB ? m1 - m : SB;
		int64_t padded = div_up(nr, 32) * 32;

		/* Decoded rows lie in groups of 16, each a run of tiles. */
		for (r = 0; r < nr; r++)
			decode_row(type, a + (m + r) * arow, k,
				   ab + r / 16 * group + r % 16 * 64, rs);
		for (; r < padded; r++) {
			int64_t s;

			for (s = 0; s < steps; s++)
				memset(ab + r / 16 * group + r % 16 * 64 +
					       s * TILE_BYTES,
				       0, 64);
		}
		for (jc = 0; jc < n; jc += NC) {
			int64_t j1 = n - jc < NC ? n : jc + NC;

			for (s0 = 0; s0 < steps; s0 += KS) {
				int64_t s1 = steps - s0 < KS ? steps : s0 + KS;
				int64_t mb;

				for (mb = 0; mb < nr; mb += 32) {
					const char *a0 = ab + mb / 16 * group;
					int rows = nr - mb < 32 ? (int)(nr - mb)
								: 32;

					for (j = jc; j < j1; j += 32) {
						const char *b0 =
							(const char *)bp +
							(j / 16) * panel;
						float *c = sums +
							   (mb / 32 * (NC / 32) +
							    (j - jc) / 32) *
								   1024;
						int nc = j1 - j < 32
								 ? (int)(j1 - j)
								 : 32;

						float *to = s1 == steps ? last : c;

						if (nc > 16)
							block(a0, a0 + group, b0,
							      b0 + panel, true, s0,
							      s1, c, to);
						else
							block(a0, a0 + group, b0,
							      b0, false, s0, s1,
							      c, to);
						if (s1 == steps)
							put_block(last, out, j, nc,
								  m + mb, rows);
					}
				}
			}
		}
	}
	_tile_release();
}

#endif /* CPU_HAVE_AMX */
