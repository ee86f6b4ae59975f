/* test-tokenizer.c - the SentencePiece-style tokenizer on a small
 * vocabulary whose merges are worked out by hand: the word mark, merges
 * by score with the leftmost first on ties, byte tokens for characters
 * without a token, BOS/EOS and the space prefix as the file asks, and
 * the refusal of a byte-level BPE vocabulary by its pre-tokenizer.
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"

/* ids 0-2 special, 3-258 the byte tokens, then the pieces below. */
static const struct {
	const char *text;
	float score;
} pieces[] = {
	{ "\xe2\x96\x81", -1 },       /* 259 */
	{ "h", -2 },                  /* 260 */
	{ "e", -2 },                  /* 261 */
	{ "l", -2 },                  /* 262 */
	{ "o", -2 },                  /* 263 */
	{ "\xe2\x96\x81h", -3 },      /* 264 */
	{ "el", -4 },                 /* 265 */
	{ "ll", -1.5f },              /* 266 */
	{ "lo", -5 },                 /* 267 */
	{ "xy", -1 },                 /* 268 */
	{ "yz", -1 },                 /* 269 */
	{ "\xf0\x9f\x99\x82", -2 },   /* 270: an emoji of its own */
};

static struct gguf *vocab(const char *model, int add_space, int add_eos,
			  void **bytes)
{
	int n = 259 + (int)G_N_ELEMENTS(pieces);
	char **tok = g_new0(char *, n + 1);
	float *score = g_new0(float, n);
	struct gguf_writer *w;
	struct gguf *g;
	size_t size;
	uint8_t b;

	tok[0] = g_strdup("<unk>");
	tok[1] = g_strdup("<s>");
	tok[2] = g_strdup("</s>");
	for (int i = 0; i < 256; i++)
		tok[3 + i] = g_strdup_printf("<0x%02X>", i);
	for (size_t i = 0; i < G_N_ELEMENTS(pieces); i++) {
		tok[259 + i] = g_strdup(pieces[i].text);
		score[259 + i] = pieces[i].score;
	}
	g_assert_cmpint(gguf_writer_new(&w), ==, 0);
	gguf_writer_add_str(w, "tokenizer.ggml.model", model);
	gguf_writer_add_str(w, "tokenizer.ggml.pre", "qwen2");
	gguf_writer_add_array(w, "tokenizer.ggml.tokens", GGUF_TYPE_STRING,
			      (uint64_t)n, tok);
	gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32,
			      (uint64_t)n, score);
	if (add_space >= 0) {
		b = (uint8_t)add_space;
		gguf_writer_add(w, "tokenizer.ggml.add_space_prefix",
				GGUF_TYPE_BOOL, &b);
	}
	if (add_eos >= 0) {
		b = (uint8_t)add_eos;
		gguf_writer_add(w, "tokenizer.ggml.add_eos_token",
				GGUF_TYPE_BOOL, &b);
	}
	g_assert_cmpint(gguf_writer_bytes(w, bytes, &size), ==, 0);
	gguf_writer_free(w);
	g_strfreev(tok);
	g_free(score);
	g_assert_cmpint(gguf_parse(*bytes, size, &g), ==, 0);
	return g;
}

static void expect(struct model_tokenizer *t, const char *text,
		   bool special, const int32_t *want, int n_want)
{
	int32_t *got;
	int n;

	g_assert_cmpint(model_tokenize(t, text, special, &got, &n), ==, 0);
	if (n != n_want || memcmp(got, want, (size_t)n * sizeof(*got))) {
		GString *s = g_string_new(NULL);

		for (int i = 0; i < n; i++)
			g_string_append_printf(s, " %d", got[i]);
		g_error("'%s': got%s", text, s->str);
	}
	free(got);
}

#define B(c) (3 + (unsigned char)(c))
#define EXPECT(t, text, special, ...)                                        \
	do {                                                                 \
		static const int32_t w_[] = { __VA_ARGS__ };                 \
		expect(t, text, special, w_, (int)G_N_ELEMENTS(w_));         \
	} while (0)

static void test_spm(void)
{
	struct model_tokenizer *t;
	void *bytes;
	struct gguf *g = vocab("llama", -1, -1, &bytes);

	g_assert_cmpint(model_tokenizer_new(g, &t), ==, 0);
	/* ll (-1.5) merges first, then the mark with h (-3); "el" and "lo"
	 * are stale by then. */
	EXPECT(t, "hello", true, 1, 264, 261, 266, 263);
	EXPECT(t, "hello", false, 264, 261, 266, 263);
	/* A character without a token is its UTF-8 bytes. */
	EXPECT(t, "h\xc3\xa9", true, 1, 264, B(0xc3), B(0xa9));
	/* Every space is a mark; nothing merges with a mark but h. */
	EXPECT(t, "a b", true, 1, 259, B('a'), 259, B('b'));
	/* xy and yz score alike: the leftmost merges. */
	EXPECT(t, "xyz", true, 1, 259, 268, B('z'));
	/* A four-byte character with a token of its own. */
	EXPECT(t, "\xf0\x9f\x99\x82h", true, 1, 259, 270, 260);
	EXPECT(t, "", true, 1);
	model_tokenizer_free(t);
	gguf_free(g);
	free(bytes);

	/* Without the space prefix, with EOS. */
	g = vocab("llama", 0, 1, &bytes);
	g_assert_cmpint(model_tokenizer_new(g, &t), ==, 0);
	EXPECT(t, "hello", true, 1, 260, 261, 266, 263, 2);
	EXPECT(t, " hello", false, 264, 261, 266, 263);
	model_tokenizer_free(t);
	gguf_free(g);
	free(bytes);
}

static void test_refused(void)
{
	struct model_tokenizer *t = NULL;
	void *bytes;
	struct gguf *g = vocab("gpt2", -1, -1, &bytes);

	g_assert_cmpint(model_tokenizer_new(g, &t), ==, LOOM_E_UNSUPPORTED);
	g_assert_null(t);
	g_assert_cmpstr(loom_error_message(), ==,
			"tokenizer 'gpt2' (pre-tokenizer 'qwen2') is not "
			"supported (llama is)");
	gguf_free(g);
	free(bytes);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/tokenizer/spm", test_spm);
	g_test_add_func("/tokenizer/refused", test_refused);
	return g_test_run();
}
