# SPDX-License-Identifier: MIT
# tools/bench.mk - loom-bench: the model benchmark, the machine's limits
# and the kernels measured against them.  One file per subcommand.
bin_PROGRAMS += tools/loom-bench
tools_loom_bench_SOURCES = \
	tools/loom-bench.c \
	tools/bench-util.h \
	tools/bench-util.c \
	tools/bench-model.c \
	tools/app-world.h \
	tools/app-world.c \
	tools/app-devices.h \
	tools/app-devices.c \
	tools/bench-peak.c \
	tools/bench-stream.c \
	tools/bench-device.c \
	tools/bench-gemm.c \
	tools/bench-gemv.c \
	tools/bench-allreduce.c \
	tools/bench-world.c \
	tools/bench-dispatch.c \
	tools/bench-sched.c \
	tools/bench-openblas.c
tools_loom_bench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/model
tools_loom_bench_LDADD = model/libmodel.la libcore/libloom.la -lpthread -lm

# Against llama.cpp, not built or run by make: the script compiles
# ggml-matmul.c against a llama.cpp tree of the user's.
EXTRA_DIST += tools/bench-llama-cpp.py tools/ggml-matmul.c
