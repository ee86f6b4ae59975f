/* SPDX-License-Identifier: MIT */
/* mpi-coll.c - the world's collectives on host memory: allreduce (F32, and
 * BF16 through a sum of our own) by recursive doubling below the size
 * where a ring pays and by a ring of point-to-point messages above it,
 * broadcast, gather to rank 0, and barrier, and the bare blocking
 * allreduce that benchmarks measure them against.  Every argument is
 * checked before MPI sees it (some MPIs crash on bad ones); each call is
 * non-blocking underneath and waited for with a deadline, so a rank that
 * died fails the others instead of hanging them.
 */
#include <config.h>

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sched.h>
#include <string.h>
#include <time.h>

#include "mpi-private.h"

/* inout[i] += in[i] for BF16 values carried as MPI_UINT16_T: widened to
 * F32 a block at a time by the core's conversion loops (a call per value
 * made the sum the cost of a small allreduce), added, rounded back to
 * nearest even. */
#define BF16_BLOCK 256

static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type)
{
	const uint16_t *a = in;
	uint16_t *b = inout;
	float fa[BF16_BLOCK], fb[BF16_BLOCK];

	(void)type;
	for (int i = 0; i < *len; i += BF16_BLOCK) {
		int m = *len - i < BF16_BLOCK ? *len - i : BF16_BLOCK;

		loom_type_convert(LOOM_TYPE_BF16, a + i, LOOM_TYPE_F32, fa, m);
		loom_type_convert(LOOM_TYPE_BF16, b + i, LOOM_TYPE_F32, fb, m);
		for (int k = 0; k < m; k++)
			fb[k] += fa[k];
		loom_type_convert(LOOM_TYPE_F32, fb, LOOM_TYPE_BF16, b + i, m);
	}
}

int mpi_coll_init(struct mpi_world *w)
{
	int err = MPI_Op_create(bf16_sum, 1, &w->bf16_sum);

	if (err != MPI_SUCCESS) {
		w->bf16_sum = MPI_OP_NULL;
		return mpi_fail(err, "cannot create the BF16 sum");
	}
	return LOOM_OK;
}

void mpi_coll_free(struct mpi_world *w)
{
	if (w->bf16_sum != MPI_OP_NULL)
		MPI_Op_free(&w->bf16_sum);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* How long a wait polls without sleeping.  MPI moves data only while it
 * is polled (MPI_Test drives its progress engine), so a sleep in the
 * middle of a collective stalls it, and a sleeping rank wakes late (the
 * timer's slack, then the scheduler: 50 us to milliseconds), which at
 * 16 KiB was 90 times the collective itself.  For its first
 * mpi_world.hold_s a wait polls and nothing else: a peer that is about
 * to answer finds this rank still on its core (a yield on a loaded host
 * gave the core away for a time slice: 11 to 22 times a bare
 * MPI_Allreduce at 1 MiB, which never yields unless the host is
 * oversubscribed; oversubscribed, the hold measured better than yielding
 * at once, see mpi-plugin.c).  Then, up to SPIN_S, it yields between
 * polls, leaving the core to whoever else wants it; then it sleeps.  A
 * step of a large allreduce over ranks that share cores lasts longer
 * than 50 ms (64 MiB over 8 ranks on 2 cores: about 100 ms), and a rank
 * that naps there stalls its own messages: with naps from 50 ms on,
 * 64 MiB over 8 ranks took 0.70-1.40 times a bare MPI_Allreduce (medians
 * of 3 runs), from 1 s on 0.60-0.88 (4 runs; doc/benchmarks.md). */
#define SPIN_S 1.0

/* The deadline of a collective that starts now. */
static double deadline(void)
{
	return now() + mpi_world.timeout_s;
}

/* The tag of the messages that find who is missing, and how long a rank
 * that gave up listens for the others. */
#define PROBE_TAG 0x4c4d
#define PROBE_S 1.0

/* Names into out the ranks a failed collective waited for and returns
 * how many (-1: not known, 0: every rank answered): every rank
 * that gives up tells all the others so and listens for PROBE_S; the
 * ranks not heard from died or are stuck.  The survivors of a collective
 * give up within moments of each other (they entered it together), so
 * they hear each other.  Requests left open are never reused: the world
 * is gone. */
static int find_missing(struct mpi_world *w, char *out, size_t size)
{
	static const char alive = 1;
	int p = w->n_ranks, n_missing = -1;
	MPI_Request *reqs = calloc((size_t)p, sizeof(*reqs));
	char *heard = calloc((size_t)p, 1);
	double end = now() + (w->timeout_s < PROBE_S ? w->timeout_s : PROBE_S);
	size_t len = 0;

	snprintf(out, size, "another rank");
	if (!reqs || !heard)
		goto out;
	for (int r = 0; r < p; r++) {
		MPI_Request sreq;

		reqs[r] = MPI_REQUEST_NULL;
		if (r == w->rank)
			continue;
		/* heard[r] stays posted until it arrives; a dead rank's
		 * never does, so heard is not freed then. */
		if (MPI_Irecv(&heard[r], 1, MPI_CHAR, r, PROBE_TAG, w->comm,
			      &reqs[r]) != MPI_SUCCESS)
			reqs[r] = MPI_REQUEST_NULL;
		if (MPI_Isend(&alive, 1, MPI_CHAR, r, PROBE_TAG, w->comm,
			      &sreq) == MPI_SUCCESS)
			MPI_Request_free(&sreq);
	}
	for (int left = p - 1; left > 0 && now() < end;) {
		for (int r = 0; r < p; r++) {
			int done = 0;

			if (reqs[r] == MPI_REQUEST_NULL)
				continue;
			/* An error is a rank that cannot be reached. */
			if (MPI_Test(&reqs[r], &done, MPI_STATUS_IGNORE) !=
			    MPI_SUCCESS || done) {
				reqs[r] = MPI_REQUEST_NULL;
				left--;
			}
		}
		sched_yield();
	}
	n_missing = 0;
	for (int r = 0; r < p; r++)
		n_missing += r != w->rank && !heard[r];
	len = (size_t)snprintf(out, size, n_missing > 1 ? "ranks" : "rank");
	for (int r = 0, k = 0; r < p && len < size; r++) {
		if (r == w->rank || heard[r])
			continue;
		len += (size_t)snprintf(out + len, size - len, "%s%d",
					k++ ? ", " : " ", r);
	}
	if (n_missing > 0)
		heard = NULL; /* still posted */
out:
	free(heard);
	free(reqs);
	return n_missing;
}

/* MPI_Testall of n requests (at most 2), its error that of the request
 * that failed.  Open MPI raises the error of a non-blocking collective
 * on MPI_COMM_WORLD, whatever its communicator: unless this plugin
 * started MPI (and set MPI_COMM_WORLD to return errors for good), the
 * application's handler there is set aside for the call, so that an
 * error comes back as a status and not as the end of every rank. */
static int test_all(int n, MPI_Request *reqs, int *done, MPI_Status *out)
{
	MPI_Status st[2];
	MPI_Errhandler app = MPI_ERRHANDLER_NULL;
	int err, cls;

	for (int i = 0; i < n; i++)
		st[i].MPI_ERROR = MPI_SUCCESS;
	if (!mpi_world.we_initialized &&
	    MPI_Comm_get_errhandler(MPI_COMM_WORLD, &app) == MPI_SUCCESS)
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	err = MPI_Testall(n, reqs, done, st);
	/* A request's own error, when MPI says it is one (still under
	 * MPI_ERRORS_RETURN: asking about a bad code is an error too). */
	if (err == MPI_ERR_IN_STATUS)
		for (int i = 0; i < n; i++)
			if (st[i].MPI_ERROR != MPI_SUCCESS &&
			    st[i].MPI_ERROR != MPI_ERR_PENDING &&
			    MPI_Error_class(st[i].MPI_ERROR, &cls) ==
				    MPI_SUCCESS) {
				err = st[i].MPI_ERROR;
				break;
			}
	if (app != MPI_ERRHANDLER_NULL) {
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, app);
		MPI_Errhandler_free(&app);
	}
	if (out && *done)
		memcpy(out, st, (size_t)n * sizeof(*st));
	return err;
}

/* Waits for the n requests until end (from deadline()): polling, for
 * the world's hold_s alone, then yielding the core between polls, up to
 * SPIN_S, then with sleeps that grow to a millisecond so that a long
 * wait (a rank that is late or dead) leaves the core to others. */
static int wait_all(int n, MPI_Request *reqs, double end, const char *what,
		    MPI_Status *out)
{
	struct mpi_world *w = &mpi_world;
	double start = now(), t;
	long nap = 0;
	int done = 0, err;

	for (;;) {
		err = test_all(n, reqs, &done, out);
		if (err != MPI_SUCCESS) {
			w->broken = true;
			return mpi_fail(err, what);
		}
		if (done)
			return LOOM_OK;
		t = now();
		if (t > end) {
			char who[256];

			/* A collective cannot be cancelled: the world is
			 * unusable from here on. */
			w->broken = true;
			if (find_missing(w, who, sizeof(who)) == 0)
				return loom_error_set(
					LOOM_E_IO, "mpi: %s: rank %d of %d "
					"waited %.0f s, but every rank "
					"answered (are they in different "
					"collectives?)", what, w->rank,
					w->n_ranks, w->timeout_s);
			return loom_error_set(LOOM_E_IO, "mpi: %s: rank %d "
					      "of %d waited %.0f s for %s (it "
					      "died or is stuck)", what,
					      w->rank, w->n_ranks,
					      w->timeout_s, who);
		}
		if (t - start < w->hold_s)
			continue;
		if (t - start < SPIN_S) {
			sched_yield();
			continue;
		}
		if (nap) {
			struct timespec ts = { 0, nap };

			nanosleep(&ts, NULL);
		}
		nap = nap ? (nap < 1000000 ? nap * 2 : nap) : 1000;
	}
}

static int usable(const char *what)
{
	if (!mpi_world.n_ranks)
		return loom_error_set(LOOM_E_STATE, "mpi: %s: the world is "
				      "not open", what);
	if (mpi_world.broken)
		return loom_error_set(LOOM_E_STATE, "mpi: %s: an earlier "
				      "collective failed; the world is gone",
				      what);
	return LOOM_OK;
}

/* MPI's datatype, sum and element size for a Loom type, or an error
 * naming the entry point. */
static int reduce_type(enum loom_type type, const char *what,
		       MPI_Datatype *dt, MPI_Op *op, size_t *es)
{
	if (type == LOOM_TYPE_F32) {
		*dt = MPI_FLOAT;
		*op = MPI_SUM;
		*es = 4;
	} else if (type == LOOM_TYPE_BF16) {
		*dt = MPI_UINT16_T;
		*op = mpi_world.bf16_sum;
		*es = 2;
	} else {
		return loom_error_set(LOOM_E_UNSUPPORTED, "%s: type %s (F32 "
				      "and BF16 only)", what,
				      loom_type_name(type));
	}
	return LOOM_OK;
}

/* From how many bytes on world_allreduce runs its ring (2 ranks) or
 * halving() (3 or more) rather than recursive doubling (loom-bench
 * allreduce --world with LOOM_MPI_ALLREDUCE=ring, =halving and
 * =doubling, each interleaved with a bare MPI_Allreduce, shared memory
 * and TCP; doc/benchmarks.md).  Recursive doubling sends the whole
 * buffer log2(p) times, one latency per step, and sums all of it at each
 * step; the ring and halving send 2(p-1)/p of it and sum (p-1)/p, the
 * ring in 2(p-1) steps, halving in 2 log2(p).  Over 4 and 8 ranks,
 * doubling was the fastest at 16 KiB of F32 (0.6-0.8 times the bare
 * sum) and 1.4-1.8 times it at 64-256 KiB over TCP and at 256 KiB in
 * shared memory, where halving was 0.8-1.1 and beat the ring over TCP
 * (1.03-1.09 against 1.20-1.48 from 256 KiB over 4 ranks).  A sum that
 * costs more than its bytes (our BF16 sum) leaves doubling from 16 KiB:
 * 1.6-3.0 times the bare sum there, halving 0.98-1.04.  Open MPI's own
 * MPI_Iallreduce is no choice: in place, or under 4 ranks, it reduces to
 * one rank and broadcasts back, one way at a time (16-64 MiB 1.4 times
 * and 256 KiB 1.9 times a blocking MPI_Allreduce over 2 ranks). */
static size_t split_min_bytes(int p, bool costly)
{
	return p <= 2 || costly ? 16u << 10 : 64u << 10;
}

/* Room for bytes in the world's scratch buffer. */
static int scratch(struct mpi_world *w, size_t bytes, const char *what)
{
	void *b;

	if (w->scratch_bytes >= bytes)
		return LOOM_OK;
	b = realloc(w->scratch, bytes);
	if (!b)
		return loom_error_set(LOOM_E_NOMEM, "%s: no memory for %zu "
				      "bytes", what, bytes);
	w->scratch = b;
	w->scratch_bytes = bytes;
	return LOOM_OK;
}

/* One step of a point-to-point allreduce: sends n values at out to
 * peer `to` and receives m into in from `from` (either may be 0 values:
 * no message), waited for until end.  A message shorter than m is a rank
 * that sums another size (MPI says only that a longer one is truncated):
 * the ranks are out of step from there on. */
static int exchange(const void *out, size_t n, int to, void *in, size_t m,
		    int from, MPI_Datatype dt, double end, const char *what)
{
	struct mpi_world *w = &mpi_world;
	MPI_Request req[2] = { MPI_REQUEST_NULL, MPI_REQUEST_NULL };
	MPI_Status st[2];
	int err, k = 0, got = -1;

	if (m) {
		err = MPI_Irecv(in, (int)m, dt, from, 0, w->comm, &req[k]);
		if (err != MPI_SUCCESS)
			return mpi_fail(err, what);
		k++;
	}
	if (n) {
		err = MPI_Isend(out, (int)n, dt, to, 0, w->comm, &req[k]);
		if (err != MPI_SUCCESS) {
			/* A receive may stay posted: the world is gone. */
			w->broken = true;
			return mpi_fail(err, what);
		}
		k++;
	}
	err = wait_all(k, req, end, what, st);
	if (err || !m)
		return err;
	if (MPI_Get_count(&st[0], dt, &got) != MPI_SUCCESS ||
	    got != (int)m) {
		w->broken = true;
		return loom_error_set(LOOM_E_IO, "mpi: %s: rank %d of %d: "
				      "rank %d sent %d values, not %zu (do the "
				      "ranks' collectives differ in size? "
				      "every rank must run the same model with "
				      "the same arguments)", what, w->rank,
				      w->n_ranks, from, got, m);
	}
	return LOOM_OK;
}

/* The end of doubling() and halving() on p ranks, rem past a power of
 * two: each even rank below 2 * rem, folded out of the exchanges, gets
 * the sum from its odd neighbour. */
static int unfold(char *data, size_t n, int me, int rem, MPI_Datatype dt,
		  double end, const char *what)
{
	if (me >= 2 * rem)
		return LOOM_OK;
	return me % 2 ? exchange(data, n, me - 1, NULL, 0, -1, dt, end, what)
		      : exchange(NULL, 0, -1, data, n, me + 1, dt, end, what);
}

/* Recursive doubling of n values (that fit an int): with pof2 the
 * largest power of two <= p, the first 2(p - pof2) ranks pair up and the
 * even one hands its values to the odd one; then the pof2 ranks left
 * swap and add whole buffers with the rank mask away, for mask = 1, 2,
 * 4 ...; last, the odd ones hand the sum back.  Addition commutes (in
 * F32 and in our BF16 sum alike), so a + b on one side is b + a on the
 * other, bit for bit: every rank ends with the same sum. */
static int doubling(char *data, size_t n, MPI_Datatype dt, MPI_Op op,
		    size_t es, const char *what)
{
	struct mpi_world *w = &mpi_world;
	int p = w->n_ranks, me = w->rank, pof2 = 1, rem, vr, err, st;
	double end = deadline();

	while (pof2 * 2 <= p)
		pof2 *= 2;
	rem = p - pof2;
	st = scratch(w, n * es, what);
	if (st)
		return st;
	if (me < 2 * rem) {
		if (me % 2 == 0) {
			st = exchange(data, n, me + 1, NULL, 0, -1, dt, end,
				      what);
			vr = -1;
		} else {
			st = exchange(NULL, 0, -1, w->scratch, n, me - 1, dt,
				      end, what);
			vr = me / 2;
			if (!st) {
				err = MPI_Reduce_local(w->scratch, data, (int)n,
						       dt, op);
				if (err != MPI_SUCCESS)
					return mpi_fail(err, what);
			}
		}
		if (st)
			return st;
	} else {
		vr = me - rem;
	}
	for (int mask = 1; vr >= 0 && mask < pof2; mask <<= 1) {
		int vpeer = vr ^ mask;
		int peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;

		st = exchange(data, n, peer, w->scratch, n, peer, dt, end,
			      what);
		if (st)
			return st;
		err = MPI_Reduce_local(w->scratch, data, (int)n, dt, op);
		if (err != MPI_SUCCESS)
			return mpi_fail(err, what);
	}
	return st ? st : unfold(data, n, me, rem, dt, end, what);
}

/* The piece of [0, n) that is chunk c of p: the first n % p chunks
 * have one more element. */
static void chunk(size_t n, int p, int c, size_t *off, size_t *len)
{
	size_t q = n / (size_t)p, r = n % (size_t)p, uc = (size_t)c;

	*off = uc * q + (uc < r ? uc : r);
	*len = q + (uc < r ? 1 : 0);
}

/* Ring allreduce of n values (n / n_ranks fit an int): n_ranks - 1
 * steps of reduce-scatter (send one chunk to the right, receive the
 * next from the left and add it), then n_ranks - 1 of allgather (pass
 * the summed chunks on). */
static int ring(char *data, size_t n, MPI_Datatype dt, MPI_Op op,
		size_t es, const char *what)
{
	struct mpi_world *w = &mpi_world;
	int p = w->n_ranks, right = (w->rank + 1) % p;
	int left = (w->rank + p - 1) % p, st;
	size_t off, len, roff, rlen;
	double end = deadline();

	chunk(n, p, 0, &off, &len);
	st = scratch(w, len * es, what);
	if (st)
		return st;
	for (int step = 0; step < 2 * (p - 1); step++) {
		bool gather = step >= p - 1;
		int s = gather ? step - (p - 1) : step;
		/* Reduce-scatter sends chunk rank - s and gets rank - s - 1;
		 * the allgather is one chunk ahead (its own summed one). */
		int sc = (w->rank - s + (gather ? 1 : 0) + 2 * p) % p;
		int rc = (sc + p - 1) % p;
		int err;

		chunk(n, p, sc, &off, &len);
		chunk(n, p, rc, &roff, &rlen);
		st = exchange(data + off * es, len, right,
			      gather ? data + roff * es : w->scratch, rlen,
			      left, dt, end, what);
		if (st)
			return st;
		if (!gather && rlen) {
			err = MPI_Reduce_local(w->scratch, data + roff * es,
					       (int)rlen, dt, op);
			if (err != MPI_SUCCESS)
				return mpi_fail(err, what);
		}
	}
	return LOOM_OK;
}

/* The values of chunks [a, b) of n in pof2 chunks (chunk()). */
static void chunks(size_t n, int pof2, int a, int b, size_t *off,
		   size_t *len)
{
	size_t end, l;

	chunk(n, pof2, a, off, &l);
	chunk(n, pof2, b - 1, &end, &l);
	*len = end + l - *off;
}

/* Rabenseifner's allreduce of n values (that fit an int), as MPI
 * libraries run it on long vectors: the ranks past the largest power of
 * two pof2 fold in and out as in doubling(); the pof2 ranks left
 * reduce-scatter by recursive halving (at distance pof2/2, then pof2/4
 * ..., each step sending the half of its part the peer keeps and adding
 * the other half it gets back), until virtual rank v holds the sum of
 * chunk v of pof2; then they allgather by recursive doubling, the steps
 * in reverse.  Each rank sends and receives 2 (pof2 - 1) / pof2 of the
 * buffer, as in the ring, in 2 log2(pof2) steps instead of 2 (p - 1). */
static int halving(char *data, size_t n, MPI_Datatype dt, MPI_Op op,
		   size_t es, const char *what)
{
	struct mpi_world *w = &mpi_world;
	int p = w->n_ranks, me = w->rank, pof2 = 1, rem, vr, err, st;
	int lo, hi;
	double end = deadline();

	while (pof2 * 2 <= p)
		pof2 *= 2;
	rem = p - pof2;
	st = scratch(w, (rem ? n : n / 2 + 1) * es, what);
	if (st)
		return st;
	vr = me < 2 * rem ? (me % 2 ? me / 2 : -1) : me - rem;
	if (me < 2 * rem) {
		st = me % 2 ? exchange(NULL, 0, -1, w->scratch, n, me - 1, dt,
				       end, what)
			    : exchange(data, n, me + 1, NULL, 0, -1, dt, end,
				       what);
		if (st)
			return st;
		if (me % 2) {
			err = MPI_Reduce_local(w->scratch, data, (int)n, dt,
					       op);
			if (err != MPI_SUCCESS)
				return mpi_fail(err, what);
		}
	}
	lo = 0;
	hi = pof2;
	for (int mask = pof2 / 2; vr >= 0 && mask > 0; mask /= 2) {
		int vpeer = vr ^ mask, mid = lo + (hi - lo) / 2;
		int peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;
		bool low = !(vr & mask);
		size_t koff, klen, soff, slen;

		chunks(n, pof2, low ? lo : mid, low ? mid : hi, &koff, &klen);
		chunks(n, pof2, low ? mid : lo, low ? hi : mid, &soff, &slen);
		st = exchange(data + soff * es, slen, peer, w->scratch, klen,
			      peer, dt, end, what);
		if (st)
			return st;
		if (klen) {
			err = MPI_Reduce_local(w->scratch, data + koff * es,
					       (int)klen, dt, op);
			if (err != MPI_SUCCESS)
				return mpi_fail(err, what);
		}
		if (low)
			hi = mid;
		else
			lo = mid;
	}
	for (int mask = 1; vr >= 0 && mask < pof2; mask *= 2) {
		int vpeer = vr ^ mask;
		int peer = vpeer < rem ? vpeer * 2 + 1 : vpeer + rem;
		int plo = vpeer / mask * mask;
		size_t moff, mlen, poff, plen;

		chunks(n, pof2, lo, lo + mask, &moff, &mlen);
		chunks(n, pof2, plo, plo + mask, &poff, &plen);
		st = exchange(data + moff * es, mlen, peer, data + poff * es,
			      plen, peer, dt, end, what);
		if (st)
			return st;
		lo = lo < plo ? lo : plo;
	}
	return st ? st : unfold(data, n, me, rem, dt, end, what);
}

/* Both allreduces: checked arguments, then MPI in pieces (MPI counts are
 * ints), each piece waited for with the deadline or, with bare, in a
 * plain blocking MPI_Allreduce. */
static int allreduce(void *data, size_t n, enum loom_type type, bool bare)
{
	const char *what = bare ? "world_allreduce_bare" : "world_allreduce";
	MPI_Datatype dt = MPI_DATATYPE_NULL;
	MPI_Op op = MPI_OP_NULL;
	enum mpi_algo algo = mpi_world.algo;
	size_t es = 0;
	bool costly;
	int st = usable(what);

	if (st)
		return st;
	st = reduce_type(type, what, &dt, &op, &es);
	if (st)
		return st;
	costly = op != MPI_SUM;
	if (n && !data)
		return loom_error_set(LOOM_E_INVAL, "%s: no data", what);
	for (size_t off = 0; off < n;) {
		size_t k = n - off < (size_t)INT_MAX ? n - off
						      : (size_t)INT_MAX;
		void *p = (char *)data + off * es;
		MPI_Request req;
		int err;

		if (bare) {
			err = MPI_Allreduce(MPI_IN_PLACE, p, (int)k, dt, op,
					    mpi_world.comm);
			if (err != MPI_SUCCESS)
				return mpi_fail(err, what);
		} else if (mpi_world.n_ranks > 1 &&
			   (algo == MPI_ALGO_HALVING ||
			    (algo == MPI_ALGO_AUTO && mpi_world.n_ranks > 2 &&
			     k * es >= split_min_bytes(mpi_world.n_ranks,
						       costly)))) {
			st = halving(p, k, dt, op, es, what);
			if (st)
				return st;
		} else if (mpi_world.n_ranks > 1 &&
			   (algo == MPI_ALGO_RING ||
			    (algo == MPI_ALGO_AUTO && mpi_world.n_ranks == 2 &&
			     k * es >= split_min_bytes(mpi_world.n_ranks,
						       costly)))) {
			st = ring(p, k, dt, op, es, what);
			if (st)
				return st;
		} else if (mpi_world.n_ranks > 1 && algo != MPI_ALGO_MPI) {
			st = doubling(p, k, dt, op, es, what);
			if (st)
				return st;
		} else {
			err = MPI_Iallreduce(MPI_IN_PLACE, p, (int)k, dt, op,
					     mpi_world.comm, &req);
			if (err != MPI_SUCCESS)
				return mpi_fail(err, what);
			st = wait_all(1, &req, deadline(), what, NULL);
			if (st)
				return st;
		}
		off += k;
	}
	return LOOM_OK;
}

int mpi_world_allreduce(loom_reg_t *reg, void *data, size_t n,
			enum loom_type type)
{
	return allreduce(data, n, type, false);
}

int mpi_world_allreduce_bare(loom_reg_t *reg, void *data, size_t n,
			     enum loom_type type)
{
	return allreduce(data, n, type, true);
}

int mpi_world_bcast(loom_reg_t *reg, void *data, size_t size, int root)
{
	int st = usable("world_bcast");

	if (st)
		return st;
	if (root < 0 || root >= mpi_world.n_ranks)
		return loom_error_set(LOOM_E_INVAL, "world_bcast: root %d is "
				      "not a rank (0..%d)", root,
				      mpi_world.n_ranks - 1);
	if (size && !data)
		return loom_error_set(LOOM_E_INVAL, "world_bcast: no data");
	for (size_t off = 0; off < size;) {
		size_t k = size - off < (size_t)INT_MAX ? size - off :
							  (size_t)INT_MAX;
		MPI_Request req;
		int err = MPI_Ibcast((char *)data + off, (int)k, MPI_BYTE,
				     root, mpi_world.comm, &req);

		if (err != MPI_SUCCESS)
			return mpi_fail(err, "world_bcast");
		st = wait_all(1, &req, deadline(), "world_bcast", NULL);
		if (st)
			return st;
		off += k;
	}
	return LOOM_OK;
}

/* world_gather to every rank past what MPI's int counts and offsets
 * reach: one broadcast per rank. */
static int gather_by_bcast(const void *mine, char *all, const size_t *sizes)
{
	size_t off = 0;
	int st = LOOM_OK;

	for (int r = 0; r < mpi_world.n_ranks && !st; r++) {
		if (r == mpi_world.rank && all + off != mine)
			memcpy(all + off, mine, sizes[r]);
		st = mpi_world_bcast(NULL, all + off, sizes[r], r);
		off += sizes[r];
	}
	return st;
}

/* One MPI_Igatherv to root, or MPI_Iallgatherv to all (root -1), of
 * bytes; every rank checks the same sizes alike, so that all of them
 * fail or none does. */
int mpi_world_gather(loom_reg_t *reg, const void *mine, void *all,
		     const size_t *sizes, int root)
{
	struct mpi_world *w = &mpi_world;
	const char *what = "world_gather";
	int p = w->n_ranks, err, st = usable(what), *cnt, *off;
	bool fits = true, recv;
	size_t total = 0;
	const void *send;
	MPI_Request req;

	if (st)
		return st;
	if (!sizes)
		return loom_error_set(LOOM_E_INVAL, "%s: no sizes", what);
	if (root < -1 || root >= p)
		return loom_error_set(LOOM_E_INVAL, "%s: root %d is not a "
				      "rank (0..%d) or -1 (all)", what, root,
				      p - 1);
	for (int r = 0; r < p; r++) {
		if (sizes[r] > (size_t)INT_MAX - total)
			fits = false;
		total += sizes[r];
		if (total < sizes[r] || total > (size_t)PTRDIFF_MAX)
			return loom_error_set(LOOM_E_INVAL, "%s: the sizes "
					      "overflow", what);
	}
	recv = root < 0 || root == w->rank;
	if ((sizes[w->rank] && !mine) || (total && recv && !all))
		return loom_error_set(LOOM_E_INVAL, "%s: no data", what);
	if (!fits && root >= 0)
		return loom_error_set(LOOM_E_UNSUPPORTED, "%s: %zu bytes to "
				      "rank %d: more than MPI's int counts "
				      "reach (gather to all ranks instead)",
				      what, total, root);
	if (!fits)
		return gather_by_bcast(mine, all, sizes);
	cnt = malloc(2 * (size_t)p * sizeof(*cnt));
	if (!cnt)
		return loom_error_set(LOOM_E_NOMEM, "%s: no memory", what);
	off = cnt + p;
	total = 0;
	for (int r = 0; r < p; r++) {
		cnt[r] = (int)sizes[r];
		off[r] = (int)total;
		total += sizes[r];
	}
	send = recv && mine == (char *)all + off[w->rank] ? MPI_IN_PLACE
							  : mine;
	if (root < 0)
		err = MPI_Iallgatherv(send, cnt[w->rank], MPI_BYTE, all, cnt,
				      off, MPI_BYTE, w->comm, &req);
	else
		err = MPI_Igatherv(send, cnt[w->rank], MPI_BYTE, all, cnt,
				   off, MPI_BYTE, root, w->comm, &req);
	/* MPI reads the counts and offsets until the request completes. */
	if (err != MPI_SUCCESS) {
		free(cnt);
		return mpi_fail(err, what);
	}
	st = wait_all(1, &req, deadline(), what, NULL);
	if (!w->broken)
		free(cnt);
	return st;
}

int mpi_world_barrier(loom_reg_t *reg)
{
	MPI_Request req;
	int err, st = usable("world_barrier");

	if (st)
		return st;
	err = MPI_Ibarrier(mpi_world.comm, &req);
	if (err != MPI_SUCCESS)
		return mpi_fail(err, "world_barrier");
	return wait_all(1, &req, deadline(), "world_barrier", NULL);
}
