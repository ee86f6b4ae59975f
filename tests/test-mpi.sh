#!/bin/sh
# SPDX-License-Identifier: MIT
# test-mpi.sh - the mpi plugin under mpirun: a world of 1 to 4 ranks over
# shared memory and over TCP, not applicable outside a launcher, refused
# when MPI sees other ranks than the launcher started, and a
# late rank failing the others' collective within LOOM_MPI_TIMEOUT
# instead of hanging them; loom-bench allreduce --world, which checks
# every sum it times, over 2 ranks.  Skips when the plugin or mpirun is absent.
set -u
b=${LOOM_TEST_BUILDDIR:-.}
check="$b/tests/mpi-check"
if [ ! -e "$b/plugins/mpi/.libs/loom-mpi.so" ] || [ ! -x "$check" ] ||
   ! command -v mpirun >/dev/null 2>&1; then
	echo "1..0 # SKIP no MPI (plugin or mpirun not built here)"
	exit 0
fi
# As root, Open MPI wants to be told; two cores want ranks that yield.
OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_mpi_yield_when_idle=1
OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
	OMPI_MCA_mpi_yield_when_idle OMPI_MCA_rmaps_base_oversubscribe
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
n=0
t=0
ok() { t=$((t + 1)); echo "ok $t $1"; }
not_ok() {
	t=$((t + 1))
	echo "not ok $t $1"
	sed 's/^/# /' "$tmp/out"
}
run() { # DESC EXPECT COMMAND...
	desc=$1
	want=$2
	shift 2
	timeout 120 "$@" >"$tmp/out" 2>&1
	if grep -q "$want" "$tmp/out"; then ok "$desc"; else not_ok "$desc"; fi
}
# mpirun runs the test binary itself, not libtool's wrapper script.
lt="$b/libtool --mode=execute"
mp="mpirun --mca btl_vader_single_copy_mechanism none"

echo "1..9"
run "not applicable outside a launcher" "^outside: ok" \
	$lt "$check" outside
run "MPI seeing other ranks than the launcher is refused" "^mismatch: ok" \
	env PMI_SIZE=3 $lt "$check" mismatch
run "a singleton world" "^world of 1: ok" $lt $mp -np 1 "$check" world 1
for np in 2 3 4; do
	run "a world of $np ranks (shared memory)" "^world of $np: ok" \
		$lt $mp -np $np "$check" world $np
done
run "a world of 2 ranks over TCP" "^world of 2: ok" \
	$lt $mp --mca btl self,tcp -np 2 "$check" world 2
run "a late rank fails the collective within the timeout" \
	"^timeout: ok" env LOOM_MPI_TIMEOUT=2 $lt $mp -np 2 "$check" timeout
# Every size of both allreduces is checked before it is timed (up to
# 4 MiB, short on a loaded machine); a wrong
# sum or a missing entry point fails the run, and the JSON has both.
run "loom-bench allreduce --world over 2 ranks" '"ratio":' \
	env LOOM_PLUGIN_PATH="${LOOM_TEST_PLUGIN_PATH:-}" \
	$lt $mp -np 2 "$b/tools/loom-bench" allreduce --world --reps 1 \
	--max-bytes $((4 << 20)) --json
