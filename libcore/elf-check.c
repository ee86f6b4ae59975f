/* SPDX-License-Identifier: MIT */
/* elf-check.c - reads a plugin file's ELF header, program and section
 * header tables and dynamic section before dlopen maps it, and refuses
 * what the dynamic loader would crash on or misreport.  Relocations and
 * code are not examined; opening the file is loader.c's job. */
#include "config.h"

#include <elf.h>
#include <link.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

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

/* The file being checked: how to read it, its size and ELF header. */
struct image {
	loom__elf_read_fn read;
	void *ctx;
	uint64_t size;
	ElfW(Ehdr) eh;
};

static bool read_phdr(const struct image *im, unsigned i, ElfW(Phdr) *ph)
{
	return im->read(im->ctx, im->eh.e_phoff + (uint64_t)i * sizeof(*ph),
			ph, sizeof(*ph));
}

static const char *segment_name(uint32_t type)
{
	switch (type) {
	case PT_LOAD: return "PT_LOAD";
	case PT_DYNAMIC: return "PT_DYNAMIC";
	case PT_NOTE: return "PT_NOTE";
	case PT_PHDR: return "PT_PHDR";
	case PT_TLS: return "PT_TLS";
	case PT_GNU_EH_FRAME: return "PT_GNU_EH_FRAME";
	case PT_GNU_RELRO: return "PT_GNU_RELRO";
	case PT_GNU_PROPERTY: return "PT_GNU_PROPERTY";
	default: return "segment";
	}
}

/* Which part of a loadable segment in_load looks in: its bytes from the
 * file, its memory, or its memory to the end of its last page. */
enum part { FILE_BYTES, MEMORY, PAGES };

/* True when [addr, addr + len) lies inside that part of one loadable
 * segment (with FILE_BYTES, their file offset into *off).  Program
 * headers that cannot be read count as no segment. */
static bool in_load(const struct image *im, uint64_t addr, uint64_t len,
		    enum part part, uint64_t *off)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	for (unsigned i = 0; i < im->eh.e_phnum; i++) {
		ElfW(Phdr) ph;
		uint64_t span;

		if (!read_phdr(im, i, &ph) || ph.p_type != PT_LOAD)
			continue;
		span = part == FILE_BYTES ? ph.p_filesz : ph.p_memsz;
		/* check_load has seen that this does not wrap. */
		if (part == PAGES && page && (ph.p_vaddr + span) % page)
			span += page - (ph.p_vaddr + span) % page;
		if (addr < ph.p_vaddr || addr - ph.p_vaddr > span ||
		    len > span - (addr - ph.p_vaddr))
			continue;
		if (off)
			*off = ph.p_offset + (addr - ph.p_vaddr);
		return true;
	}
	return false;
}

static bool power_of_two(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* A loadable segment as dlopen maps it: no more bytes from the file
 * than it has memory for (the rest of its last page is zeroed), an
 * alignment that is a power of two and a multiple of the page, the
 * address and offset alike modulo it (mmap maps whole pages), no
 * wrap-around, and after the segment before it (*end: where that one
 * ends). */
static int check_load(unsigned i, const ElfW(Phdr) *ph, uint64_t *end,
		      char *why, size_t n)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);

	if (ph->p_memsz < ph->p_filesz)
		return refuse(why, n, "malformed: segment %u (PT_LOAD) holds "
			      "0x%llx bytes of the file in 0x%llx bytes of "
			      "memory", i, (unsigned long long)ph->p_filesz,
			      (unsigned long long)ph->p_memsz);
	if (ph->p_align > 1 && (!power_of_two(ph->p_align) ||
				(page && ph->p_align % page)))
		return refuse(why, n, "malformed: segment %u (PT_LOAD) is "
			      "aligned to 0x%llx, not a power of two that "
			      "is a multiple of the page (0x%llx)", i,
			      (unsigned long long)ph->p_align,
			      (unsigned long long)page);
	if (ph->p_align > 1 && (ph->p_vaddr - ph->p_offset) % ph->p_align)
		return refuse(why, n, "malformed: segment %u (PT_LOAD) at "
			      "address 0x%llx and file offset 0x%llx: they "
			      "differ modulo its alignment 0x%llx", i,
			      (unsigned long long)ph->p_vaddr,
			      (unsigned long long)ph->p_offset,
			      (unsigned long long)ph->p_align);
	if (ph->p_memsz > UINT64_MAX - ph->p_vaddr)
		return refuse(why, n, "malformed: segment %u (PT_LOAD) at "
			      "0x%llx of 0x%llx bytes wraps around", i,
			      (unsigned long long)ph->p_vaddr,
			      (unsigned long long)ph->p_memsz);
	if (ph->p_vaddr < *end)
		return refuse(why, n, "malformed: segment %u (PT_LOAD) at "
			      "0x%llx starts before the loadable segment "
			      "before it ends (0x%llx)", i,
			      (unsigned long long)ph->p_vaddr,
			      (unsigned long long)*end);
	*end = ph->p_vaddr + ph->p_memsz;
	return LOOM_OK;
}

/* The segments dlopen or the process reads in memory, where they were
 * loaded (the dynamic section, notes, the TLS image, the program headers,
 * the unwind table, what turns read-only): each inside one loadable
 * segment, its file bytes inside that segment's. */
static int check_inside(const struct image *im, unsigned i,
			const ElfW(Phdr) *ph, char *why, size_t n)
{
	const char *name = segment_name(ph->p_type);

	switch (ph->p_type) {
	case PT_DYNAMIC: case PT_NOTE: case PT_PHDR: case PT_TLS:
	case PT_GNU_EH_FRAME: case PT_GNU_RELRO: case PT_GNU_PROPERTY:
		break;
	default:
		return LOOM_OK;
	}
	if (ph->p_type == PT_TLS && ph->p_memsz < ph->p_filesz)
		return refuse(why, n, "malformed: segment %u (PT_TLS) holds "
			      "0x%llx bytes of the file in 0x%llx bytes of "
			      "memory", i, (unsigned long long)ph->p_filesz,
			      (unsigned long long)ph->p_memsz);
	if (ph->p_type == PT_TLS && ph->p_align > 1 &&
	    !power_of_two(ph->p_align))
		return refuse(why, n, "malformed: segment %u (PT_TLS) is "
			      "aligned to 0x%llx, not a power of two", i,
			      (unsigned long long)ph->p_align);
	/* dlopen makes the pages of PT_GNU_RELRO read-only, whatever they
	 * hold: linkers round its end up to the page. */
	if (ph->p_type == PT_GNU_RELRO ?
		    !in_load(im, ph->p_vaddr, ph->p_memsz, PAGES, NULL) :
		    !in_load(im, ph->p_vaddr, ph->p_filesz, FILE_BYTES,
			     NULL) ||
			    (ph->p_type != PT_TLS &&
			     !in_load(im, ph->p_vaddr, ph->p_memsz, MEMORY,
				      NULL)))
		return refuse(why, n, "malformed: segment %u (%s) at 0x%llx "
			      "(0x%llx bytes) lies outside the loadable "
			      "segments", i, name,
			      (unsigned long long)ph->p_vaddr,
			      (unsigned long long)ph->p_memsz);
	return LOOM_OK;
}

/* Where a dynamic entry's value is kept: standard tags by number, then
 * the GNU ones the check reads. */
enum { D_GNU_HASH = DT_NUM, D_VERSYM, D_VERDEF, D_VERNEED, D_COUNT };

static int dyn_slot(int64_t tag)
{
	switch (tag) {
	case DT_GNU_HASH: return D_GNU_HASH;
	case DT_VERSYM: return D_VERSYM;
	case DT_VERDEF: return D_VERDEF;
	case DT_VERNEED: return D_VERNEED;
	default: return tag >= 0 && tag < DT_NUM ? (int)tag : -1;
	}
}

/* Entries that hold an address dlopen reads or runs, with the entry
 * that gives their size in bytes (0: at least one byte) and the size of
 * one element the size must be a multiple of (0: any). */
static const struct {
	int slot, size_slot;
	size_t ent;
	const char *name;
} dyn_addrs[] = {
	{ DT_STRTAB, DT_STRSZ, 0, "DT_STRTAB" },
	{ DT_SYMTAB, 0, 0, "DT_SYMTAB" },
	{ DT_HASH, 0, 0, "DT_HASH" },
	{ D_GNU_HASH, 0, 0, "DT_GNU_HASH" },
	{ DT_RELA, DT_RELASZ, sizeof(ElfW(Rela)), "DT_RELA" },
	{ DT_REL, DT_RELSZ, sizeof(ElfW(Rel)), "DT_REL" },
	{ DT_RELR, DT_RELRSZ, sizeof(ElfW(Relr)), "DT_RELR" },
	{ DT_JMPREL, DT_PLTRELSZ, 0, "DT_JMPREL" },
	{ DT_PLTGOT, 0, 0, "DT_PLTGOT" },
	{ DT_INIT, 0, 0, "DT_INIT" },
	{ DT_FINI, 0, 0, "DT_FINI" },
	{ DT_INIT_ARRAY, DT_INIT_ARRAYSZ, sizeof(void *), "DT_INIT_ARRAY" },
	{ DT_FINI_ARRAY, DT_FINI_ARRAYSZ, sizeof(void *), "DT_FINI_ARRAY" },
	{ D_VERSYM, 0, 0, "DT_VERSYM" },
	{ D_VERDEF, 0, 0, "DT_VERDEF" },
	{ D_VERNEED, 0, 0, "DT_VERNEED" },
};

/* Entry sizes dlopen asserts on (an assertion ends the process). */
static const struct {
	int slot, ent_slot;
	size_t ent;
	const char *name;
} dyn_ents[] = {
	{ DT_RELA, DT_RELAENT, sizeof(ElfW(Rela)), "DT_RELAENT" },
	{ DT_REL, DT_RELENT, sizeof(ElfW(Rel)), "DT_RELENT" },
	{ DT_RELR, DT_RELRENT, sizeof(ElfW(Relr)), "DT_RELRENT" },
	{ DT_SYMTAB, DT_SYMENT, sizeof(ElfW(Sym)), "DT_SYMENT" },
};

/* Entries that name a string of the string table. */
static const struct {
	int64_t tag;
	const char *name;
} dyn_strings[] = {
	{ DT_NEEDED, "DT_NEEDED" },   { DT_SONAME, "DT_SONAME" },
	{ DT_RPATH, "DT_RPATH" },     { DT_RUNPATH, "DT_RUNPATH" },
	{ DT_AUXILIARY, "DT_AUXILIARY" }, { DT_FILTER, "DT_FILTER" },
};

/* The values of the dynamic entries the checks read, by slot, and
 * where the entries lie in the file. */
struct dyn_vals {
	uint64_t val[D_COUNT];
	bool has[D_COUNT];
	uint64_t off, count;
};

/* Reads the dynamic section's entries into dv: whole entries, inside a
 * loadable segment, ending in DT_NULL, with the tables a symbol lookup
 * needs. */
static int read_dynamic(const struct image *im, const ElfW(Phdr) *dyn,
			struct dyn_vals *dv, char *why, size_t n)
{
	bool ended = false;

	if (dyn->p_filesz < sizeof(ElfW(Dyn)) ||
	    dyn->p_filesz % sizeof(ElfW(Dyn)))
		return refuse(why, n, "malformed: the dynamic section is "
			      "0x%llx bytes, not whole entries of %zu",
			      (unsigned long long)dyn->p_filesz,
			      sizeof(ElfW(Dyn)));
	/* Where the loaded segment puts it: what dlopen reads. */
	if (!in_load(im, dyn->p_vaddr, dyn->p_filesz, FILE_BYTES, &dv->off))
		return refuse(why, n, "malformed: the dynamic section lies "
			      "outside the loadable segments");
	dv->count = dyn->p_filesz / sizeof(ElfW(Dyn));
	for (uint64_t k = 0; k < dv->count && !ended; k++) {
		ElfW(Dyn) d;
		int slot;

		if (!im->read(im->ctx, dv->off + k * sizeof(d), &d, sizeof(d)))
			return refuse(why, n, "cannot read dynamic entry %llu",
				      (unsigned long long)k);
		ended = d.d_tag == DT_NULL;
		slot = dyn_slot(d.d_tag);
		if (slot >= 0) {
			dv->has[slot] = true;
			dv->val[slot] = d.d_un.d_val;
		}
	}
	if (!ended)
		return refuse(why, n, "malformed: the dynamic section has no "
			      "DT_NULL at its end");
	if (!dv->has[DT_STRTAB] || !dv->has[DT_STRSZ] || !dv->has[DT_SYMTAB])
		return refuse(why, n, "malformed: the dynamic section has no "
			      "%s", !dv->has[DT_STRTAB] ? "DT_STRTAB" :
			      !dv->has[DT_STRSZ] ? "DT_STRSZ" : "DT_SYMTAB");
	return LOOM_OK;
}

/* The entries that name strings name them inside the string table (its
 * size is known once every entry is read: any entry gives it). */
static int check_dyn_names(const struct image *im,
			   const struct dyn_vals *dv, char *why, size_t n)
{
	for (uint64_t k = 0; k < dv->count; k++) {
		ElfW(Dyn) d;

		if (!im->read(im->ctx, dv->off + k * sizeof(d), &d,
			      sizeof(d)) ||
		    d.d_tag == DT_NULL)
			break;
		for (size_t j = 0; j < LOOM__N_OF(dyn_strings); j++)
			if (d.d_tag == dyn_strings[j].tag &&
			    d.d_un.d_val >= dv->val[DT_STRSZ])
				return refuse(why, n, "malformed: %s names the "
					      "string at %llu, past the "
					      "string table's %llu bytes",
					      dyn_strings[j].name,
					      (unsigned long long)d.d_un.d_val,
					      (unsigned long long)
						      dv->val[DT_STRSZ]);
	}
	return LOOM_OK;
}

/* The tables the entries point to lie inside loadable segments, with
 * their sizes given and whole entries. */
static int check_dyn_addrs(const struct image *im,
			   const struct dyn_vals *dv, char *why, size_t n)
{
	for (size_t j = 0; j < LOOM__N_OF(dyn_addrs); j++) {
		int s = dyn_addrs[j].slot, z = dyn_addrs[j].size_slot;
		uint64_t len = z ? dv->val[z] : 1;

		if (!dv->has[s])
			continue;
		if (z && !dv->has[z])
			return refuse(why, n, "malformed: %s without its size",
				      dyn_addrs[j].name);
		if (dyn_addrs[j].ent && len % dyn_addrs[j].ent)
			return refuse(why, n, "malformed: %s's size %llu is "
				      "not whole entries of %zu",
				      dyn_addrs[j].name,
				      (unsigned long long)len,
				      dyn_addrs[j].ent);
		if (!in_load(im, dv->val[s], len ? len : 1,
			     s == DT_STRTAB ? FILE_BYTES : MEMORY, NULL))
			return refuse(why, n, "malformed: %s at 0x%llx "
				      "(%llu bytes) lies outside the loadable "
				      "segments", dyn_addrs[j].name,
				      (unsigned long long)dv->val[s],
				      (unsigned long long)len);
	}
	return LOOM_OK;
}

/* The entry sizes dlopen asserts on are the ones it expects, and the
 * PLT's relocations are of a kind it knows. */
static int check_dyn_ents(const struct dyn_vals *dv, char *why, size_t n)
{
	for (size_t j = 0; j < LOOM__N_OF(dyn_ents); j++)
		if (dv->has[dyn_ents[j].slot] &&
		    (dyn_ents[j].slot != DT_SYMTAB ||
		     dv->has[dyn_ents[j].ent_slot]) &&
		    dv->val[dyn_ents[j].ent_slot] != dyn_ents[j].ent)
			return refuse(why, n, "malformed: %s is %llu, not %zu",
				      dyn_ents[j].name,
				      (unsigned long long)
					      dv->val[dyn_ents[j].ent_slot],
				      dyn_ents[j].ent);
	if (dv->has[DT_PLTREL] && dv->val[DT_PLTREL] != DT_REL &&
	    dv->val[DT_PLTREL] != DT_RELA)
		return refuse(why, n, "malformed: DT_PLTREL is %llu, neither "
			      "DT_REL nor DT_RELA",
			      (unsigned long long)dv->val[DT_PLTREL]);
	return LOOM_OK;
}

/* Names end inside the string table when its last byte ends one. */
static int check_strtab_end(const struct image *im,
			    const struct dyn_vals *dv, char *why, size_t n)
{
	uint64_t strsz = dv->val[DT_STRSZ], stroff;
	unsigned char last;

	in_load(im, dv->val[DT_STRTAB], strsz ? strsz : 1, FILE_BYTES,
		&stroff);
	if (!strsz || !im->read(im->ctx, stroff + strsz - 1, &last, 1) ||
	    last != '\0')
		return refuse(why, n, "malformed: the string table (%llu "
			      "bytes) does not end with a NUL",
			      (unsigned long long)strsz);
	return LOOM_OK;
}

/* The dynamic section dlopen reads through the pointers it holds: one
 * ending in DT_NULL, the tables it points to inside loadable segments
 * with sizes that are whole entries, the string table's names ending
 * inside it, and the entry sizes dlopen asserts on as it expects. */
static int check_dynamic(const struct image *im, const ElfW(Phdr) *dyn,
			 char *why, size_t n)
{
	struct dyn_vals dv;
	int st;

	memset(&dv, 0, sizeof(dv));
	st = read_dynamic(im, dyn, &dv, why, n);
	if (!st)
		st = check_dyn_names(im, &dv, why, n);
	if (!st)
		st = check_dyn_addrs(im, &dv, why, n);
	if (!st)
		st = check_dyn_ents(&dv, why, n);
	if (!st)
		st = check_strtab_end(im, &dv, why, n);
	return st;
}

/* The ELF identification: an ELF file of libloom's class, byte order and
 * machine. */
static int check_ident(loom__elf_read_fn read, void *ctx, uint64_t size,
		       char *why, size_t n)
{
	unsigned char ident[MACHINE_OFFSET + 2];
	unsigned machine;
	char file[80], self[80];

	if (size < SELFMAG || !read(ctx, 0, ident, SELFMAG) ||
	    memcmp(ident, ELFMAG, SELFMAG) != 0)
		return refuse(why, n, "not an ELF file");
	if (size < sizeof(ident))
		return refuse(why, n,
			      "truncated: the ELF header needs %zu bytes, "
			      "the file has %llu",
			      sizeof(ElfW(Ehdr)), (unsigned long long)size);
	if (!read(ctx, 0, ident, sizeof(ident)))
		return refuse(why, n, "cannot read the ELF header");
	machine = ident[EI_DATA] == ELFDATA2MSB ?
			  (unsigned)ident[MACHINE_OFFSET] << 8 |
				  ident[MACHINE_OFFSET + 1] :
			  (unsigned)ident[MACHINE_OFFSET + 1] << 8 |
				  ident[MACHINE_OFFSET];
	if (ident[EI_CLASS] == NATIVE_CLASS && ident[EI_DATA] == NATIVE_DATA &&
	    (!NATIVE_MACHINE || machine == NATIVE_MACHINE))
		return LOOM_OK;
	describe(file, sizeof(file), machine, ident[EI_CLASS], ident[EI_DATA]);
	describe(self, sizeof(self), NATIVE_MACHINE ? NATIVE_MACHINE : machine,
		 NATIVE_CLASS, NATIVE_DATA);
	return refuse(why, n, "wrong architecture: %s; libloom is %s", file,
		      self);
}

/* The ELF header of a shared library, in im->eh. */
static int read_ehdr(struct image *im, char *why, size_t n)
{
	ElfW(Ehdr) *eh = &im->eh;

	if (im->size < sizeof(*eh))
		return refuse(why, n,
			      "truncated: the ELF header needs %zu bytes, "
			      "the file has %llu",
			      sizeof(*eh), (unsigned long long)im->size);
	if (!im->read(im->ctx, 0, eh, sizeof(*eh)))
		return refuse(why, n, "cannot read the ELF header");
	if (eh->e_type != ET_DYN)
		return refuse(why, n, "not a shared library (ELF type %u)",
			      (unsigned)eh->e_type);
	return LOOM_OK;
}

/* Section headers: dlopen does not read them, but a table cut short
 * says the file is, too.  A count of 0 with a table means the count
 * is in the first entry; that entry must be there.  Then what the
 * program headers lacked (checked after, as ever: the messages of a file
 * wrong twice stay the same). */
static int check_shdrs(const struct image *im, bool have_load,
		       bool have_dyn, char *why, size_t n)
{
	const ElfW(Ehdr) *eh = &im->eh;
	uint64_t shnum = eh->e_shnum ? eh->e_shnum : 1;

	if (eh->e_shoff != 0 && eh->e_shentsize != sizeof(ElfW(Shdr)))
		return refuse(why, n, "malformed: section headers of %u bytes",
			      (unsigned)eh->e_shentsize);
	if (eh->e_shoff != 0 &&
	    !within(eh->e_shoff, shnum, eh->e_shentsize, im->size))
		return refuse(why, n,
			      "truncated: section headers at 0x%llx end past "
			      "the end of the file (%llu bytes)",
			      (unsigned long long)eh->e_shoff,
			      (unsigned long long)im->size);
	if (!have_load)
		return refuse(why, n, "malformed: no loadable segment");
	if (!have_dyn)
		return refuse(why, n, "malformed: no dynamic section");
	return LOOM_OK;
}

/* Program headers: the table, then every segment's file bytes, inside
 * the file; at least one loadable segment, and the dynamic one (in
 * *dyn). */
static int check_phdrs(const struct image *im, ElfW(Phdr) *dyn, char *why,
		       size_t n)
{
	const ElfW(Ehdr) *eh = &im->eh;
	bool have_load = false, have_dyn = false;

	if (eh->e_phnum == 0 || eh->e_phnum == PN_XNUM ||
	    eh->e_phentsize != sizeof(ElfW(Phdr)))
		return refuse(why, n,
			      "malformed: %u program headers of %u bytes",
			      (unsigned)eh->e_phnum,
			      (unsigned)eh->e_phentsize);
	if (!within(eh->e_phoff, eh->e_phnum, eh->e_phentsize, im->size))
		return refuse(why, n,
			      "truncated: program headers at 0x%llx end past "
			      "the end of the file (%llu bytes)",
			      (unsigned long long)eh->e_phoff,
			      (unsigned long long)im->size);
	for (unsigned i = 0; i < eh->e_phnum; i++) {
		ElfW(Phdr) ph;

		if (!im->read(im->ctx, eh->e_phoff + (uint64_t)i * sizeof(ph),
			      &ph, sizeof(ph)))
			return refuse(why, n, "cannot read program header %u",
				      i);
		if (ph.p_filesz &&
		    !within(ph.p_offset, 1, ph.p_filesz, im->size))
			return refuse(why, n,
				      "truncated: segment at 0x%llx "
				      "(0x%llx bytes) ends past the end of "
				      "the file (%llu bytes)",
				      (unsigned long long)ph.p_offset,
				      (unsigned long long)ph.p_filesz,
				      (unsigned long long)im->size);
		if (ph.p_type == PT_LOAD) {
			have_load = true;
		} else if (ph.p_type == PT_DYNAMIC) {
			*dyn = ph;
			have_dyn = true;
		}
	}
	return check_shdrs(im, have_load, have_dyn, why, n);
}

/* What dlopen trusts in the program headers: the loadable segments
 * first (in order, aligned), then every segment inside them. */
static int check_segments(const struct image *im, char *why, size_t n)
{
	uint64_t load_end = 0;
	int st;

	for (unsigned pass = 0; pass < 2; pass++) {
		for (unsigned i = 0; i < im->eh.e_phnum; i++) {
			ElfW(Phdr) ph;

			if (!read_phdr(im, i, &ph))
				return refuse(why, n, "cannot read program "
					      "header %u", i);
			if (pass == 0 && ph.p_type == PT_LOAD)
				st = check_load(i, &ph, &load_end, why, n);
			else if (pass == 1)
				st = check_inside(im, i, &ph, why, n);
			else
				st = LOOM_OK;
			if (st)
				return st;
		}
	}
	return LOOM_OK;
}

int loom__elf_check(loom__elf_read_fn read, void *ctx, uint64_t size,
		    char *why, size_t n)
{
	struct image im = { .read = read, .ctx = ctx, .size = size };
	ElfW(Phdr) dyn = { 0 };
	int st;

	st = check_ident(read, ctx, size, why, n);
	if (!st)
		st = read_ehdr(&im, why, n);
	if (!st)
		st = check_phdrs(&im, &dyn, why, n);
	if (!st)
		st = check_segments(&im, why, n);
	if (!st)
		st = check_dynamic(&im, &dyn, why, n);
	return st;
}
