# tests/core.mk - the core's own tests: types and conversions, tensors and
# op shape rules, graphs, and the graph allocator.
check_PROGRAMS += tests/test-core tests/test-galloc
TESTS += tests/test-core tests/test-galloc

tests_test_core_SOURCES = tests/test-core.c
tests_test_core_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_core_LDADD = $(TEST_LIBS)

tests_test_galloc_SOURCES = tests/test-galloc.c
tests_test_galloc_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_galloc_LDADD = $(TEST_LIBS)
