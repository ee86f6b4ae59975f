/* SPDX-License-Identifier: MIT */
/* mpi-plugin.c - the mpi plugin's descriptor and registry entry: applicable
 * only under an MPI launcher, it joins MPI as the application left it
 * (initialising it only when nobody did), checks that MPI sees the ranks
 * the launcher started, and offers the world through named entry points.
 * It has no devices.  The collectives live in mpi-coll.c.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi-private.h"

struct mpi_world mpi_world;

/* The number of ranks the launcher says it started, or 0 when no known
 * launcher started this process (Open MPI, MPICH/Hydra and PMI-2, PMIx,
 * Slurm). */
static int launcher_size(void)
{
	static const char *const vars[] = {
		"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
		"SLURM_NTASKS", "MPI_LOCALNRANKS",
	};

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i]);
		char *end;
		long n;

		if (!v || !*v)
			continue;
		n = strtol(v, &end, 10);
		if (*end == '\0' && n > 0 && n < (1L << 24))
			return (int)n;
	}
	/* PMIx sets its rank before (or without) a size. */
	return getenv("PMIX_RANK") ? -1 : 0;
}

static int mpi_score(const char **why)
{
	if (launcher_size() == 0) {
		*why = "not started by an MPI launcher";
		return 0;
	}
	return 1;
}

int mpi_fail(int err, const char *what)
{
	char msg[MPI_MAX_ERROR_STRING];
	int len = 0, cls = MPI_ERR_OTHER;

	if (MPI_Error_string(err, msg, &len) != MPI_SUCCESS)
		snprintf(msg, sizeof(msg), "MPI error %d", err);
	MPI_Error_class(err, &cls);
	/* A request of a collective that failed: most often the ranks'
	 * collectives differ in size (Open MPI says "truncated", or only
	 * that a request's status holds an error). */
	return loom_error_set(LOOM_E_IO, "mpi: %s: rank %d of %d: %s%s", what,
			      mpi_world.rank, mpi_world.n_ranks, msg,
			      cls == MPI_ERR_TRUNCATE ||
					      cls == MPI_ERR_IN_STATUS ?
				      " (do the ranks' collectives differ in "
				      "size? every rank must run the same "
				      "model with the same arguments)" : "");
}

static const char *reg_name(loom_reg_t *reg)
{
	return "mpi";
}

static size_t reg_dev_count(loom_reg_t *reg)
{
	return 0;
}

static loom_dev_t *reg_dev(loom_reg_t *reg, size_t i)
{
	return NULL;
}

static int world_info(loom_reg_t *reg, struct loom_world *out)
{
	struct loom_world w = {
		.size = sizeof(w),
		.rank = mpi_world.rank,
		.n_ranks = mpi_world.n_ranks,
		.local_rank = mpi_world.local_rank,
		.n_local = mpi_world.n_local,
	};
	size_t n;

	if (!out || out->size < sizeof(uint32_t))
		return loom_error_set(LOOM_E_INVAL, "world: no output, or "
				      "its size is not set");
	/* Copy what both sides know, keeping the caller's size. */
	n = out->size < sizeof(w) ? out->size : sizeof(w);
	memcpy((char *)out + sizeof(uint32_t), (char *)&w + sizeof(uint32_t),
	       n - sizeof(uint32_t));
	return LOOM_OK;
}

static void *reg_proc_address(loom_reg_t *reg, const char *name)
{
	if (!strcmp(name, LOOM_PROC_WORLD))
		return (void *)(loom_world_fn)world_info;
	if (!strcmp(name, LOOM_PROC_WORLD_ALLREDUCE))
		return (void *)(loom_world_allreduce_fn)mpi_world_allreduce;
	if (!strcmp(name, LOOM_PROC_WORLD_ALLREDUCE_BARE))
		return (void *)(loom_world_allreduce_fn)
			mpi_world_allreduce_bare;
	if (!strcmp(name, LOOM_PROC_WORLD_BCAST))
		return (void *)(loom_world_bcast_fn)mpi_world_bcast;
	if (!strcmp(name, LOOM_PROC_WORLD_GATHER))
		return (void *)(loom_world_gather_fn)mpi_world_gather;
	if (!strcmp(name, LOOM_PROC_WORLD_BARRIER))
		return (void *)(loom_world_barrier_fn)mpi_world_barrier;
	return NULL;
}

/* Leaves MPI as it was found: finalised only when this plugin started it
 * and nobody finalised it since. */
static void world_free(struct mpi_world *w)
{
	int finalized = 0;

	MPI_Finalized(&finalized);
	if (w->broken) {
		/* A collective is still pending with a rank that is gone:
		 * freeing or finalising could wait for it forever. */
		loom_log(LOOM_LOG_WARN, "mpi: a collective failed; MPI is "
			 "left as it is (not finalised)");
	} else if (!finalized) {
		mpi_coll_free(w);
		if (w->local != MPI_COMM_NULL)
			MPI_Comm_free(&w->local);
		if (w->comm != MPI_COMM_NULL)
			MPI_Comm_free(&w->comm);
		if (w->we_initialized)
			MPI_Finalize();
		/* When broken, a receive may still be posted into it. */
		free(w->scratch);
	}
	memset(w, 0, sizeof(*w));
	w->comm = w->local = MPI_COMM_NULL;
	w->bf16_sum = MPI_OP_NULL;
}

static void reg_free(loom_reg_t *reg)
{
	world_free(&mpi_world);
}

static const struct loom_reg_iface reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = reg_name,
	.get_dev_count = reg_dev_count,
	.get_dev = reg_dev,
	.get_proc_address = reg_proc_address,
	.free = reg_free,
};

static double timeout_from_env(void)
{
	const char *v = loom_env_get("LOOM_MPI_TIMEOUT");
	char *end;
	double t;

	if (!v)
		return 300;
	t = strtod(v, &end);
	if (*end || !(t > 0) || t > 1e7) {
		loom_log(LOOM_LOG_WARN, "mpi: LOOM_MPI_TIMEOUT=%s is not a "
			 "number of seconds; using 300", v);
		return 300;
	}
	return t;
}

/* LOOM_MPI_ALLREDUCE: auto (by size and rank count), doubling, ring,
 * halving or mpi (the library's MPI_Iallreduce); read once, alike on every rank
 * (the launcher passes one environment to all). */
static enum mpi_algo algo_from_env(void)
{
	static const char *const names[] = { "auto", "doubling", "ring",
					     "mpi", "halving" };
	const char *v = loom_env_get("LOOM_MPI_ALLREDUCE");

	if (!v)
		return MPI_ALGO_AUTO;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(v, names[i]))
			return (enum mpi_algo)i;
	loom_log(LOOM_LOG_WARN, "mpi: LOOM_MPI_ALLREDUCE=%s is none of auto, "
		 "doubling, ring, halving, mpi; using auto", v);
	return MPI_ALGO_AUTO;
}

/* LOOM_MPI_SPIN_US: how long a wait polls before it yields the core,
 * default 1 ms.  Yielding at once where the host's ranks outnumber its
 * cores (as Open MPI does there) measured worse on this 2-core machine:
 * 4 ranks, F32 16 KiB-1 MiB, 1.2-2.8 times a bare MPI_Allreduce against
 * 0.7-1.05 with the hold; 8 ranks 1.05-4.0 against 0.7-1.5 (medians).
 * The hold ends after 1 ms, so a wait never keeps the core from a rank
 * that is late. */
static double hold_from_env(void)
{
	const char *v = loom_env_get("LOOM_MPI_SPIN_US");
	char *end;
	double us;

	if (!v)
		return 1e-3;
	us = strtod(v, &end);
	if (*end || !(us >= 0) || us > 1e7) {
		loom_log(LOOM_LOG_WARN, "mpi: LOOM_MPI_SPIN_US=%s is not a "
			 "number of microseconds; using 1000", v);
		return 1e-3;
	}
	return us * 1e-6;
}

static int mpi_init(loom_reg_t **out)
{
	struct mpi_world *w = &mpi_world;
	int inited = 0, finalized = 0, provided, err, want;
	int status;

	memset(w, 0, sizeof(*w));
	w->comm = w->local = MPI_COMM_NULL;
	w->bf16_sum = MPI_OP_NULL;
	MPI_Finalized(&finalized);
	if (finalized)
		return loom_error_set(LOOM_E_STATE, "mpi: MPI was already "
				      "finalised by the application");
	MPI_Initialized(&inited);
	if (!inited) {
		err = MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED,
				      &provided);
		if (err != MPI_SUCCESS)
			return mpi_fail(err, "cannot initialise MPI");
		w->we_initialized = true;
	}
	/* MPI is ours: its errors come back to us as statuses (Open MPI
	 * raises a non-blocking collective's on MPI_COMM_WORLD). */
	if (w->we_initialized)
		MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
	err = MPI_Comm_dup(MPI_COMM_WORLD, &w->comm);
	if (err != MPI_SUCCESS) {
		status = mpi_fail(err, "cannot duplicate MPI_COMM_WORLD");
		goto err_free;
	}
	MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
	MPI_Comm_rank(w->comm, &w->rank);
	MPI_Comm_size(w->comm, &w->n_ranks);
	want = launcher_size();
	if (want > 0 && want != w->n_ranks) {
		status = loom_error_set(LOOM_E_STATE, "mpi: the launcher "
					"started %d ranks but MPI sees %d (a "
					"plugin built for one MPI launched by "
					"another?)", want, w->n_ranks);
		goto err_free;
	}
	err = MPI_Comm_split_type(w->comm, MPI_COMM_TYPE_SHARED, w->rank,
				  MPI_INFO_NULL, &w->local);
	if (err != MPI_SUCCESS) {
		status = mpi_fail(err, "cannot find the ranks of this host");
		goto err_free;
	}
	MPI_Comm_set_errhandler(w->local, MPI_ERRORS_RETURN);
	MPI_Comm_rank(w->local, &w->local_rank);
	MPI_Comm_size(w->local, &w->n_local);
	w->timeout_s = timeout_from_env();
	w->hold_s = hold_from_env();
	w->algo = algo_from_env();
	status = mpi_coll_init(w);
	if (status)
		goto err_free;
	status = loom_reg_new(&reg_iface, w, out);
	if (status)
		goto err_free;
	loom_log(LOOM_LOG_INFO, "mpi: rank %d of %d (%d of %d on this host;"
		 " waits poll %.0f us before yielding)", w->rank, w->n_ranks,
		 w->local_rank, w->n_local, w->hold_s * 1e6);
	return LOOM_OK;

err_free:
	world_free(w);
	return status;
}

LOOM_PLUGIN_DEFINE("mpi", PACKAGE_VERSION, mpi_init, mpi_score);
