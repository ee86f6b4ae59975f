/* SPDX-License-Identifier: MIT */
/* handle.c - the core's table of live handles: every buffer type, buffer,
 * backend, event, device, reg, context, graph allocator and scheduler
 * made and not yet freed.  A handle is checked here, never by reading its
 * memory. */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "loom-private.h"

/* An open-addressing set of addresses with their kind: linear probing,
 * grown at half load, deletion by shifting the run back (no tombstones). */
static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
static uintptr_t *keys;
static unsigned char *kinds;
static size_t cap, n;

static size_t slot_of(uintptr_t key, size_t mask)
{
	/* Allocations are 16-byte aligned: drop the bits that never vary. */
	return (size_t)(((uint64_t)(key >> 4) * 0x9e3779b97f4a7c15ull) >> 17) &
	       mask;
}

/* The slot holding key, or the empty slot where it would go. */
static size_t find(uintptr_t key)
{
	size_t mask = cap - 1, i = slot_of(key, mask);

	while (keys[i] && keys[i] != key)
		i = (i + 1) & mask;
	return i;
}

static int grow(void)
{
	size_t old_cap = cap, new_cap = cap ? 2 * cap : 256;
	uintptr_t *old_keys = keys, *k;
	unsigned char *old_kinds = kinds, *t;

	k = calloc(new_cap, sizeof(*k));
	t = calloc(new_cap, sizeof(*t));
	if (!k || !t) {
		free(k);
		free(t);
		return LOOM_E_NOMEM;
	}
	keys = k;
	kinds = t;
	cap = new_cap;
	for (size_t i = 0; i < old_cap; i++) {
		if (old_keys[i]) {
			size_t j = find(old_keys[i]);

			keys[j] = old_keys[i];
			kinds[j] = old_kinds[i];
		}
	}
	free(old_keys);
	free(old_kinds);
	return LOOM_OK;
}

int loom__handle_add(const void *h, enum loom__kind kind)
{
	uintptr_t key = (uintptr_t)h;
	size_t i;
	int st = LOOM_OK;

	if (!h)
		return loom_error_set(LOOM_E_INVAL, "handle is NULL");
	pthread_rwlock_wrlock(&lock);
	if (2 * (n + 1) > cap)
		st = grow();
	if (!st) {
		i = find(key);
		n += !keys[i];
		keys[i] = key;
		kinds[i] = (unsigned char)kind;
	}
	pthread_rwlock_unlock(&lock);
	return st ? loom_error_set(st, "out of memory") : LOOM_OK;
}

bool loom__handle_take(const void *h, enum loom__kind kind)
{
	uintptr_t key = (uintptr_t)h;
	size_t i, j, mask;
	bool found = false;

	if (!h)
		return false;
	pthread_rwlock_wrlock(&lock);
	if (!cap)
		goto out_unlock;
	mask = cap - 1;
	i = find(key);
	if (!keys[i] || kinds[i] != kind)
		goto out_unlock;
	found = true;
	keys[i] = 0;
	n--;
	/* Move back every later key of the run that may sit in the hole. */
	for (j = (i + 1) & mask; keys[j]; j = (j + 1) & mask) {
		size_t home = slot_of(keys[j], mask);

		if (((j - home) & mask) >= ((j - i) & mask)) {
			keys[i] = keys[j];
			kinds[i] = kinds[j];
			keys[j] = 0;
			i = j;
		}
	}
out_unlock:
	pthread_rwlock_unlock(&lock);
	return found;
}

bool loom__handle_live(const void *h, enum loom__kind kind)
{
	bool live = false;

	if (!h)
		return false;
	pthread_rwlock_rdlock(&lock);
	if (cap) {
		size_t i = find((uintptr_t)h);

		live = keys[i] && kinds[i] == kind;
	}
	pthread_rwlock_unlock(&lock);
	return live;
}
