#!/bin/sh
# SPDX-License-Identifier: MIT
# gpu-run.sh [LOGDIR] - the GPU check on a machine that has a GPU, a C
# compiler and the CUDA compiler but perhaps no autotools, pkg-config or
# GLib headers.  Runs from a bundle made by `make gpu-bundle` (the release
# tarball, this script, and a copy of GLib for machines without it): it
# says what the machine has, finds cuBLAS and NCCL in the CUDA toolkit or
# in Python's nvidia-* wheels, builds the CUDA plugin for sm_90 only and
# runs tests/check-gpu.sh.  Logs go to LOGDIR (default: logs/ beside this
# script); a summary comes last.  Exits non-zero on any failure.
set -u
here=$(cd "$(dirname "$0")" && pwd)
logs=${1:-$here/logs}
mkdir -p "$logs" || exit 1
logs=$(cd "$logs" && pwd)
work=${TMPDIR:-/tmp}/loom-gpu-run
rm -rf "$work"
mkdir -p "$work/deps/include" "$work/deps/lib" || exit 1
jobs=$(nproc 2>/dev/null || echo 4)

echo "=== what this machine has"
for t in gcc make nvcc nvidia-smi compute-sanitizer python3 pkg-config; do
	printf '  %-18s %s\n' "$t" "$(command -v "$t" || echo missing)"
done
nvidia-smi -L 2>&1 | sed 's/^/  /'
nvcc --version 2>&1 | tail -n 1 | sed 's/^/  /'

missing=""
for t in gcc make nvcc; do
	command -v "$t" >/dev/null 2>&1 || missing="$missing $t"
done
if [ -n "$missing" ]; then
	echo "gpu-run: cannot build without:$missing"
	echo "0 passed, 1 failed"
	exit 1
fi
cuda_home=$(dirname "$(dirname "$(command -v nvcc)")")

# The directory of a Python package of NVIDIA's wheels (nvidia.cublas,
# nvidia.nccl), or nothing.
wheel_dir() {
	command -v python3 >/dev/null 2>&1 || return 0
	python3 -c "import $1 as m; print(list(m.__path__)[0])" 2>/dev/null
}

# Links the library NAME (libNAME.so*) from DIR into deps/lib as libNAME.so.
link_lib() {
	f=$(ls "$2"/lib"$1".so* 2>/dev/null | sort | tail -n 1)
	[ -n "$f" ] || return 1
	ln -sf "$f" "$work/deps/lib/lib$1.so"
	rpath="$rpath -Wl,-rpath,$2"
	ldpath="$ldpath:$2"
}

rpath=""
ldpath=""
cudalib=""
for d in "$cuda_home/lib64" "$cuda_home/lib" \
	 "$cuda_home/targets/x86_64-linux/lib"; do
	[ -e "$d/libcudart.so" ] && cudalib=$d && break
done
echo "=== libraries"
echo "  CUDA toolkit      $cuda_home (runtime in ${cudalib:-?})"
if [ -n "$cudalib" ] && ls "$cudalib"/libcublas.so* >/dev/null 2>&1; then
	echo "  cuBLAS            toolkit"
else
	w=$(wheel_dir nvidia.cublas)
	if [ -n "$w" ] && link_lib cublas "$w/lib"; then
		link_lib cublasLt "$w/lib"
		[ -d "$w/include" ] && for h in "$w"/include/*.h; do
			ln -sf "$h" "$work/deps/include/"
		done
		echo "  cuBLAS            wheel $w"
	else
		echo "  cuBLAS            missing (toolkit and wheel)"
	fi
fi
nccl_opt="--with-nccl=$work/deps"
if [ -f "$cuda_home/include/nccl.h" ] && [ -n "$cudalib" ] &&
   ls "$cudalib"/libnccl.so* >/dev/null 2>&1; then
	nccl_opt=""
	echo "  NCCL              toolkit"
else
	w=$(wheel_dir nvidia.nccl)
	if [ -n "$w" ] && [ -f "$w/include/nccl.h" ] &&
	   link_lib nccl "$w/lib"; then
		ln -sf "$w/include/nccl.h" "$work/deps/include/nccl.h"
		[ -f "$w/include/nccl_net.h" ] &&
			ln -sf "$w/include/nccl_net.h" "$work/deps/include/"
		echo "  NCCL              wheel $w"
	else
		nccl_opt="--without-nccl"
		echo "  NCCL              missing: the allreduce is not built"
	fi
fi
if pkg-config --exists glib-2.0 2>/dev/null; then
	echo "  GLib              system"
	glib_cflags=$(pkg-config --cflags glib-2.0)
	glib_libs=$(pkg-config --libs glib-2.0)
elif [ -d "$here/glib/include" ]; then
	echo "  GLib              bundled ($here/glib)"
	glib_cflags="-I$here/glib/include/glib-2.0 -I$here/glib/lib/glib-2.0/include"
	glib_libs="-L$here/glib/lib -Wl,-rpath,$here/glib/lib -lglib-2.0"
else
	echo "  GLib              missing: the tests cannot be built"
	echo "0 passed, 1 failed"
	exit 1
fi

tarball=$(ls "$here"/loom-*.tar.gz 2>/dev/null | head -n 1)
if [ -z "$tarball" ]; then
	echo "gpu-run: no loom-*.tar.gz beside this script"
	echo "0 passed, 1 failed"
	exit 1
fi
tar -xzf "$tarball" -C "$work" || exit 1
src=$(ls -d "$work"/loom-*/ | head -n 1)
cd "$src" || exit 1
LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH}$ldpath"
export LD_LIBRARY_PATH

echo "=== build (logs in $logs)"
start=$(date +%s)
if ! ./configure --with-cuda="$cuda_home" --with-cuda-archs=90 \
	--without-hip $nccl_opt CPPFLAGS="-I$work/deps/include" \
	LDFLAGS="-L$work/deps/lib $rpath" GLIB_CFLAGS="$glib_cflags" \
	GLIB_LIBS="$glib_libs" >"$logs/configure.log" 2>&1; then
	tail -n 20 "$logs/configure.log"
	echo "0 passed, 1 failed"
	exit 1
fi
sed -n '/^  Loom /,$p' "$logs/configure.log" | sed 's/^/  /'
if ! make -j"$jobs" >"$logs/build.log" 2>&1 ||
   ! make -j"$jobs" check TESTS= >>"$logs/build.log" 2>&1; then
	grep -E "error|Error" "$logs/build.log" | head -n 20
	echo "0 passed, 1 failed"
	exit 1
fi
echo "  built in $(($(date +%s) - start)) s"

echo "=== check"
sh tests/check-gpu.sh "$src" cuda0 "$logs"
