/* SPDX-License-Identifier: MIT */
/* cpu-buffer.c - host memory: the buffer type each CPU device hands out
 * (64-byte aligned, plain malloc'd memory; big buffers on huge pages where
 * the kernel has them) and its buffers, plus the 2D set/get entry points
 * (which the weight buffers' interleaved matrices take through
 * cpu-weights.c).
 */
#define _GNU_SOURCE
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cpu-private.h"

/* Buffers from this size on, on a NUMA partition, are page aligned and
 * prefer the partition's node. */
#define CPU_NUMA_MIN (1u << 20)
#define CPU_PAGE 4096
/* Buffers from this size on start on a huge-page boundary and ask for
 * transparent huge pages: weights streamed row after row then miss the
 * TLB once per 2 MiB instead of once per 4 KiB. */
#define CPU_HUGE_MIN (8u << 20)
#define CPU_HUGE_PAGE (2u << 20)

void cpu_host_free(loom_buffer_t *buf)
{
	free(loom_buffer_context(buf));
}

void *cpu_host_base(loom_buffer_t *buf)
{
	return loom_buffer_context(buf);
}

/* The weight buffers' interleaved matrices go through cpu-weights.c;
 * everything else is plain memory. */
static int buf_memset_tensor(loom_buffer_t *buf, struct loom_tensor *t,
			     uint8_t value, size_t offset, size_t size)
{
	if (cpu_w_tensor(t))
		return cpu_w_memset(t, value, offset, size);
	memset((char *)t->data + offset, value, size);
	return LOOM_OK;
}

static int buf_set_tensor(loom_buffer_t *buf, struct loom_tensor *t,
			  const void *data, size_t offset, size_t size)
{
	if (cpu_w_tensor(t))
		return cpu_w_set(t, data, offset, size);
	memcpy((char *)t->data + offset, data, size);
	return LOOM_OK;
}

static int buf_get_tensor(loom_buffer_t *buf, const struct loom_tensor *t,
			  void *data, size_t offset, size_t size)
{
	if (cpu_w_tensor(t))
		return cpu_w_get(t, data, offset, size);
	memcpy(data, (const char *)t->data + offset, size);
	return LOOM_OK;
}

/* Copies from any host buffer; device memory, and the weight buffers'
 * interleaved matrices, are the core's to stage. */
static int buf_copy_tensor(loom_buffer_t *buf, const struct loom_tensor *src,
			  struct loom_tensor *dst)
{
	if (!src->buffer || !src->data ||
	    !loom_buffer_type_is_host(loom_buffer_get_type(src->buffer)) ||
	    cpu_w_tensor(dst))
		return LOOM_E_DECLINED;
	memmove(dst->data, src->data, loom_tensor_n_bytes(src));
	return LOOM_OK;
}

static int buf_clear(loom_buffer_t *buf, uint8_t value)
{
	memset(loom_buffer_context(buf), value, loom_buffer_size(buf));
	return LOOM_OK;
}

const struct loom_buffer_iface cpu_buffer_iface = {
	.size = sizeof(struct loom_buffer_iface),
	.free_buffer = cpu_host_free,
	.get_base = cpu_host_base,
	.memset_tensor = buf_memset_tensor,
	.set_tensor = buf_set_tensor,
	.get_tensor = buf_get_tensor,
	.copy_tensor = buf_copy_tensor,
	.clear = buf_clear,
};

int cpu_set_tensor_2d(loom_buffer_t *buf, struct loom_tensor *t,
		      const void *data, size_t offset, size_t size,
		      size_t n_copies, size_t stride_tensor,
		      size_t stride_data)
{
	char *d = (char *)t->data + offset;
	const char *s = data;
	size_t i;
	int err = LOOM_OK;

	if (cpu_w_tensor(t)) {
		for (i = 0; i < n_copies && !err; i++)
			err = cpu_w_set(t, s + i * stride_data,
					offset + i * stride_tensor, size);
		return err;
	}
	if (stride_tensor == size && stride_data == size) {
		memcpy(d, s, size * n_copies);
		return LOOM_OK;
	}
	for (i = 0; i < n_copies; i++)
		memcpy(d + i * stride_tensor, s + i * stride_data, size);
	return LOOM_OK;
}

int cpu_get_tensor_2d(loom_buffer_t *buf, const struct loom_tensor *t,
		      void *data, size_t offset, size_t size, size_t n_copies,
		      size_t stride_tensor, size_t stride_data)
{
	const char *s = (const char *)t->data + offset;
	char *d = data;
	size_t i;
	int err = LOOM_OK;

	if (cpu_w_tensor(t)) {
		for (i = 0; i < n_copies && !err; i++)
			err = cpu_w_get(t, d + i * stride_data,
					offset + i * stride_tensor, size);
		return err;
	}
	if (stride_tensor == size && stride_data == size) {
		memcpy(d, s, size * n_copies);
		return LOOM_OK;
	}
	for (i = 0; i < n_copies; i++)
		memcpy(d + i * stride_data, s + i * stride_tensor, size);
	return LOOM_OK;
}

static const char *buft_get_name(loom_buffer_type_t *buft)
{
	struct cpu_device *cd = loom_buffer_type_context(buft);

	return cd->name;
}

/* Asks the kernel to place the pages of [mem, mem + size) on node when
 * first touched.  Failure (no NUMA support, a cpuset) costs only
 * locality. */
static void prefer_node(void *mem, size_t size, int node)
{
	unsigned long mask[4] = { 0 };

	if (node < 0 || node >= (int)(8 * sizeof(mask)))
		return;
	mask[node / (8 * sizeof(long))] = 1ul << (node % (8 * sizeof(long)));
	if (syscall(SYS_mbind, mem, size, MPOL_PREFERRED, mask,
		    8 * sizeof(mask) + 1, 0))
		loom_log(LOOM_LOG_DEBUG, "cpu: cannot bind %zu bytes to "
			 "NUMA node %d", size, node);
}

int cpu_host_alloc(struct cpu_device *cd, loom_buffer_type_t *buft,
		   const struct loom_buffer_iface *iface, size_t size,
		   loom_buffer_t **out)
{
	size_t padded, align;
	void *mem;
	int err;

	/* The alignment the size asks for: huge pages for big buffers, whole
	 * pages for the NUMA binding, else a cache line. */
	if (size >= CPU_HUGE_MIN)
		align = CPU_HUGE_PAGE;
	else if (cd->numa_node >= 0 && size >= CPU_NUMA_MIN)
		align = CPU_PAGE;
	else
		align = CPU_BUFFER_ALIGN;
	if (size > SIZE_MAX - align)
		return loom_error_set(LOOM_E_NOMEM,
				      "cpu: cannot allocate %zu bytes", size);
	/* Zero bytes still get a real, aligned address. */
	padded = (size + align - 1) & ~(align - 1);
	if (!padded)
		padded = align;
	mem = aligned_alloc(align, padded);
	if (!mem)
		return loom_error_set(LOOM_E_NOMEM,
				      "cpu: cannot allocate %zu bytes", size);
	/* Only a hint: without huge pages the buffer still works. */
	if (align == CPU_HUGE_PAGE && madvise(mem, padded, MADV_HUGEPAGE))
		loom_log(LOOM_LOG_DEBUG, "cpu: no huge pages for %zu bytes",
			 padded);
	if (align >= CPU_PAGE && cd->numa_node >= 0)
		prefer_node(mem, padded, cd->numa_node);
	err = loom_buffer_new(buft, iface, mem, size, out);
	if (err)
		free(mem);
	return err;
}

static int buft_alloc_buffer(loom_buffer_type_t *buft, size_t size,
			     loom_buffer_t **out)
{
	return cpu_host_alloc(loom_buffer_type_context(buft), buft,
			      &cpu_buffer_iface, size, out);
}

size_t cpu_buft_get_alignment(loom_buffer_type_t *buft)
{
	return CPU_BUFFER_ALIGN;
}

static bool buft_is_host(loom_buffer_type_t *buft)
{
	return true;
}

static const struct loom_buffer_type_iface cpu_buft_iface = {
	.size = sizeof(struct loom_buffer_type_iface),
	.get_name = buft_get_name,
	.alloc_buffer = buft_alloc_buffer,
	.get_alignment = cpu_buft_get_alignment,
	.is_host = buft_is_host,
};

int cpu_buft_create(struct cpu_reg *cr, struct cpu_device *cd)
{
	return loom_buffer_type_new(cr->reg, cd->dev, &cpu_buft_iface, cd,
			     &cd->buft);
}
