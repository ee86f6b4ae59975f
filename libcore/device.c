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
	return loom__reg_plugin_name(obj);
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

/* What the plugin says, unchecked: each of these methods is called here
 * only.  The getters below clamp what is out of range; registration
 * (registry.c) refuses the plugin instead.  The caller is inside a call
 * (loom__call_begin). */
const char *loom__reg_plugin_name(loom_reg_t *reg)
{
	return reg->iface.get_name ? reg->iface.get_name(reg) : NULL;
}

size_t loom__reg_plugin_dev_count(loom_reg_t *reg)
{
	return reg->iface.get_dev_count(reg);
}

loom_dev_t *loom__reg_plugin_dev(loom_reg_t *reg, size_t i)
{
	return reg->iface.get_dev(reg, i);
}

void *loom_reg_context(loom_reg_t *reg)
{
	void *context;

	if (!loom__reg_enter(reg))
		return NULL;
	context = reg->context;
	loom__call_end();
	return context;
}

const char *loom_reg_name(loom_reg_t *reg)
{
	const char *name;

	if (!loom__reg_enter(reg))
		return "(null)";
	name = loom__reg_plugin_name(reg);
	loom__call_end();
	return name ? name : "(unnamed)";
}

/* The device count, 0 when the plugin reports too many (inside a call). */
static size_t dev_count(loom_reg_t *reg)
{
	size_t n = loom__reg_plugin_dev_count(reg);

	if (n > LOOM__MAX_DEVS) {
		loom_log(LOOM_LOG_WARN, "plugin '%s' reports %zu devices",
			 loom_reg_name(reg), n);
		return 0;
	}
	return n;
}

size_t loom_reg_dev_count(loom_reg_t *reg)
{
	size_t n;

	if (!loom__reg_enter(reg))
		return 0;
	n = dev_count(reg);
	loom__call_end();
	return n;
}

loom_dev_t *loom_reg_dev(loom_reg_t *reg, size_t i)
{
	loom_dev_t *dev = NULL;

	if (!loom__reg_enter(reg))
		return NULL;
	if (i < dev_count(reg))
		dev = loom__reg_plugin_dev(reg, i);
	if (dev && (!loom__dev_live(dev) || dev->reg != reg)) {
		loom_log(LOOM_LOG_WARN,
			 "plugin '%s': device %zu is not one of its devices",
			 loom_reg_name(reg), i);
		dev = NULL;
	}
	loom__call_end();
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
	void *fn = NULL;
	int p;

	if (!name || !loom__reg_enter(reg))
		return NULL;
	for (p = 0; p < LOOM__PROC_COUNT; p++)
		if (strcmp(name, loom__proc_name(p)) == 0 && reg->registered)
			break;
	fn = p < LOOM__PROC_COUNT ? reg->procs[p] : reg_get_proc(reg, name);
	loom__call_end();
	return fn;
}

void *loom__reg_proc(loom_reg_t *reg, enum loom__proc p)
{
	void *fn;

	if (p < 0 || p >= LOOM__PROC_COUNT || !loom__reg_enter(reg))
		return NULL;
	fn = reg->registered ? reg->procs[p]
			     : reg_get_proc(reg, loom__proc_name(p));
	loom__call_end();
	return fn;
}

/* ------------------------------------------------------------------------
 * Devices.
 */

static const char *dev_plugin_name(void *obj)
{
	return loom__dev_plugin_name(obj);
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
	LOOM__LIST_PUSH(reg->devs, dev);
	*out = dev;
	return LOOM_OK;
}

const char *loom__dev_plugin_name(loom_dev_t *dev)
{
	return dev->iface.get_name ? dev->iface.get_name(dev) : NULL;
}

unsigned loom__dev_plugin_type(loom_dev_t *dev)
{
	return (unsigned)dev->iface.get_type(dev);
}

int loom__dev_plugin_rank(loom_dev_t *dev)
{
	enum loom_dev_rank (*f)(loom_dev_t *) = dev->iface.get_rank;

	return f ? (int)f(dev) : LOOM_DEV_RANK_NONE;
}

loom_buffer_type_t *loom__dev_plugin_buffer_type(loom_dev_t *dev)
{
	return dev->iface.get_buffer_type(dev);
}

void *loom_dev_context(loom_dev_t *dev)
{
	void *context;

	if (!loom__dev_enter(dev))
		return NULL;
	context = dev->context;
	loom__call_end();
	return context;
}

const char *loom_dev_name(loom_dev_t *dev)
{
	const char *name;

	if (!loom__dev_enter(dev))
		return "(null)";
	name = loom__dev_plugin_name(dev);
	loom__call_end();
	return name ? name : "(unnamed)";
}

const char *loom_dev_description(loom_dev_t *dev)
{
	const char *(*f)(loom_dev_t *);
	const char *d;

	if (!loom__dev_enter(dev))
		return "(null)";
	f = dev->iface.get_description;
	d = f ? f(dev) : NULL;
	if (!d)
		d = loom_dev_name(dev);
	loom__call_end();
	return d;
}

enum loom_dev_type loom_dev_type(loom_dev_t *dev)
{
	unsigned t;

	if (!loom__dev_enter(dev))
		return LOOM_DEV_TYPE_CPU;
	t = loom__dev_plugin_type(dev);
	loom__call_end();
	return t < N_DEV_TYPES ? (enum loom_dev_type)t : LOOM_DEV_TYPE_ACCEL;
}

void loom_dev_memory(loom_dev_t *dev, size_t *free_, size_t *total)
{
	size_t f = 0, t = 0;

	if (loom__dev_enter(dev)) {
		if (dev->iface.get_memory)
			dev->iface.get_memory(dev, &f, &t);
		loom__call_end();
	}
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
	uint32_t caps;

	if (!loom__dev_enter(dev))
		return 0;
	f = dev->iface.get_caps;
	caps = f ? f(dev) : 0;
	loom__call_end();
	return caps;
}

enum loom_dev_rank loom_dev_rank(loom_dev_t *dev)
{
	int r;

	if (!loom__dev_enter(dev))
		return LOOM_DEV_RANK_NONE;
	r = loom__dev_plugin_rank(dev);
	loom__call_end();
	/* Registration refused unknown ranks; a device made later that
	 * says one anyway declares none. */
	return loom__dev_rank_valid(r) ? (enum loom_dev_rank)r
				       : LOOM_DEV_RANK_NONE;
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
	if (!loom__dev_enter(dev))
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
	} else if (!loom__backend_live(be) || be->dev != dev) {
		st = loom_error_set(LOOM_E_PLUGIN,
				    "device '%s': init_backend returned no "
				    "backend of this device",
				    loom_dev_name(dev));
	} else {
		*out = be;
	}
	loom__call_end();
	return st;
}

/* dev's buffer type when it is a live one, else NULL (inside a call). */
static loom_buffer_type_t *dev_buffer_type(loom_dev_t *dev)
{
	loom_buffer_type_t *buft = loom__dev_plugin_buffer_type(dev);

	if (buft && !loom__buft_live(buft)) {
		loom_log(LOOM_LOG_WARN,
			 "device '%s': get_buffer_type returned a foreign "
			 "pointer",
			 loom_dev_name(dev));
		return NULL;
	}
	return buft;
}

loom_buffer_type_t *loom_dev_buffer_type(loom_dev_t *dev)
{
	loom_buffer_type_t *buft;

	if (!loom__dev_enter(dev))
		return NULL;
	buft = dev_buffer_type(dev);
	loom__call_end();
	return buft;
}

/* What the buffer-type entry point p (of loom_host_buffer_type_fn's
 * signature) gives for dev, when it is a live buffer type; else NULL
 * (inside a call). */
static loom_buffer_type_t *proc_buft(loom_dev_t *dev, enum loom__proc p)
{
	loom_host_buffer_type_fn f;
	loom_buffer_type_t *buft;

	f = (loom_host_buffer_type_fn)loom__reg_proc(dev->reg, p);
	buft = f ? f(dev) : NULL;
	return loom__buft_live(buft) ? buft : NULL;
}

loom_buffer_type_t *loom_dev_host_buffer_type(loom_dev_t *dev)
{
	loom_buffer_type_t *buft;

	if (!loom__dev_enter(dev))
		return NULL;
	buft = proc_buft(dev, LOOM__PROC_HOST_BUFFER_TYPE);
	loom__call_end();
	return buft;
}

loom_buffer_type_t *loom_dev_weight_buffer_type(loom_dev_t *dev)
{
	loom_buffer_type_t *buft;

	if (!loom__dev_enter(dev))
		return NULL;
	buft = proc_buft(dev, LOOM__PROC_WEIGHT_BUFFER_TYPE);
	if (buft && loom_buffer_type_device(buft) != dev) {
		loom_log(LOOM_LOG_WARN,
			 "device '%s': weight_buffer_type returned a buffer "
			 "type not of the device", loom_dev_name(dev));
		buft = NULL;
	}
	if (!buft)
		buft = dev_buffer_type(dev);
	loom__call_end();
	return buft;
}

bool loom_dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	bool yes;

	if (!op || !loom__dev_enter(dev))
		return false;
	yes = dev->iface.supports_op(dev, op);
	loom__call_end();
	return yes;
}

bool loom_dev_supports_buft(loom_dev_t *dev, loom_buffer_type_t *buft)
{
	bool yes;

	if (!loom__dev_enter(dev))
		return false;
	if (!loom__buft_live(buft))
		yes = false;
	else if (dev->iface.supports_buft)
		yes = dev->iface.supports_buft(dev, buft);
	else
		yes = buft == dev_buffer_type(dev) ||
		      (loom_dev_type(dev) == LOOM_DEV_TYPE_CPU &&
		       loom_buffer_type_is_host(buft));
	loom__call_end();
	return yes;
}

loom_reg_t *loom_dev_reg(loom_dev_t *dev)
{
	loom_reg_t *reg;

	if (!loom__dev_enter(dev))
		return NULL;
	reg = dev->reg;
	loom__call_end();
	return reg;
}
