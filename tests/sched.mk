# SPDX-License-Identifier: MIT
# tests/sched.mk - the scheduler over the acme test plugin (two ops, its
# own memory) and the CPU.
check_LTLIBRARIES += tests/acme/loom-acme.la
tests_acme_loom_acme_la_SOURCES = tests/acme-plugin.c
tests_acme_loom_acme_la_CPPFLAGS = $(AM_CPPFLAGS)
tests_acme_loom_acme_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere -export-symbols-regex '^loom_plugin_descriptor$$'
tests_acme_loom_acme_la_LIBADD = libcore/libloom.la

# The same source as two devices with deferred streams and events.
check_LTLIBRARIES += tests/acmes/loom-acmes.la
tests_acmes_loom_acmes_la_SOURCES = tests/acme-plugin.c
tests_acmes_loom_acmes_la_CPPFLAGS = $(AM_CPPFLAGS) -DACME_STREAMS
tests_acmes_loom_acmes_la_LDFLAGS = $(tests_acme_loom_acme_la_LDFLAGS)
tests_acmes_loom_acmes_la_LIBADD = libcore/libloom.la

check_PROGRAMS += tests/test-sched
TESTS += tests/test-sched
tests_test_sched_SOURCES = tests/test-sched.c tests/test-util.c \
	tests/test-util.h
tests_test_sched_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_sched_LDADD = model/libmodel.la $(TEST_LIBS)
EXTRA_tests_test_sched_DEPENDENCIES = tests/acme/loom-acme.la \
	tests/acmes/loom-acmes.la

# The tools' partial offload, with acme on the plugin path.
TESTS += tests/test-sched-model.sh
EXTRA_DIST += tests/test-sched-model.sh
