#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-run.sh - loom-run on a file loom-bench saves: it runs on one
# CPU partition and on a meta device over two with the same greedy
# tokens, dumps one row of logits per prompt position, and fails with one
# line and a non-zero status on a missing file, a file that is not GGUF,
# an unknown device, a token out of range, an empty token id and a FIFO
# given as the model (without waiting for a writer).  TAP output.

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

echo "1..12"

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
exit $failed
