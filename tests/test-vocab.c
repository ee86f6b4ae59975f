/* SPDX-License-Identifier: MIT */
/* test-vocab.c - the tokenizers on real vocabularies against the ids
 * llama.cpp gives for the same text.  llama.cpp's source carries, for
 * each vocabulary it supports, a vocabulary-only GGUF file with a text
 * file of test strings (FILE.gguf.inp: strings separated by a line
 * "__ggml_vocab_test__") and the ids its tokenizer gives for each
 * (FILE.gguf.out: a line of space-separated ids per string, special
 * tokens not added).  LOOM_VOCAB_DIR names the directory holding them
 * (llama.cpp's models/); without it the test is skipped.  Every file of
 * a vocabulary Loom supports is checked; the others must be refused by
 * name.
 *
 *   LOOM_VOCAB_DIR=.../llama.cpp/models tests/test-vocab
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"

#define SEP "\n__ggml_vocab_test__\n"

/* The vocabularies Loom must tokenize as llama.cpp does. */
static const char *const supported[] = {
	"ggml-vocab-llama-spm.gguf",
	"ggml-vocab-llama-bpe.gguf",
	"ggml-vocab-qwen2.gguf",
	"ggml-vocab-gpt-2.gguf",
	"ggml-vocab-mpt.gguf",
	"ggml-vocab-starcoder.gguf",
	"ggml-vocab-refact.gguf",
	"ggml-vocab-command-r.gguf",
	"ggml-vocab-falcon.gguf",
	"ggml-vocab-deepseek-coder.gguf",
	"ggml-vocab-deepseek-llm.gguf",
};

static char *vocab_path(const char *name)
{
	const char *dir = g_getenv("LOOM_VOCAB_DIR");

	return dir ? g_build_filename(dir, name, NULL) : NULL;
}

/* Splits the .inp file into its strings; the file ends with a
 * separator, after which nothing is a string. */
static GPtrArray *read_inputs(const char *path)
{
	GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
	char *raw, *p, *next;

	g_assert_true(g_file_get_contents(path, &raw, NULL, NULL));
	for (p = raw; (next = strstr(p, SEP)) != NULL; p = next + strlen(SEP))
		g_ptr_array_add(a, g_strndup(p, (gsize)(next - p)));
	if (*p)
		g_ptr_array_add(a, g_strdup(p));
	g_free(raw);
	return a;
}

static GPtrArray *read_outputs(const char *path)
{
	GPtrArray *a = g_ptr_array_new_with_free_func(g_free);
	char *raw, **lines;

	g_assert_true(g_file_get_contents(path, &raw, NULL, NULL));
	lines = g_strsplit(raw, "\n", -1);
	for (char **l = lines; *l; l++)
		g_ptr_array_add(a, g_strstrip(g_strdup(*l)));
	/* the file ends with a newline: its last empty piece is not a case */
	if (a->len && !*(char *)a->pdata[a->len - 1])
		g_ptr_array_remove_index(a, a->len - 1);
	g_strfreev(lines);
	g_free(raw);
	return a;
}

static bool has_ids(const char *path)
{
	char *inp = g_strconcat(path, ".inp", NULL);
	char *out = g_strconcat(path, ".out", NULL);
	bool yes = g_file_test(inp, G_FILE_TEST_EXISTS) &&
		   g_file_test(out, G_FILE_TEST_EXISTS);

	g_free(inp);
	g_free(out);
	return yes;
}

static char *ids_text(const int32_t *ids, int n)
{
	GString *s = g_string_new(NULL);

	for (int i = 0; i < n; i++)
		g_string_append_printf(s, i ? " %d" : "%d", ids[i]);
	return g_string_free(s, FALSE);
}

/* The strings of path.inp tokenized by t, against path.out. */
static void check_ids(const char *path, const struct model_tokenizer *t)
{
	char *inp = g_strconcat(path, ".inp", NULL);
	char *out = g_strconcat(path, ".out", NULL);
	char *name = g_path_get_basename(path);
	GPtrArray *in = read_inputs(inp), *want = read_outputs(out);
	int bad = 0;

	g_assert_cmpuint(in->len, ==, want->len);
	for (guint i = 0; i < in->len; i++) {
		int32_t *ids = NULL;
		char *got;
		int n = 0;

		g_assert_cmpint(model_tokenize(t, in->pdata[i], false, &ids,
					       &n), ==, 0);
		got = ids_text(ids, n);
		if (strcmp(got, want->pdata[i]) != 0) {
			g_test_message("%s case %u: '%s'\n  llama.cpp %s\n"
				       "  loom      %s", name, i,
				       (char *)in->pdata[i],
				       (char *)want->pdata[i], got);
			bad++;
		}
		g_free(got);
		free(ids);
	}
	g_test_message("%s: %u strings, %d differ", name, in->len, bad);
	g_assert_cmpint(bad, ==, 0);
	g_ptr_array_unref(in);
	g_ptr_array_unref(want);
	g_free(name);
	g_free(inp);
	g_free(out);
}

static void test_file(gconstpointer data)
{
	char *path = vocab_path(data);
	struct model_tokenizer *tok;
	struct gguf *g;

	if (!path) {
		g_test_skip("LOOM_VOCAB_DIR is not set");
		return;
	}
	if (!g_file_test(path, G_FILE_TEST_EXISTS)) {
		g_test_skip(path);
		g_free(path);
		return;
	}
	g_assert_cmpint(gguf_open(path, &g), ==, 0);
	g_assert_cmpint(model_tokenizer_new(g, &tok), ==, 0);
	check_ids(path, tok);
	model_tokenizer_free(tok);
	gguf_free(g);
	g_free(path);
}

/* Every other vocabulary file there: refused with LOOM_E_UNSUPPORTED,
 * or accepted and then tokenized as llama.cpp does where the file has
 * its strings and ids; never a third outcome. */
static void test_others(void)
{
	const char *dirname = g_getenv("LOOM_VOCAB_DIR");
	const char *name;
	GDir *dir;

	if (!dirname) {
		g_test_skip("LOOM_VOCAB_DIR is not set");
		return;
	}
	dir = g_dir_open(dirname, 0, NULL);
	g_assert_nonnull(dir);
	while ((name = g_dir_read_name(dir)) != NULL) {
		struct model_tokenizer *tok = NULL;
		char *path;
		struct gguf *g;
		bool known = false;
		int rc;

		if (!g_str_has_suffix(name, ".gguf"))
			continue;
		for (size_t i = 0; i < G_N_ELEMENTS(supported); i++)
			known |= strcmp(name, supported[i]) == 0;
		if (known)
			continue;
		path = g_build_filename(dirname, name, NULL);
		g_assert_cmpint(gguf_open(path, &g), ==, 0);
		rc = model_tokenizer_new(g, &tok);
		g_test_message("%s: %s", name, rc == 0 ? "accepted" :
			       loom_error_message());
		g_assert_true(rc == 0 || rc == LOOM_E_UNSUPPORTED);
		if (rc == 0 && has_ids(path))
			check_ids(path, tok);
		model_tokenizer_free(tok);
		gguf_free(g);
		g_free(path);
	}
	g_dir_close(dir);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	for (size_t i = 0; i < G_N_ELEMENTS(supported); i++) {
		char *t = g_strdup_printf("/vocab/%s", supported[i]);

		g_test_add_data_func(t, supported[i], test_file);
		g_free(t);
	}
	g_test_add_func("/vocab/others-accepted-or-refused", test_others);
	return g_test_run();
}
