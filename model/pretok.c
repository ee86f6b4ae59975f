/* SPDX-License-Identifier: MIT */
/* pretok.c - the pre-tokenizers of byte-level BPE vocabularies: text cut
 * into words before merging, as each family's regular expressions cut it,
 * matched by hand over code points.  A pre-tokenizer is a sequence of
 * passes; each pass cuts every piece the previous ones left into its
 * matches and the text between them (as llama.cpp applies a list of
 * expressions), a piece's ends being the ends of the text for each.  The
 * names of tokenizer.ggml.pre map to them here; merging is tokenizer.c's.
 */
#include "model.h"
#include "unicode.h"

#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

/* One piece of the text: the code points a pass sees. */
struct seg {
	const uint32_t *cp;
	size_t n;
};

static uint32_t at(const struct seg *s, size_t i)
{
	return i < s->n ? s->cp[i] : NONE;
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

static bool mark(uint32_t cp)
{
	return cp != NONE && model_unicode_is_mark(cp);
}

static bool punct(uint32_t cp)
{
	return cp != NONE && model_unicode_is_punct(cp);
}

static bool newline(uint32_t cp)
{
	return cp == '\r' || cp == '\n';
}

/* A letter, or a mark when marks count as letters (qwen35). */
static bool wordish(uint32_t cp, bool marks)
{
	return letter(cp) || (marks && mark(cp));
}

/* Neither space, letter nor number (nor mark, when marks count as
 * letters): what the expressions write [^\s\p{L}\p{N}]. */
static bool other(uint32_t cp, bool marks)
{
	return cp != NONE && !space(cp) && !number(cp) && !wordish(cp, marks);
}

/* Neither space, letter nor number, marks included. */
static bool symbolish(uint32_t cp)
{
	return other(cp, false);
}

static uint32_t lower(uint32_t cp)
{
	return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
}

/* The length of the run of code points in the class at pos. */
static size_t run(const struct seg *s, size_t pos, bool (*in)(uint32_t))
{
	size_t i = pos;

	while (in(at(s, i)))
		i++;
	return i - pos;
}

/* 's 't 're 've 'm 'll 'd at pos (any case when fold): their length. */
static size_t contraction(const struct seg *s, size_t pos, bool fold)
{
	uint32_t n1 = at(s, pos + 1), n2 = at(s, pos + 2);

	if (at(s, pos) != '\'' || n1 == NONE)
		return 0;
	if (fold) {
		n1 = lower(n1);
		n2 = lower(n2);
	}
	if ((n1 == 'r' && n2 == 'e') || (n1 == 'v' && n2 == 'e') ||
	    (n1 == 'l' && n2 == 'l'))
		return 3;
	return n1 == 's' || n1 == 't' || n1 == 'm' || n1 == 'd' ? 2 : 0;
}

/* The white space at pos: \s*[\r\n]+ up to its last line break, else
 * \s+(?!\S) (all but the last before a non-space), else \s+. */
static size_t spaces(const struct seg *s, size_t pos, bool breaks)
{
	size_t ws = 0, last_nl = 0;

	while (space(at(s, pos + ws))) {
		if (newline(at(s, pos + ws)))
			last_nl = ws + 1;
		ws++;
	}
	if (breaks && last_nl)
		return last_nl;
	if (ws > 1 && at(s, pos + ws) != NONE)
		return ws - 1;
	return ws ? ws : 1;
}

/* Llama 3 and Qwen 2 (qwen35 with marks as letters):
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,3}
 *   | ' '?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * (one digit at a time for Qwen).  Every code point falls in a word. */
static size_t llama3_like(const struct seg *s, size_t pos, size_t max_digits,
			  bool marks)
{
	uint32_t cp = at(s, pos);
	size_t i, k = contraction(s, pos, true);

	if (k)
		return k;
	if (!newline(cp) && !number(cp) &&
	    (wordish(cp, marks) || wordish(at(s, pos + 1), marks))) {
		for (i = pos + 1; wordish(at(s, i), marks); i++)
			;
		return i - pos;
	}
	if (number(cp)) {
		for (i = pos; i - pos < max_digits && number(at(s, i)); i++)
			;
		return i - pos;
	}
	if (other(cp == ' ' ? at(s, pos + 1) : cp, marks)) {
		for (i = pos + (cp == ' '); other(at(s, i), marks); i++)
			;
		while (newline(at(s, i)))
			i++;
		return i - pos;
	}
	return spaces(s, pos, true);
}

static size_t m_llama3(const struct seg *s, size_t pos)
{
	return llama3_like(s, pos, 3, false);
}

static size_t m_qwen2(const struct seg *s, size_t pos)
{
	return llama3_like(s, pos, 1, false);
}

static size_t m_qwen35(const struct seg *s, size_t pos)
{
	return llama3_like(s, pos, 1, true);
}

/* GPT-2:  's|'t|'re|'ve|'m|'ll|'d | ' '?\p{L}+ | ' '?\p{N}+
 *   | ' '?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
 * Every code point falls in a word. */
static size_t m_gpt2(const struct seg *s, size_t pos)
{
	uint32_t cp = at(s, pos), c2 = cp == ' ' ? at(s, pos + 1) : cp;
	size_t lead = cp == ' ', k = contraction(s, pos, false);

	if (k)
		return k;
	if (letter(c2))
		return lead + run(s, pos + lead, letter);
	if (number(c2))
		return lead + run(s, pos + lead, number);
	if (other(c2, false))
		return lead + run(s, pos + lead, symbolish);
	return spaces(s, pos, false);
}

/* Tekken (Mistral):
 *   [^\r\n\p{L}\p{N}]?U*L+ | [^\r\n\p{L}\p{N}]?U+L* | \p{N}
 *   | ' '?[^\s\p{L}\p{N}]+[\r\n/]* | \s*[\r\n]+ | \s+(?!\S) | \s+
 * where U is a letter but a-z and L a letter but A-Z (llama.cpp's
 * expression; letters beyond ASCII are both).  Every code point falls in
 * a word.  GPT-4o's (o200k) is the same but for a contraction ('s 't 're
 * 've 'm 'll 'd, any case) that may end each word, and \p{N}{1,3} for
 * numbers. */
static bool upper_ish(uint32_t cp)
{
	return letter(cp) && !(cp >= 'a' && cp <= 'z');
}

static bool lower_ish(uint32_t cp)
{
	return letter(cp) && !(cp >= 'A' && cp <= 'Z');
}

static size_t m_numbers3(const struct seg *s, size_t pos);

static size_t tekken_like(const struct seg *s, size_t pos, bool o200k)
{
	uint32_t cp = at(s, pos);
	size_t q = pos, u = 0, i;

	if (cp != NONE && !newline(cp) && !letter(cp) && !number(cp) &&
	    letter(at(s, pos + 1)))
		q++;
	while (upper_ish(at(s, q + u)))
		u++;
	/* U* gives back what L+ needs, the longest U* first. */
	for (size_t k = u + 1; k-- > 0;) {
		if (lower_ish(at(s, q + k))) {
			for (i = q + k; lower_ish(at(s, i)); i++)
				;
			return i - pos + (o200k ? contraction(s, i, true) : 0);
		}
	}
	if (u) {
		for (i = q + u; lower_ish(at(s, i)); i++)
			;
		return i - pos + (o200k ? contraction(s, i, true) : 0);
	}
	if (number(cp))
		return o200k ? m_numbers3(s, pos) : 1;
	if (other(cp == ' ' ? at(s, pos + 1) : cp, false)) {
		for (i = pos + (cp == ' '); other(at(s, i), false); i++)
			;
		while (newline(at(s, i)) || at(s, i) == '/')
			i++;
		return i - pos;
	}
	return spaces(s, pos, true);
}

static size_t m_tekken(const struct seg *s, size_t pos)
{
	return tekken_like(s, pos, false);
}

static size_t m_gpt4o(const struct seg *s, size_t pos)
{
	return tekken_like(s, pos, true);
}

/* \p{N}: a number alone. */
static size_t m_number(const struct seg *s, size_t pos)
{
	return number(at(s, pos));
}

/* \p{N}{1,3} */
static size_t m_numbers3(const struct seg *s, size_t pos)
{
	size_t i = pos;

	while (i - pos < 3 && number(at(s, i)))
		i++;
	return i - pos;
}

/* \p{N}+ */
static size_t m_numbers(const struct seg *s, size_t pos)
{
	return run(s, pos, number);
}

/* [0-9][0-9][0-9] */
static size_t m_digits3(const struct seg *s, size_t pos)
{
	for (size_t i = pos; i < pos + 3; i++)
		if (at(s, i) < '0' || at(s, i) > '9')
			return 0;
	return 3;
}

/* [\p{P}$+<=>^~|]+ and, for Falcon, with ` too. */
static size_t punct_run(const struct seg *s, size_t pos, const char *more)
{
	size_t i = pos;

	for (uint32_t c; (c = at(s, i)) != NONE; i++)
		if (!punct(c) && !(c < 128 && c && strchr(more, (int)c)))
			break;
	return i - pos;
}

static size_t m_punct(const struct seg *s, size_t pos)
{
	return punct_run(s, pos, "$+<=>^~|");
}

static size_t m_punct_falcon(const struct seg *s, size_t pos)
{
	return punct_run(s, pos, "$+<=>^~|`");
}

/* [\r\n]: one line break alone. */
static size_t m_newline(const struct seg *s, size_t pos)
{
	return newline(at(s, pos));
}

/* \s?X+ for a class X. */
static size_t space_then(const struct seg *s, size_t pos,
			 bool (*in)(uint32_t))
{
	size_t lead = space(at(s, pos)) && in(at(s, pos + 1));
	size_t n = run(s, pos + lead, in);

	return n ? lead + n : 0;
}

static size_t m_space_letters(const struct seg *s, size_t pos)
{
	return space_then(s, pos, letter);
}

static size_t m_space_punct(const struct seg *s, size_t pos)
{
	return space_then(s, pos, punct);
}

/* [一-龥ࠀ-一가-퟿]+: U+0800-U+9FA5 and U+AC00-U+D7FF, white space
 * aside (the expression sees every other space as a vertical tab). */
static bool cjk(uint32_t cp)
{
	return ((cp >= 0x800 && cp <= 0x9fa5) ||
		(cp >= 0xac00 && cp <= 0xd7ff)) && !space(cp);
}

static size_t m_cjk(const struct seg *s, size_t pos)
{
	return run(s, pos, cjk);
}

/* [一-龥぀-ゟ゠-ヿ]+: CJK ideographs, hiragana and katakana (DeepSeek V3). */
static bool cjk_kana(uint32_t cp)
{
	return (cp >= 0x4e00 && cp <= 0x9fa5) || (cp >= 0x3040 && cp <= 0x30ff);
}

static size_t m_cjk_kana(const struct seg *s, size_t pos)
{
	return run(s, pos, cjk_kana);
}

/* \p{P} or \p{S} as llama.cpp's expressions see them: below 128, its
 * own lists (where ~ is neither). */
static bool punct_symbol(uint32_t cp)
{
	if (cp < 128)
		return cp && strchr("!\"#%&'()*,-./:;?@[\\]_{}$+<=>^`|",
				    (int)cp);
	return cp != NONE &&
	       (model_unicode_is_punct(cp) || model_unicode_is_symbol(cp));
}

static bool ascii_letter(uint32_t cp)
{
	return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z');
}

/* DeepSeek V3's words:
 *   [!-/:-@[-`{-~][A-Za-z]+ | [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
 *   | ' '?[\p{P}\p{S}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+ */
static size_t m_deepseek3(const struct seg *s, size_t pos)
{
	uint32_t cp = at(s, pos), c2 = cp == ' ' ? at(s, pos + 1) : cp;
	size_t i;

	if (cp > ' ' && cp < 127 && !ascii_letter(cp) &&
	    !(cp >= '0' && cp <= '9') && ascii_letter(at(s, pos + 1))) {
		for (i = pos + 1; ascii_letter(at(s, i)); i++)
			;
		return i - pos;
	}
	if (wordish(cp, true) ||
	    (cp != NONE && !newline(cp) && !letter(cp) && !punct_symbol(cp) &&
	     wordish(at(s, pos + 1), true))) {
		for (i = pos + 1; wordish(at(s, i), true); i++)
			;
		return i - pos;
	}
	if (punct_symbol(c2)) {
		for (i = pos + (cp == ' '); punct_symbol(at(s, i)); i++)
			;
		while (newline(at(s, i)))
			i++;
		return i - pos;
	}
	return space(cp) ? spaces(s, pos, true) : 0;
}

/* DeepSeek LLM's letters: the Latin, Greek, Cyrillic, Armenian, Georgian,
 * Cherokee and other cased scripts its tokenizer names one range at a
 * time (\s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+), not \p{L}. */
static const uint32_t deepseek_letters[][2] = {
	{ 0x41, 0x5a }, { 0x61, 0x7a }, { 0xb5, 0xb5 }, { 0xc0, 0xd6 },
	{ 0xd8, 0xf6 }, { 0xf8, 0x1ba }, { 0x1bc, 0x1bf }, { 0x1c4, 0x293 },
	{ 0x295, 0x2af }, { 0x370, 0x373 }, { 0x376, 0x377 }, { 0x37b, 0x37d },
	{ 0x37f, 0x37f }, { 0x386, 0x386 }, { 0x388, 0x38a }, { 0x38c, 0x38c },
	{ 0x38e, 0x3a1 }, { 0x3a3, 0x3f5 }, { 0x3f7, 0x481 }, { 0x48a, 0x52f },
	{ 0x531, 0x556 }, { 0x10a0, 0x10c5 }, { 0x13a0, 0x13f5 },
	{ 0x13f8, 0x13fd }, { 0x1c90, 0x1cba }, { 0x1cbd, 0x1cbf },
	{ 0x1d00, 0x1d2b }, { 0x1d6b, 0x1d77 }, { 0x1d79, 0x1d9a },
	{ 0x1e00, 0x1f15 }, { 0x1f18, 0x1f1d }, { 0x1f20, 0x1f45 },
	{ 0x1f48, 0x1f4d }, { 0x1f50, 0x1f57 }, { 0x1f59, 0x1f59 },
	{ 0x1f5b, 0x1f5b }, { 0x1f5d, 0x1f5d }, { 0x1f5f, 0x1f7d },
	{ 0x1f80, 0x1fb4 }, { 0x1fb6, 0x1fbc }, { 0x1fbe, 0x1fbe },
	{ 0x1fc2, 0x1fc4 }, { 0x1fc6, 0x1fcc }, { 0x1fd0, 0x1fd3 },
	{ 0x1fd6, 0x1fdb }, { 0x1fe0, 0x1fec }, { 0x1ff2, 0x1ff4 },
	{ 0x1ff6, 0x1ffc }, { 0x2102, 0x2102 }, { 0x2107, 0x2107 },
	{ 0x210a, 0x2113 }, { 0x2115, 0x2115 }, { 0x2119, 0x211d },
	{ 0x2124, 0x2124 }, { 0x2126, 0x2126 }, { 0x2128, 0x2128 },
	{ 0x212a, 0x212d }, { 0x212f, 0x2134 }, { 0x2139, 0x2139 },
	{ 0x213c, 0x213f }, { 0x2145, 0x2149 }, { 0x214e, 0x214e },
	{ 0x2183, 0x2184 }, { 0x2c00, 0x2c7b }, { 0x2c7e, 0x2ce4 },
	{ 0x2ceb, 0x2cee }, { 0x2cf2, 0x2cf3 }, { 0xa640, 0xa66d },
	{ 0xa680, 0xa69b }, { 0xa722, 0xa76f }, { 0xa771, 0xa787 },
	{ 0xa78b, 0xa78e }, { 0xab70, 0xabbf }, { 0xfb00, 0xfb06 },
	{ 0xfb13, 0xfb17 }, { 0xff21, 0xff3a }, { 0xff41, 0xff5a },
	{ 0x10400, 0x1044f }, { 0x104b0, 0x104d3 }, { 0x104d8, 0x104fb },
	{ 0x10c80, 0x10cb2 }, { 0x10cc0, 0x10cf2 }, { 0x118a0, 0x118df },
	{ 0x1e900, 0x1e943 },
};

/* DeepSeek LLM's punctuation: [!-/:-~！-／：-～‘-‟　-。] (the ideographic
 * space excepted, as a space). */
static const uint32_t deepseek_punct[][2] = {
	{ 0x21, 0x2f }, { 0x3a, 0x7e }, { 0x2018, 0x201f }, { 0x3001, 0x3002 },
	{ 0xff01, 0xff0f }, { 0xff1a, 0xff5e },
};

static bool in_table(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
	for (size_t i = 0; i < n; i++)
		if (cp >= r[i][0] && cp <= r[i][1])
			return true;
	return false;
}

static bool deepseek_letter(uint32_t cp)
{
	size_t n = sizeof(deepseek_letters) / sizeof(deepseek_letters[0]);

	return cp != NONE && cp <= 0x1e943 &&
	       in_table(deepseek_letters, n, cp);
}

static bool deepseek_sign(uint32_t cp)
{
	return in_table(deepseek_punct, 6, cp);
}

static size_t m_space_latin(const struct seg *s, size_t pos)
{
	return space_then(s, pos, deepseek_letter);
}

static size_t m_space_ascii_punct(const struct seg *s, size_t pos)
{
	return space_then(s, pos, deepseek_sign);
}

/* \s+$: the white space that ends the piece.  A space after a space
 * cannot start it (the run would have matched from the first). */
static size_t m_trailing_space(const struct seg *s, size_t pos)
{
	size_t i = pos;

	if (pos && space(at(s, pos - 1)))
		return 0;
	while (space(at(s, i)))
		i++;
	return i > pos && i == s->n ? i - pos : 0;
}

/* [^\n]+|\n+ (Gemma 4: runs of line breaks and of the rest). */
static size_t m_lines(const struct seg *s, size_t pos)
{
	bool nl = at(s, pos) == '\n';
	size_t i = pos;

	while (at(s, i) != NONE && (at(s, i) == '\n') == nl)
		i++;
	return i - pos;
}

/* A pass: the length of the match at pos of its piece, 0 for none. */
typedef size_t (*pass_fn)(const struct seg *s, size_t pos);

#define MAX_PASSES 6

static const struct pretok {
	pass_fn pass[MAX_PASSES]; /* in order, NULL-terminated */
} pretoks[] = {
	[MODEL_PRETOK_LLAMA3] = { { m_llama3 } },
	[MODEL_PRETOK_QWEN2] = { { m_qwen2 } },
	[MODEL_PRETOK_QWEN35] = { { m_qwen35 } },
	[MODEL_PRETOK_GPT2] = { { m_gpt2 } },
	[MODEL_PRETOK_STARCODER] = { { m_number, m_gpt2 } },
	[MODEL_PRETOK_DEFAULT] = { { m_punct, m_gpt2, m_numbers,
				     m_digits3 } },
	[MODEL_PRETOK_FALCON] = { { m_punct_falcon, m_gpt2, m_digits3 } },
	[MODEL_PRETOK_DEEPSEEK_CODER] = { { m_newline, m_space_letters,
					    m_space_punct, m_cjk,
					    m_number } },
	[MODEL_PRETOK_DEEPSEEK_LLM] = { { m_newline, m_space_latin,
					  m_space_ascii_punct,
					  m_trailing_space, m_cjk,
					  m_numbers } },
	[MODEL_PRETOK_GEMMA4] = { { m_lines } },
	[MODEL_PRETOK_TEKKEN] = { { m_tekken } },
	[MODEL_PRETOK_GPT4O] = { { m_gpt4o } },
	[MODEL_PRETOK_DEEPSEEK3] = { { m_numbers3, m_cjk_kana, m_deepseek3 } },
};

/* The names of tokenizer.ggml.pre, and which pre-tokenizer each is. */
static const struct {
	const char *name;
	enum model_pretok kind;
} names[] = {
	{ "default", MODEL_PRETOK_DEFAULT },
	{ "llama-bpe", MODEL_PRETOK_LLAMA3 },
	{ "llama3", MODEL_PRETOK_LLAMA3 },
	{ "llama-v3", MODEL_PRETOK_LLAMA3 },
	{ "falcon3", MODEL_PRETOK_LLAMA3 },
	{ "dbrx", MODEL_PRETOK_LLAMA3 },
	{ "smaug-bpe", MODEL_PRETOK_LLAMA3 },
	{ "qwen2", MODEL_PRETOK_QWEN2 },
	{ "deepseek-r1-qwen", MODEL_PRETOK_QWEN2 },
	{ "stablelm2", MODEL_PRETOK_QWEN2 },
	{ "megrez", MODEL_PRETOK_QWEN2 },
	{ "qwen35", MODEL_PRETOK_QWEN35 },
	{ "gpt-2", MODEL_PRETOK_GPT2 },
	{ "phi-2", MODEL_PRETOK_GPT2 },
	{ "mpt", MODEL_PRETOK_GPT2 },
	{ "olmo", MODEL_PRETOK_GPT2 },
	{ "jais", MODEL_PRETOK_GPT2 },
	{ "starcoder", MODEL_PRETOK_STARCODER },
	{ "refact", MODEL_PRETOK_STARCODER },
	{ "command-r", MODEL_PRETOK_STARCODER },
	{ "smollm", MODEL_PRETOK_STARCODER },
	{ "codeshell", MODEL_PRETOK_STARCODER },
	{ "exaone", MODEL_PRETOK_STARCODER },
	{ "minerva-7b", MODEL_PRETOK_STARCODER },
	{ "falcon", MODEL_PRETOK_FALCON },
	{ "deepseek-coder", MODEL_PRETOK_DEEPSEEK_CODER },
	{ "deepseek-llm", MODEL_PRETOK_DEEPSEEK_LLM },
	{ "gemma4", MODEL_PRETOK_GEMMA4 },
	{ "tekken", MODEL_PRETOK_TEKKEN },
	{ "gpt-4o", MODEL_PRETOK_GPT4O },
	{ "deepseek-v3", MODEL_PRETOK_DEEPSEEK3 },
};

int model_pretok_by_name(const char *name, enum model_pretok *kind)
{
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		if (!strcmp(names[i].name, name)) {
			*kind = names[i].kind;
			return LOOM_OK;
		}
	}
	return LOOM_E_UNSUPPORTED;
}

const char *model_pretok_names(size_t i)
{
	return i < sizeof(names) / sizeof(names[0]) ? names[i].name : NULL;
}

/* The pieces ends[0..*n) (code point indices) cut again by pass f into
 * out, which has room for one end per code point. */
static size_t cut(const uint32_t *cp, const size_t *ends, size_t n,
		  pass_fn f, size_t *out)
{
	size_t m = 0, lo = 0;

	for (size_t k = 0; k < n; lo = ends[k++]) {
		struct seg s = { cp + lo, ends[k] - lo };
		size_t gap = 0;

		for (size_t pos = 0; pos < s.n;) {
			size_t len = f(&s, pos);

			if (!len) {
				pos++;
				continue;
			}
			if (pos > gap)
				out[m++] = lo + pos;
			pos += len;
			out[m++] = lo + pos;
			gap = pos;
		}
		if (gap < s.n)
			out[m++] = lo + s.n;
	}
	return m;
}

int model_pretokenize(enum model_pretok kind, const char *text, size_t len,
		      size_t **ends, size_t *n_words)
{
	const struct pretok *p = &pretoks[kind];
	uint32_t *cp = malloc((len + 1) * sizeof(*cp));
	size_t *off = malloc((len + 1) * sizeof(*off));
	size_t *a = malloc((len + 1) * sizeof(*a));
	size_t *b = malloc((len + 1) * sizeof(*b));
	size_t n_cp = 0, n = 0;
	int ret = LOOM_OK;

	if (!cp || !off || !a || !b) {
		ret = loom_error_set(LOOM_E_NOMEM, "tokenizer: no memory");
		goto out;
	}
	for (size_t o = 0; o < len; n_cp++) {
		size_t k = model_utf8_decode((const unsigned char *)text + o,
					     len - o, &cp[n_cp]);

		if (!k) {
			ret = loom_error_set(LOOM_E_INVAL, "tokenizer: the "
					     "text is not UTF-8 at byte %zu",
					     o);
			goto out;
		}
		off[n_cp] = o;
		o += k;
	}
	off[n_cp] = len;
	if (n_cp)
		a[n++] = n_cp;
	for (int i = 0; i < MAX_PASSES && p->pass[i]; i++) {
		size_t *t = a;

		n = cut(cp, a, n, p->pass[i], b);
		a = b;
		b = t;
	}
	/* Code point indices to byte offsets. */
	for (size_t i = 0; i < n; i++)
		a[i] = off[a[i]];
	*ends = a;
	*n_words = n;
	a = NULL;
out:
	free(cp);
	free(off);
	free(a);
	free(b);
	return ret;
}
