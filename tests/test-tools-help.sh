#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-tools-help.sh - every installed tool answers --version with
# its name and Loom's version, and every long option in its source's
# option table (but the internal ones) is in its --help and its manual
# page.  TAP output.

b="$LOOM_TEST_BUILDDIR"
src="${LOOM_TEST_SRCDIR:-$(dirname "$0")/..}"
tools="loom-info loom-bench loom-conformance loom-run"
set -- $tools
echo "1..$(($# * 2))"
n=0
for t in $tools; do
	n=$((n + 1))
	v=$("$b/tools/$t" --version)
	if [ "$v" = "$t (Loom) $LOOM_TEST_VERSION" ]; then
		echo "ok $n - $t --version"
	else
		echo "not ok $n - $t --version says '$v'"
	fi

	n=$((n + 1))
	help=$("$b/tools/$t" --help)
	man=$(sed 's/\\-/-/g' "$src/man/$t.1")
	opts=$(sed -n 's/^[[:space:]]*{ "\([a-z0-9-]*\)", [a-z_]*argument.*/\1/p' \
		"$src/tools/$t.c" | grep -v '^internal-')
	missing=""
	for o in $opts; do
		printf '%s\n' "$help" | grep -q -- "--$o\b" ||
			missing="$missing --$o(help)"
		printf '%s\n' "$man" | grep -q -- "--$o\b" ||
			missing="$missing --$o(man)"
	done
	if [ -z "$opts" ]; then
		echo "not ok $n - $t: no option table found"
	elif [ -n "$missing" ]; then
		echo "not ok $n - $t: not documented:$missing"
	else
		echo "ok $n - $t: $(echo $opts | wc -w) options documented"
	fi
done
