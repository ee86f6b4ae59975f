/* SPDX-License-Identifier: MIT */
/* acme-plugin.c - a test plugin as a third party would write one for an
 * accelerator or a BLAS: one ACCEL device whose memory the CPU cannot
 * address, with add and mul_mat on F32 only.  Everything else must fall
 * to another backend, which is what the scheduler tests need.  Built as
 * tests/acme/loom-acme.so (tests/sched.mk).
 *
 * Built with ACME_STREAMS it is "acmes": two such devices whose backends
 * are streams that run nothing until they must (a synchronize, an event
 * waited for), with real events and asynchronous copies between them,
 * so that work queued in the wrong order computes the wrong numbers.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom-plugin.h>

#define ACME_ALIGN 64

#ifdef ACME_STREAMS
#define ACME_NAME "acmes"
#define ACME_N_DEV 2
#else
#define ACME_NAME "acme"
#define ACME_N_DEV 1
#endif

struct acme_dev {
	char name[16];
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
};

static struct {
	loom_reg_t *reg;
	struct acme_dev d[ACME_N_DEV];
	int n_compute;
	int n_supports;
	int n_queued; /* copies queued on a stream */
} acme;

/* ---- buffers: malloc'ed memory, called device memory ---- */

static void buf_free(loom_buffer_t *buf)
{
	free(loom_buffer_context(buf));
}

static void *buf_base(loom_buffer_t *buf)
{
	return loom_buffer_context(buf);
}

static int buf_set(loom_buffer_t *buf, struct loom_tensor *t,
		   const void *data, size_t offset, size_t size)
{
	memcpy((char *)t->data + offset, data, size);
	return LOOM_OK;
}

static int buf_get(loom_buffer_t *buf, const struct loom_tensor *t,
		   void *data, size_t offset, size_t size)
{
	memcpy(data, (const char *)t->data + offset, size);
	return LOOM_OK;
}

static int buf_clear(loom_buffer_t *buf, uint8_t value)
{
	memset(loom_buffer_context(buf), value, loom_buffer_size(buf));
	return LOOM_OK;
}

static const struct loom_buffer_iface buf_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buf_free,
	.get_base = buf_base,
	.set_tensor = buf_set,
	.get_tensor = buf_get,
	.clear = buf_clear,
};

static const char *buft_name(loom_buffer_type_t *buft)
{
	return ((struct acme_dev *)loom_buffer_type_context(buft))->name;
}

static int buft_alloc(loom_buffer_type_t *buft, size_t size,
		      loom_buffer_t **out)
{
	void *p = aligned_alloc(ACME_ALIGN,
				(size + ACME_ALIGN) & ~(size_t)(ACME_ALIGN - 1));
	int st;

	if (!p)
		return loom_error_set(LOOM_E_NOMEM, "acme: out of memory");
	st = loom_buffer_new(buft, &buf_iface, p, size, out);
	if (st)
		free(p);
	return st;
}

static size_t buft_alignment(loom_buffer_type_t *buft)
{
	return ACME_ALIGN;
}

static const struct loom_buffer_type_iface buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = buft_name,
	.alloc_buffer = buft_alloc,
	.get_alignment = buft_alignment,
};

/* ---- the two ops ---- */

static float at(const struct loom_tensor *t, int64_t i0, int64_t i1,
		int64_t i2, int64_t i3)
{
	return *(const float *)((const char *)t->data + i0 * t->nb[0] +
				i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3]);
}

static float *out_at(struct loom_tensor *t, int64_t i0, int64_t i1,
		     int64_t i2, int64_t i3)
{
	return (float *)((char *)t->data + i0 * t->nb[0] + i1 * t->nb[1] +
			 i2 * t->nb[2] + i3 * t->nb[3]);
}

static void op_add(struct loom_tensor *t)
{
	const struct loom_tensor *a = t->src[0], *b = t->src[1];

	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
	for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
	for (int64_t i1 = 0; i1 < t->ne[1]; i1++)
	for (int64_t i0 = 0; i0 < t->ne[0]; i0++)
		*out_at(t, i0, i1, i2, i3) =
			at(a, i0, i1, i2, i3) +
			at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2],
			   i3 % b->ne[3]);
}

static void op_mul_mat(struct loom_tensor *t)
{
	const struct loom_tensor *a = t->src[0], *b = t->src[1];
	int64_t r2 = b->ne[2] / a->ne[2], r3 = b->ne[3] / a->ne[3];

	for (int64_t i3 = 0; i3 < t->ne[3]; i3++)
	for (int64_t i2 = 0; i2 < t->ne[2]; i2++)
	for (int64_t n = 0; n < t->ne[1]; n++)
	for (int64_t m = 0; m < t->ne[0]; m++) {
		float s = 0;

		for (int64_t k = 0; k < a->ne[0]; k++)
			s += at(a, k, m, i2 / r2, i3 / r3) *
			     at(b, k, n, i2, i3);
		*out_at(t, m, n, i2, i3) = s;
	}
}

static bool supports(const struct loom_tensor *t)
{
	if (t->type != LOOM_TYPE_F32)
		return false;
	for (int i = 0; i < 2; i++)
		if (!t->src[i] || t->src[i]->type != LOOM_TYPE_F32)
			return false;
	return t->op == LOOM_OP_ADD || t->op == LOOM_OP_MUL_MAT;
}

/* ---- backend ---- */

static int run_graph(loom_graph_t *g)
{
	for (size_t i = 0; i < loom_graph_n_nodes(g); i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		if (loom_op_is_view(t->op))
			continue;
		if (!supports(t))
			return loom_error_set(LOOM_E_UNSUPPORTED, "acme: no %s",
					      loom_op_name(t->op));
		if (t->op == LOOM_OP_ADD)
			op_add(t);
		else
			op_mul_mat(t);
	}
	acme.n_compute++;
	return LOOM_OK;
}

#ifdef ACME_STREAMS
/* A stream: work queued in order, run only when something must see its
 * results. */
enum { Q_GRAPH, Q_COPY, Q_WAIT };

struct acme_stream;

/* An event: the point of a stream after the work queued before record. */
struct acme_event {
	struct acme_stream *st;
	size_t pos;
};

struct q_item {
	int kind;
	loom_graph_t *g;
	void *dst;
	const void *src;
	size_t size;
	struct acme_stream *st; /* Q_WAIT: run st up to pos first */
	size_t pos;
};

struct acme_stream {
	struct acme_dev *d;
	struct q_item *q;
	size_t n, cap, done;
};

static int stream_push(struct acme_stream *st, struct q_item it)
{
	if (st->n == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 16;
		struct q_item *q = realloc(st->q, cap * sizeof(*q));

		if (!q)
			return loom_error_set(LOOM_E_NOMEM, "acme: no memory");
		st->q = q;
		st->cap = cap;
	}
	st->q[st->n++] = it;
	return LOOM_OK;
}

static int stream_run(struct acme_stream *st, size_t upto)
{
	while (st->done < upto) {
		struct q_item *it = &st->q[st->done++];
		int rc = LOOM_OK;

		if (it->kind == Q_GRAPH)
			rc = run_graph(it->g);
		else if (it->kind == Q_COPY)
			memcpy(it->dst, it->src, it->size);
		else
			rc = stream_run(it->st, it->pos);
		if (rc)
			return rc;
	}
	return LOOM_OK;
}

static const char *be_name(loom_backend_t *be)
{
	return ((struct acme_stream *)loom_backend_context(be))->d->name;
}

static void be_free(loom_backend_t *be)
{
	struct acme_stream *st = loom_backend_context(be);

	free(st->q);
	free(st);
}

static int be_compute(loom_backend_t *be, loom_graph_t *g)
{
	return stream_push(loom_backend_context(be),
			   (struct q_item){ .kind = Q_GRAPH, .g = g });
}

static int be_synchronize(loom_backend_t *be)
{
	struct acme_stream *st = loom_backend_context(be);

	return stream_run(st, st->n);
}

static int be_set_async(loom_backend_t *be, struct loom_tensor *t,
			const void *data, size_t offset, size_t size)
{
	return stream_push(loom_backend_context(be),
			   (struct q_item){ .kind = Q_COPY,
					    .dst = (char *)t->data + offset,
					    .src = data, .size = size });
}

static int be_get_async(loom_backend_t *be, const struct loom_tensor *t,
			void *data, size_t offset, size_t size)
{
	return stream_push(loom_backend_context(be),
			   (struct q_item){ .kind = Q_COPY, .dst = data,
					    .src = (const char *)t->data +
						   offset,
					    .size = size });
}

static bool ours(const struct loom_tensor *t)
{
	for (int i = 0; i < ACME_N_DEV; i++)
		if (t->buffer &&
		    loom_buffer_get_type(t->buffer) == acme.d[i].buft)
			return true;
	return false;
}

/* Between acmes devices, queued on the destination's stream. */
static int be_copy_async(loom_backend_t *be_src, loom_backend_t *be_dst,
			 const struct loom_tensor *src, struct loom_tensor *dst)
{
	if (!ours(src) || !ours(dst) ||
	    loom_dev_reg(loom_backend_device(be_src)) != acme.reg)
		return LOOM_E_DECLINED;
	acme.n_queued++;
	return stream_push(loom_backend_context(be_dst),
			   (struct q_item){ .kind = Q_COPY, .dst = dst->data,
					    .src = src->data,
					    .size = loom_tensor_n_bytes(src) });
}

static int be_event_record(loom_backend_t *be, loom_event_t *ev)
{
	struct acme_event *e = loom_event_context(ev);
	struct acme_stream *st = loom_backend_context(be);

	e->st = st;
	e->pos = st->n;
	return LOOM_OK;
}

static int be_event_wait(loom_backend_t *be, loom_event_t *ev)
{
	struct acme_event *e = loom_event_context(ev);

	if (!e->st)
		return LOOM_OK;
	return stream_push(loom_backend_context(be),
			   (struct q_item){ .kind = Q_WAIT, .st = e->st,
					    .pos = e->pos });
}

static const struct loom_backend_iface be_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = be_name,
	.free = be_free,
	.set_tensor_async = be_set_async,
	.get_tensor_async = be_get_async,
	.copy_tensor_async = be_copy_async,
	.synchronize = be_synchronize,
	.graph_compute = be_compute,
	.event_record = be_event_record,
	.event_wait = be_event_wait,
};

static int dev_event_new(loom_dev_t *dev, loom_event_t *ev)
{
	struct acme_event *e = calloc(1, sizeof(*e));

	if (!e)
		return loom_error_set(LOOM_E_NOMEM, "acme: no memory");
	loom_event_set_context(ev, e);
	return LOOM_OK;
}

static void dev_event_free(loom_dev_t *dev, loom_event_t *ev)
{
	free(loom_event_context(ev));
}

static int dev_event_sync(loom_dev_t *dev, loom_event_t *ev)
{
	struct acme_event *e = loom_event_context(ev);

	return e->st ? stream_run(e->st, e->pos) : LOOM_OK;
}

static uint32_t dev_caps(loom_dev_t *dev)
{
	return LOOM_DEV_CAP_EVENTS | LOOM_DEV_CAP_ASYNC;
}

static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	struct acme_stream *st = calloc(1, sizeof(*st));
	int rc;

	if (!st)
		return loom_error_set(LOOM_E_NOMEM, "acme: no memory");
	st->d = loom_dev_context(dev);
	rc = loom_backend_new(dev, &be_iface, st, out);
	if (rc)
		free(st);
	return rc;
}
#else
static const char *be_name(loom_backend_t *be)
{
	return "acme0";
}

static void be_free(loom_backend_t *be)
{
}

static int be_compute(loom_backend_t *be, loom_graph_t *g)
{
	return run_graph(g);
}

static const struct loom_backend_iface be_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = be_name,
	.free = be_free,
	.graph_compute = be_compute,
};

static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	return loom_backend_new(dev, &be_iface, &acme, out);
}
#endif

/* ---- device and registry ---- */

static const char *dev_name(loom_dev_t *dev)
{
	return ((struct acme_dev *)loom_dev_context(dev))->name;
}

static enum loom_dev_type dev_type(loom_dev_t *dev)
{
	return LOOM_DEV_TYPE_ACCEL;
}

static loom_buffer_type_t *dev_buft(loom_dev_t *dev)
{
	return ((struct acme_dev *)loom_dev_context(dev))->buft;
}

static bool dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	acme.n_supports++;
	return supports(op);
}

static const struct loom_dev_iface dev_iface = {
	.size = sizeof(struct loom_dev_iface),
	.get_name = dev_name,
	.get_type = dev_type,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_buft,
	.supports_op = dev_supports_op,
#ifdef ACME_STREAMS
	.get_caps = dev_caps,
	.event_new = dev_event_new,
	.event_free = dev_event_free,
	.event_synchronize = dev_event_sync,
#endif
};

static const char *reg_name(loom_reg_t *reg)
{
	return ACME_NAME;
}

static size_t reg_dev_count(loom_reg_t *reg)
{
	return ACME_N_DEV;
}

static loom_dev_t *reg_dev(loom_reg_t *reg, size_t i)
{
	return i < ACME_N_DEV ? acme.d[i].dev : NULL;
}

/* "acme_n_compute": how many graphs the backend ran; "acme_n_supports":
 * how many times supports_op was asked; "acme_n_queued": how many copies
 * were queued on a stream (for the tests). */
static int n_compute(void)
{
	return acme.n_compute;
}

static int n_supports(void)
{
	return acme.n_supports;
}

static int n_queued(void)
{
	return acme.n_queued;
}

static void *reg_proc(loom_reg_t *reg, const char *name)
{
	if (!strcmp(name, "acme_n_compute"))
		return (void *)n_compute;
	if (!strcmp(name, "acme_n_supports"))
		return (void *)n_supports;
	if (!strcmp(name, "acme_n_queued"))
		return (void *)n_queued;
	return NULL;
}

static const struct loom_reg_iface reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = reg_name,
	.get_dev_count = reg_dev_count,
	.get_dev = reg_dev,
	.get_proc_address = reg_proc,
};

static int acme_init(loom_reg_t **out)
{
	int st;

	memset(&acme, 0, sizeof(acme));
	st = loom_reg_new(&reg_iface, &acme, &acme.reg);
	for (int i = 0; !st && i < ACME_N_DEV; i++) {
		struct acme_dev *d = &acme.d[i];

		snprintf(d->name, sizeof(d->name), "%s%d", ACME_NAME, i);
		st = loom_dev_new(acme.reg, &dev_iface, d, &d->dev);
		if (!st)
			st = loom_buffer_type_new(acme.reg, d->dev, &buft_iface,
						  d, &d->buft);
	}
	if (st)
		return st;
	*out = acme.reg;
	return LOOM_OK;
}

LOOM_PLUGIN_DEFINE(ACME_NAME, "1.0", acme_init, NULL);
