#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-ops-meta.sh - the op suite once more on a meta device over
# two CPU partitions (LOOM_CPU_DEVICES=2), so that every op the meta
# device takes is checked against the same reference as on one device.
LOOM_CPU_DEVICES=2 LOOM_META_DEVICES=cpu0,cpu1 LOOM_TEST_DEVICES=meta0
export LOOM_CPU_DEVICES LOOM_META_DEVICES LOOM_TEST_DEVICES
exec "$LOOM_TEST_BUILDDIR/tests/test-ops"
