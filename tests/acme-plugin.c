/* SPDX-License-Identifier: MIT */
/* acme-plugin.c - a test plugin as a third party would write one for an
 * accelerator or a BLAS: one ACCEL device whose memory the CPU cannot
 * address, with add and mul_mat on F32 only.  Everything else must fall
 * to another backend, which is what the scheduler tests need.  Built as
 * tests/acme/loom-acme.so (tests/sched.mk).
 */
#include <stdlib.h>
#include <string.h>

#include <loom/loom-plugin.h>

#define ACME_ALIGN 64

static struct {
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
	int n_compute;
	int n_supports;
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
	return "acme";
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

static const char *be_name(loom_backend_t *be)
{
	return "acme0";
}

static void be_free(loom_backend_t *be)
{
}

static int be_compute(loom_backend_t *be, loom_graph_t *g)
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

static const struct loom_backend_iface be_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = be_name,
	.free = be_free,
	.graph_compute = be_compute,
};

/* ---- device and registry ---- */

static const char *dev_name(loom_dev_t *dev)
{
	return "acme0";
}

static enum loom_dev_type dev_type(loom_dev_t *dev)
{
	return LOOM_DEV_TYPE_ACCEL;
}

static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	return loom_backend_new(dev, &be_iface, &acme, out);
}

static loom_buffer_type_t *dev_buft(loom_dev_t *dev)
{
	return acme.buft;
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
};

static const char *reg_name(loom_reg_t *reg)
{
	return "acme";
}

static size_t reg_dev_count(loom_reg_t *reg)
{
	return 1;
}

static loom_dev_t *reg_dev(loom_reg_t *reg, size_t i)
{
	return i == 0 ? acme.dev : NULL;
}

/* "acme_n_compute": how many graphs the backend ran; "acme_n_supports":
 * how many times supports_op was asked (for the tests). */
static int n_compute(void)
{
	return acme.n_compute;
}

static int n_supports(void)
{
	return acme.n_supports;
}

static void *reg_proc(loom_reg_t *reg, const char *name)
{
	if (!strcmp(name, "acme_n_compute"))
		return (void *)n_compute;
	if (!strcmp(name, "acme_n_supports"))
		return (void *)n_supports;
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
	if (!st)
		st = loom_dev_new(acme.reg, &dev_iface, &acme, &acme.dev);
	if (!st)
		st = loom_buffer_type_new(acme.reg, acme.dev, &buft_iface,
					  &acme, &acme.buft);
	if (st)
		return st;
	*out = acme.reg;
	return LOOM_OK;
}

LOOM_PLUGIN_DEFINE("acme", "1.0", acme_init, NULL);
