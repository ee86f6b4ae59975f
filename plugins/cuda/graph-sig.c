/* SPDX-License-Identifier: MIT */
/* graph-sig.c - the kernel-node lists CUDA graphs are compared by and the
 * choice of the slot a new graph takes (graph-sig.h).  No CUDA here.
 */
#include <stdlib.h>
#include <string.h>

#include "graph-sig.h"

static bool has_kernel(const struct loom_tensor *t)
{
	return t->op != LOOM_OP_NONE && !loom_op_is_view(t->op) &&
	       loom_tensor_n_elements(t) > 0;
}

static void operand_of(struct cuda_operand_sig *o, const struct loom_tensor *t)
{
	o->data = t->data;
	o->type = (int32_t)t->type;
	memcpy(o->ne, t->ne, sizeof(o->ne));
	memcpy(o->nb, t->nb, sizeof(o->nb));
}

static void node_sig_of(struct cuda_node_sig *s, const struct loom_tensor *t)
{
	memset(s, 0, sizeof(*s));
	s->op = (int32_t)t->op;
	memcpy(s->op_params, t->op_params, sizeof(s->op_params));
	operand_of(&s->t, t);
	for (int i = 0; i < LOOM_MAX_SRC; i++)
		if (t->src[i])
			operand_of(&s->src[i], t->src[i]);
}

int cuda_sig_build(struct cuda_sig *s, loom_graph_t *g,
		   bool (*capturable)(const struct loom_tensor *t),
		   bool *capturable_all)
{
	size_t n = loom_graph_n_nodes(g);

	s->n = 0;
	*capturable_all = true;
	for (size_t i = 0; i < n; i++) {
		const struct loom_tensor *t = loom_graph_node(g, i);

		if (!has_kernel(t))
			continue;
		if (s->n == s->cap) {
			size_t cap = s->cap ? 2 * s->cap : 256;
			struct cuda_node_sig *p = realloc(s->v,
							  cap * sizeof(*p));

			if (!p)
				return loom_error_set(LOOM_E_NOMEM,
						      "out of memory");
			s->v = p;
			s->cap = cap;
		}
		node_sig_of(&s->v[s->n++], t);
		*capturable_all = *capturable_all && capturable(t);
	}
	return LOOM_OK;
}

void cuda_sig_free(struct cuda_sig *s)
{
	free(s->v);
	memset(s, 0, sizeof(*s));
}

bool cuda_sig_equal(const struct cuda_sig *a, const struct cuda_sig *b)
{
	return a->n == b->n && a->n &&
	       !memcmp(a->v, b->v, a->n * sizeof(*a->v));
}

/* An operand present in both or in neither, of one type. */
static bool operand_kin(const struct cuda_operand_sig *a,
			const struct cuda_operand_sig *b)
{
	return a->type == b->type && !a->ne[0] == !b->ne[0];
}

static bool node_kin(const struct cuda_node_sig *a,
		     const struct cuda_node_sig *b)
{
	if (a->op != b->op || !operand_kin(&a->t, &b->t) ||
	    memcmp(a->op_params, b->op_params, sizeof(a->op_params)))
		return false;
	for (int i = 0; i < LOOM_MAX_SRC; i++)
		if (!operand_kin(&a->src[i], &b->src[i]))
			return false;
	return true;
}

/* The same shapes of the node and its operands. */
static bool node_shapes_equal(const struct cuda_node_sig *a,
			      const struct cuda_node_sig *b)
{
	if (memcmp(a->t.ne, b->t.ne, sizeof(a->t.ne)))
		return false;
	for (int i = 0; i < LOOM_MAX_SRC; i++)
		if (memcmp(a->src[i].ne, b->src[i].ne, sizeof(a->src[i].ne)))
			return false;
	return true;
}

bool cuda_sig_same_kernels(const struct cuda_sig *a,
			   const struct cuda_sig *b)
{
	size_t same_shapes = 0;

	if (a->n != b->n || !a->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		if (!node_kin(&a->v[i], &b->v[i]))
			return false;
		same_shapes += node_shapes_equal(&a->v[i], &b->v[i]);
	}
	return 2 * same_shapes >= a->n;
}

int cuda_sig_pick(const struct cuda_slot_view *slots, int n,
		  const struct cuda_sig *cur, int *donor)
{
	int oldest = 0;

	*donor = -1;
	for (int i = 0; i < n; i++) {
		if (cuda_sig_equal(slots[i].sig, cur))
			return i;
		if (slots[i].stamp < slots[oldest].stamp)
			oldest = i;
	}
	for (int i = 0; i < n; i++)
		if (slots[i].has_exec &&
		    cuda_sig_same_kernels(slots[i].sig, cur) &&
		    (*donor < 0 || slots[i].stamp < slots[*donor].stamp))
			*donor = i;
	return oldest;
}
