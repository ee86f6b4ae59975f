# SPDX-License-Identifier: MIT
# tests/threads.mk - the library under several threads: backends of their
# own, two threads on one backend, and unloading while others query
# devices (run under ThreadSanitizer by the CI).
check_PROGRAMS += tests/test-threads
TESTS += tests/test-threads
tests_test_threads_SOURCES = tests/test-threads.c
tests_test_threads_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_threads_LDFLAGS = -no-install
tests_test_threads_LDADD = $(TEST_LIBS)
