# SPDX-License-Identifier: MIT
# tests/fuzz.mk - the graph fuzz target.  Built plainly it replays the
# checked-in corpus as a regression test; doc/fuzzing.md tells how
# to build it as a libFuzzer target with clang (FUZZ_CFLAGS and
# FUZZ_LDFLAGS on the make command line).
check_PROGRAMS += tests/fuzz-graph
TESTS += tests/fuzz-graph
tests_fuzz_graph_SOURCES = tests/fuzz-graph.c
tests_fuzz_graph_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFUZZ_GRAPH_CORPUS='"$(abs_top_srcdir)/tests/corpus/fuzz-graph"'
tests_fuzz_graph_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_graph_LDFLAGS = $(FUZZ_LDFLAGS)
tests_fuzz_graph_LDADD = libcore/libloom.la -lm
EXTRA_DIST += tests/corpus/fuzz-graph
