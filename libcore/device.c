/* device.c - devices and regs: constructors that check a plugin's tables,
 * and one wrapper per method with the documented defaults.  The registry
 * of loaded plugins lives in registry.c. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "backend-private.h"

static bool dev_valid(loom_dev_t *dev)
{
	return dev && dev->magic == DEV_MAGIC;
}

static bool reg_valid(loom_reg_t *reg)
{
	return reg && reg->magic == REG_MAGIC;
}

const char *loom_dev_type_name(enum loom_dev_type type)
{
	switch (type) {
	case LOOM_DEV_TYPE_CPU:
		return "cpu";
	case LOOM_DEV_TYPE_GPU:
		return "gpu";
	case LOOM_DEV_TYPE_IGPU:
		return "igpu";
	case LOOM_DEV_TYPE_ACCEL:
		return "accel";
	case LOOM_DEV_TYPE_META:
		return "meta";
	}
	return "unknown";
}

/* ------------------------------------------------------------------------
 * Regs.
 */

int loom_reg_new(const struct loom_reg_iface *iface, void *context,
		 loom_reg_t **out)
{
	static const struct loom__slot required[] = {
		LOOM__SLOT(struct loom_reg_iface, get_name),
		LOOM__SLOT(struct loom_reg_iface, get_dev_count),
		LOOM__SLOT(struct loom_reg_iface, get_dev),
	};
	struct loom_reg *reg;
	const char *slot;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_reg_new: out is NULL");
	*out = NULL;
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	st = loom__copy_iface(&reg->iface, sizeof(reg->iface), iface, "reg");
	if (st)
		goto err_free;
	slot = loom__missing_slot(&reg->iface, required,
				  LOOM__N_OF(required));
	if (slot) {
		st = loom__missing_method(
			"reg",
			reg->iface.get_name ? reg->iface.get_name(reg) : NULL,
			slot);
		goto err_free;
	}
	reg->magic = REG_MAGIC;
	reg->context = context;
	loom__reg_made(reg);
	*out = reg;
	return LOOM_OK;

err_free:
	free(reg);
	return st;
}

void *loom_reg_context(loom_reg_t *reg)
{
	return reg ? reg->context : NULL;
}

const char *loom_reg_name(loom_reg_t *reg)
{
	const char *name;

	if (!reg_valid(reg))
		return "(null)";
	name = reg->iface.get_name(reg);
	return name ? name : "(unnamed)";
}

/* More devices than this from one plugin is a plugin bug. */
#define MAX_DEVS 4096

size_t loom_reg_dev_count(loom_reg_t *reg)
{
	size_t n;

	if (!reg_valid(reg))
		return 0;
	n = reg->iface.get_dev_count(reg);
	if (n > MAX_DEVS) {
		loom_log(LOOM_LOG_WARN, "plugin '%s' reports %zu devices",
			 loom_reg_name(reg), n);
		return 0;
	}
	return n;
}

loom_dev_t *loom_reg_dev(loom_reg_t *reg, size_t i)
{
	loom_dev_t *dev;

	if (i >= loom_reg_dev_count(reg))
		return NULL;
	dev = reg->iface.get_dev(reg, i);
	if (!dev_valid(dev) || dev->reg != reg) {
		loom_log(LOOM_LOG_WARN,
			 "plugin '%s': device %zu is not one of its devices",
			 loom_reg_name(reg), i);
		return NULL;
	}
	return dev;
}

/* The plugin's own lookup; the core caches the known names at
 * registration (registry.c). */
static void *reg_get_proc(loom_reg_t *reg, const char *name)
{
	void *(*f)(loom_reg_t *, const char *) = reg->iface.get_proc_address;

	return f ? f(reg, name) : NULL;
}

void *loom_reg_proc_address(loom_reg_t *reg, const char *name)
{
	if (!reg_valid(reg) || !name)
		return NULL;
	for (int p = 0; p < LOOM__PROC_COUNT; p++)
		if (strcmp(name, loom__proc_name(p)) == 0 && reg->registered)
			return reg->procs[p];
	return reg_get_proc(reg, name);
}

void *loom__reg_proc(loom_reg_t *reg, enum loom__proc p)
{
	if (!reg_valid(reg) || p < 0 || p >= LOOM__PROC_COUNT)
		return NULL;
	if (!reg->registered)
		return reg_get_proc(reg, loom__proc_name(p));
	return reg->procs[p];
}

/* ------------------------------------------------------------------------
 * Devices.
 */

int loom_dev_new(loom_reg_t *reg, const struct loom_dev_iface *iface,
		 void *context, loom_dev_t **out)
{
	static const struct loom__slot required[] = {
		LOOM__SLOT(struct loom_dev_iface, get_name),
		LOOM__SLOT(struct loom_dev_iface, get_type),
		LOOM__SLOT(struct loom_dev_iface, init_backend),
		LOOM__SLOT(struct loom_dev_iface, get_buffer_type),
		LOOM__SLOT(struct loom_dev_iface, supports_op),
	};
	struct loom_dev *dev;
	const char *slot;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_dev_new: out is NULL");
	*out = NULL;
	if (!reg_valid(reg))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_dev_new: reg is not a loom reg");
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	st = loom__copy_iface(&dev->iface, sizeof(dev->iface), iface,
			      "device");
	if (st)
		goto err_free;
	dev->magic = DEV_MAGIC;
	dev->context = context;
	dev->reg = reg;
	slot = loom__missing_slot(&dev->iface, required,
				  LOOM__N_OF(required));
	if (slot) {
		st = loom__missing_method(
			"device",
			dev->iface.get_name ? dev->iface.get_name(dev) : NULL,
			slot);
		goto err_free;
	}
	dev->next = reg->devs;
	reg->devs = dev;
	*out = dev;
	return LOOM_OK;

err_free:
	dev->magic = 0;
	free(dev);
	return st;
}

void *loom_dev_context(loom_dev_t *dev)
{
	return dev ? dev->context : NULL;
}

const char *loom_dev_name(loom_dev_t *dev)
{
	const char *name;

	if (!dev_valid(dev))
		return "(null)";
	name = dev->iface.get_name(dev);
	return name ? name : "(unnamed)";
}

const char *loom_dev_description(loom_dev_t *dev)
{
	const char *(*f)(loom_dev_t *);
	const char *d;

	if (!dev_valid(dev))
		return "(null)";
	f = dev->iface.get_description;
	d = f ? f(dev) : NULL;
	return d ? d : loom_dev_name(dev);
}

enum loom_dev_type loom_dev_type(loom_dev_t *dev)
{
	enum loom_dev_type t;

	if (!dev_valid(dev))
		return LOOM_DEV_TYPE_CPU;
	t = dev->iface.get_type(dev);
	return (unsigned)t <= LOOM_DEV_TYPE_META ? t : LOOM_DEV_TYPE_ACCEL;
}

void loom_dev_memory(loom_dev_t *dev, size_t *free_, size_t *total)
{
	size_t f = 0, t = 0;

	if (dev_valid(dev) && dev->iface.get_memory)
		dev->iface.get_memory(dev, &f, &t);
	if (f > t)
		f = t;
	if (free_)
		*free_ = f;
	if (total)
		*total = t;
}

uint32_t loom_dev_caps(loom_dev_t *dev)
{
	uint32_t (*f)(loom_dev_t *);

	if (!dev_valid(dev))
		return 0;
	f = dev->iface.get_caps;
	return f ? f(dev) : 0;
}

int loom_dev_init_backend(loom_dev_t *dev, const char *params,
			  loom_backend_t **out)
{
	loom_backend_t *be = NULL;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_dev_init_backend: out is NULL");
	*out = NULL;
	if (!dev_valid(dev))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_dev_init_backend: no device");
	loom__clear_error();
	st = dev->iface.init_backend(dev, params, &be);
	if (st) {
		if (st > 0)
			st = LOOM_E_PLUGIN;
		if (!*loom_error_message())
			loom_error_set(st, "device '%s': init_backend failed",
				       loom_dev_name(dev));
		return st;
	}
	if (!be || be->magic != BACKEND_MAGIC || be->dev != dev)
		return loom_error_set(LOOM_E_PLUGIN,
				      "device '%s': init_backend returned no "
				      "backend of this device",
				      loom_dev_name(dev));
	*out = be;
	return LOOM_OK;
}

loom_buffer_type_t *loom_dev_buffer_type(loom_dev_t *dev)
{
	loom_buffer_type_t *buft;

	if (!dev_valid(dev))
		return NULL;
	buft = dev->iface.get_buffer_type(dev);
	if (buft && buft->magic != BUFT_MAGIC) {
		loom_log(LOOM_LOG_WARN,
			 "device '%s': get_buffer_type returned a foreign "
			 "pointer",
			 loom_dev_name(dev));
		return NULL;
	}
	return buft;
}

loom_buffer_type_t *loom_dev_host_buffer_type(loom_dev_t *dev)
{
	loom_host_buffer_type_fn f;
	loom_buffer_type_t *buft;

	if (!dev_valid(dev))
		return NULL;
	f = (loom_host_buffer_type_fn)loom__reg_proc(
		dev->reg, LOOM__PROC_HOST_BUFFER_TYPE);
	buft = f ? f(dev) : NULL;
	return buft && buft->magic == BUFT_MAGIC ? buft : NULL;
}

bool loom_dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	if (!dev_valid(dev) || !op)
		return false;
	return dev->iface.supports_op(dev, op);
}

bool loom_dev_supports_buft(loom_dev_t *dev, loom_buffer_type_t *buft)
{
	if (!dev_valid(dev) || !buft || buft->magic != BUFT_MAGIC)
		return false;
	if (dev->iface.supports_buft)
		return dev->iface.supports_buft(dev, buft);
	return buft == loom_dev_buffer_type(dev) ||
	       (loom_dev_type(dev) == LOOM_DEV_TYPE_CPU &&
		loom_buffer_type_is_host(buft));
}

loom_reg_t *loom_dev_reg(loom_dev_t *dev)
{
	return dev_valid(dev) ? dev->reg : NULL;
}
