/* SPDX-License-Identifier: MIT */
/* fake-plugin.h - what the loader tests can see of the fake plugin: its
 * counters and switches, reached through the "fake_control" entry point. */
#ifndef LOOM_FAKE_PLUGIN_H
#define LOOM_FAKE_PLUGIN_H

#include <stddef.h>

struct loom_backend;
struct loom_graph;

#define FAKE_CONTROL "fake_control"

struct fake_control {
	/* Calls the plugin saw. */
	int n_set, n_get, n_set_2d, n_get_2d, n_memset, n_copy;
	int n_init_tensor, n_compute, n_sync;
	int n_set_async, n_get_async, n_cpy_async;
	int n_event_new, n_event_free, n_event_record, n_event_wait;
	int n_event_sync;
	/* Switches the test turns on. */
	int short_alloc;  /* allocate one byte less than asked */
	int bad_align;    /* report a non-power-of-two alignment */
	int decline_copy;  /* copy_tensor declines */
	int huge_align;    /* report an alignment of 2^63 */
	int claim_all;     /* supports_op says yes to every op */
	/* What a re-entrant build's call back into the loader returned
	 * (from init or from the ELF constructor), and the message. */
	int reenter_status;
	char reenter_msg[256];
	size_t reenter_dev_count; /* FAKE_INIT_THREAD: what the thread saw */
	/* Called from inside the backend's graph_compute when set. */
	void (*on_compute)(struct loom_backend *be, struct loom_graph *g,
			   void *data);
	void *on_compute_data;
};

typedef struct fake_control *(*fake_control_fn)(void);

#endif
