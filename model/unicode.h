/* SPDX-License-Identifier: MIT */
/* unicode.h - what the pre-tokenizers ask of a code point (letter, number,
 * mark, punctuation, symbol, white space) and UTF-8 decoding.  The tables are generated
 * (unicode-data.c, by gen-unicode.py).
 */
#ifndef LOOM_MODEL_UNICODE_H
#define LOOM_MODEL_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

extern const uint32_t model_unicode_letters[][2];
extern const size_t model_unicode_letters_n;
extern const uint32_t model_unicode_numbers[][2];
extern const size_t model_unicode_numbers_n;
extern const uint32_t model_unicode_marks[][2];
extern const size_t model_unicode_marks_n;
extern const uint32_t model_unicode_punct[][2];
extern const size_t model_unicode_punct_n;
extern const uint32_t model_unicode_symbols[][2];
extern const size_t model_unicode_symbols_n;

bool model_unicode_is_letter(uint32_t cp);
bool model_unicode_is_number(uint32_t cp);
bool model_unicode_is_mark(uint32_t cp);
bool model_unicode_is_punct(uint32_t cp);
bool model_unicode_is_symbol(uint32_t cp);
/* The White_Space property. */
bool model_unicode_is_space(uint32_t cp);
/* Byte-level BPE writes byte b as code point b when b is printable and
 * as 256 + k for the k-th other byte; these map both ways (-1: no byte). */
uint32_t model_bpe_byte_cp(uint8_t b);
int model_bpe_cp_byte(uint32_t cp);
/* Encodes cp as UTF-8 into s (4 bytes); returns the length. */
size_t model_utf8_encode(uint32_t cp, char *s);
/* Decodes the code point at s[0..n) (n > 0) into *cp; returns its length,
 * 0 when the bytes are not UTF-8 (overlong, surrogate, out of range or
 * cut short). */
size_t model_utf8_decode(const unsigned char *s, size_t n, uint32_t *cp);

#endif /* LOOM_MODEL_UNICODE_H */
