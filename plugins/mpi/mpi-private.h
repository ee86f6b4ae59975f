/* SPDX-License-Identifier: MIT */
/* mpi-private.h - what the mpi plugin's two files share: the world (its
 * duplicated communicator and state) and the collectives' entry points.
 */
#ifndef LOOM_MPI_PRIVATE_H
#define LOOM_MPI_PRIVATE_H

#include <stdbool.h>

#include <mpi.h>

#include <loom/loom-plugin.h>

/* How world_allreduce sums (LOOM_MPI_ALLREDUCE): by size and rank count,
 * or always one way (to measure where each pays). */
enum mpi_algo {
	MPI_ALGO_AUTO,
	MPI_ALGO_DOUBLING, /* recursive doubling: log2(p) whole exchanges */
	MPI_ALGO_RING,     /* reduce-scatter and allgather: 2(p-1) steps */
	MPI_ALGO_MPI,      /* the MPI library's MPI_Iallreduce */
	MPI_ALGO_HALVING,  /* reduce-scatter by recursive halving, allgather
			    * by recursive doubling: 2 log2(p) steps */
};

struct mpi_world {
	MPI_Comm comm;        /* our duplicate of MPI_COMM_WORLD */
	MPI_Comm local;       /* the ranks sharing this host */
	MPI_Op bf16_sum;      /* MPI has no BF16: a sum over uint16 pairs */
	int rank, n_ranks, local_rank, n_local;
	bool we_initialized;  /* MPI_Init_thread was ours to call */
	bool broken;          /* a collective timed out: the world is gone */
	double timeout_s;     /* LOOM_MPI_TIMEOUT */
	double hold_s;        /* LOOM_MPI_SPIN_US: polls before yielding */
	enum mpi_algo algo;   /* LOOM_MPI_ALLREDUCE */
	void *scratch;        /* what an allreduce step receives */
	size_t scratch_bytes;
};

extern struct mpi_world mpi_world;

/* Records MPI's message for err, naming this rank (and, for a failed
 * request, that the ranks may disagree), and returns LOOM_E_IO. */
int mpi_fail(int err, const char *what);

/* mpi-coll.c */
int mpi_coll_init(struct mpi_world *w);
void mpi_coll_free(struct mpi_world *w);
int mpi_world_allreduce(loom_reg_t *reg, void *data, size_t n,
			enum loom_type type);
int mpi_world_allreduce_bare(loom_reg_t *reg, void *data, size_t n,
			     enum loom_type type);
int mpi_world_bcast(loom_reg_t *reg, void *data, size_t size, int root);
int mpi_world_gather(loom_reg_t *reg, const void *mine, void *all,
		     const size_t *sizes, int root);
int mpi_world_barrier(loom_reg_t *reg);

#endif /* LOOM_MPI_PRIVATE_H */
