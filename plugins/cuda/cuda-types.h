/* SPDX-License-Identifier: MIT */
/* cuda-types.h - the quantized types the GPU plugins read, listed once:
 * each entry is one set of block decoders in ops-quant.cuh, and from this
 * list come the kernels' instantiations (the GEMV, the dequantization for
 * the BLAS, get_rows) and what cuda_supports_op accepts.  Adding a type:
 * its decoders in ops-quant.cuh, its name here.  Read by C and by the
 * kernels' C++.
 */
#ifndef LOOM_CUDA_TYPES_H
#define LOOM_CUDA_TYPES_H

#include <stdbool.h>

#include <loom/loom.h>

#define CUDA_QUANT_TYPES(X)                                               \
	X(Q8_0) X(Q4_0) X(Q4_1) X(Q5_0) X(Q5_1) X(Q2_K) X(Q3_K) X(Q4_K)    \
	X(Q5_K) X(Q6_K) X(IQ4_NL) X(IQ4_XS) X(MXFP4)

/* Whether type is one of the list. */
static inline bool cuda_quant_type(enum loom_type type)
{
	switch (type) {
#define CUDA_X_(name) case LOOM_TYPE_##name:
	CUDA_QUANT_TYPES(CUDA_X_)
#undef CUDA_X_
		return true;
	default:
		return false;
	}
}

#endif /* LOOM_CUDA_TYPES_H */
