/* SPDX-License-Identifier: MIT */
/* device.c - devices and regs: constructors that check a plugin's tables,
 * and one wrapper per method with the documented defaults.  The registry
 * of loaded plugins lives in registry.c. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "backend-private.h"

static const char *const dev_type_names[] = {
#define X_(name, str) [LOOM_DEV_TYPE_##name] = str,
	LOOM_DEV_TYPE_MAP(X_)
#undef X_
};

#define N_DEV_TYPES (sizeof(dev_type_names) / sizeof(dev_type_names[0]))

const char *loom_dev_type_name(enum loom_dev_type type)
{
	return (unsigned)type < N_DEV_TYPES ? dev_type_names[type] : "unknown";
}

const char *loom_dev_rank_name(enum loom_dev_rank rank)
{
	switch (rank) {
	case LOOM_DEV_RANK_NONE:
		return "none";
	case LOOM_DEV_RANK_MARGINAL:
		return "marginal";
	case LOOM_DEV_RANK_SECONDARY:
		return "secondary";
	case LOOM_DEV_RANK_PRIMARY:
		return "primary";
	}
	return "unknown";
}

bool loom__dev_rank_valid(int rank)
{
	return rank == LOOM_DEV_RANK_NONE || rank == LOOM_DEV_RANK_MARGINAL ||
	       rank == LOOM_DEV_RANK_SECONDARY ||
	       rank == LOOM_DEV_RANK_PRIMARY;
}

/* ------------------------------------------------------------------------
 * Regs.
 */

static const char *reg_plugin_name(void *obj)
{
	loom_reg_t *reg = obj;

	return reg->iface.get_name ? reg->iface.get_name(reg) : NULL;
}

int loom_reg_new(const struct loom_reg_iface *iface, void *context,
		 loom_reg_t **out)
{
	static const struct loom__slot required[] = {
		LOOM__SLOT(struct loom_reg_iface, get_name),
		LOOM__SLOT(struct loom_reg_iface, get_dev_count),
		LOOM__SLOT(struct loom_reg_iface, get_dev),
	};
	static const struct loom__wrap wrap = {
		"reg", LOOM__KIND_REG, required, LOOM__N_OF(required),
		reg_plugin_name,
	};
	struct loom_reg *reg;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_reg_new: out is NULL");
	*out = NULL;
	reg = calloc(1, sizeof(*reg));
	if (!reg)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	st = loom__wrap_init(reg, &reg->iface, sizeof(reg->iface), iface,
			     &reg->context, context, &wrap, NULL);
	if (st) {
		free(reg);
		return st;
	}
	loom__reg_made(reg);
	*out = reg;
	return LOOM_OK;
}

void *loom_reg_context(loom_reg_t *reg)
{
	return loom__reg_live(reg) ? reg->context : NULL;
}

const char *loom_reg_name(loom_reg_t *reg)
{
	const char *name;

	if (!loom__reg_live(reg))
		return "(null)";
	name = reg->iface.get_name(reg);
	return name ? name : "(unnamed)";
}

/* More devices than this from one plugin is a plugin bug. */
#define MAX_DEVS 4096

size_t loom_reg_dev_count(loom_reg_t *reg)
{
	size_t n;

	if (!loom__reg_live(reg))
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
	if (!loom__dev_live(dev) || dev->reg != reg) {
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
	if (!loom__reg_live(reg) || !name)
		return NULL;
	for (int p = 0; p < LOOM__PROC_COUNT; p++)
		if (strcmp(name, loom__proc_name(p)) == 0 && reg->registered)
			return reg->procs[p];
	return reg_get_proc(reg, name);
}

void *loom__reg_proc(loom_reg_t *reg, enum loom__proc p)
{
	if (!loom__reg_live(reg) || p < 0 || p >= LOOM__PROC_COUNT)
		return NULL;
	if (!reg->registered)
		return reg_get_proc(reg, loom__proc_name(p));
	return reg->procs[p];
}

/* ------------------------------------------------------------------------
 * Devices.
 */

static const char *dev_plugin_name(void *obj)
{
	loom_dev_t *dev = obj;

	return dev->iface.get_name ? dev->iface.get_name(dev) : NULL;
}

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
	static const struct loom__wrap wrap = {
		"device", LOOM__KIND_DEV, required, LOOM__N_OF(required),
		dev_plugin_name,
	};
	struct loom_dev *dev;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_dev_new: out is NULL");
	*out = NULL;
	if (!loom__reg_live(reg))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_dev_new: reg is not a loom reg");
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	dev->reg = reg;
	st = loom__wrap_init(dev, &dev->iface, sizeof(dev->iface), iface,
			     &dev->context, context, &wrap, NULL);
	if (st) {
		free(dev);
		return st;
	}
	dev->next = reg->devs;
	reg->devs = dev;
	*out = dev;
	return LOOM_OK;
}

void *loom_dev_context(loom_dev_t *dev)
{
	return loom__dev_live(dev) ? dev->context : NULL;
}

const char *loom_dev_name(loom_dev_t *dev)
{
	const char *name;

	if (!loom__dev_live(dev))
		return "(null)";
	name = dev->iface.get_name(dev);
	return name ? name : "(unnamed)";
}

const char *loom_dev_description(loom_dev_t *dev)
{
	const char *(*f)(loom_dev_t *);
	const char *d;

	if (!loom__dev_live(dev))
		return "(null)";
	f = dev->iface.get_description;
	d = f ? f(dev) : NULL;
	return d ? d : loom_dev_name(dev);
}

enum loom_dev_type loom_dev_type(loom_dev_t *dev)
{
	enum loom_dev_type t;

	if (!loom__dev_live(dev))
		return LOOM_DEV_TYPE_CPU;
	t = dev->iface.get_type(dev);
	return (unsigned)t < N_DEV_TYPES ? t : LOOM_DEV_TYPE_ACCEL;
}

void loom_dev_memory(loom_dev_t *dev, size_t *free_, size_t *total)
{
	size_t f = 0, t = 0;

	if (loom__dev_live(dev) && dev->iface.get_memory)
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

	if (!loom__dev_live(dev))
		return 0;
	f = dev->iface.get_caps;
	return f ? f(dev) : 0;
}

enum loom_dev_rank loom_dev_rank(loom_dev_t *dev)
{
	enum loom_dev_rank (*f)(loom_dev_t *);
	enum loom_dev_rank r;

	if (!loom__dev_live(dev))
		return LOOM_DEV_RANK_NONE;
	f = dev->iface.get_rank;
	r = f ? f(dev) : LOOM_DEV_RANK_NONE;
	/* Registration refused unknown ranks; a device made later that
	 * says one anyway declares none. */
	return loom__dev_rank_valid((int)r) ? r : LOOM_DEV_RANK_NONE;
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
	if (!loom__dev_live(dev))
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
	if (!loom__backend_live(be) || be->dev != dev)
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

	if (!loom__dev_live(dev))
		return NULL;
	buft = dev->iface.get_buffer_type(dev);
	if (buft && !loom__buft_live(buft)) {
		loom_log(LOOM_LOG_WARN,
			 "device '%s': get_buffer_type returned a foreign "
			 "pointer",
			 loom_dev_name(dev));
		return NULL;
	}
	return buft;
}

/* What the buffer-type entry point p (of loom_host_buffer_type_fn's
 * signature) gives for dev, when it is a live buffer type; else NULL. */
static loom_buffer_type_t *proc_buft(loom_dev_t *dev, enum loom__proc p)
{
	loom_host_buffer_type_fn f;
	loom_buffer_type_t *buft;

	if (!loom__dev_live(dev))
		return NULL;
	f = (loom_host_buffer_type_fn)loom__reg_proc(dev->reg, p);
	buft = f ? f(dev) : NULL;
	return loom__buft_live(buft) ? buft : NULL;
}

loom_buffer_type_t *loom_dev_host_buffer_type(loom_dev_t *dev)
{
	return proc_buft(dev, LOOM__PROC_HOST_BUFFER_TYPE);
}

loom_buffer_type_t *loom_dev_weight_buffer_type(loom_dev_t *dev)
{
	loom_buffer_type_t *buft = proc_buft(dev, LOOM__PROC_WEIGHT_BUFFER_TYPE);

	if (!loom__dev_live(dev))
		return NULL;
	if (buft && loom_buffer_type_device(buft) != dev) {
		loom_log(LOOM_LOG_WARN,
			 "device '%s': weight_buffer_type returned a buffer "
			 "type not of the device", loom_dev_name(dev));
		buft = NULL;
	}
	return buft ? buft : loom_dev_buffer_type(dev);
}

bool loom_dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	if (!loom__dev_live(dev) || !op)
		return false;
	return dev->iface.supports_op(dev, op);
}

bool loom_dev_supports_buft(loom_dev_t *dev, loom_buffer_type_t *buft)
{
	if (!loom__dev_live(dev) || !loom__buft_live(buft))
		return false;
	if (dev->iface.supports_buft)
		return dev->iface.supports_buft(dev, buft);
	return buft == loom_dev_buffer_type(dev) ||
	       (loom_dev_type(dev) == LOOM_DEV_TYPE_CPU &&
		loom_buffer_type_is_host(buft));
}

loom_reg_t *loom_dev_reg(loom_dev_t *dev)
{
	return loom__dev_live(dev) ? dev->reg : NULL;
}
