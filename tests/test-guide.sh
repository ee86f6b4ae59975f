#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-guide.sh - the plugin guide's walk-through works: its two C
# functions, put into the plugin template in place of the template's own,
# build with the guide's compile line (the build tree's headers and
# libloom standing in for pkg-config's) into a plugin that loom-conformance
# passes, claiming exactly the one op; and its first step copies the
# template from where make install puts it (loom.pc's docdir).  TAP output.

b="$LOOM_TEST_BUILDDIR"
src="${LOOM_TEST_SRCDIR:-$(dirname "$0")/..}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/loom-test-guide.XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo "1..3"

# The guide's C blocks that define a function, one file each.
awk -v dir="$dir" '
	/^```c$/ { inblock = 1; n++; file = dir "/block" n ".c"; next }
	/^```$/ { inblock = 0; next }
	inblock { print > file }
' "$src/doc/plugin-guide.md"

# Each function of a block replaces the template's function of that name.
cp "$src/examples/plugin-template/my-plugin.c" "$dir/my-plugin.c"
replaced=0
for blk in "$dir"/block*.c; do
	name=$(sed -n 's/^static [a-z ]*[ *]\(my_[a-z_]*\)(.*/\1/p' "$blk" |
		head -n 1)
	[ -n "$name" ] || continue
	awk -v name="$name" -v blk="$blk" '
		skip && /^}/ { skip = 0; next }
		skip { next }
		/^static / && index($0, " " name "(") {
			while ((getline line < blk) > 0) print line
			skip = 1; next
		}
		{ print }
	' "$dir/my-plugin.c" >"$dir/new.c" && mv "$dir/new.c" "$dir/my-plugin.c"
	replaced=$((replaced + 1))
done

# The copy step: the build tree's loom.pc standing in for the installed one.
from=$(sed -n 's/^cp "\(.*\)"\* \.$/\1/p' "$src/doc/plugin-guide.md" | head -n 1)
if [ -z "${LOOM_TEST_DOCDIR:-}" ] || ! command -v pkg-config >/dev/null; then
	echo "ok 1 # SKIP no pkg-config, or not run by make check"
else
	got=$(export PKG_CONFIG_PATH="$b" PKG_CONFIG_LIBDIR="$b"
	      eval "echo \"$from\"")
	if [ "$got" = "$LOOM_TEST_DOCDIR/plugin-template/" ]; then
		echo "ok 1 - the guide copies the template from loom.pc's docdir"
	else
		echo "not ok 1 - the guide copies the template from '$got'," \
			"make install puts it in '$LOOM_TEST_DOCDIR/plugin-template/'"
	fi
fi

if [ $replaced -eq 2 ] &&
   ${CC:-cc} -shared -fPIC -fvisibility=hidden -O2 -I"$src/include" \
	-o "$dir/loom-my.so" "$dir/my-plugin.c" -L"$b/libcore/.libs" -lloom \
	-Wl,--no-undefined 2>"$dir/cc.err"; then
	echo "ok 2 - the guide's functions build into the template"
else
	echo "not ok 2 - the guide's functions build into the template ($replaced replaced)"
	sed 's/^/# /' "$dir/cc.err"
	exit 0
fi

LOOM_PLUGIN_PATH="$dir" LOOM_BACKENDS=my \
	"$b/tools/loom-conformance" >"$dir/out" 2>&1
rc=$?
if [ $rc -eq 0 ] &&
   grep -Eq '^  my0 claims 1 of [0-9]+ ops \(([1-9][0-9]*) of [0-9]+ cases\); \1 passed, 0 failed$' "$dir/out"; then
	echo "ok 3 - loom-conformance passes the guide's plugin"
else
	echo "not ok 3 - loom-conformance passes the guide's plugin (exit status $rc)"
	sed 's/^/# /' "$dir/out"
fi
