/* SPDX-License-Identifier: MIT */
/* pretok.c - the pre-tokenizers of byte-level BPE vocabularies: text cut
 * into words before merging, as the regular expressions of llama-bpe
 * (Llama 3) and qwen2 cut it:
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3}
 *   | ' '?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * (qwen2 takes one digit at a time), matched by hand over code points.
 */
#include "model.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

struct cps {
	uint32_t *cp;
	size_t *off; /* byte offset of each code point, n + 1 of them */
	size_t n;
};

static uint32_t at(const struct cps *c, size_t i)
{
	return i < c->n ? c->cp[i] : NONE;
}

static bool letter(uint32_t cp)
{
	return cp != NONE && model_unicode_is_letter(cp);
}

static bool number(uint32_t cp)
{
	return cp != NONE && model_unicode_is_number(cp);
}

static bool space(uint32_t cp)
{
	return cp != NONE && model_unicode_is_space(cp);
}

static uint32_t lower(uint32_t cp)
{
	return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
}

/* The length in code points of the word starting at pos. */
static size_t word(const struct cps *c, size_t pos, size_t max_digits)
{
	uint32_t cp = at(c, pos), n1 = lower(at(c, pos + 1));
	size_t i = pos, ws = 0, last_nl = 0;

	if (cp == '\'' && n1 != NONE) {
		uint32_t n2 = lower(at(c, pos + 2));

		if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') ||
		    (n1 == 'l' && n2 == 'l'))
			return 3;
		if (n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd')
			return 2;
	}
	if (!(cp == '\r' || cp == '\n' || number(cp)) &&
	    (letter(cp) || letter(at(c, pos + 1)))) {
		for (i = pos + 1; letter(at(c, i)); i++)
			;
		return i - pos;
	}
	if (number(cp)) {
		for (i = pos; i - pos < max_digits && number(at(c, i)); i++)
			;
		return i - pos;
	}
	{
		uint32_t c2 = cp == ' ' ? at(c, pos + 1) : cp;

		if (c2 != NONE && !space(c2) && !letter(c2) && !number(c2)) {
			i = pos + (cp == ' ');
			while (at(c, i) != NONE && !space(at(c, i)) &&
			       !letter(at(c, i)) && !number(at(c, i)))
				i++;
			while (at(c, i) == '\r' || at(c, i) == '\n')
				i++;
			return i - pos;
		}
	}
	while (space(at(c, pos + ws))) {
		uint32_t w = at(c, pos + ws);

		if (w == '\r' || w == '\n')
			last_nl = ws + 1;
		ws++;
	}
	if (last_nl)
		return last_nl;
	/* Trailing white space but the last before a non-space. */
	if (ws > 1 && at(c, pos + ws) != NONE)
		return ws - 1;
	return ws ? ws : 1;
}

int model_pretokenize(enum model_pretok kind, const char *text, size_t len,
		      size_t **ends, size_t *n_words)
{
	struct cps c = { 0 };
	size_t *e, n = 0;
	size_t digits = kind == MODEL_PRETOK_QWEN2 ? 1 : 3;

	c.cp = malloc((len + 1) * sizeof(*c.cp));
	c.off = malloc((len + 1) * sizeof(*c.off));
	e = malloc((len + 1) * sizeof(*e));
	if (!c.cp || !c.off || !e) {
		free(c.cp);
		free(c.off);
		free(e);
		return loom_error_set(LOOM_E_NOMEM, "tokenizer: no memory");
	}
	for (size_t off = 0; off < len; c.n++) {
		size_t k = model_utf8_decode((const unsigned char *)text + off,
					     len - off, &c.cp[c.n]);

		if (!k) {
			free(c.cp);
			free(c.off);
			free(e);
			return loom_error_set(LOOM_E_INVAL, "tokenizer: the "
					      "text is not UTF-8 at byte %zu",
					      off);
		}
		c.off[c.n] = off;
		off += k;
	}
	c.off[c.n] = len;
	for (size_t pos = 0; pos < c.n;) {
		pos += word(&c, pos, digits);
		e[n++] = c.off[pos];
	}
	free(c.cp);
	free(c.off);
	*ends = e;
	*n_words = n;
	return LOOM_OK;
}
