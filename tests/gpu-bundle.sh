#!/bin/sh
# SPDX-License-Identifier: MIT
# gpu-bundle.sh SRCDIR DISTTARBALL OUTDIR - makes the bundle `make
# gpu-bundle` writes: the release tarball, tests/gpu-run.sh, and a copy of
# this machine's GLib (headers and library) for GPU machines that have a
# compiler but no GLib.  Copy OUTDIR there and run `sh OUTDIR/gpu-run.sh`.
set -eu
src=$1
tarball=$2
out=$3
rm -rf "$out"
mkdir -p "$out/glib/include" "$out/glib/lib/glib-2.0"
cp "$tarball" "$out/"
cp "$src/tests/gpu-run.sh" "$out/"
inc=$(pkg-config --variable=includedir glib-2.0)/glib-2.0
libdir=$(pkg-config --variable=libdir glib-2.0)
cp -R "$inc" "$out/glib/include/"
cp -R "$libdir/glib-2.0/include" "$out/glib/lib/glib-2.0/"
for l in libglib-2.0.so.0 libpcre2-8.so.0; do
	f=$(ls "$libdir/$l" /lib/*/"$l" /usr/lib/*/"$l" 2>/dev/null | head -n 1)
	[ -n "$f" ] && cp -L "$f" "$out/glib/lib/"
done
ln -sf libglib-2.0.so.0 "$out/glib/lib/libglib-2.0.so"
echo "gpu-bundle: $out ($(du -sh "$out" | cut -f1)); on the GPU machine:" \
     "sh $out/gpu-run.sh LOGDIR"
