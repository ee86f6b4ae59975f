# SPDX-License-Identifier: MIT
# tests/gpu.mk - the GPU plugins' tests.  test-gpu runs in `make check` and
# skips what needs a device.
#
# `make check-gpu`: on a machine with an NVIDIA GPU, runs in under 8
# minutes (tests/check-gpu.sh): test-gpu, test-gpu-limits,
# test-gpu-paths, the op suite on cuda0 (BLAS and the plugin's own GEMM),
# a meta device over cuda0 twice against the same reference,
# compute-sanitizer, test-gpu-perf (bandwidths, GEMM, GEMV per type,
# launch cost, MoE) and loom-bench's runs.  Set GPU=hip0 to check the HIP
# plugin instead.
check_PROGRAMS += tests/test-gpu
TESTS += tests/test-gpu
tests_test_gpu_SOURCES = tests/test-gpu.c tests/test-util.c tests/test-util.h
tests_test_gpu_CPPFLAGS = $(TEST_CPPFLAGS)
if HAVE_NCCL
tests_test_gpu_CPPFLAGS += -DLOOM_TEST_HAVE_NCCL
endif
tests_test_gpu_LDADD = $(TEST_LIBS) -ldl

# The block decoders the GPU kernels use, built for the host and checked
# against libcore: runs everywhere, GPU or not.
check_PROGRAMS += tests/test-gpu-quant
TESTS += tests/test-gpu-quant
tests_test_gpu_quant_SOURCES = tests/test-gpu-quant.cc
tests_test_gpu_quant_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/cuda
tests_test_gpu_quant_CXXFLAGS = -std=c++17 -Wall -Wextra -Wno-unused-parameter
tests_test_gpu_quant_LDADD = $(TEST_LIBS)

# The CUDA plugin's graph signatures and slot choice (host code): runs
# everywhere, GPU or not.
check_PROGRAMS += tests/test-cuda-graph-sig
TESTS += tests/test-cuda-graph-sig
tests_test_cuda_graph_sig_SOURCES = tests/test-cuda-graph-sig.c \
	plugins/cuda/graph-sig.c plugins/cuda/graph-sig.h
tests_test_cuda_graph_sig_CPPFLAGS = $(TEST_CPPFLAGS) \
	-I$(top_srcdir)/plugins/cuda
tests_test_cuda_graph_sig_LDADD = $(TEST_LIBS)

# The CUDA plugin's fast paths against a double reference; skips without
# a CUDA device.
check_PROGRAMS += tests/test-gpu-paths
TESTS += tests/test-gpu-paths
tests_test_gpu_paths_SOURCES = tests/test-gpu-paths.c tests/test-util.c \
	tests/test-util.h
tests_test_gpu_paths_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/cuda
tests_test_gpu_paths_LDADD = $(TEST_LIBS)

# Built for check-gpu; it reports figures, so it is not in TESTS.
check_PROGRAMS += tests/test-gpu-perf
tests_test_gpu_perf_SOURCES = tests/test-gpu-perf.c tests/test-util.c \
	tests/test-util.h
tests_test_gpu_perf_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/cuda
tests_test_gpu_perf_LDADD = $(TEST_LIBS)

# Sizes past the grid and index limits; heavy, so check-gpu runs it.
check_PROGRAMS += tests/test-gpu-limits
tests_test_gpu_limits_SOURCES = tests/test-gpu-limits.c tests/test-util.c \
	tests/test-util.h
tests_test_gpu_limits_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_gpu_limits_LDADD = $(TEST_LIBS)

EXTRA_DIST += tests/check-gpu.sh tests/gpu-run.sh tests/gpu-bundle.sh

GPU = cuda0
GPU_LOGS = $(abs_top_builddir)/check-gpu-logs
check-gpu: all $(check_PROGRAMS) $(check_LTLIBRARIES)
	$(SHELL) $(top_srcdir)/tests/check-gpu.sh '$(abs_top_builddir)' \
		'$(GPU)' '$(GPU_LOGS)'

# A bundle for a GPU machine with a compiler but no autotools or GLib:
# the tarball, tests/gpu-run.sh and a copy of GLib (see doc/gpu.md).
gpu-bundle: dist
	$(SHELL) $(top_srcdir)/tests/gpu-bundle.sh '$(top_srcdir)' \
		'$(distdir).tar.gz' '$(abs_top_builddir)/gpu-bundle'

# The check itself: a GPU the driver lists but Loom cannot use fails it.
TESTS += tests/test-check-gpu.sh
EXTRA_DIST += tests/test-check-gpu.sh
