/* SPDX-License-Identifier: MIT */
/* mpi-app.c - run by tests/test-mpi.sh under mpirun -np 2: an application
 * that starts MPI itself (its MPI_COMM_WORLD keeps MPI's fatal error
 * handler), then asks the mpi plugin for allreduces of different sizes on
 * its two ranks.  Each rank must get a Loom error naming itself, not have
 * the job ended by MPI, and find its own error handler as it left it.
 * Prints "app rank R: ok: MESSAGE" per rank.  The rank told first that
 * the sizes differ waits for the other to give up (LOOM_MPI_TIMEOUT,
 * 2 s unless set) before it exits.
 */
#include <mpi.h>

#include <loom/loom-plugin.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void)
{
	loom_world_allreduce_fn allreduce;
	MPI_Errhandler eh;
	char want[32];
	float v[8] = { 0 };
	int provided, rank = -1, st, ok;
	loom_reg_t *reg;
	const char *p = getenv("LOOM_TEST_PLUGIN_PATH");

	MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (p)
		setenv("LOOM_PLUGIN_PATH", p, 1);
	setenv("LOOM_BACKENDS", "mpi", 1);
	loom_load_all();
	reg = loom_reg_by_name("mpi");
	if (!reg) {
		printf("app rank %d: FAIL: no mpi plugin: %s\n", rank,
		       loom_error_message());
		return 1;
	}
	*(void **)&allreduce = loom_reg_proc_address(
		reg, LOOM_PROC_WORLD_ALLREDUCE);
	/* Rank 0 sums 4 values, rank 1 8: the ranks disagree. */
	st = allreduce(reg, v, 4 + 4 * (size_t)rank, LOOM_TYPE_F32);
	snprintf(want, sizeof(want), "rank %d of 2", rank);
	MPI_Comm_get_errhandler(MPI_COMM_WORLD, &eh);
	ok = st == LOOM_E_IO && strstr(loom_error_message(), want) &&
	     eh == MPI_ERRORS_ARE_FATAL;
	printf("app rank %d: %s: %s\n", rank, ok ? "ok" : "FAIL",
	       loom_error_message());
	fflush(stdout);
	if (st == LOOM_E_IO && !strstr(loom_error_message(), "waited")) {
		const char *t = getenv("LOOM_MPI_TIMEOUT");

		sleep((unsigned)(t ? atoi(t) : 2) + 3);
	}
	/* The world is gone: no MPI_Finalize, which would wait for it. */
	_Exit(ok ? 0 : 1);
}
