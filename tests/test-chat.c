/* SPDX-License-Identifier: MIT */
/* test-chat.c - model/chat.c: each family recognised from a template
 * that has its marker (and none from one that has none), each turn's
 * text in each family's format, and the tokens that end a reply,
 * <|end|> among them but where <|return|> is (gpt-oss).
 */
#include <glib.h>
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"

/* A file of vocabulary tok (n tokens) and template (none when NULL). */
static struct gguf *file(const char *const *tok, int n, const char *tmpl,
			 void **bytes)
{
	struct gguf_writer *w;
	struct gguf *g;
	size_t size;

	g_assert_cmpint(gguf_writer_new(&w), ==, 0);
	gguf_writer_add_str(w, "tokenizer.ggml.model", "llama");
	gguf_writer_add_array(w, "tokenizer.ggml.tokens", GGUF_TYPE_STRING,
			      (uint64_t)n, tok);
	gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 1);
	if (tmpl)
		gguf_writer_add_str(w, "tokenizer.chat_template", tmpl);
	g_assert_cmpint(gguf_writer_bytes(w, bytes, &size), ==, 0);
	gguf_writer_free(w);
	g_assert_cmpint(gguf_parse(*bytes, size, &g), ==, 0);
	return g;
}

static const char *const plain[] = { "<unk>", "</s>", "a" };

static void test_detect(void)
{
	static const struct {
		const char *tmpl, *family;
	} cases[] = {
		{ "{{'<|im_start|>' + m['role']}}", "chatml" },
		{ "{{ '<|start_header_id|>' + m['role'] + '<|end_header_id|>' "
		  "}}<|eot_id|>", "llama3" },
		{ "{{ '<start_of_turn>' + role }}<end_of_turn>", "gemma" },
		{ "{{'<|user|>\\n' + c + '<|end|>\\n<|assistant|>\\n'}}", "phi3" },
		{ "{{ bos_token }}[INST] {{ c }} [/INST]", "mistral" },
		{ "<|start|>assistant<|channel|>final<|message|>{{c}}<|end|>",
		  "gpt-oss" },
	};
	enum model_chat kind;
	void *bytes;
	struct gguf *g;

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		g = file(plain, 3, cases[i].tmpl, &bytes);
		g_assert_cmpint(model_chat_detect(g, &kind), ==, 0);
		g_assert_cmpstr(model_chat_name(kind), ==, cases[i].family);
		g_assert_cmpint(model_chat_by_name(cases[i].family, &kind), ==,
				0);
		g_assert_cmpstr(model_chat_name(kind), ==, cases[i].family);
		gguf_free(g);
		free(bytes);
	}
	g = file(plain, 3, "{{ messages }}", &bytes);
	g_assert_cmpint(model_chat_detect(g, &kind), ==, LOOM_E_UNSUPPORTED);
	gguf_free(g);
	free(bytes);
	g = file(plain, 3, NULL, &bytes);
	g_assert_cmpint(model_chat_detect(g, &kind), ==, LOOM_E_NOT_FOUND);
	gguf_free(g);
	free(bytes);
	g_assert_cmpint(model_chat_by_name("vicuna", &kind), ==,
			LOOM_E_UNSUPPORTED);
	g_assert_cmpstr(loom_error_message(), ==, "no chat template 'vicuna' "
			"(chatml, llama3, gemma, phi3, mistral and gpt-oss are "
			"known)");
}

static void test_turns(void)
{
	static const struct {
		const char *family, *system, *user;
		bool first;
		const char *want;
	} cases[] = {
		{ "chatml", "Be brief.", "Hi", true,
		  "<|im_start|>system\nBe brief.<|im_end|>\n"
		  "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n" },
		{ "chatml", "Be brief.", "Again", false,
		  "<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n"
		  "<|im_start|>assistant\n" },
		{ "llama3", NULL, "Hi", true,
		  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
		  "<|start_header_id|>assistant<|end_header_id|>\n\n" },
		{ "gemma", "Be brief.", "Hi", true,
		  "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n"
		  "<start_of_turn>model\n" },
		{ "gemma", "", "Again", false,
		  "<end_of_turn>\n<start_of_turn>user\nAgain<end_of_turn>\n"
		  "<start_of_turn>model\n" },
		{ "phi3", "S", "Hi", true,
		  "<|system|>\nS<|end|>\n<|user|>\nHi<|end|>\n"
		  "<|assistant|>\n" },
		{ "mistral", NULL, "Hi", true, "[INST] Hi [/INST]" },
		{ "mistral", NULL, "Again", false, "</s>[INST] Again [/INST]" },
		{ "gpt-oss", "S", "Hi", true,
		  "<|start|>system<|message|>S<|end|>"
		  "<|start|>user<|message|>Hi<|end|><|start|>assistant" },
	};

	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		enum model_chat kind;
		char *text;

		g_assert_cmpint(model_chat_by_name(cases[i].family, &kind), ==,
				0);
		g_assert_cmpint(model_chat_turn(kind, cases[i].system,
						cases[i].user, cases[i].first,
						&text), ==, 0);
		g_assert_cmpstr(text, ==, cases[i].want);
		free(text);
	}
}

static void expect_eog(const char *const *tok, int n, const int32_t *want,
		       int n_want)
{
	void *bytes;
	struct gguf *g = file(tok, n, NULL, &bytes);
	int32_t *ids;
	int n_ids;

	g_assert_cmpint(model_eog_tokens(g, &ids, &n_ids), ==, 0);
	g_assert_cmpint(n_ids, ==, n_want);
	for (int i = 0; i < n_ids; i++)
		g_assert_cmpint(ids[i], ==, want[i]);
	free(ids);
	gguf_free(g);
	free(bytes);
}

static void test_eog(void)
{
	static const char *const chat[] = {
		"<unk>", "</s>", "<|im_end|>", "<|end|>", "<end_of_turn>", "x",
	};
	static const char *const harmony[] = {
		"<unk>", "</s>", "<|end|>", "<|return|>", "<|call|>",
	};
	static const int32_t chat_ids[] = { 1, 2, 3, 4 };
	static const int32_t harmony_ids[] = { 1, 3, 4 };

	/* EOS (the file's key) first, then the turn ends by text. */
	expect_eog(chat, 6, chat_ids, 4);
	expect_eog(harmony, 5, harmony_ids, 3);
}

int main(int argc, char **argv)
{
	g_test_init(&argc, &argv, NULL);
	g_test_add_func("/chat/detect", test_detect);
	g_test_add_func("/chat/turns", test_turns);
	g_test_add_func("/chat/eog", test_eog);
	return g_test_run();
}
