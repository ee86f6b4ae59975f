#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/build-debs.sh - builds Loom's Debian packages from a clean copy of
# this tree (what git tracks, plus new files it does not ignore) and checks
# them with lintian: an error fails, the warnings are listed.
#
#   tools/build-debs.sh [OUTDIR]        packages into OUTDIR (default: debs/)
#
# DEB_BUILD_OPTIONS=nocheck skips make check; DEB_BUILD_PROFILES takes
# pkg.loom.cuda and pkg.loom.hip to build the GPU plugins' packages.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$src/debs}
work=$(mktemp -d "${TMPDIR:-/tmp}/loom-debs.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir -p "$work/loom" "$out"
out=$(cd "$out" && pwd)
if [ -e "$src/.git" ] && command -v git >/dev/null 2>&1; then
	(cd "$src" && git ls-files -z --cached --others --exclude-standard) |
		(cd "$src" && xargs -0 sh -c 'for f; do
			[ -e "$f" ] && printf "%s\0" "$f"; done' sh) |
		(cd "$src" && xargs -0 cp --parents -t "$work/loom")
else
	cp -a "$src/." "$work/loom"
fi

cd "$work/loom"
dpkg-buildpackage -us -uc -b
cd "$work"
rm -f "$out"/*.deb
mv ./*.deb ./*.buildinfo ./*.changes "$out/"
ls "$out"/*.deb
if command -v lintian >/dev/null 2>&1; then
	# Errors fail the build; warnings and the rest are printed.
	lintian --fail-on error --info "$out"/*.changes
else
	echo "lintian is not installed: packages not checked"
fi
