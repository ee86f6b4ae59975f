#!/bin/sh
# SPDX-License-Identifier: MIT
# test-mpi.sh - the world under mpirun.  The mpi plugin: a world of 1 to
# 4 and of 8 ranks (oversubscribed) over shared memory and over TCP, each
# way of summing forced (LOOM_MPI_ALLREDUCE), not applicable outside a
# launcher, refused when MPI sees other ranks than the launcher started,
# a late rank failing the others' collective within LOOM_MPI_TIMEOUT,
# loom-bench allreduce --world checking every sum it times.  The meta
# device over the world: a decoder over 1 to 4 ranks of 1 or 2 CPU
# partitions against one device (logits and greedy tokens), even and
# uneven ratios, over shared memory and TCP, and over 8 ranks (of 5
# partitions: 40 members); a Llama-7B-shaped Q4_K_M layer (d 4096, 32
# heads of 128) over 2 and 3 ranks against one device; ranks that differ
# refused on every rank.  Collectives of different sizes give each rank
# a Loom error (MPI started by the application).  The applications:
# loom-run and
# loom-bench model on a saved GGUF file under mpirun, ranks given
# different prompts refused on every rank, and a killed rank making the
# others fail.
# Skips when the plugin or mpirun is absent.
set -u
b=${LOOM_TEST_BUILDDIR:-.}
check="$b/tests/mpi-check"
meta="$b/tests/mpi-meta"
run="$b/tools/loom-run"
bench="$b/tools/loom-bench"
if [ ! -e "$b/plugins/mpi/.libs/loom-mpi.so" ] || [ ! -x "$check" ] ||
   [ ! -x "$meta" ] || ! command -v mpirun >/dev/null 2>&1; then
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
# The tools find the build's plugins (the folders this build has: the
# loader warns of a missing one); a bug fails a collective, not the run's
# clock.
LOOM_PLUGIN_PATH=
for d in $(echo "${LOOM_TEST_PLUGIN_PATH:-}" | tr ':' ' '); do
	[ -d "$d" ] && LOOM_PLUGIN_PATH="${LOOM_PLUGIN_PATH:+$LOOM_PLUGIN_PATH:}$d"
done
LOOM_MPI_TIMEOUT=60
export LOOM_PLUGIN_PATH LOOM_MPI_TIMEOUT
unset LOOM_META_WORLD LOOM_META_DEVICES LOOM_CPU_DEVICES LOOM_BACKENDS
tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
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
tcp="--mca btl self,tcp"
# Ranks of two partitions each see every core (mpirun binds one rank to
# one core by default).
wide="--bind-to none"

echo "1..42"
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
	$lt $mp $tcp -np 2 "$check" world 2
run "a world of 8 ranks (shared memory, oversubscribed)" "^world of 8: ok" \
	$lt $mp -np 8 "$check" world 8
run "a world of 8 ranks over TCP" "^world of 8: ok" \
	$lt $mp $tcp -np 8 "$check" world 8
for algo in doubling ring halving mpi; do
	run "a world of 5 ranks, LOOM_MPI_ALLREDUCE=$algo" "^world of 5: ok" \
		env LOOM_MPI_ALLREDUCE=$algo $lt $mp -np 5 "$check" world 5
done
run "a late rank fails the collective within the timeout" \
	"^timeout: ok" env LOOM_MPI_TIMEOUT=2 $lt $mp -np 2 "$check" timeout
# Every size of both allreduces is checked before it is timed (up to
# 4 MiB, short on a loaded machine); a wrong
# sum or a missing entry point fails the run, and the JSON has both.
run "loom-bench allreduce --world over 2 ranks" '"ratio":' \
	$lt $mp -np 2 "$bench" allreduce --world --reps 1 \
	--max-bytes $((4 << 20)) --json

# decoder NP PARTITIONS RATIOS [moe|bf16] [MPIRUN OPTIONS...]
decoder() {
	np=$1
	parts=$2
	ratios=$3
	shift 3
	ffn=
	case ${1:-} in moe | bf16) ffn=$1; shift ;; esac
	bind=
	[ "$parts" -gt 1 ] && bind=$wide
	run "a decoder over $np ranks x $parts partitions, $ratios${ffn:+, $ffn}${1:+ ($*)}" \
		"^decoder over $np ranks x $parts: ok" \
		env LOOM_CPU_DEVICES=$parts $lt $mp $bind "$@" -np $np \
		"$meta" decoder $ratios $ffn
}
decoder 1 2 even
decoder 2 1 even
decoder 2 2 uneven
decoder 3 1 uneven moe
decoder 3 2 even
decoder 4 1 uneven
decoder 4 2 even moe
decoder 2 2 uneven $tcp
decoder 3 1 even moe $tcp
decoder 2 2 uneven bf16
decoder 3 1 even bf16 $tcp
decoder 8 1 uneven
decoder 8 5 even
# A Llama-7B-shaped layer in Q4_K_M's types: attention cut in units of
# two heads of 128 (one K-quant block), uneven remainders on 3 ranks.
kquant() { # NP PARTITIONS RATIOS
	bind=
	[ "$2" -gt 1 ] && bind=$wide
	run "a 7B-shaped Q4_K_M layer over $1 ranks x $2 partitions, $3" \
		"^kquant over $1 ranks x $2: ok" \
		env LOOM_CPU_DEVICES=$2 $lt $mp $bind -np $1 "$meta" kquant $3
}
kquant 2 1 uneven
kquant 2 2 even
kquant 3 1 even
kquant 3 1 uneven
run "another model on rank 1 is refused on every rank" "^mismatch shape: ok" \
	$lt $mp -np 2 "$meta" mismatch shape
run "ratios on rank 1 alone are refused on every rank" \
	"^mismatch ratios: ok" $lt $mp -np 3 "$meta" mismatch ratios

# An application that started MPI itself gets a Loom error on each rank
# when the ranks' collectives differ in size, not the end of the job.
if [ -x "$b/tests/mpi-app" ]; then
	LOOM_MPI_TIMEOUT=2 timeout 120 $lt $mp -np 2 "$b/tests/mpi-app" \
		>"$tmp/out" 2>&1
	if grep -q "^app rank 0: ok: .*every rank must run the same model" \
		"$tmp/out" &&
	   grep -q "^app rank 1: ok: " "$tmp/out" &&
	   ! grep -q "ERRORS_ARE_FATAL" "$tmp/out"; then
		ok "collectives of different sizes: a Loom error on each rank"
	else
		not_ok "collectives of different sizes: a Loom error on each rank"
	fi
else
	ok "# SKIP collectives of different sizes: no tests/mpi-app"
fi

# The applications, on a saved file.  A context of 20000 tokens lets the
# killed-rank run below still be decoding when its rank dies.
tokens() { sed -n 's/.*"tokens": \[\([0-9, ]*\)\].*/\1/p' "$1"; }
"$bench" model --preset tiny --prefill 20000 --decode 8 \
	--save "$tmp/tiny.gguf" >"$tmp/out" 2>&1 && ok "loom-bench model --save" ||
	not_ok "loom-bench model --save"
args="-m $tmp/tiny.gguf --tokens 1,5,100,7,42 -n 12 -c 64 --json"
LOOM_CPU_DEVICES=1 "$run" $args --devices cpu0 \
	--dump-logits "$tmp/one.bin" >"$tmp/one.json" 2>"$tmp/out"
LOOM_META_WORLD=mpi LOOM_CPU_DEVICES=1 timeout 120 $lt $mp -np 2 "$run" \
	$args --devices cpu0 --dump-logits "$tmp/w2.bin" >"$tmp/w2.json" \
	2>"$tmp/out"
# Rank 0 alone prints: one JSON line, from a meta device.
if [ -n "$(tokens "$tmp/one.json")" ] &&
   [ "$(tokens "$tmp/one.json")" = "$(tokens "$tmp/w2.json")" ] &&
   [ "$(wc -l <"$tmp/w2.json" | tr -d ' ')" = 1 ] &&
   grep -q '"device": "meta' "$tmp/w2.json"; then
	ok "loom-run over 2 ranks: one device's greedy tokens, rank 0 prints"
else
	cat "$tmp/one.json" "$tmp/w2.json" >>"$tmp/out"
	not_ok "loom-run over 2 ranks: one device's greedy tokens, rank 0 prints"
fi
run "loom-run over 2 ranks: one device's logits" "^nmse ok" \
	"$meta" nmse "$tmp/one.bin" "$tmp/w2.bin"
LOOM_META_WORLD=mpi LOOM_CPU_DEVICES=2 timeout 120 $lt $mp $wide $tcp \
	-np 3 "$run" $args --devices cpu0,cpu1 >"$tmp/w3.json" 2>"$tmp/out"
if [ "$(tokens "$tmp/one.json")" = "$(tokens "$tmp/w3.json")" ]; then
	ok "loom-run over 3 ranks x 2 partitions over TCP: the same tokens"
else
	cat "$tmp/w3.json" >>"$tmp/out"
	not_ok "loom-run over 3 ranks x 2 partitions over TCP: the same tokens"
fi
env LOOM_META_WORLD=mpi LOOM_META_DEVICES=cpu0 LOOM_CPU_DEVICES=1 \
	timeout 120 $lt $mp -np 2 "$bench" model --gguf "$tmp/tiny.gguf" \
	--prefill 8 --decode 4 --reps 1 --no-limits --json >"$tmp/out" 2>&1
e=$(sed -n 's/^  "nmse_vs_single": \([0-9.e+-]*\),$/\1/p' "$tmp/out")
if [ -n "$e" ] && awk -v e="$e" 'BEGIN { exit !(e <= 1e-6) }' &&
   grep -q '^    "ranks": 2,$' "$tmp/out"; then
	ok "loom-bench model over 2 ranks matches one device (NMSE $e)"
else
	not_ok "loom-bench model over 2 ranks matches one device"
fi

# Ranks given different prompts and -n: every rank says which differs
# before a collective of another size (MPI's fatal handler ended the job).
LOOM_META_WORLD=mpi LOOM_CPU_DEVICES=1 timeout 120 $lt $mp \
	-np 1 "$run" -m "$tmp/tiny.gguf" --tokens 1,2,3 -n 4 -c 64 \
	--devices cpu0 : -np 1 "$run" -m "$tmp/tiny.gguf" \
	--tokens 1,2,3,4,5,6 -n 9 -c 64 --devices cpu0 >/dev/null 2>"$tmp/out"
rc=$?
want="rank 1's prompt has another length than rank 0's"
if [ $rc != 0 ] && grep -q "rank 0: $want" "$tmp/out" &&
   grep -q "rank 1: $want" "$tmp/out" &&
   ! grep -q "ERRORS_ARE_FATAL" "$tmp/out"; then
	ok "ranks with different prompts: each says rank 1 differs"
else
	echo "# exit status $rc" >>"$tmp/out"
	not_ok "ranks with different prompts: each says rank 1 differs"
fi

# A killed rank: Open MPI ends the whole job unless told to recover, and
# then the survivors must fail within the timeout, naming it.  A survivor
# that has said so may itself be ended by mpirun once the other one
# exits, before its wrapper writes its status: no status file counts as
# a failure, an exit status of 0 does not.
if $lt mpirun --help all 2>&1 | grep -q -- --enable-recovery; then
	cat >"$tmp/die" <<EOF
#!/bin/sh
r=\$OMPI_COMM_WORLD_RANK
if [ "\$r" = 1 ]; then timeout -s KILL 3 "\$@"; else "\$@"; fi
echo \$? >"$tmp/rc.\$r"
EOF
	chmod +x "$tmp/die"
	start=$(date +%s)
	LOOM_MPI_TIMEOUT=2 LOOM_META_WORLD=mpi LOOM_CPU_DEVICES=1 \
		timeout 120 $lt $mp --enable-recovery -np 3 "$tmp/die" "$run" \
		-m "$tmp/tiny.gguf" --tokens 1,5,100 -n 100000 -c 20000 \
		--devices cpu0 >/dev/null 2>"$tmp/out"
	took=$(($(date +%s) - start))
	if grep -q "rank 0: .*rank 0 of 3 waited 2 s for rank 1 (it died" \
		"$tmp/out" &&
	   grep -q "rank 2: .*rank 2 of 3 waited 2 s for rank 1 (it died" \
		"$tmp/out" &&
	   [ "$(cat "$tmp/rc.0" 2>/dev/null)" != 0 ] &&
	   [ "$(cat "$tmp/rc.2" 2>/dev/null)" != 0 ] &&
	   [ $took -lt 40 ]; then
		ok "a killed rank: the others fail in $took s, naming it"
	else
		echo "# took $took s; exit status of ranks 0 and 2:" \
		     "$(cat "$tmp/rc.0" "$tmp/rc.2" 2>/dev/null)" >>"$tmp/out"
		not_ok "a killed rank: the others fail, naming it"
	fi
else
	ok "# SKIP a killed rank: mpirun has no --enable-recovery"
fi
