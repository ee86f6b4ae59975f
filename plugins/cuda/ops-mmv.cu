/* SPDX-License-Identifier: MIT */
/* ops-mmv.cu - a matrix times a few vectors, as decode needs it: mul_mat
 * with up to MMV_MAX_COLS columns and mul_mat_id for a few tokens.  One
 * warp per row of weights reads that row once for all the columns of its
 * group.  Quantized rows are staged in shared memory by 16-byte loads and
 * multiplied with dp4a against activations quantized to 8 bits per 32
 * values (a float scale each); float rows are read 16 bytes at a time
 * and multiplied in F32.  The GEMM paths are in ops-matmul.cu.  The
 * kernels assume 32-lane warps: the HIP build (64-lane wavefronts on most
 * AMD GPUs) declines, and its products take the other paths.
 */
#include "ops-common.cuh"

#ifdef LOOM_HIP
int cuda_mmv(struct cuda_backend *be, const tview &dst, const tview &a,
	     const tview &b, const tview &ids, int mode)
{
	return LOOM_E_DECLINED;
}
#else

#define MMV_WARPS 4 /* rows per block */

struct mmv_args {
	tview dst, a, b, ids;
	const int8_t *qy; /* quantized activations, a row of K per row of b */
	const float *dy;  /* their scales, K / 32 per row of b */
	int mode;         /* CUDA_MMV_MAT or CUDA_MMV_ID */
	int64_t n_groups;
	bool aligned; /* every row of a (and, for float a, of b) is 16-byte
		       * aligned */
};

/* What one group of columns works on: its weight matrix, the row of b of
 * its first column and how many columns it has (0 for an expert id out of
 * range, whose rows of dst get zeros). */
struct mmv_group {
	const char *w;
	int64_t col0;
	int nc;
	int64_t n0, i2, i3; /* where its first result goes */
};

template <int NC>
__device__ __forceinline__ mmv_group mmv_resolve(const mmv_args &p, int64_t g)
{
	mmv_group r;

	if (p.mode == CUDA_MMV_MAT) {
		const int64_t N = p.b.ne[1], B2 = p.b.ne[2];
		const int64_t ncg = (N + NC - 1) / NC;
		const int64_t z = g / ncg;
		const int64_t r2 = B2 / p.a.ne[2], r3 = p.b.ne[3] / p.a.ne[3];

		r.n0 = g % ncg * NC;
		r.i2 = z % B2;
		r.i3 = z / B2;
		r.nc = (int)(N - r.n0 < NC ? N - r.n0 : NC);
		r.w = p.a.data + r.i2 / r2 * p.a.nb[2] + r.i3 / r3 * p.a.nb[3];
		r.col0 = z * N + r.n0;
	} else {
		/* dst [M, n_used, n_tokens]: slot n0 of token i2. */
		const int64_t n_used = p.dst.ne[1];
		int32_t e;

		r.n0 = g % n_used;
		r.i2 = g / n_used;
		r.i3 = 0;
		e = *(const int32_t *)(p.ids.data + r.n0 * p.ids.nb[0] +
				       r.i2 * p.ids.nb[1]);
		r.nc = e >= 0 && e < p.a.ne[2] ? 1 : 0;
		r.w = p.a.data + (r.nc ? e : 0) * p.a.nb[2];
		r.col0 = r.i2 * p.b.ne[1] + r.n0 % p.b.ne[1];
	}
	return r;
}

/* Sums v over the warp; every lane gets the sum. */
__device__ __forceinline__ float warp_sum(float v)
{
#pragma unroll
	for (int off = 16; off > 0; off >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, off);
	return v;
}

/* Writes the group's results of row m (lane 0 holds the sums). */
template <int NC>
__device__ __forceinline__ void mmv_store(const mmv_args &p,
					  const mmv_group &r, int64_t m,
					  float *acc)
{
#pragma unroll
	for (int n = 0; n < NC; n++)
		acc[n] = warp_sum(acc[n]);
	if (threadIdx.x % 32)
		return;
	if (p.mode == CUDA_MMV_ID) {
		store_row(row_ptr(p.dst, r.n0, r.i2, 0), p.dst, m, acc[0]);
		return;
	}
#pragma unroll
	for (int n = 0; n < NC; n++)
		if (n < r.nc)
			store_row(row_ptr(p.dst, r.n0 + n, r.i2, r.i3), p.dst,
				  m, acc[n]);
}

/* ------------------------------------------------------------------------
 * Quantized weights.
 */

/* Blocks staged per step, a multiple of 16 bytes: 64 for the types of
 * 32 values (1088-2176 bytes, 64 units of 32 values), 16 for the K-quants
 * (1344-3360 bytes, 128 units); each lane takes several units.  What a
 * warp has in flight sets the bandwidth: on an H200, 576-byte steps
 * (Q4_0, Q4_K) read 37-40% of the copy bandwidth, these 54-79%; twice as
 * many blocks gave no more. */
template <int T> struct qstage {
	enum {
		blocks = qtraits<T>::blck == 32 ? 64 : 16,
		bytes = blocks * qtraits<T>::size,
	};
	static_assert(bytes % 16 == 0, "a step of whole 16-byte loads");
};

template <int T, int NC>
__global__ void __launch_bounds__(MMV_WARPS * 32) mmv_q_kernel(mmv_args p)
{
	constexpr int BS = qtraits<T>::size, BK = qtraits<T>::blck;
	constexpr int G = qstage<T>::blocks, UPB = BK / 32;
	__shared__ __align__(16) uint8_t stage[MMV_WARPS][qstage<T>::bytes];
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int64_t M = p.a.ne[1], K = p.a.ne[0], nblk = K / BK;
	const int64_t m = (int64_t)blockIdx.x * MMV_WARPS + warp;
	uint8_t *sm = stage[warp];

	if (m >= M)
		return; /* the whole warp: only __syncwarp below */
	for (int64_t g = blockIdx.y; g < p.n_groups; g += gridDim.y) {
		const mmv_group r = mmv_resolve<NC>(p, g);
		float acc[NC];

#pragma unroll
		for (int n = 0; n < NC; n++)
			acc[n] = 0.0f;
		const uint8_t *row = (const uint8_t *)r.w + m * p.a.nb[1];

		for (int64_t cb = 0; r.nc && cb < nblk; cb += G) {
			const int nbh = (int)(nblk - cb < G ? nblk - cb : G);
			const int bytes = nbh * BS;
			const uint8_t *src = row + cb * BS;
			int done = 0;

			/* Stage the blocks: 16 bytes a lane where the row is
			 * aligned (every step starts aligned: G * BS is a
			 * multiple of 16), 2 bytes for the rest (1 for
			 * MXFP4's 17-byte blocks). */
			if (p.aligned) {
#pragma unroll 4
				for (int i = lane; i < bytes / 16; i += 32)
					((int4 *)sm)[i] =
						__ldg((const int4 *)src + i);
				done = bytes / 16 * 16;
			}
			if (BS % 2)
				for (int i = done + lane; i < bytes; i += 32)
					sm[i] = src[i];
			else
				for (int i = done / 2 + lane; i < bytes / 2;
				     i += 32)
					((uint16_t *)sm)[i] =
						((const uint16_t *)src)[i];
			__syncwarp();
			for (int u = lane; u < nbh * UPB; u += 32) {
				const uint8_t *blk = sm + u / UPB * BS;
				const int64_t kb = cb * UPB + u;
				int w[8];

				unit_weights<T>(blk, u % UPB, w);
#pragma unroll
				for (int n = 0; n < NC; n++) {
					if (n >= r.nc)
						break;
					const int64_t c = r.col0 + n;
					const int4 *yq = (const int4 *)(p.qy + c * K +
									kb * 32);
					int4 y0 = yq[0], y1 = yq[1];
					int y[8] = { y0.x, y0.y, y0.z, y0.w,
						     y1.x, y1.y, y1.z, y1.w };

					acc[n] += unit_dot<T>(
						blk, u % UPB, w, y,
						p.dy[c * (K / 32) + kb]);
				}
			}
			__syncwarp();
		}
		mmv_store<NC>(p, r, m, acc);
	}
}

/* Activations to 8 bits: a warp per 32 values of a row of b; d =
 * max|x| / 127, q = round(x / d).  A NaN quantizes to 0, and 32 values
 * holding an inf to zeros: neither is carried into the products. */
__global__ void quantize_act_kernel(tview b, int8_t *qy, float *dy,
				    int64_t n_units)
{
	const int64_t K = b.ne[0], per_row = K / 32;
	const int lane = threadIdx.x % 32;
	const int64_t stride = (int64_t)gridDim.x * blockDim.x / 32;

	for (int64_t u = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
	     u < n_units; u += stride) {
		const int64_t r = u / per_row, kb = u % per_row;
		int64_t i1, i2, i3;

		row_index(r, b.ne, &i1, &i2, &i3);
		float x = load_row(row_ptr(b, i1, i2, i3), b, kb * 32 + lane);
		float amax = fabsf(x);

#pragma unroll
		for (int off = 16; off > 0; off >>= 1)
			amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax,
							   off));
		float d = amax / 127.0f;
		float id = d > 0.0f && d <= 3.0e38f ? 1.0f / d : 0.0f;
		float q = x == x ? fminf(fmaxf(rintf(x * id), -127.0f),
					 127.0f) : 0.0f;

		qy[r * K + kb * 32 + lane] = (int8_t)q;
		if (lane == 0)
			dy[u] = id != 0.0f ? d : 0.0f;
	}
}

/* ------------------------------------------------------------------------
 * Float weights, F32 activations.
 */

/* The VEC values of a 16-byte load of type T as float. */
template <int T>
__device__ __forceinline__ void unpack16(int4 raw, float *v)
{
	const uint32_t u[4] = { (uint32_t)raw.x, (uint32_t)raw.y,
				(uint32_t)raw.z, (uint32_t)raw.w };

#pragma unroll
	for (int i = 0; i < 4; i++) {
		if (T == LOOM_TYPE_F32) {
			v[i] = __uint_as_float(u[i]);
		} else if (T == LOOM_TYPE_F16) {
			v[2 * i] = half_to_float((uint16_t)u[i]);
			v[2 * i + 1] = half_to_float((uint16_t)(u[i] >> 16));
		} else {
			v[2 * i] = __uint_as_float(u[i] << 16);
			v[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
		}
	}
}

template <int T, int NC>
__global__ void __launch_bounds__(MMV_WARPS * 32) mmv_f_kernel(mmv_args p)
{
	constexpr int VEC = T == LOOM_TYPE_F32 ? 4 : 8;
	constexpr int ES = T == LOOM_TYPE_F32 ? 4 : 2;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	const int64_t M = p.a.ne[1], K = p.a.ne[0];
	const int64_t m = (int64_t)blockIdx.x * MMV_WARPS + warp;
	const int64_t kvec = p.aligned ? K / VEC * VEC : 0;

	if (m >= M)
		return;
	for (int64_t g = blockIdx.y; g < p.n_groups; g += gridDim.y) {
		const mmv_group r = mmv_resolve<NC>(p, g);
		const char *row = r.w + m * p.a.nb[1];
		const float *y[NC];
		float acc[NC];

#pragma unroll
		for (int n = 0; n < NC; n++) {
			int64_t i1, i2, i3;

			row_index(r.col0 + (n < r.nc ? n : 0), p.b.ne, &i1,
				  &i2, &i3);
			y[n] = (const float *)row_ptr(p.b, i1, i2, i3);
			acc[n] = 0.0f;
		}
		if (!r.nc) {
			mmv_store<NC>(p, r, m, acc);
			continue;
		}
		/* Unrolled so that several loads of a lane are in flight. */
#pragma unroll 4
		for (int64_t k = (int64_t)lane * VEC; k < kvec;
		     k += 32 * VEC) {
			float wv[VEC];

			unpack16<T>(__ldg((const int4 *)(row + k * ES)), wv);
#pragma unroll
			for (int n = 0; n < NC; n++) {
				if (n >= r.nc)
					break;
#pragma unroll
				for (int j = 0; j < VEC; j += 4) {
					float4 x = *(const float4 *)(y[n] + k +
								     j);

					acc[n] += wv[j] * x.x + wv[j + 1] * x.y +
						  wv[j + 2] * x.z +
						  wv[j + 3] * x.w;
				}
			}
		}
		for (int64_t k = kvec + lane; k < K; k += 32) {
			float wk = load_row(row, p.a, k);

#pragma unroll
			for (int n = 0; n < NC; n++)
				if (n < r.nc)
					acc[n] += wk * y[n][k];
		}
		mmv_store<NC>(p, r, m, acc);
	}
}

/* ------------------------------------------------------------------------
 * Host side.
 */
static bool aligned16(const tview &v)
{
	return (uintptr_t)v.data % 16 == 0 && v.nb[1] % 16 == 0 &&
	       v.nb[2] % 16 == 0 && v.nb[3] % 16 == 0;
}

template <int NC>
static void launch_nc(const mmv_args &p, dim3 grid, cudaStream_t s)
{
	dim3 block(MMV_WARPS * 32);

	switch (p.a.type) {
#define MMV_Q_(name)                                                       \
	case LOOM_TYPE_##name:                                             \
		mmv_q_kernel<LOOM_TYPE_##name, NC><<<grid, block, 0, s>>>(p); \
		break;
		CUDA_QUANT_TYPES(MMV_Q_)
#undef MMV_Q_
	case LOOM_TYPE_F32:
		mmv_f_kernel<LOOM_TYPE_F32, NC><<<grid, block, 0, s>>>(p);
		break;
	case LOOM_TYPE_F16:
		mmv_f_kernel<LOOM_TYPE_F16, NC><<<grid, block, 0, s>>>(p);
		break;
	case LOOM_TYPE_BF16:
		mmv_f_kernel<LOOM_TYPE_BF16, NC><<<grid, block, 0, s>>>(p);
		break;
	}
}

/* b's activations quantized to 8 bits in scratch, into p->qy and p->dy. */
static int mmv_quantize_b(struct cuda_backend *be, const tview &b,
			  mmv_args *p)
{
	const int64_t K = b.ne[0], b_rows = b.ne[1] * b.ne[2] * b.ne[3];
	size_t qbytes = ((size_t)(b_rows * K) + 255) / 256 * 256;
	char *tmp = (char *)cuda_scratch(be, CUDA_SCRATCH_B,
					 qbytes + (size_t)(b_rows * K / 32) * 4);

	if (!tmp)
		return LOOM_E_NOMEM;
	p->qy = (const int8_t *)tmp;
	p->dy = (const float *)(tmp + qbytes);
	quantize_act_kernel<<<grid_for(b_rows * K, OPS_BLOCK), OPS_BLOCK, 0,
			      be->stream>>>(b, (int8_t *)tmp,
					    (float *)(tmp + qbytes),
					    b_rows * K / 32);
	return launch_status(be, "mul_mat: quantize activations");
}

/* p->b as packed, 16-byte aligned F32 rows: b itself, or a copy. */
static int mmv_float_b(struct cuda_backend *be, const tview &b, mmv_args *p)
{
	const int64_t K = b.ne[0], b_rows = b.ne[1] * b.ne[2] * b.ne[3];

	if (b.type == LOOM_TYPE_F32 && b.nb[0] == 4 && aligned16(b))
		return LOOM_OK;
	void *tmp = cuda_scratch(be, CUDA_SCRATCH_B, (size_t)(b_rows * K) * 4);

	if (!tmp)
		return LOOM_E_NOMEM;
	int st = cuda_convert_contig(be, b, LOOM_TYPE_F32, tmp);

	if (st)
		return st;
	p->b.data = (char *)tmp;
	p->b.type = LOOM_TYPE_F32;
	p->b.nb[0] = 4;
	for (int i = 1; i < 4; i++)
		p->b.nb[i] = p->b.nb[i - 1] * p->b.ne[i - 1];
	return LOOM_OK;
}

static void mmv_launch(const mmv_args &p, int64_t nc, dim3 grid,
		       cudaStream_t s)
{
	switch (nc) {
	case 1:
		launch_nc<1>(p, grid, s);
		break;
	case 2:
		launch_nc<2>(p, grid, s);
		break;
	case 4:
		launch_nc<4>(p, grid, s);
		break;
	default:
		launch_nc<8>(p, grid, s);
		break;
	}
}

int cuda_mmv(struct cuda_backend *be, const tview &dst, const tview &a,
	     const tview &b, const tview &ids, int mode)
{
	const int64_t K = a.ne[0], M = a.ne[1];
	const bool quant = loom_type_is_quantized((enum loom_type)a.type);
	int64_t nc = 1, gx = (M + MMV_WARPS - 1) / MMV_WARPS;
	mmv_args p;
	int st;

	if (a.type == LOOM_TYPE_I32 || K <= 0 || gx > INT32_MAX ||
	    (quant && K % 32) || (mode == CUDA_MMV_MAT &&
				  b.ne[1] > CUDA_MMV_MAX_COLS))
		return LOOM_E_DECLINED;
	p.dst = dst;
	p.a = a;
	p.b = b;
	p.ids = ids;
	p.mode = mode;
	p.qy = NULL;
	p.dy = NULL;
	if (mode == CUDA_MMV_MAT) {
		nc = b.ne[1] <= 1 ? 1 : b.ne[1] <= 2 ? 2 : b.ne[1] <= 4 ? 4 : 8;
		p.n_groups = b.ne[2] * b.ne[3] * ((b.ne[1] + nc - 1) / nc);
	} else {
		p.n_groups = dst.ne[1] * dst.ne[2];
	}
	st = quant ? mmv_quantize_b(be, b, &p) : mmv_float_b(be, b, &p);
	if (st)
		return st;
	p.aligned = aligned16(a) && (quant || aligned16(p.b));
	if (p.n_groups == 0)
		return LOOM_OK;
	mmv_launch(p, nc,
		   dim3((unsigned int)gx,
			(unsigned int)(p.n_groups < OPS_MAX_BLOCKS ?
					       p.n_groups :
					       OPS_MAX_BLOCKS)),
		   be->stream);
	cuda_note_path(be, quant ? CUDA_PATH_MMV_Q : CUDA_PATH_MMV_F);
	return launch_status(be, mode == CUDA_MMV_MAT ? "mul_mat: gemv" :
							"mul_mat_id: gemv");
}
#endif /* LOOM_HIP */
