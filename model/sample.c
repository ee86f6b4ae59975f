/* SPDX-License-Identifier: MIT */
/* sample.c - the next token from logits (loom_model_sample): greedy, or
 * a draw over the top-k, then top-p, likeliest tokens of the softmax at
 * a temperature, from a splitmix64 generator.
 */
#include <loom/loom-model.h>

#include <math.h>
#include <stdlib.h>

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

struct cand {
	float p;
	int32_t id;
};

static int cmp_cand(const void *a, const void *b)
{
	float x = ((const struct cand *)a)->p, y = ((const struct cand *)b)->p;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* The candidates' count after top-k and top-p; their weights turned
 * into exp(logit / temp) (relative to the best). */
static int64_t keep(const struct loom_sample_params *p, struct cand *c,
		    int64_t n)
{
	double sum = 0, acc = 0;

	if (p->top_k > 0 && p->top_k < n)
		n = p->top_k;
	for (int64_t i = 0; i < n; i++) {
		c[i].p = expf(c[i].p);
		sum += c[i].p;
	}
	for (int64_t i = 0; i < n; i++) {
		acc += c[i].p / sum;
		if (acc >= p->top_p)
			return i + 1;
	}
	return n;
}

int loom_model_sample(const float *logits, int64_t n_vocab,
		      const struct loom_sample_params *params, uint64_t *rng,
		      int32_t *out)
{
	int64_t best = 0, n;
	struct cand *c;
	double sum = 0, r;

	if (!logits || !out || (params && params->temp > 0 && !rng))
		return loom_error_set(LOOM_E_INVAL, "loom_model_sample: NULL "
				      "argument");
	if (n_vocab < 1 || n_vocab > INT32_MAX)
		return loom_error_set(LOOM_E_INVAL, "loom_model_sample: %lld "
				      "logits", (long long)n_vocab);
	for (int64_t i = 1; i < n_vocab; i++)
		if (logits[i] > logits[best])
			best = i;
	*out = (int32_t)best;
	if (!params || !(params->temp > 0))
		return LOOM_OK;
	if (params->top_k < 0 || !(params->top_p > 0 && params->top_p <= 1))
		return loom_error_set(LOOM_E_INVAL, "loom_model_sample: top_k "
				      "%d, top_p %g", params->top_k,
				      (double)params->top_p);
	c = malloc((size_t)n_vocab * sizeof(*c));
	if (!c)
		return loom_error_set(LOOM_E_NOMEM, "no memory");
	for (int64_t i = 0; i < n_vocab; i++) {
		c[i].id = (int32_t)i;
		c[i].p = (logits[i] - logits[best]) / params->temp;
	}
	qsort(c, (size_t)n_vocab, sizeof(*c), cmp_cand);
	n = keep(params, c, n_vocab);
	for (int64_t i = 0; i < n; i++)
		sum += c[i].p;
	r = (double)(rng_next(rng) >> 11) * (1.0 / 9007199254740992.0) * sum;
	*out = c[n - 1].id;
	for (int64_t i = 0; i < n; i++) {
		r -= c[i].p;
		if (r <= 0) {
			*out = c[i].id;
			break;
		}
	}
	free(c);
	return LOOM_OK;
}
