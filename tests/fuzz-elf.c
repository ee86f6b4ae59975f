/* SPDX-License-Identifier: MIT */
/* fuzz-elf.c - fuzzes the plugin-file ELF checker (elf-check.c):
 * LLVMFuzzerTestOneInput for libFuzzer (-DLOOM_FUZZ_LIBFUZZER
 * -fsanitize=fuzzer), else a driver replaying corpus files for make check.
 * Its mutator changes one field of a header, a program header or a
 * dynamic entry of a whole shared object at a time, so that the fuzzer
 * reaches the checks behind the first ones.  In a configured tree:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DLOOM_FUZZ_LIBFUZZER \
 *       -I. -Iinclude -Ilibcore tests/fuzz-elf.c libcore/elf-check.c
 * then run it on a copy of tests/corpus/elf with a built plugin added. */
#include "config.h"

#include <dirent.h>
#include <elf.h>
#include <link.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend-private.h"

struct mem {
	const uint8_t *data;
	size_t size;
};

/* The checker must never ask for bytes past the size it was given: it
 * checks every offset and length first, so a read out of range is its
 * bug, and aborts here for the fuzzer to see. */
static bool read_mem(void *ctx, uint64_t off, void *buf, size_t n)
{
	const struct mem *m = ctx;

	if (off > m->size || n > m->size - off)
		abort();
	memcpy(buf, m->data + off, n);
	return true;
}

/* Checks data; why gets the reason, or "" when it is accepted. */
static void check(const uint8_t *data, size_t size, char why[256])
{
	struct mem m = { data, size };
	int st;

	why[0] = '\0';
	st = loom__elf_check(read_mem, &m, size, why, 256);
	/* A refusal always says why; an acceptance says nothing. */
	if (st != LOOM_OK && (st != LOOM_E_PLUGIN || !why[0] ||
			      !memchr(why, '\0', 256)))
		abort();
	if (st == LOOM_OK && why[0])
		abort();
}

/* A small generator (xorshift), so that a seed replays. */
static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A field: where it is in the file and how wide (4 or 8 bytes). */
struct field {
	size_t off, width;
	bool tag; /* a dynamic entry's tag */
};

static uint64_t get_field(const uint8_t *data, struct field f)
{
	uint32_t v32;
	uint64_t v64;

	if (f.width == 4) {
		memcpy(&v32, data + f.off, 4);
		return v32;
	}
	memcpy(&v64, data + f.off, 8);
	return v64;
}

static void set_field(uint8_t *data, struct field f, uint64_t v)
{
	uint32_t v32 = (uint32_t)v;

	if (f.width == 4)
		memcpy(data + f.off, &v32, 4);
	else
		memcpy(data + f.off, &v, 8);
}

#define FIELD(type, member)                                                  \
	{ offsetof(type, member), sizeof(((type *)0)->member), false }

static const struct field ehdr_fields[] = {
	FIELD(ElfW(Ehdr), e_phoff),  FIELD(ElfW(Ehdr), e_shoff),
	{ offsetof(ElfW(Ehdr), e_phnum), 2, false },
	{ offsetof(ElfW(Ehdr), e_shnum), 2, false },
};

static const struct field phdr_fields[] = {
	FIELD(ElfW(Phdr), p_type),   FIELD(ElfW(Phdr), p_flags),
	FIELD(ElfW(Phdr), p_offset), FIELD(ElfW(Phdr), p_vaddr),
	FIELD(ElfW(Phdr), p_filesz), FIELD(ElfW(Phdr), p_memsz),
	FIELD(ElfW(Phdr), p_align),
};

/* A value for field f worth trying: an edge, a neighbour of what is
 * there, the file's size, or another program header's field. */
static uint64_t pick_value(const uint8_t *data, size_t size,
			   const ElfW(Ehdr) *eh, struct field f,
			   uint64_t *s)
{
	static const int64_t tags[] = {
		DT_NULL, DT_NEEDED, DT_PLTRELSZ, DT_STRTAB, DT_SYMTAB,
		DT_RELA, DT_RELASZ, DT_RELAENT, DT_STRSZ, DT_SYMENT,
		DT_SONAME, DT_RPATH, DT_REL, DT_RELSZ, DT_RELENT, DT_PLTREL,
		DT_JMPREL, DT_INIT_ARRAY, DT_INIT_ARRAYSZ, DT_RUNPATH,
		DT_RELR, DT_RELRSZ, DT_RELRENT, DT_GNU_HASH, DT_VERSYM,
	};
	uint64_t cur = get_field(data, f), r = next(s);

	if (f.tag && r % 2)
		return (uint64_t)tags[next(s) % (sizeof(tags) / sizeof(*tags))];
	switch (r % 8) {
	case 0: return 0;
	case 1: return next(s) % 3 ? 1 : UINT64_MAX;
	case 2: return cur + 1 + next(s) % 16;
	case 3: return cur - 1 - next(s) % 16;
	case 4: return size - next(s) % 3;
	case 5: return (uint64_t)1 << (next(s) % 20);
	case 6: {
		unsigned i = (unsigned)(next(s) % eh->e_phnum);
		struct field g = phdr_fields[2 + next(s) % 4];

		g.off += eh->e_phoff + i * sizeof(ElfW(Phdr));
		return get_field(data, g);
	}
	default: return next(s);
	}
}

/* Changes one field of data (size bytes) when it holds an ELF header of
 * this class whose program headers it holds; returns false otherwise. */
static bool mutate_field(uint8_t *data, size_t size, uint64_t seed)
{
	ElfW(Ehdr) eh;
	uint64_t s = seed | 1, dyn_off = 0, dyn_n = 0;
	struct field f;
	unsigned kind;

	if (size < sizeof(eh) || memcmp(data, ELFMAG, SELFMAG))
		return false;
	memcpy(&eh, data, sizeof(eh));
	if (eh.e_phentsize != sizeof(ElfW(Phdr)) || !eh.e_phnum ||
	    eh.e_phoff > size ||
	    eh.e_phnum > (size - eh.e_phoff) / sizeof(ElfW(Phdr)))
		return false;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		ElfW(Phdr) ph;

		memcpy(&ph, data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_type == PT_DYNAMIC && ph.p_offset <= size) {
			dyn_off = ph.p_offset;
			dyn_n = (size - ph.p_offset) / sizeof(ElfW(Dyn));
		}
	}
	kind = (unsigned)(next(&s) % 8);
	if (kind == 0) {
		f = ehdr_fields[next(&s) % (sizeof(ehdr_fields) /
					   sizeof(*ehdr_fields))];
	} else if (kind < 5 || !dyn_n) {
		f = phdr_fields[next(&s) % (sizeof(phdr_fields) /
					   sizeof(*phdr_fields))];
		f.off += eh.e_phoff +
			 (next(&s) % eh.e_phnum) * sizeof(ElfW(Phdr));
	} else {
		uint64_t k = next(&s) % (dyn_n < 64 ? dyn_n : 64);

		f.tag = next(&s) % 2;
		f.off = dyn_off + k * sizeof(ElfW(Dyn)) +
			(f.tag ? 0 : offsetof(ElfW(Dyn), d_un));
		f.width = 8;
	}
	if (f.width == 2) {
		uint16_t v = (uint16_t)pick_value(data, size, &eh,
						  (struct field){ f.off, 4,
								  false },
						  &s);

		/* Two bytes: pick_value reads four, which are there. */
		memcpy(data + f.off, &v, 2);
		return true;
	}
	set_field(data, f, pick_value(data, size, &eh, f, &s));
	return true;
}

#ifdef LOOM_FUZZ_LIBFUZZER
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed);

/* Three times in four, one field of a whole object; else libFuzzer's
 * own byte-level mutations. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size,
			       unsigned int seed)
{
	if (seed % 4 && mutate_field(data, size, seed))
		return size;
	return LLVMFuzzerMutate(data, size, max_size);
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char why[256];

	check(data, size, why);
	return 0;
}

#ifndef LOOM_FUZZ_LIBFUZZER
static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* How many single-field changes of each file a replay checks. */
#define FIELD_TRIES 2000

/* Replays one file, and copies of it with one field changed; the
 * reason for the file itself into why; false when it cannot be read. */
static bool replay(const char *path, char why[256])
{
	FILE *f = fopen(path, "rb");
	uint8_t *data = NULL;
	size_t size = 0, cap = 0, r;

	if (!f)
		return false;
	do {
		if (size == cap) {
			uint8_t *d = realloc(data, cap = cap ? 2 * cap : 4096);

			if (!d) {
				free(data);
				fclose(f);
				return false;
			}
			data = d;
		}
		r = fread(data + size, 1, cap - size, f);
		size += r;
	} while (r > 0);
	fclose(f);
	/* An exact-size copy, so that a read past the end is one for
	 * ASan and valgrind too. */
	{
		uint8_t *exact = malloc(size ? size : 1);

		if (!exact) {
			free(data);
			return false;
		}
		/* Then FIELD_TRIES copies with one field changed each. */
		for (uint64_t t = 0; t < FIELD_TRIES; t++) {
			char ignored[256];

			memcpy(exact, data, size);
			if (!mutate_field(exact, size,
					  0x9e3779b97f4a7c15ull * (t + 1)))
				break;
			check(exact, size, ignored);
		}
		memcpy(exact, data, size);
		check(exact, size, why);
		free(exact);
	}
	free(data);
	return true;
}

/* With no arguments, replays $srcdir/tests/corpus/elf (make check);
 * otherwise the files named. */
int main(int argc, char **argv)
{
	const char *srcdir = getenv("srcdir");
	char dir[4096], path[8192];
	char *names[256];
	size_t n = 0;
	struct dirent *de;
	DIR *d;
	int failed = 0;

	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			char why[256];

			if (!replay(argv[i], why)) {
				fprintf(stderr, "%s: cannot read\n", argv[i]);
				failed = 1;
			} else {
				printf("%s: %s\n", argv[i],
				       why[0] ? why : "accepted");
			}
		}
		return failed;
	}
	snprintf(dir, sizeof(dir), "%s/tests/corpus/elf",
		 srcdir ? srcdir : ".");
	d = opendir(dir);
	if (!d) {
		printf("Bail out! cannot open %s\n", dir);
		return 1;
	}
	while ((de = readdir(d)) && n < sizeof(names) / sizeof(*names))
		if (de->d_name[0] != '.')
			names[n++] = strdup(de->d_name);
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_str);
	printf("1..%zu\n", n);
	for (size_t i = 0; i < n; i++) {
		char why[256] = "";
		bool ok;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		ok = names[i] && replay(path, why);
		printf("%s %zu %s\n# %s\n", ok ? "ok" : "not ok", i + 1,
		       names[i], why[0] ? why : "accepted");
		failed |= !ok;
		free(names[i]);
	}
	return failed;
}
#endif
