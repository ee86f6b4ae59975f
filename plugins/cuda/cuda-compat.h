/* SPDX-License-Identifier: MIT */
/* cuda-compat.h - the vendor runtime for the CUDA plugin's sources: the CUDA
 * runtime, cuBLAS and NCCL, or, built with LOOM_HIP, their HIP
 * counterparts through vendors/hip.h.  No Loom code lives here.
 */
#ifndef LOOM_CUDA_COMPAT_H
#define LOOM_CUDA_COMPAT_H

#ifdef LOOM_HIP
#include "vendors/hip.h"
#else
#include <cuda_runtime_api.h>
#ifdef LOOM_HAVE_BLAS
#include <cublas_v2.h>
#endif
#ifdef LOOM_HAVE_NCCL
#include <nccl.h>
#endif
#define LOOM_GPU_NAME "cuda"
#define LOOM_GPU_VENDOR "CUDA"
#define LOOM_GPU_BLAS "cuBLAS"
#define LOOM_GPU_CCL "NCCL"
#endif

#endif /* LOOM_CUDA_COMPAT_H */
