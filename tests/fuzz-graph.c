/* SPDX-License-Identifier: MIT */
/* fuzz-graph.c - a fuzz target over the public graph and op API on the CPU
 * device: the input bytes spell a small graph of random ops, shapes, types
 * and views, valid or not, which is built, allocated, computed and read.
 *
 * Built with -DLOOM_FUZZ_LIBFUZZER and -fsanitize=fuzzer it is a libFuzzer
 * target; otherwise it is a program that replays the files (or folders of
 * files) it is given, by default the checked-in corpus, and prints TAP.
 */
#include <loom/loom-backend.h>

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Small enough that one input runs in well under a millisecond. */
#define MAX_POOL 16
#define MAX_STEPS 12
#define MAX_ELEMENTS 4096

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The input, read a byte at a time; past its end every byte reads 0. */
struct input {
	const uint8_t *p;
	size_t n;
};

static unsigned take(struct input *in, unsigned n)
{
	unsigned v;

	if (!in->n)
		return 0;
	v = *in->p++;
	in->n--;
	return v % n;
}

/* A generator for tensor contents, seeded from the input (splitmix64). */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The CPU device and one backend on it, for the whole run. */
static loom_dev_t *dev;
static loom_backend_t *be;

/* Stops the run with a message: the library broke one of its promises. */
static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2),
						      noreturn));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "fuzz-graph: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}

/* Loads the CPU plugin (from LOOM_TEST_PLUGIN_PATH when the build's test
 * environment gives one, else from LOOM_PLUGIN_PATH and the installed
 * directory) and makes its backend. */
static void setup(void)
{
	const char *path = getenv("LOOM_TEST_PLUGIN_PATH");
	int st;

	if (be)
		return;
	if (path && *path)
		setenv("LOOM_PLUGIN_PATH", path, 1);
	setenv("LOOM_BACKENDS", "cpu", 1);
	loom_log_set_level(LOOM_LOG_NONE);
	st = loom_load_all();
	if (st)
		fail("loading the cpu plugin: %s", loom_error_message());
	dev = loom_dev_by_type(LOOM_DEV_TYPE_CPU);
	if (!dev)
		fail("no CPU device");
	st = loom_dev_init_backend(dev, NULL, &be);
	if (st)
		fail("loom_dev_init_backend: %s", loom_error_message());
}

/* The graph being built: every tensor made so far (leaves and results). */
struct pool {
	loom_ctx_t *ctx;
	struct loom_tensor *t[MAX_POOL];
	int n;
	const char *what; /* the constructor last called, for messages */
};

static struct loom_tensor *pick(struct pool *p, struct input *in)
{
	unsigned i = take(in, (unsigned)p->n + 1);

	/* One choice in n + 1 is NULL, which every constructor refuses. */
	return i < (unsigned)p->n ? p->t[i] : NULL;
}

static const enum loom_type types[] = {
	LOOM_TYPE_F32, LOOM_TYPE_F32, LOOM_TYPE_F16, LOOM_TYPE_BF16,
	LOOM_TYPE_I32, LOOM_TYPE_Q8_0, LOOM_TYPE_F32,
	LOOM_TYPE_COUNT, /* not a type */
};

static enum loom_type pick_type(struct input *in)
{
	return types[take(in, sizeof(types) / sizeof(types[0]))];
}

/* Sizes: mostly tiny, a few Q8_0 block multiples, and some invalid. */
static int64_t pick_size(struct input *in)
{
	static const int64_t sizes[] = { 1, 1, 2, 2, 3, 4, 4, 8,
					 32, 32, 64, 5, 6, 1, 0, -1 };

	return sizes[take(in, sizeof(sizes) / sizeof(sizes[0]))];
}

static const float floats[] = { 0.0f, 1.0f, -1.0f, 0.5f, 1e-5f, 1e-6f,
				10000.0f, 2.0f, -0.0f, 1e30f, INFINITY,
				NAN };

static float pick_float(struct input *in)
{
	return floats[take(in, sizeof(floats) / sizeof(floats[0]))];
}

/* A constructor's answer: a tensor joins the pool; NULL must come with a
 * message on the context, which is then cleared. */
static struct loom_tensor *keep(struct pool *p, struct loom_tensor *t)
{
	if (!t) {
		if (!*loom_ctx_error(p->ctx))
			fail("%s returned NULL without a message", p->what);
		loom_ctx_clear_error(p->ctx);
		return NULL;
	}
	if ((unsigned)t->type >= LOOM_TYPE_COUNT)
		fail("%s made a tensor of type %d", p->what, t->type);
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		if (t->ne[i] < 0)
			fail("%s made ne%d = %lld", p->what, i,
			     (long long)t->ne[i]);
	/* A view lies inside the tensor that owns its data. */
	if (t->view_src &&
	    (t->view_offs > loom_tensor_n_bytes(t->view_src) ||
	     loom_tensor_n_bytes(t) >
		     loom_tensor_n_bytes(t->view_src) - t->view_offs))
		fail("%s made a view of %zu bytes at offset %zu of a tensor "
		     "of %zu bytes", p->what, loom_tensor_n_bytes(t),
		     t->view_offs, loom_tensor_n_bytes(t->view_src));
	if (p->n < MAX_POOL)
		p->t[p->n++] = t;
	return t;
}

/* A new leaf; ne == NULL draws a shape from the input. */
static struct loom_tensor *leaf(struct pool *p, struct input *in,
				enum loom_type type, const int64_t *ne_in)
{
	int64_t ne[LOOM_MAX_DIMS] = { 1, 1, 1, 1 };
	int n_dims = LOOM_MAX_DIMS;
	int64_t count = 1;
	struct loom_tensor *t;

	if (ne_in) {
		memcpy(ne, ne_in, sizeof(ne));
	} else {
		n_dims = (int)take(in, 6); /* 0 and 5 are invalid */
		for (int i = 0; i < n_dims && i < LOOM_MAX_DIMS; i++)
			ne[i] = pick_size(in);
	}
	for (int i = 0; i < LOOM_MAX_DIMS; i++)
		count *= ne[i] > 0 ? ne[i] : 1;
	if (count > MAX_ELEMENTS)
		return NULL;
	p->what = "loom_tensor_new";
	t = keep(p, loom_tensor_new(p->ctx, type, n_dims, ne));
	if (t)
		loom_tensor_set_flags(t, LOOM_TENSOR_INPUT);
	return t;
}

/* An operand for a: from the pool, or a new leaf shaped after a's
 * dimension 0 (what mul_mat and friends need to meet). */
static struct loom_tensor *partner(struct pool *p, struct input *in,
				   const struct loom_tensor *a,
				   enum loom_type type)
{
	int64_t ne[LOOM_MAX_DIMS];

	if (!a || take(in, 2))
		return pick(p, in);
	ne[0] = a->ne[0];
	for (int i = 1; i < LOOM_MAX_DIMS; i++)
		ne[i] = take(in, 2) ? a->ne[i] : pick_size(in);
	return leaf(p, in, type, ne);
}

/* Indices for a: I32 [n, a->ne2, a->ne3], from the pool or new. */
static struct loom_tensor *ids_for(struct pool *p, struct input *in,
				   const struct loom_tensor *a, int64_t n)
{
	int64_t ne[LOOM_MAX_DIMS] = { n, 1, 1, 1 };

	if (!a || take(in, 4) == 0)
		return pick(p, in);
	ne[1] = a->ne[2];
	ne[2] = a->ne[3];
	return leaf(p, in, take(in, 8) ? LOOM_TYPE_I32 : pick_type(in), ne);
}

static size_t pick_stride(struct input *in, const struct loom_tensor *a,
			  int dim)
{
	if (!a)
		return 0;
	switch (take(in, 6)) {
	case 0:
		return a->nb[dim];
	case 1:
		return a->nb[dim] * 2;
	case 2:
		return (size_t)take(in, 256);
	case 3:
		return a->nb[dim > 0 ? dim - 1 : 0];
	default:
		return a->nb[dim];
	}
}

static size_t pick_offset(struct input *in, const struct loom_tensor *a)
{
	size_t es = a ? loom_type_size(a->type) : 1;

	switch (take(in, 5)) {
	case 0:
		return (size_t)take(in, 256);
	case 1:
		return es * take(in, 64);
	case 2:
		return a ? a->nb[1] * take(in, 4) : 0;
	default:
		return 0;
	}
}

/* One step: one constructor called with operands and parameters from the
 * input. */
static void step(struct pool *p, struct input *in)
{
	struct loom_tensor *a = pick(p, in), *b, *c;
	loom_ctx_t *ctx = p->ctx;
	int64_t ne[LOOM_MAX_DIMS];

	switch (take(in, 26)) {
	case 0:
		leaf(p, in, pick_type(in), NULL);
		break;
	case 1:
		if (a)
			leaf(p, in, pick_type(in), a->ne);
		break;
	case 2:
		b = partner(p, in, a, pick_type(in));
		switch (take(in, 4)) {
		case 0:
			p->what = "loom_add";
			keep(p, loom_add(ctx, a, b));
			break;
		case 1:
			p->what = "loom_sub";
			keep(p, loom_sub(ctx, a, b));
			break;
		case 2:
			p->what = "loom_mul";
			keep(p, loom_mul(ctx, a, b));
			break;
		default:
			p->what = "loom_div";
			keep(p, loom_div(ctx, a, b));
			break;
		}
		break;
	case 3:
		p->what = "loom_scale";
		keep(p, loom_scale(ctx, a, pick_float(in)));
		break;
	case 4:
		p->what = "loom_silu";
		keep(p, loom_silu(ctx, a));
		break;
	case 5:
		p->what = "loom_gelu";
		keep(p, loom_gelu(ctx, a));
		break;
	case 6:
		p->what = "loom_rms_norm";
		keep(p, loom_rms_norm(ctx, a, pick_float(in)));
		break;
	case 7:
		p->what = "loom_norm";
		keep(p, loom_norm(ctx, a, pick_float(in)));
		break;
	case 8:
		b = take(in, 2) ? NULL :
				  partner(p, in, a, take(in, 2) ?
						    LOOM_TYPE_F16 :
						    LOOM_TYPE_F32);
		p->what = "loom_soft_max";
		keep(p, loom_soft_max(ctx, a, b, pick_float(in)));
		break;
	case 9: {
		int n_dims = a && take(in, 2) ? (int)a->ne[0] :
						(int)take(in, 10) - 1;
		int mode = take(in, 3) ? (int)take(in, 2) * 2 :
					 (int)take(in, 8);

		b = NULL;
		if (a && take(in, 4)) {
			int64_t pne[LOOM_MAX_DIMS] = { a->ne[2], 1, 1, 1 };

			b = leaf(p, in, LOOM_TYPE_I32, pne);
		} else {
			b = pick(p, in);
		}
		p->what = "loom_rope";
		keep(p, loom_rope(ctx, a, b, n_dims, mode,
				  take(in, 2) ? 10000.0f : pick_float(in),
				  take(in, 2) ? 1.0f : pick_float(in)));
		break;
	}
	case 10:
		b = partner(p, in, a, take(in, 2) ? LOOM_TYPE_F32 :
						    pick_type(in));
		p->what = "loom_mul_mat";
		keep(p, loom_mul_mat(ctx, a, b));
		break;
	case 11: {
		int64_t n_used = 1 + take(in, 3);

		/* as [K, M, n_expert], b [K, 1 or n_used, n_tokens], ids
		 * I32 [n_used, n_tokens]. */
		b = NULL;
		c = NULL;
		if (a && take(in, 4)) {
			int64_t n_tokens = 1 + take(in, 3);
			int64_t bne[LOOM_MAX_DIMS] = {
				a->ne[0], take(in, 2) ? n_used : 1, n_tokens, 1
			};
			int64_t ine[LOOM_MAX_DIMS] = { n_used, n_tokens, 1, 1 };

			b = leaf(p, in, take(in, 2) ? LOOM_TYPE_F32 :
						      pick_type(in), bne);
			c = leaf(p, in, LOOM_TYPE_I32, ine);
		} else {
			b = pick(p, in);
			c = pick(p, in);
		}
		p->what = "loom_mul_mat_id";
		keep(p, loom_mul_mat_id(ctx, a, b, c));
		break;
	}
	case 12:
		b = ids_for(p, in, a, 1 + take(in, 4));
		p->what = "loom_get_rows";
		keep(p, loom_get_rows(ctx, a, b));
		break;
	case 13: {
		int64_t n = 1 + take(in, 4);

		c = ids_for(p, in, a, n);
		b = NULL;
		if (a && take(in, 4)) {
			ne[0] = a->ne[0];
			ne[1] = n;
			ne[2] = a->ne[2];
			ne[3] = a->ne[3];
			b = leaf(p, in, take(in, 6) ? LOOM_TYPE_F32 :
						      pick_type(in), ne);
		} else {
			b = pick(p, in);
		}
		p->what = "loom_set_rows";
		keep(p, loom_set_rows(ctx, a, b, c));
		break;
	}
	case 14:
		b = partner(p, in, a, pick_type(in));
		p->what = "loom_copy";
		keep(p, loom_copy(ctx, a, b));
		break;
	case 15:
		p->what = "loom_cont";
		keep(p, loom_cont(ctx, a));
		break;
	case 16: {
		int dim = (int)take(in, 6) - 1;

		b = NULL;
		if (a && take(in, 2)) {
			memcpy(ne, a->ne, sizeof(ne));
			if (dim >= 0 && dim < LOOM_MAX_DIMS)
				ne[dim] = pick_size(in);
			b = leaf(p, in, a->type, ne);
		} else {
			b = pick(p, in);
		}
		p->what = "loom_concat";
		keep(p, loom_concat(ctx, a, b, dim));
		break;
	}
	case 17:
		p->what = "loom_sum_rows";
		keep(p, loom_sum_rows(ctx, a));
		break;
	case 18:
		p->what = "loom_argmax";
		keep(p, loom_argmax(ctx, a));
		break;
	case 19:
		p->what = "loom_top_k";
		keep(p, loom_top_k(ctx, a, (int)take(in, 10) - 1));
		break;
	case 20:
		for (int i = 0; i < LOOM_MAX_DIMS; i++)
			ne[i] = a && take(in, 2) ? a->ne[i] : pick_size(in);
		switch (take(in, 4)) {
		case 0:
			p->what = "loom_view_1d";
			keep(p, loom_view_1d(ctx, a, ne[0],
					     pick_offset(in, a)));
			break;
		case 1:
			p->what = "loom_view_2d";
			keep(p, loom_view_2d(ctx, a, ne[0], ne[1],
					     pick_stride(in, a, 1),
					     pick_offset(in, a)));
			break;
		case 2:
			p->what = "loom_view_3d";
			keep(p, loom_view_3d(ctx, a, ne[0], ne[1], ne[2],
					     pick_stride(in, a, 1),
					     pick_stride(in, a, 2),
					     pick_offset(in, a)));
			break;
		default:
			p->what = "loom_view_4d";
			keep(p, loom_view_4d(ctx, a, ne[0], ne[1], ne[2],
					     ne[3], pick_stride(in, a, 1),
					     pick_stride(in, a, 2),
					     pick_stride(in, a, 3),
					     pick_offset(in, a)));
			break;
		}
		break;
	case 21:
		/* Mostly the same count in another shape. */
		memcpy(ne, a ? a->ne : (int64_t[]){ 1, 1, 1, 1 }, sizeof(ne));
		switch (take(in, 5)) {
		case 0:
			p->what = "loom_reshape_1d";
			keep(p, loom_reshape_1d(ctx, a, ne[0] * ne[1] *
							     ne[2] * ne[3]));
			break;
		case 1:
			p->what = "loom_reshape_2d";
			keep(p, loom_reshape_2d(ctx, a, ne[0],
						ne[1] * ne[2] * ne[3]));
			break;
		case 2:
			p->what = "loom_reshape_3d";
			keep(p, loom_reshape_3d(ctx, a, ne[0] * ne[1], ne[2],
						ne[3]));
			break;
		case 3:
			p->what = "loom_reshape_4d";
			keep(p, loom_reshape_4d(ctx, a, ne[1], ne[0], ne[3],
						ne[2]));
			break;
		default:
			p->what = "loom_reshape_4d";
			keep(p, loom_reshape_4d(ctx, a, pick_size(in),
						pick_size(in), pick_size(in),
						pick_size(in)));
			break;
		}
		break;
	case 22: {
		int ax[LOOM_MAX_DIMS] = { 0, 1, 2, 3 };

		if (take(in, 4)) {
			/* A permutation (Fisher-Yates on the input). */
			for (int i = LOOM_MAX_DIMS - 1; i > 0; i--) {
				int j = (int)take(in, (unsigned)i + 1);
				int s = ax[i];

				ax[i] = ax[j];
				ax[j] = s;
			}
		} else {
			for (int i = 0; i < LOOM_MAX_DIMS; i++)
				ax[i] = (int)take(in, 6) - 1;
		}
		p->what = "loom_permute";
		keep(p, loom_permute(ctx, a, ax[0], ax[1], ax[2], ax[3]));
		break;
	}
	case 23:
		p->what = "loom_transpose";
		keep(p, loom_transpose(ctx, a));
		break;
	default:
		/* Another result becomes an output as well. */
		if (a && a->op != LOOM_OP_NONE)
			loom_tensor_set_flags(a, a->flags |
						 LOOM_TENSOR_OUTPUT);
		break;
	}
}

/* Fills a placed leaf with values from the generator: small numbers, or
 * with special set any float including infinities and NaN; I32 leaves get
 * indices around [0, 4) with some out of range. */
static void fill(struct loom_tensor *t, uint64_t *seed, bool special)
{
	int64_t n = loom_tensor_n_elements(t);
	size_t bytes = loom_tensor_n_bytes(t);
	void *raw = malloc(bytes ? bytes : 1);
	float *f = malloc(sizeof(*f) * (size_t)(n ? n : 1));
	int st;

	if (!raw || !f)
		fail("out of memory");
	for (int64_t i = 0; i < n; i++) {
		uint64_t r = rng_next(seed);

		if (special && r % 8 == 0)
			f[i] = floats[(r >> 8) % (sizeof(floats) /
						  sizeof(floats[0]))];
		else
			f[i] = (float)((int64_t)(r >> 40) - (1 << 23)) /
			       (float)(1 << 21);
	}
	if (t->type == LOOM_TYPE_I32) {
		for (int64_t i = 0; i < n; i++)
			((int32_t *)raw)[i] = (int32_t)(rng_next(seed) % 6) -
					      1;
		st = LOOM_OK;
	} else {
		st = loom_type_convert(LOOM_TYPE_F32, f, t->type, raw, n);
	}
	if (st)
		fail("converting %s to %s: %s", t->name,
		     loom_type_name(t->type), loom_error_message());
	st = loom_tensor_set(t, raw, 0, bytes);
	if (st)
		fail("setting %s: %s", t->name, loom_error_message());
	free(f);
	free(raw);
}

/* Reads an output back and checks what can be checked without a
 * reference: index results lie inside their rows. */
static void check_output(const struct loom_tensor *t)
{
	size_t bytes = loom_tensor_n_bytes(t);
	void *raw = malloc(bytes ? bytes : 1);
	int st;

	if (!raw)
		fail("out of memory");
	st = loom_tensor_get(t, raw, 0, bytes);
	if (st)
		fail("reading %s: %s", t->name, loom_error_message());
	if ((t->op == LOOM_OP_ARGMAX || t->op == LOOM_OP_TOP_K) &&
	    loom_tensor_is_contiguous(t)) {
		int64_t n = loom_tensor_n_elements(t);
		int64_t row = t->src[0]->ne[0];

		for (int64_t i = 0; i < n; i++) {
			int32_t v = ((const int32_t *)raw)[i];

			if (v < 0 || v >= row)
				fail("%s: index %d outside a row of %lld",
				     loom_op_name(t->op), v, (long long)row);
		}
	}
	free(raw);
}

/* Builds the graph of every result, places it, fills the leaves,
 * computes and reads the outputs.  Failures need a message; nothing may
 * crash. */
static void run_graph(struct pool *p, uint64_t seed, bool special)
{
	loom_galloc_t *ga = NULL;
	loom_graph_t *g;
	size_t n_nodes;
	int st;

	st = loom_graph_new(p->ctx, &g);
	if (st)
		fail("loom_graph_new: %s", loom_error_message());
	for (int i = p->n - 1; i >= 0; i--) {
		struct loom_tensor *t = p->t[i];

		if (t->op == LOOM_OP_NONE)
			continue;
		/* The last result is always an output. */
		if (!(t->flags & LOOM_TENSOR_OUTPUT) &&
		    !loom_graph_n_nodes(g))
			loom_tensor_set_flags(t, t->flags | LOOM_TENSOR_OUTPUT);
		st = loom_graph_expand(g, t);
		if (st && !*loom_error_message())
			fail("loom_graph_expand failed without a message");
	}
	n_nodes = loom_graph_n_nodes(g);
	if (!n_nodes)
		return;
	for (size_t i = 0; i < n_nodes; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		if (!loom_op_is_view(t->op) && !loom_dev_supports_op(dev, t))
			return;
	}
	st = loom_galloc_new(loom_dev_buffer_type(dev), &ga);
	if (st)
		fail("loom_galloc_new: %s", loom_error_message());
	st = loom_galloc_alloc_graph(ga, g);
	if (st) {
		if (!*loom_error_message())
			fail("loom_galloc_alloc_graph failed without a "
			     "message");
		goto out;
	}
	for (size_t i = 0; i < loom_graph_n_leaves(g); i++) {
		struct loom_tensor *t = loom_graph_leaf(g, i);

		if (t->view_src)
			continue;
		if (!t->data)
			fail("leaf %s was not placed", t->name);
		fill(t, &seed, special);
	}
	st = loom_backend_graph_compute(be, g);
	if (!st)
		st = loom_backend_synchronize(be);
	if (st) {
		if (!*loom_error_message())
			fail("compute failed without a message");
		goto out;
	}
	for (size_t i = 0; i < n_nodes; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		if (t->flags & LOOM_TENSOR_OUTPUT)
			check_output(t);
	}
out:
	loom_galloc_free(ga);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct input in = { data, size };
	struct pool p = { 0 };
	uint64_t seed;
	bool special;
	int steps;

	setup();
	if (loom_ctx_new(0, &p.ctx))
		fail("loom_ctx_new: %s", loom_error_message());
	seed = take(&in, 256);
	special = take(&in, 4) == 0;
	steps = 1 + (int)take(&in, MAX_STEPS);
	for (int i = 0; i < steps && in.n; i++)
		step(&p, &in);
	run_graph(&p, seed, special);
	loom_ctx_free(p.ctx);
	return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	setup();
	return 0;
}

#ifndef LOOM_FUZZ_LIBFUZZER
/* Replays one file; returns false when it cannot be read. */
static bool replay(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, cap = 0, got;

	if (!f)
		return false;
	do {
		if (n == cap) {
			cap = cap ? 2 * cap : 4096;
			buf = realloc(buf, cap);
			if (!buf)
				fail("out of memory");
		}
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return true;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The files named on the command line, a folder standing for the files
 * in it (in name order). */
static char **list_files(int argc, char **argv, size_t *n_out)
{
	char **files = NULL;
	size_t n = 0;

	for (int i = 0; i < argc; i++) {
		struct stat st;
		DIR *d;
		struct dirent *e;
		size_t first = n;

		if (stat(argv[i], &st) || !S_ISDIR(st.st_mode)) {
			files = realloc(files, (n + 1) * sizeof(*files));
			if (!files)
				fail("out of memory");
			files[n++] = strdup(argv[i]);
			continue;
		}
		d = opendir(argv[i]);
		if (!d)
			continue;
		while ((e = readdir(d))) {
			size_t len;

			if (e->d_name[0] == '.')
				continue;
			len = strlen(argv[i]) + strlen(e->d_name) + 2;
			files = realloc(files, (n + 1) * sizeof(*files));
			if (!files)
				fail("out of memory");
			files[n] = malloc(len);
			if (!files[n])
				fail("out of memory");
			snprintf(files[n++], len, "%s/%s", argv[i], e->d_name);
		}
		closedir(d);
		qsort(files + first, n - first, sizeof(*files), by_name);
	}
	*n_out = n;
	return files;
}

int main(int argc, char **argv)
{
	char *corpus[] = { FUZZ_GRAPH_CORPUS };
	char **files;
	size_t n;
	int failed = 0;

	LLVMFuzzerInitialize(&argc, &argv);
	files = argc > 1 ? list_files(argc - 1, argv + 1, &n) :
			   list_files(1, corpus, &n);
	/* TAP: one test per file; a crash ends the run, which the driver
	 * reports. */
	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		bool ok = replay(files[i]);
		const char *base = strrchr(files[i], '/');

		printf("%sok %zu %s\n", ok ? "" : "not ", i + 1,
		       base ? base + 1 : files[i]);
		fflush(stdout);
		failed += !ok;
		free(files[i]);
	}
	free(files);
	loom_backend_free(be);
	loom_unload_all();
	return failed ? 1 : 0;
}
#endif
