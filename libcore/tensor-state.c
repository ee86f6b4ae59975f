/* SPDX-License-Identifier: MIT */
/* tensor-state.c - per-tensor plugin state: a table of slots the core owns,
 * handles that carry a slot's generation, and scopes that release their
 * slots together.  What a state means is the plugin's business, not this
 * file's.
 */
#include "loom-private.h"

#include <pthread.h>
#include <stdlib.h>

/* Slots live in pages that are never moved or freed, so a handle, however
 * old, is checked by reading the table alone. */
#define PAGE_SLOTS 4096u
#define MAX_PAGES 1024u

#define NIL UINT32_MAX

struct slot {
	uint32_t gen;     /* odd while in use; bumped when released */
	uint32_t prev, next; /* in its scope's list, or the free list */
	const void *tag;
	void *state;
	struct loom_state_scope *scope;
};

struct loom_state_scope {
	const void *tag;
	uint32_t head;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *pages[MAX_PAGES];
static uint32_t n_slots;
static uint32_t free_head = NIL;

static struct slot *slot_at(uint32_t i)
{
	return &pages[i / PAGE_SLOTS][i % PAGE_SLOTS];
}

/* A handle: the slot's index plus one in the low word (so 0 is no handle),
 * its generation in the high word. */
static loom_state_t handle_of(uint32_t i, uint32_t gen)
{
	return (uint64_t)gen << 32 | (uint64_t)(i + 1);
}

/* The slot h names while it is in use with h's generation, else NULL.
 * *stale says whether h named a slot that has been released since. */
static struct slot *slot_of(loom_state_t h, bool *stale)
{
	uint32_t i = (uint32_t)h - 1, gen = (uint32_t)(h >> 32);
	struct slot *s;

	*stale = false;
	if ((uint32_t)h == 0 || i >= n_slots || !(gen & 1))
		return NULL;
	s = slot_at(i);
	if (s->gen != gen) {
		*stale = true;
		return NULL;
	}
	return s;
}

/* Takes a slot off the free list, or a new one; lock is held. */
static int take_slot(uint32_t *out)
{
	uint32_t i;

	if (free_head != NIL) {
		i = free_head;
		free_head = slot_at(i)->next;
		*out = i;
		return LOOM_OK;
	}
	if (n_slots == PAGE_SLOTS * MAX_PAGES)
		return loom_error_set(LOOM_E_NOMEM, "tensor state: every one "
				      "of %u slots is in use", n_slots);
	if (n_slots % PAGE_SLOTS == 0) {
		struct slot *p = calloc(PAGE_SLOTS, sizeof(*p));

		if (!p)
			return loom_error_set(LOOM_E_NOMEM,
					      "tensor state: no memory");
		pages[n_slots / PAGE_SLOTS] = p;
	}
	*out = n_slots++;
	return LOOM_OK;
}

/* Unlinks slot i from its scope and puts it on the free list with a new
 * generation, which makes every handle to it stale; lock is held. */
static void drop_slot(uint32_t i)
{
	struct slot *s = slot_at(i);

	if (s->prev != NIL)
		slot_at(s->prev)->next = s->next;
	else
		s->scope->head = s->next;
	if (s->next != NIL)
		slot_at(s->next)->prev = s->prev;
	s->gen++;
	s->state = NULL;
	s->tag = NULL;
	s->scope = NULL;
	s->prev = NIL;
	s->next = free_head;
	free_head = i;
}

int loom_state_scope_new(const void *tag, loom_state_scope_t **out)
{
	struct loom_state_scope *sc;

	if (!out || !tag)
		return loom_error_set(LOOM_E_INVAL, "loom_state_scope_new: "
				      "NULL argument");
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		return loom_error_set(LOOM_E_NOMEM, "tensor state: no memory");
	sc->tag = tag;
	sc->head = NIL;
	*out = sc;
	return LOOM_OK;
}

void loom_state_scope_free(loom_state_scope_t *scope)
{
	if (!scope)
		return;
	pthread_mutex_lock(&lock);
	while (scope->head != NIL)
		drop_slot(scope->head);
	pthread_mutex_unlock(&lock);
	free(scope);
}

int loom_state_new(loom_state_scope_t *scope, void *state, loom_state_t *out)
{
	struct slot *s;
	uint32_t i = 0;
	int rc;

	if (!scope || !state || !out)
		return loom_error_set(LOOM_E_INVAL, "loom_state_new: NULL "
				      "argument");
	pthread_mutex_lock(&lock);
	rc = take_slot(&i);
	if (rc) {
		pthread_mutex_unlock(&lock);
		return rc;
	}
	s = slot_at(i);
	s->gen |= 1; /* in use: odd (a fresh slot's 0 becomes 1) */
	s->tag = scope->tag;
	s->state = state;
	s->scope = scope;
	s->prev = NIL;
	s->next = scope->head;
	if (scope->head != NIL)
		slot_at(scope->head)->prev = i;
	scope->head = i;
	*out = handle_of(i, s->gen);
	pthread_mutex_unlock(&lock);
	return LOOM_OK;
}

void loom_state_release(loom_state_scope_t *scope, loom_state_t h)
{
	struct slot *s;
	bool stale;

	if (!scope)
		return;
	pthread_mutex_lock(&lock);
	s = slot_of(h, &stale);
	if (s && s->scope == scope)
		drop_slot((uint32_t)h - 1);
	pthread_mutex_unlock(&lock);
}

int loom_state_get(loom_state_t h, const void *tag, void **out)
{
	struct slot *s;
	bool stale;
	int rc = LOOM_OK;

	if (!out)
		return loom_error_set(LOOM_E_INVAL, "loom_state_get: NULL "
				      "argument");
	*out = NULL;
	pthread_mutex_lock(&lock);
	s = slot_of(h, &stale);
	if (s && s->tag == tag)
		*out = s->state;
	else
		rc = stale ? LOOM_E_STATE : LOOM_E_NOT_FOUND;
	pthread_mutex_unlock(&lock);
	return rc;
}

int loom_tensor_state_get(const struct loom_tensor *t, const void *tag,
			  void **out)
{
	if (!t)
		return loom_error_set(LOOM_E_INVAL, "loom_tensor_state_get: "
				      "NULL tensor");
	return loom_state_get(t->state, tag, out);
}
