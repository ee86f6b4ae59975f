# SPDX-License-Identifier: MIT
# tools/conformance.mk - loom-conformance: the op suite (the cases, the
# double-precision reference and the helpers, in a convenience library
# that tests/test-ops links too) run on an installed Loom against any
# device.  Nothing here uses GLib.
noinst_LTLIBRARIES += tests/libopsuite.la
tests_libopsuite_la_SOURCES = \
	tests/ops-suite.c \
	tests/ops-suite.h \
	tests/ops-suite-int.h \
	tests/ops-cases.c \
	tests/ops-cases-oai.c \
	tests/ops-composites.c \
	tests/ops-run.c \
	tests/ref-ops.c \
	tests/ref-ops.h \
	tests/test-util.c \
	tests/test-util.h
tests_libopsuite_la_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests
tests_libopsuite_la_LIBADD = libcore/libloom.la -lm

bin_PROGRAMS += tools/loom-conformance
tools_loom_conformance_SOURCES = tools/loom-conformance.c
tools_loom_conformance_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests
tools_loom_conformance_LDADD = tests/libopsuite.la libcore/libloom.la -lm
