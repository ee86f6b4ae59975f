/* SPDX-License-Identifier: MIT */
/* inflight.c - calls into plugins in flight: every call through a device,
 * reg or buffer type counts here while it runs, and unloading waits until
 * none is left before it frees them.  Objects the application frees
 * (buffers, backends, events) keep their plugin loaded by reference. */
#include "config.h"

#include <pthread.h>
#include <stdbool.h>

#include "backend-private.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static size_t in_flight; /* threads inside a call, all told */
static bool closed;      /* an unload is under way: no new calls */

/* This thread's calls, nested (a composed device's call into its members). */
static _Thread_local unsigned depth;
/* This thread is the one unloading: its own calls (a plugin's free
 * method asking the core something) go through. */
static _Thread_local bool unloading;

static bool begin(const void *h, enum loom__kind kind)
{
	bool ok;

	/* The outer call holds every plugin loaded already. */
	if (depth || unloading) {
		ok = !h || loom__handle_live(h, kind);
		depth += ok;
		return ok;
	}
	pthread_mutex_lock(&lock);
	ok = !closed && (!h || loom__handle_live(h, kind));
	in_flight += ok;
	pthread_mutex_unlock(&lock);
	depth += ok;
	return ok;
}

bool loom__call_begin(const void *h, enum loom__kind kind)
{
	return h && begin(h, kind);
}

bool loom__calls_hold(void)
{
	return begin(NULL, 0);
}

void loom__call_end(void)
{
	if (--depth || unloading)
		return;
	pthread_mutex_lock(&lock);
	if (--in_flight == 0 && closed)
		pthread_cond_broadcast(&idle);
	pthread_mutex_unlock(&lock);
}

bool loom__in_call(void)
{
	return depth != 0;
}

void loom__calls_close(void)
{
	pthread_mutex_lock(&lock);
	closed = true;
	while (in_flight)
		pthread_cond_wait(&idle, &lock);
	pthread_mutex_unlock(&lock);
	unloading = true;
}

void loom__calls_open(void)
{
	unloading = false;
	pthread_mutex_lock(&lock);
	closed = false;
	pthread_mutex_unlock(&lock);
}
