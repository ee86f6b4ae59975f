#!/bin/sh
# tests/test-spdx.sh - every source and build file of the tree names its
# licence with "SPDX-License-Identifier: MIT" in its first five lines.
# Lists the files that do not; TAP output.

src="${LOOM_TEST_SRCDIR:-$(dirname "$0")/..}"
cd "$src" || exit 99

# Source and build files, not what autotools, libtool or a build made;
# of build-aux/ and debian/ only the files written by hand.
files=$(find . \( -name .git -o -name autom4te.cache -o -name .libs \
		  -o -name .deps -o -name _build -o -name 'loom-[0-9]*' \
		  -o -path ./gpu-bundle -o -path ./_asan -o -path ./_tsan \
		  -o -path ./debian/tmp -o -path './debian/loom-*' \
		  -o -path './debian/libloom*' -o -path ./debian/.debhelper \) \
		-prune -o -type f \( -name '*.c' -o -name '*.h' -o -name '*.cc' \
		-o -name '*.cu' -o -name '*.cuh' -o -name '*.hip' \
		-o -name '*.am' -o -name '*.mk' -o -name '*.ac' \
		-o -name '*.m4' -o -name '*.sh' -o -name '*.sym' \
		-o -name '*.pc.in' -o -path ./.ci/run \
		-o -path ./examples/plugin-template/Makefile \) -print |
	grep -v -e '^\./config\.h$' -e '^\./m4/libtool\.m4$' \
		-e '^\./m4/lt[a-z~]*\.m4$' -e '^\./aclocal\.m4$' \
		-e '^\./build-aux/' -e '^\./debian/' |
	LC_ALL=C sort)
extra=""
for f in ./build-aux/nvcc-wrapper ./debian/rules; do
	[ -f "$f" ] && extra="$extra $f"
done

echo "1..1"
missing=""
n=0
for f in $files $extra; do
	n=$((n + 1))
	head -n 5 "$f" | grep -q 'SPDX-License-Identifier: MIT' ||
		missing="$missing $f"
done
if [ -n "$missing" ]; then
	echo "not ok 1 - files without an SPDX line:"
	for f in $missing; do
		echo "# ${f#./}"
	done
	exit 0
fi
echo "ok 1 - $n files name their licence"
