# SPDX-License-Identifier: MIT
# tests/cpu.mk - the CPU plugin's own tests: its thread pool and stream,
# 2D copies, features and variants, partitions and the allreduce entry
# point, the weight buffer type, attention run as one kernel, and the int8
# products of activations that hold infinities, NaNs or a few massive
# values.  Every op on every device is tests/test-ops.
check_PROGRAMS += tests/test-cpu-pool tests/test-cpu-partitions \
	tests/test-cpu-weights tests/test-cpu-attn tests/test-cpu-quant
TESTS += tests/test-cpu-pool tests/test-cpu-partitions tests/test-cpu-weights \
	tests/test-cpu-attn tests/test-cpu-quant

tests_test_cpu_pool_SOURCES = tests/test-cpu-pool.c
tests_test_cpu_pool_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_cpu_pool_LDADD = $(TEST_LIBS)

tests_test_cpu_partitions_SOURCES = tests/test-cpu-partitions.c
tests_test_cpu_partitions_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_cpu_partitions_LDADD = $(TEST_LIBS)

tests_test_cpu_weights_SOURCES = tests/test-cpu-weights.c tests/test-util.c \
	tests/test-util.h
tests_test_cpu_weights_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_cpu_weights_LDADD = $(TEST_LIBS)

tests_test_cpu_attn_SOURCES = tests/test-cpu-attn.c tests/test-util.c \
	tests/test-util.h
tests_test_cpu_attn_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_cpu_attn_LDADD = $(TEST_LIBS)

tests_test_cpu_quant_SOURCES = tests/test-cpu-quant.c tests/test-util.c \
	tests/test-util.h
tests_test_cpu_quant_CPPFLAGS = $(TEST_CPPFLAGS)
tests_test_cpu_quant_LDADD = $(TEST_LIBS)
