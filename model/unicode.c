/* SPDX-License-Identifier: MIT */
/* unicode.c - code point classes by binary search over the generated
 * ranges, white space by its short fixed list, UTF-8, and the byte-level
 * BPE mapping of bytes to code points.
 */
#include "unicode.h"

static bool in_ranges(const uint32_t (*r)[2], size_t n, uint32_t cp)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (cp < r[mid][0])
			hi = mid;
		else if (cp > r[mid][1])
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

bool model_unicode_is_letter(uint32_t cp)
{
	return in_ranges(model_unicode_letters, model_unicode_letters_n, cp);
}

bool model_unicode_is_number(uint32_t cp)
{
	return in_ranges(model_unicode_numbers, model_unicode_numbers_n, cp);
}

bool model_unicode_is_mark(uint32_t cp)
{
	return in_ranges(model_unicode_marks, model_unicode_marks_n, cp);
}

bool model_unicode_is_punct(uint32_t cp)
{
	return in_ranges(model_unicode_punct, model_unicode_punct_n, cp);
}

bool model_unicode_is_symbol(uint32_t cp)
{
	return in_ranges(model_unicode_symbols, model_unicode_symbols_n, cp);
}

bool model_unicode_is_space(uint32_t cp)
{
	return (cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 ||
	       cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
	       cp == 0x2028 || cp == 0x2029 || cp == 0x202f ||
	       cp == 0x205f || cp == 0x3000;
}

size_t model_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
	static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
	size_t len = s[0] < 0x80 ? 1 : (s[0] >> 5) == 6 ? 2 :
		     (s[0] >> 4) == 14 ? 3 : (s[0] >> 3) == 30 ? 4 : 0;
	uint32_t v;

	if (!len || len > n)
		return 0;
	v = len == 1 ? s[0] : s[0] & (0x7fu >> len);
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = (v << 6) | (s[i] & 0x3f);
	}
	if (v < min[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return len;
}

static bool printable(unsigned b)
{
	return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) ||
	       (b >= 174 && b <= 255);
}

uint32_t model_bpe_byte_cp(uint8_t b)
{
	uint32_t k = 0;

	if (printable(b))
		return b;
	for (unsigned i = 0; i < b; i++)
		k += !printable(i);
	return 256 + k;
}

int model_bpe_cp_byte(uint32_t cp)
{
	uint32_t k = 0;

	if (cp < 256)
		return printable(cp) ? (int)cp : -1;
	for (unsigned b = 0; b < 256; b++) {
		if (printable(b))
			continue;
		if (cp == 256 + k)
			return (int)b;
		k++;
	}
	return -1;
}

size_t model_utf8_encode(uint32_t cp, char *s)
{
	if (cp < 0x80) {
		s[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		s[0] = (char)(0xc0 | (cp >> 6));
		s[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		s[0] = (char)(0xe0 | (cp >> 12));
		s[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
		s[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	s[0] = (char)(0xf0 | (cp >> 18));
	s[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
	s[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
	s[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}
