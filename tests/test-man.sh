#!/bin/sh
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
echo "1..$#"
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
