/* SPDX-License-Identifier: MIT */
/* fuzz-gguf.c - the GGUF reader under a fuzzer: parse any bytes, read
 * every pair and tensor the way a loader would, then the model's shape
 * and the tokenizer from them.  Built with
 *   clang -fsanitize=fuzzer,address -Iinclude -Imodel \
 *       tests/fuzz-gguf.c model/[a-z]*.c libcore/.libs/libloom.so
 * it is a libFuzzer target; with -DFUZZ_REPLAY (make check) it is a GLib
 * test that replays the corpus, each file also truncated at every length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct gguf *g;
	volatile double sink = 0;
	char s[256];

	if (gguf_parse(data, size, &g))
		return 0;
	for (size_t i = 0; i < gguf_n_kv(g); i++) {
		const struct gguf_kv *kv = gguf_kv_get(g, i);
		int64_t v;

		if (kv->type == GGUF_TYPE_STRING ||
		    (kv->type == GGUF_TYPE_ARRAY &&
		     kv->arr_type == GGUF_TYPE_STRING)) {
			for (uint64_t k = 0; k < kv->n; k++)
				if (kv->strs[k].n)
					sink += (unsigned char)kv->strs[k]
						.s[kv->strs[k].n - 1];
			gguf_get_string(g, kv->key, s, sizeof(s));
		} else {
			for (uint64_t k = 0; k < kv->n; k++)
				sink += gguf_kv_number(kv, k);
		}
		gguf_get_int(g, kv->key, &v);
	}
	for (size_t i = 0; i < gguf_n_tensors(g); i++) {
		const struct gguf_tensor *t = gguf_tensor_get(g, i);
		enum loom_type lt;

		gguf_tensor_loom_type(t, &lt);
		if (t->size)
			sink += ((const uint8_t *)t->data)[0] +
				((const uint8_t *)t->data)[t->size - 1];
	}
	{
		struct llama_hparams hp;
		struct model_tokenizer *t;
		int32_t *ids;
		int n;

		model_hparams(g, 64, LOOM_TYPE_F16, &hp, NULL);
		if (!model_tokenizer_new(g, &t)) {
			if (!model_tokenize(t, "Hello, world! 123 caf\xc3\xa9"
					    "<|im_start|><s>",
					    MODEL_TOKENIZE_ADD_SPECIAL |
					    MODEL_TOKENIZE_PARSE_SPECIAL,
					    &ids, &n)) {
				for (int i = 0; i < n; i++)
					model_token_text(g, ids[i], s,
							 sizeof(s));
				free(ids);
			}
			model_tokenizer_free(t);
		}
	}
	(void)sink;
	gguf_free(g);
	return 0;
}

#ifdef FUZZ_REPLAY
#include <glib.h>

/* Each prefix is copied to a buffer of exactly its size, so that a read
 * past it is caught by valgrind or ASan. */
static void replay(gconstpointer data)
{
	const char *path = data;
	gchar *bytes;
	gsize size;

	g_assert_true(g_file_get_contents(path, &bytes, &size, NULL));
	for (gsize n = 0; n <= size; n++) {
		uint8_t *p = g_memdup2(bytes, n ? n : 1);

		LLVMFuzzerTestOneInput(p, n);
		g_free(p);
	}
	g_free(bytes);
}

int main(int argc, char **argv)
{
	GDir *dir;
	const char *name;
	GPtrArray *paths = g_ptr_array_new_with_free_func(g_free);
	int ret;

	g_test_init(&argc, &argv, NULL);
	dir = g_dir_open(FUZZ_CORPUS, 0, NULL);
	g_assert_nonnull(dir);
	while ((name = g_dir_read_name(dir))) {
		char *path = g_build_filename(FUZZ_CORPUS, name, NULL);
		char *test = g_strdup_printf("/fuzz-gguf/%s", name);

		g_ptr_array_add(paths, path);
		g_test_add_data_func(test, path, replay);
		g_free(test);
	}
	g_dir_close(dir);
	g_assert_cmpuint(paths->len, >, 0);
	ret = g_test_run();
	g_ptr_array_unref(paths);
	return ret;
}
#endif
