/* SPDX-License-Identifier: MIT */
/* test-cpu-attn.c - the CPU backend's attention kernel: mul_mat(k, q),
 * soft_max with a mask and mul_mat(v, ...) run as one kernel (seen in the
 * plugin's log) against a plain double computation, with GQA broadcast,
 * F32 and F16 k and v, odd sizes, a causal mask with a fully masked row
 * and a hole; and left as three nodes, each result right, where the
 * softmax is an output or the scores have a second reader.
 */
#include <glib.h>
#include <math.h>
#include <string.h>

#include "loom/loom-plugin.h"
#include "test-util.h"

static GString *log_text;

static void collect(enum loom_log_level level, const char *msg, void *user)
{
	(void)level;
	(void)user;
	g_string_append(log_text, msg);
	g_string_append_c(log_text, '\n');
}

static bool fused(void)
{
	return strstr(log_text->str, "run as one attention kernel") != NULL;
}

/* Whether cpu0's plugin has the kernel: every variant but the baseline
 * (whose vectors are too narrow for it). */
static bool has_kernel(loom_dev_t *dev)
{
	loom_reg_t *reg = loom_dev_reg(dev);
	loom_get_features_fn f = (loom_get_features_fn)
		loom_reg_proc_address(reg, LOOM_PROC_GET_FEATURES);

	for (const struct loom_feature *ft = f ? f(reg) : NULL;
	     ft && ft->name; ft++)
		if (!strcmp(ft->name, "VARIANT"))
			return strcmp(ft->value, "baseline") != 0;
	return false;
}

struct shape {
	enum loom_type kv;   /* k and v */
	int64_t d, dv, nkv, nq, hq, hk;
	bool sm_output;      /* the softmax marked as an output */
	bool kq_read;        /* sum_rows(kq) as a second output */
	bool q_view;         /* q a permuted view of [d, hq, nq] */
};

/* Row r of the mask: positions up to r + nkv - nq, but row 3 wholly
 * masked and row 5 with a hole at position 2. */
static float mask_at(const struct shape *s, int64_t r, int64_t j)
{
	if (r == 3 || (r == 5 && j == 2))
		return -INFINITY;
	return j <= r + s->nkv - s->nq ? (float)(0.01 * (j % 5)) : -INFINITY;
}

static void check(const struct shape *s)
{
	const float scale = 0.3f;
	loom_dev_t *dev = loom_dev_by_name("cpu0");
	loom_backend_t *be;
	loom_ctx_t *ctx;
	loom_buffer_t *buf;
	loom_graph_t *g;
	struct loom_tensor *q0, *q, *k, *vt, *mask, *kq, *sm, *out;
	struct loom_tensor *rs = NULL;
	struct loom_test_rng rng;
	double *dq, *dk, *dv, *dout, *dsm = NULL, *ref, *refsm;
	float *m;
	int64_t nrow = s->nq * s->hq;

	g_assert_nonnull(dev);
	g_assert_cmpint(loom_dev_init_backend(dev, NULL, &be), ==, LOOM_OK);
	g_assert_cmpint(loom_ctx_new(0, &ctx), ==, LOOM_OK);
	if (s->q_view) {
		q0 = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, s->d, s->hq, s->nq);
		q = loom_permute(ctx, q0, 0, 2, 1, 3);
	} else {
		q0 = q = loom_tensor_new_3d(ctx, LOOM_TYPE_F32, s->d, s->nq,
					    s->hq);
	}
	k = loom_tensor_new_3d(ctx, s->kv, s->d, s->nkv, s->hk);
	vt = loom_tensor_new_3d(ctx, s->kv, s->nkv, s->dv, s->hk);
	mask = loom_tensor_new_2d(ctx, LOOM_TYPE_F32, s->nkv, s->nq);
	kq = loom_mul_mat(ctx, k, q);
	sm = loom_soft_max(ctx, kq, mask, scale);
	out = loom_mul_mat(ctx, vt, sm);
	g_assert_nonnull(out);
	loom_tensor_set_flags(out, LOOM_TENSOR_OUTPUT);
	if (s->sm_output)
		loom_tensor_set_flags(sm, LOOM_TENSOR_OUTPUT);
	if (s->kq_read) {
		rs = loom_sum_rows(ctx, kq);
		loom_tensor_set_flags(rs, LOOM_TENSOR_OUTPUT);
	}
	g_assert_cmpint(loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev),
					       &buf), ==, LOOM_OK);
	loom_test_rng_seed(&rng, 7);
	g_assert_cmpint(loom_test_fill_uniform(q0, &rng, -1.0, 1.0), ==,
			LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(k, &rng, -1.0, 1.0), ==,
			LOOM_OK);
	g_assert_cmpint(loom_test_fill_uniform(vt, &rng, -1.0, 1.0), ==,
			LOOM_OK);
	m = g_new(float, s->nkv * s->nq);
	for (int64_t r = 0; r < s->nq; r++)
		for (int64_t j = 0; j < s->nkv; j++)
			m[r * s->nkv + j] = mask_at(s, r, j);
	g_assert_cmpint(loom_tensor_set(mask, m, 0, loom_tensor_n_bytes(mask)),
			==, LOOM_OK);

	g_assert_cmpint(loom_graph_new(ctx, &g), ==, LOOM_OK);
	g_assert_cmpint(loom_graph_expand(g, out), ==, LOOM_OK);
	if (rs)
		g_assert_cmpint(loom_graph_expand(g, rs), ==, LOOM_OK);
	g_string_truncate(log_text, 0);
	g_assert_cmpint(loom_backend_graph_compute(be, g), ==, LOOM_OK);
	g_assert_cmpint(loom_backend_synchronize(be), ==, LOOM_OK);
	g_assert_true(fused() == (has_kernel(dev) && !s->sm_output &&
				  !s->kq_read));

	/* The reference: every row of q (head h reads k and v's head
	 * h / (hq / hk)), in double from the values as stored. */
	dq = loom_test_get_doubles(q, NULL);
	dk = loom_test_get_doubles(k, NULL);
	dv = loom_test_get_doubles(vt, NULL);
	dout = loom_test_get_doubles(out, NULL);
	g_assert_nonnull(dq);
	g_assert_nonnull(dk);
	g_assert_nonnull(dv);
	g_assert_nonnull(dout);
	ref = g_new0(double, s->dv * nrow);
	refsm = g_new0(double, s->nkv * nrow);
	for (int64_t h = 0; h < s->hq; h++) {
		int64_t kh = h / (s->hq / s->hk);

		for (int64_t r = 0; r < s->nq; r++) {
			double *p = refsm + (h * s->nq + r) * s->nkv;
			double max = -INFINITY, sum = 0;

			for (int64_t j = 0; j < s->nkv; j++) {
				double dot = 0;

				for (int64_t i = 0; i < s->d; i++)
					dot += dq[(h * s->nq + r) * s->d + i] *
					       dk[(kh * s->nkv + j) * s->d + i];
				p[j] = dot * scale + m[r * s->nkv + j];
				max = p[j] > max ? p[j] : max;
			}
			if (max == -INFINITY) {
				/* soft_max's answer: no weight. */
				memset(p, 0, s->nkv * sizeof(*p));
				continue;
			}
			for (int64_t j = 0; j < s->nkv; j++)
				sum += p[j] = exp(p[j] - max);
			for (int64_t j = 0; j < s->nkv; j++)
				p[j] /= sum;
			for (int64_t c = 0; c < s->dv; c++) {
				double acc = 0;

				for (int64_t j = 0; j < s->nkv; j++)
					acc += p[j] * dv[(kh * s->dv + c) *
							 s->nkv + j];
				ref[(h * s->nq + r) * s->dv + c] = acc;
			}
		}
	}
	for (int64_t h = 0; h < s->hq; h++)
		for (int64_t c = 0; c < s->dv; c++)
			g_assert_cmpfloat(dout[(h * s->nq + 3) * s->dv + c],
					  ==, 0.0);
	g_assert_cmpfloat(loom_test_nmse(ref, dout, s->dv * nrow), <, 1e-10);
	if (s->sm_output) {
		dsm = loom_test_get_doubles(sm, NULL);
		g_assert_nonnull(dsm);
		g_assert_cmpfloat(loom_test_nmse(refsm, dsm, s->nkv * nrow), <,
				  1e-10);
	}
	if (rs) {
		/* The scores themselves: sum_rows read them whole. */
		double *drs = loom_test_get_doubles(rs, NULL);

		g_assert_nonnull(drs);
		g_assert_true(isfinite(drs[0]));
		g_free(drs);
	}
	g_free(dsm);
	g_free(refsm);
	g_free(ref);
	g_free(dout);
	g_free(dv);
	g_free(dk);
	g_free(dq);
	g_free(m);
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	loom_backend_free(be);
}

/* The cases: eight positions at a time with tails (f32), fewer positions
 * than a vector (short), F16 k and v under a permuted q, and the two
 * where the nodes stay apart. */
static const struct {
	const char *path;
	struct shape s;
} cases[] = {
	{ "/cpu-attn/f32", { .kv = LOOM_TYPE_F32, .d = 64, .dv = 64,
			     .nkv = 37, .nq = 9, .hq = 4, .hk = 2 } },
	{ "/cpu-attn/short", { .kv = LOOM_TYPE_F32, .d = 32, .dv = 32,
			       .nkv = 7, .nq = 6, .hq = 4, .hk = 2 } },
	{ "/cpu-attn/f16", { .kv = LOOM_TYPE_F16, .d = 40, .dv = 24,
			     .nkv = 70, .nq = 12, .hq = 6, .hk = 3,
			     .q_view = true } },
	{ "/cpu-attn/softmax-output", { .kv = LOOM_TYPE_F32, .d = 32,
					.dv = 32, .nkv = 21, .nq = 7, .hq = 2,
					.hk = 2, .sm_output = true } },
	{ "/cpu-attn/scores-read", { .kv = LOOM_TYPE_F32, .d = 32, .dv = 16,
				     .nkv = 21, .nq = 7, .hq = 2, .hk = 1,
				     .kq_read = true } },
};

static void run_case(const void *data)
{
	check(data);
}

int main(int argc, char **argv)
{
	int ret;

	g_test_init(&argc, &argv, NULL);
	log_text = g_string_new(NULL);
	loom_log_set_callback(collect, NULL);
	loom_log_set_level(LOOM_LOG_DEBUG);
	g_assert_cmpint(loom_test_load_plugins(), ==, LOOM_OK);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
		g_test_add_data_func(cases[i].path, &cases[i].s, run_case);
	ret = g_test_run();
	g_assert_cmpint(loom_unload_all(), ==, LOOM_OK);
	g_string_free(log_text, TRUE);
	return ret;
}
