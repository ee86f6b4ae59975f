# SPDX-License-Identifier: MIT
# plugins/cpu/local.mk - the CPU plugin.  One set of sources built once per
# instruction set: loom-cpu.so (baseline, score 1) everywhere, and on
# x86_64 loom-cpu-x86_64_v3.so (AVX2/FMA/F16C, score 10) and
# loom-cpu-x86_64_v4.so (AVX-512, score 20).  The loader takes the highest
# score the machine can run.

CPU_PLUGIN_SOURCES = \
	plugins/cpu/cpu-kernels.h \
	plugins/cpu/cpu-private.h \
	plugins/cpu/cpu-ops.h \
	plugins/cpu/cpu-plugin.c \
	plugins/cpu/cpu-device.c \
	plugins/cpu/cpu-buffer.c \
	plugins/cpu/cpu-weights.c \
	plugins/cpu/cpu-backend.c \
	plugins/cpu/cpu-pool.c \
	plugins/cpu/cpu-allreduce.c \
	plugins/cpu/cpu-rows.c \
	plugins/cpu/ops-binary.c \
	plugins/cpu/ops-unary.c \
	plugins/cpu/ops-norm.c \
	plugins/cpu/ops-softmax.c \
	plugins/cpu/ops-attn.c \
	plugins/cpu/ops-rope.c \
	plugins/cpu/ops-rows.c \
	plugins/cpu/ops-copy.c \
	plugins/cpu/ops-reduce.c \
	plugins/cpu/ops-oai.c \
	plugins/cpu/cpu-matmul.h \
	plugins/cpu/cpu-types.h \
	plugins/cpu/cpu-simd.h \
	plugins/cpu/ops-matmul.c \
	plugins/cpu/matmul-gemm.c \
	plugins/cpu/matmul-gemv.c \
	plugins/cpu/matmul-q8.h \
	plugins/cpu/matmul-q8.c \
	plugins/cpu/matmul-q8v.c \
	plugins/cpu/matmul-w.c \
	plugins/cpu/matmul-q8p.c \
	plugins/cpu/matmul-amx.c

# CPU_OPT_CFLAGS: the optimization passes configure found the compiler
# takes (configure.ac).
CPU_PLUGIN_CFLAGS = $(AM_CFLAGS) $(CPU_OPT_CFLAGS) -pthread
CPU_PLUGIN_LIBS = $(PLUGIN_LINK_LIBS) -lpthread -lm

plugin_LTLIBRARIES += plugins/cpu/loom-cpu.la
plugins_cpu_loom_cpu_la_SOURCES = $(CPU_PLUGIN_SOURCES)
plugins_cpu_loom_cpu_la_CFLAGS = $(CPU_PLUGIN_CFLAGS) \
	-DCPU_VARIANT=\"baseline\"
plugins_cpu_loom_cpu_la_LDFLAGS = $(PLUGIN_LINK_FLAGS)
plugins_cpu_loom_cpu_la_LIBADD = $(CPU_PLUGIN_LIBS)

if HOST_X86_64
plugin_LTLIBRARIES += plugins/cpu/loom-cpu-x86_64_v3.la
plugins_cpu_loom_cpu_x86_64_v3_la_SOURCES = $(CPU_PLUGIN_SOURCES)
plugins_cpu_loom_cpu_x86_64_v3_la_CFLAGS = $(CPU_PLUGIN_CFLAGS) \
	-march=x86-64-v3 -mtune=generic -DCPU_VARIANT=\"x86_64_v3\"
plugins_cpu_loom_cpu_x86_64_v3_la_LDFLAGS = $(PLUGIN_LINK_FLAGS)
plugins_cpu_loom_cpu_x86_64_v3_la_LIBADD = $(CPU_PLUGIN_LIBS)

plugin_LTLIBRARIES += plugins/cpu/loom-cpu-x86_64_v4.la
plugins_cpu_loom_cpu_x86_64_v4_la_SOURCES = $(CPU_PLUGIN_SOURCES)
plugins_cpu_loom_cpu_x86_64_v4_la_CFLAGS = $(CPU_PLUGIN_CFLAGS) \
	-march=x86-64-v4 -mtune=generic \
	-DCPU_VARIANT=\"x86_64_v4\"
plugins_cpu_loom_cpu_x86_64_v4_la_LDFLAGS = $(PLUGIN_LINK_FLAGS)
plugins_cpu_loom_cpu_x86_64_v4_la_LIBADD = $(CPU_PLUGIN_LIBS)
endif
