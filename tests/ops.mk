# SPDX-License-Identifier: MIT
# tests/ops.mk - the op-conformance suite (every op, every device, against
# a double-precision reference; tests/libopsuite.la, see
# tools/conformance.mk) and the API's answers to a caller's mistakes.
check_PROGRAMS += tests/test-ops
TESTS += tests/test-ops
tests_test_ops_SOURCES = tests/test-ops-main.c
tests_test_ops_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_ops_LDADD = tests/libopsuite.la $(TEST_LIBS)

TESTS += tests/test-ops-no-amx.sh
EXTRA_DIST += tests/test-ops-no-amx.sh

TESTS += tests/test-ops-meta.sh tests/test-ops-meta3.sh
EXTRA_DIST += tests/test-ops-meta.sh tests/test-ops-meta3.sh

# What the constructors of the gpt-oss family's ops refuse.
check_PROGRAMS += tests/test-ops-oai
TESTS += tests/test-ops-oai
tests_test_ops_oai_SOURCES = tests/test-ops-oai.c
tests_test_ops_oai_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_ops_oai_LDFLAGS = -no-install
tests_test_ops_oai_LDADD = $(TEST_LIBS)
