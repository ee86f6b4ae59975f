/* SPDX-License-Identifier: MIT */
/* loader-cases.h - the loader test cases that test-loader.c's main
 * registers from the other test-loader-*.c files. */
#ifndef LOOM_TESTS_LOADER_CASES_H
#define LOOM_TESTS_LOADER_CASES_H

#include "loader-util.h"

/* test-loader-abi.c: the ABI version rule, device ranks, LOOM_BACKENDS
 * requests, secure execution, reloading, events and threads. */
void test_abi_desc_size(void);
void test_abi_old_plugin(struct fixture *f, gconstpointer data);
void test_abi_rule(void);
void test_abi_static(struct fixture *f, gconstpointer data);
void test_async_events(struct fixture *f, gconstpointer data);
void test_enumerate_while_loading(struct fixture *f, gconstpointer data);
void test_rank_bad(struct fixture *f, gconstpointer data);
void test_rank_meta(struct fixture *f, gconstpointer data);
void test_rank_order(struct fixture *f, gconstpointer data);
void test_rank_third_party(struct fixture *f, gconstpointer data);
void test_reload(struct fixture *f, gconstpointer data);
void test_requested(struct fixture *f, gconstpointer data);
void test_secure(struct fixture *f, gconstpointer data);
void test_threads(struct fixture *f, gconstpointer data);

/* test-loader-elf.c: files that are not whole plugins for this machine. */
void test_elf(struct fixture *f, gconstpointer data);
void test_elf_fields(struct fixture *f, gconstpointer data);
void test_entries(struct fixture *f, gconstpointer data);
void test_unreadable(struct fixture *f, gconstpointer data);

/* test-loader-iface.c: the interfaces' constructors and the data that
 * crosses them; registers its own cases (the last ones). */
void add_iface_tests(void);

#endif
