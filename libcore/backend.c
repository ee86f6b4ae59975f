/* SPDX-License-Identifier: MIT */
/* backend.c - backends (streams of work on a device) and events: the
 * core's one wrapper per plugin method, with the documented defaults for
 * optional ones.  Devices live in device.c, buffers in buffer.c. */
#include "config.h"

#include <stdlib.h>

#include "backend-private.h"

int loom_backend_new(loom_dev_t *dev, const struct loom_backend_iface *iface,
		     void *context, loom_backend_t **out)
{
	static const struct loom__slot required[] = {
		LOOM__SLOT(struct loom_backend_iface, get_name),
		LOOM__SLOT(struct loom_backend_iface, free),
		LOOM__SLOT(struct loom_backend_iface, graph_compute),
	};
	static const struct loom__wrap wrap = {
		"backend", LOOM__KIND_BACKEND, required, LOOM__N_OF(required),
		NULL,
	};
	struct loom_backend *be;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_backend_new: out is NULL");
	*out = NULL;
	if (!loom__dev_live(dev))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_backend_new: no device");
	be = calloc(1, sizeof(*be));
	if (!be)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	be->dev = dev;
	st = loom__wrap_init(be, &be->iface, sizeof(be->iface), iface,
			     &be->context, context, &wrap, loom_dev_name(dev));
	if (st) {
		free(be);
		return st;
	}
	loom__reg_ref(dev->reg, LOOM__REF_BACKEND);
	*out = be;
	return LOOM_OK;
}

void *loom_backend_context(loom_backend_t *be)
{
	return loom__backend_live(be) ? be->context : NULL;
}

const char *loom_backend_name(loom_backend_t *be)
{
	const char *name;

	if (!loom__backend_live(be))
		return "(null)";
	name = be->iface.get_name(be);
	return name ? name : loom_dev_name(be->dev);
}

loom_dev_t *loom_backend_device(loom_backend_t *be)
{
	return loom__backend_live(be) ? be->dev : NULL;
}

/* ------------------------------------------------------------------------
 * Calls on one backend do not overlap: each public call that reaches the
 * plugin claims the backend first, and a call made while another is under
 * way (from another thread, or re-entered) returns LOOM_E_BUSY.  The
 * static functions below run claimed.
 */

/* LOOM_E_INVAL (who names the call) when be is not live, LOOM_E_BUSY
 * while another call on it is under way; else be is claimed until
 * release(be). */
static int claim(loom_backend_t *be, const char *who)
{
	if (!loom__backend_live(be))
		return loom_error_set(LOOM_E_INVAL, "%s: no backend", who);
	if (!loom__claim(&be->busy))
		return loom_error_set(LOOM_E_BUSY,
				      "%s: the backend of '%s' is busy with "
				      "a call on another thread (calls on "
				      "one backend must not overlap)",
				      who, loom_dev_name(be->dev));
	return LOOM_OK;
}

static void release(loom_backend_t *be)
{
	loom__unclaim(&be->busy);
}

static int synchronize(loom_backend_t *be)
{
	int (*f)(loom_backend_t *) = be->iface.synchronize;

	return f ? f(be) : LOOM_OK;
}

int loom_backend_synchronize(loom_backend_t *be)
{
	int st = claim(be, "loom_backend_synchronize");

	if (st)
		return st;
	st = synchronize(be);
	release(be);
	return st;
}

void loom_backend_free(loom_backend_t *be)
{
	if (!be)
		return;
	if (!loom__backend_live(be)) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_backend_free: %p is not a live backend "
			       "(freed already?)",
			       (void *)be);
		return;
	}
	/* Claimed for good: a call on another thread refuses the free. */
	if (claim(be, "loom_backend_free"))
		return;
	synchronize(be);
	/* The plugin frees its part while be is live, then be goes. */
	be->iface.free(be);
	if (loom__handle_take(be, LOOM__KIND_BACKEND))
		loom__reg_unref(be->dev->reg, LOOM__REF_BACKEND);
	free(be);
}

/* True when the plugin's async method may see t: its buffer is one the
 * backend's device can use.  Otherwise the core copies blocking. */
static bool device_owns(loom_backend_t *be, const struct loom_tensor *t)
{
	return loom_dev_supports_buft(be->dev, t->buffer->buft);
}

/* Both directions of an async copy: the plugin's method when it has one
 * and the tensor is in memory its device uses, else synchronize and copy
 * blocking.  A get only reads t. */
static int tensor_async(loom_backend_t *be, struct loom_tensor *t,
			void *data, size_t offset, size_t size, bool get,
			const char *what)
{
	int st;

	st = loom__check_range(t, offset, size, what);
	if (st || size == 0)
		return st;
	if (!data)
		return loom_error_set(LOOM_E_INVAL, "%s: data is NULL", what);
	if (get && be->iface.get_tensor_async && device_owns(be, t))
		return be->iface.get_tensor_async(be, t, data, offset, size);
	if (!get && be->iface.set_tensor_async && device_owns(be, t))
		return be->iface.set_tensor_async(be, t, data, offset, size);
	st = synchronize(be);
	if (st)
		return st;
	return get ? loom_tensor_get(t, data, offset, size)
		   : loom_tensor_set(t, data, offset, size);
}

static int claimed_tensor_async(loom_backend_t *be, struct loom_tensor *t,
				void *data, size_t offset, size_t size,
				bool get, const char *what)
{
	int st = claim(be, what);

	if (st)
		return st;
	st = tensor_async(be, t, data, offset, size, get, what);
	release(be);
	return st;
}

int loom_backend_tensor_set_async(loom_backend_t *be, struct loom_tensor *t,
				  const void *data, size_t offset,
				  size_t size)
{
	return claimed_tensor_async(be, t, (void *)data, offset, size, false,
				    "loom_backend_tensor_set_async");
}

int loom_backend_tensor_get_async(loom_backend_t *be,
				  const struct loom_tensor *t, void *data,
				  size_t offset, size_t size)
{
	return claimed_tensor_async(be, (struct loom_tensor *)t, data, offset,
				    size, true,
				    "loom_backend_tensor_get_async");
}

static void *backend_proc(loom_backend_t *be, enum loom__proc p)
{
	return loom__reg_proc(be->dev->reg, p);
}

/* Both directions of an async 2D copy: the plugin's entry point, else a
 * loop of the backend's 1D async copies. */
static int tensor_2d_async(loom_backend_t *be, struct loom_tensor *t,
			   void *data, size_t offset, size_t size,
			   size_t n_copies, size_t stride_tensor,
			   size_t stride_data, bool get, const char *what)
{
	void *f;
	int st;

	st = loom__check_range_2d(t, offset, size, n_copies, stride_tensor,
				  stride_data, get, what);
	if (st || !n_copies || !size)
		return st;
	if (!data)
		return loom_error_set(LOOM_E_INVAL, "%s: data is NULL", what);
	f = backend_proc(be, get ? LOOM__PROC_GET_TENSOR_2D_ASYNC
				 : LOOM__PROC_SET_TENSOR_2D_ASYNC);
	if (f && device_owns(be, t) && get)
		return ((loom_get_tensor_2d_async_fn)f)(
			be, t, data, offset, size, n_copies, stride_tensor,
			stride_data);
	if (f && device_owns(be, t))
		return ((loom_set_tensor_2d_async_fn)f)(
			be, t, data, offset, size, n_copies, stride_tensor,
			stride_data);
	for (size_t i = 0; i < n_copies && !st; i++)
		st = tensor_async(be, t, (char *)data + i * stride_data,
				  offset + i * stride_tensor, size, get, what);
	return st;
}

static int claimed_tensor_2d_async(loom_backend_t *be, struct loom_tensor *t,
				   void *data, size_t offset, size_t size,
				   size_t n_copies, size_t stride_tensor,
				   size_t stride_data, bool get,
				   const char *what)
{
	int st = claim(be, what);

	if (st)
		return st;
	st = tensor_2d_async(be, t, data, offset, size, n_copies,
			     stride_tensor, stride_data, get, what);
	release(be);
	return st;
}

int loom_backend_tensor_set_2d_async(loom_backend_t *be,
				     struct loom_tensor *t, const void *data,
				     size_t offset, size_t size,
				     size_t n_copies, size_t stride_tensor,
				     size_t stride_data)
{
	return claimed_tensor_2d_async(be, t, (void *)data, offset, size,
				       n_copies, stride_tensor, stride_data,
				       false,
				       "loom_backend_tensor_set_2d_async");
}

int loom_backend_tensor_get_2d_async(loom_backend_t *be,
				     const struct loom_tensor *t, void *data,
				     size_t offset, size_t size,
				     size_t n_copies, size_t stride_tensor,
				     size_t stride_data)
{
	return claimed_tensor_2d_async(be, (struct loom_tensor *)t, data,
				       offset, size, n_copies, stride_tensor,
				       stride_data, true,
				       "loom_backend_tensor_get_2d_async");
}

static int tensor_copy_async(loom_backend_t *be_src, loom_backend_t *be_dst,
			     const struct loom_tensor *src,
			     struct loom_tensor *dst)
{
	int st = loom__check_copy(src, dst, "loom_backend_tensor_copy_async");

	if (st)
		return st;
	if (be_dst->iface.copy_tensor_async && device_owns(be_dst, dst)) {
		st = be_dst->iface.copy_tensor_async(be_src, be_dst, src, dst);
		if (st != LOOM_E_DECLINED)
			return st;
	}
	/* Declined: finish both streams, then copy blocking. */
	st = synchronize(be_src);
	if (!st && be_dst != be_src)
		st = synchronize(be_dst);
	return st ? st : loom_tensor_copy(src, dst);
}

int loom_backend_tensor_copy_async(loom_backend_t *be_src,
				   loom_backend_t *be_dst,
				   const struct loom_tensor *src,
				   struct loom_tensor *dst)
{
	static const char who[] = "loom_backend_tensor_copy_async";
	int st;

	if (!loom__backend_live(be_src))
		return loom_error_set(LOOM_E_INVAL, "%s: no backend", who);
	st = claim(be_dst, who);
	if (st)
		return st;
	if (be_src != be_dst && (st = claim(be_src, who))) {
		release(be_dst);
		return st;
	}
	st = tensor_copy_async(be_src, be_dst, src, dst);
	if (be_src != be_dst)
		release(be_src);
	release(be_dst);
	return st;
}

/* Checks g and hands it to the plugin; with wait, synchronizes too, in
 * the same claim. */
static int graph_compute(loom_backend_t *be, loom_graph_t *g, bool wait)
{
	static const char who[] = "loom_backend_graph_compute";
	int st;

	if (!g)
		return loom_error_set(LOOM_E_INVAL, "%s: graph is NULL", who);
	st = claim(be, who);
	if (st)
		return st;
	st = loom__graph_validate(g, be);
	if (!st)
		st = be->iface.graph_compute(be, g);
	if (!st && wait)
		st = synchronize(be);
	release(be);
	return st;
}

int loom_backend_graph_compute_async(loom_backend_t *be, loom_graph_t *g)
{
	return graph_compute(be, g, false);
}

int loom_backend_graph_compute(loom_backend_t *be, loom_graph_t *g)
{
	return graph_compute(be, g, true);
}

bool loom_backend_supports_op(loom_backend_t *be, const struct loom_tensor *op)
{
	return loom__backend_live(be) && loom_dev_supports_op(be->dev, op);
}

int loom_backend_set_n_threads(loom_backend_t *be, int n_threads)
{
	static const char who[] = "loom_backend_set_n_threads";
	loom_set_n_threads_fn f;
	int st;

	if (n_threads < 1 && loom__backend_live(be))
		return loom_error_set(LOOM_E_INVAL, "%s: %d threads", who,
				      n_threads);
	st = claim(be, who);
	if (st)
		return st;
	f = (loom_set_n_threads_fn)backend_proc(be, LOOM__PROC_SET_N_THREADS);
	if (f)
		st = f(be, n_threads);
	else
		st = loom_error_set(LOOM_E_UNSUPPORTED,
				    "backend '%s' has no threads to set",
				    loom_backend_name(be));
	release(be);
	return st;
}

/* ------------------------------------------------------------------------
 * Events.  A device without event methods gets the core's emulation:
 * record synchronizes the backend, so there is nothing left to wait for.
 */

int loom_event_new(loom_dev_t *dev, loom_event_t **out)
{
	struct loom_event *ev;
	int st = LOOM_OK;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_event_new: out is NULL");
	*out = NULL;
	if (!loom__dev_enter(dev))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_event_new: no device");
	ev = calloc(1, sizeof(*ev));
	if (!ev) {
		st = loom_error_set(LOOM_E_NOMEM, "out of memory");
		goto out_end;
	}
	ev->dev = dev;
	st = loom__handle_add(ev, LOOM__KIND_EVENT);
	if (st)
		goto err_free;
	if (dev->iface.event_new)
		st = dev->iface.event_new(dev, ev);
	if (st) {
		loom__handle_take(ev, LOOM__KIND_EVENT);
		goto err_free;
	}
	loom__reg_ref(dev->reg, LOOM__REF_EVENT);
	*out = ev;
	goto out_end;

err_free:
	free(ev);
out_end:
	loom__call_end();
	return st;
}

void loom_event_free(loom_event_t *ev)
{
	if (!ev)
		return;
	if (!loom__event_live(ev)) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_event_free: %p is not a live event "
			       "(freed already?)",
			       (void *)ev);
		return;
	}
	if (ev->dev->iface.event_free)
		ev->dev->iface.event_free(ev->dev, ev);
	if (loom__handle_take(ev, LOOM__KIND_EVENT))
		loom__reg_unref(ev->dev->reg, LOOM__REF_EVENT);
	free(ev);
}

void *loom_event_context(loom_event_t *ev)
{
	return loom__event_live(ev) ? ev->context : NULL;
}

void loom_event_set_context(loom_event_t *ev, void *context)
{
	if (loom__event_live(ev))
		ev->context = context;
}

loom_dev_t *loom_event_device(loom_event_t *ev)
{
	return loom__event_live(ev) ? ev->dev : NULL;
}

static int event_record(loom_event_t *ev, loom_backend_t *be)
{
	if (be->dev != ev->dev)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_event_record: event of device '%s' "
				      "on a backend of '%s'",
				      loom_dev_name(ev->dev),
				      loom_dev_name(be->dev));
	if (be->iface.event_record && ev->dev->iface.event_new)
		return be->iface.event_record(be, ev);
	return synchronize(be);
}

int loom_event_record(loom_event_t *ev, loom_backend_t *be)
{
	int st;

	if (!loom__event_live(ev) || !loom__backend_live(be))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_event_record: no live event or "
				      "backend");
	st = claim(be, "loom_event_record");
	if (st)
		return st;
	st = event_record(ev, be);
	release(be);
	return st;
}

static int event_wait(loom_backend_t *be, loom_event_t *ev)
{
	/* An emulated event has passed once recorded; one of another
	 * plugin is waited for on the host. */
	if (!ev->dev->iface.event_new)
		return LOOM_OK;
	if (ev->dev->reg != be->dev->reg)
		return loom_event_synchronize(ev);
	return be->iface.event_wait ? be->iface.event_wait(be, ev) : LOOM_OK;
}

int loom_event_wait(loom_backend_t *be, loom_event_t *ev)
{
	int st;

	if (!loom__event_live(ev) || !loom__backend_live(be))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_event_wait: no live event or "
				      "backend");
	st = claim(be, "loom_event_wait");
	if (st)
		return st;
	st = event_wait(be, ev);
	release(be);
	return st;
}

int loom_event_synchronize(loom_event_t *ev)
{
	int (*f)(loom_dev_t *, loom_event_t *);

	if (!loom__event_live(ev))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_event_synchronize: no live event");
	f = ev->dev->iface.event_synchronize;
	return f ? f(ev->dev, ev) : LOOM_OK;
}
