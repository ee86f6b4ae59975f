# tests/ops.mk - the op-conformance suite (every op, every device, against
# a double-precision reference) and the shared test helpers.
check_PROGRAMS += tests/test-ops
TESTS += tests/test-ops
tests_test_ops_SOURCES = \
	tests/test-ops.c \
	tests/ref-ops.c \
	tests/ref-ops.h \
	tests/test-util.c \
	tests/test-util.h
tests_test_ops_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_ops_LDADD = $(TEST_LIBS)
