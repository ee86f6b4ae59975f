# SPDX-License-Identifier: MIT
# libcore/local.mk - libloom, the core library.
lib_LTLIBRARIES += libcore/libloom.la

libcore_libloom_la_SOURCES = \
	libcore/loom-private.h \
	libcore/backend-private.h \
	libcore/status.c \
	libcore/log.c \
	libcore/env.c \
	libcore/handle.c \
	libcore/inflight.c \
	libcore/types.c \
	libcore/quant.c \
	libcore/tensor.c \
	libcore/tensor-state.c \
	libcore/rules.c \
	libcore/ops.c \
	libcore/graph.c \
	libcore/validate.c \
	libcore/galloc.c \
	libcore/sched.c \
	libcore/buffer.c \
	libcore/backend.c \
	libcore/device.c \
	libcore/abi.c \
	libcore/registry.c \
	libcore/loader.c \
	libcore/elf-check.c \
	libcore/compose.c
libcore_libloom_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/libcore
libcore_libloom_la_LDFLAGS = -version-info $(LOOM_LT_VERSION) \
	-no-undefined $(NO_UNDEFINED) \
	-Wl,--version-script=$(srcdir)/libcore/libloom.sym
libcore_libloom_la_LIBADD = $(LIBS) $(LIBM)
EXTRA_libcore_libloom_la_DEPENDENCIES = libcore/libloom.sym
EXTRA_DIST += libcore/libloom.sym
