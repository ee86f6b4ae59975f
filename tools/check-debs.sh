#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/check-debs.sh - installs Loom's packages (built by build-debs.sh)
# into a throwaway root and runs what they installed: loom-info must load
# the cpu and meta plugins from the packaged plugin directory, no installed
# file may carry a RUNPATH or a libtool archive, loom-conformance must pass
# cpu0, and the plugin template from libloom-dev must build against the
# packaged headers and load.
#
#   tools/check-debs.sh [DEBDIR]        (default: debs/)
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
debs=${1:-$src/debs}
root=$(mktemp -d "${TMPDIR:-/tmp}/loom-root.XXXXXX")
trap '[ -n "${KEEP:-}" ] || rm -rf "$root"' EXIT
fail() { echo "check-debs: $*" >&2; exit 1; }

for deb in "$debs"/*.deb; do
	case $deb in *-dbgsym_*) continue ;; esac
	dpkg-deb -x "$deb" "$root"
	echo "installed $(dpkg-deb -f "$deb" Package)"
done
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
lib="$root/usr/lib/$arch"
plugins="$lib/loom-1/plugins"

# What is installed: no libtool archives, no RUNPATH.
if find "$root" -name '*.la' | grep .; then
	fail "libtool archives installed"
fi
for f in $(find "$root/usr/bin" "$lib" -type f); do
	if readelf -d "$f" 2>/dev/null | grep -E 'R(UN)?PATH'; then
		fail "$f has a RUNPATH"
	fi
done

# The tools from the packages, with the packaged plugin directory (the
# compiled-in one, /usr/lib/$arch/loom-1/plugins, under the root).
unset LOOM_BACKENDS LOOM_PLUGIN_PATH LOOM_CPU_DEVICES LOOM_META_DEVICES
run() {
	env LD_LIBRARY_PATH="$lib" LOOM_PLUGIN_SYSTEM_PATH="$plugins" "$@"
}
run "$root/usr/bin/loom-info" >"$root/info.txt" ||
	fail "loom-info failed"
cat "$root/info.txt"
grep -Eq '^  cpu +loaded ' "$root/info.txt" || fail "cpu plugin not loaded"
grep -Eq '^  meta +loaded ' "$root/info.txt" || fail "meta plugin not loaded"
run "$root/usr/bin/loom-conformance" --device cpu0 --ops add,mul_mat,graph ||
	fail "loom-conformance failed on cpu0"

# A third party's plugin, from the packaged guide's template and headers.
cp -R "$root/usr/share/doc/libloom-dev/plugin-template" "$root/my"
PKG_CONFIG_PATH="$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" \
	make -s -C "$root/my" ||
	fail "the plugin template does not build against the packages"
run LOOM_PLUGIN_PATH="$root/my" "$root/usr/bin/loom-info" |
	grep -Eq '^  my +loaded ' || fail "the template plugin does not load"
echo "check-debs: the packages install and run"
