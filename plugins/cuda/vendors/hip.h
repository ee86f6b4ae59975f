/* SPDX-License-Identifier: MIT */
/* vendors/hip.h - maps the CUDA runtime, cuBLAS and NCCL names the CUDA
 * plugin's sources use to HIP, rocBLAS (through hipBLAS) and RCCL, so the
 * same sources build the HIP plugin.  Only names the sources use are here.
 */
#ifndef LOOM_CUDA_VENDORS_HIP_H
#define LOOM_CUDA_VENDORS_HIP_H

#ifdef __HIPCC__
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#else
#include <hip/hip_runtime_api.h>
#endif
#ifdef LOOM_HAVE_BLAS
#include <hipblas/hipblas.h>
#endif
#ifdef LOOM_HAVE_NCCL
#include <rccl/rccl.h>
#endif

#define LOOM_GPU_NAME "hip"
#define LOOM_GPU_VENDOR "HIP"
#define LOOM_GPU_BLAS "hipBLAS"
#define LOOM_GPU_CCL "RCCL"

/* Runtime. */
#define cudaError_t hipError_t
#define cudaSuccess hipSuccess
#define cudaErrorNoDevice hipErrorNoDevice
#define cudaErrorMemoryAllocation hipErrorOutOfMemory
#define cudaErrorInsufficientDriver hipErrorInsufficientDriver
#define cudaErrorPeerAccessAlreadyEnabled hipErrorPeerAccessAlreadyEnabled
#define cudaGetErrorString hipGetErrorString
#define cudaGetLastError hipGetLastError
#define cudaGetDeviceCount hipGetDeviceCount
#define cudaSetDevice hipSetDevice
#define cudaGetDevice hipGetDevice
#define cudaDeviceProp hipDeviceProp_t
#define cudaGetDeviceProperties hipGetDeviceProperties
#define cudaDeviceSynchronize hipDeviceSynchronize
#define cudaDeviceCanAccessPeer hipDeviceCanAccessPeer
#define cudaDeviceEnablePeerAccess hipDeviceEnablePeerAccess
#define cudaDriverGetVersion hipDriverGetVersion
#define cudaRuntimeGetVersion hipRuntimeGetVersion
#define cudaDeviceGetAttribute hipDeviceGetAttribute
#define cudaDeviceAttr hipDeviceAttribute_t
#define cudaDevAttrMemoryClockRate hipDeviceAttributeMemoryClockRate
#define cudaDevAttrGlobalMemoryBusWidth hipDeviceAttributeMemoryBusWidth
#define cudaDevAttrClockRate hipDeviceAttributeClockRate
#define cudaDevAttrMultiProcessorCount hipDeviceAttributeMultiprocessorCount
#define cudaMemGetInfo hipMemGetInfo
#define cudaMalloc hipMalloc
#define cudaFree hipFree
#define cudaMallocHost(p, s) hipHostMalloc((p), (s), hipHostMallocDefault)
#define cudaFreeHost hipHostFree
#define cudaMemcpy hipMemcpy
#define cudaMemcpyAsync hipMemcpyAsync
#define cudaMemcpy2D hipMemcpy2D
#define cudaMemcpy2DAsync hipMemcpy2DAsync
#define cudaMemcpyPeerAsync hipMemcpyPeerAsync
#define cudaMemset hipMemset
#define cudaMemsetAsync hipMemsetAsync
#define cudaMemcpyKind hipMemcpyKind
#define cudaMemcpyHostToDevice hipMemcpyHostToDevice
#define cudaMemcpyDeviceToHost hipMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice hipMemcpyDeviceToDevice
#define cudaMemcpyDefault hipMemcpyDefault
#define cudaStream_t hipStream_t
#define cudaStreamNonBlocking hipStreamNonBlocking
#define cudaStreamCreateWithFlags hipStreamCreateWithFlags
#define cudaStreamDestroy hipStreamDestroy
#define cudaStreamSynchronize hipStreamSynchronize
#define cudaStreamWaitEvent hipStreamWaitEvent
#define cudaEvent_t hipEvent_t
#define cudaEventDisableTiming hipEventDisableTiming
#define cudaEventCreateWithFlags hipEventCreateWithFlags
#define cudaEventDestroy hipEventDestroy
#define cudaEventRecord hipEventRecord
#define cudaEventSynchronize hipEventSynchronize

/* BLAS, through hipBLAS (which runs on rocBLAS). */
#ifdef LOOM_HAVE_BLAS
#define cublasHandle_t hipblasHandle_t
#define cublasStatus_t hipblasStatus_t
#define CUBLAS_STATUS_SUCCESS HIPBLAS_STATUS_SUCCESS
#define cublasCreate hipblasCreate
#define cublasDestroy hipblasDestroy
#define cublasSetStream hipblasSetStream
#define cublasSetPointerMode hipblasSetPointerMode
#define CUBLAS_POINTER_MODE_HOST HIPBLAS_POINTER_MODE_HOST
#define CUBLAS_POINTER_MODE_DEVICE HIPBLAS_POINTER_MODE_DEVICE
#define CUBLAS_OP_N HIPBLAS_OP_N
#define CUBLAS_OP_T HIPBLAS_OP_T
#define cublasGemmEx hipblasGemmEx
#define cublasGemmStridedBatchedEx hipblasGemmStridedBatchedEx
#define cublasGemmBatchedEx hipblasGemmBatchedEx
#define CUBLAS_GEMM_DEFAULT HIPBLAS_GEMM_DEFAULT
/* hipBLAS 3 (ROCm 7), or 2 with HIPBLAS_V2, takes hipDataType and a
 * compute type; older ones take hipblasDatatype_t for both. */
#if defined(HIPBLAS_V2) || \
	(defined(hipblasVersionMajor) && hipblasVersionMajor >= 3)
#define cudaDataType hipDataType
#define CUDA_R_32F HIP_R_32F
#define CUDA_R_16F HIP_R_16F
#define CUDA_R_16BF HIP_R_16BF
#define cublasComputeType_t hipblasComputeType_t
#define CUBLAS_COMPUTE_32F HIPBLAS_COMPUTE_32F
#else
#define cudaDataType hipblasDatatype_t
#define CUDA_R_32F HIPBLAS_R_32F
#define CUDA_R_16F HIPBLAS_R_16F
#define CUDA_R_16BF HIPBLAS_R_16B
#define cublasComputeType_t hipblasDatatype_t
#define CUBLAS_COMPUTE_32F HIPBLAS_R_32F
#endif
#endif

/* NCCL names are RCCL's own; nothing to map. */

#endif /* LOOM_CUDA_VENDORS_HIP_H */
