# tests/tools.mk - the shipped files and the installed tools, checked as
# a user or a distribution would: shell scripts under the TAP driver.
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL)

# Every source file names its licence.  Expected to fail until the SPDX
# lines are added to the whole tree in one sweep; that change moves it
# from XFAIL_TESTS to TESTS (an unexpected pass fails the suite).
TESTS += tests/test-spdx.sh
XFAIL_TESTS += tests/test-spdx.sh
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
