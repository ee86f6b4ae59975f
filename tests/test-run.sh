#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-run.sh - loom-run on a file loom-bench saves: it runs on one
# CPU partition and on a meta device over two with the same greedy
# tokens, dumps one row of logits per prompt position, and fails with one
# line and a non-zero status on a missing file, a file that is not GGUF,
# an unknown device (saying how LOOM_CPU_DEVICES makes a cpuN), a device
# named twice, a split with no second device, a token out of range, an
# empty token id and a FIFO given as the model (without waiting for a
# writer); it warns of a --ctx longer than the model's, a plugin directory
# that is not there and a LOOM_CPU_THREADS that is no count.  TAP output.

run="$LOOM_TEST_BUILDDIR/tools/loom-run"
bench="$LOOM_TEST_BUILDDIR/tools/loom-bench"
# Only the plugin folders this build has: the loader warns of a missing
# one, and the error checks below want loom-run's line alone.
LOOM_PLUGIN_PATH=
for d in $(echo "$LOOM_TEST_PLUGIN_PATH" | tr ':' ' '); do
	[ -d "$d" ] && LOOM_PLUGIN_PATH="${LOOM_PLUGIN_PATH:+$LOOM_PLUGIN_PATH:}$d"
done
LOOM_CPU_DEVICES=2
export LOOM_PLUGIN_PATH LOOM_CPU_DEVICES
dir="${TMPDIR:-/tmp}/loom-test-run.$$"
mkdir -p "$dir" || exit 1
trap 'rm -rf "$dir"' EXIT
n=0
failed=0

echo "1..18"

result() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		failed=1
	fi
}

tokens() {
	sed -n 's/.*"tokens": \[\([0-9, ]*\)\].*/\1/p' "$1"
}

"$bench" model --preset tiny --save "$dir/tiny.gguf" 2>"$dir/err"
result $? "loom-bench model --save writes a file"

"$run" -m "$dir/tiny.gguf" --tokens 1,5,100,7,42 -n 8 --json \
	--devices cpu0 --dump-logits "$dir/one.bin" >"$dir/one.json" \
	2>"$dir/err"
ok=$?
[ $ok = 0 ] && [ -n "$(tokens "$dir/one.json")" ] || ok=1
result $ok "runs on cpu0"

# 256 logits of 4 bytes for each of 5 prompt positions.
[ "$(wc -c <"$dir/one.bin" | tr -d ' ')" = 5120 ]
result $? "--dump-logits writes n_vocab floats per prompt position"

"$run" -m "$dir/tiny.gguf" --tokens 1,5,100,7,42 -n 8 --json \
	--devices cpu0,cpu1 >"$dir/meta.json" 2>"$dir/err" &&
	[ "$(tokens "$dir/one.json")" = "$(tokens "$dir/meta.json")" ]
result $? "meta over cpu0,cpu1 gives the same greedy tokens"

# BOS, then the mark and the letters as byte tokens (the saved vocabulary
# has no longer pieces).
"$run" -m "$dir/tiny.gguf" -p "Hello world" -n 2 --json >"$dir/p.json" \
	2>"$dir/err" && grep -q '"n_prompt": 17,' "$dir/p.json"
result $? "-p tokenizes with the file's vocabulary"

"$bench" model --gguf "$dir/tiny.gguf" --prefill 8 --decode 4 --reps 1 \
	--no-limits --json >"$dir/bench.json" 2>"$dir/err" &&
	grep -q '"preset": "[^"]*tiny.gguf"' "$dir/bench.json"
result $? "loom-bench model --gguf measures the file"

# fails NAME WANT ARGS...: loom-run exits non-zero, printing one line
# that contains WANT.
fails() {
	name=$1
	want=$2
	shift 2
	"$run" "$@" >/dev/null 2>"$dir/err"
	rc=$?
	[ $rc != 0 ] && [ "$(wc -l <"$dir/err" | tr -d ' ')" = 1 ] &&
		grep -q -- "$want" "$dir/err"
	ok=$?
	[ $ok = 0 ] || { echo "# rc $rc:"; sed 's/^/# /' "$dir/err"; }
	result $ok "$name"
}

fails "a missing file" "No such file" -m "$dir/none.gguf" --tokens 1
fails "a file that is not GGUF" "not a GGUF file" -m "$dir/one.bin" \
	--tokens 1
fails "an unknown device" "no device 'nope0'" -m "$dir/tiny.gguf" \
	--tokens 1 --devices nope0
fails "a token out of range" "'256' is not a token id below 256" \
	-m "$dir/tiny.gguf" --tokens 1,256
fails "an empty token id" "'1,,2' has an empty id" \
	-m "$dir/tiny.gguf" --tokens 1,,2
# A FIFO with no writer: opening it must not wait for one.
mkfifo "$dir/fifo"
timeout 20 "$run" -m "$dir/fifo" --tokens 1 >/dev/null 2>"$dir/err"
rc=$?
[ $rc != 0 ] && [ $rc != 124 ] &&
	grep -q "fifo: a FIFO, not a regular file" "$dir/err"
ok=$?
[ $ok = 0 ] || { echo "# rc $rc:"; sed 's/^/# /' "$dir/err"; }
result $ok "a FIFO as the model fails at once"
fails "a device named twice" \
	"^loom-run: --devices: cpu0 is named twice: each device takes its own part of the model (LOOM_CPU_DEVICES=2 splits the CPU into cpu0 and cpu1)$" \
	-m "$dir/tiny.gguf" --tokens 1 --devices cpu0,cpu0
# The CPU whole: what makes cpu1, and the second device of a split.
LOOM_CPU_DEVICES=
fails "cpu1 of an unsplit CPU" \
	"^loom-run: --devices: no device 'cpu1': the CPU is one device, cpu0, unless LOOM_CPU_DEVICES=N splits it into N (cpu0 to cpu1 with LOOM_CPU_DEVICES=2)$" \
	-m "$dir/tiny.gguf" --tokens 1 --devices cpu1
fails "--gpu-layers with one CPU device" \
	"^loom-run: --gpu-layers: no second device besides cpu0 (LOOM_CPU_DEVICES=2 splits the CPU: --devices cpu0,cpu1)$" \
	-m "$dir/tiny.gguf" --tokens 1 --gpu-layers 1
LOOM_CPU_DEVICES=2

# warns NAME LINE ARGS...: loom-run succeeds, and LINE is a whole line of
# what it prints on stderr.
warns() {
	name=$1
	line=$2
	shift 2
	"$run" -m "$dir/tiny.gguf" --tokens 1 -n 1 "$@" >/dev/null \
		2>"$dir/err"
	rc=$?
	[ $rc = 0 ] && grep -Fxq -- "$line" "$dir/err"
	ok=$?
	[ $ok = 0 ] || { echo "# rc $rc:"; sed 's/^/# /' "$dir/err"; }
	result $ok "$name"
}

# The saved file was trained for 640 tokens (prefill 512, decode 128).
warns "--ctx longer than the model's" \
	"loom-run: warning: --ctx 99999 is longer than the model was trained for; the cache holds 640 tokens" \
	--ctx 99999
path=$LOOM_PLUGIN_PATH
LOOM_PLUGIN_PATH="$dir/none:$path"
warns "a plugin directory that is not there" \
	"loom: warn: $dir/none: plugin directory: not found"
LOOM_PLUGIN_PATH=$path
LOOM_CPU_THREADS=zero
export LOOM_CPU_THREADS
warns "LOOM_CPU_THREADS=zero" \
	"loom: warn: cpu: LOOM_CPU_THREADS=zero is not a thread count (1 to 4096); using one thread per core"
unset LOOM_CPU_THREADS
exit $failed
