# SPDX-License-Identifier: MIT
# plugins/hip/local.mk - the HIP plugin, loom-hip.so: the CUDA plugin's
# sources built for ROCm.  Host code is compiled as C against the HIP
# runtime; each kernel source is compiled by hipcc through a generated
# wrapper, always with --offload-arch (without it hipcc probes for a
# GPU).  GEMM through hipBLAS when configure found it, else the plugin's
# own kernel; the allreduce through RCCL when configure found it.

# The CUDA plugin's kernels, each built by hipcc through a wrapper made
# here (plugins/cuda/ops-<family>-hip.hip includes ops-<family>.cu), so
# the list of kernels is the CUDA plugin's alone.
hip_kernel_sources = $(cuda_kernel_sources:.cu=-hip.hip)
CLEANFILES += $(hip_kernel_sources)
plugins/cuda/%-hip.hip: plugins/cuda/%.cu
	$(AM_V_GEN)$(MKDIR_P) plugins/cuda && \
		printf '/* SPDX-License-Identifier: MIT */\n#include "%s.cu"\n' \
			'$(*F)' > $@

SUFFIXES += .hip

hip_defs = -DLOOM_HIP -DLOOM_GPU_ARCHS='"$(HIP_ARCHS)"'
if HAVE_ROCBLAS
hip_defs += -DLOOM_HAVE_BLAS
endif
if HAVE_RCCL
hip_defs += -DLOOM_HAVE_NCCL
endif

HIPCC_FLAGS = -std=c++17 -O3 $(HIP_ARCH_FLAGS) -fvisibility=hidden
HIPCC_COMPILE = $(LIBTOOL) $(AM_V_lt) --tag=CC --mode=compile \
	$(HIPCC) -x hip $(DEFS) $(DEFAULT_INCLUDES) $(AM_CPPFLAGS) \
	$(hip_defs) $(HIP_CPPFLAGS) -I$(top_srcdir)/plugins/cuda \
	$(CPPFLAGS) $(HIPCC_FLAGS) $(HIPCCFLAGS)
AM_V_HIPCC = $(am__v_HIPCC_@AM_V@)
am__v_HIPCC_ = $(am__v_HIPCC_@AM_DEFAULT_V@)
am__v_HIPCC_0 = @echo "  HIPCC   " $@;
am__v_HIPCC_1 =

# hipcc runs only for the HIP plugin's sources (HAVE_HIP).
.hip.lo:
	$(AM_V_HIPCC)$(HIPCC_COMPILE) -c -o $@ $<

if HAVE_HIP
plugin_LTLIBRARIES += plugins/hip/loom-hip.la

plugins_hip_loom_hip_la_SOURCES = $(cuda_host_sources) \
	$(cuda_kernel_headers)
nodist_plugins_hip_loom_hip_la_SOURCES = $(hip_kernel_sources)
# The kernels' objects need the C++ runtime: link as C++.
nodist_EXTRA_plugins_hip_loom_hip_la_SOURCES = plugins/hip/dummy.cxx
plugins_hip_loom_hip_la_CPPFLAGS = $(AM_CPPFLAGS) $(hip_defs) \
	$(HIP_CPPFLAGS)
plugins_hip_loom_hip_la_LDFLAGS = $(PLUGIN_LINK_FLAGS) $(gpu_plugin_sym) -Wl,-z,nodelete \
	$(HIP_LDFLAGS)
plugins_hip_loom_hip_la_LIBADD = $(PLUGIN_LINK_LIBS) $(RCCL_LIBS) \
	$(ROCBLAS_LIBS) $(HIP_LIBS)
EXTRA_plugins_hip_loom_hip_la_DEPENDENCIES = plugins/cuda/plugin.sym

$(hip_kernel_sources:.hip=.lo): $(cuda_kernel_headers) \
	$(cuda_kernel_sources)
endif
