/* SPDX-License-Identifier: MIT */
/* event.c - the CUDA plugin's events: made and freed by a device, waited
 * for by the host, recorded and waited for on a backend's stream.
 */
#include "cuda-plugin.h"

int cuda_dev_event_new(loom_dev_t *dev, loom_event_t *ev)
{
	struct cuda_dev *cd = loom_dev_context(dev);
	cudaEvent_t e;
	cudaError_t err;
	int st = cuda_use_dev(cd);

	if (st)
		return st;
	err = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
	if (err != cudaSuccess)
		return cuda_error(err, "cannot create an event");
	loom_event_set_context(ev, (void *)e);
	return LOOM_OK;
}

void cuda_dev_event_free(loom_dev_t *dev, loom_event_t *ev)
{
	struct cuda_dev *cd = loom_dev_context(dev);
	cudaEvent_t e = (cudaEvent_t)loom_event_context(ev);

	if (cuda_use_dev(cd) == LOOM_OK)
		cuda_warn_on(cudaEventDestroy(e), "cannot destroy an event");
}

int cuda_dev_event_synchronize(loom_dev_t *dev, loom_event_t *ev)
{
	cudaError_t err;

	err = cudaEventSynchronize((cudaEvent_t)loom_event_context(ev));
	return cuda_error(err, "event sync");
}

int cuda_backend_event_record(loom_backend_t *be, loom_event_t *ev)
{
	struct cuda_backend *cbe = loom_backend_context(be);
	int st = cuda_use_dev(cbe->dev);

	if (st)
		return st;
	return cuda_error(cudaEventRecord((cudaEvent_t)loom_event_context(ev),
					  cbe->stream), "event record");
}

int cuda_backend_event_wait(loom_backend_t *be, loom_event_t *ev)
{
	struct cuda_backend *cbe = loom_backend_context(be);
	int st = cuda_use_dev(cbe->dev);

	if (st)
		return st;
	return cuda_error(cudaStreamWaitEvent(cbe->stream,
					      (cudaEvent_t)loom_event_context(ev),
					      0), "event wait");
}
