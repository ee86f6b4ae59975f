# SPDX-License-Identifier: MIT
# tests/loader.mk - the loader and backend-interface tests: one fake
# plugin source built many ways (good and broken), and test-loader.
check_PROGRAMS += tests/test-loader
TESTS += tests/test-loader
# libcore/abi.c is compiled in too: the test calls the ABI rule with a
# core version other than this one's.
tests_test_loader_SOURCES = tests/test-loader.c tests/fake-plugin.c \
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

check_LTLIBRARIES += tests/fake/loom-good.la
FAKE_PLUGINS += tests/fake/loom-good.la
tests_fake_loom_good_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_good_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_2D -DFAKE_ASYNC
tests_fake_loom_good_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_good_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-fgpu.la
FAKE_PLUGINS += tests/fake/loom-fgpu.la
tests_fake_loom_fgpu_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_fgpu_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"fgpu\" -DFAKE_TYPE=LOOM_DEV_TYPE_GPU -DFAKE_NO_MEMSET
tests_fake_loom_fgpu_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_fgpu_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-fmeta.la
FAKE_PLUGINS += tests/fake/loom-fmeta.la
tests_fake_loom_fmeta_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_fmeta_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"fmeta\" -DFAKE_TYPE=LOOM_DEV_TYPE_META
tests_fake_loom_fmeta_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_fmeta_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-nodesc.la
FAKE_PLUGINS += tests/fake/loom-nodesc.la
tests_fake_loom_nodesc_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_nodesc_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"nodesc\" -DFAKE_NO_DESCRIPTOR
tests_fake_loom_nodesc_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere $(NO_UNDEFINED)
tests_fake_loom_nodesc_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-shortdesc.la
FAKE_PLUGINS += tests/fake/loom-shortdesc.la
tests_fake_loom_shortdesc_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_shortdesc_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"shortdesc\" -DFAKE_SHORT_DESCRIPTOR
tests_fake_loom_shortdesc_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_shortdesc_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-major.la
FAKE_PLUGINS += tests/fake/loom-major.la
tests_fake_loom_major_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_major_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"major\" -DFAKE_ABI_MAJOR=2
tests_fake_loom_major_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_major_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-minor.la
FAKE_PLUGINS += tests/fake/loom-minor.la
tests_fake_loom_minor_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_minor_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"minor\" -DFAKE_ABI_NEWER
tests_fake_loom_minor_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_minor_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-nomethod.la
FAKE_PLUGINS += tests/fake/loom-nomethod.la
tests_fake_loom_nomethod_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_nomethod_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"nomethod\" -DFAKE_MISSING_METHOD
tests_fake_loom_nomethod_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_nomethod_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-initfail.la
FAKE_PLUGINS += tests/fake/loom-initfail.la
tests_fake_loom_initfail_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_initfail_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"initfail\" -DFAKE_INIT_FAIL
tests_fake_loom_initfail_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_initfail_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-score0.la
FAKE_PLUGINS += tests/fake/loom-score0.la
tests_fake_loom_score0_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_score0_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"score0\" -DFAKE_SCORE=0
tests_fake_loom_score0_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_score0_la_LIBADD = $(PLUGIN_LINK_LIBS)

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

check_LTLIBRARIES += tests/fake/loom-misnamed.la
FAKE_PLUGINS += tests/fake/loom-misnamed.la
tests_fake_loom_misnamed_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_misnamed_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"other\"
tests_fake_loom_misnamed_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_misnamed_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-var-a.la
FAKE_PLUGINS += tests/fake/loom-var-a.la
tests_fake_loom_var_a_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_var_a_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"var\" -DFAKE_SCORE=2
tests_fake_loom_var_a_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_var_a_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-var-b.la
FAKE_PLUGINS += tests/fake/loom-var-b.la
tests_fake_loom_var_b_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_var_b_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"var\" -DFAKE_SCORE=5
tests_fake_loom_var_b_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_var_b_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-var-c.la
FAKE_PLUGINS += tests/fake/loom-var-c.la
tests_fake_loom_var_c_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_var_c_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"var\" -DFAKE_SCORE=0
tests_fake_loom_var_c_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_var_c_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-var-d.la
FAKE_PLUGINS += tests/fake/loom-var-d.la
tests_fake_loom_var_d_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_var_d_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"var\" -DFAKE_SCORE=9 -DFAKE_INIT_FAIL
tests_fake_loom_var_d_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_var_d_la_LIBADD = $(PLUGIN_LINK_LIBS)

# Device ranks and the ABI minor: a GPU that declares itself primary, an
# IGPU that says marginal, one that says a rank there is not, and a GPU
# built against ABI 1.0 (its device table ends before get_rank).
check_LTLIBRARIES += tests/fake/loom-pgpu.la
FAKE_PLUGINS += tests/fake/loom-pgpu.la
tests_fake_loom_pgpu_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_pgpu_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"pgpu\" -DFAKE_TYPE=LOOM_DEV_TYPE_GPU -DFAKE_RANK=LOOM_DEV_RANK_PRIMARY
tests_fake_loom_pgpu_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_pgpu_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-migpu.la
FAKE_PLUGINS += tests/fake/loom-migpu.la
tests_fake_loom_migpu_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_migpu_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"migpu\" -DFAKE_TYPE=LOOM_DEV_TYPE_IGPU -DFAKE_RANK=LOOM_DEV_RANK_MARGINAL
tests_fake_loom_migpu_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_migpu_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-badrank.la
FAKE_PLUGINS += tests/fake/loom-badrank.la
tests_fake_loom_badrank_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_badrank_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"badrank\" -DFAKE_RANK=7
tests_fake_loom_badrank_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_badrank_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-old.la
FAKE_PLUGINS += tests/fake/loom-old.la
tests_fake_loom_old_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_old_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"old\" -DFAKE_TYPE=LOOM_DEV_TYPE_GPU -DFAKE_ABI_1_0
tests_fake_loom_old_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_old_la_LIBADD = $(PLUGIN_LINK_LIBS)

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

# Plugins that call back into the loader (from init, from a thread init
# waits for, from an ELF constructor) and one whose buffer type, made on
# first use, lacks a required method: test-ownership uses them.
check_LTLIBRARIES += tests/fake/loom-initload.la
FAKE_PLUGINS += tests/fake/loom-initload.la
tests_fake_loom_initload_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_initload_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"initload\" -DFAKE_INIT_LOAD_ALL
tests_fake_loom_initload_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_initload_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-initunload.la
FAKE_PLUGINS += tests/fake/loom-initunload.la
tests_fake_loom_initunload_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_initunload_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"initunload\" -DFAKE_INIT_UNLOAD
tests_fake_loom_initunload_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_initunload_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-initthread.la
FAKE_PLUGINS += tests/fake/loom-initthread.la
tests_fake_loom_initthread_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_initthread_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"initthread\" -DFAKE_INIT_THREAD
tests_fake_loom_initthread_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_initthread_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-zctor.la
FAKE_PLUGINS += tests/fake/loom-zctor.la
tests_fake_loom_zctor_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_zctor_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"zctor\" -DFAKE_CTOR_LOAD_ALL
tests_fake_loom_zctor_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_zctor_la_LIBADD = $(PLUGIN_LINK_LIBS)

check_LTLIBRARIES += tests/fake/loom-lazybuft.la
FAKE_PLUGINS += tests/fake/loom-lazybuft.la
tests_fake_loom_lazybuft_la_SOURCES = tests/fake-plugin.c
tests_fake_loom_lazybuft_la_CPPFLAGS = $(AM_CPPFLAGS) -DFAKE_NAME=\"lazybuft\" -DFAKE_BUFT_LAZY_MISSING
tests_fake_loom_lazybuft_la_LDFLAGS = $(FAKE_LDFLAGS) $(NO_UNDEFINED)
tests_fake_loom_lazybuft_la_LIBADD = $(PLUGIN_LINK_LIBS)
