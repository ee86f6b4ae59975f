/* SPDX-License-Identifier: MIT */
/* fake-plugin.c - the test plugin, built many ways with -D flags into the
 * good and the broken plugins the loader tests need (tests/loader.mk lists
 * them).  The good build is a host-memory device that computes nothing. */
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <loom/loom-plugin.h>

#include "fake-plugin.h"

#ifndef FAKE_NAME
#define FAKE_NAME "good"
#endif
#ifndef FAKE_ABI_MAJOR
#define FAKE_ABI_MAJOR LOOM_ABI_MAJOR
#endif
#ifdef FAKE_ABI_NEWER
/* Built against an ABI one minor newer than this core's. */
#define FAKE_ABI_MINOR (LOOM_ABI_MINOR + 1)
#endif
#ifdef FAKE_ABI_1_0
/* Built against ABI 1.0: the device table ends before get_rank. */
#define FAKE_ABI_MINOR 0
#endif
#ifndef FAKE_ABI_MINOR
#define FAKE_ABI_MINOR LOOM_ABI_MINOR
#endif
#ifndef FAKE_TYPE
#define FAKE_TYPE LOOM_DEV_TYPE_CPU
#endif
#ifndef FAKE_SCORE
#define FAKE_SCORE 1
#endif

#if defined(FAKE_STUB_LIBLOOM)

/* A stand-in libloom.so.1 with a node newer than the real one. */
__attribute__((visibility("default"))) int loom_fake_newer(void);
int loom_fake_newer(void)
{
	return 0;
}

#elif defined(FAKE_DEP_LIB)

/* The library the "nodep" plugin needs, never installed anywhere. */
__attribute__((visibility("default"))) int fake_dep_value(void);
int fake_dep_value(void)
{
	return 42;
}

#elif defined(FAKE_NEWER_LIBLOOM)

/* Needs loom_fake_newer@LOOM_9.9: dlopen fails with a named version. */
int loom_fake_newer(void);

static int newer_init(loom_reg_t **out)
{
	return loom_fake_newer() ? LOOM_OK : LOOM_E_PLUGIN;
}

LOOM_PLUGIN_DEFINE(FAKE_NAME, "0", newer_init, NULL);

#else

/* Every fake plugin leaves a mark when its file is opened, so the tests
 * can prove an excluded file never was. */
__attribute__((constructor)) static void fake_mark(void)
{
	const char *path = getenv("LOOM_TEST_MARKER");
	FILE *f;

	if (!path)
		return;
	f = fopen(path, "a");
	if (!f)
		return;
	fprintf(f, "%s\n", FAKE_NAME);
	fclose(f);
}

#ifdef FAKE_UNDEFINED
void fake_undefined_function(void);
#endif
#ifdef FAKE_DEPENDENCY
int fake_dep_value(void);
#endif

static struct fake_control control;

/* The re-entrant builds note what their call back into the loader gave. */
__attribute__((unused)) static void note_reenter(int st)
{
	control.reenter_status = st;
	snprintf(control.reenter_msg, sizeof(control.reenter_msg), "%s",
		 st ? loom_error_message() : "");
}

#ifdef FAKE_CTOR_LOAD_ALL
/* Loads everything from the ELF constructor, while the loader is in
 * dlopen of this very file. */
__attribute__((constructor)) static void fake_ctor_load(void)
{
	note_reenter(loom_load_all());
}
#endif

static struct fake_control *get_control(void)
{
	return &control;
}

/* ---- buffers: plain host memory ---- */

static void *buf_get_base(loom_buffer_t *buf)
{
	return loom_buffer_context(buf);
}

static void buf_free(loom_buffer_t *buf)
{
	free(loom_buffer_context(buf));
}

static int buf_init_tensor(loom_buffer_t *buf, struct loom_tensor *t)
{
	control.n_init_tensor++;
	return LOOM_OK;
}

static int buf_set(loom_buffer_t *buf, struct loom_tensor *t,
		   const void *data, size_t offset, size_t size)
{
	control.n_set++;
	memcpy((char *)t->data + offset, data, size);
	return LOOM_OK;
}

static int buf_get(loom_buffer_t *buf, const struct loom_tensor *t,
		   void *data, size_t offset, size_t size)
{
	control.n_get++;
	memcpy(data, (const char *)t->data + offset, size);
	return LOOM_OK;
}

/* Unused in the FAKE_NO_MEMSET build. */
__attribute__((unused)) static int
buf_memset(loom_buffer_t *buf, struct loom_tensor *t, uint8_t value,
	   size_t offset, size_t size)
{
	control.n_memset++;
	memset((char *)t->data + offset, value, size);
	return LOOM_OK;
}

static int buf_copy(loom_buffer_t *buf, const struct loom_tensor *src,
		   struct loom_tensor *dst)
{
	if (control.decline_copy || !loom_buffer_type_is_host(
					   loom_buffer_get_type(src->buffer)))
		return LOOM_E_DECLINED;
	control.n_copy++;
	memcpy(dst->data, src->data, loom_tensor_n_bytes(src));
	return LOOM_OK;
}

static int buf_clear(loom_buffer_t *buf, uint8_t value)
{
	memset(loom_buffer_base(buf), value, loom_buffer_size(buf));
	return LOOM_OK;
}

static const struct loom_buffer_iface buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = buf_free,
	.get_base = buf_get_base,
	.init_tensor = buf_init_tensor,
#ifndef FAKE_NO_MEMSET
	.memset_tensor = buf_memset,
#endif
	.set_tensor = buf_set,
	.get_tensor = buf_get,
	.copy_tensor = buf_copy,
	.clear = buf_clear,
};

/* ---- buffer type ---- */

static const char *buft_name(loom_buffer_type_t *buft)
{
	return FAKE_NAME "_host";
}

static int buft_alloc(loom_buffer_type_t *buft, size_t size,
		      loom_buffer_t **out)
{
	size_t real = size && control.short_alloc ? size - 1 : size;
	void *mem = calloc(1, real ? real : 1);
	int st;

	if (!mem)
		return loom_error_set(LOOM_E_NOMEM, "fake: out of memory");
	st = loom_buffer_new(buft, &buffer_iface, mem, real, out);
	if (st)
		free(mem);
	return st;
}

static size_t buft_alignment(loom_buffer_type_t *buft)
{
	if (control.huge_align)
		return (size_t)1 << 63;
	return control.bad_align ? 48 : 32;
}

static size_t buft_max_size(loom_buffer_type_t *buft)
{
	return (size_t)1 << 30;
}

static bool buft_is_host(loom_buffer_type_t *buft)
{
	return true;
}

/* Unused in the FAKE_BUFT_LAZY_MISSING build. */
__attribute__((unused)) static const struct loom_buffer_type_iface
buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = buft_name,
	.alloc_buffer = buft_alloc,
	.get_alignment = buft_alignment,
	.get_max_size = buft_max_size,
	.is_host = buft_is_host,
};

/* ---- backend ---- */

static const char *be_name(loom_backend_t *be)
{
	return FAKE_NAME;
}

static void be_free(loom_backend_t *be)
{
}

static int be_sync(loom_backend_t *be)
{
	control.n_sync++;
	return LOOM_OK;
}

static int be_compute(loom_backend_t *be, loom_graph_t *g)
{
	control.n_compute++;
	if (control.on_compute)
		control.on_compute(be, g, control.on_compute_data);
	return LOOM_OK;
}

#ifdef FAKE_ASYNC
/* "Async" methods that copy at once and count, so the tests see which
 * path the core took. */
static int be_set_async(loom_backend_t *be, struct loom_tensor *t,
			const void *data, size_t offset, size_t size)
{
	control.n_set_async++;
	memcpy((char *)t->data + offset, data, size);
	return LOOM_OK;
}

static int be_get_async(loom_backend_t *be, const struct loom_tensor *t,
			void *data, size_t offset, size_t size)
{
	control.n_get_async++;
	memcpy(data, (const char *)t->data + offset, size);
	return LOOM_OK;
}

static int be_cpy_async(loom_backend_t *be_src, loom_backend_t *be_dst,
			const struct loom_tensor *src, struct loom_tensor *dst)
{
	if (control.decline_copy)
		return LOOM_E_DECLINED;
	control.n_cpy_async++;
	memcpy(dst->data, src->data, loom_tensor_n_bytes(src));
	return LOOM_OK;
}

static int be_event_record(loom_backend_t *be, loom_event_t *ev)
{
	control.n_event_record++;
	return LOOM_OK;
}

static int be_event_wait(loom_backend_t *be, loom_event_t *ev)
{
	control.n_event_wait++;
	return LOOM_OK;
}
#endif

static const struct loom_backend_iface backend_iface = {
	.size = sizeof(struct loom_backend_iface),
	.get_name = be_name,
	.free = be_free,
#ifdef FAKE_ASYNC
	.set_tensor_async = be_set_async,
	.get_tensor_async = be_get_async,
	.copy_tensor_async = be_cpy_async,
	.event_record = be_event_record,
	.event_wait = be_event_wait,
#endif
	.synchronize = be_sync,
	.graph_compute = be_compute,
};

/* ---- device and reg ---- */

struct fake {
	loom_reg_t *reg;
	loom_dev_t *dev;
	loom_buffer_type_t *buft;
};

static struct fake fake;

static const char *dev_name(loom_dev_t *dev)
{
	return FAKE_NAME "0";
}

static const char *dev_description(loom_dev_t *dev)
{
	return "fake " FAKE_NAME " device for tests";
}

static void dev_memory(loom_dev_t *dev, size_t *free_, size_t *total)
{
	*free_ = (size_t)512 << 20;
	*total = (size_t)1 << 30;
}

static enum loom_dev_type dev_type(loom_dev_t *dev)
{
	return FAKE_TYPE;
}

static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	return loom_backend_new(dev, &backend_iface, NULL, out);
}

#ifdef FAKE_BUFT_LAZY_MISSING
/* A buffer type table without alloc_buffer, made on first use. */
static const struct loom_buffer_type_iface lazy_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = buft_name,
	.get_alignment = buft_alignment,
};
#endif

static loom_buffer_type_t *dev_buft(loom_dev_t *dev)
{
#ifdef FAKE_BUFT_LAZY_MISSING
	if (!fake.buft)
		loom_buffer_type_new(fake.reg, fake.dev, &lazy_buft_iface, NULL,
				     &fake.buft);
#endif
	return fake.buft;
}

/* Unused in the FAKE_MISSING_METHOD build.  The FAKE_CLAIM_ALL build
 * claims every op and computes none, for loom-conformance to catch. */
__attribute__((unused)) static bool
dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
#ifdef FAKE_CLAIM_ALL
	return true;
#else
	return control.claim_all;
#endif
}

#ifdef FAKE_ASYNC
static int dev_event_new(loom_dev_t *dev, loom_event_t *ev)
{
	control.n_event_new++;
	loom_event_set_context(ev, &control);
	return LOOM_OK;
}

static void dev_event_free(loom_dev_t *dev, loom_event_t *ev)
{
	control.n_event_free++;
}

static int dev_event_sync(loom_dev_t *dev, loom_event_t *ev)
{
	control.n_event_sync++;
	return loom_event_context(ev) == &control ? LOOM_OK : LOOM_E_STATE;
}

static uint32_t dev_caps(loom_dev_t *dev)
{
	return LOOM_DEV_CAP_ASYNC | LOOM_DEV_CAP_EVENTS;
}
#endif

#if defined(FAKE_RANK) || defined(FAKE_ABI_1_0)
/* FAKE_ABI_1_0 fills the slot past its table's size, where a 1.0 plugin
 * has whatever follows its table: the core must not read it. */
static enum loom_dev_rank dev_rank(loom_dev_t *dev)
{
#ifdef FAKE_RANK
	return (enum loom_dev_rank)FAKE_RANK;
#else
	return LOOM_DEV_RANK_PRIMARY;
#endif
}
#endif

static const struct loom_dev_iface dev_iface = {
#ifdef FAKE_ABI_1_0
	.size = offsetof(struct loom_dev_iface, get_rank),
#else
	.size = sizeof(struct loom_dev_iface),
#endif
#if defined(FAKE_RANK) || defined(FAKE_ABI_1_0)
	.get_rank = dev_rank,
#endif
	.get_name = dev_name,
	.get_description = dev_description,
	.get_memory = dev_memory,
	.get_type = dev_type,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_buft,
#ifndef FAKE_MISSING_METHOD
	.supports_op = dev_supports_op,
#endif
#ifdef FAKE_ASYNC
	.get_caps = dev_caps,
	.event_new = dev_event_new,
	.event_free = dev_event_free,
	.event_synchronize = dev_event_sync,
#endif
};

static const char *reg_name(loom_reg_t *reg)
{
	return FAKE_NAME;
}

static size_t reg_dev_count(loom_reg_t *reg)
{
	return fake.dev ? 1 : 0;
}

static loom_dev_t *reg_dev(loom_reg_t *reg, size_t i)
{
	return fake.dev;
}

#ifdef FAKE_2D
static int set_2d(loom_buffer_t *buf, struct loom_tensor *t,
		  const void *data, size_t offset, size_t size,
		  size_t n_copies, size_t stride_tensor, size_t stride_data)
{
	control.n_set_2d++;
	for (size_t i = 0; i < n_copies; i++)
		memcpy((char *)t->data + offset + i * stride_tensor,
		       (const char *)data + i * stride_data, size);
	return LOOM_OK;
}

static int get_2d(loom_buffer_t *buf, const struct loom_tensor *t,
		  void *data, size_t offset, size_t size, size_t n_copies,
		  size_t stride_tensor, size_t stride_data)
{
	control.n_get_2d++;
	for (size_t i = 0; i < n_copies; i++)
		memcpy((char *)data + i * stride_data,
		       (const char *)t->data + offset + i * stride_tensor,
		       size);
	return LOOM_OK;
}
#endif

static void *reg_proc(loom_reg_t *reg, const char *name)
{
	if (strcmp(name, FAKE_CONTROL) == 0)
		return (void *)get_control;
#ifdef FAKE_2D
	if (strcmp(name, LOOM_PROC_SET_TENSOR_2D) == 0)
		return (void *)set_2d;
	if (strcmp(name, LOOM_PROC_GET_TENSOR_2D) == 0)
		return (void *)get_2d;
#endif
	return NULL;
}

static void reg_free(loom_reg_t *reg)
{
	memset(&fake, 0, sizeof(fake));
	memset(&control, 0, sizeof(control));
}

static const struct loom_reg_iface reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = reg_name,
	.get_dev_count = reg_dev_count,
	.get_dev = reg_dev,
	.get_proc_address = reg_proc,
	.free = reg_free,
};

#ifdef FAKE_INIT_THREAD
/* Another thread reads the registry while init waits for it. */
static void *count_devs(void *arg)
{
	control.reenter_dev_count = loom_dev_count();
	return NULL;
}
#endif

__attribute__((unused)) static int fake_init(loom_reg_t **out)
{
	int st;

#ifdef FAKE_UNDEFINED
	fake_undefined_function();
#endif
#ifdef FAKE_DEPENDENCY
	if (fake_dep_value() != 42)
		return LOOM_E_PLUGIN;
#endif
#ifdef FAKE_INIT_FAIL
	return loom_error_set(LOOM_E_DEVICE, "fake device did not answer");
#endif
#ifdef FAKE_INIT_LOAD_ALL
	note_reenter(loom_load_all());
#endif
#ifdef FAKE_INIT_UNLOAD
	note_reenter(loom_unload_all());
#endif
#ifdef FAKE_INIT_THREAD
	{
		pthread_t th;

		if (pthread_create(&th, NULL, count_devs, NULL))
			return LOOM_E_PLUGIN;
		pthread_join(th, NULL);
	}
#endif
	st = loom_reg_new(&reg_iface, NULL, &fake.reg);
	if (st)
		return st;
	st = loom_dev_new(fake.reg, &dev_iface, NULL, &fake.dev);
	if (st)
		return st;
#ifndef FAKE_BUFT_LAZY_MISSING
	st = loom_buffer_type_new(fake.reg, fake.dev, &buft_iface, NULL, &fake.buft);
	if (st)
		return st;
#endif
	*out = fake.reg;
	return LOOM_OK;
}

__attribute__((unused)) static int fake_score(const char **why)
{
	if (FAKE_SCORE == 0)
		*why = "no fake hardware here";
	return FAKE_SCORE;
}

#ifdef FAKE_STATIC
/* Linked into a test and registered with loom_load_static(). */
const struct loom_plugin_desc fake_static_desc = {
	.abi_major = LOOM_ABI_MAJOR,
	.abi_minor = LOOM_ABI_MINOR,
	.name = FAKE_NAME,
	.version = "1.2.3",
	.init = fake_init,
	.score = fake_score,
	.size = sizeof(struct loom_plugin_desc),
};
#elif defined(FAKE_SHORT_DESCRIPTOR)
/* Two bytes where the descriptor should be: ABI major 1, and no more.
 * AddressSanitizer would pad the symbol (its size then counts the
 * padding), so clang leaves this one as it is. */
#if defined(__clang__)
__attribute__((no_sanitize("address")))
#endif
__attribute__((visibility("default"))) const uint8_t
	loom_plugin_descriptor[2] = { 1, 0 };
#elif !defined(FAKE_NO_DESCRIPTOR)
__attribute__((visibility("default"))) const struct loom_plugin_desc
	loom_plugin_descriptor = {
		.abi_major = FAKE_ABI_MAJOR,
		.abi_minor = FAKE_ABI_MINOR,
		.name = FAKE_NAME,
		.version = "1.2.3",
		.init = fake_init,
		.score = fake_score,
		.size = sizeof(struct loom_plugin_desc),
	};
#else
/* Something to export, so the file is an ordinary shared object. */
__attribute__((visibility("default"))) int fake_not_a_plugin(void);
int fake_not_a_plugin(void)
{
	return 0;
}
#endif

#endif
