/* SPDX-License-Identifier: MIT */
/* meta-rules.h - the split rules: a node's split state from its sources'
 * states, one function per rule the table of ops names
 * (loom_op_split_rule).  They decide only; meta-plan.c builds.
 */
#ifndef LOOM_META_RULES_H
#define LOOM_META_RULES_H

#include "meta.h"

/* What a rule decides: the output state and, per source, a dimension
 * along which a MIRRORED source is cut to meet a split (-1: used as is)
 * with the state whose slices it is cut to. */
struct meta_rule {
	struct meta_state out;
	int slice_dim[LOOM_MAX_SRC];
	const struct meta_state *slice_ref[LOOM_MAX_SRC];
};

/* Whether node t has a rule for its sources' synced states s (s[0] not
 * NULL; a NULL entry is a source t lacks) on md; *r says what it is. */
bool meta_rule_find(const struct loom_tensor *t, struct meta_tensor **s,
		    struct meta_rule *r, const struct meta_dev *md);

static inline bool meta_is_split(enum loom_split_state s)
{
	return s <= LOOM_SPLIT_DIM3;
}

#endif
