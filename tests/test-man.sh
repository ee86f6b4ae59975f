#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-man.sh - every manual page renders without a warning from
# groff (-ww: all of them) and through man -l.  Skipped without groff.
# TAP output.

src="${LOOM_TEST_SRCDIR:-$(dirname "$0")/..}"
if ! command -v groff >/dev/null 2>&1; then
	echo "1..0 # SKIP groff is not installed"
	exit 0
fi
pages=$(ls "$src"/man/*.[17])
set -- $pages
echo "1..$(($# + 1))"
n=0
err="${TMPDIR:-/tmp}/loom-test-man.$$"
trap 'rm -f "$err"' EXIT
for page in $pages; do
	n=$((n + 1))
	name=$(basename "$page")
	groff -man -Tutf8 -ww -z "$page" >"$err" 2>&1
	if command -v man >/dev/null 2>&1; then
		MANWIDTH=80 man -l "$page" 2>>"$err" >/dev/null
	fi
	if [ -s "$err" ]; then
		echo "not ok $n - $name"
		sed 's/^/# /' "$err"
	elif ! grep -q '^\.SH NAME' "$page"; then
		echo "not ok $n - $name: no NAME section"
	else
		echo "ok $n - $name"
	fi
done

# loom(7) describes every LOOM_* variable the library and plugins read.
n=$((n + 1))
vars=$(cat "$src"/libcore/*.c "$src"/plugins/*/*.c "$src"/plugins/*/*.cu \
	2>/dev/null | sed -n 's/.*loom_env_get("\(LOOM_[A-Z0-9_]*\)").*/\1/p' |
	sort -u)
missing=""
for v in $vars; do
	grep -q "^\.B $v\$" "$src/man/loom.7" || missing="$missing $v"
done
if [ -z "$vars" ]; then
	echo "not ok $n - loom.7: no variable found in the sources"
elif [ -n "$missing" ]; then
	echo "not ok $n - loom.7 does not describe:$missing"
else
	echo "ok $n - loom.7 describes all $(echo $vars | wc -w) variables"
fi
