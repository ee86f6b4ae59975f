# SPDX-License-Identifier: MIT
# tests/loader.mk - the loader and backend-interface tests: one fake
# plugin source built many ways (good and broken), and test-loader.
check_PROGRAMS += tests/test-loader
TESTS += tests/test-loader
# libcore/abi.c is compiled in too: the test calls the ABI rule with a
# core version other than this one's.
tests_test_loader_SOURCES = tests/test-loader.c tests/test-loader-abi.c \
	tests/test-loader-elf.c tests/test-loader-iface.c tests/loader-util.c \
	tests/loader-util.h tests/loader-cases.h tests/fake-plugin.c \
	tests/fake-plugin.h libcore/abi.c
tests_test_loader_CPPFLAGS = $(TEST_CPPFLAGS) -I$(top_srcdir)/libcore \
	-DFAKE_STATIC -DFAKE_NAME=\"static\" -DFAKE_2D
tests_test_loader_LDFLAGS = -no-install
tests_test_loader_LDADD = $(TEST_LIBS)
EXTRA_tests_test_loader_DEPENDENCIES = $(FAKE_PLUGINS) tools/loom-info \
	tests/acme/loom-acme.la

# Test plugins: uninstalled modules (-rpath /nowhere makes libtool build
# a shared object).  test-loader links their .libs/*.so into a temporary
# directory of its own.
FAKE_LDFLAGS = -module -avoid-version -shared -rpath /nowhere \
	-export-symbols-regex '^loom_plugin_descriptor$$'
FAKE_PLUGINS =
EXTRA_DIST += tests/fake-libloom.sym

# The fake plugins built alike (tests/fake-plugin.c with their -D flags):
# listed once in tests/fake-plugins.list, their stanzas generated (by
# autogen.sh, and here when the list changes).  The ones that differ
# follow.
include $(srcdir)/tests/fake-plugins.mk
$(srcdir)/tests/fake-plugins.mk: $(srcdir)/tests/fake-plugins.list \
		$(srcdir)/tests/gen-fake-plugins.sh
	$(AM_V_GEN)$(SHELL) $(srcdir)/tests/gen-fake-plugins.sh \
		$(srcdir)/tests/fake-plugins.list > $@.tmp && mv $@.tmp $@
EXTRA_DIST += tests/fake-plugins.list tests/gen-fake-plugins.sh \
	tests/fake-plugins.mk

# A stand-in libloom.so.1 defining a symbol at node LOOM_9.9, for the
# plugin that needs a newer libloom.
check_LTLIBRARIES += tests/stub/libloom.la
tests_stub_libloom_la_SOURCES = tests/fake-plugin.c
tests_stub_libloom_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_STUB_LIBLOOM
tests_stub_libloom_la_LDFLAGS = -rpath /nowhere -version-info 1:0:0 \
	-Wl,--version-script=$(srcdir)/tests/fake-libloom.sym
EXTRA_tests_stub_libloom_la_DEPENDENCIES = tests/fake-libloom.sym

# The library the "nodep" plugin needs: linked by path with a soname no
# file has, so it is missing wherever the plugin goes.
tests/fakedep/libloom-fakedep.so: $(srcdir)/tests/fake-plugin.c
	@$(MKDIR_P) tests/fakedep
	$(AM_V_CC)$(CC) $(CPPFLAGS) $(AM_CPPFLAGS) $(CFLAGS) -fPIC -shared \
		-DFAKE_DEP_LIB -o $@ $(srcdir)/tests/fake-plugin.c \
		-Wl,-soname,libloom-fakedep.so.0
CLEANFILES += tests/fakedep/libloom-fakedep.so

check_LTLIBRARIES += tests/fake/loom-nodesc.la
FAKE_PLUGINS += tests/fake/loom-nodesc.la
tests_fake_loom_nodesc_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_nodesc_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"nodesc\" -DFAKE_NO_DESCRIPTOR
tests_fake_loom_nodesc_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere $(NO_UNDEFINED)
tests_fake_loom_nodesc_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-undef.la
FAKE_PLUGINS += tests/fake/loom-undef.la
tests_fake_loom_undef_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_undef_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"undef\" -DFAKE_UNDEFINED
tests_fake_loom_undef_la_LDFLAGS = $(FAKE_LDFLAGS)
tests_fake_loom_undef_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-nodep.la
FAKE_PLUGINS += tests/fake/loom-nodep.la
tests_fake_loom_nodep_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_nodep_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"nodep\" -DFAKE_DEPENDENCY
tests_fake_loom_nodep_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_nodep_la_LIBADD = $(PLUGIN_LINK_LIBS) -Ltests/fakedep -lloom-fakedep
EXTRA_tests_fake_loom_nodep_la_DEPENDENCIES = tests/fakedep/libloom-fakedep.so

check_LTLIBRARIES += tests/fake/loom-newer.la
FAKE_PLUGINS += tests/fake/loom-newer.la
tests_fake_loom_newer_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_newer_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"newer\" -DFAKE_NEWER_LIBLOOM
tests_fake_loom_newer_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_newer_la_LIBADD = tests/stub/libloom.la

# The out-of-tree plugin template, built here from its own source so
# that test-loader shows it loads (installcheck builds it with its own
# Makefile against the installed Loom).
check_LTLIBRARIES += tests/fake/loom-my.la
FAKE_PLUGINS += tests/fake/loom-my.la
tests_fake_loom_my_la_SOURCES = examples/plugin-template/my-plugin.c
tests_fake_loom_my_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden
tests_fake_loom_my_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_my_la_LIBADD = $(PLUGIN_LINK_LIBS)

# The ELF checker under a fuzzer: make check replays the checked-in
# corpus through the standalone driver; a libFuzzer build compiles the same
# file with -DLOOM_FUZZ_LIBFUZZER (see the file's opening comment).
check_PROGRAMS += tests/fuzz-elf
TESTS += tests/fuzz-elf
tests_fuzz_elf_SOURCES = tests/fuzz-elf.c libcore/elf-check.c
tests_fuzz_elf_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/libcore
tests_fuzz_elf_CFLAGS = $(AM_CFLAGS) $(FUZZ_CFLAGS)
tests_fuzz_elf_LDFLAGS = $(FUZZ_LDFLAGS)
EXTRA_DIST += tests/corpus/elf
