/* SPDX-License-Identifier: MIT */
/* allreduce.c - the "allreduce" entry point over NCCL (RCCL for HIP):
 * communicators per device group, created on first use and cached, and the
 * rules for what the collective declines.  LOOM_CUDA_ALLREDUCE=none makes
 * it decline everything (=nccl, or unset, uses NCCL).  Without NCCL only
 * the cleanup hook is built and the entry point is not offered.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda-plugin.h"

#ifdef LOOM_HAVE_NCCL

/* The communicators of one ordered group of devices: comms[i] is rank i,
 * on device ids[i]. */
struct cuda_comm_group {
	struct cuda_comm_group *next;
	int n;
	int *ids;
	ncclComm_t *comms;
	bool failed;  /* NCCL refused this group: every call declines */
};

static int nccl_error(ncclResult_t r, const char *what)
{
	return loom_error_set(LOOM_E_DEVICE, "%s: nccl: %s: %s", LOOM_GPU_NAME,
			      what, ncclGetErrorString(r));
}

static void group_free(struct cuda_comm_group *grp)
{
	for (int i = 0; i < grp->n; i++)
		if (grp->comms[i])
			ncclCommDestroy(grp->comms[i]);
	free(grp->comms);
	free(grp->ids);
	free(grp);
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
		if (grp->n == n && !memcmp(grp->ids, ids, n * sizeof(*ids))) {
			*out = grp;
			return grp->failed ? LOOM_E_DECLINED : LOOM_OK;
		}
	}
	grp = calloc(1, sizeof(*grp));
	if (!grp)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	grp->ids = calloc(n, sizeof(*grp->ids));
	grp->comms = calloc(n, sizeof(*grp->comms));
	if (!grp->ids || !grp->comms) {
		group_free(grp);
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	}
	memcpy(grp->ids, ids, n * sizeof(*ids));
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
	grp->n = n;
	grp->next = reg->comm_groups;
	reg->comm_groups = grp;
	*out = grp;
	return LOOM_OK;

err_failed:
	memcpy(grp->ids, ids, n * sizeof(*ids));
	grp->n = n;
	grp->failed = true;
	grp->next = reg->comm_groups;
	reg->comm_groups = grp;
	*out = grp;
	return LOOM_E_DECLINED;
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

int cuda_allreduce(loom_backend_t *const *backends,
		   struct loom_tensor *const *tensors, size_t n,
		   const struct loom_allreduce_opts *opts)
{
	const char *mode = loom_env_get("LOOM_CUDA_ALLREDUCE");
	int ids[CUDA_MAX_DEVICES];
	struct cuda_comm_group *grp = NULL;
	struct cuda_reg *reg;
	ncclDataType_t dtype = ncclFloat32;
	int64_t count;
	bool bf16;
	ncclResult_t r;
	int status;

	if (mode && strcmp(mode, "nccl") != 0)
		return LOOM_E_DECLINED;
	if (n == 0 || !backends || !tensors)
		return LOOM_E_DECLINED;
	if (!accept(backends, tensors, n, &reg, ids))
		return LOOM_E_DECLINED;
	/* One device runs through NCCL as well (a one-rank communicator):
	 * the result is its own tensor, rounded to BF16 when asked, and the
	 * path a machine with one GPU tests is the one many GPUs run. */
	switch (reduce_type(opts)) {
	case LOOM_TYPE_F32:
		bf16 = false;
		break;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 10, 0)
	case LOOM_TYPE_BF16:
		bf16 = true;
		dtype = ncclBfloat16;
		break;
#endif
	default:
		return LOOM_E_DECLINED;
	}
	count = loom_tensor_n_elements(tensors[0]);
	if (count == 0)
		return LOOM_OK;

	pthread_mutex_lock(&reg->lock);
	status = group_get(reg, ids, (int)n, &grp);
	if (status)
		goto out_unlock;
	if (bf16) {
		status = convert_all(backends, tensors, n, count, true);
		if (status)
			goto out_unlock;
	}
	r = ncclGroupStart();
	for (size_t i = 0; i < n && r == ncclSuccess; i++) {
		struct cuda_backend *be = loom_backend_context(backends[i]);
		void *buf = bf16 ? be->scratch[CUDA_SCRATCH_REDUCE] :
				   tensors[i]->data;

		if (cuda_use_dev(be->dev)) {
			r = ncclInvalidUsage;
			break;
		}
		r = ncclAllReduce(buf, buf, (size_t)count, dtype, ncclSum,
				  grp->comms[i], be->stream);
	}
	/* End the group even after a failed call, as NCCL requires. */
	if (r == ncclSuccess)
		r = ncclGroupEnd();
	else
		(void)ncclGroupEnd();
	if (r != ncclSuccess) {
		status = nccl_error(r, "allreduce");
		goto out_unlock;
	}
	if (bf16)
		status = convert_all(backends, tensors, n, count, false);
out_unlock:
	pthread_mutex_unlock(&reg->lock);
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
