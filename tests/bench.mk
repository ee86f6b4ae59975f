# tests/bench.mk - loom-bench's commands, run small; see tests/test-bench.sh.
TEST_EXTENSIONS = .sh
SH_LOG_DRIVER = $(LOG_DRIVER)
SH_LOG_COMPILER = $(SHELL)
TESTS += tests/test-bench.sh
EXTRA_DIST += tests/test-bench.sh
