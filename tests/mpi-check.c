/* SPDX-License-Identifier: MIT */
/* mpi-check.c - run by tests/test-mpi.sh, under mpirun or not: checks the
 * mpi plugin's world and collectives on every rank against values each
 * rank can compute on its own.  Plain C (no GLib: several ranks print).
 *
 *   mpi-check world N [L]
 *                       under mpirun -np N (L ranks on each host):
 *                       rank, size, allreduce (F32, BF16, a large
 *                       buffer) and its bare reference, bcast, barrier,
 *                       refused arguments; rank 0 prints the total
 *   mpi-check outside   without a launcher: the plugin is not applicable
 *   mpi-check timeout   under mpirun -np 2 and LOOM_MPI_TIMEOUT=2: rank 1
 *                       joins late, rank 0's allreduce fails after the
 *                       timeout, naming rank 1
 *   mpi-check mismatch  with PMI_SIZE=3 and no launcher: MPI sees one
 *                       rank, so the plugin fails and says why
 */
#include <loom/loom-plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int fails;
static int rank;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fails++;                                             \
			fprintf(stderr, "rank %d: %s:%d: ", rank, __FILE__,  \
				__LINE__);                                   \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, " (%s)\n", loom_error_message());    \
		}                                                            \
	} while (0)

static int load(void)
{
	const char *p = getenv("LOOM_TEST_PLUGIN_PATH");

	if (p)
		setenv("LOOM_PLUGIN_PATH", p, 1);
	setenv("LOOM_BACKENDS", "mpi,cpu", 1);
	return loom_load_all();
}

/* The record of the mpi plugin, or -1. */
static int mpi_record(struct loom_plugin_info *pi)
{
	for (size_t i = 0; i < loom_plugin_count(); i++)
		if (loom_plugin_info(i, pi) == LOOM_OK &&
		    !strcmp(pi->name, "mpi"))
			return 0;
	return -1;
}

static int check_outside(void)
{
	struct loom_plugin_info pi;

	load();
	CHECK(mpi_record(&pi) == 0, "no record of the mpi plugin");
	CHECK(pi.state == LOOM_PLUGIN_NOT_APPLICABLE, "state %s",
	      loom_plugin_state_name(pi.state));
	CHECK(!strcmp(pi.reason, "not started by an MPI launcher"),
	      "reason '%s'", pi.reason);
	CHECK(loom_reg_by_name("mpi") == NULL, "a reg without a launcher");
	loom_unload_all();
	printf("outside: %s\n", fails ? "FAIL" : "ok");
	return fails != 0;
}

static int check_mismatch(void)
{
	struct loom_plugin_info pi;

	load();
	CHECK(mpi_record(&pi) == 0, "no record of the mpi plugin");
	CHECK(pi.state == LOOM_PLUGIN_FAILED, "state %s",
	      loom_plugin_state_name(pi.state));
	CHECK(strstr(pi.reason, "the launcher started 3 ranks but MPI sees "
			"1") != NULL, "reason '%s'", pi.reason);
	loom_unload_all();
	printf("mismatch: %s\n", fails ? "FAIL" : "ok");
	return fails != 0;
}

struct world_fns {
	loom_reg_t *reg;
	loom_world_fn world;
	loom_world_allreduce_fn allreduce;
	loom_world_allreduce_fn bare;
	loom_world_bcast_fn bcast;
	loom_world_barrier_fn barrier;
	loom_world_gather_fn gather;
};

static int open_world(struct world_fns *f)
{
	int st = load();

	f->reg = loom_reg_by_name("mpi");
	if (!f->reg) {
		fprintf(stderr, "no mpi plugin (load status %d: %s)\n", st,
			loom_error_message());
		return -1;
	}
	f->world = (loom_world_fn)loom_reg_proc_address(f->reg, "world");
	f->allreduce = (loom_world_allreduce_fn)loom_reg_proc_address(
		f->reg, "world_allreduce");
	f->bare = (loom_world_allreduce_fn)loom_reg_proc_address(
		f->reg, "world_allreduce_bare");
	f->bcast = (loom_world_bcast_fn)loom_reg_proc_address(f->reg,
							      "world_bcast");
	f->barrier = (loom_world_barrier_fn)loom_reg_proc_address(
		f->reg, "world_barrier");
	f->gather = (loom_world_gather_fn)loom_reg_proc_address(
		f->reg, "world_gather");
	if (!f->world || !f->allreduce || !f->bare || !f->bcast ||
	    !f->barrier || !f->gather) {
		fprintf(stderr, "mpi plugin lacks an entry point\n");
		return -1;
	}
	return 0;
}

/* A sum of MID values between the sizes: recursive doubling where the
 * ring does not pay yet (3 to 8 ranks), the ring over 2.  MID is odd. */
static void check_mid(const struct world_fns *f, const struct loom_world *w)
{
	enum { MID = (96 << 10) / 4 + 3 };
	float *m = malloc(sizeof(*m) * MID);

	CHECK(m != NULL, "no memory");
	if (!m)
		return;
	for (int i = 0; i < MID; i++)
		m[i] = (float)((i * 7 + w->rank) % 13) - 6.0f;
	CHECK(f->allreduce(f->reg, m, MID, LOOM_TYPE_F32) == LOOM_OK, "mid");
	for (int i = 0; i < MID; i++) {
		float s = 0;

		for (int r = 0; r < w->n_ranks; r++)
			s += (float)((i * 7 + r) % 13) - 6.0f;
		if (m[i] != s) {
			CHECK(0, "mid [%d] = %g, want %g", i, m[i], s);
			break;
		}
	}
	free(m);
}

/* world_gather: rank r gives r % 3 + 1 ints of 100 r + k (the middle
 * rank of 3 or more none), to every rank and then to the last one only;
 * a rank that is not the root keeps its buffer as it was. */
static void check_gather(const struct world_fns *f,
			 const struct loom_world *w)
{
	int p = w->n_ranks, mine[3], all[3 * 64], total = 0;
	size_t sizes[64];

	if (p > 64)
		return;
	for (int r = 0; r < p; r++) {
		int n = p >= 3 && r == p / 2 ? 0 : r % 3 + 1;

		sizes[r] = (size_t)n * sizeof(int);
		if (r == w->rank)
			for (int k = 0; k < n; k++)
				mine[k] = 100 * r + k;
		total += n;
	}
	for (int root = -1; root < p; root += p) {
		int at = 0;

		for (int i = 0; i < total; i++)
			all[i] = -7;
		CHECK(f->gather(f->reg, mine, all, sizes, root) == LOOM_OK,
		      "gather to %d", root);
		for (int r = 0; r < p; r++)
			for (int k = 0; k < (int)(sizes[r] / sizeof(int));
			     k++, at++) {
				int want = root < 0 || root == w->rank ?
						   100 * r + k : -7;

				if (all[at] != want) {
					CHECK(0, "gather to %d: [%d] = %d, "
					      "want %d", root, at, all[at],
					      want);
					return;
				}
			}
	}
	/* In place: this rank's ints already where they go. */
	for (int r = 0, at = 0; r < p; r++) {
		for (int k = 0; k < (int)(sizes[r] / sizeof(int)); k++)
			all[at + k] = r == w->rank ? 100 * r + k : -7;
		if (r == w->rank) {
			CHECK(f->gather(f->reg, all + at, all, sizes, -1) ==
				      LOOM_OK, "gather in place");
			break;
		}
		at += (int)(sizes[r] / sizeof(int));
	}
	for (int r = 0, at = 0; r < p; r++)
		for (int k = 0; k < (int)(sizes[r] / sizeof(int)); k++, at++)
			CHECK(all[at] == 100 * r + k, "in place: [%d] = %d",
			      at, all[at]);
	/* Refused before MPI sees them, on every rank alike. */
	CHECK(f->gather(f->reg, mine, all, sizes, p) == LOOM_E_INVAL,
	      "gather: bad root");
	CHECK(f->gather(f->reg, mine, all, sizes, -2) == LOOM_E_INVAL,
	      "gather: root -2");
	CHECK(f->gather(f->reg, mine, all, NULL, 0) == LOOM_E_INVAL,
	      "gather: no sizes");
	sizes[0] = SIZE_MAX;
	CHECK(f->gather(f->reg, mine, all, sizes, 0) == LOOM_E_INVAL,
	      "gather: sizes that overflow");
}

static int check_world(int want, int want_local)
{
	struct world_fns f;
	struct loom_world w = { .size = sizeof(w) };
	/* BIG is no multiple of 2, 3 or 4: uneven chunks. */
	enum { N = 1000, BIG = (3 << 20) + 5 };
	float v[N], *big;
	uint16_t h[N];
	int total;

	if (open_world(&f))
		return 1;
	CHECK(f.world(f.reg, &w) == LOOM_OK, "world");
	rank = w.rank;
	CHECK(w.n_ranks == want, "%d ranks, want %d", w.n_ranks, want);
	CHECK(w.rank >= 0 && w.rank < w.n_ranks, "rank %d", w.rank);
	CHECK(w.local_rank >= 0 && w.local_rank < w.n_local &&
	      w.n_local <= w.n_ranks, "local %d of %d", w.local_rank,
	      w.n_local);
	CHECK(want_local == 0 || w.n_local == want_local,
	      "%d ranks on this host, want %d", w.n_local, want_local);
	CHECK(loom_reg_dev_count(f.reg) == 0, "the mpi plugin has devices");

	/* F32: rank r gives r + 1 + i / 2; the sum is exact. */
	for (int i = 0; i < N; i++)
		v[i] = (float)(w.rank + 1) + (float)i * 0.5f;
	CHECK(f.allreduce(f.reg, v, N, LOOM_TYPE_F32) == LOOM_OK, "f32");
	for (int i = 0; i < N; i++) {
		float want_v = (float)(w.n_ranks * (w.n_ranks + 1) / 2) +
			       (float)w.n_ranks * (float)i * 0.5f;

		if (v[i] != want_v) {
			CHECK(0, "f32 [%d] = %g, want %g", i, v[i], want_v);
			break;
		}
	}
	/* Each rank's id once: the ranks are distinct and all there. */
	for (int i = 0; i < N; i++)
		v[i] = i == w.rank ? 1.0f : 0.0f;
	CHECK(f.allreduce(f.reg, v, N, LOOM_TYPE_F32) == LOOM_OK, "f32 ids");
	for (int i = 0; i < w.n_ranks && i < N; i++)
		CHECK(v[i] == 1.0f, "rank %d seen %g times", i, v[i]);

	/* BF16: small integers are exact. */
	for (int i = 0; i < N; i++)
		h[i] = loom_f32_to_bf16((float)(w.rank + i % 7));
	CHECK(f.allreduce(f.reg, h, N, LOOM_TYPE_BF16) == LOOM_OK, "bf16");
	for (int i = 0; i < N; i++) {
		float want_v = (float)(w.n_ranks * (w.n_ranks - 1) / 2 +
				       w.n_ranks * (i % 7));

		if (loom_bf16_to_f32(h[i]) != want_v) {
			CHECK(0, "bf16 [%d] = %g, want %g", i,
			      loom_bf16_to_f32(h[i]), want_v);
			break;
		}
	}
	/* The bare reference sums alike (F32 and BF16) and refuses alike. */
	for (int i = 0; i < N; i++)
		v[i] = (float)(w.rank * 3 + i % 11);
	CHECK(f.bare(f.reg, v, N, LOOM_TYPE_F32) == LOOM_OK, "bare f32");
	for (int i = 0; i < N; i++) {
		float want_v = (float)(3 * w.n_ranks * (w.n_ranks - 1) / 2 +
				       w.n_ranks * (i % 11));

		if (v[i] != want_v) {
			CHECK(0, "bare f32 [%d] = %g, want %g", i, v[i],
			      want_v);
			break;
		}
	}
	for (int i = 0; i < N; i++)
		h[i] = loom_f32_to_bf16((float)(w.rank + i % 5));
	CHECK(f.bare(f.reg, h, N, LOOM_TYPE_BF16) == LOOM_OK, "bare bf16");
	for (int i = 0; i < N; i++) {
		float want_v = (float)(w.n_ranks * (w.n_ranks - 1) / 2 +
				       w.n_ranks * (i % 5));

		if (loom_bf16_to_f32(h[i]) != want_v) {
			CHECK(0, "bare bf16 [%d] = %g, want %g", i,
			      loom_bf16_to_f32(h[i]), want_v);
			break;
		}
	}
	CHECK(f.bare(f.reg, NULL, 4, LOOM_TYPE_F32) == LOOM_E_INVAL,
	      "bare: no data");
	CHECK(f.bare(f.reg, v, 4, LOOM_TYPE_I32) == LOOM_E_UNSUPPORTED,
	      "bare: i32");
	CHECK(strstr(loom_error_message(), "world_allreduce_bare: type") !=
	      NULL, "bare names itself");

	/* A large buffer (12 MiB, the world's own ring; the 4 KiB ones
	 * above are MPI's). */
	big = malloc(sizeof(*big) * BIG);
	for (int i = 0; i < BIG; i++)
		big[i] = (float)((i + w.rank) % 5);
	CHECK(f.allreduce(f.reg, big, BIG, LOOM_TYPE_F32) == LOOM_OK, "big");
	for (int i = 0; i < BIG; i += 997) {
		float s = 0;

		for (int r = 0; r < w.n_ranks; r++)
			s += (float)((i + r) % 5);
		if (big[i] != s) {
			CHECK(0, "big [%d] = %g, want %g", i, big[i], s);
			break;
		}
	}
	free(big);
	check_mid(&f, &w);
	check_gather(&f, &w);

	/* bcast from the last rank. */
	for (int i = 0; i < N; i++)
		v[i] = w.rank == w.n_ranks - 1 ? (float)(i * 3) : -1.0f;
	CHECK(f.bcast(f.reg, v, sizeof(v), w.n_ranks - 1) == LOOM_OK, "bcast");
	for (int i = 0; i < N; i++)
		if (v[i] != (float)(i * 3)) {
			CHECK(0, "bcast [%d] = %g", i, v[i]);
			break;
		}
	CHECK(f.barrier(f.reg) == LOOM_OK, "barrier");

	/* Refused before MPI sees them, on every rank alike. */
	CHECK(f.bcast(f.reg, v, 4, w.n_ranks) == LOOM_E_INVAL, "bad root");
	CHECK(f.bcast(f.reg, v, 4, -1) == LOOM_E_INVAL, "negative root");
	CHECK(f.allreduce(f.reg, NULL, 4, LOOM_TYPE_F32) == LOOM_E_INVAL,
	      "no data");
	CHECK(f.allreduce(f.reg, v, 4, LOOM_TYPE_I32) == LOOM_E_UNSUPPORTED,
	      "i32");
	CHECK(f.world(f.reg, NULL) == LOOM_E_INVAL, "world NULL");

	/* Every rank's verdict, summed. */
	v[0] = (float)fails;
	total = f.allreduce(f.reg, v, 1, LOOM_TYPE_F32) == LOOM_OK ?
			(int)v[0] : -1;
	if (w.rank == 0)
		printf("world of %d: %s\n", w.n_ranks,
		       total == 0 ? "ok" : "FAIL");
	loom_unload_all();
	return total != 0;
}

static int check_timeout(void)
{
	struct world_fns f;
	struct loom_world w = { .size = sizeof(w) };
	float v[4] = { 1, 2, 3, 4 };
	int st;

	if (open_world(&f))
		return 1;
	f.world(f.reg, &w);
	rank = w.rank;
	if (w.rank == 1) {
		/* Late: rank 0 gives up first, then this rank joins. */
		sleep(4);
		f.allreduce(f.reg, v, 4, LOOM_TYPE_F32);
		loom_unload_all();
		return 0;
	}
	st = f.allreduce(f.reg, v, 4, LOOM_TYPE_F32);
	CHECK(st == LOOM_E_IO, "a late rank: status %d", st);
	CHECK(strstr(loom_error_message(), "waited 2 s for rank 1 (it died "
		     "or is stuck)") != NULL, "the message names rank 1");
	CHECK(f.barrier(f.reg) == LOOM_E_STATE, "the world is gone");
	printf("timeout: %s: %s\n", fails ? "FAIL" : "ok",
	       loom_error_message());
	loom_unload_all();
	return fails != 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && !strcmp(argv[1], "world"))
		return check_world(atoi(argv[2]),
				   argc >= 4 ? atoi(argv[3]) : 0);
	if (argc >= 2 && !strcmp(argv[1], "outside"))
		return check_outside();
	if (argc >= 2 && !strcmp(argv[1], "timeout"))
		return check_timeout();
	if (argc >= 2 && !strcmp(argv[1], "mismatch"))
		return check_mismatch();
	fprintf(stderr, "usage: mpi-check world N [L] | outside | timeout | "
		"mismatch\n");
	return 2;
}
