# SPDX-License-Identifier: MIT
# tests/local.mk - GLib tests under automake's TAP driver.  Each area adds
# its programs in its own tests/*.mk.
LOG_DRIVER = env AM_TAP_AWK='$(AWK)' $(SHELL) $(top_srcdir)/build-aux/tap-driver.sh
# Through libtool, so that TEST_WRAPPER (valgrind ...) runs the test
# binaries rather than their wrapper scripts.
LOG_COMPILER = $(LIBTOOL) --mode=execute $(TEST_WRAPPER)
# Tests find the uninstalled plugins, never an installed copy; nothing
# from the user's environment leaks in.
AM_TESTS_ENVIRONMENT = \
	unset LOOM_BACKENDS LOOM_PLUGIN_PATH LOOM_LOG LOOM_CPU_DEVICES \
		LOOM_CPU_THREADS LOOM_META_DEVICES LOOM_CUDA_ALLREDUCE; \
	LOOM_PLUGIN_SYSTEM_PATH=; export LOOM_PLUGIN_SYSTEM_PATH; \
	LOOM_TEST_BUILDDIR='$(abs_top_builddir)'; export LOOM_TEST_BUILDDIR; \
	LOOM_TEST_SRCDIR='$(abs_top_srcdir)'; export LOOM_TEST_SRCDIR; \
	LOOM_TEST_VERSION='$(PACKAGE_VERSION)'; export LOOM_TEST_VERSION; \
	LOOM_TEST_DOCDIR='$(docdir)'; export LOOM_TEST_DOCDIR; \
	LOOM_TEST_CC='$(CC)'; export LOOM_TEST_CC; \
	LOOM_TEST_CFLAGS='$(CFLAGS)'; export LOOM_TEST_CFLAGS; \
	LOOM_TEST_LDFLAGS='$(LDFLAGS)'; export LOOM_TEST_LDFLAGS; \
	LOOM_TEST_PLUGIN_PATH='$(abs_top_builddir)/plugins/cpu/.libs:$(abs_top_builddir)/plugins/meta/.libs:$(abs_top_builddir)/plugins/cuda/.libs:$(abs_top_builddir)/plugins/hip/.libs:$(abs_top_builddir)/plugins/mpi/.libs'; \
	export LOOM_TEST_PLUGIN_PATH; \
	G_DEBUG=fatal-criticals; export G_DEBUG;

TEST_CPPFLAGS = $(AM_CPPFLAGS) $(GLIB_CFLAGS) -I$(top_srcdir)/tests
TEST_LIBS = libcore/libloom.la $(GLIB_LIBS) -lm



include tests/tools.mk
include tests/bench.mk
include tests/mpi.mk
include tests/fuzz.mk

# check-gpu and gpu-bundle (tests/gpu.mk) are declared here: .PHONY may
# not be set both inside and outside a condition.
.PHONY: check-gpu gpu-bundle

if HAVE_GLIB
include tests/core.mk
include tests/loader.mk
include tests/ownership.mk
include tests/threads.mk
include tests/ops.mk
include tests/cpu.mk
include tests/meta.mk
include tests/sched.mk
include tests/model.mk
include tests/gpu.mk
endif
