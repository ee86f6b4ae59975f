# SPDX-License-Identifier: MIT
# tests/meta.mk - the meta device over CPU partitions: unit tests of
# splits, data movement, allreduce and errors, and a decoder stack against
# a single device.
check_PROGRAMS += tests/test-meta tests/test-meta-llama tests/test-meta-rules \
	tests/test-meta-weights tests/test-meta-kquant
TESTS += tests/test-meta tests/test-meta-llama tests/test-meta-rules \
	tests/test-meta-weights tests/test-meta-kquant

tests_test_meta_SOURCES = tests/test-meta.c tests/test-meta-compute.c \
	tests/test-meta-errors.c tests/test-meta-graphs.c tests/meta-util.c \
	tests/meta-util.h tests/meta-cases.h
tests_test_meta_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_meta_LDADD = $(TEST_LIBS)

tests_test_meta_llama_SOURCES = tests/test-meta-llama.c
tests_test_meta_llama_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_meta_llama_LDADD = model/libmodel.la $(TEST_LIBS)

# The split rules on their own: the rules and the states they read,
# built into the test.
tests_test_meta_rules_SOURCES = tests/test-meta-rules.c \
	plugins/meta/meta-rules.c plugins/meta/meta-state.c
tests_test_meta_rules_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/plugins/meta
tests_test_meta_rules_LDADD = $(TEST_LIBS)

# The meta weight buffer type: where the members' slices sit, and
# mul_mat over them.
tests_test_meta_weights_SOURCES = tests/test-meta-weights.c tests/test-util.c \
	tests/test-util.h
tests_test_meta_weights_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_meta_weights_LDADD = $(TEST_LIBS)

# A 7B-shaped attention with K-quant weights over 2 and 3 partitions.
tests_test_meta_kquant_SOURCES = tests/test-meta-kquant.c tests/test-util.c \
	tests/test-util.h
tests_test_meta_kquant_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_meta_kquant_LDADD = $(TEST_LIBS)
