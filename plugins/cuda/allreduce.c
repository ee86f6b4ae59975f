/* SPDX-License-Identifier: MIT */
/* allreduce.c - the "allreduce", "allreduce_world" and
 * "allreduce_world_prepare" entry points over NCCL (RCCL for HIP):
 * communicators per device group, cached (a local group's made on first
 * use; a world group's over every rank's devices when the meta device is
 * made, its id sent from world rank 0 through the world's "world_bcast",
 * without blocking and given up, aborted, after LOOM_MPI_TIMEOUT seconds,
 * as is a collective over the world that does not end), and the rules for what
 * the collective declines.  LOOM_CUDA_ALLREDUCE=none, read once per
 * process, makes it decline everything (=nccl, or unset, uses NCCL).
 * Each call leaves the calling thread's current device as it found it.
 * Without NCCL only the cleanup hook is built and the entry points are
 * not offered.
 */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda-plugin.h"

#ifdef LOOM_HAVE_NCCL

/* Communicators that never block the host (ncclConfig_t.blocking = 0):
 * their init and collectives are waited for with a deadline and aborted
 * past it.  Older NCCLs block, and a dead rank hangs the others there. */
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= NCCL_VERSION(2, 14, 0)
#define NCCL_NONBLOCKING 1
#define NCCL_BUSY ncclInProgress
#else
#define NCCL_NONBLOCKING 0
#define NCCL_BUSY ((ncclResult_t)-1) /* never returned */
#endif

/* What the environment says, read once per process: whether NCCL serves
 * (LOOM_CUDA_ALLREDUCE), and how long a world collective may wait
 * (LOOM_MPI_TIMEOUT, as the world's own collectives). */
static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static bool env_nccl;
static double env_timeout_s;

static void env_read(void)
{
	const char *mode = loom_env_get("LOOM_CUDA_ALLREDUCE");
	const char *t = loom_env_get("LOOM_MPI_TIMEOUT");
	char *end = NULL;

	env_nccl = !mode || !strcmp(mode, "nccl");
	if (mode && !env_nccl && strcmp(mode, "none"))
		loom_log(LOOM_LOG_WARN, "%s: LOOM_CUDA_ALLREDUCE=%s is neither "
			 "nccl nor none; NCCL is off", LOOM_GPU_NAME, mode);
	env_timeout_s = t ? strtod(t, &end) : 300;
	if (t && (*end || !(env_timeout_s > 0) || env_timeout_s > 1e7))
		env_timeout_s = 300;
}

bool cuda_nccl_enabled(void)
{
	pthread_once(&env_once, env_read);
	return env_nccl;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The calling thread's current device, to put back with device_restore:
 * a call that moves between GPUs leaves the application's as it was. */
static int device_save(void)
{
	int dev = -1;

	if (cudaGetDevice(&dev) != cudaSuccess) {
		(void)cudaGetLastError();
		dev = -1;
	}
	return dev;
}

static void device_restore(int dev)
{
	if (dev >= 0 && cudaSetDevice(dev) != cudaSuccess)
		(void)cudaGetLastError();
}

/* The communicators of one ordered group of devices: comms[i] is rank i,
 * on device ids[i]; in a world group (key not 0) rank first + i of every
 * rank's devices. */
struct cuda_comm_group {
	struct cuda_comm_group *next;
	int n;
	int *ids;
	ncclComm_t *comms;
	bool failed;  /* NCCL refused this group: every call declines */
	uint64_t key; /* the world group's, 0 for this process's devices */
};

static int nccl_error(ncclResult_t r, const char *what)
{
	return loom_error_set(LOOM_E_DEVICE, "%s: nccl: %s: %s", LOOM_GPU_NAME,
			      what, ncclGetErrorString(r));
}

static void group_free(struct cuda_comm_group *grp)
{
	/* A failed group's communicators were aborted and set to NULL. */
	for (int i = 0; i < grp->n; i++)
		if (grp->comms[i])
			ncclCommDestroy(grp->comms[i]);
	free(grp->comms);
	free(grp->ids);
	free(grp);
}

/* A group of these devices under key, its communicators not made yet
 * (NULL, which group_free skips); NULL without memory. */
static struct cuda_comm_group *group_new(const int *ids, int n,
					 uint64_t key)
{
	struct cuda_comm_group *grp = calloc(1, sizeof(*grp));

	if (!grp)
		return NULL;
	grp->ids = calloc(n, sizeof(*grp->ids));
	grp->comms = calloc(n, sizeof(*grp->comms));
	if (!grp->ids || !grp->comms) {
		group_free(grp);
		return NULL;
	}
	memcpy(grp->ids, ids, n * sizeof(*ids));
	grp->n = n;
	grp->key = key;
	return grp;
}

/* Finds the cached group of exactly these devices in this order, or makes
 * one with ncclCommInitAll.  A group NCCL refuses (no shared memory, a
 * driver it rejects, too little memory) is remembered as failed and the
 * allreduce declines for it, so the meta device falls back to its own
 * reduce instead of failing every step.  Called with reg->lock held. */
static int group_get(struct cuda_reg *reg, const int *ids, int n,
		     struct cuda_comm_group **out)
{
	struct cuda_comm_group *grp = NULL;
	ncclResult_t r;

	for (grp = reg->comm_groups; grp; grp = grp->next) {
		if (!grp->key && grp->n == n &&
		    !memcmp(grp->ids, ids, n * sizeof(*ids))) {
			*out = grp;
			return grp->failed ? LOOM_E_DECLINED : LOOM_OK;
		}
	}
	grp = group_new(ids, n, 0);
	if (!grp)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	r = ncclCommInitAll(grp->comms, n, grp->ids);
	if (r != ncclSuccess) {
		memset(grp->comms, 0, n * sizeof(*grp->comms));
		loom_log(LOOM_LOG_WARN, "%s: nccl: cannot create communicators "
			 "for %d devices (%s); the meta device's own reduce "
			 "runs instead", LOOM_GPU_NAME, n,
			 ncclGetErrorString(r));
		(void)cudaGetLastError();
		goto err_failed;
	}
	grp->next = reg->comm_groups;
	reg->comm_groups = grp;
	*out = grp;
	return LOOM_OK;

err_failed:
	grp->failed = true;
	grp->next = reg->comm_groups;
	reg->comm_groups = grp;
	*out = grp;
	return LOOM_E_DECLINED;
}

/* Aborts the n communicators (those made) and forgets them: NCCL's way
 * out of a collective or an init that will not end. */
static void comms_abort(ncclComm_t *comms, int n)
{
	for (int i = 0; i < n; i++)
		if (comms[i]) {
			(void)ncclCommAbort(comms[i]);
			comms[i] = NULL;
		}
}

/* Waits until none of the n communicators has work in progress (their
 * init, or the enqueueing of a collective, in non-blocking mode) and,
 * with events, until each event (recorded after a collective on the
 * device of comms[i]) has passed; until end, after which all of them are
 * aborted.  Polls, yielding the core, then naps of up to a millisecond. */
static int comms_wait(ncclComm_t *comms, const int *ids, int n,
		      cudaEvent_t *events, double end, const char *what)
{
	double start = now_s();

	for (;;) {
		bool busy = false;

		for (int i = 0; i < n; i++) {
			ncclResult_t e = ncclSuccess;
			ncclResult_t r = ncclCommGetAsyncError(comms[i], &e);

			if (r == ncclSuccess && e == NCCL_BUSY) {
				busy = true;
				continue;
			}
			if (r != ncclSuccess || e != ncclSuccess) {
				comms_abort(comms, n);
				return nccl_error(r != ncclSuccess ? r : e,
						  what);
			}
			if (events && events[i]) {
				cudaError_t ce;

				if (cudaSetDevice(ids[i]) != cudaSuccess)
					return loom_error_set(
						LOOM_E_DEVICE, "%s: nccl: %s: "
						"cannot select device %d",
						LOOM_GPU_NAME, what, ids[i]);
				ce = cudaEventQuery(events[i]);
				if (ce == cudaErrorNotReady) {
					busy = true;
				} else if (ce != cudaSuccess) {
					comms_abort(comms, n);
					return loom_error_set(
						LOOM_E_DEVICE, "%s: nccl: %s: "
						"%s", LOOM_GPU_NAME, what,
						cudaGetErrorString(ce));
				}
			}
		}
		if (!busy)
			return LOOM_OK;
		if (now_s() > end) {
			comms_abort(comms, n);
			return loom_error_set(LOOM_E_IO, "%s: nccl: %s: not "
					      "done after %.0f s "
					      "(LOOM_MPI_TIMEOUT): a rank "
					      "died or is stuck; the "
					      "communicators are aborted",
					      LOOM_GPU_NAME, what,
					      env_timeout_s);
		}
		if (now_s() - start < 0.05) {
			sched_yield();
		} else {
			struct timespec ts = { 0, 1000000 };

			nanosleep(&ts, NULL);
		}
	}
}

/* What world rank 0 sends the others: its id, or that it has none. */
struct world_id {
	int ok;
	ncclUniqueId id;
};

/* Makes the communicators of this process's devices in world group g:
 * world rank 0 makes the id, every rank gets it through the world, and
 * each initialises its devices' ranks of the one communicator over all
 * ranks' devices (inside a group, as NCCL wants for several devices of
 * one process).  Every rank calls this at the same collective. */
static int world_comms(const struct loom_world_group *g, const int *ids,
		       int n, ncclComm_t *comms)
{
	struct loom_world w = { .size = sizeof(w) };
	struct world_id msg;
	loom_world_fn info;
	loom_world_bcast_fn bcast;
	ncclResult_t r;
	int status;

	*(void **)&info = loom_reg_proc_address(g->world, LOOM_PROC_WORLD);
	*(void **)&bcast = loom_reg_proc_address(g->world,
						 LOOM_PROC_WORLD_BCAST);
	if (!info || !bcast)
		return loom_error_set(LOOM_E_UNSUPPORTED, "%s: nccl: plugin %s "
				      "has no world", LOOM_GPU_NAME,
				      loom_reg_name(g->world));
	status = info(g->world, &w);
	if (status)
		return status;
	memset(&msg, 0, sizeof(msg));
	if (w.rank == 0) {
		r = ncclGetUniqueId(&msg.id);
		msg.ok = r == ncclSuccess;
		if (r != ncclSuccess)
			loom_log(LOOM_LOG_WARN, "%s: nccl: no id: %s",
				 LOOM_GPU_NAME, ncclGetErrorString(r));
	}
	/* Rank 0 sends even without an id, so that no rank waits. */
	status = bcast(g->world, &msg, sizeof(msg), 0);
	if (status)
		return status;
	if (!msg.ok)
		return loom_error_set(LOOM_E_DEVICE, "%s: nccl: world rank 0 "
				      "could not make an NCCL id",
				      LOOM_GPU_NAME);
	r = ncclGroupStart();
	for (int i = 0; i < n && r == ncclSuccess; i++) {
#if NCCL_NONBLOCKING
		ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;

		cfg.blocking = 0;
#endif
		if (cudaSetDevice(ids[i]) != cudaSuccess) {
			r = ncclInvalidUsage;
			break;
		}
#if NCCL_NONBLOCKING
		r = ncclCommInitRankConfig(&comms[i], g->n_members, msg.id,
					   g->first + i, &cfg);
		if (r == NCCL_BUSY)
			r = ncclSuccess;
#else
		r = ncclCommInitRank(&comms[i], g->n_members, msg.id,
				     g->first + i);
#endif
	}
	if (r == ncclSuccess)
		r = ncclGroupEnd();
	else
		(void)ncclGroupEnd();
	if (r == NCCL_BUSY)
		r = ncclSuccess;
	if (r != ncclSuccess) {
		(void)cudaGetLastError();
		comms_abort(comms, n);
		return nccl_error(r, "communicator over the world");
	}
#if NCCL_NONBLOCKING
	/* Every rank's devices join, or the deadline aborts them. */
	return comms_wait(comms, ids, n, NULL, now_s() + env_timeout_s,
			  "communicator over the world");
#else
	return LOOM_OK;
#endif
}

/* The cached world group g of these devices, or a new one.  Unlike a
 * local group, one NCCL refuses is an error, not a decline: the other
 * ranks are already in the collective.  Called with reg->lock held. */
static int world_group_get(struct cuda_reg *reg,
			   const struct loom_world_group *g, const int *ids,
			   int n, struct cuda_comm_group **out)
{
	/* A key of 0 would read as a local group's. */
	uint64_t key = g->key ? g->key : 1;
	struct cuda_comm_group *grp;
	int status;

	for (grp = reg->comm_groups; grp; grp = grp->next) {
		if (grp->key == key && grp->n == n &&
		    !memcmp(grp->ids, ids, n * sizeof(*ids))) {
			*out = grp;
			return grp->failed ? loom_error_set(
				LOOM_E_DEVICE, "%s: nccl: the communicator "
				"over the world failed before",
				LOOM_GPU_NAME) : LOOM_OK;
		}
	}
	grp = group_new(ids, n, key);
	if (!grp)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	status = world_comms(g, ids, n, grp->comms);
	if (status) {
		comms_abort(grp->comms, n);
		grp->failed = true;
	}
	grp->next = reg->comm_groups;
	reg->comm_groups = grp;
	*out = grp;
	return status;
}

/* Says whether the call is one NCCL can serve: our backends on distinct
 * devices, F32 tensors of one shape, contiguous, in our device memory on
 * their backend's device. */
static bool accept(loom_backend_t *const *backends,
		   struct loom_tensor *const *tensors, size_t n,
		   struct cuda_reg **reg_out, int *ids)
{
	const struct loom_tensor *t0 = tensors[0];
	struct cuda_reg *reg = NULL;

	if (n > CUDA_MAX_DEVICES)
		return false;
	for (size_t i = 0; i < n; i++) {
		struct cuda_backend *be = loom_backend_context(backends[i]);
		const struct loom_tensor *t = tensors[i];
		struct cuda_buffer *cb;

		if (!be || !t || !cuda_backend_is_ours(backends[i]))
			return false;
		if (!reg)
			reg = be->dev->reg;
		if (t->type != LOOM_TYPE_F32 || !loom_tensor_is_contiguous(t) ||
		    !loom_tensor_same_shape(t, t0) ||
		    !cuda_tensor_on_device(reg, t))
			return false;
		cb = loom_buffer_context(t->buffer);
		if (cb->dev != be->dev)
			return false;
		ids[i] = be->dev->id;
		for (size_t j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return false; /* one GPU twice */
	}
	*reg_out = reg;
	return true;
}

static int reduce_type(const struct loom_allreduce_opts *opts)
{
	if (opts && opts->size >= offsetof(struct loom_allreduce_opts,
					   reduce_type) +
					  sizeof(opts->reduce_type))
		return opts->reduce_type;
	return LOOM_TYPE_F32;
}

/* Converts each tensor to (or from) BF16 in its backend's scratch. */
static int convert_all(loom_backend_t *const *backends,
		       struct loom_tensor *const *tensors, size_t n,
		       int64_t count, bool to_bf16)
{
	for (size_t i = 0; i < n; i++) {
		struct cuda_backend *be = loom_backend_context(backends[i]);
		uint16_t *tmp;
		int status = cuda_use_dev(be->dev);

		if (status)
			return status;
		tmp = cuda_scratch(be, CUDA_SCRATCH_REDUCE,
				   (size_t)count * sizeof(*tmp));
		if (!tmp)
			return LOOM_E_NOMEM;
		if (to_bf16)
			status = cuda_f32_to_bf16(be->stream,
						  tensors[i]->data, tmp, count);
		else
			status = cuda_bf16_to_f32(be->stream, tmp,
						  tensors[i]->data, count);
		if (status)
			return status;
	}
	return LOOM_OK;
}

/* What a call asks for, once accepted: the element type on the wire and
 * the count. */
struct call {
	struct cuda_reg *reg;
	int ids[CUDA_MAX_DEVICES];
	bool bf16;
	ncclDataType_t dtype;
	int64_t count;
};

/* LOOM_E_DECLINED for a call NCCL does not serve, else LOOM_OK with c
 * filled. */
static int prepare(loom_backend_t *const *backends,
		   struct loom_tensor *const *tensors, size_t n,
		   const struct loom_allreduce_opts *opts, struct call *c)
{
	if (!cuda_nccl_enabled())
		return LOOM_E_DECLINED;
	if (n == 0 || !backends || !tensors)
		return LOOM_E_DECLINED;
	if (!accept(backends, tensors, n, &c->reg, c->ids))
		return LOOM_E_DECLINED;
	c->dtype = ncclFloat32;
	switch (reduce_type(opts)) {
	case LOOM_TYPE_F32:
		c->bf16 = false;
		break;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
	case LOOM_TYPE_BF16:
		c->bf16 = true;
		c->dtype = ncclBfloat16;
		break;
#endif
	default:
		return LOOM_E_DECLINED;
	}
	c->count = loom_tensor_n_elements(tensors[0]);
	return LOOM_OK;
}

/* Records an event on each backend's stream after a world collective
 * and waits for them all with the deadline (a dead rank's collective
 * never ends: past LOOM_MPI_TIMEOUT the communicators are aborted and the
 * group fails from then on). */
static int world_wait(loom_backend_t *const *backends, size_t n,
		      struct cuda_comm_group *grp)
{
	cudaEvent_t ev[CUDA_MAX_DEVICES] = { 0 };
	int status = LOOM_OK;

	for (size_t i = 0; i < n && !status; i++) {
		struct cuda_backend *be = loom_backend_context(backends[i]);

		status = cuda_use_dev(be->dev);
		if (!status && (cudaEventCreateWithFlags(
					&ev[i], cudaEventDisableTiming) !=
					cudaSuccess ||
				cudaEventRecord(ev[i], be->stream) !=
					cudaSuccess)) {
			(void)cudaGetLastError();
			status = loom_error_set(LOOM_E_DEVICE, "%s: nccl: "
						"allreduce over the world: no "
						"event", LOOM_GPU_NAME);
		}
	}
	if (!status)
		status = comms_wait(grp->comms, grp->ids, (int)n, ev,
				    now_s() + env_timeout_s,
				    "allreduce over the world");
	for (size_t i = 0; i < n; i++)
		if (ev[i] && cudaSetDevice(grp->ids[i]) == cudaSuccess)
			(void)cudaEventDestroy(ev[i]);
	if (status)
		grp->failed = true;
	return status;
}

/* One ncclAllReduce per device of grp, in a group, on each backend's
 * stream; over the world (non-blocking communicators), waited for with
 * the deadline.  Called with reg->lock held. */
static int reduce(loom_backend_t *const *backends,
		  struct loom_tensor *const *tensors, size_t n,
		  const struct call *c, struct cuda_comm_group *grp)
{
	bool world = grp->key != 0;
	ncclResult_t r;
	int status;

	if (c->bf16) {
		status = convert_all(backends, tensors, n, c->count, true);
		if (status)
			return status;
	}
	r = ncclGroupStart();
	for (size_t i = 0; i < n && r == ncclSuccess; i++) {
		struct cuda_backend *be = loom_backend_context(backends[i]);
		void *buf = c->bf16 ? be->scratch[CUDA_SCRATCH_REDUCE] :
				      tensors[i]->data;

		if (cuda_use_dev(be->dev)) {
			r = ncclInvalidUsage;
			break;
		}
		r = ncclAllReduce(buf, buf, (size_t)c->count, c->dtype,
				  ncclSum, grp->comms[i], be->stream);
		if (world && r == NCCL_BUSY)
			r = ncclSuccess;
	}
	/* End the group even after a failed call, as NCCL requires. */
	if (r == ncclSuccess)
		r = ncclGroupEnd();
	else
		(void)ncclGroupEnd();
	if (world && r == NCCL_BUSY)
		r = ncclSuccess;
	if (r != ncclSuccess) {
		if (world) {
			comms_abort(grp->comms, grp->n);
			grp->failed = true;
		}
		return nccl_error(r, "allreduce");
	}
	if (world && NCCL_NONBLOCKING) {
		status = world_wait(backends, n, grp);
		if (status)
			return status;
	}
	if (c->bf16)
		return convert_all(backends, tensors, n, c->count, false);
	return LOOM_OK;
}

int cuda_allreduce(loom_backend_t *const *backends,
		   struct loom_tensor *const *tensors, size_t n,
		   const struct loom_allreduce_opts *opts)
{
	struct cuda_comm_group *grp = NULL;
	struct call c;
	int dev, status = prepare(backends, tensors, n, opts, &c);

	if (status)
		return status;
	/* One device runs through NCCL as well (a one-rank communicator):
	 * the result is its own tensor, rounded to BF16 when asked, and the
	 * path a machine with one GPU tests is the one many GPUs run. */
	if (c.count == 0)
		return LOOM_OK;
	dev = device_save();
	pthread_mutex_lock(&c.reg->lock);
	status = group_get(c.reg, c.ids, (int)n, &grp);
	if (!status)
		status = reduce(backends, tensors, n, &c, grp);
	pthread_mutex_unlock(&c.reg->lock);
	device_restore(dev);
	return status;
}

int cuda_allreduce_world(loom_backend_t *const *backends,
			 struct loom_tensor *const *tensors, size_t n,
			 const struct loom_allreduce_opts *opts,
			 const struct loom_world_group *g)
{
	struct cuda_comm_group *grp = NULL;
	struct call c;
	int dev, status;

	if (!g || g->size < sizeof(*g) || !g->world || g->n_members < 1 ||
	    g->first < 0 || (size_t)g->first + n > (size_t)g->n_members)
		return loom_error_set(LOOM_E_INVAL, "%s: allreduce_world: "
				      "a bad world group", LOOM_GPU_NAME);
	status = prepare(backends, tensors, n, opts, &c);
	if (status)
		return status;
	if (c.count == 0)
		return LOOM_OK;
	dev = device_save();
	pthread_mutex_lock(&c.reg->lock);
	status = world_group_get(c.reg, g, c.ids, (int)n, &grp);
	if (!status)
		status = reduce(backends, tensors, n, &c, grp);
	pthread_mutex_unlock(&c.reg->lock);
	device_restore(dev);
	return status;
}

/* The world group's communicators, made when the meta device is (every
 * rank at once), so that no compute waits for NCCL's init or hangs in
 * it: the same group allreduce_world finds later by key and devices. */
int cuda_allreduce_world_prepare(loom_dev_t *const *devs, size_t n,
				 const struct loom_world_group *g)
{
	struct cuda_comm_group *grp = NULL;
	struct cuda_reg *reg = NULL;
	loom_world_allreduce_fn sum;
	int ids[CUDA_MAX_DEVICES], dev, rc, status = LOOM_OK;
	float refused;

	if (!g || g->size < sizeof(*g) || !g->world || g->n_members < 1 ||
	    g->first < 0)
		return loom_error_set(LOOM_E_INVAL, "%s: allreduce_world_"
				      "prepare: a bad world group",
				      LOOM_GPU_NAME);
	*(void **)&sum = loom_reg_proc_address(g->world,
					       LOOM_PROC_WORLD_ALLREDUCE);
	if (!sum)
		return loom_error_set(LOOM_E_UNSUPPORTED, "%s: nccl: plugin %s "
				      "has no world", LOOM_GPU_NAME,
				      loom_reg_name(g->world));
	if (!devs || n < 1 || n > CUDA_MAX_DEVICES ||
	    (size_t)g->first + n > (size_t)g->n_members)
		status = loom_error_set(LOOM_E_INVAL, "%s: allreduce_world_"
					"prepare: %zu devices from member %d "
					"of %d", LOOM_GPU_NAME, n, g->first,
					g->n_members);
	for (size_t i = 0; !status && i < n; i++) {
		struct cuda_dev *cd;

		if (!devs[i] || strcmp(loom_reg_name(loom_dev_reg(devs[i])),
				       LOOM_GPU_NAME)) {
			status = loom_error_set(LOOM_E_INVAL, "%s: allreduce_"
						"world_prepare: member %zu is "
						"not a %s device",
						LOOM_GPU_NAME, i,
						LOOM_GPU_NAME);
			break;
		}
		cd = loom_dev_context(devs[i]);
		reg = cd->reg;
		ids[i] = cd->id;
		for (size_t j = 0; j < i; j++)
			if (ids[j] == ids[i])
				status = LOOM_E_DECLINED; /* one GPU twice */
	}
	if (!status && !cuda_nccl_enabled())
		status = LOOM_E_DECLINED;
	/* Every rank's verdict first: a rank that cannot join leaves the
	 * others out of NCCL's init too, instead of waiting there. */
	refused = status ? 1.0f : 0.0f;
	rc = sum(g->world, &refused, 1, LOOM_TYPE_F32);
	if (rc)
		return status ? status : rc;
	if (status || refused > 0)
		return status ? status : LOOM_E_DECLINED;
	dev = device_save();
	pthread_mutex_lock(&reg->lock);
	status = world_group_get(reg, g, ids, (int)n, &grp);
	pthread_mutex_unlock(&reg->lock);
	device_restore(dev);
	return status;
}

void cuda_allreduce_free(struct cuda_reg *reg)
{
	while (reg->comm_groups) {
		struct cuda_comm_group *grp = reg->comm_groups;

		reg->comm_groups = grp->next;
		group_free(grp);
	}
}

#else /* !LOOM_HAVE_NCCL */

void cuda_allreduce_free(struct cuda_reg *reg)
{
}

#endif
