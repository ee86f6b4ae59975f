#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-conformance.sh - loom-conformance passes the CPU plugin with
# a table or TAP, fails a plugin that claims no op and one whose results
# are wrong, and refuses unknown ops and devices, each with its exact
# message and exit status.  TAP output.

b="$LOOM_TEST_BUILDDIR"
tool="$b/tools/loom-conformance"
out="${TMPDIR:-/tmp}/loom-test-conformance.$$"
trap 'rm -f "$out" "$out.err"' EXIT
n=0

echo "1..7"

# run STATUS PATH [ARGS...]: runs the tool with only the plugins of PATH,
# and says whether it exited with STATUS.
run() {
	want=$1
	LOOM_PLUGIN_PATH=$2
	export LOOM_PLUGIN_PATH
	shift 2
	"$tool" "$@" >"$out" 2>"$out.err"
	rc=$?
	[ $rc -eq "$want" ]
}

# result NAME OK: one TAP line, and the outputs when it failed.
result() {
	n=$((n + 1))
	if [ "$2" = 0 ]; then
		echo "ok $n - $1"
	else
		echo "not ok $n - $1 (exit status $rc)"
		sed 's/^/# out: /' "$out"
		sed 's/^/# err: /' "$out.err"
	fi
}

cpu="$b/plugins/cpu/.libs"
run 0 "$cpu" --device cpu0 --ops add,silu &&
	grep -Eq '^  cpu0 claims 2 of 2 ops \(([0-9]+) of \1 cases\); \1 passed, 0 failed$' "$out" &&
	grep -Eq '^  silu +[0-9]+ +[0-9]+ +0 +0$' "$out"
result "cpu0: a table, every case passed" $?

run 0 "$cpu" --tap --ops scale &&
	cases=$(sed -n 's/^1\.\.//p' "$out") && [ "$cases" -gt 0 ] &&
	[ "$(grep -c '^ok ' "$out")" -eq "$cases" ] &&
	grep -q "^# cpu0 claims 1 of 1 ops ($cases of $cases cases); $cases passed, 0 failed\$" "$out"
result "cpu0: TAP, one line per case" $?

if [ -f "$b/tests/fake/.libs/loom-my.so" ]; then
	run 1 "$b/tests/fake/.libs" --device my0 &&
		grep -Eq "^loom-conformance: my0 claims none of the [0-9]+ ops: its supports_op refuses every case\$" "$out.err" &&
		grep -Eq '^  my0 claims 0 of [0-9]+ ops \(0 of [0-9]+ cases\); 0 passed, 0 failed$' "$out"
	result "the plugin template claims no op: a failure" $?
else
	n=$((n + 1))
	echo "ok $n # SKIP the plugin template was not built"
fi

run 1 "$b/tests/conformance/.libs" --ops add &&
	grep -q '^  FAIL add/' "$out" &&
	grep -Eq '^  liar0 claims 1 of 1 ops \(([0-9]+) of \1 cases\); 0 passed, \1 failed$' "$out"
result "a plugin that computes nothing fails" $?

run 2 "$cpu" --ops addd &&
	grep -q "^loom-conformance: no op 'addd'; the ops are: add, sub, " "$out.err"
result "an unknown op is refused with the list" $?

run 2 "$cpu" --device cuda9 &&
	grep -Fxq "loom-conformance: no device 'cuda9'; the devices are: cpu0" "$out.err"
result "an unknown device is refused with the list" $?

run 0 "$cpu" --version && grep -Fxq "loom-conformance (Loom) $LOOM_TEST_VERSION" "$out"
result "--version" $?
