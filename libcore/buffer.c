/* SPDX-License-Identifier: MIT */
/* buffer.c - buffer types and buffers: the core's wrappers around a
 * plugin's tables, the checks made before tensor data reaches a plugin,
 * and placing tensors in buffers.  Backends live in backend.c. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "backend-private.h"

/* Largest host block the memset and copy fallbacks stage at once. */
#define STAGE_MAX (1u << 20)

/* Copies at most the table's own size bytes into the zeroed dst: a newer
 * plugin's longer table keeps the slots this core knows, an older one's
 * missing slots read NULL. */
static int copy_iface(void *dst, size_t dst_size, const void *src,
		      const char *what)
{
	uint32_t size;

	memset(dst, 0, dst_size);
	if (!src)
		return loom_error_set(LOOM_E_INVAL, "%s: interface is NULL",
				      what);
	memcpy(&size, src, sizeof(size));
	if (size < sizeof(uint32_t))
		return loom_error_set(LOOM_E_PLUGIN,
				      "%s: interface size %u is too small",
				      what, (unsigned)size);
	memcpy(dst, src, size < dst_size ? size : dst_size);
	return LOOM_OK;
}

/* The name of the first of slots[0..n) that is NULL in the (copied)
 * table iface, or NULL when every one is filled. */
static const char *missing_slot(const void *iface,
				const struct loom__slot *slots, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		void *fn;

		memcpy(&fn, (const char *)iface + slots[i].off, sizeof(fn));
		if (!fn)
			return slots[i].name;
	}
	return NULL;
}

int loom__wrap_init(void *obj, void *iface, size_t iface_size,
		    const void *src, void **context_field, void *context,
		    const struct loom__wrap *w, const char *owner)
{
	const char *slot;
	int st;

	st = copy_iface(iface, iface_size, src, w->kind);
	if (st)
		return st;
	*context_field = context;
	st = loom__handle_add(obj, w->handle);
	if (st)
		return st;
	slot = missing_slot(iface, w->required, w->n_required);
	if (!slot)
		return LOOM_OK;
	if (w->name)
		owner = w->name(obj);
	st = loom__missing_method(w->kind, owner, slot);
	loom__handle_take(obj, w->handle);
	return st;
}

static bool is_pow2(size_t x)
{
	return x && !(x & (x - 1));
}


/* ------------------------------------------------------------------------
 * Buffer types.
 */

static const char *buft_plugin_name(void *obj)
{
	loom_buffer_type_t *buft = obj;

	return buft->iface.get_name ? buft->iface.get_name(buft) : NULL;
}

int loom_buffer_type_new(loom_reg_t *reg, loom_dev_t *dev,
		  const struct loom_buffer_type_iface *iface, void *context,
		  loom_buffer_type_t **out)
{
	static const struct loom__slot required[] = {
		LOOM__SLOT(struct loom_buffer_type_iface, get_name),
		LOOM__SLOT(struct loom_buffer_type_iface, alloc_buffer),
		LOOM__SLOT(struct loom_buffer_type_iface, get_alignment),
	};
	static const struct loom__wrap wrap = {
		"buffer type", LOOM__KIND_BUFT, required,
		LOOM__N_OF(required), buft_plugin_name,
	};
	struct loom_buffer_type *buft;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_type_new: out is NULL");
	*out = NULL;
	if (!loom__reg_live(reg))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_type_new: reg is not a loom reg");
	if (dev && (!loom__dev_live(dev) || dev->reg != reg))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_type_new: dev is not a device "
				      "of reg");
	buft = calloc(1, sizeof(*buft));
	if (!buft)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	buft->reg = reg;
	buft->dev = dev;
	st = loom__wrap_init(buft, &buft->iface, sizeof(buft->iface), iface,
			     &buft->context, context, &wrap, NULL);
	if (st) {
		free(buft);
		return st;
	}
	LOOM__LIST_PUSH(reg->bufts, buft);
	*out = buft;
	return LOOM_OK;
}

void *loom_buffer_type_context(loom_buffer_type_t *buft)
{
	void *context;

	if (!loom__buft_enter(buft))
		return NULL;
	context = buft->context;
	loom__call_end();
	return context;
}

const char *loom_buffer_type_name(loom_buffer_type_t *buft)
{
	const char *name;

	if (!loom__buft_enter(buft))
		return "(null)";
	name = buft->iface.get_name(buft);
	loom__call_end();
	return name ? name : "(unnamed)";
}

size_t loom_buffer_type_alignment(loom_buffer_type_t *buft)
{
	size_t a;

	if (!loom__buft_enter(buft))
		return 1;
	a = buft->iface.get_alignment(buft);
	if (!is_pow2(a)) {
		loom_log(LOOM_LOG_WARN,
			 "buffer type '%s': alignment %zu is not a power of "
			 "two; using %zu",
			 loom_buffer_type_name(buft), a, (size_t)64);
		a = 64;
	}
	loom__call_end();
	return a;
}

size_t loom_buffer_type_max_size(loom_buffer_type_t *buft)
{
	size_t (*f)(loom_buffer_type_t *);
	size_t max;

	if (!loom__buft_enter(buft))
		return 0;
	f = buft->iface.get_max_size;
	max = f ? f(buft) : SIZE_MAX;
	loom__call_end();
	return max;
}

size_t loom_buffer_type_alloc_size(loom_buffer_type_t *buft,
			    const struct loom_tensor *t)
{
	size_t nbytes, n;

	if (!t)
		return 0;
	nbytes = loom_tensor_n_bytes(t);
	if (!loom__buft_enter(buft))
		return nbytes;
	n = buft->iface.get_alloc_size ? buft->iface.get_alloc_size(buft, t)
				       : nbytes;
	loom__call_end();
	/* A plugin may pad, never shrink. */
	return n < nbytes ? nbytes : n;
}

bool loom_buffer_type_is_host(loom_buffer_type_t *buft)
{
	bool (*f)(loom_buffer_type_t *);
	bool host;

	if (!loom__buft_enter(buft))
		return false;
	f = buft->iface.is_host;
	host = f ? f(buft) : false;
	loom__call_end();
	return host;
}

loom_dev_t *loom_buffer_type_device(loom_buffer_type_t *buft)
{
	loom_dev_t *dev;

	if (!loom__buft_enter(buft))
		return NULL;
	dev = buft->dev;
	loom__call_end();
	return dev;
}

/* The buffer the plugin made for a request of size bytes, checked
 * (inside a call). */
static int alloc_buffer(loom_buffer_type_t *buft, size_t size,
			loom_buffer_t **out)
{
	loom_buffer_t *buf = NULL;
	size_t max;
	int st;

	max = loom_buffer_type_max_size(buft);
	if (size > max)
		return loom_error_set(LOOM_E_NOMEM,
				      "buffer type '%s': %zu bytes asked, at "
				      "most %zu in one buffer",
				      loom_buffer_type_name(buft), size, max);
	loom__clear_error();
	st = buft->iface.alloc_buffer(buft, size, &buf);
	if (st) {
		if (st > 0)
			st = LOOM_E_PLUGIN;
		if (!*loom_error_message())
			loom_error_set(st, "buffer type '%s': allocation of "
				       "%zu bytes failed",
				       loom_buffer_type_name(buft), size);
		return st;
	}
	if (!loom__buffer_live(buf))
		return loom_error_set(LOOM_E_PLUGIN,
				      "buffer type '%s': alloc_buffer returned "
				      "no buffer",
				      loom_buffer_type_name(buft));
	if (buf->buft != buft || buf->size < size) {
		st = loom_error_set(LOOM_E_PLUGIN,
				    "buffer type '%s': asked for %zu bytes, "
				    "got a buffer of %zu bytes",
				    loom_buffer_type_name(buft), size, buf->size);
		loom_buffer_free(buf);
		return st;
	}
	*out = buf;
	return LOOM_OK;
}

int loom_buffer_type_alloc_buffer(loom_buffer_type_t *buft, size_t size,
			   loom_buffer_t **out)
{
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_type_alloc_buffer: out is NULL");
	*out = NULL;
	if (!loom__buft_enter(buft))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_type_alloc_buffer: no buffer type");
	st = alloc_buffer(buft, size, out);
	loom__call_end();
	return st;
}

/* ------------------------------------------------------------------------
 * Buffers.
 */

int loom_buffer_new(loom_buffer_type_t *buft,
		    const struct loom_buffer_iface *iface, void *context,
		    size_t size, loom_buffer_t **out)
{
	static const struct loom__slot required[] = {
		LOOM__SLOT(struct loom_buffer_iface, get_base),
		LOOM__SLOT(struct loom_buffer_iface, set_tensor),
		LOOM__SLOT(struct loom_buffer_iface, get_tensor),
		LOOM__SLOT(struct loom_buffer_iface, clear),
	};
	static const struct loom__wrap wrap = {
		"buffer", LOOM__KIND_BUFFER, required, LOOM__N_OF(required),
		NULL,
	};
	struct loom_buffer *buf;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_new: out is NULL");
	*out = NULL;
	if (!loom__buft_live(buft))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_new: no buffer type");
	buf = calloc(1, sizeof(*buf));
	if (!buf)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	buf->buft = buft;
	buf->size = size;
	st = loom__wrap_init(buf, &buf->iface, sizeof(buf->iface), iface,
			     &buf->context, context, &wrap,
			     loom_buffer_type_name(buft));
	if (st)
		goto err_free;
	buf->base = buf->iface.get_base(buf);
	if (!buf->base && size > 0) {
		st = loom_error_set(LOOM_E_PLUGIN,
				    "buffer of type '%s': get_base returned "
				    "NULL for %zu bytes",
				    loom_buffer_type_name(buft), size);
		loom__handle_take(buf, LOOM__KIND_BUFFER);
		goto err_free;
	}
	loom__reg_ref(buft->reg, LOOM__REF_BUFFER);
	*out = buf;
	return LOOM_OK;

err_free:
	free(buf);
	return st;
}

/* The plugin frees its memory while buf is still live (its free_buffer
 * may ask for its context); then buf is taken out of the table. */
static void buffer_release(loom_buffer_t *buf)
{
	if (buf->iface.free_buffer)
		buf->iface.free_buffer(buf);
	buf->base = NULL;
	buf->size = 0;
	if (loom__handle_take(buf, LOOM__KIND_BUFFER))
		loom__reg_unref(buf->buft->reg, LOOM__REF_BUFFER);
}

void loom__buffer_release(loom_buffer_t *buf)
{
	if (loom__buffer_live(buf))
		buffer_release(buf);
}

void loom__buffer_forget(loom_buffer_t *buf)
{
	free(buf);
}

void loom_buffer_free(loom_buffer_t *buf)
{
	if (!buf)
		return;
	if (!loom__buffer_live(buf)) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_buffer_free: %p is not a live buffer "
			       "(freed already?)",
			       (void *)buf);
		return;
	}
	buffer_release(buf);
	free(buf);
}

bool loom__tensor_in_live_buffer(const struct loom_tensor *t)
{
	return t->data && loom__buffer_live(t->buffer);
}

void *loom_buffer_context(loom_buffer_t *buf)
{
	return loom__buffer_live(buf) ? buf->context : NULL;
}

size_t loom_buffer_size(loom_buffer_t *buf)
{
	return loom__buffer_live(buf) ? buf->size : 0;
}

void *loom_buffer_base(loom_buffer_t *buf)
{
	return loom__buffer_live(buf) ? buf->base : NULL;
}

loom_buffer_type_t *loom_buffer_get_type(loom_buffer_t *buf)
{
	return loom__buffer_live(buf) ? buf->buft : NULL;
}

int loom_buffer_clear(loom_buffer_t *buf, uint8_t value)
{
	if (!loom__buffer_live(buf))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_buffer_clear: no buffer");
	if (buf->size == 0)
		return LOOM_OK;
	return buf->iface.clear(buf, value);
}

/* A usage outside the enum is refused (recorded for loom_error_message()). */
void loom_buffer_set_usage(loom_buffer_t *buf, enum loom_buffer_usage usage)
{
	if ((unsigned)usage > LOOM_BUFFER_USAGE_COMPUTE) {
		loom_error_set(LOOM_E_INVAL,
			       "loom_buffer_set_usage: invalid usage %d",
			       (int)usage);
		return;
	}
	if (loom__buffer_live(buf))
		buf->usage = usage;
}

enum loom_buffer_usage loom_buffer_usage(loom_buffer_t *buf)
{
	return loom__buffer_live(buf) ? buf->usage : LOOM_BUFFER_USAGE_ANY;
}

/* ------------------------------------------------------------------------
 * Checks made before tensor data reaches a plugin.
 */

static const char *tname(const struct loom_tensor *t)
{
	return t->name[0] ? t->name : "(unnamed)";
}

/* The tensor must be placed, and its bytes must lie inside its buffer. */
static int check_placed(const struct loom_tensor *t, const char *what)
{
	loom_buffer_t *buf = t->buffer;
	uintptr_t base, data;
	size_t nbytes;

	if (!t->data || !buf)
		return loom_error_set(LOOM_E_STATE,
				      "%s: tensor '%s' is not placed in a "
				      "buffer",
				      what, tname(t));
	if (!loom__buffer_live(buf))
		return loom_error_set(LOOM_E_STATE,
				      "%s: tensor '%s' has a freed or foreign "
				      "buffer",
				      what, tname(t));
	base = (uintptr_t)buf->base;
	data = (uintptr_t)t->data;
	nbytes = loom_tensor_n_bytes(t);
	if (data < base || data - base > buf->size ||
	    nbytes > buf->size - (data - base))
		return loom_error_set(LOOM_E_RANGE,
				      "%s: tensor '%s' (%zu bytes) lies "
				      "outside its buffer (%zu bytes)",
				      what, tname(t), nbytes, buf->size);
	return LOOM_OK;
}

int loom__check_range(const struct loom_tensor *t, size_t offset,
		      size_t size, const char *what)
{
	size_t nbytes;
	int st;

	if (!t)
		return loom_error_set(LOOM_E_INVAL, "%s: tensor is NULL", what);
	st = check_placed(t, what);
	if (st)
		return st;
	nbytes = loom_tensor_n_bytes(t);
	if (offset > nbytes || size > nbytes - offset)
		return loom_error_set(LOOM_E_RANGE,
				      "%s: tensor '%s': bytes [%zu, %zu + %zu) "
				      "out of bounds (%zu bytes)",
				      what, tname(t), offset, offset, size,
				      nbytes);
	return LOOM_OK;
}

int loom__check_range_2d(const struct loom_tensor *t, size_t offset,
			 size_t size, size_t n_copies, size_t stride_tensor,
			 size_t stride_data, bool to_host, const char *what)
{
	size_t nbytes, span;
	int st;

	if (!t)
		return loom_error_set(LOOM_E_INVAL, "%s: tensor is NULL", what);
	st = check_placed(t, what);
	if (st)
		return st;
	if (n_copies == 0 || size == 0)
		return LOOM_OK;
	if (n_copies > 1 && size > stride_tensor)
		return loom_error_set(LOOM_E_INVAL,
				      "%s: tensor '%s': rows of %zu bytes "
				      "overlap (tensor stride %zu)",
				      what, tname(t), size, stride_tensor);
	if (n_copies > 1 && to_host && size > stride_data)
		return loom_error_set(LOOM_E_INVAL,
				      "%s: tensor '%s': rows of %zu bytes "
				      "overlap (data stride %zu)",
				      what, tname(t), size, stride_data);
	nbytes = loom_tensor_n_bytes(t);
	/* The last row ends at (n - 1) * stride + offset + size. */
	if (stride_tensor && n_copies - 1 > SIZE_MAX / stride_tensor)
		goto err_range;
	span = (n_copies - 1) * stride_tensor;
	if (offset > nbytes || span > nbytes - offset ||
	    size > nbytes - offset - span)
		goto err_range;
	if (stride_data && n_copies - 1 > SIZE_MAX / stride_data)
		goto err_range;
	return LOOM_OK;

err_range:
	return loom_error_set(LOOM_E_RANGE,
			      "%s: tensor '%s': %zu rows of %zu bytes from "
			      "offset %zu, stride %zu, out of bounds (%zu "
			      "bytes)",
			      what, tname(t), n_copies, size, offset,
			      stride_tensor, nbytes);
}

/* ------------------------------------------------------------------------
 * Tensor data (blocking).
 */

int loom_tensor_set(struct loom_tensor *t, const void *data, size_t offset,
		    size_t size)
{
	int st = loom__check_range(t, offset, size, "loom_tensor_set");

	if (st)
		return st;
	if (size == 0)
		return LOOM_OK;
	if (!data)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_tensor_set: data is NULL");
	return t->buffer->iface.set_tensor(t->buffer, t, data, offset, size);
}

int loom_tensor_get(const struct loom_tensor *t, void *data, size_t offset,
		    size_t size)
{
	int st = loom__check_range(t, offset, size, "loom_tensor_get");

	if (st)
		return st;
	if (size == 0)
		return LOOM_OK;
	if (!data)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_tensor_get: data is NULL");
	return t->buffer->iface.get_tensor(t->buffer, t, data, offset, size);
}

int loom_tensor_memset(struct loom_tensor *t, uint8_t value, size_t offset,
		       size_t size)
{
	loom_buffer_t *buf;
	size_t chunk, done;
	void *block;
	int st = loom__check_range(t, offset, size, "loom_tensor_memset");

	if (st || size == 0)
		return st;
	buf = t->buffer;
	if (buf->iface.memset_tensor)
		return buf->iface.memset_tensor(buf, t, value, offset, size);
	/* Default: set_tensor from a filled host block. */
	chunk = size < STAGE_MAX ? size : STAGE_MAX;
	block = malloc(chunk);
	if (!block)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	memset(block, value, chunk);
	for (done = 0; done < size && !st; done += chunk) {
		size_t n = size - done < chunk ? size - done : chunk;

		st = buf->iface.set_tensor(buf, t, block, offset + done, n);
	}
	free(block);
	return st;
}

static void *buffer_proc(loom_buffer_t *buf, enum loom__proc p)
{
	return loom__reg_proc(buf->buft->reg, p);
}

/* Both directions of a blocking 2D copy: the plugin's entry point when it
 * has one, else a loop of 1D copies.  A get only reads t. */
static int tensor_2d(struct loom_tensor *t, void *data, size_t offset,
		     size_t size, size_t n_copies, size_t stride_tensor,
		     size_t stride_data, bool get, const char *what)
{
	loom_buffer_t *buf;
	void *f;
	int st;

	st = loom__check_range_2d(t, offset, size, n_copies, stride_tensor,
				  stride_data, get, what);
	if (st || !n_copies || !size)
		return st;
	if (!data)
		return loom_error_set(LOOM_E_INVAL, "%s: data is NULL", what);
	buf = t->buffer;
	f = buffer_proc(buf, get ? LOOM__PROC_GET_TENSOR_2D
				 : LOOM__PROC_SET_TENSOR_2D);
	if (f && get)
		return ((loom_get_tensor_2d_fn)f)(buf, t, data, offset, size,
						  n_copies, stride_tensor,
						  stride_data);
	if (f)
		return ((loom_set_tensor_2d_fn)f)(buf, t, data, offset, size,
						  n_copies, stride_tensor,
						  stride_data);
	for (size_t i = 0; i < n_copies && !st; i++) {
		char *row = (char *)data + i * stride_data;
		size_t at = offset + i * stride_tensor;

		st = get ? buf->iface.get_tensor(buf, t, row, at, size)
			 : buf->iface.set_tensor(buf, t, row, at, size);
	}
	return st;
}

int loom_tensor_set_2d(struct loom_tensor *t, const void *data,
		       size_t offset, size_t size, size_t n_copies,
		       size_t stride_tensor, size_t stride_data)
{
	return tensor_2d(t, (void *)data, offset, size, n_copies,
			 stride_tensor, stride_data, false,
			 "loom_tensor_set_2d");
}

int loom_tensor_get_2d(const struct loom_tensor *t, void *data,
		       size_t offset, size_t size, size_t n_copies,
		       size_t stride_tensor, size_t stride_data)
{
	return tensor_2d((struct loom_tensor *)t, data, offset, size,
			 n_copies, stride_tensor, stride_data, true,
			 "loom_tensor_get_2d");
}

/* Copies through host memory: directly when either side is host memory,
 * else staged in blocks. */
static int copy_staged(const struct loom_tensor *src, struct loom_tensor *dst,
		       size_t n)
{
	loom_buffer_t *sb = src->buffer, *db = dst->buffer;
	size_t chunk, done;
	void *block;
	int st = LOOM_OK;

	if (loom_buffer_type_is_host(sb->buft))
		return db->iface.set_tensor(db, dst, src->data, 0, n);
	if (loom_buffer_type_is_host(db->buft))
		return sb->iface.get_tensor(sb, src, dst->data, 0, n);
	chunk = n < STAGE_MAX ? n : STAGE_MAX;
	block = malloc(chunk);
	if (!block)
		return loom_error_set(LOOM_E_NOMEM, "out of memory");
	for (done = 0; done < n && !st; done += chunk) {
		size_t k = n - done < chunk ? n - done : chunk;

		st = sb->iface.get_tensor(sb, src, block, done, k);
		if (!st)
			st = db->iface.set_tensor(db, dst, block, done, k);
	}
	free(block);
	return st;
}

int loom__check_copy(const struct loom_tensor *src,
		     const struct loom_tensor *dst, const char *what)
{
	const char *s, *d;
	size_t n;
	int st;

	if (!src || !dst)
		return loom_error_set(LOOM_E_INVAL, "%s: tensor is NULL", what);
	st = loom__check_range(src, 0, 0, what);
	if (!st)
		st = loom__check_range(dst, 0, 0, what);
	if (st)
		return st;
	n = loom_tensor_n_bytes(src);
	if (n != loom_tensor_n_bytes(dst))
		return loom_error_set(LOOM_E_INVAL,
				      "%s: '%s' has %zu bytes, '%s' %zu", what,
				      tname(src), n, tname(dst),
				      loom_tensor_n_bytes(dst));
	s = src->data;
	d = dst->data;
	if (src->buffer == dst->buffer && s != d && s < d + n && d < s + n)
		return loom_error_set(LOOM_E_INVAL,
				      "%s: '%s' and '%s' overlap in their "
				      "buffer",
				      what, tname(src), tname(dst));
	return LOOM_OK;
}

int loom_tensor_copy(const struct loom_tensor *src, struct loom_tensor *dst)
{
	size_t n;
	int st;

	st = loom__check_copy(src, dst, "loom_tensor_copy");
	if (st)
		return st;
	n = loom_tensor_n_bytes(src);
	if (n == 0 || src->data == dst->data)
		return LOOM_OK;
	if (dst->buffer->iface.copy_tensor) {
		st = dst->buffer->iface.copy_tensor(dst->buffer, src, dst);
		if (st != LOOM_E_DECLINED)
			return st;
	}
	return copy_staged(src, dst, n);
}

/* ------------------------------------------------------------------------
 * Placing tensors.
 */

static int init_tensor(loom_buffer_t *buf, struct loom_tensor *t)
{
	int (*f)(loom_buffer_t *, struct loom_tensor *);

	f = buf->iface.init_tensor;
	return f ? f(buf, t) : LOOM_OK;
}

int loom_tensor_place(struct loom_tensor *t, loom_buffer_t *buf,
		      size_t offset)
{
	size_t align, need;
	int st;

	if (!t || !loom__buffer_live(buf))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_tensor_place: tensor or buffer "
				      "is NULL");
	if (t->view_src)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_tensor_place: '%s' is a view; use "
				      "loom_tensor_init_view",
				      tname(t));
	align = loom_buffer_type_alignment(buf->buft);
	if (offset % align)
		return loom_error_set(LOOM_E_ALIGN,
				      "loom_tensor_place: offset %zu of '%s' "
				      "is not a multiple of %zu",
				      offset, tname(t), align);
	need = loom_buffer_type_alloc_size(buf->buft, t);
	if (offset > buf->size || need > buf->size - offset)
		return loom_error_set(LOOM_E_RANGE,
				      "loom_tensor_place: '%s' (%zu bytes at "
				      "%zu) does not fit in a buffer of %zu "
				      "bytes",
				      tname(t), need, offset, buf->size);
	t->data = (char *)buf->base + offset;
	t->buffer = buf;
	st = init_tensor(buf, t);
	if (st) {
		t->data = NULL;
		t->buffer = NULL;
	}
	return st;
}

int loom_tensor_init_view(struct loom_tensor *t)
{
	struct loom_tensor *src;
	loom_buffer_t *buf;
	size_t start, nbytes;
	int st;

	if (!t)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_tensor_init_view: tensor is NULL");
	src = t->view_src;
	if (!src)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_tensor_init_view: '%s' is not a "
				      "view",
				      tname(t));
	if (!src->data || !loom__buffer_live(src->buffer))
		return loom_error_set(LOOM_E_STATE,
				      "loom_tensor_init_view: source '%s' of "
				      "view '%s' is not placed",
				      tname(src), tname(t));
	buf = src->buffer;
	start = (size_t)((char *)src->data - (char *)buf->base);
	nbytes = loom_tensor_n_bytes(t);
	if ((char *)src->data < (char *)buf->base || start > buf->size ||
	    t->view_offs > buf->size - start ||
	    nbytes > buf->size - start - t->view_offs)
		return loom_error_set(LOOM_E_RANGE,
				      "loom_tensor_init_view: view '%s' (%zu "
				      "bytes at %zu) lies outside the buffer "
				      "of '%s'",
				      tname(t), nbytes, t->view_offs,
				      tname(src));
	t->data = (char *)src->data + t->view_offs;
	t->buffer = buf;
	st = init_tensor(buf, t);
	if (st) {
		t->data = NULL;
		t->buffer = NULL;
	}
	return st;
}

/* The bytes the unplaced tensors of ctx need in one buffer of buft, each
 * at align (in *total), and whether there is any (in *any). */
static int ctx_tensors_size(loom_ctx_t *ctx, loom_buffer_type_t *buft,
			    size_t align, size_t *total, bool *any)
{
	struct loom_tensor *t;

	*total = 0;
	*any = false;
	for (t = loom_ctx_first_tensor(ctx); t;
	     t = loom_ctx_next_tensor(ctx, t)) {
		size_t need;

		if (t->data || t->view_src)
			continue;
		need = loom_buffer_type_alloc_size(buft, t);
		/* A plugin's alignment may be as large as 2^63: every step
		 * of the sum is checked. */
		if (!loom__align_up(*total, align, total) ||
		    need > SIZE_MAX - *total)
			return loom_error_set(LOOM_E_NOMEM,
					      "loom_ctx_alloc_tensors: the "
					      "tensors' size overflows with "
					      "alignment %zu",
					      align);
		*total += need;
		*any = true;
	}
	return LOOM_OK;
}

/* Places the unplaced tensors of ctx in buf, as ctx_tensors_size()
 * summed them, then the views over them, in creation order. */
static int place_ctx_tensors(loom_ctx_t *ctx, loom_buffer_type_t *buft,
			     loom_buffer_t *buf, size_t align)
{
	struct loom_tensor *t;
	size_t total = 0;
	int st;

	for (t = loom_ctx_first_tensor(ctx); t;
	     t = loom_ctx_next_tensor(ctx, t)) {
		if (t->data || t->view_src)
			continue;
		loom__align_up(total, align, &total); /* fits: summed before */
		st = loom_tensor_place(t, buf, total);
		if (st)
			return st;
		total += loom_buffer_type_alloc_size(buft, t);
	}
	for (t = loom_ctx_first_tensor(ctx); t;
	     t = loom_ctx_next_tensor(ctx, t)) {
		if (t->data || !t->view_src || !t->view_src->data)
			continue;
		st = loom_tensor_init_view(t);
		if (st)
			return st;
	}
	return LOOM_OK;
}

/* The tensors of ctx placed in buf are unplaced again. */
static void unplace_ctx_tensors(loom_ctx_t *ctx, const loom_buffer_t *buf)
{
	struct loom_tensor *t;

	for (t = loom_ctx_first_tensor(ctx); t;
	     t = loom_ctx_next_tensor(ctx, t)) {
		if (t->buffer == buf) {
			t->data = NULL;
			t->buffer = NULL;
		}
	}
}

int loom_ctx_alloc_tensors(loom_ctx_t *ctx, loom_buffer_type_t *buft,
			   loom_buffer_t **out)
{
	loom_buffer_t *buf;
	size_t align, total, max;
	bool any;
	int st;

	if (!out)
		return loom_error_set(LOOM_E_INVAL,
				      "loom_ctx_alloc_tensors: out is NULL");
	*out = NULL;
	if (!ctx || !loom__buft_live(buft))
		return loom_error_set(LOOM_E_INVAL,
				      "loom_ctx_alloc_tensors: context or "
				      "buffer type is NULL");
	align = loom_buffer_type_alignment(buft);
	st = ctx_tensors_size(ctx, buft, align, &total, &any);
	if (st || !any)
		return st;
	max = loom_buffer_type_max_size(buft);
	if (total > max)
		return loom_error_set(LOOM_E_NOMEM,
				      "loom_ctx_alloc_tensors: the tensors "
				      "need %zu bytes, more than buffer type "
				      "'%s' allows in one buffer (%zu)",
				      total, loom_buffer_type_name(buft), max);
	st = loom_buffer_type_alloc_buffer(buft, total, &buf);
	if (st)
		return st;
	st = place_ctx_tensors(ctx, buft, buf, align);
	if (st) {
		unplace_ctx_tensors(ctx, buf);
		loom_buffer_free(buf);
		return st;
	}
	*out = buf;
	return LOOM_OK;
}
