/* SPDX-License-Identifier: MIT */
/* load.c - a model's weights uploaded from a GGUF file's mapping (every
 * tensor of the file used, none missing).
 */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct gguf_tensor *need_tensor(const struct gguf *g,
					     const char *name)
{
	const struct gguf_tensor *t = gguf_tensor_find(g, name);

	if (!t)
		loom_error_set(LOOM_E_INVAL, "gguf: tensor '%s' is missing",
			       name);
	return t;
}

/* ------------------------------------------------------------------------
 * Weights.
 */
struct source {
	const struct gguf *g;
	bool *used;
	model_progress_fn progress;
	void *user;
	size_t done, total;
};

static int src_type(void *user, const char *name, enum loom_type def,
		    enum loom_type *out)
{
	struct source *s = user;
	const struct gguf_tensor *t = need_tensor(s->g, name);

	(void)def;
	if (!t)
		return LOOM_E_INVAL;
	s->used[t - gguf_tensor_get(s->g, 0)] = true;
	return gguf_tensor_loom_type(t, out);
}

static int src_fill(void *user, struct loom_tensor *t)
{
	struct source *s = user;
	const struct gguf_tensor *f = gguf_tensor_find(s->g, t->name);
	int ret;

	if (!f)
		return loom_error_set(LOOM_E_INVAL, "gguf: tensor '%s' is "
				      "missing", t->name);
	for (int d = 0; d < LOOM_MAX_DIMS; d++)
		if (f->ne[d] != t->ne[d])
			return loom_error_set(LOOM_E_INVAL,
					      "gguf: tensor '%s' is [%lld, "
					      "%lld, %lld], the model needs "
					      "[%lld, %lld, %lld]", t->name,
					      (long long)f->ne[0],
					      (long long)f->ne[1],
					      (long long)f->ne[2],
					      (long long)t->ne[0],
					      (long long)t->ne[1],
					      (long long)t->ne[2]);
	if (f->size != loom_tensor_n_bytes(t))
		return loom_error_set(LOOM_E_INVAL, "gguf: tensor '%s': size "
				      "mismatch", t->name);
	ret = gguf_check_read(s->g, f->data, (size_t)f->size);
	if (ret)
		return loom_error_set(ret, "tensor '%s': %s", t->name,
				      loom_error_message());
	ret = loom_tensor_set(t, f->data, 0, (size_t)f->size);
	if (ret)
		return loom_error_set(ret, "tensor '%s': %s", t->name,
				      loom_error_message());
	gguf_drop_pages(s->g, f->data, (size_t)f->size);
	s->done += (size_t)f->size;
	if (s->progress)
		s->progress(s->done, s->total, s->user);
	return LOOM_OK;
}

int model_load(const struct gguf *g, const struct llama_hparams *hp,
	       loom_dev_t *dev, struct llama_model **out)
{
	return model_load_progress(g, hp, dev, NULL, NULL, out);
}

int model_load_progress(const struct gguf *g, const struct llama_hparams *hp,
			loom_dev_t *dev, model_progress_fn progress,
			void *user, struct llama_model **out)
{
	struct llama_placement pl = { .first = dev };

	return model_load_placed(g, hp, &pl, progress, user, out);
}

int model_load_placed(const struct gguf *g, const struct llama_hparams *hp,
		      const struct llama_placement *pl,
		      model_progress_fn progress, void *user,
		      struct llama_model **out)
{
	struct source s = { .g = g, .progress = progress, .user = user };
	struct llama_source src = {
		.type = src_type, .fill = src_fill, .user = &s,
	};
	size_t n = gguf_n_tensors(g);
	int ret;

	for (size_t i = 0; i < n; i++)
		s.total += (size_t)gguf_tensor_get(g, i)->size;
	s.used = calloc(n ? n : 1, sizeof(*s.used));
	if (!s.used)
		return loom_error_set(LOOM_E_NOMEM, "no memory");
	/* A tensor the graph would not read means a model it would get
	 * wrong: refused. */
	ret = llama_model_load_placed(hp, pl, &src, out);
	for (size_t i = 0; i < n && !ret; i++) {
		if (s.used[i])
			continue;
		ret = loom_error_set(LOOM_E_UNSUPPORTED,
				     "gguf: tensor '%s' is not used by this "
				     "architecture",
				     gguf_tensor_get(g, i)->name);
		llama_model_free(*out);
		*out = NULL;
	}
	free(s.used);
	return ret;
}

bool model_dev_runs(const struct gguf *g, const struct llama_hparams *hp,
		    loom_dev_t *dev, char *what, size_t size)
{
	struct source s = { .g = g };
	struct llama_source src = {
		.type = src_type, .fill = src_fill, .user = &s,
	};
	size_t n = gguf_n_tensors(g);
	bool ok;

	s.used = calloc(n ? n : 1, sizeof(*s.used));
	if (!s.used)
		return false;
	ok = llama_dev_runs(hp, &src, dev, what, size);
	free(s.used);
	return ok;
}
