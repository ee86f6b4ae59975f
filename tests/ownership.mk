# SPDX-License-Identifier: MIT
# tests/ownership.mk - the core's ownership rules under hostile use:
# freed handles, unloading under live objects, re-entrant plugins (the
# fake plugins of loader.mk), half-built wrappers and the ABI pins.
check_PROGRAMS += tests/test-ownership
TESTS += tests/test-ownership
tests_test_ownership_SOURCES = tests/test-ownership.c tests/fake-plugin.c \
	tests/fake-plugin.h
tests_test_ownership_CPPFLAGS = $(TEST_CPPFLAGS) -DFAKE_STATIC \
	-DFAKE_NAME=\"static\" -DFAKE_ASYNC
tests_test_ownership_LDFLAGS = -no-install
tests_test_ownership_LDADD = $(TEST_LIBS)
EXTRA_tests_test_ownership_DEPENDENCIES = $(FAKE_PLUGINS)
