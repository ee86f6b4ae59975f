#!/bin/sh
# check-gpu.sh BUILDDIR [DEVICE] - the GPU check behind `make check-gpu`:
# the GPU plugin's own tests, the op suite on DEVICE (default cuda0) with
# the BLAS and with the plugin's own GEMM, a meta device over DEVICE twice,
# an add's bandwidth and a BF16 GEMM against the device's limits
# (test-gpu-perf), and loom-bench's BF16 GEMM, GEMV and stream runs.
# Each step has a time limit; the limits add up to under 8 minutes.  Ends
# with "N passed, N failed"; exits non-zero when a step failed.
set -u
b=${1:?usage: check-gpu.sh BUILDDIR [DEVICE]}
dev=${2:-cuda0}
plugin=${dev%%[0-9]*}

unset LOOM_BACKENDS LOOM_LOG LOOM_CPU_DEVICES LOOM_CPU_THREADS \
	LOOM_META_DEVICES LOOM_CUDA_ALLREDUCE LOOM_CUDA_GEMM LOOM_TEST_OPS \
	LOOM_TEST_DEVICES
LOOM_TEST_BUILDDIR=$b
LOOM_TEST_PLUGIN_PATH=$b/plugins/cpu/.libs:$b/plugins/meta/.libs:$b/plugins/cuda/.libs:$b/plugins/hip/.libs
LOOM_PLUGIN_PATH=$LOOM_TEST_PLUGIN_PATH
LOOM_PLUGIN_SYSTEM_PATH=
export LOOM_TEST_BUILDDIR LOOM_TEST_PLUGIN_PATH LOOM_PLUGIN_PATH \
	LOOM_PLUGIN_SYSTEM_PATH

# A machine whose driver lists a GPU must give the device: a plugin that
# failed to load there (say libnccl.so.2 not found) is a failure, never a
# skip.  Only a machine with no GPU at all skips.
gpus=""
case $plugin in
cuda) command -v nvidia-smi >/dev/null 2>&1 &&
	gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ') ;;
hip) command -v rocm-smi >/dev/null 2>&1 &&
	gpus=$(rocm-smi --showid 2>/dev/null | grep -c '^GPU\[') ;;
esac
if ! "$b/tools/loom-info" --json 2>/dev/null | grep -q "\"$dev\""; then
	if [ "${gpus:-0}" -gt 0 ]; then
		echo "check-gpu: the driver lists $gpus GPU(s) but Loom has" \
		     "no device $dev; what loom-info says of $plugin:"
		"$b/tools/loom-info" 2>&1 | grep -E "$plugin" -A2
		echo "0 passed, 1 failed"
		exit 1
	fi
	echo "check-gpu: no GPU here (no $dev):"
	"$b/tools/loom-info" 2>&1 | grep -E "$plugin" -A1
	echo "0 passed, 0 failed (skipped: no GPU)"
	exit 0
fi
"$b/tools/loom-info"

passed=0
failed=0
# step NAME LIMIT_S COMMAND... - runs one step under a time limit.
step() {
	name=$1
	limit=$2
	shift 2
	echo
	echo "=== $name (limit ${limit}s)"
	start=$(date +%s)
	timeout "$limit" "$@"
	rc=$?
	echo "=== $name: exit $rc after $(($(date +%s) - start))s"
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
	fi
}

step "test-gpu" 45 "$b/tests/test-gpu"
step "op suite on $dev" 120 \
	env LOOM_TEST_DEVICES="$dev" "$b/tests/test-ops"
step "op suite on $dev, own GEMM" 45 \
	env LOOM_TEST_DEVICES="$dev" LOOM_TEST_OPS=mul_mat,mul_mat_id \
	LOOM_CUDA_GEMM=own "$b/tests/test-ops"
# The same GPU twice: the plugin's allreduce declines, the meta device's
# own reduce runs; results are checked against the same reference.
step "op suite on meta($dev,$dev)" 100 \
	env LOOM_META_DEVICES="$dev,$dev" LOOM_TEST_DEVICES=meta0 \
	"$b/tests/test-ops"
step "bandwidth and BF16 peak" 45 "$b/tests/test-gpu-perf" "$dev"
step "bench gemm bf16" 40 \
	"$b/tools/loom-bench" gemm --devices "$dev" --type bf16
step "bench gemv" 40 "$b/tools/loom-bench" gemv --devices "$dev"
step "bench stream" 25 "$b/tools/loom-bench" stream --devices "$dev"

echo
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
