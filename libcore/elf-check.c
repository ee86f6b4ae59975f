/* SPDX-License-Identifier: MIT */
/* elf-check.c - reads a plugin file's ELF header and program and section
 * header tables before dlopen maps it, and refuses what the dynamic loader
 * would crash on or misreport.  Opening the file is loader.c's job. */
#include "config.h"

#include <elf.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "backend-private.h"

/* This process's machine; 0 where it is not listed (not checked then). */
#if defined(__x86_64__)
#define NATIVE_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define NATIVE_MACHINE EM_AARCH64
#elif defined(__i386__)
#define NATIVE_MACHINE EM_386
#elif defined(__arm__)
#define NATIVE_MACHINE EM_ARM
#elif defined(__riscv)
#define NATIVE_MACHINE 243
#elif defined(__powerpc64__)
#define NATIVE_MACHINE EM_PPC64
#elif defined(__powerpc__)
#define NATIVE_MACHINE EM_PPC
#elif defined(__s390__)
#define NATIVE_MACHINE EM_S390
#elif defined(__loongarch__)
#define NATIVE_MACHINE 258
#else
#define NATIVE_MACHINE 0
#endif

#define NATIVE_CLASS (sizeof(void *) == 8 ? ELFCLASS64 : ELFCLASS32)
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define NATIVE_DATA ELFDATA2MSB
#else
#define NATIVE_DATA ELFDATA2LSB
#endif

/* Offset of e_machine: after e_ident and e_type, in either class. */
#define MACHINE_OFFSET (EI_NIDENT + 2)

static const struct {
	unsigned machine;
	const char *name;
} machine_names[] = {
	{ EM_386, "i386" },       { EM_X86_64, "x86-64" },
	{ EM_ARM, "arm" },        { EM_AARCH64, "aarch64" },
	{ 243, "riscv" },         { EM_PPC, "ppc" },
	{ EM_PPC64, "ppc64" },    { EM_S390, "s390" },
	{ EM_MIPS, "mips" },      { EM_SPARCV9, "sparc64" },
	{ EM_IA_64, "ia64" },     { 258, "loongarch" },
	{ 190, "cuda" },          { 224, "amdgpu" },
};

/* Writes "aarch64 (64-bit, little-endian)" into buf. */
static void describe(char *buf, size_t n, unsigned machine, unsigned cls,
		     unsigned data)
{
	const char *name = NULL;
	char mbuf[24], cbuf[24], dbuf[24];

	for (size_t i = 0; i < LOOM__N_OF(machine_names); i++)
		if (machine_names[i].machine == machine)
			name = machine_names[i].name;
	if (!name) {
		snprintf(mbuf, sizeof(mbuf), "machine %u", machine);
		name = mbuf;
	}
	if (cls == ELFCLASS32 || cls == ELFCLASS64)
		snprintf(cbuf, sizeof(cbuf), "%d-bit",
			 cls == ELFCLASS32 ? 32 : 64);
	else
		snprintf(cbuf, sizeof(cbuf), "class %u", cls);
	if (data == ELFDATA2LSB || data == ELFDATA2MSB)
		snprintf(dbuf, sizeof(dbuf), "%s-endian",
			 data == ELFDATA2LSB ? "little" : "big");
	else
		snprintf(dbuf, sizeof(dbuf), "byte order %u", data);
	snprintf(buf, n, "%s (%s, %s)", name, cbuf, dbuf);
}

static int refuse(char *why, size_t n, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int refuse(char *why, size_t n, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return LOOM_E_PLUGIN;
}

/* True when a table of count entries of entsize bytes at off lies within
 * a file of size bytes; never overflows. */
static bool within(uint64_t off, uint64_t count, uint64_t entsize,
		   uint64_t size)
{
	if (off > size)
		return false;
	if (entsize && count > (size - off) / entsize)
		return false;
	return true;
}

int loom__elf_check(loom__elf_read_fn read, void *ctx, uint64_t size,
		    char *why, size_t n)
{
	unsigned char ident[MACHINE_OFFSET + 2];
	ElfW(Ehdr) eh;
	unsigned machine;
	uint64_t shnum;
	bool have_load = false;

	if (size < SELFMAG || !read(ctx, 0, ident, SELFMAG) ||
	    memcmp(ident, ELFMAG, SELFMAG) != 0)
		return refuse(why, n, "not an ELF file");
	if (size < sizeof(ident))
		return refuse(why, n,
			      "truncated: the ELF header needs %zu bytes, "
			      "the file has %llu",
			      sizeof(eh), (unsigned long long)size);
	if (!read(ctx, 0, ident, sizeof(ident)))
		return refuse(why, n, "cannot read the ELF header");
	machine = ident[EI_DATA] == ELFDATA2MSB ?
			  (unsigned)ident[MACHINE_OFFSET] << 8 |
				  ident[MACHINE_OFFSET + 1] :
			  (unsigned)ident[MACHINE_OFFSET + 1] << 8 |
				  ident[MACHINE_OFFSET];
	if (ident[EI_CLASS] != NATIVE_CLASS || ident[EI_DATA] != NATIVE_DATA ||
	    (NATIVE_MACHINE && machine != NATIVE_MACHINE)) {
		char file[80], self[80];

		describe(file, sizeof(file), machine, ident[EI_CLASS],
			 ident[EI_DATA]);
		describe(self, sizeof(self),
			 NATIVE_MACHINE ? NATIVE_MACHINE : machine,
			 NATIVE_CLASS, NATIVE_DATA);
		return refuse(why, n, "wrong architecture: %s; libloom is %s",
			      file, self);
	}
	if (size < sizeof(eh))
		return refuse(why, n,
			      "truncated: the ELF header needs %zu bytes, "
			      "the file has %llu",
			      sizeof(eh), (unsigned long long)size);
	if (!read(ctx, 0, &eh, sizeof(eh)))
		return refuse(why, n, "cannot read the ELF header");
	if (eh.e_type != ET_DYN)
		return refuse(why, n, "not a shared library (ELF type %u)",
			      (unsigned)eh.e_type);

	/* Program headers: the table, then every segment's file bytes. */
	if (eh.e_phnum == 0 || eh.e_phnum == PN_XNUM ||
	    eh.e_phentsize != sizeof(ElfW(Phdr)))
		return refuse(why, n,
			      "malformed: %u program headers of %u bytes",
			      (unsigned)eh.e_phnum,
			      (unsigned)eh.e_phentsize);
	if (!within(eh.e_phoff, eh.e_phnum, eh.e_phentsize, size))
		return refuse(why, n,
			      "truncated: program headers at 0x%llx end past "
			      "the end of the file (%llu bytes)",
			      (unsigned long long)eh.e_phoff,
			      (unsigned long long)size);
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		ElfW(Phdr) ph;

		if (!read(ctx, eh.e_phoff + (uint64_t)i * sizeof(ph), &ph,
			  sizeof(ph)))
			return refuse(why, n, "cannot read program header %u",
				      i);
		if (ph.p_type == PT_LOAD)
			have_load = true;
		if (ph.p_filesz && !within(ph.p_offset, 1, ph.p_filesz, size))
			return refuse(why, n,
				      "truncated: segment at 0x%llx "
				      "(0x%llx bytes) ends past the end of "
				      "the file (%llu bytes)",
				      (unsigned long long)ph.p_offset,
				      (unsigned long long)ph.p_filesz,
				      (unsigned long long)size);
	}
	if (!have_load)
		return refuse(why, n, "malformed: no loadable segment");

	/* Section headers: dlopen does not read them, but a table cut short
	 * says the file is, too.  A count of 0 with a table means the count
	 * is in the first entry; that entry must be there. */
	if (eh.e_shoff == 0)
		return LOOM_OK;
	if (eh.e_shentsize != sizeof(ElfW(Shdr)))
		return refuse(why, n, "malformed: section headers of %u bytes",
			      (unsigned)eh.e_shentsize);
	shnum = eh.e_shnum ? eh.e_shnum : 1;
	if (!within(eh.e_shoff, shnum, eh.e_shentsize, size))
		return refuse(why, n,
			      "truncated: section headers at 0x%llx end past "
			      "the end of the file (%llu bytes)",
			      (unsigned long long)eh.e_shoff,
			      (unsigned long long)size);
	return LOOM_OK;
}
