#!/bin/sh
# SPDX-License-Identifier: MIT
# check-netns.sh - `make check-netns`: the mpi plugin's world across two
# "hosts" on one machine.  Two network namespaces joined by a veth pair
# (10.200.0.1 and 10.200.0.2, which exist only inside them), each with its
# own host name; mpirun starts in the first and reaches the second through
# an rsh agent that enters it, so the ranks talk over TCP on the veth only.
# Runs tests/mpi-check world 2 (one rank per host) and 4 (two per host),
# then tests/mpi-meta's decoder over a meta device across both hosts
# against one device.  Root only: skipped otherwise.  The namespaces go
# on every way out.
set -u
b=${LOOM_TEST_BUILDDIR:-.}
check="$b/tests/mpi-check"
meta="$b/tests/mpi-meta"

skip() { echo "check-netns: SKIP: $*"; exit 0; }
[ "$(id -u)" = 0 ] || skip "needs root (it makes network namespaces)"
for c in ip unshare mpirun; do
	command -v $c >/dev/null 2>&1 || skip "no $c"
done
[ -e "$b/plugins/mpi/.libs/loom-mpi.so" ] && [ -x "$check" ] &&
	[ -x "$meta" ] || skip "the mpi plugin or tests/mpi-check is not built"

OMPI_ALLOW_RUN_AS_ROOT=1
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
OMPI_MCA_mpi_yield_when_idle=1
LOOM_MPI_TIMEOUT=60
export OMPI_ALLOW_RUN_AS_ROOT OMPI_ALLOW_RUN_AS_ROOT_CONFIRM \
	OMPI_MCA_mpi_yield_when_idle LOOM_MPI_TIMEOUT

ns_a=loom-a-$$
ns_b=loom-b-$$
net=10.200.0.0/24
tmp=$(mktemp -d) || exit 1
job=
cleanup() {
	# A run still going (interrupted): timeout passes the signal on to
	# mpirun, which ends its ranks.
	[ -n "$job" ] && kill "$job" 2>/dev/null && wait "$job"
	ip netns del "$ns_a" 2>/dev/null
	ip netns del "$ns_b" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Both ends are made inside the namespaces: nothing is left outside them,
# and deleting a namespace deletes its end and so the pair.
# Root in a container may still be refused namespaces: that is a skip.
ip netns add "$ns_a" 2>"$tmp/err" || skip "cannot make a network" \
	"namespace here: $(cat "$tmp/err")"
ip netns add "$ns_b" &&
ip link add loom0 netns "$ns_a" type veth peer name loom0 netns "$ns_b" &&
ip -n "$ns_a" addr add 10.200.0.1/24 dev loom0 &&
ip -n "$ns_b" addr add 10.200.0.2/24 dev loom0 &&
ip -n "$ns_a" link set lo up && ip -n "$ns_b" link set lo up &&
ip -n "$ns_a" link set loom0 up && ip -n "$ns_b" link set loom0 up || {
	echo "check-netns: FAIL: cannot set up the namespaces"
	exit 1
}

# "hosta" and "hostb" are the namespaces, each under its own host name
# (a UTS namespace), so that Open MPI sees two nodes.
cat >"$tmp/agent" <<EOF
#!/bin/sh
# An rsh agent for Open MPI: "agent HOST COMMAND..." runs COMMAND (a
# shell command line) in HOST's namespace.
case \$1 in
hosta) ns=$ns_a ;;
hostb) ns=$ns_b ;;
*) echo "agent: no host \$1" >&2; exit 1 ;;
esac
host=\$1
shift
exec ip netns exec "\$ns" unshare --uts sh -c 'hostname "\$0"; eval "\$1"' \\
	"\$host" "\$*"
EOF
chmod +x "$tmp/agent"
printf 'hosta slots=2\nhostb slots=2\n' >"$tmp/hosts"

lt="$b/libtool --mode=execute"
fails=0
# Bytes hosta has sent on the veth: the check's 12 MiB allreduce must go
# over it, or the ranks found another way; so must the decoder's traffic.
sent() { ip netns exec "$ns_a" cat /sys/class/net/loom0/statistics/tx_bytes; }
run() { # NP HOSTS WANT MIN-BYTES COMMAND...
	np=$1
	hosts=$2
	want=$3
	least=$4
	shift 4
	echo "check-netns: $want? ($np ranks over hosta,hostb: $hosts)"
	before=$(sent)
	timeout 120 ip netns exec "$ns_a" unshare --uts sh -c \
		'hostname hosta; exec "$@"' sh \
		$lt mpirun --hostfile "$tmp/hosts" --host "$hosts" -np "$np" \
		--mca plm_rsh_agent "$tmp/agent" --bind-to none \
		--mca btl self,tcp --mca btl_tcp_if_include "$net" \
		--mca oob_tcp_if_include "$net" \
		"$@" >"$tmp/out" 2>&1 &
	job=$!
	wait $job
	rc=$?
	job=
	moved=$(( $(sent) - before ))
	if [ $rc -eq 0 ] && grep -q "^$want: ok" "$tmp/out" &&
	   [ $moved -ge "$least" ]; then
		echo "check-netns: ok: $want ($moved bytes sent by hosta over" \
		     "the veth)"
	else
		echo "check-netns: FAIL: $want (exit $rc, $moved bytes sent" \
		     "by hosta over the veth):"
		sed 's/^/  /' "$tmp/out"
		fails=$((fails + 1))
	fi
}
run 2 hosta:1,hostb:1 "world of 2" $((12 << 20)) "$check" world 2 1
run 4 hosta:2,hostb:2 "world of 4" $((12 << 20)) "$check" world 4 2
# The decoder's logits and greedy tokens over a meta device of both
# hosts' members against one device: one partition per rank, then two.
run 2 hosta:1,hostb:1 "decoder over 2 ranks x 1" $((16 << 10)) \
	env LOOM_CPU_DEVICES=1 "$meta" decoder uneven
run 4 hosta:2,hostb:2 "decoder over 4 ranks x 2" $((16 << 10)) \
	env LOOM_CPU_DEVICES=2 "$meta" decoder even moe
[ $fails -eq 0 ] && echo "check-netns: PASS"
exit $((fails != 0))
