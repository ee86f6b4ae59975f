#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-bench.sh - loom-bench runs every command on small sizes and
# says what it measured; the figures themselves are not checked (timing
# belongs to loom-bench on a quiet machine), but the meta run's output
# must match one device's, --devices must mean what it does in loom-run,
# the table must fit 100 columns, and a bad option or file must fail with
# one clear message.
# TAP output.

bench="$LOOM_TEST_BUILDDIR/tools/loom-bench"
LOOM_PLUGIN_PATH="$LOOM_TEST_PLUGIN_PATH"
export LOOM_PLUGIN_PATH
out="${TMPDIR:-/tmp}/loom-test-bench.$$"
trap 'rm -f "$out" "$out.err" "$out.gguf" "$out.x.gguf"' EXIT
n=0
failed=0

echo "1..19"

# check NAME KEY... -- COMMAND...: COMMAND succeeds and its JSON has every
# KEY.
check() {
	name=$1
	shift
	keys=""
	while [ "$1" != "--" ]; do
		keys="$keys $1"
		shift
	done
	shift
	n=$((n + 1))
	"$@" >"$out" 2>"$out.err"
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "not ok $n - $name: exit status $rc"
		sed 's/^/# /' "$out.err"
		failed=1
		return
	fi
	for k in $keys; do
		if ! grep -q "\"$k\":" "$out"; then
			echo "not ok $n - $name: no key $k"
			failed=1
			return
		fi
	done
	echo "ok $n - $name"
}

check "model on 2 CPU partitions" devices prefill_tok_s decode_tok_s \
	nmse_vs_single compute_bytes_per_device -- \
	env LOOM_CPU_DEVICES=2 "$bench" model --preset tiny --prefill 16 \
	--decode 4 --reps 1 --no-limits --json

# The meta device's logits against the whole CPU's: both are F32 sums in
# a different order, far below 1e-6.
n=$((n + 1))
nmse=$(sed -n 's/.*"nmse_vs_single": *\([^,]*\),*$/\1/p' "$out" |
       head -n 1)
if [ -n "$nmse" ] && awk -v v="$nmse" 'BEGIN { exit !(v < 1e-6) }'; then
	echo "ok $n - meta matches one device (NMSE $nmse)"
else
	echo "not ok $n - meta vs one device: NMSE '$nmse'"
	failed=1
fi

# A meta device named on the command line, composed at load without the
# model's shape: tiny's 32-wide heads are not what a device guesses from
# the weights alone, so the run uses the same members with the shape.
# Each --devices is a run of its own.
check "model on a named meta device" devices decode_tok_s -- \
	env LOOM_CPU_DEVICES=2 LOOM_META_DEVICES=cpu0,cpu1 "$bench" model \
	--preset tiny --devices cpu0 --devices meta0 --prefill 16 --decode 4 \
	--reps 1 --no-limits --json
runs() {
	tr -d '\n ' <"$out" | sed -n 's/.*"devices":\[\([^]]*\)\].*/\1/p'
}
n=$((n + 1))
if runs | grep -q '^"cpu0","meta[0-9]*"$' && grep -q '"nmse_vs_single": [0-9]' "$out"
then
	echo "ok $n - --devices twice: two runs, the meta one checked"
else
	echo "not ok $n - --devices twice: two runs: $(runs)"
	failed=1
fi

# A list is one meta device over those devices, as in loom-run, against
# one device over all their cores.
check "model on --devices cpu0,cpu1" devices decode_tok_s -- \
	env LOOM_CPU_DEVICES=2 "$bench" model --preset tiny --devices cpu0,cpu1 \
	--prefill 16 --decode 4 --reps 1 --no-limits --json
n=$((n + 1))
if tr -d '\n' <"$out" | grep -q '"device": "meta[0-9]*", *"description": "meta(cpu0,cpu1)"' &&
   [ "$(grep -c '"device":' "$out")" = 2 ]; then
	echo "ok $n - --devices cpu0,cpu1 is one meta device and the reference"
else
	echo "not ok $n - --devices cpu0,cpu1: $(tr -d '\n' <"$out")"
	failed=1
fi

# One run beside the whole-CPU reference takes its steps in turns with it.
n=$((n + 1))
if tr -d '\n' <"$out" | grep -q '"in_turns": true'; then
	echo "ok $n - the meta run and the reference took turns"
else
	echo "not ok $n - no turns: $(tr -d '\n' <"$out")"
	failed=1
fi

# The child's side with a descriptor that is no socket: it runs alone,
# neither waiting for turns nor closing what is not its own.
n=$((n + 1))
if timeout 300 "$bench" model --preset tiny --prefill 16 --decode 4 \
	--reps 1 --no-limits --internal-single "$out.x.gguf" \
	--internal-turns 0 </dev/null >/dev/null 2>"$out.err" &&
   head -n 1 "$out.x.gguf" | grep -q '^cpu'; then
	echo "ok $n - --internal-turns with no socket runs alone"
else
	echo "not ok $n - --internal-turns with no socket: $(cat "$out.err")"
	failed=1
fi

# The table: within 100 columns, the error against one device named for a
# user.
n=$((n + 1))
env LOOM_CPU_DEVICES=2 "$bench" model --preset tiny --prefill 16 --decode 4 \
	--reps 1 --no-limits >"$out" 2>"$out.err"
wide=$(awk '{ if (length($0) > w) w = length($0) } END { print w }' "$out")
if grep -q '  err vs 1 dev$' "$out" && [ "$wide" -le 100 ]; then
	echo "ok $n - the model table fits in 100 columns ($wide)"
else
	echo "not ok $n - the model table: $wide columns"
	sed 's/^/# /' "$out"
	failed=1
fi

check "gemm" gflops peak_gflops -- \
	"$bench" gemm --size 128 --reps 1 --no-limits --json
check "gemm of a given shape" gflops m n k -- \
	"$bench" gemm --shape 96x40x64 --reps 1 --no-limits --json
n=$((n + 1))
if grep -q '"m": *96,' "$out" && grep -q '"n": *40,' "$out" &&
   grep -q '"k": *64,' "$out"; then
	echo "ok $n - gemm ran m, n and k as given"
else
	echo "not ok $n - gemm --shape 96x40x64: $(tr -d '\n' <"$out")"
	failed=1
fi
check "gemv, every type" gbps stream_gbps -- \
	"$bench" gemv --size 256 --rows 512 --reps 1 --no-limits --json
# The allreduce run checks every sum it times and fails on a wrong one.
check "allreduce over 2 partitions" bytes us algbw busbw -- \
	"$bench" allreduce --reps 1 --no-limits --json
check "dispatch" us_per_op -- "$bench" dispatch --reps 1 --json

n=$((n + 1))
if "$bench" gemm --size nonsense >"$out" 2>"$out.err" ||
   ! [ -s "$out.err" ] ||
   "$bench" gemm --shape 96x40 >"$out" 2>"$out.err" ||
   ! grep -q -- "--shape takes MxNxK" "$out.err"; then
	echo "not ok $n - a bad option fails with a message"
	failed=1
else
	echo "ok $n - a bad option fails with a message"
fi

# refused NAME STATUS LINE COMMAND...: COMMAND exits with STATUS, having
# printed LINE alone on stderr.
refused() {
	name=$1
	status=$2
	line=$3
	shift 3
	n=$((n + 1))
	"$@" >"$out" 2>"$out.err"
	rc=$?
	if [ $rc = "$status" ] && [ "$(cat "$out.err")" = "$line" ]; then
		echo "ok $n - $name"
	else
		echo "not ok $n - $name: status $rc"
		sed 's/^/# /' "$out.err"
		failed=1
	fi
}

# An unknown preset lists them, with the status of a bad option.
refused "an unknown preset lists the presets" 2 \
	"loom-bench: --preset: no preset 'huge' (tiny, tiny-moe, small, small-moe, 7b-layer)" \
	"$bench" model --preset huge

# A model file of another architecture: one message naming the file.
"$bench" model --preset tiny --save "$out.gguf" 2>"$out.err"
LC_ALL=C sed 's/llama/gpt_x/g' "$out.gguf" >"$out.x.gguf"
refused "another architecture: one message naming the file" 1 \
	"loom-bench: $out.x.gguf: architecture 'gpt_x' is not supported (llama, qwen2, qwen3, qwen3moe, gemma3, xverse, exaone, phi3, internlm2, mistral3, gpt-oss are)" \
	"$bench" model --gguf "$out.x.gguf" --no-limits
rm -f "$out.gguf" "$out.x.gguf"

# A number out of range names the option and its range.
n=$((n + 1))
if "$bench" gemv --reps 9999 >"$out" 2>"$out.err" ||
   ! grep -q -- "--reps takes a whole number from 1 to 1000" "$out.err"; then
	echo "not ok $n - a number out of range names its option and range"
	failed=1
else
	echo "ok $n - a number out of range names its option and range"
fi
rm -f "$out.err"
exit $failed
