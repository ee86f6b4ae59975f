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
# that is not there and a LOOM_CPU_THREADS that is no count.  Then
# loom-run for people, on the model tests/chat-model writes (whose next
# token is a function of the last: "\n" leads to "Paris" then
# <|im_end|>, X to "OK" then <|eot_id|>, Y to "N" then </s>): a reply
# stops at each of those tokens unless --ignore-eos; --chat wraps -p in
# the file's ChatML template and --chat-template in another; an unknown
# template says so and the text goes as it is; a conversation takes a
# turn per line; SIGINT ends the run with what was generated, the timing
# line and status 130, and in a conversation ends the reply only.  TAP
# output.

run="$LOOM_TEST_BUILDDIR/tools/loom-run"
bench="$LOOM_TEST_BUILDDIR/tools/loom-bench"
gen="$LOOM_TEST_BUILDDIR/tests/chat-model"
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
pid=
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' EXIT
n=0
failed=0

echo "1..34"

result() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		failed=1
		for f in out err; do
			[ -s "$dir/$f" ] && sed "s/^/# $f: /" "$dir/$f" | head -5
		done
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

# out NAME WANT ARGS...: loom-run succeeds and prints WANT (one line).
out() {
	name=$1
	want=$2
	shift 2
	"$run" -m "$dir/chat.gguf" --devices cpu0 "$@" >"$dir/out" \
		2>"$dir/err" </dev/null &&
		[ "$(cat "$dir/out")" = "$want" ]
	result $? "$name"
}

# waitfor PATTERN FILE: up to 60 s for FILE to match PATTERN.
waitfor() {
	i=0
	while ! grep -q -- "$1" "$2" 2>/dev/null; do
		i=$((i + 1))
		[ $i -gt 600 ] && return 1
		sleep 0.1
	done
}

"$gen" "$dir/chat.gguf" && "$gen" "$dir/odd.gguf" "{{ odd }}"
result $? "chat-model writes its files"

out "--chat: the reply, stopped at <|im_end|>" "Paris" \
	-p "What is the capital of France?" --chat -n 20
grep -q "decode: 6 tokens" "$dir/err"
result $? "the timing line counts the tokens up to <|im_end|>"
out "-cnv is --chat" "Paris" -p "Capital?" -cnv
out "--ignore-eos goes on" "Paris!!!" -p "Capital?" --chat --ignore-eos -n 9
out "--chat-template llama3 over the file's" "Paris" -p "Capital?" \
	--chat-template llama3 --system "Be brief."

# Raw prompts: echoed, then the reply up to the file's EOT or EOS.
"$run" -m "$dir/chat.gguf" -p "X" -n 20 >"$dir/out" 2>"$dir/err" &&
	[ "$(tail -c 4 "$dir/out")" = "XOK" ] && "$run" -m "$dir/chat.gguf" -p "Y" -n 20 >"$dir/out" 2>"$dir/err" &&
	[ "$(tail -c 3 "$dir/out")" = "YN" ]
result $? "a raw prompt stops at <|eot_id|> and at </s>"

"$run" -m "$dir/odd.gguf" -p "X" --chat -n 20 >"$dir/out" 2>"$dir/err" &&
	grep -q "chat template is of no family Loom knows: the text goes as it is" \
		"$dir/err" && [ "$(cat "$dir/out")" = "OK" ]
result $? "an unknown template says so; the text goes as it is"

# Without a template (a base model's file) a reply ends at a blank line.
"$run" -m "$dir/odd.gguf" -p "Z" --chat -n 20 >"$dir/out" 2>"$dir/err" &&
	grep -q "a reply ends at a blank line" "$dir/err" &&
	[ "$(tr -d ' \n' <"$dir/out")" = "W" ] &&
	"$run" -m "$dir/odd.gguf" -p "Z" --chat --ignore-eos -n 6 \
		>"$dir/out" 2>"$dir/err" &&
	! grep -q "blank line" "$dir/err" &&
	[ "$(tr -d ' \n' <"$dir/out")" = "WVVVV" ]
result $? "a chat without a template ends its reply at a blank line"

"$run" -m "$dir/chat.gguf" -p "X" --chat-template nope >"$dir/out" \
	2>"$dir/err"
[ $? = 1 ] && grep -q "no chat template 'nope'" "$dir/err"
result $? "an unknown --chat-template name fails"

"$run" -m "$dir/chat.gguf" --tokens 1,2 --chat >"$dir/out" 2>"$dir/err"
[ $? = 1 ] && [ "$(wc -l <"$dir/err" | tr -d ' ')" = 1 ]
result $? "--chat with --tokens fails with one line"

printf 'What?\n\nAnd again?\n' | "$run" -m "$dir/chat.gguf" --chat \
	--system "Be brief." >"$dir/out" 2>"$dir/err" &&
	[ "$(cat "$dir/out")" = "Paris
Paris" ]
result $? "a conversation: a reply per line of the input"

# SIGINT during a reply that would not end by itself.
"$run" -m "$dir/chat.gguf" -p "Capital?" --chat --ignore-eos -n 100000 \
	-c 100000 >"$dir/out" 2>"$dir/err" &
pid=$!
waitfor '!!!' "$dir/out" && kill -INT $pid
wait $pid
rc=$?
pid=
[ $rc = 130 ] && grep -q '^Paris!!!*$' "$dir/out"
result $? "SIGINT: what was generated, status 130"
grep -q "^load: .* decode: [0-9]* tokens" "$dir/err"
result $? "SIGINT: the timing line"

# In a conversation SIGINT ends the reply; the next line is a turn.
mkfifo "$dir/in" || exit 1
"$run" -m "$dir/chat.gguf" --chat --ignore-eos -n 100000 -c 100000 \
	<"$dir/in" >"$dir/out" 2>"$dir/err" &
pid=$!
exec 3>"$dir/in"
echo "What?" >&3
ok=1
if waitfor '!!!' "$dir/out" && kill -INT $pid; then
	echo "Again?" >&3
	# The second reply starts on a line of its own.
	i=0
	while [ "$(grep -c '^Paris!' "$dir/out")" -lt 2 ] && [ $i -lt 600 ]; do
		i=$((i + 1))
		sleep 0.1
	done
	kill -INT $pid && ok=0
fi
exec 3>&-
wait $pid
rc=$?
pid=
[ $ok = 0 ] && [ $rc = 0 ] && [ "$(grep -c '^Paris!' "$dir/out")" = 2 ]
result $? "SIGINT in a conversation ends the reply, not the run"

# SIGINT while it waits for a turn ends the conversation.
"$run" -m "$dir/chat.gguf" --chat <"$dir/in" >"$dir/out" 2>"$dir/err" &
pid=$!
exec 3>"$dir/in"
echo "What?" >&3
# (again until it ends: one that comes as the reply ends, ends the reply)
if waitfor '^Paris$' "$dir/out"; then
	i=0
	while kill -INT $pid 2>/dev/null && [ $i -lt 100 ]; do
		i=$((i + 1))
		sleep 0.3
	done
fi
wait $pid
rc=$?
pid=
exec 3>&-
[ $rc = 130 ] && grep -q "^load: " "$dir/err"
result $? "SIGINT while waiting for a turn: status 130 and the timing line"
exit $failed
