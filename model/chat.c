/* SPDX-License-Identifier: MIT */
/* chat.c - conversations with instruction-tuned models: the chat template
 * families recognised from a file's tokenizer.chat_template by their
 * markers (the template is not executed), the text of each turn in a
 * family's format, and the tokens that end a reply.  Generating is the
 * application's.
 */
#define _GNU_SOURCE /* memmem */
#include "model.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The families, each with the marker that gives it away in a template
 * (the first that matches wins: gpt-oss's templates hold <|end|> too) and
 * the parts of a turn.  A system text without a part of its own goes
 * before the first user text. */
static const struct family {
	const char *name, *marker;
	const char *sys_open, *sys_close; /* NULL: in the first user turn */
	const char *user_open, *user_close;
	const char *reply_open;  /* after the user turn: the reply follows */
	const char *reply_close; /* what ends a reply in the history */
} families[] = {
	[MODEL_CHAT_GPT_OSS] = { "gpt-oss", "<|channel|>",
		"<|start|>system<|message|>", "<|end|>",
		"<|start|>user<|message|>", "<|end|>",
		"<|start|>assistant", "<|end|>" },
	[MODEL_CHAT_CHATML] = { "chatml", "<|im_start|>",
		"<|im_start|>system\n", "<|im_end|>\n",
		"<|im_start|>user\n", "<|im_end|>\n",
		"<|im_start|>assistant\n", "<|im_end|>\n" },
	[MODEL_CHAT_LLAMA3] = { "llama3", "<|start_header_id|>",
		"<|start_header_id|>system<|end_header_id|>\n\n", "<|eot_id|>",
		"<|start_header_id|>user<|end_header_id|>\n\n", "<|eot_id|>",
		"<|start_header_id|>assistant<|end_header_id|>\n\n",
		"<|eot_id|>" },
	[MODEL_CHAT_GEMMA] = { "gemma", "<start_of_turn>",
		NULL, NULL,
		"<start_of_turn>user\n", "<end_of_turn>\n",
		"<start_of_turn>model\n", "<end_of_turn>\n" },
	[MODEL_CHAT_PHI3] = { "phi3", "<|assistant|>",
		"<|system|>\n", "<|end|>\n",
		"<|user|>\n", "<|end|>\n",
		"<|assistant|>\n", "<|end|>\n" },
	[MODEL_CHAT_MISTRAL] = { "mistral", "[INST]",
		NULL, NULL,
		"[INST] ", " [/INST]",
		"", "</s>" },
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

const char *model_chat_name(enum model_chat kind)
{
	return (size_t)kind < N_FAMILIES ? families[kind].name : NULL;
}

int model_chat_by_name(const char *name, enum model_chat *kind)
{
	for (size_t i = 0; i < N_FAMILIES; i++) {
		if (!strcmp(families[i].name, name)) {
			*kind = (enum model_chat)i;
			return LOOM_OK;
		}
	}
	return loom_error_set(LOOM_E_UNSUPPORTED, "no chat template '%s' "
			      "(chatml, llama3, gemma, phi3, mistral and "
			      "gpt-oss are known)", name);
}

int model_chat_detect(const struct gguf *g, enum model_chat *kind)
{
	const struct gguf_kv *kv = gguf_kv_find(g, "tokenizer.chat_template");

	if (!kv || kv->type != GGUF_TYPE_STRING)
		return loom_error_set(LOOM_E_NOT_FOUND, "the file has no chat "
				      "template");
	for (size_t i = 0; i < N_FAMILIES; i++) {
		const char *m = families[i].marker;

		if (memmem(kv->strs[0].s, (size_t)kv->strs[0].n, m, strlen(m))) {
			*kind = (enum model_chat)i;
			return LOOM_OK;
		}
	}
	return loom_error_set(LOOM_E_UNSUPPORTED, "the file's chat template "
			      "is of no family Loom knows");
}

/* Appends the strings (NULL-terminated list) to *buf. */
static int append(char **buf, size_t *len, ...)
{
	size_t add = 0;
	const char *s;
	va_list ap;
	char *p;

	va_start(ap, len);
	while ((s = va_arg(ap, const char *)))
		add += strlen(s);
	va_end(ap);
	p = realloc(*buf, *len + add + 1);
	if (!p)
		return loom_error_set(LOOM_E_NOMEM, "chat: no memory");
	*buf = p;
	va_start(ap, len);
	while ((s = va_arg(ap, const char *))) {
		memcpy(p + *len, s, strlen(s));
		*len += strlen(s);
	}
	va_end(ap);
	p[*len] = 0;
	return LOOM_OK;
}

int model_chat_turn(enum model_chat kind, const char *system,
		    const char *user, bool first, char **out)
{
	const struct family *f;
	char *buf = NULL;
	size_t len = 0;
	int ret;

	if ((size_t)kind >= N_FAMILIES)
		return loom_error_set(LOOM_E_INVAL, "chat: no template %d",
				      (int)kind);
	f = &families[kind];
	ret = append(&buf, &len, first ? "" : f->reply_close, NULL);
	if (!ret && first && system && *system && f->sys_open)
		ret = append(&buf, &len, f->sys_open, system, f->sys_close,
			     NULL);
	if (!ret)
		ret = append(&buf, &len, f->user_open, NULL);
	if (!ret && first && system && *system && !f->sys_open)
		ret = append(&buf, &len, system, "\n\n", NULL);
	if (!ret)
		ret = append(&buf, &len, user, f->user_close, f->reply_open,
			     NULL);
	if (ret) {
		free(buf);
		return ret;
	}
	*out = buf;
	return LOOM_OK;
}

/* The texts of the tokens that end a reply in one family or another. */
static const char *const eog_texts[] = {
	"<|im_end|>", "<|eot_id|>", "<|eom_id|>", "<end_of_turn>", "<|end|>",
	"<|return|>", "<|call|>", "<|endoftext|>", "<|end_of_text|>",
	"<EOT>", "<end_of_utterance>",
};

static bool has(const int32_t *ids, int n, int32_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

int model_eog_tokens(const struct gguf *g, int32_t **out, int *n_out)
{
	static const char *const keys[] = {
		"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
		"tokenizer.ggml.eom_token_id",
	};
	const struct gguf_kv *kv = gguf_kv_find(g, "tokenizer.ggml.tokens");
	size_t n_text = sizeof(eog_texts) / sizeof(eog_texts[0]);
	int32_t *ids = malloc((3 + n_text) * sizeof(*ids));
	uint64_t n_vocab = 0;
	bool harmony = false;
	int n = 0;

	if (!ids)
		return loom_error_set(LOOM_E_NOMEM, "chat: no memory");
	if (kv && kv->type == GGUF_TYPE_ARRAY &&
	    kv->arr_type == GGUF_TYPE_STRING)
		n_vocab = kv->n;
	for (size_t i = 0; i < 3; i++) {
		int64_t v;

		if (!gguf_get_int(g, keys[i], &v) && v >= 0 &&
		    (uint64_t)v < n_vocab && !has(ids, n, (int32_t)v))
			ids[n++] = (int32_t)v;
	}
	/* <|end|> ends a message, not the reply, where <|return|> is the
	 * end of a reply (gpt-oss). */
	for (uint64_t i = 0; i < n_vocab; i++)
		harmony |= kv->strs[i].n == 10 &&
			   !memcmp(kv->strs[i].s, "<|return|>", 10);
	for (uint64_t i = 0; i < n_vocab; i++) {
		for (size_t k = 0; k < n_text; k++) {
			size_t len = strlen(eog_texts[k]);

			if ((size_t)kv->strs[i].n != len ||
			    memcmp(kv->strs[i].s, eog_texts[k], len) ||
			    (harmony && !strcmp(eog_texts[k], "<|end|>")) ||
			    has(ids, n, (int32_t)i) ||
			    (size_t)n == 3 + n_text)
				continue;
			ids[n++] = (int32_t)i;
		}
	}
	*out = ids;
	*n_out = n;
	return LOOM_OK;
}
