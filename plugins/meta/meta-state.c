/* SPDX-License-Identifier: MIT */
/* meta-state.c - split states (META.md, "Split states"): their names,
 * where each device's slices lie, and cuts by the device's ratios.  How a
 * callback's answer becomes a state is meta-split.c's; how an op carries
 * states, meta-rules.c's.
 */
#include "meta.h"

#include <math.h>
#include <string.h>

const char *meta_state_name(enum loom_split_state s)
{
	switch (s) {
	case LOOM_SPLIT_DIM0:
		return "SPLIT(0)";
	case LOOM_SPLIT_DIM1:
		return "SPLIT(1)";
	case LOOM_SPLIT_DIM2:
		return "SPLIT(2)";
	case LOOM_SPLIT_DIM3:
		return "SPLIT(3)";
	case LOOM_SPLIT_MIRRORED:
		return "MIRRORED";
	case LOOM_SPLIT_PARTIAL:
		return "PARTIAL";
	}
	return "unknown";
}

void meta_state_whole(struct meta_state *st, enum loom_split_state state)
{
	memset(st, 0, sizeof(*st));
	st->state = state;
}

int64_t meta_state_dev_len(const struct meta_state *st,
			   const struct meta_dev *md, int j)
{
	int64_t sum = 0;

	for (int s = 0; s < st->n_seg; s++)
		sum += st->len[s][md->first + j];
	return sum;
}

int64_t meta_state_dev_start(const struct meta_state *st,
			     const struct meta_dev *md, int s, int j)
{
	int64_t sum = 0;

	for (int k = 0; k < md->first + j; k++)
		sum += st->len[s][k];
	return sum;
}

int64_t meta_state_seg_len(const struct meta_state *st,
			   const struct meta_dev *md, int s)
{
	int64_t sum = 0;

	for (int k = 0; k < md->n_all; k++)
		sum += st->len[s][k];
	return sum;
}

/* True when a and b are the same state cut at the same places (over the
 * whole world, so that every rank answers alike). */
bool meta_state_same_slices(const struct meta_state *a,
			    const struct meta_state *b,
			    const struct meta_dev *md)
{
	if (a->state != b->state)
		return false;
	if (a->state > LOOM_SPLIT_DIM3)
		return true;
	if (a->n_seg != b->n_seg)
		return false;
	for (int s = 0; s < a->n_seg; s++)
		for (int k = 0; k < md->n_all; k++)
			if (a->len[s][k] != b->len[s][k])
				return false;
	return true;
}

/* Cuts units into n shares following the weights by the largest-remainder
 * rule: every share is the floor of its quota, and the units left over go
 * to the largest fractional parts (the lower device first on ties). */
void meta_largest_remainder(int64_t units, const float *w, int n,
			      int64_t *out)
{
	double total = 0, frac[META_MAX_MEMBERS];
	int64_t given = 0;

	for (int j = 0; j < n; j++)
		total += w[j];
	for (int j = 0; j < n; j++) {
		double q = (double)units * w[j] / total;

		out[j] = (int64_t)floor(q);
		frac[j] = q - (double)out[j];
		given += out[j];
	}
	/* A quota rounded up to a whole number can overshoot: take the
	 * excess back from the smallest fractional parts. */
	while (given > units) {
		int worst = -1;

		for (int j = 0; j < n; j++)
			if (out[j] > 0 && (worst < 0 || frac[j] < frac[worst]))
				worst = j;
		out[worst]--;
		frac[worst] = 2;
		given--;
	}
	while (given < units) {
		int best = -1;

		for (int j = 0; j < n; j++)
			if (w[j] > 0 && (best < 0 || frac[j] > frac[best]))
				best = j;
		out[best]++;
		frac[best] = -1;
		given++;
	}
}

void meta_state_cut(const struct meta_dev *md, enum loom_split_state axis,
		    int64_t n, int64_t unit, struct meta_state *out)
{
	meta_state_whole(out, axis);
	out->n_seg = 1;
	meta_largest_remainder(n / unit, md->ratios_all, md->n_all, out->len[0]);
	for (int k = 0; k < md->n_all; k++)
		out->len[0][k] *= unit;
	out->len[0][md->n_all - 1] += n % unit;
}
