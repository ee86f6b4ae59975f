/* vocab.c - a model file's vocabulary as text: the bytes of each token
 * (SentencePiece pieces with their word marks and byte tokens, or GPT-2
 * style byte-level pieces).  Turning text into tokens is not here.
 */
#include "model.h"

#include <stdio.h>
#include <string.h>

/* Byte-level BPE writes byte b as code point b when b is printable
 * (33-126, 161-172, 174-255) and as 256 + k for the k-th other byte. */
static int byte_of_cp(uint32_t cp)
{
	int k = 0;

	if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) ||
	    (cp >= 174 && cp <= 255))
		return (int)cp;
	for (int b = 0; b < 256; b++) {
		if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) ||
		    (b >= 174 && b <= 255))
			continue;
		if (cp == 256u + (uint32_t)k)
			return b;
		k++;
	}
	return -1;
}

/* Decodes one UTF-8 code point of s[0..n); returns its length, 0 when
 * malformed. */
static size_t utf8_next(const unsigned char *s, size_t n, uint32_t *cp)
{
	size_t len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 :
		     (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;

	if (!len || len > n)
		return 0;
	*cp = len == 1 ? s[0] : s[0] & (0x7f >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		*cp = (*cp << 6) | (s[i] & 0x3f);
	}
	return len;
}

int model_token_text(const struct gguf *g, int32_t id, char *buf,
		     size_t size)
{
	const struct gguf_kv *kv = gguf_kv_find(g, "tokenizer.ggml.tokens");
	char model[16] = "llama";
	const unsigned char *s;
	size_t n, o = 0;

	if (!size)
		return 0;
	buf[0] = 0;
	if (!kv || kv->type != GGUF_TYPE_ARRAY ||
	    kv->arr_type != GGUF_TYPE_STRING || id < 0 || (uint64_t)id >= kv->n)
		return snprintf(buf, size, "[%d]", (int)id);
	gguf_get_string(g, "tokenizer.ggml.model", model, sizeof(model));
	s = (const unsigned char *)kv->strs[id].s;
	n = (size_t)kv->strs[id].n;
	if (!strcmp(model, "gpt2")) {
		for (size_t i = 0; i < n && o + 1 < size;) {
			uint32_t cp;
			size_t len = utf8_next(s + i, n - i, &cp);
			int b = len ? byte_of_cp(cp) : -1;

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
