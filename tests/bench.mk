# SPDX-License-Identifier: MIT
# tests/bench.mk - loom-bench's commands, run small (tests/test-bench.sh),
# and loom-run on a file loom-bench saves (tests/test-run.sh).
TESTS += tests/test-bench.sh tests/test-run.sh
EXTRA_DIST += tests/test-bench.sh tests/test-run.sh
