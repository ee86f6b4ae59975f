/* SPDX-License-Identifier: MIT */
/* run.c - builds the example Llama model on a chosen device and generates
 * a few tokens greedily: the smallest complete program against the API.
 * With --check it instead compares the device's logits, for a batch and
 * token by token through the cache, with a double-precision reference.
 *
 *   run [--check] [preset] [device] [n_prompt] [n_gen] [type]
 */
#include "decoder.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int argmax(const float *v, int64_t n)
{
	int64_t best = 0;

	for (int64_t i = 1; i < n; i++)
		if (v[i] > v[best])
			best = i;
	return (int)best;
}

static int fail(const char *what, int ret)
{
	fprintf(stderr, "run: %s: %s (%s)\n", what, loom_error_message(),
		loom_strerror(ret));
	return 1;
}

static double nmse(const float *x, const double *ref, size_t n)
{
	double num = 0, den = 0;

	for (size_t i = 0; i < n; i++) {
		num += (x[i] - ref[i]) * (x[i] - ref[i]);
		den += ref[i] * ref[i];
	}
	return den > 0 ? num / den : num;
}

/* The batch and the token-by-token logits against the reference; returns
 * 0 when both are within the tolerance of the weight type. */
static int check(struct llama_model *m, loom_backend_t *be,
		 const int32_t *tokens, int n)
{
	const struct llama_hparams *hp = llama_model_hparams(m);
	size_t v = (size_t)hp->n_vocab, total = v * (size_t)n;
	double tol = hp->wtype == LOOM_TYPE_F32 ? 1e-6 : 1e-3;
	double *ref = malloc(total * sizeof(*ref));
	float *batch = malloc(total * sizeof(*batch));
	float *step = malloc(total * sizeof(*step));
	double e_batch, e_step;
	int ret;

	if (!ref || !batch || !step) {
		ret = fail("check", LOOM_E_NOMEM);
		goto out;
	}
	ret = llama_eval(m, be, tokens, n, 0, true, batch);
	for (int i = 0; !ret && i < n; i++)
		ret = llama_eval(m, be, &tokens[i], 1, i, false, step + v * i);
	if (!ret)
		ret = llama_reference_eval(m, tokens, n, ref);
	if (ret) {
		ret = fail("check", ret);
		goto out;
	}
	e_batch = nmse(batch, ref, total);
	e_step = nmse(step, ref, total);
	printf("NMSE vs double-precision reference (%s, %d tokens): batch "
	       "%.3g, token by token %.3g (tolerance %g)\n",
	       loom_type_name(hp->wtype), n, e_batch, e_step, tol);
	ret = e_batch <= tol && e_step <= tol ? 0 : 1;
	if (ret)
		printf("FAIL\n");
out:
	free(step);
	free(batch);
	free(ref);
	return ret;
}

int main(int argc, char **argv)
{
	bool do_check = argc > 1 && !strcmp(argv[1], "--check");
	int a = do_check ? 2 : 1;
	const char *preset = argc > a ? argv[a] : "tiny";
	const char *dev_name = argc > a + 1 ? argv[a + 1] : NULL;
	int n_prompt = argc > a + 2 ? atoi(argv[a + 2]) : 8;
	int n_gen = argc > a + 3 ? atoi(argv[a + 3]) : 8;
	const char *type = argc > a + 4 ? argv[a + 4] : NULL;
	struct llama_hparams hp;
	struct llama_model *m = NULL;
	loom_backend_t *be = NULL;
	int32_t *tokens = NULL;
	float *logits = NULL;
	loom_dev_t *dev;
	int ret, status = 1;

	ret = llama_hparams_preset(preset, &hp);
	if (ret)
		return fail("preset", ret);
	if (type && loom_type_from_name(type, &hp.wtype)) {
		fprintf(stderr, "run: unknown type %s\n", type);
		return 1;
	}
	if (n_prompt < 1 || n_gen < 0 || n_prompt + n_gen > hp.n_ctx) {
		fprintf(stderr, "run: bad token counts\n");
		return 1;
	}
	ret = loom_load_all();
	if (ret)
		fprintf(stderr, "run: warning: %s\n", loom_error_message());
	dev = dev_name && strcmp(dev_name, "-") ? loom_dev_by_name(dev_name)
						: loom_dev_get(0);
	if (!dev) {
		fprintf(stderr, "run: no device %s\n",
			dev_name ? dev_name : "");
		goto out_unload;
	}

	tokens = calloc((size_t)(n_prompt + n_gen), sizeof(*tokens));
	logits = calloc((size_t)hp.n_vocab, sizeof(*logits));
	if (!tokens || !logits)
		goto out_free;
	for (int i = 0; i < n_prompt + n_gen; i++)
		tokens[i] = (int32_t)((i * 7919 + 13) % hp.n_vocab);

	ret = llama_model_new(&hp, dev, 42, &m);
	if (ret) {
		fail("model", ret);
		goto out_free;
	}
	ret = loom_dev_init_backend(dev, NULL, &be);
	if (ret) {
		fail("backend", ret);
		goto out_free;
	}
	printf("%s on %s (%s), %.1f MiB of weights\n", preset,
	       loom_dev_name(dev), loom_dev_description(dev),
	       llama_model_weight_bytes(m) / 1048576.0);
	if (do_check) {
		status = check(m, be, tokens, n_prompt + n_gen);
		goto out_free;
	}

	ret = llama_eval(m, be, tokens, n_prompt, 0, false, logits);
	for (int i = 0; !ret && i < n_gen; i++) {
		tokens[n_prompt + i] = argmax(logits, hp.n_vocab);
		printf("%d ", tokens[n_prompt + i]);
		fflush(stdout);
		ret = llama_eval(m, be, &tokens[n_prompt + i], 1, n_prompt + i,
				 false, logits);
	}
	printf("\n");
	if (ret)
		fail("eval", ret);
	else
		status = 0;

out_free:
	loom_backend_free(be);
	llama_model_free(m);
	free(logits);
	free(tokens);
out_unload:
	if (loom_unload_all()) {
		fprintf(stderr, "run: %s\n", loom_error_message());
		status = 1;
	}
	return status;
}
