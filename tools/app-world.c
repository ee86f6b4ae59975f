/* SPDX-License-Identifier: MIT */
/* app-world.c - the world as loom-run and loom-bench model see it (see
 * app-world.h).  Every rank runs the same program; rank 0 prints and
 * decides what must be the same everywhere.
 */
#include "app-world.h"

#include <stdlib.h>
#include <string.h>

void app_world_open(struct app_world *w)
{
	struct loom_world info = { .size = sizeof(info) };
	const char *env = loom_env_get("LOOM_META_WORLD");
	loom_world_fn fn;

	memset(w, 0, sizeof(*w));
	w->n_ranks = 1;
	w->meta = env && *env;
	w->reg = loom_reg_by_name("mpi");
	if (!w->reg)
		return;
	*(void **)&fn = loom_reg_proc_address(w->reg, LOOM_PROC_WORLD);
	*(void **)&w->bcast = loom_reg_proc_address(w->reg,
						    LOOM_PROC_WORLD_BCAST);
	*(void **)&w->allreduce = loom_reg_proc_address(
		w->reg, LOOM_PROC_WORLD_ALLREDUCE);
	if (!fn || !w->bcast || !w->allreduce || fn(w->reg, &info) ||
	    info.n_ranks < 1) {
		w->reg = NULL;
		return;
	}
	w->rank = info.rank;
	w->n_ranks = info.n_ranks;
}

bool app_world_prints(const struct app_world *w)
{
	return w->rank == 0;
}

int app_world_bcast(const struct app_world *w, void *data, size_t size)
{
	if (!w->reg || w->n_ranks < 2)
		return LOOM_OK;
	return w->bcast(w->reg, data, size, 0);
}

int app_world_same(const struct app_world *w, const void *mine, size_t size,
		   int *first)
{
	void *root = malloc(size ? size : 1);
	float *differ = calloc((size_t)w->n_ranks, sizeof(*differ));
	int ret;

	*first = -1;
	if (!root || !differ) {
		ret = loom_error_set(LOOM_E_NOMEM, "no memory");
		goto out;
	}
	if (size)
		memcpy(root, mine, size);
	ret = app_world_bcast(w, root, size);
	if (ret || !w->reg || w->n_ranks < 2)
		goto out;
	differ[w->rank] = size && memcmp(root, mine, size) != 0;
	ret = w->allreduce(w->reg, differ, (size_t)w->n_ranks,
			   LOOM_TYPE_F32);
	for (int r = 0; !ret && r < w->n_ranks && *first < 0; r++)
		if (differ[r] != 0)
			*first = r;
out:
	free(differ);
	free(root);
	return ret;
}
