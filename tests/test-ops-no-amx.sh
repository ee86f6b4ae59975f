#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-ops-no-amx.sh - the products of the op suite once more with
# the CPU plugin's AMX tiles turned off (LOOM_CPU_AMX=0), so that a CPU
# which has them also checks the kernels every other CPU runs.
LOOM_CPU_AMX=0 LOOM_TEST_OPS=mul_mat,mul_mat_id
export LOOM_CPU_AMX LOOM_TEST_OPS
exec "$LOOM_TEST_BUILDDIR/tests/test-ops"
