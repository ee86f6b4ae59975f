/* SPDX-License-Identifier: MIT */
/* fuzz-elf.c - fuzzes the plugin-file ELF checker (elf-check.c):
 * LLVMFuzzerTestOneInput for libFuzzer (-DLOOM_FUZZ_LIBFUZZER
 * -fsanitize=fuzzer), else a driver replaying corpus files for make check. */
#include "config.h"

#include <dirent.h>
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

/* Replays one file, the reason into why; false when it cannot be
 * read. */
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
