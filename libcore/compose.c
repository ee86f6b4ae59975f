/* SPDX-License-Identifier: MIT */
/* compose.c - the core side of composed devices: loom_meta_dev_new(),
 * loom_meta_check() and loom_meta_split_default() reach the plugin that
 * composes devices through its entry points.  The device, its split
 * rules and its default policy live in that plugin.
 */
#include "backend-private.h"

/* The reg of the first loaded plugin that declares it composes devices,
 * or NULL. */
static loom_reg_t *find_composer(void)
{
	struct loom__plugin *p;
	loom_reg_t *reg = NULL;

	loom__registry_lock();
	for (size_t i = 0; !reg && (p = loom__plugin_by_index(i)); i++)
		if (p->state == LOOM_PLUGIN_LOADED && p->reg &&
		    loom__plugin_composes(p))
			reg = p->reg;
	loom__registry_unlock();
	return reg;
}

/* Entry point p of the first loaded plugin that declares it composes
 * devices, inside a call the caller ends (loom__call_end); NULL with a
 * message, and no call, when none is loaded or it lacks p. */
static void *composer_proc(enum loom__proc p, const char *who)
{
	loom_reg_t *reg = find_composer();
	void *fn;

	if (!loom__call_begin(reg, LOOM__KIND_REG)) {
		loom_error_set(LOOM_E_NOT_FOUND,
			       "%s: no plugin that composes devices "
			       "is loaded (check LOOM_BACKENDS and loom-info)",
			       who);
		return NULL;
	}
	fn = loom__reg_proc(reg, p);
	if (!fn) {
		loom__call_end();
		loom_error_set(LOOM_E_NOT_FOUND,
			       "%s: plugin %s has no '%s' entry point", who,
			       loom_reg_name(reg), loom__proc_name(p));
	}
	return fn;
}

int loom_meta_dev_new(loom_dev_t *const *devs, size_t n, loom_split_fn split,
		      void *userdata, const struct loom_meta_opts *opts,
		      loom_dev_t **out)
{
	loom_meta_device_new_fn fn;
	int st;

	if (out)
		*out = NULL;
	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_meta_dev_new: out is NULL");
	fn = (loom_meta_device_new_fn)composer_proc(LOOM__PROC_META_DEVICE_NEW,
						 "loom_meta_dev_new");
	if (!fn)
		return LOOM_E_NOT_FOUND;
	st = fn(devs, n, split, userdata, opts, out);
	loom__call_end();
	return st;
}

int loom_meta_check(loom_dev_t *dev, loom_graph_t *g)
{
	loom_meta_check_fn fn;
	int st;

	fn = (loom_meta_check_fn)composer_proc(LOOM__PROC_META_CHECK,
					    "loom_meta_check");
	if (!fn)
		return LOOM_E_NOT_FOUND;
	st = fn(dev, g);
	loom__call_end();
	return st;
}

int64_t loom_meta_head_unit(int64_t n_heads, int64_t head_values,
			    int64_t min_units)
{
	static const int64_t blocks[] = { LOOM_QK_K, LOOM_QK8_0 };

	/* No model has heads so many or so wide: bounds for shapes read
	 * from a file, which keep the products below from overflowing. */
	if (n_heads < 1 || n_heads > 65536 || head_values < 1 ||
	    head_values > ((int64_t)1 << 32))
		return 1;
	if (min_units < 1)
		min_units = 1;
	for (size_t b = 0; b < sizeof(blocks) / sizeof(blocks[0]); b++)
		for (int64_t u = 1; u * min_units <= n_heads; u++)
			if (n_heads % u == 0 && u * head_values % blocks[b] == 0)
				return u;
	return 1;
}

int loom_meta_split_default(const struct loom_tensor *t,
			    struct loom_split *out, void *userdata)
{
	loom_split_fn fn;
	int st;

	fn = (loom_split_fn)composer_proc(LOOM__PROC_SPLIT_DEFAULT,
				      "loom_meta_split_default");
	if (!fn)
		return LOOM_E_NOT_FOUND;
	st = fn(t, out, userdata);
	loom__call_end();
	return st;
}
