#!/bin/sh
# SPDX-License-Identifier: MIT
# check-gpu.sh BUILDDIR [DEVICE [LOGDIR]] - the GPU check behind `make
# check-gpu`: the GPU plugin's own tests, its limits and its fast paths
# (test-gpu-paths), the op suite on DEVICE (default cuda0) with the BLAS
# (no product case skipped) and with the plugin's own GEMM, a meta device
# over DEVICE twice, compute-sanitizer's memcheck and racecheck, then the
# figures (test-gpu-perf, loom-bench on the device).
# Each step has a time limit; together they stay under 8 minutes.  Each
# step's output goes to LOGDIR (default BUILDDIR/check-gpu-logs); a short
# summary comes last, ending "N passed, N failed".  Exits non-zero when a
# step failed, and when the driver lists a GPU that Loom cannot use.
set -u
b=${1:?usage: check-gpu.sh BUILDDIR [DEVICE [LOGDIR]]}
dev=${2:-cuda0}
logs=${3:-$b/check-gpu-logs}
plugin=${dev%%[0-9]*}

unset LOOM_BACKENDS LOOM_LOG LOOM_CPU_DEVICES LOOM_CPU_THREADS \
	LOOM_META_DEVICES LOOM_CUDA_ALLREDUCE LOOM_CUDA_GEMM LOOM_CUDA_GRAPH \
	LOOM_TEST_OPS LOOM_TEST_DEVICES
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
mkdir -p "$logs" || exit 1
"$b/tools/loom-info" >"$logs/00-loom-info.log" 2>&1
grep -E "^ *$dev|$plugin" "$logs/00-loom-info.log" | head -n 5

passed=0
failed=0
n=0
summary=""
# step NAME LIMIT_S COMMAND... - runs one step under a time limit, its
# output in its own log.
step() {
	name=$1
	limit=$2
	shift 2
	n=$((n + 1))
	log=$(printf '%s/%02d-%s.log' "$logs" "$n" \
		"$(echo "$name" | tr -c 'A-Za-z0-9\n' '-')")
	start=$(date +%s)
	timeout "$limit" "$@" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	if [ $rc -eq 0 ]; then
		passed=$((passed + 1))
		r="ok  "
	else
		failed=$((failed + 1))
		r="FAIL"
		[ $rc -eq 124 ] && r="TIME"
	fi
	line=$(printf '%s %-40s %4ss (limit %ss)' "$r" "$name" "$took" "$limit")
	echo "$line"
	summary="$summary$line
"
	if [ $rc -ne 0 ]; then
		tail -n 15 "$log" | sed 's/^/    /'
	fi
}

lt="$b/libtool --mode=execute"
step "test-gpu" 60 $lt "$b/tests/test-gpu"
step "limits (rows, 2^31, 4096^3, batches)" 150 $lt "$b/tests/test-gpu-limits"
step "fast paths (test-gpu-paths)" 120 $lt "$b/tests/test-gpu-paths"
step "op suite on $dev" 120 \
	env LOOM_TEST_DEVICES="$dev" $lt "$b/tests/test-ops"
# Every product and get_rows case (every weight type) ran on the device:
# a skip there means a type the kernels should take was refused.
step "no product or get_rows case skipped" 5 sh -c '
	ran=$(grep -cE "^ok [0-9]+ /ops/$1/(mul_mat|mul_mat_id|get_rows)/" "$2")
	skip=$(grep -E "^ok [0-9]+ /ops/$1/(mul_mat|mul_mat_id|get_rows)/.*# SKIP" "$2")
	echo "$ran cases"
	[ -z "$skip" ] || echo "$skip"
	[ "$ran" -gt 0 ] && [ -z "$skip" ]' sh "$dev" "$log"
step "op suite on $dev, own GEMM" 45 \
	env LOOM_TEST_DEVICES="$dev" LOOM_TEST_OPS=mul_mat,mul_mat_id \
	LOOM_CUDA_GEMM=own $lt "$b/tests/test-ops"
# The same GPU twice: the plugin's allreduce declines, the meta device's
# own reduce runs; results are checked against the same reference.
step "op suite on meta($dev,$dev)" 100 \
	env LOOM_META_DEVICES="$dev,$dev" LOOM_TEST_DEVICES=meta0 \
	$lt "$b/tests/test-ops"
if [ "$plugin" = cuda ]; then
	cs=$(command -v compute-sanitizer ||
	     ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
	if [ -n "$cs" ]; then
		# NCCL's initialisation probes its own kernels and meets
		# (and handles) cudaErrorNoKernelImageForDevice, which
		# memcheck reports as API errors: the allreduce through
		# NCCL runs outside memcheck, in the first step.
		step "memcheck: test-gpu" 120 $lt "$cs" --tool memcheck \
			--error-exitcode 1 "$b/tests/test-gpu" \
			-s /gpu/allreduce_one
		step "memcheck: op suite" 180 env LOOM_TEST_DEVICES="$dev" \
			$lt "$cs" --tool memcheck --error-exitcode 1 \
			"$b/tests/test-ops"
		# The plugin's own kernels, its GEMM in place of cuBLAS:
		# racecheck reports hazards inside cuBLAS's Hopper kernels
		# (nvjet_*), whose barriers it does not follow.
		step "racecheck: reductions" 120 env LOOM_TEST_DEVICES="$dev" \
			LOOM_CUDA_GEMM=own \
			LOOM_TEST_OPS=sum_rows,argmax,top_k,soft_max,rms_norm,norm,mul_mat,mul_mat_id \
			$lt "$cs" --tool racecheck --error-exitcode 1 \
			"$b/tests/test-ops"
	else
		step "compute-sanitizer present" 5 false
	fi
fi
step "figures (test-gpu-perf)" 150 $lt "$b/tests/test-gpu-perf" "$dev"
step "bench gemm 8192" 60 "$b/tools/loom-bench" gemm --devices "$dev" \
	--type bf16,f16,q8_0 --size 8192
step "bench gemv" 40 "$b/tools/loom-bench" gemv --devices "$dev"
step "bench stream" 25 "$b/tools/loom-bench" stream --devices "$dev"
step "bench model on $dev" 90 "$b/tools/loom-bench" model --devices "$dev" \
	--preset small --type bf16
step "bench model on meta($dev,$dev)" 90 env LOOM_META_DEVICES="$dev,$dev" \
	"$b/tools/loom-bench" model --devices "$dev" --devices meta0 \
	--preset small --type bf16

echo
echo "=== figures"
for f in "$logs"/*figures*.log "$logs"/*bench*.log; do
	[ -f "$f" ] || continue
	grep -vE '^(#|$)' "$f" | head -n 24
done
echo
echo "=== steps (logs in $logs)"
printf '%s' "$summary"
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
