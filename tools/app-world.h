/* SPDX-License-Identifier: MIT */
/* app-world.h - the world as loom-run and loom-bench model see it: this
 * process's rank in an MPI job (the mpi plugin), whether meta devices
 * span the ranks (LOOM_META_WORLD), and rank 0's decisions broadcast.
 */
#ifndef LOOM_TOOLS_APP_WORLD_H
#define LOOM_TOOLS_APP_WORLD_H

#include <stdbool.h>
#include <stddef.h>

#include <loom/loom-backend.h>

struct app_world {
	loom_reg_t *reg;    /* the mpi plugin; NULL: this process alone */
	int rank, n_ranks;  /* 0 of 1 alone */
	bool meta;          /* LOOM_META_WORLD: meta devices span the ranks */
	loom_world_bcast_fn bcast;
	loom_world_allreduce_fn allreduce;
};

/* Fills w after the plugins are loaded: the mpi plugin's world when it
 * runs (under mpirun), else rank 0 of 1. */
void app_world_open(struct app_world *w);

/* True on the rank that prints: rank 0. */
bool app_world_prints(const struct app_world *w);

/* Copies size bytes at data from rank 0 to every rank (nothing alone). */
int app_world_bcast(const struct app_world *w, void *data, size_t size);

/* Compares size bytes at mine, which every rank gives, with rank 0's:
 * *first is the first rank whose bytes differ, or -1, the same on every
 * rank (so that all of them stop together, before a collective of
 * another size fails).  Alone: -1. */
int app_world_same(const struct app_world *w, const void *mine, size_t size,
		   int *first);

#endif
