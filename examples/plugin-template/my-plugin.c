/* SPDX-License-Identifier: MIT */
/* my-plugin.c - a minimal out-of-tree Loom plugin: one device, host
 * memory, and a backend that runs no ops.  Copy it, rename "my", and fill
 * in supports_op and graph_compute with your device's kernels. */
#include <stdlib.h>
#include <string.h>

#include <loom/loom-plugin.h>

/* ---- buffers: the device's memory (here, plain host memory) ---- */

static void *my_buffer_get_base(loom_buffer_t *buf)
{
	return loom_buffer_context(buf);
}

static void my_buffer_free(loom_buffer_t *buf)
{
	free(loom_buffer_context(buf));
}

/* Offsets and sizes reaching these have been checked by the core. */
static int my_buffer_set(loom_buffer_t *buf, struct loom_tensor *t,
			 const void *data, size_t offset, size_t size)
{
	memcpy((char *)t->data + offset, data, size);
	return LOOM_OK;
}

static int my_buffer_get(loom_buffer_t *buf, const struct loom_tensor *t,
			 void *data, size_t offset, size_t size)
{
	memcpy(data, (const char *)t->data + offset, size);
	return LOOM_OK;
}

static int my_buffer_clear(loom_buffer_t *buf, uint8_t value)
{
	memset(loom_buffer_base(buf), value, loom_buffer_size(buf));
	return LOOM_OK;
}

static const struct loom_buffer_iface my_buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = my_buffer_free,
	.get_base = my_buffer_get_base,
	.set_tensor = my_buffer_set,
	.get_tensor = my_buffer_get,
	.clear = my_buffer_clear,
};

static const char *my_buft_name(loom_buffer_type_t *buft)
{
	return "my";
}

static int my_buft_alloc(loom_buffer_type_t *buft, size_t size,
			 loom_buffer_t **out)
{
	void *mem = aligned_alloc(64, (size + 63) & ~(size_t)63);
	int st;

	if (!mem && size)
		return loom_error_set(LOOM_E_NOMEM,
				      "my: cannot allocate %zu bytes", size);
	st = loom_buffer_new(buft, &my_buffer_iface, mem, size, out);
	if (st)
		free(mem);
	return st;
}

static size_t my_buft_alignment(loom_buffer_type_t *buft)
{
	return 64;
}

static bool my_buft_is_host(loom_buffer_type_t *buft)
{
	return true;
}

static const struct loom_buffer_type_iface my_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = my_buft_name,
	.alloc_buffer = my_buft_alloc,
	.get_alignment = my_buft_alignment,
	.is_host = my_buft_is_host,
};

/* ---- backend: a stream of work ---- */

static const char *my_backend_name(loom_backend_t *be)
{
	return "my0";
}

static void my_backend_free(loom_backend_t *be)
{
}

static int my_backend_compute(loom_backend_t *be, loom_graph_t *g)
{
	/* Run every node of g here; supports_op said which ones we can. */
	return loom_error_set(LOOM_E_UNSUPPORTED, "my: no kernels yet");
}

static const struct loom_backend_iface my_backend_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = my_backend_name,
	.free = my_backend_free,
	.graph_compute = my_backend_compute,
};

/* ---- device and registry entry ---- */

static struct {
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
} my;

static const char *my_dev_name(loom_dev_t *dev)
{
	return "my0";
}

static enum loom_dev_type my_dev_type(loom_dev_t *dev)
{
	return LOOM_DEV_TYPE_ACCEL;
}

static int my_dev_init_backend(loom_dev_t *dev, const char *params,
			       loom_backend_t **out)
{
	return loom_backend_new(dev, &my_backend_iface, NULL, out);
}

static loom_buffer_type_t *my_dev_buft(loom_dev_t *dev)
{
	return my.buft;
}

static bool my_dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	return false;
}

static const struct loom_dev_iface my_dev_iface = {
	.size = sizeof(struct loom_dev_iface),
	.get_name = my_dev_name,
	.get_type = my_dev_type,
	.init_backend = my_dev_init_backend,
	.get_buffer_type = my_dev_buft,
	.supports_op = my_dev_supports_op,
};

static const char *my_reg_name(loom_reg_t *reg)
{
	return "my";
}

static size_t my_reg_dev_count(loom_reg_t *reg)
{
	return 1;
}

static loom_dev_t *my_reg_dev(loom_reg_t *reg, size_t i)
{
	return my.dev;
}

static const struct loom_reg_iface my_reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = my_reg_name,
	.get_dev_count = my_reg_dev_count,
	.get_dev = my_reg_dev,
};

static int my_init(loom_reg_t **out)
{
	int st;

	st = loom_reg_new(&my_reg_iface, NULL, &my.reg);
	if (!st)
		st = loom_dev_new(my.reg, &my_dev_iface, NULL, &my.dev);
	if (!st)
		st = loom_buffer_type_new(my.reg, my.dev, &my_buft_iface, NULL,
				   &my.buft);
	if (st)
		return st;
	*out = my.reg;
	return LOOM_OK;
}

/* 0 with a reason when the device is absent; higher wins among variants. */
static int my_score(const char **why)
{
	return 1;
}

LOOM_PLUGIN_DEFINE("my", "0.1", my_init, my_score);
