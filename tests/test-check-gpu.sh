#!/bin/sh
# SPDX-License-Identifier: MIT
# test-check-gpu.sh - the GPU check must fail, not skip, on a machine whose
# driver lists a GPU that Loom cannot use.  A stand-in nvidia-smi that
# lists one GPU comes first on PATH; this machine's build has no cuda0
# (no GPU, or no CUDA plugin), so check-gpu.sh must exit non-zero and say
# why.  Without the stand-in (and no real GPU) it skips with exit 0.
set -u
b=${LOOM_TEST_BUILDDIR:-.}
s=${srcdir:-.}/tests/check-gpu.sh
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

if command -v nvidia-smi >/dev/null 2>&1 &&
   nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	echo "1..0 # SKIP a real GPU is here: make check-gpu checks it"
	exit 0
fi
echo "1..2"

mkdir "$tmp/bin"
cat >"$tmp/bin/nvidia-smi" <<'SMI'
#!/bin/sh
echo "GPU 0: NVIDIA H200 (UUID: GPU-00000000-0000-0000-0000-000000000000)"
SMI
chmod +x "$tmp/bin/nvidia-smi"

PATH="$tmp/bin:$PATH" sh "$s" "$b" cuda0 >"$tmp/out" 2>&1
rc=$?
if [ $rc -ne 0 ] && grep -q "lists 1 GPU(s) but Loom has no device cuda0" \
	"$tmp/out" && tail -n 1 "$tmp/out" | grep -q "^0 passed, 1 failed"; then
	echo "ok 1 a listed GPU without cuda0 fails the check"
else
	echo "not ok 1 a listed GPU without cuda0 fails the check (exit $rc)"
	sed 's/^/# /' "$tmp/out"
fi

# No GPU listed: the check skips and says so.
cat >"$tmp/bin/nvidia-smi" <<'SMI'
#!/bin/sh
echo "No devices were found"
exit 6
SMI
PATH="$tmp/bin:$PATH" sh "$s" "$b" cuda0 >"$tmp/out" 2>&1
rc=$?
if [ $rc -eq 0 ] && grep -q "skipped: no GPU" "$tmp/out"; then
	echo "ok 2 no GPU listed skips the check"
else
	echo "not ok 2 no GPU listed skips the check (exit $rc)"
	sed 's/^/# /' "$tmp/out"
fi
