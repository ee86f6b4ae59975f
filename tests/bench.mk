# tests/bench.mk - loom-bench's commands, run small; see tests/test-bench.sh.
TESTS += tests/test-bench.sh
EXTRA_DIST += tests/test-bench.sh
