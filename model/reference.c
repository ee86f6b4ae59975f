/* SPDX-License-Identifier: MIT */
/* reference.c - a decoder computed plainly in double precision on
 * the host, from the weights read back from the device: an independent
 * check of llama_eval's graph (attention, sliding windows, cache, RoPE,
 * norms, experts).
 */
#include "arch.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ref {
	const struct llama_hparams *hp;
	const struct llama_model *m;
	double *freqs; /* rope_freqs.weight, NULL without */
};

/* Reads a weight back as doubles; NULL (with the error set) on failure.
 * The caller frees the result. */
static double *read_weight(struct ref *r, const char *name)
{
	struct loom_tensor *t = llama_model_tensor(r->m, name);
	int64_t n;
	size_t bytes;
	void *raw = NULL;
	float *f = NULL;
	double *d = NULL;

	if (!t) {
		loom_error_set(LOOM_E_NOT_FOUND, "reference: no %s", name);
		return NULL;
	}
	n = loom_tensor_n_elements(t);
	bytes = loom_tensor_n_bytes(t);
	raw = malloc(bytes);
	f = malloc((size_t)n * sizeof(*f));
	d = malloc((size_t)n * sizeof(*d));
	if (!raw || !f || !d || loom_tensor_get(t, raw, 0, bytes) ||
	    loom_type_convert(t->type, raw, LOOM_TYPE_F32, f, n)) {
		free(d);
		d = NULL;
	} else {
		for (int64_t i = 0; i < n; i++)
			d[i] = f[i];
	}
	free(f);
	free(raw);
	return d;
}

static double *read_layer(struct ref *r, int64_t layer, const char *what)
{
	char name[LOOM_MAX_NAME];

	snprintf(name, sizeof(name), "blk.%lld.%s.weight", (long long)layer,
		 what);
	return read_weight(r, name);
}

/* y = W x with W [k, m] as Loom lays it out (rows of k). */
static void matvec(const double *w, const double *x, double *y, int64_t k,
		   int64_t m)
{
	for (int64_t i = 0; i < m; i++) {
		double s = 0;

		for (int64_t j = 0; j < k; j++)
			s += w[i * k + j] * x[j];
		y[i] = s;
	}
}

static void rms_norm(const double *x, const double *w, double *y, int64_t n,
		     double eps)
{
	double s = 0;

	for (int64_t i = 0; i < n; i++)
		s += x[i] * x[i];
	s = 1.0 / sqrt(s / (double)n + eps);
	for (int64_t i = 0; i < n; i++)
		y[i] = x[i] * s * w[i];
}

/* The first n values of a head turn by pos * scale * base^(-2i / n), base
 * and scale those of layer il: pairs (2i, 2i + 1) in LOOM_ROPE_NORMAL,
 * (i, i + n / 2) in NEOX. */
static void rope(const struct llama_hparams *hp, int64_t il, double *v,
		 int64_t pos, const double *factors)
{
	int64_t n = hp->n_rot ? hp->n_rot : hp->head_dim;
	bool neox = hp->rope_mode == LOOM_ROPE_NEOX;
	float base, scale;

	llama_layer_rope(hp, il, &base, &scale);
	for (int64_t i = 0; i < n; i += 2) {
		double th = (double)pos * scale *
			    pow(base, -(double)i / (double)n) /
			    (factors ? factors[i / 2] : 1.0);
		int64_t i0 = neox ? i / 2 : i, i1 = neox ? i / 2 + n / 2 : i + 1;
		double c = cos(th), s = sin(th), a = v[i0], b = v[i1];

		v[i0] = a * c - b * s;
		v[i1] = a * s + b * c;
	}
}

static void add_to(double *y, const double *b, int64_t n)
{
	for (int64_t i = 0; i < n; i++)
		y[i] += b[i];
}

/* The FFN's gate: x sigmoid(x), or GELU's tanh form (sqrt(2 / pi) =
 * 0.79788...). */
static double gate(const struct llama_hparams *hp, double x)
{
	if (hp->gelu)
		return 0.5 * x * (1.0 + tanh(0.7978845608028654 *
					     (x + 0.044715 * x * x * x)));
	return x / (1.0 + exp(-x));
}

/* Causal attention of every token over the tokens before it (in layer
 * il, the last n_swa of them when it slides); query head h reads
 * key/value head h / (n_head / n_head_kv). */
static void attend(const struct llama_hparams *hp, int64_t il,
		   const double *q, const double *k, const double *v,
		   int64_t n, double *out, double *score)
{
	int64_t hd = hp->head_dim, nq = hp->n_head * hd, nkv = hp->n_head_kv *
							       hd;
	int64_t group = hp->n_head / hp->n_head_kv;
	int64_t w = llama_layer_slides(hp, il) ? hp->n_swa : n;
	double scale = llama_attn_scale(hp);

	for (int64_t t = 0; t < n; t++) {
		int64_t j0 = t - w + 1 > 0 ? t - w + 1 : 0;

		for (int64_t h = 0; h < hp->n_head; h++) {
			const double *qh = q + t * nq + h * hd;
			int64_t kh = h / group;
			double mx = -INFINITY, sum = 0;

			for (int64_t j = j0; j <= t; j++) {
				double s = 0;

				for (int64_t d = 0; d < hd; d++)
					s += qh[d] * k[j * nkv + kh * hd + d];
				score[j] = s * scale;
				mx = score[j] > mx ? score[j] : mx;
			}
			for (int64_t j = j0; j <= t; j++) {
				score[j] = exp(score[j] - mx);
				sum += score[j];
			}
			for (int64_t d = 0; d < hd; d++) {
				double s = 0;

				for (int64_t j = j0; j <= t; j++)
					s += score[j] * v[j * nkv + kh * hd + d];
				out[t * nq + h * hd + d] = s / sum;
			}
		}
	}
}

/* Router softmax, the top n_expert_used experts (lower index first on
 * ties), weights renormalized over them, SwiGLU experts. */
static int moe(struct ref *r, int64_t layer, const double *x, double *out,
	       double *g, double *u)
{
	const struct llama_hparams *hp = r->hp;
	int64_t e_n = hp->n_expert, k = hp->n_expert_used, f = hp->n_ff;
	int64_t e_dim = hp->n_embd * f;
	double *gi = read_layer(r, layer, "ffn_gate_inp");
	double *ge = read_layer(r, layer, "ffn_gate_exps");
	double *ue = read_layer(r, layer, "ffn_up_exps");
	double *de = read_layer(r, layer, "ffn_down_exps");
	double *p = calloc((size_t)e_n, sizeof(*p));
	bool *used = calloc((size_t)e_n, sizeof(*used));
	double *dn = calloc((size_t)hp->n_embd, sizeof(*dn));
	double mx = -INFINITY, sum = 0, wsum = 0;
	int ret = LOOM_E_NOMEM;

	if (!gi || !ge || !ue || !de || !p || !used || !dn)
		goto out;
	matvec(gi, x, p, hp->n_embd, e_n);
	for (int64_t e = 0; e < e_n; e++)
		mx = p[e] > mx ? p[e] : mx;
	for (int64_t e = 0; e < e_n; e++) {
		p[e] = exp(p[e] - mx);
		sum += p[e];
	}
	for (int64_t s = 0; s < k; s++) {
		int64_t best = -1;

		for (int64_t e = 0; e < e_n; e++)
			if (!used[e] && (best < 0 || p[e] > p[best]))
				best = e;
		used[best] = true;
		wsum += p[best] / sum;
	}
	memset(out, 0, (size_t)hp->n_embd * sizeof(*out));
	for (int64_t e = 0; e < e_n; e++) {
		if (!used[e])
			continue;
		matvec(ge + e * e_dim, x, g, hp->n_embd, f);
		matvec(ue + e * e_dim, x, u, hp->n_embd, f);
		for (int64_t i = 0; i < f; i++)
			g[i] = gate(hp, g[i]) * u[i];
		matvec(de + e * e_dim, g, dn, f, hp->n_embd);
		for (int64_t i = 0; i < hp->n_embd; i++)
			out[i] += dn[i] * (p[e] / sum) / wsum;
	}
	ret = LOOM_OK;
out:
	free(dn);
	free(used);
	free(p);
	free(de);
	free(ue);
	free(ge);
	free(gi);
	return ret;
}

/* A layer's weights as doubles, by role (NULL where the model has
 * none); q, k, v (and gate, up) point into one matrix when fused. */
struct layer_w {
	double *w[MT_COUNT];
	const double *q, *k, *v, *gate, *up;
};

static void free_layer(struct layer_w *lw)
{
	for (int i = 0; i < MT_COUNT; i++)
		free(lw->w[i]);
}

static int read_layer_w(struct ref *r, int64_t l, struct layer_w *lw)
{
	const struct llama_hparams *hp = r->hp;
	int64_t e = hp->n_embd, nq = hp->n_head * hp->head_dim;
	int64_t nkv = hp->n_head_kv * hp->head_dim;
	char name[LOOM_MAX_NAME];
	bool moe = hp->n_expert && hp->n_expert_used;

	memset(lw, 0, sizeof(*lw));
	for (int i = MT_FIRST_LAYER; i < MT_CACHE_K; i++) {
		/* The experts are read by moe(), a matrix at a time. */
		if (!model_tensor_wanted(hp, (enum model_tensor)i) ||
		    (moe && i >= MT_FFN_GATE_INP))
			continue;
		model_tensor_name((enum model_tensor)i, l, name, sizeof(name));
		if (!(lw->w[i] = read_weight(r, name)))
			return LOOM_E_NOMEM;
	}
	if (hp->fused_qkv) {
		lw->q = lw->w[MT_ATTN_QKV];
		lw->k = lw->q + nq * e;
		lw->v = lw->k + nkv * e;
	} else {
		lw->q = lw->w[MT_ATTN_Q];
		lw->k = lw->w[MT_ATTN_K];
		lw->v = lw->w[MT_ATTN_V];
	}
	lw->up = lw->w[MT_FFN_UP];
	lw->gate = hp->fused_up ? lw->up : lw->w[MT_FFN_GATE];
	if (hp->fused_up && lw->up)
		lw->up += hp->n_ff * e;
	return LOOM_OK;
}

/* The queries, keys and values of token t of the normed cur, roped. */
static void project(struct ref *r, int64_t l, const struct layer_w *lw,
		    const double *cur, int64_t t, double *q, double *k,
		    double *v)
{
	const struct llama_hparams *hp = r->hp;
	int64_t e = hp->n_embd, hd = hp->head_dim;
	int64_t nq = hp->n_head * hd, nkv = hp->n_head_kv * hd;
	const double *const *w = (const double *const *)lw->w;

	matvec(lw->q, cur, q + t * nq, e, nq);
	matvec(lw->k, cur, k + t * nkv, e, nkv);
	matvec(lw->v, cur, v + t * nkv, e, nkv);
	if (hp->qkv_bias) {
		add_to(q + t * nq, w[MT_ATTN_Q_BIAS], nq);
		add_to(k + t * nkv, w[MT_ATTN_K_BIAS], nkv);
		add_to(v + t * nkv, w[MT_ATTN_V_BIAS], nkv);
	}
	for (int64_t h = 0; h < hp->n_head + hp->n_head_kv; h++) {
		bool isq = h < hp->n_head;
		double *x = isq ? q + t * nq + h * hd :
				  k + t * nkv + (h - hp->n_head) * hd;

		if (hp->qk_norm)
			rms_norm(x, w[isq ? MT_ATTN_Q_NORM : MT_ATTN_K_NORM],
				 x, hd, hp->eps);
		rope(hp, l, x, t, r->freqs);
	}
}

/* The dense FFN of the normed x into out. */
static void dense(const struct llama_hparams *hp, const struct layer_w *lw,
		  const double *x, double *out, double *g, double *u)
{
	matvec(lw->gate, x, g, hp->n_embd, hp->n_ff);
	matvec(lw->up, x, u, hp->n_embd, hp->n_ff);
	for (int64_t i = 0; i < hp->n_ff; i++)
		g[i] = gate(hp, g[i]) * u[i];
	matvec(lw->w[MT_FFN_DOWN], g, out, hp->n_ff, hp->n_embd);
}

/* x += the (post-normed) o of each token. */
static void residual(const struct llama_hparams *hp, const double *post,
		    double *x, double *o)
{
	if (post)
		rms_norm(o, post, o, hp->n_embd, hp->eps);
	for (int64_t i = 0; i < hp->n_embd; i++)
		x[i] += o[i];
}

/* One layer over all n tokens, x updated in place. */
static int layer_forward(struct ref *r, int64_t l, double *x, int64_t n,
			 double *buf[8])
{
	const struct llama_hparams *hp = r->hp;
	int64_t e = hp->n_embd, nq = hp->n_head * hp->head_dim;
	double *cur = buf[0], *q = buf[1], *k = buf[2], *v = buf[3];
	double *att = buf[4], *score = buf[5], *g = buf[6], *u = buf[7];
	struct layer_w lw;
	int ret = read_layer_w(r, l, &lw);

	for (int64_t t = 0; t < n && !ret; t++) {
		rms_norm(x + t * e, lw.w[MT_ATTN_NORM], cur, e, hp->eps);
		project(r, l, &lw, cur, t, q, k, v);
	}
	if (!ret)
		attend(hp, l, q, k, v, n, att, score);
	for (int64_t t = 0; t < n && !ret; t++) {
		matvec(lw.w[MT_ATTN_OUT], att + t * nq, cur, nq, e);
		residual(hp, lw.w[MT_ATTN_POST_NORM], x + t * e, cur);
	}
	for (int64_t t = 0; t < n && !ret; t++) {
		double *o = q; /* free now: reused for the FFN output */

		rms_norm(x + t * e, lw.w[MT_FFN_NORM], cur, e, hp->eps);
		if (hp->n_expert && hp->n_expert_used)
			ret = moe(r, l, cur, o, g, u);
		else
			dense(hp, &lw, cur, o, g, u);
		if (!ret)
			residual(hp, lw.w[MT_FFN_POST_NORM], x + t * e, o);
	}
	free_layer(&lw);
	return ret;
}

int llama_reference_eval(struct llama_model *m, const int32_t *tokens,
			 int n_tokens, double *logits)
{
	const struct llama_hparams *hp = llama_model_hparams(m);
	struct ref r = { .hp = hp, .m = m };
	int64_t e = hp->n_embd, n = n_tokens;
	int64_t nq = hp->n_head * hp->head_dim;
	int64_t big = nq > hp->n_ff ? nq : hp->n_ff;
	size_t sizes[8] = {
		(size_t)e, (size_t)(n * (nq > e ? nq : e)), (size_t)(n * nq),
		(size_t)(n * nq), (size_t)(n * nq), (size_t)n, (size_t)big,
		(size_t)big,
	};
	double *buf[8] = { 0 }, *x = NULL, *emb = NULL, *onorm = NULL;
	double *out = NULL;
	int ret = LOOM_E_NOMEM;

	if (!m || !tokens || !logits || n_tokens < 1)
		return loom_error_set(LOOM_E_INVAL, "reference: bad argument");
	for (int i = 0; i < 8; i++)
		if (!(buf[i] = malloc(sizes[i] * sizeof(double))))
			goto out;
	if (hp->rope_freqs && !(r.freqs = read_weight(&r, "rope_freqs.weight")))
		goto out;
	x = malloc((size_t)(n * e) * sizeof(*x));
	emb = read_weight(&r, "token_embd.weight");
	onorm = read_weight(&r, "output_norm.weight");
	out = read_weight(&r, hp->tied_output ? "token_embd.weight" :
						"output.weight");
	if (!x || !emb || !onorm || !out)
		goto out;
	for (int64_t t = 0; t < n; t++)
		for (int64_t i = 0; i < e; i++)
			x[t * e + i] = emb[(int64_t)tokens[t] * e + i] *
				       (hp->embd_scale ? sqrt((double)e) : 1.0);
	for (int64_t l = 0; l < hp->n_layer; l++) {
		ret = layer_forward(&r, l, x, n, buf);
		if (ret)
			goto out;
	}
	for (int64_t t = 0; t < n; t++) {
		rms_norm(x + t * e, onorm, buf[0], e, hp->eps);
		matvec(out, buf[0], logits + t * hp->n_vocab, e, hp->n_vocab);
	}
	ret = LOOM_OK;
out:
	free(r.freqs);
	free(out);
	free(onorm);
	free(emb);
	free(x);
	for (int i = 0; i < 8; i++)
		free(buf[i]);
	return ret;
}
