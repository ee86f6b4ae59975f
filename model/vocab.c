/* SPDX-License-Identifier: MIT */
/* vocab.c - a model file's vocabulary as text: the bytes of each token
 * (SentencePiece pieces with their word marks and byte tokens, as Gemma 4's
 * BPE pieces are too, or GPT-2 style byte-level pieces).  Turning text into tokens is not here.
 */
#include "model.h"
#include "unicode.h"

#include <stdio.h>
#include <string.h>

int model_token_text(const struct gguf *g, int32_t id, char *buf,
		     size_t size)
{
	const struct gguf_kv *kv = gguf_kv_find(g, "tokenizer.ggml.tokens");
	const struct gguf_kv *tt;
	char model[16] = "llama", pre[16] = "";
	const unsigned char *s;
	size_t n, o = 0;

	if (!size)
		return 0;
	buf[0] = 0;
	if (!kv || kv->type != GGUF_TYPE_ARRAY ||
	    kv->arr_type != GGUF_TYPE_STRING || id < 0 || (uint64_t)id >= kv->n)
		return snprintf(buf, size, "[%d]", (int)id);
	/* Control tokens (type 3: BOS, EOS, ...) have no text. */
	tt = gguf_kv_find(g, "tokenizer.ggml.token_type");
	if (tt && tt->type == GGUF_TYPE_ARRAY && tt->n == kv->n &&
	    (tt->arr_type == GGUF_TYPE_INT32 ||
	     tt->arr_type == GGUF_TYPE_UINT32) &&
	    gguf_kv_number(tt, (uint64_t)id) == 3)
		return 0;
	gguf_get_string(g, "tokenizer.ggml.model", model, sizeof(model));
	gguf_get_string(g, "tokenizer.ggml.pre", pre, sizeof(pre));
	s = (const unsigned char *)kv->strs[id].s;
	n = (size_t)kv->strs[id].n;
	if (!strcmp(model, "gpt2") && strcmp(pre, "gemma4")) {
		for (size_t i = 0; i < n && o + 1 < size;) {
			uint32_t cp;
			size_t len = model_utf8_decode(s + i, n - i, &cp);
			int b = len ? model_bpe_cp_byte(cp) : -1;

			if (b < 0)
				return snprintf(buf, size, "[%d]", (int)id);
			buf[o++] = (char)b;
			i += len;
		}
	} else if (n == 6 && !memcmp(s, "<0x", 3) && s[5] == '>') {
		unsigned v;

		if (sscanf((const char *)s + 3, "%2x", &v) == 1 && size > 1)
			buf[o++] = (char)v;
	} else {
		for (size_t i = 0; i < n && o + 1 < size;) {
			if (i + 3 <= n && !memcmp(s + i, "\xe2\x96\x81", 3)) {
				buf[o++] = ' ';
				i += 3;
			} else {
				buf[o++] = (char)s[i++];
			}
		}
	}
	buf[o] = 0;
	return (int)o;
}
