/* SPDX-License-Identifier: MIT */
/* tokenizer.c - text to token ids with a model file's vocabulary.
 * SentencePiece-style (tokenizer.ggml.model "llama"): spaces as U+2581,
 * the highest-scoring adjacent pair merged first (the leftmost on ties),
 * characters left without a token written as byte tokens.  BPE ("gpt2"):
 * words cut by the pre-tokenizer (pretok.c), the lowest-ranked merge
 * first (the leftmost on ties); byte-level vocabularies write a word's
 * bytes as code points, Gemma 4's its spaces as U+2581 and characters
 * left without a token as byte tokens.
 * Before either, the text is cut at the special tokens' texts (the
 * user-defined ones always, control and unknown ones when asked), the
 * longest first; each such piece is its token and the text between is
 * tokenized piece by piece.
 */
#define _GNU_SOURCE /* memmem */
#include "model.h"
#include "unicode.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Strings by text: indices + 1, open addressing; 0 is an empty slot. */
struct strmap {
	const struct gguf_str *s;
	uint32_t *slot;
	size_t mask;
};

struct model_tokenizer {
	uint64_t n_vocab;
	const struct gguf_str *tok;
	const struct gguf_kv *scores;
	struct strmap vocab;
	bool bpe;
	bool byte_level; /* BPE over bytes written as code points */
	enum model_pretok pre;
	bool ignore_merges;  /* a word that is a token is not merged */
	struct strmap merges; /* "left right" -> rank */
	int32_t bytes[256];  /* the <0xXX> tokens, -1 where absent */
	int32_t bos, eos;
	bool add_bos, add_eos, add_space;
	/* The special tokens, longest text first; control[] says which
	 * are control or unknown (cut only when asked). */
	int32_t *special;
	bool *control;
	int n_special;
};

static uint64_t fnv(const char *s, size_t n)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < n; i++)
		h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
	return h;
}

static int32_t strmap_find(const struct strmap *m, const char *s, size_t n)
{
	for (size_t h = fnv(s, n) & m->mask;; h = (h + 1) & m->mask) {
		uint32_t v = m->slot[h];

		if (!v)
			return -1;
		if (m->s[v - 1].n == n && !memcmp(m->s[v - 1].s, s, n))
			return (int32_t)(v - 1);
	}
}

/* A string that appears twice maps to its last index. */
static int strmap_init(struct strmap *m, const struct gguf_str *s,
		       uint64_t n)
{
	size_t size = 2;

	while (size < 2 * n)
		size *= 2;
	m->s = s;
	m->mask = size - 1;
	m->slot = calloc(size, sizeof(*m->slot));
	if (!m->slot)
		return loom_error_set(LOOM_E_NOMEM, "tokenizer: no memory");
	for (uint64_t i = 0; i < n; i++) {
		size_t h = fnv(s[i].s, (size_t)s[i].n) & m->mask;

		for (;; h = (h + 1) & m->mask) {
			uint32_t v = m->slot[h];

			if (!v || (s[v - 1].n == s[i].n &&
				   !memcmp(s[v - 1].s, s[i].s, (size_t)s[i].n)))
				break;
		}
		m->slot[h] = (uint32_t)i + 1;
	}
	return LOOM_OK;
}

/* The id of the token whose text is s[0..n), -1 if none. */
static int32_t lookup(const struct model_tokenizer *t, const char *s,
		      size_t n)
{
	return strmap_find(&t->vocab, s, n);
}

static float score(const struct model_tokenizer *t, int32_t id)
{
	return t->scores ? (float)gguf_kv_number(t->scores, (uint64_t)id) : 0;
}

static bool flag(const struct gguf *g, const char *key, bool def)
{
	bool v;

	return gguf_get_bool(g, key, &v) ? def : v;
}

static int32_t token_id(const struct gguf *g, const char *key, int32_t def,
			uint64_t n)
{
	int64_t v;

	if (gguf_get_int(g, key, &v) || v < 0 || (uint64_t)v >= n)
		return def;
	return (int32_t)v;
}

static const struct gguf_kv *str_array(const struct gguf *g,
					const char *key)
{
	const struct gguf_kv *kv = gguf_kv_find(g, key);

	if (!kv || kv->type != GGUF_TYPE_ARRAY ||
	    kv->arr_type != GGUF_TYPE_STRING || !kv->n || kv->n > INT32_MAX) {
		loom_error_set(LOOM_E_INVAL, "gguf: %s is not an array of "
			       "strings", key);
		return NULL;
	}
	return kv;
}

/* The kind of vocabulary and pre-tokenizer, and the defaults each has
 * before the file's keys. */
static int kind(const struct gguf *g, struct model_tokenizer *t)
{
	char model[32], pre[64] = "default";
	int ret;

	ret = gguf_get_string(g, "tokenizer.ggml.model", model, sizeof(model));
	if (ret)
		return ret == LOOM_E_NOT_FOUND ?
			       loom_error_set(ret, "the file has no tokenizer") :
			       ret;
	gguf_get_string(g, "tokenizer.ggml.pre", pre, sizeof(pre));
	if (!strcmp(model, "llama")) {
		t->add_bos = true;
		t->add_space = true;
		t->bos = 1;
		t->eos = 2;
		return LOOM_OK;
	}
	if (!strcmp(model, "gpt2") && !model_pretok_by_name(pre, &t->pre)) {
		t->bpe = true;
		t->byte_level = t->pre != MODEL_PRETOK_GEMMA4;
		t->ignore_merges = t->pre == MODEL_PRETOK_LLAMA3 ||
				   t->pre == MODEL_PRETOK_TEKKEN;
		t->add_bos = t->pre == MODEL_PRETOK_LLAMA3 ||
			     t->pre == MODEL_PRETOK_GEMMA4 ||
			     t->pre == MODEL_PRETOK_TEKKEN;
		t->bos = t->eos = 11;
		return LOOM_OK;
	}
	return loom_error_set(LOOM_E_UNSUPPORTED,
			      "tokenizer '%s' (pre-tokenizer '%s') is not "
			      "supported (llama is, and gpt2 with a "
			      "pre-tokenizer loom-run(1) lists)", model, pre);
}

/* GGUF's token types. */
enum { TOKEN_UNKNOWN = 2, TOKEN_CONTROL = 3, TOKEN_USER = 4 };

struct special {
	uint64_t n;
	int32_t id;
	bool control;
};

static int longer_first(const void *a, const void *b)
{
	const struct special *x = a, *y = b;

	if (x->n != y->n)
		return x->n < y->n ? 1 : -1;
	return x->id < y->id ? -1 : x->id > y->id;
}

/* The tokens that cut the text: tokenizer.ggml.token_type's unknown,
 * control and user-defined ones with a text. */
static int special_tokens(const struct gguf *g, struct model_tokenizer *t)
{
	const struct gguf_kv *ty = gguf_kv_find(g, "tokenizer.ggml.token_type");
	struct special *sp;
	int n = 0;

	if (!ty)
		return LOOM_OK;
	if (ty->type != GGUF_TYPE_ARRAY || ty->n != t->n_vocab ||
	    (ty->arr_type != GGUF_TYPE_INT32 && ty->arr_type != GGUF_TYPE_UINT32))
		return loom_error_set(LOOM_E_INVAL, "gguf: tokenizer.ggml."
				      "token_type is not %llu integers",
				      (unsigned long long)t->n_vocab);
	sp = malloc((size_t)ty->n * sizeof(*sp));
	if (!sp)
		return loom_error_set(LOOM_E_NOMEM, "tokenizer: no memory");
	for (uint64_t i = 0; i < ty->n; i++) {
		double v = gguf_kv_number(ty, i);

		if ((v == TOKEN_UNKNOWN || v == TOKEN_CONTROL ||
		     v == TOKEN_USER) && t->tok[i].n > 0)
			sp[n++] = (struct special){ t->tok[i].n, (int32_t)i,
						    v != TOKEN_USER };
	}
	qsort(sp, (size_t)n, sizeof(*sp), longer_first);
	t->special = malloc((size_t)n * sizeof(*t->special) + 1);
	t->control = malloc((size_t)n * sizeof(*t->control) + 1);
	if (!t->special || !t->control) {
		free(sp);
		return loom_error_set(LOOM_E_NOMEM, "tokenizer: no memory");
	}
	for (int i = 0; i < n; i++) {
		t->special[i] = sp[i].id;
		t->control[i] = sp[i].control;
	}
	t->n_special = n;
	free(sp);
	return LOOM_OK;
}

int model_tokenizer_new(const struct gguf *g, struct model_tokenizer **out)
{
	const struct gguf_kv *kv, *sc, *mg = NULL;
	struct model_tokenizer *t = calloc(1, sizeof(*t));
	int ret;

	if (!t)
		return loom_error_set(LOOM_E_NOMEM, "tokenizer: no memory");
	ret = kind(g, t);
	if (ret)
		goto err;
	kv = str_array(g, "tokenizer.ggml.tokens");
	if (!kv) {
		ret = LOOM_E_INVAL;
		goto err;
	}
	sc = gguf_kv_find(g, "tokenizer.ggml.scores");
	if (sc && (sc->type != GGUF_TYPE_ARRAY ||
		   sc->arr_type != GGUF_TYPE_FLOAT32 || sc->n != kv->n)) {
		ret = loom_error_set(LOOM_E_INVAL, "gguf: tokenizer.ggml."
				     "scores is not %llu f32 values",
				     (unsigned long long)kv->n);
		goto err;
	}
	if (t->bpe) {
		mg = str_array(g, "tokenizer.ggml.merges");
		if (!mg) {
			ret = LOOM_E_INVAL;
			goto err;
		}
	}
	t->n_vocab = kv->n;
	t->tok = kv->strs;
	t->scores = t->bpe ? NULL : sc;
	ret = strmap_init(&t->vocab, kv->strs, kv->n);
	if (!ret && mg)
		ret = strmap_init(&t->merges, mg->strs, mg->n);
	if (ret)
		goto err;
	for (int b = 0; b < 256 && !t->byte_level; b++) {
		static const char hex[] = "0123456789ABCDEF";
		char s[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' };

		t->bytes[b] = lookup(t, s, 6);
	}
	t->bos = token_id(g, "tokenizer.ggml.bos_token_id", t->bos, kv->n);
	t->eos = token_id(g, "tokenizer.ggml.eos_token_id", t->eos, kv->n);
	/* Gemma 4 files that say otherwise still want BOS. */
	t->add_bos = flag(g, "tokenizer.ggml.add_bos_token", t->add_bos) ||
		     (t->bpe && t->pre == MODEL_PRETOK_GEMMA4);
	t->add_eos = flag(g, "tokenizer.ggml.add_eos_token", t->add_eos);
	t->add_space = flag(g, "tokenizer.ggml.add_space_prefix",
			    t->add_space);
	ret = special_tokens(g, t);
	if (ret)
		goto err;
	*out = t;
	return LOOM_OK;
err:
	model_tokenizer_free(t);
	return ret;
}

void model_tokenizer_free(struct model_tokenizer *t)
{
	if (!t)
		return;
	free(t->special);
	free(t->control);
	free(t->vocab.slot);
	free(t->merges.slot);
	free(t);
}

/* ------------------------------------------------------------------------
 * Merging.  Symbols are a linked list over the text; candidate pairs sit
 * in a max-heap by score, then by leftmost position.
 */
struct sym {
	size_t off, n;
	int prev, next;
};

struct pair {
	float score;
	int left, right;
	size_t n;
};

struct heap {
	struct pair *v;
	size_t n, cap;
};

/* v (of *cap elements of size bytes, n used) with room for one more:
 * v itself, or v moved to twice the room; NULL (v kept) without memory. */
static void *grow(void *v, size_t *cap, size_t n, size_t size)
{
	size_t c = *cap ? 2 * *cap : 16;

	if (n < *cap)
		return v;
	if (c > SIZE_MAX / size || !(v = realloc(v, c * size)))
		return NULL;
	*cap = c;
	return v;
}

static bool above(const struct pair *a, const struct pair *b)
{
	return a->score > b->score ||
	       (a->score == b->score && a->left < b->left);
}

static int heap_push(struct heap *h, struct pair p)
{
	struct pair *v = grow(h->v, &h->cap, h->n, sizeof(*v));
	size_t i;

	if (!v)
		return LOOM_E_NOMEM;
	h->v = v;
	for (i = h->n++; i && above(&p, &h->v[(i - 1) / 2]); i = (i - 1) / 2)
		h->v[i] = h->v[(i - 1) / 2];
	h->v[i] = p;
	return LOOM_OK;
}

static struct pair heap_pop(struct heap *h)
{
	struct pair top = h->v[0], last = h->v[--h->n];
	size_t i = 0;

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= h->n)
			break;
		if (c + 1 < h->n && above(&h->v[c + 1], &h->v[c]))
			c++;
		if (!above(&h->v[c], &last))
			break;
		h->v[i] = h->v[c];
		i = c;
	}
	if (h->n)
		h->v[i] = last;
	return top;
}

/* A candidate pair: for SentencePiece when the joined text is a token
 * (its score), for BPE when "left right" is a merge (minus its rank). */
static int try_pair(const struct model_tokenizer *t, const char *text,
		    const struct sym *s, int left, int right, struct heap *h)
{
	const char *a = text + s[left < 0 ? 0 : left].off;
	size_t n;
	int32_t id;
	float sc;

	if (left < 0 || right < 0)
		return LOOM_OK;
	n = s[left].n + s[right].n;
	if (t->bpe) {
		size_t nl = s[left].n, nr = s[right].n;
		char small[256], *buf = small;

		if (nl + nr + 1 > sizeof(small) && !(buf = malloc(nl + nr + 1)))
			return LOOM_E_NOMEM;
		memcpy(buf, a, nl);
		buf[nl] = ' ';
		memcpy(buf + nl + 1, text + s[right].off, nr);
		id = strmap_find(&t->merges, buf, nl + nr + 1);
		sc = -(float)id;
		if (buf != small)
			free(buf);
	} else {
		id = lookup(t, a, n);
		sc = id >= 0 ? score(t, id) : 0;
	}
	if (id < 0)
		return LOOM_OK;
	return heap_push(h, (struct pair){ sc, left, right, n });
}

struct out {
	int32_t *v;
	size_t n, cap;
};

static int emit(struct out *o, int32_t id)
{
	int32_t *v = grow(o->v, &o->cap, o->n, sizeof(*v));

	if (!v)
		return LOOM_E_NOMEM;
	if (o->n >= INT_MAX)
		return loom_error_set(LOOM_E_RANGE, "tokenizer: more than %d "
				      "tokens", INT_MAX);
	o->v = v;
	o->v[o->n++] = id;
	return LOOM_OK;
}

static size_t utf8_len(unsigned char c)
{
	return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 :
	       (c >> 3) == 30 ? 4 : 1;
}

static int tokenize_text(const struct model_tokenizer *t, const char *text,
			 size_t len, struct out *o)
{
	struct sym *s;
	struct heap h = { 0 };
	int n = 0, ret = LOOM_OK;

	if (!len)
		return LOOM_OK;
	s = malloc(len * sizeof(*s));
	if (!s)
		return LOOM_E_NOMEM;
	for (size_t off = 0; off < len; n++) {
		size_t k = utf8_len((unsigned char)text[off]);

		s[n].off = off;
		s[n].n = k < len - off ? k : len - off;
		off += s[n].n;
		s[n].prev = n - 1;
		s[n].next = off == len ? -1 : n + 1;
	}
	for (int i = 1; i < n && !ret; i++)
		ret = try_pair(t, text, s, i - 1, i, &h);
	while (h.n && !ret) {
		struct pair p = heap_pop(&h);
		struct sym *l = &s[p.left], *r = &s[p.right];

		/* A pair one of whose symbols has since merged is stale. */
		if (!l->n || !r->n || l->n + r->n != p.n)
			continue;
		l->n += r->n;
		r->n = 0;
		l->next = r->next;
		if (r->next >= 0)
			s[r->next].prev = p.left;
		ret = try_pair(t, text, s, l->prev, p.left, &h);
		if (!ret)
			ret = try_pair(t, text, s, p.left, l->next, &h);
	}
	for (int i = 0; i >= 0 && !ret; i = s[i].next) {
		int32_t id = lookup(t, text + s[i].off, s[i].n);

		if (id >= 0) {
			ret = emit(o, id);
			continue;
		}
		/* Byte-level BPE: the bytes that are tokens by themselves. */
		for (size_t k = 0; k < s[i].n && t->byte_level && !ret; k++) {
			id = lookup(t, text + s[i].off + k, 1);
			if (id >= 0)
				ret = emit(o, id);
		}
		for (size_t k = 0; k < s[i].n && !t->byte_level && !ret; k++) {
			unsigned char b = (unsigned char)text[s[i].off + k];

			if (t->bytes[b] < 0) {
				ret = loom_error_set(LOOM_E_UNSUPPORTED,
						     "tokenizer: no token for "
						     "byte 0x%02X", b);
				break;
			}
			ret = emit(o, t->bytes[b]);
		}
	}
	free(h.v);
	free(s);
	return ret;
}

/* text[0..len) into buf (3 * len bytes) with each space as U+2581, the
 * word mark of SentencePiece and Gemma 4; returns the length. */
static size_t mark_spaces(const char *text, size_t len, char *buf)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++) {
		if (text[i] == ' ') {
			memcpy(buf + n, "\xe2\x96\x81", 3);
			n += 3;
		} else {
			buf[n++] = text[i];
		}
	}
	return n;
}

/* BPE: each pre-tokenizer word's bytes as code points (byte-level) or
 * its spaces as U+2581 (Gemma 4), then merged; a word that is a token as
 * a whole is taken as it is when the vocabulary says so, and so is a run
 * of line breaks in Gemma 4's. */
static int tokenize_bpe(const struct model_tokenizer *t, const char *text,
			size_t len, struct out *o)
{
	size_t *ends = NULL, n_words, start = 0;
	char *buf, *esc = NULL;
	int ret = LOOM_OK;

	buf = malloc(3 * len + 1);
	if (!buf)
		return LOOM_E_NOMEM;
	if (!t->byte_level) {
		esc = malloc(3 * len + 1);
		if (!esc) {
			free(buf);
			return LOOM_E_NOMEM;
		}
		len = mark_spaces(text, len, esc);
		text = esc;
	}
	ret = model_pretokenize(t->pre, text, len, &ends, &n_words);
	for (size_t w = 0; w < n_words && !ret; w++) {
		size_t n = 0;
		int32_t id = -1;

		if (t->byte_level) {
			for (size_t i = start; i < ends[w]; i++)
				n += model_utf8_encode(model_bpe_byte_cp(
							(uint8_t)text[i]),
						buf + n);
		} else {
			n = ends[w] - start;
			memcpy(buf, text + start, n);
		}
		if (t->ignore_merges || (!t->byte_level && buf[0] == '\n'))
			id = lookup(t, buf, n);
		start = ends[w];
		ret = id >= 0 ? emit(o, id) : tokenize_text(t, buf, n, o);
	}
	free(esc);
	free(buf);
	free(ends);
	return ret;
}

/* The text cut at the special tokens: pieces of text (id -1) and
 * tokens, in order. */
struct piece {
	size_t off, n;
	int32_t id;
};

struct pieces {
	struct piece *v;
	size_t n, cap;
};

static int piece_add(struct pieces *p, size_t off, size_t n, int32_t id)
{
	struct piece *v = grow(p->v, &p->cap, p->n, sizeof(*v));

	if (!v)
		return LOOM_E_NOMEM;
	p->v = v;
	p->v[p->n++] = (struct piece){ off, n, id };
	return LOOM_OK;
}

static int cut_special(const struct model_tokenizer *t, const char *text,
		       size_t len, bool parse_special, struct pieces *out)
{
	struct pieces cur = { 0 }, next = { 0 };
	int ret = len ? piece_add(&cur, 0, len, -1) : LOOM_OK;

	for (int k = 0; k < t->n_special && !ret; k++) {
		const struct gguf_str *sp = &t->tok[t->special[k]];
		size_t sn = (size_t)sp->n;
		struct pieces tmp;

		if (t->control[k] && !parse_special)
			continue;
		next.n = 0;
		for (size_t i = 0; i < cur.n && !ret; i++) {
			struct piece p = cur.v[i];
			const char *at;

			while (p.id < 0 && p.n >= sn && !ret &&
			       (at = memmem(text + p.off, p.n, sp->s, sn))) {
				size_t left = (size_t)(at - (text + p.off));

				if (left)
					ret = piece_add(&next, p.off, left, -1);
				if (!ret)
					ret = piece_add(&next, p.off + left, sn,
							t->special[k]);
				p.off += left + sn;
				p.n -= left + sn;
			}
			if (!ret && (p.id >= 0 || p.n))
				ret = piece_add(&next, p.off, p.n, p.id);
		}
		tmp = cur;
		cur = next;
		next = tmp;
	}
	free(next.v);
	if (ret) {
		free(cur.v);
		return ret;
	}
	*out = cur;
	return LOOM_OK;
}

/* SentencePiece: a piece of text with its spaces as U+2581, and one more
 * leading when the vocabulary asks for it at the start of the text or
 * after a special token. */
static int tokenize_spm(const struct model_tokenizer *t, const char *text,
			size_t len, bool lead, char *buf, struct out *o)
{
	size_t n = 0;

	if (lead && t->add_space) {
		memcpy(buf, "\xe2\x96\x81", 3);
		n = 3;
	}
	n += mark_spaces(text, len, buf + n);
	return tokenize_text(t, buf, n, o);
}

int model_tokenize(const struct model_tokenizer *t, const char *text,
		   unsigned flags, int32_t **out, int *n_out)
{
	bool add_special = flags & MODEL_TOKENIZE_ADD_SPECIAL;
	struct pieces p = { 0 };
	struct out o = { 0 };
	size_t len = strlen(text);
	bool lead = true;
	char *buf = NULL;
	int ret;

	/* Each space becomes three bytes; one more may lead. */
	if (len > (SIZE_MAX - 4) / 3)
		return loom_error_set(LOOM_E_RANGE, "tokenizer: text too long");
	ret = cut_special(t, text, len,
			  flags & MODEL_TOKENIZE_PARSE_SPECIAL, &p);
	if (!ret && !t->bpe && !(buf = malloc(3 * len + 4)))
		ret = LOOM_E_NOMEM;
	if (!ret && add_special && t->add_bos)
		ret = emit(&o, t->bos);
	/* Empty text has no pieces, hence no mark either. */
	for (size_t i = 0; i < p.n && !ret; i++) {
		const struct piece *q = &p.v[i];

		if (q->id >= 0)
			ret = emit(&o, q->id);
		else if (t->bpe)
			ret = tokenize_bpe(t, text + q->off, q->n, &o);
		else
			ret = tokenize_spm(t, text + q->off, q->n, lead, buf,
					   &o);
		lead = q->id >= 0;
	}
	if (!ret && add_special && t->add_eos)
		ret = emit(&o, t->eos);
	free(buf);
	free(p.v);
	if (ret) {
		free(o.v);
		return ret == LOOM_E_NOMEM ?
			       loom_error_set(ret, "tokenizer: no memory") :
			       ret;
	}
	*out = o.v;
	*n_out = (int)o.n;
	return LOOM_OK;
}
