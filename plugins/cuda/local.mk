# SPDX-License-Identifier: MIT
# plugins/cuda/local.mk - the CUDA plugin in two files: loom-cuda.so, which
# the loader opens (probe.c: it asks the driver for a device and links
# nothing of CUDA), and cuda-impl.so beside it, opened only when there is
# a device: host code in C, kernels in .cu files compiled by nvcc through
# libtool (see the .cu.lo rule and build-aux/nvcc-wrapper).  The same
# sources build the HIP plugin (plugins/hip/local.mk) in one file.

cuda_host_sources = \
	plugins/cuda/cuda-compat.h \
	plugins/cuda/cuda-plugin.h \
	plugins/cuda/cuda-types.h \
	plugins/cuda/plugin.c \
	plugins/cuda/features.c \
	plugins/cuda/device.c \
	plugins/cuda/buffer-type.c \
	plugins/cuda/buffer.c \
	plugins/cuda/copy-2d.c \
	plugins/cuda/backend.c \
	plugins/cuda/event.c \
	plugins/cuda/compute.c \
	plugins/cuda/graph-sig.h \
	plugins/cuda/graph-sig.c \
	plugins/cuda/capture.c \
	plugins/cuda/allreduce.c
cuda_kernel_sources = \
	plugins/cuda/ops-binary.cu \
	plugins/cuda/ops-unary.cu \
	plugins/cuda/ops-norm.cu \
	plugins/cuda/ops-softmax.cu \
	plugins/cuda/ops-rope.cu \
	plugins/cuda/ops-rows.cu \
	plugins/cuda/ops-copy.cu \
	plugins/cuda/ops-reduce.cu \
	plugins/cuda/ops-matmul.cu \
	plugins/cuda/ops-mmv.cu \
	plugins/cuda/ops-moe.cu
cuda_kernel_headers = \
	plugins/cuda/ops-common.cuh \
	plugins/cuda/ops-quant.cuh \
	plugins/cuda/cuda-plugin.h \
	plugins/cuda/cuda-types.h \
	plugins/cuda/cuda-compat.h \
	plugins/cuda/vendors/hip.h

# Only the descriptor is exported, kernels included (see the script).
gpu_plugin_sym = -Wl,--version-script=$(top_srcdir)/plugins/cuda/plugin.sym

EXTRA_DIST += plugins/cuda/plugin.sym plugins/cuda/probe.c \
	$(cuda_host_sources) \
	$(cuda_kernel_sources) $(cuda_kernel_headers) build-aux/nvcc-wrapper
SUFFIXES += .cu
AM_V_NVCC = $(am__v_NVCC_@AM_V@)
am__v_NVCC_ = $(am__v_NVCC_@AM_DEFAULT_V@)
am__v_NVCC_0 = @echo "  NVCC    " $@;
am__v_NVCC_1 =

# nvcc runs only for the CUDA plugin's sources (HAVE_CUDA).
.cu.lo:
	$(AM_V_NVCC)$(NVCC_COMPILE) -c -o $@ $<


if HAVE_CUDA
plugin_LTLIBRARIES += plugins/cuda/loom-cuda.la plugins/cuda/cuda-impl.la

plugins_cuda_loom_cuda_la_SOURCES = plugins/cuda/probe.c
plugins_cuda_loom_cuda_la_LDFLAGS = $(PLUGIN_LINK_FLAGS)
plugins_cuda_loom_cuda_la_LIBADD = $(PLUGIN_LINK_LIBS) -ldl

cuda_defs = -DLOOM_HAVE_BLAS -DLOOM_GPU_ARCHS='"$(CUDA_ARCHS)"'
if HAVE_NCCL
cuda_defs += -DLOOM_HAVE_NCCL
endif

plugins_cuda_cuda_impl_la_SOURCES = $(cuda_host_sources) \
	$(cuda_kernel_sources) $(cuda_kernel_headers)
# The kernels' objects need the C++ runtime: link as C++.
nodist_EXTRA_plugins_cuda_cuda_impl_la_SOURCES = plugins/cuda/dummy.cxx
plugins_cuda_cuda_impl_la_CPPFLAGS = $(AM_CPPFLAGS) $(cuda_defs) \
	$(CUDA_CPPFLAGS) $(NCCL_CPPFLAGS)
plugins_cuda_cuda_impl_la_LDFLAGS = $(PLUGIN_LINK_FLAGS) $(gpu_plugin_sym) -Wl,-z,nodelete \
	$(CUDA_LDFLAGS) $(NCCL_LDFLAGS)
plugins_cuda_cuda_impl_la_LIBADD = $(PLUGIN_LINK_LIBS) $(NCCL_LIBS) \
	$(CUDA_LIBS)
EXTRA_plugins_cuda_cuda_impl_la_DEPENDENCIES = plugins/cuda/plugin.sym

# Kernels: nvcc through libtool.  Host code in the .cu files is C++17;
# headers are listed as dependencies since nvcc writes no depfiles here.
NVCC_FLAGS = -std=c++17 -O3 $(CUDA_ARCH_FLAGS) -fvisibility=hidden
NVCC_COMPILE = $(LIBTOOL) $(AM_V_lt) --tag=CC --mode=compile \
	$(SHELL) $(top_srcdir)/build-aux/nvcc-wrapper $(NVCC) \
	$(DEFS) $(DEFAULT_INCLUDES) $(AM_CPPFLAGS) $(cuda_defs) \
	$(CUDA_CPPFLAGS) $(NCCL_CPPFLAGS) -I$(top_srcdir)/plugins/cuda \
	$(CPPFLAGS) $(NVCC_FLAGS) $(NVCCFLAGS)
$(cuda_kernel_sources:.cu=.lo): $(cuda_kernel_headers)
endif
