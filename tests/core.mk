# SPDX-License-Identifier: MIT
# tests/core.mk - the core's own tests: types and conversions, tensors and
# op shape rules, graphs, the graph allocator, per-tensor plugin state,
# caller mistakes, and what the core refuses before a plugin computes a
# graph (test-validate, which runs on the CPU plugin).
# -no-install links real executables, so that TEST_WRAPPER (valgrind) runs
# the test itself rather than libtool's wrapper script.
check_PROGRAMS += tests/test-core tests/test-galloc tests/test-core-errors \
	tests/test-tensor-state tests/test-validate
TESTS += tests/test-core tests/test-galloc tests/test-core-errors \
	tests/test-tensor-state tests/test-validate

tests_test_core_SOURCES = tests/test-core.c tests/test-util.c \
	tests/test-util.h
tests_test_core_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_core_LDFLAGS = -no-install
tests_test_core_LDADD = $(TEST_LIBS)

tests_test_galloc_SOURCES = tests/test-galloc.c
tests_test_galloc_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_galloc_LDFLAGS = -no-install
tests_test_galloc_LDADD = $(TEST_LIBS)

tests_test_core_errors_SOURCES = tests/test-core-errors.c \
	tests/fake-plugin.c tests/fake-plugin.h
tests_test_core_errors_CPPFLAGS = $(TEST_CPPFLAGS) -DFAKE_STATIC \
	-DFAKE_NAME=\"static\"
tests_test_core_errors_LDFLAGS = -no-install
tests_test_core_errors_LDADD = $(TEST_LIBS)

tests_test_tensor_state_SOURCES = tests/test-tensor-state.c
tests_test_tensor_state_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_tensor_state_LDFLAGS = -no-install
tests_test_tensor_state_LDADD = $(TEST_LIBS)

tests_test_validate_SOURCES = tests/test-validate.c tests/test-util.c \
	tests/test-util.h
tests_test_validate_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_validate_LDFLAGS = -no-install
tests_test_validate_LDADD = $(TEST_LIBS)
