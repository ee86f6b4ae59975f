#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-sched-model.sh - partial offload in the tools, with the acme
# test plugin (add and mul_mat only) on the plugin path: loom-run gives
# the greedy tokens of cpu0 alone when split over two CPU partitions
# (--gpu-layers), on acme0 with the CPU doing what it lacks, and split
# over acme0 and the CPU; loom-bench model runs with acme as the first
# device and its logits match the CPU's, and says why it leaves acme0
# out when the CPU comes first; loom-bench sched runs; and
# --gpu-layers without a second device fails with one line.  TAP output.

run="$LOOM_TEST_BUILDDIR/tools/loom-run"
bench="$LOOM_TEST_BUILDDIR/tools/loom-bench"
# The acme plugin first, then the plugin folders this build has.
LOOM_PLUGIN_PATH="$LOOM_TEST_BUILDDIR/tests/acme/.libs"
for d in $(echo "$LOOM_TEST_PLUGIN_PATH" | tr ':' ' '); do
	[ -d "$d" ] && LOOM_PLUGIN_PATH="$LOOM_PLUGIN_PATH:$d"
done
LOOM_CPU_DEVICES=2
export LOOM_PLUGIN_PATH LOOM_CPU_DEVICES
dir="${TMPDIR:-/tmp}/loom-test-sched-model.$$"
mkdir -p "$dir" || exit 1
trap 'rm -rf "$dir"' EXIT
n=0
failed=0

echo "1..12"

result() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		sed 's/^/# /' "$dir/err" 2>/dev/null
		failed=1
	fi
}

tokens() {
	sed -n 's/.*"tokens": \[\([0-9, ]*\)\].*/\1/p' "$1"
}

# The worst NMSE a loom-bench model --json run reports, at most 1e-6.
nmse_ok() {
	v=$(sed -n 's/.*"nmse_vs_single": \([0-9.e+-]*\).*/\1/p' "$1" | head -1)
	[ -n "$v" ] && awk -v v="$v" 'BEGIN { exit !(v <= 1e-6) }'
}

"$bench" model --preset tiny --save "$dir/tiny.gguf" 2>"$dir/err"
result $? "loom-bench model --save writes a file"

prompt="--tokens 1,5,100,7,42 -n 8 --json"
# shellcheck disable=SC2086
"$run" -m "$dir/tiny.gguf" $prompt --devices cpu0 >"$dir/one.json" \
	2>"$dir/err"
ok=$?
[ $ok = 0 ] && [ -n "$(tokens "$dir/one.json")" ] || ok=1
result $ok "loom-run on cpu0"

# shellcheck disable=SC2086
same_tokens() {
	name=$1
	shift
	"$run" -m "$dir/tiny.gguf" $prompt "$@" >"$dir/$name.json" \
		2>"$dir/err" &&
		[ "$(tokens "$dir/one.json")" = "$(tokens "$dir/$name.json")" ]
}

same_tokens parts --devices cpu0,cpu1 --gpu-layers 1 &&
	grep -q '"name": "cpu1"' "$dir/parts.json"
result $? "loom-run --devices cpu0,cpu1 --gpu-layers 1: cpu0's tokens"

same_tokens acme --devices acme0 &&
	grep -q '"name": "acme0"' "$dir/acme.json" &&
	grep -q '"name": "cpu0"' "$dir/acme.json"
result $? "loom-run --devices acme0: the CPU runs what acme lacks"

same_tokens acme1 --devices acme0 --gpu-layers 1
result $? "loom-run --devices acme0 --gpu-layers 1: cpu0's tokens"

LOOM_BACKENDS=acme,cpu "$bench" model --preset tiny --prefill 8 \
	--decode 4 --reps 1 --no-limits --json >"$dir/bench.json" 2>"$dir/err" &&
	grep -q '"acme0+cpu0"' "$dir/bench.json"
result $? "loom-bench model with acme as the first device"

"$bench" model --preset tiny --prefill 8 --decode 4 --reps 1 --no-limits \
	--json --devices acme0 --devices cpu0 >"$dir/both.json" 2>"$dir/err" &&
	nmse_ok "$dir/both.json"
result $? "loom-bench model: acme0 with the CPU matches cpu0 (NMSE <= 1e-6)"

"$bench" model --preset tiny --prefill 8 --decode 4 --reps 1 --no-limits \
	>"$dir/left.txt" 2>"$dir/err" &&
	grep -Fxq "note: acme0 not measured: it lacks get_rows (--devices acme0 runs it, a CPU taking what it lacks)" \
		"$dir/left.txt"
result $? "loom-bench model says it left acme0 out, and why"

"$bench" model --preset tiny --prefill 8 --decode 4 --reps 1 --no-limits \
	--json --devices cpu0,cpu1 --gpu-layers 1 >"$dir/split.json" \
	2>"$dir/err" && nmse_ok "$dir/split.json" &&
	grep -q '"gpu_layers": 1' "$dir/split.json"
result $? "loom-bench model --gpu-layers 1 over cpu0,cpu1 matches cpu1"

"$bench" sched --preset tiny --decode 4 --reps 2 >"$dir/sched.txt" \
	2>"$dir/err" && grep -q "planned (once per shape)" "$dir/sched.txt" &&
	grep -q "copies .*of decode time" "$dir/sched.txt"
result $? "loom-bench sched"

# shellcheck disable=SC2086
LOOM_CPU_DEVICES=1 "$run" -m "$dir/tiny.gguf" $prompt --devices cpu0 \
	--gpu-layers 1 >/dev/null 2>"$dir/err"
[ $? != 0 ] && [ "$(wc -l <"$dir/err")" = 1 ] &&
	grep -q "no second device" "$dir/err"
result $? "--gpu-layers with one device fails with one line"

# shellcheck disable=SC2086
"$run" -m "$dir/tiny.gguf" $prompt --gpu-layers x >/dev/null 2>"$dir/err"
[ $? != 0 ] && grep -q "gpu-layers: bad count" "$dir/err"
result $? "--gpu-layers x is refused"

exit $failed
