#!/bin/sh
# SPDX-License-Identifier: MIT
# tools/check-debs.sh - installs Loom's packages (built by build-debs.sh)
# as a user's machine would: apt installs them, with the dependencies
# they declare and nothing else, into a fresh minimal Debian root
# (debootstrap), and what they installed runs there.  Every installed
# program and plugin must find its libraries, loom-info must load every
# packaged plugin (none failed) from the packaged plugin directory, no
# installed file may carry a RUNPATH or a libtool archive, loom-bench must
# save a model that loom-run runs, loom-conformance must pass cpu0, and
# the plugin template from libloom-dev must build against the packaged
# headers and load.  Needs root (debootstrap, chroot) and the mirror.
#
#   tools/check-debs.sh [DEBDIR]        (default: debs/)
#
# LOOM_DEB_MIRROR names the mirror (default: deb.debian.org); the suite is
# this machine's.  KEEP=1 keeps the root.
set -eu
src=$(cd "$(dirname "$0")/.." && pwd)
debs=$(cd "${1:-$src/debs}" && pwd)
mirror=${LOOM_DEB_MIRROR:-http://deb.debian.org/debian}
fail() { echo "check-debs: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || fail "needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null 2>&1 || fail "needs debootstrap"
# shellcheck disable=SC1091
suite=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
[ -n "$suite" ] || fail "no VERSION_CODENAME in /etc/os-release"
root=$(mktemp -d "${TMPDIR:-/tmp}/loom-root.XXXXXX")
# /proc is mounted in the root; removing the root never crosses into it.
trap 'umount "$root/proc" 2>/dev/null || true
	[ -n "${KEEP:-}" ] || rm -rf --one-file-system "$root"' EXIT

echo "check-debs: a minimal $suite root from $mirror"
debootstrap --variant=minbase "$suite" "$root" "$mirror" \
	>"$root.log" 2>&1 || { tail -n 20 "$root.log"; rm -f "$root.log"
	fail "debootstrap failed"; }
rm -f "$root.log"
mount -t proc proc "$root/proc"
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
	HOME=/root "$@"; }

# What a user types: apt resolves the packages' dependencies from the
# mirror, so a dependency that is wrong or missing fails here or below.
mkdir "$root/debs"
pkgs=""
for deb in "$debs"/*.deb; do
	case $deb in *-dbgsym_*) continue ;; esac
	cp "$deb" "$root/debs/"
	pkgs="$pkgs $(dpkg-deb -f "$deb" Package)"
done
# apt as root in a root that mounts neither /dev/pts nor its sandbox
# user's files: without these, apt's own warnings would read as lintian's.
apt="apt-get -o APT::Sandbox::User=root -o Dpkg::Use-Pty=0"
# shellcheck disable=SC2086
in_root $apt update -qq
in_root sh -c "DEBIAN_FRONTEND=noninteractive $apt install -y -q \
	--no-install-recommends /debs/*.deb" ||
	fail "apt cannot install the packages"
lib="/usr/lib/$(dpkg-architecture -qDEB_HOST_MULTIARCH)"

# What is installed: no libtool archives, no RUNPATH, every library found
# from what the packages depend on.
# shellcheck disable=SC2086
for f in $(in_root dpkg -L $pkgs | sort -u); do
	if [ ! -f "$root$f" ] || [ -L "$root$f" ]; then
		continue
	fi
	case $f in *.la) fail "libtool archive installed: $f" ;; esac
	readelf -h "$root$f" >/dev/null 2>&1 || continue
	if readelf -d "$root$f" | grep -E 'R(UN)?PATH'; then
		fail "$f has a RUNPATH"
	fi
	if in_root ldd "$f" | grep 'not found'; then
		fail "$f: a library it needs is not installed"
	fi
done

# The tools as installed, from the packaged plugin directory.
in_root loom-info >"$root/info.txt" || fail "loom-info failed"
cat "$root/info.txt"
grep -Eq '^  cpu +loaded ' "$root/info.txt" || fail "cpu plugin not loaded"
grep -Eq '^  meta +loaded ' "$root/info.txt" || fail "meta plugin not loaded"
if grep -E '^  [a-z0-9_-]+ +failed ' "$root/info.txt"; then
	fail "a packaged plugin failed to load"
fi
in_root loom-conformance --device cpu0 --ops add,mul_mat,graph ||
	fail "loom-conformance failed on cpu0"
if ! in_root loom-bench model --preset tiny --save /tiny.gguf ||
   ! in_root loom-run -m /tiny.gguf --tokens 1,2,3 -n 4 >/dev/null; then
	fail "loom-run does not run the model loom-bench saves"
fi

# A third party's plugin, from the packaged guide's template and headers,
# built here (the root has no compiler) and loaded there.
cp -R "$root/usr/share/doc/libloom-dev/plugin-template" "$root/my"
PKG_CONFIG_PATH="$root$lib/pkgconfig" PKG_CONFIG_SYSROOT_DIR="$root" \
	make -s -C "$root/my" ||
	fail "the plugin template does not build against the packages"
in_root env LOOM_PLUGIN_PATH=/my loom-info | grep -Eq '^  my +loaded ' ||
	fail "the template plugin does not load"
echo "check-debs: the packages install with apt and run"
