/* SPDX-License-Identifier: MIT */
/* generate.c - the smallest program that runs a GGUF model through the
 * public API (loom.h and loom-model.h alone): the prompt's tokens, then
 * n greedy ones, printed as ids and as text.  With a device list of two
 * or more (cpu0,cpu1) the model runs on a meta device over them, split
 * by the model library's policy.
 *
 *   generate MODEL.gguf PROMPT [N] [DEVICE[,DEVICE...]]
 *
 * Build: cc generate.c $(pkg-config --cflags --libs loom-model)
 */
#include <loom/loom-backend.h>
#include <loom/loom-model.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, int ret)
{
	fprintf(stderr, "generate: %s: %s (%s)\n", what, loom_error_message(),
		loom_strerror(ret));
	return 1;
}

/* The device named by list: one device, or a meta device over several
 * (at most 8) with m's split policy. */
static int pick_device(loom_model_t *m, char *list, loom_dev_t **out)
{
	loom_dev_t *devs[8];
	size_t n = 0;
	loom_split_fn fn;
	void *user;
	int ret;

	for (char *s = strtok(list, ","); s; s = strtok(NULL, ",")) {
		if (n == 8 || !(devs[n] = loom_dev_by_name(s)))
			return loom_error_set(LOOM_E_NOT_FOUND, "no device "
					      "'%s' (or more than 8)", s);
		n++;
	}
	if (n == 1) {
		*out = devs[0];
		return LOOM_OK;
	}
	ret = loom_model_split_policy(m, &fn, &user);
	return ret ? ret : loom_meta_dev_new(devs, n, fn, user, NULL, out);
}

/* Evaluates the prompt, then n greedy tokens one at a time. */
static int generate(loom_model_t *m, loom_backend_t *be, int32_t *ids,
		    int n_ids, int n)
{
	float *logits = malloc((size_t)loom_model_n_vocab(m) * sizeof(float));
	char text[256];
	int32_t tok;
	int ret = logits ? LOOM_OK : LOOM_E_NOMEM;

	for (int i = 0; i < n && !ret; i++) {
		ret = loom_model_eval(m, be, i ? &tok : ids, i ? 1 : n_ids,
				      i ? n_ids + i - 1 : 0, false, logits);
		if (!ret)
			ret = loom_model_sample(logits, loom_model_n_vocab(m),
						NULL, NULL, &tok);
		if (!ret && loom_model_token_text(m, tok, text,
						  sizeof(text)) >= 0)
			printf("%d %s\n", (int)tok, text);
	}
	free(logits);
	return ret;
}

int main(int argc, char **argv)
{
	struct loom_model_params p = { .size = sizeof(p), .n_ctx = 256 };
	char devices[256] = "cpu0";
	loom_model_t *m = NULL;
	loom_backend_t *be = NULL;
	loom_dev_t *dev;
	int32_t *ids = NULL;
	int n_ids = 0, n = argc > 3 ? atoi(argv[3]) : 8, ret;

	if (argc < 3 || n < 1) {
		fprintf(stderr, "usage: generate MODEL.gguf PROMPT [N] "
			"[DEVICE[,DEVICE...]]\n");
		return 2;
	}
	if (argc > 4)
		snprintf(devices, sizeof(devices), "%s", argv[4]);
	if ((ret = loom_load_all()))
		return fail("plugins", ret);
	if ((ret = loom_model_open(argv[1], &p, &m)))
		return fail(argv[1], ret);
	ret = loom_model_tokenize(m, argv[2], LOOM_MODEL_ADD_SPECIAL, &ids,
				  &n_ids);
	if (!ret && !n_ids)
		ret = loom_error_set(LOOM_E_INVAL, "an empty prompt");
	if (!ret)
		ret = pick_device(m, devices, &dev);
	if (!ret)
		ret = loom_model_load(m, dev);
	if (!ret)
		ret = loom_dev_init_backend(dev, NULL, &be);
	if (!ret)
		ret = generate(m, be, ids, n_ids, n);
	if (ret)
		fail("run", ret);
	loom_backend_free(be);
	free(ids);
	loom_model_free(m);
	return ret ? 1 : 0;
}
