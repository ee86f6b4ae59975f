/* validate.c - the check of a graph before any plugin computes it: every
 * node against its op's rule (rules.c), in an order where it follows the
 * nodes it reads, and every tensor's bytes inside its live buffer.  Kernels
 * then trust what they are given. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "backend-private.h"

#define WHO_MAX 192

static const char *name_of(const struct loom_tensor *t)
{
	return t->name[0] ? t->name : "(unnamed)";
}

/* The type and sizes of t are ones a tensor can have (a node edited by
 * hand may hold anything); nothing else about t is read before this. */
static int check_shape(const struct loom_tensor *t, const char *who)
{
	return loom__tensor_check_shape(NULL, who, t->type, t->ne);
}

/* t's bytes lie inside its buffer, which is alive; a view's are where its
 * owner's are, view_offs on. */
static int check_placement(const struct loom_tensor *t, const char *who)
{
	const struct loom_tensor *src = t->view_src;

	if (!loom__tensor_in_live_buffer(t))
		return loom_error_set(LOOM_E_STATE,
				      "%s is not placed in a buffer", who);
	if (src && (src->buffer != t->buffer || !src->data ||
		    (char *)t->data != (char *)src->data + t->view_offs))
		return loom_error_set(LOOM_E_STATE,
				      "%s does not lie at offset %zu of '%s', "
				      "the tensor it views", who,
				      t->view_offs, name_of(src));
	return loom__check_range(t, 0, 0, who);
}

/* Node i of g: its inputs come before it, and it is what its op's rule
 * makes of them. */
static int check_node(loom_graph_t *g, size_t i, struct loom_tensor *t,
		      const char *who)
{
	struct loom__op_result r;
	char msg[384], want[LOOM__DESC_MAX], have[LOOM__DESC_MAX];

	for (int k = 0; k < LOOM__N_INPUTS; k++) {
		struct loom_tensor *in = loom__tensor_input(t, k);
		long at;

		if (!in)
			continue;
		at = loom__graph_find(g, in);
		if (at == LOOM__NOT_IN_GRAPH)
			return loom_error_set(LOOM_E_INVAL,
					      "%s reads '%s', which is not in "
					      "the graph (a source set after "
					      "the node was added)", who,
					      name_of(in));
		if (at >= 0 && (size_t)at >= i)
			return loom_error_set(LOOM_E_INVAL,
					      "%s reads '%s' (%s), node %ld, "
					      "which does not come before it "
					      "(nodes out of order or in a "
					      "cycle)", who, name_of(in),
					      loom_op_name(in->op), at);
	}
	if (loom__op_rule(t, &r, msg, sizeof(msg)))
		return loom_error_set(LOOM_E_INVAL, "%s: %s", who, msg);
	if (t->type != r.type || memcmp(t->ne, r.ne, sizeof(r.ne))) {
		struct loom_tensor probe = { .type = r.type };

		memcpy(probe.ne, r.ne, sizeof(probe.ne));
		return loom_error_set(LOOM_E_INVAL,
				      "%s is %s, its sources make %s", who,
				      loom__tensor_desc(t, have, sizeof(have)),
				      loom__tensor_desc(&probe, want,
							sizeof(want)));
	}
	if (memcmp(t->nb, r.nb, sizeof(r.nb)))
		return loom_error_set(LOOM_E_INVAL,
				      "%s has strides (%zu, %zu, %zu, %zu), "
				      "its op makes (%zu, %zu, %zu, %zu)",
				      who, t->nb[0], t->nb[1], t->nb[2],
				      t->nb[3], r.nb[0], r.nb[1], r.nb[2],
				      r.nb[3]);
	if (t->view_src != r.view_src || t->view_offs != r.view_offs)
		return loom_error_set(LOOM_E_INVAL,
				      "%s views '%s' at %zu, its op makes it "
				      "%s%s%s at %zu", who,
				      t->view_src ? name_of(t->view_src)
						  : "nothing",
				      t->view_offs, r.view_src ? "'" : "",
				      r.view_src ? name_of(r.view_src)
						 : "view nothing",
				      r.view_src ? "'" : "", r.view_offs);
	return LOOM_OK;
}

int loom__graph_validate(loom_graph_t *g, const char *who)
{
	size_t n = loom_graph_n_nodes(g), n_leaves = loom_graph_n_leaves(g);
	char what[WHO_MAX];
	int st;

	/* Leaves first: the rules of the nodes read their shapes. */
	for (size_t i = 0; i < n_leaves; i++) {
		struct loom_tensor *t = loom_graph_leaf(g, i);

		snprintf(what, sizeof(what), "backend '%s': leaf '%s'", who,
			 name_of(t));
		st = check_shape(t, what);
		if (!st)
			st = check_placement(t, what);
		if (st)
			return st;
	}
	for (size_t i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		snprintf(what, sizeof(what), "backend '%s': node %zu '%s' (%s)",
			 who, i, name_of(t),
			 (unsigned)t->op < LOOM_OP_COUNT ? loom_op_name(t->op)
							 : "unknown op");
		st = check_shape(t, what);
		if (!st)
			st = check_node(g, i, t, what);
		if (!st)
			st = check_placement(t, what);
		if (st)
			return st;
	}
	return LOOM_OK;
}
