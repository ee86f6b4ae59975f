#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-ops-meta3.sh - the op suite on a meta device over three CPU
# partitions, whose cuts no power of two lines up with (test-ops-meta.sh
# has two).
LOOM_CPU_DEVICES=3 LOOM_META_DEVICES=cpu0,cpu1,cpu2 LOOM_TEST_DEVICES=meta0
export LOOM_CPU_DEVICES LOOM_META_DEVICES LOOM_TEST_DEVICES
exec "$LOOM_TEST_BUILDDIR/tests/test-ops"
