/* SPDX-License-Identifier: MIT */
/* test-tokenizer.c - the tokenizers on small vocabularies whose merges
 * are worked out by hand.  SentencePiece-style: the word mark, merges by
 * score with the leftmost first on ties, byte tokens for characters
 * without a token, BOS/EOS and the space prefix as the file asks.
 * Byte-level BPE: the pre-tokenizers' words against those Python's regex
 * module finds with the llama-bpe and qwen2 expressions (the fixture
 * below), merges by rank, whole-word tokens; an unknown pre-tokenizer is
 * refused by name.
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

static struct gguf *vocab(const char *model, const char *pre, int add_space,
			  int add_eos, void **bytes)
{
	int n = 259 + (int)G_N_ELEMENTS(pieces);
	char **tok = g_new0(char *, n + 1);
	float *score = g_new0(float, n);
	int32_t *type = g_new0(int32_t, n);
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
	/* unknown, control, control, bytes, then normal. */
	for (int i = 0; i < n; i++)
		type[i] = i == 0 ? 2 : i < 3 ? 3 : i < 259 ? 6 : 1;
	g_assert_cmpint(gguf_writer_new(&w), ==, 0);
	gguf_writer_add_str(w, "tokenizer.ggml.model", model);
	gguf_writer_add_str(w, "tokenizer.ggml.pre", pre);
	gguf_writer_add_array(w, "tokenizer.ggml.tokens", GGUF_TYPE_STRING,
			      (uint64_t)n, tok);
	gguf_writer_add_array(w, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32,
			      (uint64_t)n, score);
	gguf_writer_add_array(w, "tokenizer.ggml.token_type", GGUF_TYPE_INT32,
			      (uint64_t)n, type);
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
	g_free(type);
	g_assert_cmpint(gguf_parse(*bytes, size, &g), ==, 0);
	return g;
}

static void expect(struct model_tokenizer *t, const char *text,
		   unsigned special, const int32_t *want, int n_want)
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
	struct gguf *g = vocab("llama", "default", -1, -1, &bytes);

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
	/* Control tokens' texts: tokens when asked, each text piece after
	 * one leading with a mark again; plain text (bytes) otherwise. */
	EXPECT(t, "hello<s>hello</s>", MODEL_TOKENIZE_PARSE_SPECIAL,
	       264, 261, 266, 263, 1, 264, 261, 266, 263, 2);
	EXPECT(t, "<s>", MODEL_TOKENIZE_ADD_SPECIAL |
	       MODEL_TOKENIZE_PARSE_SPECIAL, 1, 1);
	EXPECT(t, "h<s>", false, 264, B('<'), B('s'), B('>'));
	/* The unknown token's text too; "<s" alone is no token. */
	EXPECT(t, "<unk><s", MODEL_TOKENIZE_PARSE_SPECIAL,
	       0, 259, B('<'), B('s'));
	model_tokenizer_free(t);
	/* And back to text: the mark is a space, byte tokens their byte. */
	{
		char s[16];

		g_assert_cmpint(model_token_text(g, 264, s, sizeof(s)), ==, 2);
		g_assert_cmpstr(s, ==, " h");
		model_token_text(g, B('A'), s, sizeof(s));
		g_assert_cmpstr(s, ==, "A");
		/* A control token has no text; the unknown one has. */
		g_assert_cmpint(model_token_text(g, 1, s, sizeof(s)), ==, 0);
		g_assert_cmpstr(s, ==, "");
		model_token_text(g, 0, s, sizeof(s));
		g_assert_cmpstr(s, ==, "<unk>");
		model_token_text(g, 9999, s, sizeof(s));
		g_assert_cmpstr(s, ==, "[9999]");
	}
	gguf_free(g);
	free(bytes);

	/* Without the space prefix, with EOS. */
	g = vocab("llama", "default", 0, 1, &bytes);
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
	struct gguf *g = vocab("gpt2", "viking", -1, -1, &bytes);

	g_assert_cmpint(model_tokenizer_new(g, &t), ==, LOOM_E_UNSUPPORTED);
	g_assert_null(t);
	g_assert_cmpstr(loom_error_message(), ==,
			"tokenizer 'gpt2' (pre-tokenizer 'viking') is not "
			"supported (llama is, and gpt2 with a pre-tokenizer "
			"loom-run(1) lists)");
	gguf_free(g);
	free(bytes);
}

/* ------------------------------------------------------------------------
 * Byte-level BPE.
 */
static const struct {
	const char *text;
	int llama3[32], qwen2[32]; /* word ends in bytes, -1 after the last */
} pretok_cases[] = {
	{ "Hello world",
	  { 5, 11, -1 },
	  { 5, 11, -1 } },
	{ "  leading spaces",
	  { 1, 9, 16, -1 },
	  { 1, 9, 16, -1 } },
	{ "trailing   ",
	  { 8, 11, -1 },
	  { 8, 11, -1 } },
	{ "I'm here, they're OK; we'VE won't",
	  { 1, 3, 8, 9, 14, 17, 20, 21, 24, 27, 31, 33, -1 },
	  { 1, 3, 8, 9, 14, 17, 20, 21, 24, 27, 31, 33, -1 } },
	{ "12345 digits 1.5e10 and 3,141,592",
	  { 3, 5, 12, 13, 14, 15, 16, 17, 19, 23, 24, 25, 26, 29, 30, 33, -1 },
	  { 1, 2, 3, 4, 5, 12, 13, 14, 15, 16, 17, 18, 19, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, -1 } },
	{ "tabs\011and\012newlines\015\012\015\012end",
	  { 4, 8, 9, 17, 21, 24, -1 },
	  { 4, 8, 9, 17, 21, 24, -1 } },
	{ "a  \012  b",
	  { 1, 4, 5, 7, -1 },
	  { 1, 4, 5, 7, -1 } },
	{ "\303\234n\303\257c\303\266d\303\251 fa\303\247ade na\303\257ve",
	  { 11, 19, 26, -1 },
	  { 11, 19, 26, -1 } },
	{ "\346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210",
	  { 24, -1 },
	  { 24, -1 } },
	{ "emoji \360\237\231\202\360\237\221\215\360\237\217\275 ok",
	  { 5, 18, 21, -1 },
	  { 5, 18, 21, -1 } },
	{ "x=foo(bar[1]);  // code",
	  { 1, 5, 9, 10, 11, 14, 15, 18, 23, -1 },
	  { 1, 5, 9, 10, 11, 14, 15, 18, 23, -1 } },
	{ "def f(x):\012    return x**2\012",
	  { 3, 5, 7, 10, 13, 20, 22, 24, 25, 26, -1 },
	  { 3, 5, 7, 10, 13, 20, 22, 24, 25, 26, -1 } },
	{ "!!!\077\077\077...",
	  { 9, -1 },
	  { 9, -1 } },
	{ " \302\240nbsp\343\200\200ideo",
	  { 1, 7, 14, -1 },
	  { 1, 7, 14, -1 } },
	{ "\331\243\331\244\331\245 arabic digits \302\275",
	  { 6, 13, 20, 21, 23, -1 },
	  { 2, 4, 6, 13, 20, 21, 23, -1 } },
	{ "'s",
	  { 2, -1 },
	  { 2, -1 } },
	{ "'",
	  { 1, -1 },
	  { 1, -1 } },
	{ "\012",
	  { 1, -1 },
	  { 1, -1 } },
	{ "   ",
	  { 3, -1 },
	  { 3, -1 } },
	{ "a",
	  { 1, -1 },
	  { 1, -1 } },
	{ "Mixed123Case456",
	  { 5, 8, 12, 15, -1 },
	  { 5, 6, 7, 8, 12, 13, 14, 15, -1 } },
	{ "\307\205ungla \312\260mod",
	  { 7, 13, -1 },
	  { 7, 13, -1 } },
	{ "--- ***",
	  { 3, 7, -1 },
	  { 3, 7, -1 } },
};

static void test_pretok(void)
{
	for (size_t i = 0; i < G_N_ELEMENTS(pretok_cases); i++) {
		for (int k = 0; k < 2; k++) {
			const int *want = k ? pretok_cases[i].qwen2 :
					      pretok_cases[i].llama3;
			const char *text = pretok_cases[i].text;
			size_t *ends, n, n_want = 0;

			g_assert_cmpint(model_pretokenize(
						k ? MODEL_PRETOK_QWEN2 :
						    MODEL_PRETOK_LLAMA3,
						text, strlen(text), &ends, &n),
					==, LOOM_OK);
			while (want[n_want] >= 0)
				n_want++;
			for (size_t j = 0; j < n && j < n_want; j++)
				if (ends[j] != (size_t)want[j])
					g_error("'%s' (%s): word %zu ends at "
						"%zu, not %d", text,
						k ? "qwen2" : "llama3", j,
						ends[j], want[j]);
			g_assert_cmpuint(n, ==, n_want);
			free(ends);
		}
	}
}

/* The other pre-tokenizers on a corpus of their own, against the words
 * llama.cpp's unicode_regex_split gives with each family's expressions
 * (word ends in bytes). */
static const struct {
	const char *text;
	const char *ends[9];
} split_cases[] = {
	{ "Hello world",
	  { "5 11",
	    "5 11",
	    "5 11",
	    "5 11",
	    "5 11",
	    "5 11",
	    "5 11",
	    "5 11",
	    "5 11" } },
	{ "  leading spaces and trailing   ",
	  { "1 9 16 20 29 32",
	    "1 9 16 20 29 32",
	    "1 9 16 20 29 32",
	    "1 9 16 20 29 32",
	    "1 9 16 20 29 32",
	    "1 9 16 20 29 32",
	    "1 9 16 20 29 32",
	    "1 9 16 20 29 32",
	    "1 9 16 20 29 32" } },
	{ "I'm here, they're OK; we'VE won't",
	  { "1 3 8 9 14 17 20 21 24 25 27 31 33",
	    "1 3 8 9 14 17 20 21 24 25 27 31 33",
	    "1 2 3 8 9 14 15 17 20 21 24 25 27 31 32 33",
	    "1 2 3 8 9 14 15 17 20 21 24 25 27 31 32 33",
	    "1 3 8 9 14 17 20 21 24 27 31 33",
	    "1 2 3 8 9 14 15 17 20 21 24 25 27 31 32 33",
	    "1 2 3 8 9 14 15 17 20 21 24 25 27 31 32 33",
	    "1 3 8 9 14 17 20 21 24 27 31 33",
	    "1 3 8 9 14 17 20 21 24 27 31 33" } },
	{ "12345 digits 1.5e10 and 3,141,592",
	  { "5 12 14 15 16 17 19 23 25 26 29 30 33",
	    "1 2 3 4 5 12 13 14 15 16 17 18 19 23 24 25 26 27 28 29 30 31 32 33",
	    "3 5 12 13 14 15 16 17 19 23 24 25 26 29 30 33",
	    "3 5 12 14 15 16 17 19 23 25 26 29 30 33",
	    "1 2 3 4 5 12 13 14 15 16 17 18 19 23 24 25 26 27 28 29 30 31 32 33",
	    "1 2 3 4 5 12 13 14 15 16 17 18 19 23 24 25 26 27 28 29 30 31 32 33",
	    "5 12 13 14 15 16 17 19 23 24 25 26 29 30 33",
	    "1 2 3 4 5 12 13 14 15 16 17 18 19 23 24 25 26 27 28 29 30 31 32 33",
	    "3 5 12 13 14 15 16 17 19 23 24 25 26 29 30 33" } },
	{ "tabs\011and\012newlines\015\012\015\012end",
	  { "4 5 8 9 17 20 21 24",
	    "4 5 8 9 17 20 21 24",
	    "4 5 8 9 17 20 21 24",
	    "4 5 8 9 17 20 21 24",
	    "4 8 9 17 21 24",
	    "4 8 9 17 18 19 20 21 24",
	    "4 8 9 17 18 19 20 21 24",
	    "4 8 9 17 21 24",
	    "4 8 9 17 21 24" } },
	{ "def f(x):\012    return x**2\012\012\012    pass\012",
	  { "3 5 6 7 9 13 20 22 24 25 31 36 37",
	    "3 5 6 7 9 13 20 22 24 25 31 36 37",
	    "3 5 6 7 9 13 20 22 24 25 31 36 37",
	    "3 5 6 7 9 13 20 22 24 25 31 36 37",
	    "3 5 7 10 13 20 22 24 25 28 31 36 37",
	    "3 5 6 7 9 10 13 20 22 24 25 26 27 28 31 36 37",
	    "3 5 6 7 9 10 13 20 22 24 25 26 27 28 31 36 37",
	    "3 5 7 10 13 20 22 24 25 28 31 36 37",
	    "3 5 7 10 13 20 22 24 25 28 31 36 37" } },
	{ "if (a == b) {\015\012\011return;\015\012}\015\012",
	  { "2 4 5 8 10 11 13 15 16 22 23 24 25 26 28",
	    "2 4 5 8 10 11 13 15 16 22 23 24 25 26 28",
	    "2 3 4 5 6 8 10 11 12 13 15 16 22 23 25 26 28",
	    "2 3 4 5 6 8 10 11 12 13 15 16 22 23 25 26 28",
	    "2 4 5 8 10 11 15 22 25 28",
	    "2 4 5 8 10 11 13 14 15 22 23 24 25 26 27 28",
	    "2 4 5 8 10 11 13 14 15 22 23 24 25 26 27 28",
	    "2 4 5 8 10 11 15 22 25 28",
	    "2 4 5 8 10 11 15 22 25 28" } },
	{ "x=foo(bar[1]);  // code  $a+b<=c^d~e|f`g",
	  { "1 2 5 6 9 10 11 14 15 18 23 24 26 27 28 29 31 32 33 34 35 36 37 38 39 40",
	    "1 2 5 6 9 10 11 14 15 18 23 24 26 27 28 29 31 32 33 34 35 36 37 38 39 40",
	    "1 2 5 6 9 10 11 14 16 18 23 25 26 27 28 29 31 32 33 34 35 36 37 38 39 40",
	    "1 2 5 6 9 10 11 14 16 18 23 25 26 27 28 29 31 32 33 34 35 36 37 38 39 40",
	    "1 5 9 10 11 14 15 18 23 24 26 27 29 31 32 34 36 38 40",
	    "1 2 5 6 9 10 11 14 15 18 23 26 27 28 29 31 32 33 34 35 36 37 38 39 40",
	    "1 2 5 6 9 10 11 14 15 18 23 24 26 27 28 29 31 32 33 34 35 36 37 38 39 40",
	    "1 5 9 10 11 14 15 18 23 24 26 27 29 31 32 34 36 38 40",
	    "1 5 9 10 11 14 15 18 23 24 26 27 29 31 32 34 36 38 40" } },
	{ "\303\234n\303\257c\303\266d\303\251 fa\303\247ade na\303\257ve \340\244\225\340\244\277\340\244\244\340\244\276\340\244\254",
	  { "11 19 26 30 33 36 39 42",
	    "11 19 26 30 33 36 39 42",
	    "11 19 26 30 33 36 39 42",
	    "11 19 26 30 33 36 39 42",
	    "11 19 26 42",
	    "11 19 26 27 30 33 36 39 42",
	    "2 3 5 6 8 9 11 14 16 19 22 24 26 27 42",
	    "11 19 26 30 36 42",
	    "11 19 26 42" } },
	{ "\346\227\245\346\234\254\350\252\236\343\201\256\343\203\206\343\202\255\343\202\271\343\203\210\343\200\202\344\270\255\346\226\207\357\274\214\355\225\234\352\265\255\354\226\264",
	  { "24 27 33 36 45",
	    "24 27 33 36 45",
	    "24 27 33 36 45",
	    "24 27 33 36 45",
	    "24 33 45",
	    "24 27 33 36 45",
	    "24 27 33 36 45",
	    "24 33 45",
	    "24 27 33 36 45" } },
	{ "HELLOworld \303\211COLE aBC camelCase XMLHttp ~x ~ !x",
	  { "10 17 21 31 39 41 42 44 46 47",
	    "10 17 21 31 39 41 42 44 46 47",
	    "10 17 21 31 39 40 41 42 43 44 45 46 47",
	    "10 17 21 31 39 40 41 42 43 44 45 46 47",
	    "10 17 21 31 39 41 42 44 46 47",
	    "10 17 21 31 39 41 42 44 46 47",
	    "10 13 17 21 31 39 41 42 44 46 47",
	    "10 13 17 19 21 27 31 39 41 42 44 46 47",
	    "10 17 21 31 39 40 42 43 44 46 47" } },
	{ "emoji \360\237\231\202\360\237\221\215\360\237\217\275 ok \342\235\244\357\270\217",
	  { "5 18 21 28",
	    "5 18 21 28",
	    "5 18 21 28",
	    "5 18 21 28",
	    "5 18 21 25 28",
	    "5 18 21 22 25 28",
	    "5 18 21 22 25 28",
	    "5 18 21 28",
	    "5 18 21 25 28" } },
	{ " \302\240nbsp\343\200\200ideo\342\200\203em",
	  { "1 3 7 10 14 17 19",
	    "1 3 7 10 14 17 19",
	    "1 3 7 10 14 17 19",
	    "1 3 7 10 14 17 19",
	    "1 7 14 19",
	    "1 7 14 19",
	    "1 7 14 19",
	    "1 7 14 19",
	    "1 7 14 19" } },
	{ "\331\243\331\244\331\245 arabic digits \302\275 \342\205\247",
	  { "6 13 20 23 27",
	    "2 4 6 13 20 21 23 24 27",
	    "6 13 20 21 23 24 27",
	    "6 13 20 23 27",
	    "2 4 6 13 20 21 23 24 27",
	    "2 4 6 13 20 21 23 24 27",
	    "6 13 20 21 23 24 27",
	    "2 4 6 13 20 21 23 24 27",
	    "6 13 20 21 23 24 27" } },
	{ "!!!???... --- *** \342\200\224\342\200\246",
	  { "9 13 17 24",
	    "9 13 17 24",
	    "9 10 13 14 17 18 24",
	    "9 10 13 14 17 18 24",
	    "9 13 17 24",
	    "9 13 17 18 24",
	    "9 13 17 18 24",
	    "9 13 17 24",
	    "9 13 17 24" } },
	{ "\302\265\303\200\316\221\320\226 \357\274\241\357\275\202\357\275\203 \357\274\201\357\274\237",
	  { "8 18 25",
	    "8 18 25",
	    "8 18 19 25",
	    "8 18 19 25",
	    "8 18 25",
	    "8 18 25",
	    "8 18 25",
	    "8 18 25",
	    "8 18 25" } },
	{ "a  \012  b   \012\012\012  c",
	  { "1 5 7 14 16",
	    "1 5 7 14 16",
	    "1 5 7 14 16",
	    "1 5 7 14 16",
	    "1 4 5 7 13 14 16",
	    "1 3 4 5 7 10 11 12 13 14 16",
	    "1 3 4 5 7 10 11 12 13 14 16",
	    "1 4 5 7 13 14 16",
	    "1 4 5 7 13 14 16" } },
	{ "",
	  { "",
	    "",
	    "",
	    "",
	    "",
	    "",
	    "",
	    "",
	    "" } },
};
static const enum model_pretok split_kinds[] = {
	MODEL_PRETOK_GPT2, MODEL_PRETOK_STARCODER, MODEL_PRETOK_DEFAULT, MODEL_PRETOK_FALCON, MODEL_PRETOK_QWEN35, MODEL_PRETOK_DEEPSEEK_CODER, MODEL_PRETOK_DEEPSEEK_LLM, MODEL_PRETOK_TEKKEN, MODEL_PRETOK_DEEPSEEK3,
};

static void test_split(void)
{
	for (size_t i = 0; i < G_N_ELEMENTS(split_cases); i++) {
		for (size_t k = 0; k < G_N_ELEMENTS(split_kinds); k++) {
			const char *text = split_cases[i].text;
			GString *got = g_string_new(NULL);
			size_t *ends, n;

			g_assert_cmpint(model_pretokenize(split_kinds[k], text,
							  strlen(text), &ends,
							  &n), ==, LOOM_OK);
			for (size_t j = 0; j < n; j++)
				g_string_append_printf(got, j ? " %zu" : "%zu",
						       ends[j]);
			if (strcmp(got->str, split_cases[i].ends[k]))
				g_error("'%s' (kind %d): words end at %s, not "
					"%s", text, (int)split_kinds[k],
					got->str, split_cases[i].ends[k]);
			g_string_free(got, TRUE);
			free(ends);
		}
	}
}

/* Every name of tokenizer.ggml.pre Loom knows is one of its kinds, and
 * the names llama.cpp has for vocabularies Loom lacks are refused. */
static void test_names(void)
{
	static const char *const lacking[] = {
		"chatglm-bpe", "viking", "poro-chat", "bloom",
		"gpt3-finnish", "chameleon", "bert-bge", "",
	};
	enum model_pretok kind;
	size_t n = 0;

	for (const char *name; (name = model_pretok_names(n)); n++)
		g_assert_cmpint(model_pretok_by_name(name, &kind), ==, 0);
	g_assert_cmpuint(n, >=, 30);
	g_assert_cmpint(model_pretok_by_name("smollm", &kind), ==, 0);
	g_assert_cmpint(kind, ==, MODEL_PRETOK_STARCODER);
	for (size_t i = 0; i < G_N_ELEMENTS(lacking); i++)
		g_assert_cmpint(model_pretok_by_name(lacking[i], &kind), ==,
				LOOM_E_UNSUPPORTED);
}

static const char *const merges[] = {
	"l l", "h e", "he ll", "\xc4\xa0 h", "hell o",
};
static const char *const extra[] = { "he", "ll", "hell", "\xc4\xa0h",
				     "hello", "lo" };

/* ids 0-255: each byte as byte-level BPE writes it; then extra[]. */
static struct gguf *bpe_vocab(const char *pre, void **bytes)
{
	int n = 256 + (int)G_N_ELEMENTS(extra);
	char **tok = g_new0(char *, n + 1);
	struct gguf_writer *w;
	struct gguf *g;
	size_t size;

	for (int b = 0; b < 256; b++) {
		uint32_t cp = b;
		int k = 0;

		if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) ||
		      (b >= 174 && b <= 255))) {
			for (int c = 0; c < b; c++)
				k += !((c >= 33 && c <= 126) ||
				       (c >= 161 && c <= 172) ||
				       (c >= 174 && c <= 255));
			cp = 256 + (uint32_t)k;
		}
		tok[b] = g_ucs4_to_utf8((gunichar *)&cp, 1, NULL, NULL, NULL);
	}
	for (size_t i = 0; i < G_N_ELEMENTS(extra); i++)
		tok[256 + i] = g_strdup(extra[i]);
	g_assert_cmpint(gguf_writer_new(&w), ==, 0);
	gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_writer_add_str(w, "tokenizer.ggml.pre", pre);
	gguf_writer_add_array(w, "tokenizer.ggml.tokens", GGUF_TYPE_STRING,
			      (uint64_t)n, tok);
	gguf_writer_add_array(w, "tokenizer.ggml.merges", GGUF_TYPE_STRING,
			      G_N_ELEMENTS(merges), merges);
	g_assert_cmpint(gguf_writer_bytes(w, bytes, &size), ==, 0);
	gguf_writer_free(w);
	g_strfreev(tok);
	g_assert_cmpint(gguf_parse(*bytes, size, &g), ==, 0);
	return g;
}

static void test_bpe(void)
{
	for (int k = 0; k < 2; k++) {
		struct model_tokenizer *t;
		void *bytes;
		struct gguf *g = bpe_vocab(k ? "qwen2" : "llama-bpe", &bytes);

		g_assert_cmpint(model_tokenizer_new(g, &t), ==, 0);
		/* ll, he, he+ll, hell+o. */
		EXPECT(t, "hello", false, 260);
		/* The mark (0x20 as U+0120) merges with h only before h
		 * merged with e: here it is left alone. */
		EXPECT(t, " hello", false, 32, 260);
		/* Equal ranks: the leftmost pair. */
		EXPECT(t, "lll", false, 257, 'l');
		/* Bytes as themselves, words cut before merging. */
		EXPECT(t, "he\nll", false, 256, 10, 257);
		if (k) {
			/* qwen2: no merge makes "lo", no BOS, one digit a
			 * word. */
			EXPECT(t, "lo", true, 'l', 'o');
		} else {
			/* llama-bpe: a word that is a token is taken whole;
			 * BOS (11 by default). */
			EXPECT(t, "lo", true, 11, 261);
		}
		/* Back to text: U+0120 is the space, U+010A the newline. */
		{
			char s[16];

			model_token_text(g, 32, s, sizeof(s));
			g_assert_cmpstr(s, ==, " ");
			model_token_text(g, 10, s, sizeof(s));
			g_assert_cmpstr(s, ==, "\n");
			model_token_text(g, 259, s, sizeof(s));
			g_assert_cmpstr(s, ==, " h");
		}
		/* Not UTF-8. */
		{
			int32_t *ids;
			int n;

			g_assert_cmpint(model_tokenize(t, "a\xff", false, &ids,
						       &n), ==, LOOM_E_INVAL);
			g_assert_cmpstr(loom_error_message(), ==,
					"tokenizer: the text is not UTF-8 at "
					"byte 1");
		}
		model_tokenizer_free(t);
		gguf_free(g);
		free(bytes);
	}
}

/* Gemma 4: BPE over characters, spaces as U+2581, words cut at runs of
 * line breaks, characters left without a token as byte tokens, BOS. */
static void test_gemma4(void)
{
	static const char *const gm_merges[] = {
		"h e", "l l", "he ll", "hell o", "\xe2\x96\x81 hello",
	};
	static const char *const pieces4[] = {
		"\xe2\x96\x81", "h", "e", "l", "o", "he", "ll", "hell",
		"hello", "\xe2\x96\x81hello", "\n\n", "\n",
	};
	int n = 2 + 256 + (int)G_N_ELEMENTS(pieces4);
	char **tok = g_new0(char *, n + 1);
	struct model_tokenizer *t;
	struct gguf_writer *w;
	struct gguf *g;
	uint32_t bos = 1;
	void *bytes;
	size_t size;
	char text[16];

	tok[0] = g_strdup("<pad>");
	tok[1] = g_strdup("<bos>");
	for (int b = 0; b < 256; b++)
		tok[2 + b] = g_strdup_printf("<0x%02X>", b);
	for (size_t i = 0; i < G_N_ELEMENTS(pieces4); i++)
		tok[258 + i] = g_strdup(pieces4[i]);
	g_assert_cmpint(gguf_writer_new(&w), ==, 0);
	gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
	gguf_writer_add_str(w, "tokenizer.ggml.pre", "gemma4");
	gguf_writer_add_array(w, "tokenizer.ggml.tokens", GGUF_TYPE_STRING,
			      (uint64_t)n, tok);
	gguf_writer_add_array(w, "tokenizer.ggml.merges", GGUF_TYPE_STRING,
			      G_N_ELEMENTS(gm_merges), gm_merges);
	gguf_writer_add(w, "tokenizer.ggml.bos_token_id", GGUF_TYPE_UINT32,
			&bos);
	g_assert_cmpint(gguf_writer_bytes(w, &bytes, &size), ==, 0);
	gguf_writer_free(w);
	g_strfreev(tok);
	g_assert_cmpint(gguf_parse(bytes, size, &g), ==, 0);
	g_assert_cmpint(model_tokenizer_new(g, &t), ==, 0);
	EXPECT(t, "hello hello\n\nh\xc3\xa9", MODEL_TOKENIZE_ADD_SPECIAL,
	       1, 266, 267, 268, 259, 2 + 0xc3, 2 + 0xa9);
	/* One line break is a word too; a space alone is the mark. */
	EXPECT(t, "he\n ", false, 263, 269, 258);
	model_token_text(g, 267, text, sizeof(text));
	g_assert_cmpstr(text, ==, " hello");
	model_token_text(g, 2 + 'A', text, sizeof(text));
	g_assert_cmpstr(text, ==, "A");
	model_tokenizer_free(t);
	gguf_free(g);
	free(bytes);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/tokenizer/spm", test_spm);
	g_test_add_func("/tokenizer/pretok", test_pretok);
	g_test_add_func("/tokenizer/split", test_split);
	g_test_add_func("/tokenizer/names", test_names);
	g_test_add_func("/tokenizer/bpe", test_bpe);
	g_test_add_func("/tokenizer/gemma4", test_gemma4);
	g_test_add_func("/tokenizer/refused", test_refused);
	return g_test_run();
}
