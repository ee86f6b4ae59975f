#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-model-api.sh - an application of the model library's public
# API: examples/generate.c builds against include/ alone (loom.h,
# loom-backend.h, loom-model.h, as installed) and libloom-model, exports
# nothing but loom_model_* from the library, the header compiles as C++
# too, and its greedy tokens on a
# file loom-bench saves are loom-run's, on one CPU partition and on a
# meta device over two; a missing file fails with one message.  TAP
# output.

b="$LOOM_TEST_BUILDDIR"
src="${LOOM_TEST_SRCDIR:-$(dirname "$0")/..}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/loom-test-model-api.XXXXXX")
trap 'rm -rf "$dir"' EXIT
LOOM_PLUGIN_PATH=
for d in $(echo "$LOOM_TEST_PLUGIN_PATH" | tr ':' ' '); do
	[ -d "$d" ] && LOOM_PLUGIN_PATH="${LOOM_PLUGIN_PATH:+$LOOM_PLUGIN_PATH:}$d"
done
LOOM_CPU_DEVICES=2
LD_LIBRARY_PATH="$b/model/.libs:$b/libcore/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LOOM_PLUGIN_PATH LOOM_CPU_DEVICES LD_LIBRARY_PATH
n=0
failed=0

echo "1..7"

result() {
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n $2"
	else
		echo "not ok $n $2"
		failed=1
		[ -s "$dir/err" ] && sed 's/^/# /' "$dir/err" | head -5
	fi
}

# The headers of include/ and nothing of model/: what an installed
# system gives an application, built with the compiler and flags of this
# build (a sanitizer's runtime must come first in a program).
# shellcheck disable=SC2086 # the compiler and flags are word lists
${LOOM_TEST_CC:-${CC:-cc}} $LOOM_TEST_CFLAGS -I"$src/include" \
	-o "$dir/generate" "$src/examples/generate.c" $LOOM_TEST_LDFLAGS \
	-L"$b/model/.libs" -lloom-model -L"$b/libcore/.libs" -lloom \
	2>"$dir/err"
result $? "an application builds against the public headers alone"

# The header in a C++ program (no C++ keyword among its names).
printf '#include <loom/loom-model.h>\nint main() { return 0; }\n' \
	>"$dir/cxx.cc"
if command -v "${CXX:-c++}" >/dev/null 2>&1; then
	"${CXX:-c++}" -I"$src/include" -c -o "$dir/cxx.o" "$dir/cxx.cc" \
		2>"$dir/err"
	result $? "loom-model.h compiles as C++"
else
	n=$((n + 1))
	echo "ok $n # SKIP no C++ compiler"
fi

others=$(nm -D --defined-only "$b/model/.libs/libloom-model.so" 2>"$dir/err" |
	awk '$2 == "T" && $3 !~ /^loom_model_/' | head -n 3)
[ -z "$others" ] && grep -q loom_model_open "$src/include/loom/loom-model.h"
result $? "libloom-model exports loom_model_* alone${others:+ (also $others)}"

"$b/tools/loom-bench" model --preset tiny --save "$dir/tiny.gguf" \
	>/dev/null 2>"$dir/err"
"$b/tools/loom-run" -m "$dir/tiny.gguf" -p "t5 t9 hello" -n 6 --temp 0 \
	--json >"$dir/run.json" 2>"$dir/err"
want=$(sed -n 's/.*"tokens": \[\([0-9, ]*\)\].*/\1/p' "$dir/run.json" |
	tr -d ' ')
[ -n "$want" ]
result $? "loom-run generates on the saved file"

for devs in cpu0 cpu0,cpu1; do
	"$dir/generate" "$dir/tiny.gguf" "t5 t9 hello" 6 "$devs" \
		>"$dir/out" 2>"$dir/err"
	got=$(cut -d' ' -f1 "$dir/out" | paste -sd, -)
	[ "$got" = "$want" ]
	result $? "the application's tokens on $devs are loom-run's ($got, $want)"
done

"$dir/generate" "$dir/missing.gguf" "hello" >"$dir/out" 2>"$dir/err"
rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$dir/err")" = 1 ] &&
	grep -q "^generate: $dir/missing.gguf: " "$dir/err"
result $? "a missing file: one message and status 1"
exit $failed
