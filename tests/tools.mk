# SPDX-License-Identifier: MIT
# tests/tools.mk - the shipped files and the installed tools, checked as
# a user or a distribution would: shell scripts under the TAP driver.
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL)

# Every source file names its licence.
TESTS += tests/test-spdx.sh
EXTRA_DIST += tests/test-spdx.sh

# loom-info's warnings for environment mistakes.
TESTS += tests/test-info.sh
EXTRA_DIST += tests/test-info.sh

# The manual pages render without warnings.
TESTS += tests/test-man.sh
EXTRA_DIST += tests/test-man.sh

# --version, and every option in --help and the manual page.
TESTS += tests/test-tools-help.sh
EXTRA_DIST += tests/test-tools-help.sh

# loom-conformance on the CPU plugin, on the plugin template (which claims
# no op) and on a fake plugin that claims every op and computes none.
TESTS += tests/test-conformance.sh
EXTRA_DIST += tests/test-conformance.sh
check_LTLIBRARIES += tests/conformance/loom-liar.la
tests_conformance_loom_liar_la_SOURCES = tests/fake-plugin.c
tests_conformance_loom_liar_la_CPPFLAGS = $(AM_CPPFLAGS) \
	-DFAKE_NAME=\"liar\" -DFAKE_CLAIM_ALL
tests_conformance_loom_liar_la_LDFLAGS = -module -avoid-version -shared \
	-rpath /nowhere -export-symbols-regex '^loom_plugin_descriptor$$' \
	$(NO_UNDEFINED)
tests_conformance_loom_liar_la_LIBADD = $(PLUGIN_LINK_LIBS)

# The plugin guide's walk-through builds and passes loom-conformance.
TESTS += tests/test-guide.sh
EXTRA_DIST += tests/test-guide.sh
