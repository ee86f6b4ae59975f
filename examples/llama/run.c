/* run.c - builds the example Llama model on a chosen device and generates
 * a few tokens greedily: the smallest complete program against the API.
 *
 *   run [preset] [device] [n_prompt] [n_gen]
 */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>

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
	fprintf(stderr, "run: %s: %s (%s)\n", what, loom_last_error(),
		loom_strerror(ret));
	return 1;
}

int main(int argc, char **argv)
{
	const char *preset = argc > 1 ? argv[1] : "tiny";
	const char *dev_name = argc > 2 ? argv[2] : NULL;
	int n_prompt = argc > 3 ? atoi(argv[3]) : 8;
	int n_gen = argc > 4 ? atoi(argv[4]) : 8;
	struct llama_hparams hp;
	struct llama_model *m = NULL;
	loom_backend_t *be = NULL;
	loom_dev_t *dev;
	int32_t *tokens;
	float *logits;
	int ret, status = 1;

	ret = llama_hparams_preset(preset, &hp);
	if (ret)
		return fail("preset", ret);
	if (n_prompt < 1 || n_gen < 0 || n_prompt + n_gen > hp.n_ctx) {
		fprintf(stderr, "run: bad token counts\n");
		return 1;
	}
	ret = loom_load_all();
	if (ret)
		fprintf(stderr, "run: warning: %s\n", loom_last_error());
	dev = dev_name ? loom_dev_by_name(dev_name) : loom_dev_get(0);
	if (!dev) {
		fprintf(stderr, "run: no device %s\n",
			dev_name ? dev_name : "");
		goto out_unload;
	}

	tokens = calloc((size_t)(n_prompt + n_gen), sizeof(*tokens));
	logits = calloc((size_t)hp.n_vocab, sizeof(*logits));
	if (!tokens || !logits)
		goto out_free;
	for (int i = 0; i < n_prompt; i++)
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
	loom_unload_all();
	return status;
}
