/* SPDX-License-Identifier: MIT */
/* meta-plugin.c - the meta plugin: its registry entry and descriptor, meta
 * devices (made at load from LOOM_META_DEVICES or the GPUs, and later by
 * the "meta_device_new" entry point), and "split_buffer_type".
 */
#include <config.h>

#include "meta.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define META_MAX_META_DEVS 64

static struct {
	pthread_mutex_t lock;
	loom_reg_t *reg;
	int n_devs;
	struct meta_dev *devs[META_MAX_META_DEVS];
} G = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* The meta device behind dev, or NULL when dev is not one of ours. */
struct meta_dev *meta_dev_of(loom_dev_t *dev)
{
	struct meta_dev *md = NULL;

	if (!dev)
		return NULL;
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < G.n_devs; i++)
		if (G.devs[i]->dev == dev)
			md = G.devs[i];
	pthread_mutex_unlock(&G.lock);
	return md;
}

/* ---- device ---- */

static const char *dev_get_name(loom_dev_t *dev)
{
	struct meta_dev *md = loom_dev_context(dev);

	return md->name;
}

static const char *dev_get_description(loom_dev_t *dev)
{
	struct meta_dev *md = loom_dev_context(dev);

	return md->desc;
}

/* The sum of the members' memory (a repeated device counts once). */
static void dev_get_memory(loom_dev_t *dev, size_t *free_b, size_t *total)
{
	struct meta_dev *md = loom_dev_context(dev);

	*free_b = 0;
	*total = 0;
	for (int j = 0; j < md->n; j++) {
		size_t f = 0, t = 0;
		bool seen = false;

		for (int k = 0; k < j; k++)
			if (md->members[k] == md->members[j])
				seen = true;
		if (seen)
			continue;
		loom_dev_memory(md->members[j], &f, &t);
		*free_b += f;
		*total += t;
	}
}

static enum loom_dev_type dev_get_type(loom_dev_t *dev)
{
	(void)dev;
	return LOOM_DEV_TYPE_META;
}

/* As good as its weakest member: over two primary GPUs it is primary,
 * with a device of a few ops among its members it is no better. */
static enum loom_dev_rank dev_get_rank(loom_dev_t *dev)
{
	struct meta_dev *md = loom_dev_context(dev);
	enum loom_dev_rank rank = LOOM_DEV_RANK_PRIMARY;

	for (int j = 0; j < md->n; j++)
		if (loom_dev_rank(md->members[j]) < rank)
			rank = loom_dev_rank(md->members[j]);
	return rank;
}

static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	(void)params;
	return meta_backend_new(loom_dev_context(dev), out);
}

static loom_buffer_type_t *dev_get_buffer_type(loom_dev_t *dev)
{
	struct meta_dev *md = loom_dev_context(dev);

	return md->buft;
}

/* Whether a node has a rule is known only with its sources' states;
 * compute and loom_meta_check() say so with a message. */
static bool dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	(void)dev;
	return op->op < LOOM_OP_COUNT;
}

static bool dev_supports_buft(loom_dev_t *dev, loom_buffer_type_t *buft)
{
	struct meta_dev *md = loom_dev_context(dev);

	return buft == md->buft || (buft && buft == md->wbuft);
}

static const struct loom_dev_iface meta_dev_iface = {
	.size = sizeof(struct loom_dev_iface),
	.get_name = dev_get_name,
	.get_description = dev_get_description,
	.get_memory = dev_get_memory,
	.get_type = dev_get_type,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_get_buffer_type,
	.supports_op = dev_supports_op,
	.supports_buft = dev_supports_buft,
	.get_rank = dev_get_rank,
};

/* ---- making meta devices ---- */

static bool same_key(const struct meta_dev *md, loom_dev_t *const *devs,
		     size_t n, loom_split_fn split, void *userdata,
		     const struct meta_dev *want, loom_reg_t *world)
{
	if ((md->world ? md->world->reg : NULL) != world)
		return false;
	if ((size_t)md->n != n || md->split != split ||
	    md->userdata != userdata || md->has_ratios != want->has_ratios ||
	    md->reduce_type != want->reduce_type ||
	    md->bf16_min_bytes != want->bf16_min_bytes ||
	    md->force_fallback != want->force_fallback)
		return false;
	for (size_t j = 0; j < n; j++) {
		if (md->members[j] != devs[j])
			return false;
		if (md->has_ratios && md->ratios[j] != want->ratios[j])
			return false;
	}
	return true;
}

/* The world LOOM_META_WORLD names ("mpi"), *out NULL when it is unset. */
static int world_from_env(loom_reg_t **out)
{
	const char *v = loom_env_get("LOOM_META_WORLD");

	*out = NULL;
	if (!v || !*v)
		return LOOM_OK;
	*out = loom_reg_by_name(v);
	if (!*out)
		return loom_error_set(LOOM_E_NOT_FOUND, "LOOM_META_WORLD=%s: "
				      "plugin %s is not loaded (not started "
				      "by mpirun? see loom-info)", v, v);
	return LOOM_OK;
}

/* Reads the options the caller's struct has (opts->size says how many);
 * *world is the world asked for, else, when env is set, LOOM_META_WORLD's. */
static int read_opts(const struct loom_meta_opts *opts, size_t n, bool env,
		     struct meta_dev *want, loom_reg_t **world)
{
	double sum = 0;

	want->reduce_type = LOOM_TYPE_F32;
	*world = NULL;
	if (!opts)
		return env ? world_from_env(world) : LOOM_OK;
#define HAS(field)                                                           \
	(opts->size >= offsetof(struct loom_meta_opts, field) +              \
			       sizeof(opts->field))
	if (opts->size < sizeof(opts->size))
		return loom_error_set(LOOM_E_INVAL, "meta options: size %u",
				      opts->size);
	if (HAS(ratios) && opts->ratios) {
		for (size_t j = 0; j < n; j++) {
			float r = opts->ratios[j];

			if (!isfinite(r) || r < 0)
				return loom_error_set(LOOM_E_INVAL,
						      "meta options: ratio %zu "
						      "is %g", j, (double)r);
			want->ratios[j] = r;
			sum += r;
		}
		if (sum <= 0)
			return loom_error_set(LOOM_E_INVAL,
					      "meta options: the ratios sum "
					      "to zero");
		want->has_ratios = true;
	}
	if (HAS(reduce_type) && opts->reduce_type != LOOM_TYPE_F32) {
		if (opts->reduce_type != LOOM_TYPE_BF16)
			return loom_error_set(
				LOOM_E_INVAL,
				"meta options: reduce type %s (F32 or BF16)",
				loom_type_name(opts->reduce_type));
		want->reduce_type = LOOM_TYPE_BF16;
	}
	if (HAS(bf16_min_bytes))
		want->bf16_min_bytes = opts->bf16_min_bytes;
	if (HAS(force_fallback))
		want->force_fallback = opts->force_fallback;
	if (HAS(world))
		*world = opts->world;
#undef HAS
	return *world || !env ? LOOM_OK : world_from_env(world);
}

static void meta_dev_destroy(struct meta_dev *md)
{
	meta_world_free(md->world);
	free(md->desc);
	free(md);
}

/* "meta(cpu0,cpu1)", and over a world ", rank 0 of 2 (4 members)". */
static int describe(struct meta_dev *md)
{
	size_t len = 64;
	char *p;

	for (int j = 0; j < md->n; j++)
		len += strlen(loom_dev_name(md->members[j])) + 1;
	md->desc = p = malloc(len);
	if (!p)
		return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
	p += sprintf(p, "meta(");
	for (int j = 0; j < md->n; j++)
		p += sprintf(p, "%s%s", j ? "," : "",
			     loom_dev_name(md->members[j]));
	p += sprintf(p, ")");
	if (md->world)
		sprintf(p, ", rank %d of %d (%d members)", md->world->rank,
			md->world->n_ranks, md->n_all);
	return LOOM_OK;
}

/* Makes and registers a meta device, joining world when not NULL (every
 * rank makes its own at the same time); G.lock is held. */
static int meta_dev_create(loom_dev_t *const *devs, size_t n,
			   loom_split_fn split, void *userdata,
			   const struct meta_dev *want, loom_reg_t *world,
			   struct meta_dev **out)
{
	struct meta_dev *md;
	int rc;

	if (G.n_devs == META_MAX_META_DEVS)
		return loom_error_set(LOOM_E_NOMEM, "meta: at most %d meta "
				      "devices", META_MAX_META_DEVS);
	md = calloc(1, sizeof(*md));
	if (!md)
		return loom_error_set(LOOM_E_NOMEM, "meta: no memory");
	*md = *want;
	md->n = (int)n;
	md->split = split;
	md->userdata = userdata;
	md->max_align = 1;
	md->min_max_size = SIZE_MAX;
	for (size_t j = 0; j < n; j++) {
		loom_buffer_type_t *b = loom_dev_buffer_type(devs[j]);
		size_t a = loom_buffer_type_alignment(b), m = loom_buffer_type_max_size(b);

		md->members[j] = devs[j];
		if (a > md->max_align)
			md->max_align = a;
		if (m < md->min_max_size)
			md->min_max_size = m;
		md->ratios_all[j] = md->has_ratios ? md->ratios[j] : 1.0f;
	}
	md->n_all = md->n;
	md->first = 0;
	snprintf(md->name, sizeof(md->name), "meta%d", G.n_devs);
	if (world) {
		rc = meta_world_join(md, world);
		if (rc)
			goto err_free;
	}
	rc = describe(md);
	if (rc)
		goto err_free;

	rc = loom_dev_new(G.reg, &meta_dev_iface, md, &md->dev);
	if (rc)
		goto err_free;
	rc = meta_buft_new(md, G.reg);
	if (rc)
		goto err_free;
	G.devs[G.n_devs++] = md;
	*out = md;
	return LOOM_OK;

err_free:
	meta_dev_destroy(md);
	return rc;
}

/* Finds or makes the meta device; LOOM_META_WORLD applies when env is
 * set and opts names no world. */
static int device_new(loom_dev_t *const *devs, size_t n, loom_split_fn split,
		      void *userdata, const struct loom_meta_opts *opts,
		      bool env, loom_dev_t **out)
{
	struct meta_dev want, *md = NULL;
	loom_reg_t *world;
	int rc;

	if (!out)
		return loom_error_set(LOOM_E_INVAL, "meta_device_new: out is "
				      "NULL");
	*out = NULL;
	if (!devs || n == 0 || n > META_MAX_DEVS)
		return loom_error_set(LOOM_E_INVAL, "meta_device_new: %zu "
				      "devices (1 to %d)", n, META_MAX_DEVS);
	for (size_t j = 0; j < n; j++) {
		if (!devs[j])
			return loom_error_set(LOOM_E_INVAL, "meta_device_new: "
					      "device %zu is NULL", j);
		if (loom_dev_type(devs[j]) == LOOM_DEV_TYPE_META)
			return loom_error_set(LOOM_E_UNSUPPORTED,
					      "meta_device_new: %s is itself "
					      "a meta device",
					      loom_dev_name(devs[j]));
	}
	memset(&want, 0, sizeof(want));
	rc = read_opts(opts, n, env, &want, &world);
	if (rc)
		return rc;
	/* The core's loom_meta_split_default is this policy, reached
	 * through the entry point: one device for either. */
	if (!split || split == loom_meta_split_default)
		split = meta_split_default;

	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < G.n_devs && !md; i++)
		if (same_key(G.devs[i], devs, n, split, userdata, &want,
			     world))
			md = G.devs[i];
	if (!md)
		rc = meta_dev_create(devs, n, split, userdata, &want, world,
				     &md);
	pthread_mutex_unlock(&G.lock);
	if (rc)
		return rc;
	*out = md->dev;
	return LOOM_OK;
}

/* The "meta_device_new" entry point: loom_meta_dev_new(). */
static int meta_device_new(loom_dev_t *const *devs, size_t n,
			   loom_split_fn split, void *userdata,
			   const struct loom_meta_opts *opts, loom_dev_t **out)
{
	return device_new(devs, n, split, userdata, opts, true, out);
}

/* The split of "split_buffer_type": 2D tensors by rows, the rest whole. */
static int split_rows(const struct loom_tensor *t, struct loom_split *out,
		      void *userdata)
{
	(void)userdata;
	memset(out, 0, sizeof(*out));
	out->state = loom_tensor_n_dims(t) == 2 ? LOOM_SPLIT_DIM1
					 : LOOM_SPLIT_MIRRORED;
	return LOOM_OK;
}

/* The "split_buffer_type" entry point: the devices of this process
 * only, whatever LOOM_META_WORLD says. */
static int split_buffer_type(loom_dev_t *const *devs, size_t n,
			     const float *ratios, loom_buffer_type_t **out)
{
	struct loom_meta_opts opts = {
		.size = sizeof(opts),
		.ratios = ratios,
		.reduce_type = LOOM_TYPE_F32,
	};
	loom_dev_t *dev;
	int rc;

	if (!out)
		return loom_error_set(LOOM_E_INVAL, "split_buffer_type: out "
				      "is NULL");
	rc = device_new(devs, n, split_rows, NULL, &opts, false, &dev);
	if (rc)
		return rc;
	*out = loom_dev_buffer_type(dev);
	return LOOM_OK;
}

/* ---- registry entry ---- */

static const char *reg_get_name(loom_reg_t *reg)
{
	(void)reg;
	return "meta";
}

static size_t reg_get_dev_count(loom_reg_t *reg)
{
	size_t n;

	(void)reg;
	pthread_mutex_lock(&G.lock);
	n = (size_t)G.n_devs;
	pthread_mutex_unlock(&G.lock);
	return n;
}

static loom_dev_t *reg_get_dev(loom_reg_t *reg, size_t i)
{
	loom_dev_t *dev = NULL;

	(void)reg;
	pthread_mutex_lock(&G.lock);
	if (i < (size_t)G.n_devs)
		dev = G.devs[i]->dev;
	pthread_mutex_unlock(&G.lock);
	return dev;
}

static void *reg_get_proc_address(loom_reg_t *reg, const char *name)
{
	(void)reg;
	if (!name)
		return NULL;
	if (!strcmp(name, LOOM_PROC_META_DEVICE_NEW))
		return (void *)meta_device_new;
	if (!strcmp(name, LOOM_PROC_META_CHECK))
		return (void *)meta_check;
	if (!strcmp(name, LOOM_PROC_SPLIT_DEFAULT))
		return (void *)meta_split_default;
	if (!strcmp(name, LOOM_PROC_SPLIT_BUFFER_TYPE))
		return (void *)split_buffer_type;
	if (!strcmp(name, LOOM_PROC_META_BUFFER_DEV_SIZES))
		return (void *)meta_buffer_dev_sizes;
	if (!strcmp(name, LOOM_PROC_META_BACKEND_DEV_SIZES))
		return (void *)meta_backend_dev_sizes;
	if (!strcmp(name, LOOM_PROC_WEIGHT_BUFFER_TYPE))
		return (void *)meta_weight_buffer_type;
	if (!strcmp(name, LOOM_PROC_META_TENSOR_SLICE))
		return (void *)meta_tensor_slice;
	return NULL;
}

static void reg_free(loom_reg_t *reg)
{
	(void)reg;
	pthread_mutex_lock(&G.lock);
	for (int i = 0; i < G.n_devs; i++)
		meta_dev_destroy(G.devs[i]);
	G.n_devs = 0;
	G.reg = NULL;
	pthread_mutex_unlock(&G.lock);
}

static const struct loom_reg_iface meta_reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = reg_get_name,
	.get_dev_count = reg_get_dev_count,
	.get_dev = reg_get_dev,
	.get_proc_address = reg_get_proc_address,
	.free = reg_free,
};

/* The device list of LOOM_META_DEVICES ("cpu0,cpu1"), else every GPU when
 * there are at least two.  Returns the count; 0 composes nothing. */
static size_t compose_members(loom_dev_t **devs)
{
	const char *env = loom_env_get("LOOM_META_DEVICES");
	size_t n = 0;

	if (env && *env) {
		char name[LOOM_MAX_NAME];
		const char *p = env;

		while (*p) {
			size_t len = strcspn(p, ",");
			loom_dev_t *dev;

			if (len >= sizeof(name) || n == META_MAX_DEVS) {
				loom_log(LOOM_LOG_WARN, "LOOM_META_DEVICES: "
					 "'%s' is too long", env);
				return 0;
			}
			memcpy(name, p, len);
			name[len] = 0;
			p += len + (p[len] == ',');
			if (!len)
				continue;
			dev = loom_dev_by_name(name);
			if (!dev || loom_dev_type(dev) == LOOM_DEV_TYPE_META) {
				loom_log(LOOM_LOG_WARN, "LOOM_META_DEVICES: "
					 "no device '%s'; no meta device "
					 "made", name);
				return 0;
			}
			devs[n++] = dev;
		}
		return n;
	}
	for (size_t i = 0; i < loom_dev_count() && n < META_MAX_DEVS; i++) {
		loom_dev_t *dev = loom_dev_get(i);

		if (loom_dev_type(dev) == LOOM_DEV_TYPE_GPU)
			devs[n++] = dev;
	}
	/* Over a world, one GPU per rank is tensor parallelism too. */
	env = loom_env_get("LOOM_META_WORLD");
	return n >= (env && *env ? 1 : 2) ? n : 0;
}

static int meta_init(loom_reg_t **out)
{
	loom_dev_t *devs[META_MAX_DEVS];
	struct meta_dev want, *md;
	loom_reg_t *world;
	size_t n;
	int rc;

	rc = loom_reg_new(&meta_reg_iface, NULL, &G.reg);
	if (rc)
		return rc;
	n = compose_members(devs);
	if (n) {
		memset(&want, 0, sizeof(want));
		want.reduce_type = LOOM_TYPE_F32;
		rc = world_from_env(&world);
		pthread_mutex_lock(&G.lock);
		if (!rc)
			rc = meta_dev_create(devs, n, meta_split_default,
					     NULL, &want, world, &md);
		pthread_mutex_unlock(&G.lock);
		if (rc)
			loom_log(LOOM_LOG_WARN, "meta: composing failed: %s",
				 loom_error_message());
		else
			loom_log(LOOM_LOG_INFO, "meta: %s = %s", md->name,
				 md->desc);
	}
	*out = G.reg;
	return LOOM_OK;
}

LOOM_PLUGIN_DEFINE_FLAGS("meta", PACKAGE_VERSION, meta_init, NULL,
			 LOOM_PLUGIN_COMPOSES);
