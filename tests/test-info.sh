#!/bin/sh
# SPDX-License-Identifier: MIT
# tests/test-info.sh - loom-info shows the user's environment mistakes:
# each bad LOOM_* value gives its exact warning in the report, and a
# configuration that leaves no device says why, and a search path of
# thousands of folders does not slow the report.  TAP output.

info="$LOOM_TEST_BUILDDIR/tools/loom-info"
# Only the cpu and meta plugins, so that what "everything" is stays known.
path="$LOOM_TEST_BUILDDIR/plugins/cpu/.libs:$LOOM_TEST_BUILDDIR/plugins/meta/.libs"
out="${TMPDIR:-/tmp}/loom-test-info.$$"
trap 'rm -f "$out" "$out.err"' EXIT
n=0
failed=0
ncpu=$(nproc)

echo "1..11"

# check NAME LINE [VAR=VALUE...]: loom-info, run with the plugins of the
# build and those variables, prints LINE (exactly, as a whole line) and
# nothing on stderr.
check() {
	name=$1
	line=$2
	shift 2
	n=$((n + 1))
	env LOOM_PLUGIN_PATH="$path" "$@" "$info" >"$out" 2>"$out.err"
	rc=$?
	if [ $rc -ne 0 ] || [ -s "$out.err" ]; then
		echo "not ok $n - $name: exit status $rc"
		sed 's/^/# /' "$out.err"
		failed=1
	elif ! grep -Fxq -- "$line" "$out"; then
		echo "not ok $n - $name: no line '$line'"
		sed 's/^/# /' "$out"
		failed=1
	else
		echo "ok $n - $name"
	fi
}

check "LOOM_CPU_DEVICES=abc" \
	"  cpu: LOOM_CPU_DEVICES=abc is neither a device count (1 to 1024) nor 'numa'; using 1 device" \
	LOOM_CPU_DEVICES=abc
check "LOOM_CPU_DEVICES=0" \
	"  cpu: LOOM_CPU_DEVICES=0 is neither a device count (1 to 1024) nor 'numa'; using 1 device" \
	LOOM_CPU_DEVICES=0
check "LOOM_CPU_DEVICES=-1" \
	"  cpu: LOOM_CPU_DEVICES=-1 is neither a device count (1 to 1024) nor 'numa'; using 1 device" \
	LOOM_CPU_DEVICES=-1
more=$((ncpu + 1))
check "LOOM_CPU_DEVICES over the CPUs" \
	"  cpu: LOOM_CPU_DEVICES=$more but only $ncpu CPUs: devices share CPUs and run slower than one device" \
	LOOM_CPU_DEVICES=$more
check "LOOM_CPU_THREADS=zero" \
	"  cpu: LOOM_CPU_THREADS=zero is not a thread count (1 to 4096); using one thread per core" \
	LOOM_CPU_THREADS=zero
check "LOOM_LOG=bogus" \
	"  LOOM_LOG=bogus is not a level (none, error, warn, info, debug); using warn" \
	LOOM_LOG=bogus
check "LOOM_META_DEVICES naming no device" \
	"  LOOM_META_DEVICES: no device 'cpu7'; no meta device made" \
	LOOM_BACKENDS=cpu,meta LOOM_META_DEVICES=cpu0,cpu7
check "meta alone: no device" \
	"  no device: the loaded plugins have no devices: meta (meta composes the devices LOOM_META_DEVICES names, else two or more GPUs)" \
	LOOM_BACKENDS=meta
check "everything excluded: no device" \
	"  no device: LOOM_BACKENDS excludes every plugin file found" \
	LOOM_BACKENDS=^cpu,meta
# The same reasons in JSON.
n=$((n + 1))
env LOOM_PLUGIN_PATH=/nonexistent "$info" --json >"$out" 2>"$out.err"
if grep -Fxq ' "warnings": ["no device: no plugin file in the search path"]}' \
	"$out"; then
	echo "ok $n - no plugin file: JSON warning"
else
	echo "not ok $n - no plugin file: JSON warning"
	sed 's/^/# /' "$out"
	failed=1
fi
# Thousands of search folders, each missing: the report takes time in
# proportion to them (each warning compared with every record took 13 s
# for 8000 on a loaded 2-core machine).
n=$((n + 1))
many=$(i=0; while [ $i -lt 8000 ]; do i=$((i + 1)); printf '/n/%d:' $i; done)
env LOOM_PLUGIN_PATH="$many" timeout 5 "$info" >"$out" 2>"$out.err"
rc=$?
if [ $rc -eq 0 ] &&
   grep -Fxq "  no device: no plugin file in the search path" "$out"; then
	echo "ok $n - 8000 search folders within 5 s"
else
	echo "not ok $n - 8000 search folders within 5 s: exit status $rc"
	failed=1
fi
exit 0
