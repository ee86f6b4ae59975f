/* SPDX-License-Identifier: MIT */
/* validate.c - the check of a graph before any plugin computes it: every
 * node against its op's rule (rules.c), in an order where it follows the
 * nodes it reads, and every tensor's bytes inside its live buffer.  Kernels
 * then trust what they are given.  A graph run again unchanged is known
 * by a fingerprint of what the checks read, and not checked again. */
#include "config.h"

#include <stddef.h>
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

/* Every check of leaf (i < 0) or node i; who begins its messages. */
static int check_tensor(loom_graph_t *g, long i, struct loom_tensor *t,
			const char *who)
{
	int st = check_shape(t, who);

	if (!st && i >= 0)
		st = check_node(g, (size_t)i, t, who);
	return st ? st : check_placement(t, who);
}

/* The checks run once without names; only a tensor that fails runs them
 * again with its name in the messages, so that a good graph costs no
 * formatting. */
static int check_named(loom_graph_t *g, long i, struct loom_tensor *t,
		       const char *be)
{
	char who[WHO_MAX];

	if (!check_tensor(g, i, t, ""))
		return LOOM_OK;
	if (i < 0)
		snprintf(who, sizeof(who), "backend '%s': leaf '%s'", be,
			 name_of(t));
	else
		snprintf(who, sizeof(who), "backend '%s': node %ld '%s' (%s)",
			 be, i, name_of(t),
			 (unsigned)t->op < LOOM_OP_COUNT ? loom_op_name(t->op)
							 : "unknown op");
	return check_tensor(g, i, t, who);
}

/* One word into a running fingerprint. */
static uint64_t mix(uint64_t h, uint64_t w)
{
	h = (h ^ w) * 0x9e3779b97f4a7c15ull;
	return h ^ (h >> 31);
}

/* The fields a check reads, type to buffer, lie together at the start of
 * a tensor and are fingerprinted as words. */
#define CHECKED_WORDS (offsetof(struct loom_tensor, state) / 8)
_Static_assert(offsetof(struct loom_tensor, type) == 0 &&
		       offsetof(struct loom_tensor, state) % 8 == 0 &&
		       offsetof(struct loom_tensor, buffer) <
			       offsetof(struct loom_tensor, state),
	       "the checked fields of a tensor are whole words at its start");

/* Every field of t that a check reads: a graph whose version and
 * fingerprints are those of a state found good is that state again, so
 * the checks would pass again.  Edits that bump no version (sizes,
 * strides, sources or data set by hand) change the fingerprint.  Each
 * word gets its own odd multiplier and the products are summed, so the
 * multiplies do not wait on each other; the sum is mixed in once. */
static uint64_t fingerprint(uint64_t h, const struct loom_tensor *t)
{
	const char *p = (const char *)t;
	uint64_t sum = 0;

	for (size_t i = 0; i < CHECKED_WORDS; i++) {
		uint64_t w;

		memcpy(&w, p + 8 * i, sizeof(w));
		sum += w * (0x9e3779b97f4a7c15ull +
			    (uint64_t)i * 0xc657cb37b368c032ull);
	}
	return mix(h, sum);
}

/* Whether t lies in a live buffer.  The tensors of a graph share a few
 * buffers (the weights', the compute memory): those found alive already
 * (seen, n_seen of them) are not looked up in the handle table again. */
#define SEEN_MAX 8

static bool in_live_buffer(const struct loom_tensor *t, loom_buffer_t **seen,
			   int *n_seen)
{
	if (!t->data)
		return false;
	for (int i = 0; i < *n_seen; i++)
		if (seen[i] == t->buffer)
			return true;
	if (!loom__buffer_live(t->buffer))
		return false;
	if (*n_seen < SEEN_MAX)
		seen[(*n_seen)++] = t->buffer;
	else
		seen[SEEN_MAX - 1] = t->buffer;
	return true;
}

/* A graph is checked in full when its key differs from the one last
 * found good, or when some buffer it uses is no longer alive (which no
 * field of a tensor shows).  Messages name be, whose name is asked for
 * only then. */
int loom__graph_validate(loom_graph_t *g, loom_backend_t *be)
{
	size_t n = loom_graph_n_nodes(g), n_leaves = loom_graph_n_leaves(g);
	uint64_t key = mix(0, loom_graph_version(g));
	loom_buffer_t *seen[SEEN_MAX];
	int n_seen = 0;
	bool live = true;
	const char *who;
	int st;

	for (size_t i = 0; i < n_leaves; i++) {
		struct loom_tensor *t = loom_graph_leaf(g, i);

		key = fingerprint(key, t);
		live &= in_live_buffer(t, seen, &n_seen);
	}
	for (size_t i = 0; i < n; i++) {
		struct loom_tensor *t = loom_graph_node(g, i);

		key = fingerprint(key, t);
		live &= in_live_buffer(t, seen, &n_seen);
	}
	if (live && key && key == loom__graph_checked(g))
		return LOOM_OK;
	who = loom_backend_name(be);

	/* Leaves first: the rules of the nodes read their shapes. */
	for (size_t i = 0; i < n_leaves; i++) {
		st = check_named(g, -1, loom_graph_leaf(g, i), who);
		if (st)
			return st;
	}
	for (size_t i = 0; i < n; i++) {
		st = check_named(g, (long)i, loom_graph_node(g, i), who);
		if (st)
			return st;
	}
	loom__graph_set_checked(g, key);
	return LOOM_OK;
}
