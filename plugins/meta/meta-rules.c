/* SPDX-License-Identifier: MIT */
/* meta-rules.c - the split rules of the meta device (META.md, "Rules per
 * op"): each decides a node's state from its sources' synced states and
 * which MIRRORED sources are cut to meet a split.  Which rule an op
 * follows, and where PARTIAL values pass, the core's table of ops says.
 */
#include "meta-rules.h"

#define P LOOM_SPLIT_PARTIAL
#define M LOOM_SPLIT_MIRRORED

static void rule_slice(struct meta_rule *r, int i, int d,
		       const struct meta_state *ref)
{
	r->slice_dim[i] = d;
	r->slice_ref[i] = ref;
}

/* A split source a (state sa) meeting a MIRRORED source b along dim d: b
 * is used whole when it broadcasts there, cut when it is full size. */
static bool meet_mirrored(struct meta_rule *r, const struct loom_tensor *t,
			  const struct loom_tensor *b, int ib, int d,
			  const struct meta_state *sa)
{
	if (b->ne[d] == 1)
		return true;
	if (b->ne[d] < t->ne[d])
		return false;
	rule_slice(r, ib, d, sa);
	return true;
}

/* Whether PARTIAL values in states sa and sb pass through op: summands
 * of both (ADDITIVE), of a with b whole (LINEAR0), or of b (LINEAR1). */
static bool partial_passes(enum loom_op op, enum loom_split_state sa,
			   enum loom_split_state sb)
{
	uint32_t f = loom_op_flags(op);

	return ((f & LOOM_OPF_ADDITIVE) && sa == P && sb == P) ||
	       ((f & LOOM_OPF_LINEAR0) && sa == P && sb == M) ||
	       ((f & LOOM_OPF_LINEAR1) && sa == M && sb == P);
}

/* What two sources give when either is PARTIAL or both are MIRRORED,
 * the opening of the elementwise and mul_mat rules: *decided false when
 * neither holds and the rule goes on to the splits. */
static bool whole_sources(const struct loom_tensor *t, enum loom_split_state sa,
			  enum loom_split_state sb, struct meta_rule *r,
			  bool *decided)
{
	*decided = true;
	if (sa == P || sb == P) {
		meta_state_whole(&r->out, P);
		return partial_passes(t->op, sa, sb);
	}
	if (sa == M && sb == M) {
		meta_state_whole(&r->out, M);
		return true;
	}
	*decided = false;
	return false;
}

static bool rule_elementwise(const struct loom_tensor *t,
			     struct meta_tensor **s, struct meta_rule *r,
			     const struct meta_dev *md)
{
	const struct meta_state *a = &s[0]->synced, *b = &s[1]->synced;
	enum loom_split_state sa = a->state, sb = b->state;
	bool decided, ok = whole_sources(t, sa, sb, r, &decided);

	if (decided)
		return ok;
	if (meta_is_split(sa) && meta_is_split(sb)) {
		r->out = *a;
		return meta_state_same_slices(a, b, md);
	}
	if (meta_is_split(sa)) {
		r->out = *a;
		return meet_mirrored(r, t, t->src[1], 1, (int)sa, a);
	}
	/* a MIRRORED, b split: b must be full size there */
	if (t->src[1]->ne[sb] != t->ne[sb])
		return false;
	r->out = *b;
	rule_slice(r, 0, (int)sb, b);
	return true;
}

/* Each value on its own: any state passes; PARTIAL only through a
 * linear op. */
static bool rule_map(const struct loom_tensor *t, struct meta_tensor **s,
		     struct meta_rule *r, const struct meta_dev *md)
{
	enum loom_split_state sa = s[0]->synced.state;

	r->out = s[0]->synced;
	return sa != P || (loom_op_flags(t->op) & LOOM_OPF_LINEAR0);
}

/* Row ops need each row of dimension 0 whole. */
static bool rule_rows(const struct loom_tensor *t, struct meta_tensor **s,
		      struct meta_rule *r, const struct meta_dev *md)
{
	return rule_map(t, s, r, md) && s[0]->synced.state != LOOM_SPLIT_DIM0;
}

static bool rule_argmax(const struct loom_tensor *t, struct meta_tensor **s,
			struct meta_rule *r, const struct meta_dev *md)
{
	enum loom_split_state sa = s[0]->synced.state;

	r->out = s[0]->synced;
	if (sa == LOOM_SPLIT_DIM1)
		r->out.state = LOOM_SPLIT_DIM0;
	return sa == M || sa == LOOM_SPLIT_DIM1;
}

/* soft_max_sinks' sinks, one per head (a's dimension 2): whole, cut
 * along with the heads when a is split there. */
static bool sinks_meet(struct meta_rule *r, struct meta_tensor **s,
		       const struct meta_state *a)
{
	if (!s[2])
		return true;
	if (s[2]->synced.state != M)
		return false;
	if (a->state == LOOM_SPLIT_DIM2) {
		if (a->n_seg != 1)
			return false;
		rule_slice(r, 2, 0, a);
	}
	return true;
}

static bool rule_soft_max(const struct loom_tensor *t, struct meta_tensor **s,
			  struct meta_rule *r, const struct meta_dev *md)
{
	const struct meta_state *a = &s[0]->synced;
	enum loom_split_state sa = a->state;

	r->out = *a;
	if (sa == P || sa == LOOM_SPLIT_DIM0 || !sinks_meet(r, s, a))
		return false;
	if (!s[1])
		return true;
	if (s[1]->synced.state == M)
		return sa == M ||
		       meet_mirrored(r, t, t->src[1], 1, (int)sa, a);
	return meta_state_same_slices(a, &s[1]->synced, md);
}

static bool rule_rope(const struct loom_tensor *t, struct meta_tensor **s,
		      struct meta_rule *r, const struct meta_dev *md)
{
	const struct meta_state *a = &s[0]->synced;
	enum loom_split_state sa = a->state;

	r->out = *a;
	if (s[1]->synced.state != M)
		return false;
	if (sa == M || sa == LOOM_SPLIT_DIM1)
		return true;
	if (sa == LOOM_SPLIT_DIM2 && a->n_seg == 1) {
		rule_slice(r, 1, 0, a);
		return true;
	}
	/* (rope_yarn's pairs are not rotated by the plain rope of a part) */
	if (sa == LOOM_SPLIT_DIM0 && a->n_seg == 1 && t->op == LOOM_OP_ROPE &&
	    loom_tensor_op_param_i32(t, 1) == LOOM_ROPE_NORMAL) {
		/* whole rotation pairs: every cut even */
		for (int k = 0; k < md->n_all; k++)
			if (a->len[0][k] % 2)
				return false;
		return true;
	}
	return false;
}

/* mul_mat with both sources split along one of dimensions 2 and 3 (the
 * batch), or one of them split there and the other whole. */
static bool mul_mat_batch(const struct loom_tensor *t, struct meta_tensor **s,
			  struct meta_rule *r, const struct meta_dev *md)
{
	const struct meta_state *a = &s[0]->synced, *b = &s[1]->synced;
	enum loom_split_state sa = a->state, sb = b->state;
	const struct loom_tensor *ta = t->src[0], *tb = t->src[1];
	int d;

	if (sa == sb && sa >= LOOM_SPLIT_DIM2 && sa <= LOOM_SPLIT_DIM3) {
		int64_t f = tb->ne[sa] / ta->ne[sa];

		if (a->n_seg != 1 || b->n_seg != 1)
			return false;
		for (int k = 0; k < md->n_all; k++)
			if (b->len[0][k] != a->len[0][k] * f)
				return false;
		r->out = *b;
		return true;
	}
	if (sa == M && sb >= LOOM_SPLIT_DIM2 && sb <= LOOM_SPLIT_DIM3) {
		d = (int)sb;
		if (ta->ne[d] != 1 && ta->ne[d] != tb->ne[d])
			return false;
		r->out = *b;
		if (ta->ne[d] != 1)
			rule_slice(r, 0, d, b);
		return true;
	}
	if (sb == M && sa >= LOOM_SPLIT_DIM2 && sa <= LOOM_SPLIT_DIM3) {
		d = (int)sa;
		if (tb->ne[d] != ta->ne[d])
			return false;
		r->out = *a;
		rule_slice(r, 1, d, a);
		return true;
	}
	return false;
}

/* mul_mat over the states of dimensions 0 and 1: w SPLIT(1) x M gives
 * SPLIT(0); SPLIT(0) x SPLIT(0) (or one cut to meet the other) gives P. */
static bool mul_mat_rows(const struct meta_state *a,
			 const struct meta_state *b, struct meta_rule *r,
			 const struct meta_dev *md, bool *decided)
{
	enum loom_split_state sa = a->state, sb = b->state;

	*decided = true;
	if (sa == LOOM_SPLIT_DIM1 && sb == M) {
		r->out = *a;
		r->out.state = LOOM_SPLIT_DIM0;
		return true;
	}
	if (sa == LOOM_SPLIT_DIM0 && sb == LOOM_SPLIT_DIM0) {
		meta_state_whole(&r->out, P);
		return meta_state_same_slices(a, b, md);
	}
	if (sa == M && sb == LOOM_SPLIT_DIM0) {
		meta_state_whole(&r->out, P);
		rule_slice(r, 0, 0, b);
		return true;
	}
	if (sa == LOOM_SPLIT_DIM0 && sb == M) {
		meta_state_whole(&r->out, P);
		rule_slice(r, 1, 0, a);
		return true;
	}
	*decided = false;
	return false;
}

/* Rows of a MIRRORED matrix each member takes at least, when a product
 * of whole sources is cut (below). */
#define META_OUTPUT_ROWS 64

/* A MIRRORED matrix times MIRRORED activations into an output of the
 * graph (the logits of a model whose token embedding is its output
 * projection): each member makes its share of the rows, SPLIT(0) as an
 * untied output's, instead of every member making all of them. */
static bool output_rows(const struct loom_tensor *t, enum loom_split_state sa,
			enum loom_split_state sb, struct meta_rule *r,
			const struct meta_dev *md)
{
	const struct loom_tensor *w = t->src[0], *x = t->src[1];

	if (t->op != LOOM_OP_MUL_MAT || sa != M || sb != M ||
	    !(t->flags & LOOM_TENSOR_OUTPUT) || md->n_all < 2 ||
	    w->ne[2] != 1 || w->ne[3] != 1 || x->ne[2] != 1 || x->ne[3] != 1 ||
	    t->ne[0] < (int64_t)META_OUTPUT_ROWS * md->n_all)
		return false;
	/* whole runs of 32 rows, as the weight layouts interleave them */
	meta_state_cut(md, LOOM_SPLIT_DIM0, t->ne[0], 32, &r->out);
	rule_slice(r, 0, 1, &r->out);
	return true;
}

static bool rule_mul_mat(const struct loom_tensor *t, struct meta_tensor **s,
			 struct meta_rule *r, const struct meta_dev *md)
{
	const struct meta_state *a = &s[0]->synced, *b = &s[1]->synced;
	enum loom_split_state sa = a->state, sb = b->state;
	bool id = t->op == LOOM_OP_MUL_MAT_ID, decided, ok;

	if (id && s[2]->synced.state != M)
		return false;
	if (output_rows(t, sa, sb, r, md))
		return true;
	ok = whole_sources(t, sa, sb, r, &decided);
	if (decided)
		return ok;
	ok = mul_mat_rows(a, b, r, md, &decided);
	if (decided)
		return ok;
	if (id)
		return false; /* expert-parallel splits are not supported */
	if (sa == M && sb == LOOM_SPLIT_DIM1) {
		r->out = *b;
		return true;
	}
	return mul_mat_batch(t, s, r, md);
}

static bool rule_get_rows(const struct loom_tensor *t, struct meta_tensor **s,
			  struct meta_rule *r, const struct meta_dev *md)
{
	enum loom_split_state sa = s[0]->synced.state;

	r->out = s[0]->synced;
	return s[1]->synced.state == M &&
	       (sa == M || (sa == P && (loom_op_flags(t->op) &
					LOOM_OPF_LINEAR0)) ||
		sa == LOOM_SPLIT_DIM0);
}

/* The result is the written source (set_rows' destination, copy's b);
 * the values must come in its state. */
static bool rule_write(const struct loom_tensor *t, struct meta_tensor **s,
		       struct meta_rule *r, const struct meta_dev *md)
{
	bool set_rows = t->op == LOOM_OP_SET_ROWS;
	int id = loom_op_target_src(t->op), iv = id ? 0 : 1;
	const struct meta_state *dst = &s[id]->synced, *val = &s[iv]->synced;
	enum loom_split_state sd = dst->state;

	r->out = *dst;
	if (set_rows && s[2]->synced.state != M)
		return false;
	if (sd == P || val->state == P)
		return false;
	if (sd == M)
		return val->state == M;
	if (set_rows && sd == LOOM_SPLIT_DIM1)
		return false;
	if (!set_rows && !loom_tensor_same_shape(t->src[0], t->src[1]))
		return false;
	if (set_rows && sd >= LOOM_SPLIT_DIM2 && t->src[2]->ne[sd - 1] > 1) {
		if (t->src[2]->ne[sd - 1] != t->src[0]->ne[sd])
			return false;
		rule_slice(r, 2, (int)sd - 1, dst);
	}
	if (val->state == M)
		return meet_mirrored(r, t, t->src[iv], iv, (int)sd, dst);
	return meta_state_same_slices(dst, val, md);
}

static bool rule_concat(const struct loom_tensor *t, struct meta_tensor **s,
			struct meta_rule *r, const struct meta_dev *md)
{
	const struct meta_state *a = &s[0]->synced, *b = &s[1]->synced;
	enum loom_split_state sa = a->state, sb = b->state;
	int dim = loom_tensor_op_param_i32(t, 0);

	r->out = *a;
	if (sa == sb && (sa == M || partial_passes(t->op, sa, sb)))
		return true;
	if (meta_is_split(sa) && (int)sa != dim)
		return sb == M ? meet_mirrored(r, t, t->src[1], 1, (int)sa, a) :
				 meta_state_same_slices(a, b, md);
	if (sa == M && meta_is_split(sb) && (int)sb != dim &&
	    t->src[0]->ne[sb] == t->ne[sb]) {
		r->out = *b;
		rule_slice(r, 0, (int)sb, b);
		return true;
	}
	return false;
}

/* add_id: the biases follow a along dimension 0, where a's rows are
 * split; ids whole.  Summands pass with summands of the biases. */
static bool rule_add_id(const struct loom_tensor *t, struct meta_tensor **s,
			struct meta_rule *r, const struct meta_dev *md)
{
	const struct meta_state *a = &s[0]->synced, *b = &s[1]->synced;
	enum loom_split_state sa = a->state, sb = b->state;

	r->out = *a;
	if (s[2]->synced.state != M)
		return false;
	if (sa == P || sb == P)
		return partial_passes(t->op, sa, sb);
	if (sa == M)
		return sb == M;
	if (sa != LOOM_SPLIT_DIM0)
		return false;
	if (sb == M) {
		rule_slice(r, 1, 0, a);
		return true;
	}
	return sb == LOOM_SPLIT_DIM0 && meta_state_same_slices(a, b, md);
}

typedef bool rule_fn(const struct loom_tensor *t, struct meta_tensor **s,
		     struct meta_rule *r, const struct meta_dev *md);

/* One function per rule; views are mapped by meta-plan.c's plan_view. */
static rule_fn *const rules[LOOM_SPLIT_RULE_COUNT] = {
	[LOOM_SPLIT_RULE_ELEMENTWISE] = rule_elementwise,
	[LOOM_SPLIT_RULE_MAP] = rule_map,
	[LOOM_SPLIT_RULE_ROWS] = rule_rows,
	[LOOM_SPLIT_RULE_ARGMAX] = rule_argmax,
	[LOOM_SPLIT_RULE_SOFT_MAX] = rule_soft_max,
	[LOOM_SPLIT_RULE_ROPE] = rule_rope,
	[LOOM_SPLIT_RULE_MUL_MAT] = rule_mul_mat,
	[LOOM_SPLIT_RULE_GET_ROWS] = rule_get_rows,
	[LOOM_SPLIT_RULE_WRITE] = rule_write,
	[LOOM_SPLIT_RULE_CONCAT] = rule_concat,
	[LOOM_SPLIT_RULE_ADD_ID] = rule_add_id,
};

bool meta_rule_find(const struct loom_tensor *t, struct meta_tensor **s,
		    struct meta_rule *r, const struct meta_dev *md)
{
	enum loom_split_rule k = loom_op_split_rule(t->op);

	for (int i = 0; i < LOOM_MAX_SRC; i++)
		r->slice_dim[i] = -1;
	if ((unsigned)k >= LOOM_SPLIT_RULE_COUNT || !rules[k])
		return false;
	return rules[k](t, s, r, md);
}
