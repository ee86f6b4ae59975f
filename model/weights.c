/* SPDX-License-Identifier: MIT */
/* weights.c - a decoder's weights and cache: the tensors of the role
 * table its architecture has, placed on one device or over two (partial
 * offload), allocated, and filled from a source or with seeded synthetic
 * values.
 */
#include "decoder-int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------------
 * Synthetic weights: a splitmix64 stream per tensor, keyed on the seed and
 * the tensor's name, so values do not depend on creation order or device.
 */
static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
	uint64_t h = 0xcbf29ce484222325ull;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 0x100000001b3ull;
	return h;
}

/* Fills dst with offset + scale * u, u uniform in [-1, 1). */
static void fill_uniform(float *dst, int64_t n, uint64_t seed, float offset,
			 float scale)
{
	uint64_t s = seed;

	for (int64_t i = 0; i < n; i++) {
		float u = (float)(splitmix64(&s) >> 40) * (1.0f / 8388608.0f);

		dst[i] = offset + scale * (u - 1.0f);
	}
}

/* Draws t's values in F32 and stores them converted to t's type. */
static int fill_tensor(struct loom_tensor *t, uint64_t seed, float offset,
		       float scale)
{
	int64_t n = loom_tensor_n_elements(t);
	size_t bytes = loom_tensor_n_bytes(t);
	float *f;
	void *conv = NULL;
	int ret;

	f = malloc((size_t)n * sizeof(*f));
	if (!f)
		return loom_error_set(LOOM_E_NOMEM, "llama: no memory for %s",
				      t->name);
	fill_uniform(f, n, splitmix64(&seed) ^ name_hash(t->name), offset,
		     scale);
	if (t->type != LOOM_TYPE_F32) {
		conv = malloc(bytes);
		if (!conv) {
			ret = loom_error_set(LOOM_E_NOMEM,
					     "llama: no memory for %s",
					     t->name);
			goto out;
		}
		ret = loom_type_convert(LOOM_TYPE_F32, f, t->type, conv, n);
		if (ret)
			goto out;
	}
	ret = loom_tensor_set(t, conv ? conv : f, 0, bytes);
out:
	free(conv);
	free(f);
	return ret;
}

/* A matrix whose products keep activations near unit variance. */
static float mat_scale(int64_t k)
{
	return sqrtf(3.0f / (float)k);
}

static struct loom_tensor *new_weight(loom_ctx_t *ctx, enum loom_type type,
				      int n_dims, int64_t ne0, int64_t ne1,
				      int64_t ne2, const char *name)
{
	int64_t ne[3] = { ne0, ne1, ne2 };
	struct loom_tensor *t = loom_tensor_new(ctx, type, n_dims, ne);

	if (t) {
		loom_tensor_set_name(t, name);
		loom_tensor_set_flags(t, LOOM_TENSOR_WEIGHT);
	}
	return t;
}


/* True when dev runs the op that uses t as u says (a probe of
 * descriptors, never computed). */
static bool dev_runs_use(loom_ctx_t *c, loom_dev_t *dev, struct loom_tensor *t,
			 enum model_use u)
{
	struct loom_tensor *x, *ids, *v, *r;

	switch (u) {
	case USE_MAT:
		x = loom_tensor_new_2d(c, LOOM_TYPE_F32, t->ne[0], 1);
		r = loom_mul_mat(c, t, x);
		return r && loom_dev_supports_op(dev, r);
	case USE_EXPS:
		x = loom_tensor_new_3d(c, LOOM_TYPE_F32, t->ne[0], 1, 1);
		ids = loom_tensor_new_2d(c, LOOM_TYPE_I32, 1, 1);
		r = loom_mul_mat_id(c, t, x, ids);
		return r && loom_dev_supports_op(dev, r);
	case USE_MUL:
	case USE_ADD:
		if (u == USE_ADD && t->ne[1] > 1) {
			/* a bias per expert (gpt-oss's), added by id */
			x = loom_tensor_new_3d(c, LOOM_TYPE_F32, t->ne[0], 1, 1);
			ids = loom_tensor_new_2d(c, LOOM_TYPE_I32, 1, 1);
			r = loom_add_id(c, x, t, ids);
			return r && loom_dev_supports_op(dev, r);
		}
		x = loom_tensor_new_1d(c, LOOM_TYPE_F32, t->ne[0]);
		r = u == USE_MUL ? loom_mul(c, x, t) : loom_add(c, x, t);
		return r && loom_dev_supports_op(dev, r);
	case USE_CACHE:
		x = loom_tensor_new_3d(c, LOOM_TYPE_F32, t->ne[0], 1, t->ne[2]);
		ids = loom_tensor_new_2d(c, LOOM_TYPE_I32, 1, t->ne[2]);
		r = loom_set_rows(c, t, x, ids);
		if (!r || !loom_dev_supports_op(dev, r))
			return false;
		v = loom_view_3d(c, r, t->ne[0], 1, t->ne[2], t->nb[1],
				 t->nb[2], 0);
		x = loom_tensor_new_3d(c, LOOM_TYPE_F32, t->ne[0], 1, t->ne[2]);
		r = loom_mul_mat(c, v, x);
		if (!r || !loom_dev_supports_op(dev, r))
			return false;
		r = loom_cont(c, loom_transpose(c, v));
		return r && loom_dev_supports_op(dev, r);
	case USE_EMBD:
	case USE_HOST:
		break;
	}
	return false;
}

/* A weight of layer (-1: none) used as u, in the context of the device
 * it goes to: everything on dev without a rest device; else layers
 * [0, n_first) on dev when it runs what uses them, the output with them
 * when every layer is there, and the embeddings and the rest on rest. */
static struct loom_tensor *place_weight(struct llama_model *m,
					enum loom_type type, int n_dims,
					int64_t ne0, int64_t ne1, int64_t ne2,
					const char *name, int64_t layer,
					enum model_use u)
{
	struct loom_tensor *probe, *t, **mats;
	bool first = true;
	int part;

	if (m->rest) {
		first = layer >= 0 ? layer < m->n_first :
				     m->n_first >= m->hp.n_layer;
		if (first && u != USE_EMBD && u != USE_HOST) {
			probe = new_weight(m->probe, type, n_dims, ne0, ne1,
					   ne2, name);
			first = probe && dev_runs_use(m->probe, m->dev, probe,
						      u);
		} else {
			first = false;
		}
	}
	t = new_weight(first ? m->wctx : m->wctx_rest, type, n_dims, ne0, ne1,
		       ne2, name);
	if (!t || u != USE_MAT)
		return t;
	part = first ? 0 : 1;
	mats = realloc(m->mats[part], (m->n_mats[part] + 1) * sizeof(*mats));
	if (!mats) {
		loom_error_set(LOOM_E_NOMEM, "llama: no memory");
		return NULL;
	}
	m->mats[part] = mats;
	m->mats[part][m->n_mats[part]++] = t;
	return t;
}

/* The type of role r's tensor: the source's when there is one (but for
 * the cache, which is the model's). */
static int tensor_type(struct llama_model *m, enum model_tensor r,
		       const char *name, enum loom_type *out)
{
	const struct model_tensor_info *ti = &model_tensor_infos[r];

	*out = ti->type == TT_WEIGHT ? m->hp.wtype :
	       ti->type == TT_CACHE ? m->hp.cache_type : LOOM_TYPE_F32;
	if (!m->src || ti->type == TT_CACHE)
		return LOOM_OK;
	return m->src->type(m->src->user, name, *out, out);
}

/* Role r's tensor of layer il (-1: a global one), when the model has it. */
static int create_tensor(struct llama_model *m, enum model_tensor r,
			 int64_t il)
{
	const struct model_tensor_info *ti = &model_tensor_infos[r];
	struct loom_tensor **slot = il < 0 ? &m->glob[r] :
					     &m->layers[il].t[r];
	char name[LOOM_MAX_NAME];
	enum loom_type ty;
	int64_t ne[3];
	int nd, ret;

	if (!model_tensor_wanted(&m->hp, r))
		return LOOM_OK;
	model_tensor_name(r, il, name, sizeof(name));
	nd = model_tensor_shape(&m->hp, r, ne);
	ret = tensor_type(m, r, name, &ty);
	if (ret)
		return ret;
	*slot = place_weight(m, ty, nd, ne[0], ne[1], ne[2], name, il,
			     ti->use);
	if (!*slot)
		return loom_error_set(LOOM_E_INVAL, "llama: %s: %s", name,
				      loom_error_message());
	return LOOM_OK;
}

/* The tensors of the model, in the order of the table (the caches
 * last), each where place_weight puts it. */
int model_create_tensors(struct llama_model *m)
{
	int ret = LOOM_OK;

	for (int r = 0; r < MT_FIRST_LAYER && !ret; r++)
		if (r != MT_OUTPUT_NORM && r != MT_OUTPUT &&
		    r != MT_ROPE_FREQS)
			ret = create_tensor(m, (enum model_tensor)r, -1);
	for (int64_t i = 0; i < m->hp.n_layer && !ret; i++)
		for (int r = MT_FIRST_LAYER; r < MT_CACHE_K && !ret; r++)
			ret = create_tensor(m, (enum model_tensor)r, i);
	if (!ret)
		ret = create_tensor(m, MT_OUTPUT_NORM, -1);
	if (!ret)
		ret = create_tensor(m, MT_ROPE_FREQS, -1);
	if (!ret)
		ret = create_tensor(m, MT_OUTPUT, -1);
	if (!ret && m->hp.tied_output)
		m->glob[MT_OUTPUT] = m->glob[MT_TOKEN_EMBD];
	for (int64_t i = 0; i < m->hp.n_layer && !ret; i++) {
		ret = create_tensor(m, MT_CACHE_K, i);
		if (!ret)
			ret = create_tensor(m, MT_CACHE_V, i);
	}
	return ret;
}

/* Fills every weight; sums the byte counts the benchmark reports. */
static int fill_ctx(struct llama_model *m, loom_ctx_t *c, uint64_t seed)
{
	const struct llama_hparams *hp = &m->hp;
	struct loom_tensor *t;
	int ret;

	for (t = c ? loom_ctx_first_tensor(c) : NULL; t;
	     t = loom_ctx_next_tensor(c, t)) {
		int64_t il;
		enum model_tensor r = model_tensor_role(t->name, &il);
		enum model_use use = r < MT_COUNT ? model_tensor_infos[r].use :
						    USE_MAT;
		bool cache = use == USE_CACHE, norm = use == USE_MUL;
		size_t bytes = loom_tensor_n_bytes(t);

		if (cache) {
			m->cache_bytes += bytes;
			continue;
		}
		m->weight_bytes += bytes;
		m->n_params += loom_tensor_n_elements(t);
		if (r == MT_TOKEN_EMBD && !hp->tied_output)
			m->decode_bytes += loom_type_row_size(t->type, t->ne[0]);
		else if (use == USE_EXPS)
			m->decode_bytes += bytes / (size_t)hp->n_expert *
					   (size_t)hp->n_expert_used;
		else
			m->decode_bytes += bytes;

		if (m->src)
			ret = m->src->fill(m->src->user, t);
		else if (r == MT_ROPE_FREQS)
			ret = fill_tensor(t, seed, 2.5f, 1.5f); /* [1, 4) */
		else if (norm)
			ret = fill_tensor(t, seed, 1.0f, 0.1f);
		else if (r == MT_TOKEN_EMBD || loom_tensor_n_dims(t) == 1)
			ret = fill_tensor(t, seed, 0.0f, 1.0f);
		else
			ret = fill_tensor(t, seed, 0.0f, mat_scale(t->ne[0]));
		if (ret)
			return ret;
	}
	return LOOM_OK;
}

static int read_freq_factors(struct llama_model *m);

int model_fill_weights(struct llama_model *m, uint64_t seed)
{
	int ret = fill_ctx(m, m->wctx, seed);

	if (!ret)
		ret = fill_ctx(m, m->wctx_rest, seed);
	if (!ret)
		ret = llama_model_clear_cache(m);
	if (!ret && m->glob[MT_ROPE_FREQS])
		ret = read_freq_factors(m);
	return ret;
}

int llama_model_clear_cache(struct llama_model *m)
{
	for (int64_t i = 0; i < m->hp.n_layer; i++) {
		struct loom_tensor *k = m->layers[i].t[MT_CACHE_K];
		struct loom_tensor *v = m->layers[i].t[MT_CACHE_V];
		int ret;

		ret = loom_tensor_memset(k, 0, 0, loom_tensor_n_bytes(k));
		if (!ret)
			ret = loom_tensor_memset(v, 0, 0, loom_tensor_n_bytes(v));
		if (ret)
			return ret;
	}
	return LOOM_OK;
}

/* The frequency factors on the host, where the rope tables are made. */
static int read_freq_factors(struct llama_model *m)
{
	size_t n = loom_tensor_n_bytes(m->glob[MT_ROPE_FREQS]);

	int ret;

	m->freq_factors = malloc(n);
	if (!m->freq_factors)
		return loom_error_set(LOOM_E_NOMEM, "llama: no memory");
	ret = loom_tensor_get(m->glob[MT_ROPE_FREQS], m->freq_factors, 0, n);
	for (int64_t i = 0; !ret && i < m->glob[MT_ROPE_FREQS]->ne[0]; i++)
		if (!(m->freq_factors[i] > 0) || isinf(m->freq_factors[i]))
			ret = loom_error_set(LOOM_E_INVAL,
					     "llama: rope_freqs.weight: factor "
					     "%lld is %g, not a positive "
					     "number", (long long)i,
					     (double)m->freq_factors[i]);
	return ret;
}

/* Places the matrices of part (0: on dev, 1: on rest) that only mul_mat
 * reads in one buffer of that device's weight buffer type, where that is
 * not the device's own buffer type. */
static int alloc_mats(struct llama_model *m, int part, loom_dev_t *dev)
{
	loom_buffer_type_t *wbt = loom_dev_weight_buffer_type(dev);
	struct loom_tensor **mats = m->mats[part];
	size_t n = m->n_mats[part], align, size = 0, off = 0;
	int ret = LOOM_OK;

	if (!n || !wbt || wbt == loom_dev_buffer_type(dev))
		return LOOM_OK;
	align = loom_buffer_type_alignment(wbt);
	for (size_t i = 0; i < n; i++)
		size += (loom_buffer_type_alloc_size(wbt, mats[i]) + align -
			 1) / align * align;
	ret = loom_buffer_type_alloc_buffer(wbt, size, &m->wbuf_mat[part]);
	for (size_t i = 0; !ret && i < n; i++) {
		ret = loom_tensor_place(mats[i], m->wbuf_mat[part], off);
		off += (loom_buffer_type_alloc_size(wbt, mats[i]) + align -
			1) / align * align;
	}
	if (!ret)
		loom_buffer_set_usage(m->wbuf_mat[part],
				      LOOM_BUFFER_USAGE_WEIGHTS);
	return ret;
}

/* Allocates the weights of c on dev in one buffer marked as weights. */
static int alloc_weights(loom_ctx_t *c, loom_dev_t *dev, loom_buffer_t **out)
{
	loom_buffer_type_t *buft = loom_dev_buffer_type(dev);
	int ret;

	if (!buft)
		return loom_error_set(LOOM_E_DEVICE,
				      "llama: %s has no buffer type",
				      loom_dev_name(dev));
	ret = loom_ctx_alloc_tensors(c, buft, out);
	if (!ret && *out)
		loom_buffer_set_usage(*out, LOOM_BUFFER_USAGE_WEIGHTS);
	return ret;
}

int model_alloc_weights(struct llama_model *m)
{
	int ret = alloc_mats(m, 0, m->dev);

	if (!ret && m->rest)
		ret = alloc_mats(m, 1, m->rest);
	if (!ret)
		ret = alloc_weights(m->wctx, m->dev, &m->wbuf);
	if (!ret && m->rest)
		ret = alloc_weights(m->wctx_rest, m->rest, &m->wbuf_rest);
	return ret;
}

void model_weights_free(struct llama_model *m)
{
	loom_buffer_free(m->wbuf);
	loom_buffer_free(m->wbuf_rest);
	for (int part = 0; part < 2; part++) {
		loom_buffer_free(m->wbuf_mat[part]);
		free(m->mats[part]);
	}
	loom_ctx_free(m->wctx);
	loom_ctx_free(m->wctx_rest);
	loom_ctx_free(m->probe);
	free(m->freq_factors);
}
