/* SPDX-License-Identifier: MIT */
/* test-loader-elf.c - part of test-loader: files that are not whole
 * plugins for this machine, each refused with its reason before dlopen
 * maps it, and unreadable files. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <grp.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <glib/gstdio.h>

#include <loom/loom-plugin.h>

#include "backend-private.h" /* loom__abi_check, compiled in */
#include "fake-plugin.h"
#include "loader-cases.h"

/* ------------------------------------------------------------------------
 * Files that are not whole plugins for this machine: refused before
 * dlopen maps them (a truncated file would fault there), each with its
 * reason, and the good plugin loads beside them.
 */

/* The built CPU plugin's bytes, or NULL (the test then skips). */
static guint8 *cpu_plugin(gsize *len)
{
	const char *b = g_getenv("LOOM_TEST_BUILDDIR");
	char *file = g_build_filename(b ? b : ".", "plugins", "cpu", ".libs",
				      "loom-cpu.so", NULL);
	gchar *data = NULL;

	if (!g_file_get_contents(file, &data, len, NULL))
		data = NULL;
	g_free(file);
	return (guint8 *)data;
}

static void write_plugin(const char *dir, const char *name,
			 const void *data, gsize len)
{
	char *path = path_in(dir, name);

	g_assert_true(g_file_set_contents(path, data, (gssize)len, NULL));
	g_free(path);
}

/* What the loader must say of the first cut bytes of a whole plugin of
 * full bytes, worked out from that plugin's own headers: the first table
 * or segment, in file-header order, that the cut leaves incomplete. */
static char *truncated_reason(const guint8 *data, gsize cut)
{
	ElfW(Ehdr) eh;

	memcpy(&eh, data, sizeof(eh));
	if (cut < sizeof(eh))
		return g_strdup_printf("truncated: the ELF header needs %zu "
				       "bytes, the file has %zu",
				       sizeof(eh), (size_t)cut);
	if (eh.e_phoff + (gsize)eh.e_phnum * sizeof(ElfW(Phdr)) > cut)
		return g_strdup_printf("truncated: program headers at 0x%llx "
				       "end past the end of the file (%zu "
				       "bytes)",
				       (unsigned long long)eh.e_phoff,
				       (size_t)cut);
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		ElfW(Phdr) ph;

		memcpy(&ph, data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_filesz && ph.p_offset + ph.p_filesz > cut)
			return g_strdup_printf(
				"truncated: segment at 0x%llx (0x%llx bytes) "
				"ends past the end of the file (%zu bytes)",
				(unsigned long long)ph.p_offset,
				(unsigned long long)ph.p_filesz, (size_t)cut);
	}
	if (eh.e_shoff + (gsize)eh.e_shnum * sizeof(ElfW(Shdr)) > cut)
		return g_strdup_printf("truncated: section headers at 0x%llx "
				       "end past the end of the file (%zu "
				       "bytes)",
				       (unsigned long long)eh.e_shoff,
				       (size_t)cut);
	return NULL;
}

/* An offset inside the last segment with bytes in the file, from the
 * plugin's own headers (where it lies depends on the plugin's size). */
static gsize last_segment_middle(const guint8 *data)
{
	ElfW(Ehdr) eh;
	gsize mid = 0;

	memcpy(&eh, data, sizeof(eh));
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		ElfW(Phdr) ph;

		memcpy(&ph, data + eh.e_phoff + i * sizeof(ph), sizeof(ph));
		if (ph.p_filesz && ph.p_offset + ph.p_filesz / 2 > mid)
			mid = ph.p_offset + ph.p_filesz / 2;
	}
	return mid;
}

void test_elf(struct fixture *f, gconstpointer data)
{
	gsize len;
	guint8 *cpu = cpu_plugin(&len);
	gsize cuts[] = { 10, 64, 4096, 16384, 0, 0 };
	const char *kinds[] = { "the ELF header", "program headers",
				"segment", "segment", "segment",
				"section headers" };
	char *reasons[G_N_ELEMENTS(cuts)];
	char *out, *err;
	guint8 *copy;

	if (!cpu) {
		g_test_skip("the CPU plugin is not built");
		return;
	}
	cuts[4] = last_segment_middle(cpu);
	add_plugin(f->dir, "good");
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
		gsize cut = cuts[i] ? cuts[i] : len - 1;
		char *name = g_strdup_printf("cut%zu", (size_t)cut);

		g_assert_cmpuint(cut, <, len);
		write_plugin(f->dir, name, cpu, cut);
		reasons[i] = truncated_reason(cpu, cut);
		/* Each cut is caught by the check it is meant to test. */
		g_assert_nonnull(reasons[i]);
		g_assert_nonnull(strstr(reasons[i], kinds[i]));
		g_free(name);
	}
	/* Another machine, another class, another ELF type, not ELF. */
	copy = g_memdup2(cpu, len);
#if defined(__aarch64__)
	copy[18] = EM_X86_64;
#else
	copy[18] = EM_AARCH64;
#endif
	copy[19] = 0;
	write_plugin(f->dir, "machine", copy, len);
	memcpy(copy, cpu, len);
	copy[EI_CLASS] = ELFCLASS32;
	write_plugin(f->dir, "class32", copy, len);
	memcpy(copy, cpu, len);
	copy[16] = ET_EXEC;
	copy[17] = 0;
	write_plugin(f->dir, "exec", copy, len);
	write_plugin(f->dir, "x", "not a plugin\n", 13);
	/* Control: the whole file, copied, loads. */
	write_plugin(f->dir, "cpu", cpu, len);

	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "cpu", LOOM_PLUGIN_LOADED, "");
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++) {
		gsize cut = cuts[i] ? cuts[i] : len - 1;
		char *name = g_strdup_printf("cut%zu", (size_t)cut);

		assert_record(f->dir, name, LOOM_PLUGIN_FAILED, reasons[i]);
		g_free(name);
	}
	assert_record(f->dir, "exec", LOOM_PLUGIN_FAILED,
		      "not a shared library (ELF type 2)");
	assert_record(f->dir, "x", LOOM_PLUGIN_FAILED, "not an ELF file");
#if defined(__x86_64__) && defined(__LP64__)
	assert_record(f->dir, "machine", LOOM_PLUGIN_FAILED,
		      "wrong architecture: aarch64 (64-bit, little-endian); "
		      "libloom is x86-64 (64-bit, little-endian)");
	assert_record(f->dir, "class32", LOOM_PLUGIN_FAILED,
		      "wrong architecture: x86-64 (32-bit, little-endian); "
		      "libloom is x86-64 (64-bit, little-endian)");
#else
	{
		char *path = path_in(f->dir, "machine");

		g_assert_true(g_str_has_prefix(find_record(path).reason,
					       "wrong architecture: "));
		g_free(path);
	}
#endif
	loom_unload_all();

	/* loom-info lives through them all and shows why. */
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 0);
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++)
		g_assert_nonnull(strstr(out, reasons[i]));
	g_assert_nonnull(strstr(out, "not an ELF file"));
	g_free(out);
	g_free(err);
	for (size_t i = 0; i < G_N_ELEMENTS(cuts); i++)
		g_free(reasons[i]);
	g_free(copy);
	g_free(cpu);
}

/* One field of a whole plugin's headers changed, each as dlopen would
 * trust it; the file is otherwise good.  Worked out from the plugin's
 * own headers (the build decides its layout). */
struct elf_image {
	guint8 *data;
	gsize len;
	ElfW(Ehdr) *eh;
};

/* Program header i, or the first of type (and with flag, when not 0):
 * its index into *index. */
static ElfW(Phdr) *elf_phdr(const struct elf_image *im, uint32_t type,
			    uint32_t flag, unsigned *index)
{
	for (unsigned i = 0; i < im->eh->e_phnum; i++) {
		ElfW(Phdr) *ph = (ElfW(Phdr) *)(im->data + im->eh->e_phoff) + i;

		if (ph->p_type == type && (!flag || (ph->p_flags & flag))) {
			*index = i;
			return ph;
		}
	}
	g_error("the CPU plugin has no segment of type %u", type);
	return NULL;
}

/* The dynamic entry of tag (the first), found in the file. */
static ElfW(Dyn) *elf_dyn(const struct elf_image *im, int64_t tag)
{
	unsigned i;
	ElfW(Phdr) *dyn = elf_phdr(im, PT_DYNAMIC, 0, &i);
	ElfW(Dyn) *d = (ElfW(Dyn) *)(im->data + dyn->p_offset);

	for (gsize k = 0; k < dyn->p_filesz / sizeof(*d); k++)
		if (d[k].d_tag == tag)
			return &d[k];
	g_error("the CPU plugin has no dynamic entry %lld", (long long)tag);
	return NULL;
}

/* Changes one field of im (a copy of the plugin) and returns the reason
 * the loader must give (the caller frees it). */
typedef char *(*elf_break_fn)(struct elf_image *im);

static char *break_memsz(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_LOAD, PF_W, &i);

	ph->p_memsz = 1;
	return g_strdup_printf("malformed: segment %u (PT_LOAD) holds 0x%llx "
			       "bytes of the file in 0x1 bytes of memory", i,
			       (unsigned long long)ph->p_filesz);
}

static char *break_align(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_LOAD, PF_W, &i);

	ph->p_align = 3 * (uint64_t)sysconf(_SC_PAGESIZE);
	return g_strdup_printf("malformed: segment %u (PT_LOAD) is aligned to "
			       "0x%llx, not a power of two that is a multiple "
			       "of the page (0x%llx)", i,
			       (unsigned long long)ph->p_align,
			       (unsigned long long)sysconf(_SC_PAGESIZE));
}

static char *break_congruence(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_LOAD, PF_X, &i);

	ph->p_offset += 8;
	return g_strdup_printf("malformed: segment %u (PT_LOAD) at address "
			       "0x%llx and file offset 0x%llx: they differ "
			       "modulo its alignment 0x%llx", i,
			       (unsigned long long)ph->p_vaddr,
			       (unsigned long long)ph->p_offset,
			       (unsigned long long)ph->p_align);
}

/* The writable segment moved onto the one before it. */
static char *break_overlap(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *w = elf_phdr(im, PT_LOAD, PF_W, &i), *prev = w - 1;

	g_assert_cmpuint(prev->p_type, ==, PT_LOAD);
	w->p_vaddr = prev->p_vaddr + prev->p_memsz - 0x10;
	w->p_offset = w->p_vaddr % w->p_align +
		      w->p_offset / w->p_align * w->p_align;
	return g_strdup_printf("malformed: segment %u (PT_LOAD) at 0x%llx "
			       "starts before the loadable segment before it "
			       "ends (0x%llx)", i,
			       (unsigned long long)w->p_vaddr,
			       (unsigned long long)(prev->p_vaddr +
						    prev->p_memsz));
}

static char *break_dynamic_outside(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_DYNAMIC, 0, &i);

	ph->p_vaddr = 0x40000000;
	return g_strdup_printf("malformed: segment %u (PT_DYNAMIC) at "
			       "0x40000000 (0x%llx bytes) lies outside the "
			       "loadable segments", i,
			       (unsigned long long)ph->p_memsz);
}

static char *break_dynamic_size(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_DYNAMIC, 0, &i);

	ph->p_filesz -= 4;
	ph->p_memsz -= 4;
	return g_strdup_printf("malformed: the dynamic section is 0x%llx "
			       "bytes, not whole entries of %zu",
			       (unsigned long long)ph->p_filesz,
			       sizeof(ElfW(Dyn)));
}

static char *break_tls(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_TLS, 0, &i);

	ph->p_memsz = ph->p_filesz - 1;
	return g_strdup_printf("malformed: segment %u (PT_TLS) holds 0x%llx "
			       "bytes of the file in 0x%llx bytes of memory",
			       i, (unsigned long long)ph->p_filesz,
			       (unsigned long long)ph->p_memsz);
}

static char *break_note(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *ph = elf_phdr(im, PT_NOTE, 0, &i);

	ph->p_vaddr += 0x40000000;
	return g_strdup_printf("malformed: segment %u (PT_NOTE) at 0x%llx "
			       "(0x%llx bytes) lies outside the loadable "
			       "segments", i, (unsigned long long)ph->p_vaddr,
			       (unsigned long long)ph->p_memsz);
}

/* Every DT_NULL of the section (it is padded with them) made another
 * entry. */
static char *break_dt_null(struct elf_image *im)
{
	unsigned i;
	ElfW(Phdr) *dyn = elf_phdr(im, PT_DYNAMIC, 0, &i);
	ElfW(Dyn) *d = (ElfW(Dyn) *)(im->data + dyn->p_offset);

	for (gsize k = 0; k < dyn->p_filesz / sizeof(*d); k++)
		if (d[k].d_tag == DT_NULL)
			d[k].d_tag = DT_DEBUG;
	return g_strdup("malformed: the dynamic section has no DT_NULL at "
			"its end");
}

static char *break_strtab(struct elf_image *im)
{
	ElfW(Dyn) *d = elf_dyn(im, DT_STRTAB);

	d->d_un.d_ptr = 0x40000000;
	return g_strdup_printf("malformed: DT_STRTAB at 0x40000000 (%llu "
			       "bytes) lies outside the loadable segments",
			       (unsigned long long)
				       elf_dyn(im, DT_STRSZ)->d_un.d_val);
}

static char *break_relaent(struct elf_image *im)
{
	elf_dyn(im, DT_RELAENT)->d_un.d_val = 0;
	return g_strdup_printf("malformed: DT_RELAENT is 0, not %zu",
			       sizeof(ElfW(Rela)));
}

static char *break_pltrel(struct elf_image *im)
{
	elf_dyn(im, DT_PLTREL)->d_un.d_val = DT_STRTAB;
	return g_strdup_printf("malformed: DT_PLTREL is %d, neither DT_REL "
			       "nor DT_RELA", DT_STRTAB);
}

static char *break_needed(struct elf_image *im)
{
	uint64_t strsz = elf_dyn(im, DT_STRSZ)->d_un.d_val;

	elf_dyn(im, DT_NEEDED)->d_un.d_val = strsz;
	return g_strdup_printf("malformed: DT_NEEDED names the string at "
			       "%llu, past the string table's %llu bytes",
			       (unsigned long long)strsz,
			       (unsigned long long)strsz);
}

static char *break_strsz(struct elf_image *im)
{
	uint64_t *strsz = &elf_dyn(im, DT_STRSZ)->d_un.d_val;

	/* The table's last byte is then the last of its last name. */
	*strsz -= 1;
	return g_strdup_printf("malformed: the string table (%llu bytes) "
			       "does not end with a NUL",
			       (unsigned long long)*strsz);
}

void test_elf_fields(struct fixture *f, gconstpointer data)
{
	static const struct {
		const char *name;
		elf_break_fn fn;
	} cases[] = {
		{ "memsz", break_memsz },
		{ "align", break_align },
		{ "congruence", break_congruence },
		{ "overlap", break_overlap },
		{ "dynamic-outside", break_dynamic_outside },
		{ "dynamic-size", break_dynamic_size },
		{ "tls", break_tls },
		{ "note", break_note },
		{ "dt-null", break_dt_null },
		{ "strtab", break_strtab },
		{ "relaent", break_relaent },
		{ "pltrel", break_pltrel },
		{ "needed", break_needed },
		{ "strsz", break_strsz },
	};
	char *reasons[G_N_ELEMENTS(cases)];
	gsize len;
	guint8 *cpu = cpu_plugin(&len);
	char *out, *err;

	if (!cpu) {
		g_test_skip("the CPU plugin is not built");
		return;
	}
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		struct elf_image im = { g_memdup2(cpu, len), len, NULL };

		im.eh = (ElfW(Ehdr) *)im.data;
		reasons[i] = cases[i].fn(&im);
		write_plugin(f->dir, cases[i].name, im.data, len);
		g_free(im.data);
	}
	write_plugin(f->dir, "cpu", cpu, len);

	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "cpu", LOOM_PLUGIN_LOADED, "");
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++)
		assert_record(f->dir, cases[i].name, LOOM_PLUGIN_FAILED,
			      reasons[i]);
	loom_unload_all();

	/* loom-info lives through them all and shows why. */
	g_assert_cmpint(run_info(NULL, &out, &err), ==, 0);
	for (size_t i = 0; i < G_N_ELEMENTS(cases); i++) {
		g_assert_nonnull(strstr(out, reasons[i]));
		g_free(reasons[i]);
	}
	g_free(out);
	g_free(err);
	g_free(cpu);
}

/* Entries named like plugins that are no files, and search directories
 * that cannot be read: each has a record with its reason. */
void test_entries(struct fixture *f, gconstpointer data)
{
	char *missing = g_build_filename(f->dir2, "missing", NULL);
	char *loopdir = g_build_filename(f->dir2, "loop", NULL);
	char *path = g_strdup_printf("%s:%s:%s", f->dir, missing, loopdir);
	char *dang = path_in(f->dir, "dang");
	char *loop = path_in(f->dir, "loop");
	char *dir = path_in(f->dir, "dir");
	char *out, *err, *want;

	add_plugin(f->dir, "good");
	g_assert_cmpint(symlink("/nonexistent/loom-x.so", dang), ==, 0);
	g_assert_cmpint(symlink(loop, loop), ==, 0);
	g_assert_cmpint(g_mkdir(dir, 0755), ==, 0);
	g_assert_cmpint(symlink(loopdir, loopdir), ==, 0);
	setenv("LOOM_PLUGIN_PATH", path, 1);

	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "dang", LOOM_PLUGIN_FAILED,
		      "dangling symbolic link to /nonexistent/loom-x.so");
	assert_record(f->dir, "loop", LOOM_PLUGIN_FAILED,
		      "symbolic link loop");
	assert_record(f->dir, "dir", LOOM_PLUGIN_FAILED, "is a directory");
	{
		struct loom_plugin_info info = find_record(missing);

		g_assert_cmpstr(info.name, ==, "");
		g_assert_cmpint(info.state, ==, LOOM_PLUGIN_FAILED);
		g_assert_cmpstr(info.reason, ==, "plugin directory: not found");
		info = find_record(loopdir);
		g_assert_cmpint(info.state, ==, LOOM_PLUGIN_FAILED);
		g_assert_cmpstr(info.reason, ==,
				"plugin directory: symbolic link loop");
	}
	/* An explicit path says the same as a search. */
	g_assert_cmpint(loom_load_path(dang, NULL), ==, LOOM_E_NOT_FOUND);
	want = g_strdup_printf("plugin 'dang' (%s): dangling symbolic link to "
			       "/nonexistent/loom-x.so",
			       dang);
	g_assert_cmpstr(loom_error_message(), ==, want);
	g_free(want);
	loom_unload_all();

	g_assert_cmpint(run_info("--json", &out, &err), ==, 0);
	want = g_strdup_printf("{\"name\": \"\", \"file\": \"%s\", "
			       "\"state\": \"failed\", \"reason\": "
			       "\"plugin directory: not found\"",
			       missing);
	g_assert_nonnull(strstr(out, want));
	g_free(want);
	want = g_strdup_printf("{\"name\": \"dir\", \"file\": \"%s\", "
			       "\"state\": \"failed\", \"reason\": "
			       "\"is a directory\"",
			       dir);
	g_assert_nonnull(strstr(out, want));
	g_free(want);
	g_free(out);
	g_free(err);
	g_assert_cmpint(g_rmdir(dir), ==, 0);
	g_free(missing);
	g_free(loopdir);
	g_free(path);
	g_free(dang);
	g_free(loop);
	g_free(dir);
}

/* Whether the nobody user may read and enter path: asked by a child
 * that gives up root, since root's own access() says yes to anything. */
static gboolean nobody_reaches(const char *path)
{
	const uid_t nobody = 65534;
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgroups(0, NULL) != 0 || setgid(nobody) != 0 ||
		    setuid(nobody) != 0)
			_exit(2);
		_exit(access(path, R_OK | X_OK) == 0 ? 0 : 1);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return FALSE;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* A file and a search directory that cannot be read: "permission
 * denied", not "not found".  Root reads through mode 000, so as root the
 * test runs in a child that gives up root for the nobody user. */
void test_unreadable(struct fixture *f, gconstpointer data)
{
	char *sub = g_build_filename(f->dir, "locked", NULL);
	char *path = g_strdup_printf("%s:%s", f->dir, sub);
	char *secret = path_in(f->dir, "secret");
	gsize len;
	guint8 *cpu;

	if (geteuid() == 0 && !g_test_subprocess()) {
		/* Asked here: a skip inside the child would read as a
		 * failure. */
		if (!nobody_reaches(fake_libs())) {
			g_test_skip("the build tree is not readable by nobody");
			goto out;
		}
		g_test_trap_subprocess(NULL, 0,
				       G_TEST_SUBPROCESS_INHERIT_STDERR);
		g_test_trap_assert_passed();
		goto out;
	}
	cpu = cpu_plugin(&len);
	if (!cpu) {
		g_test_skip("the CPU plugin is not built");
		goto out;
	}
	if (geteuid() == 0) {
		const uid_t nobody = 65534;

		g_assert_cmpint(chown(f->dir, nobody, nobody), ==, 0);
		g_assert_cmpint(chown(f->dir2, nobody, nobody), ==, 0);
		g_assert_cmpint(setgroups(0, NULL), ==, 0);
		g_assert_cmpint(setgid(nobody), ==, 0);
		g_assert_cmpint(setuid(nobody), ==, 0);
	}
	if (access(fake_libs(), R_OK | X_OK) != 0) {
		g_test_skip("the build tree is not readable by nobody");
		g_free(cpu);
		goto out;
	}
	add_plugin(f->dir, "good");
	write_plugin(f->dir, "secret", cpu, len);
	g_free(cpu);
	g_assert_cmpint(chmod(secret, 0), ==, 0);
	g_assert_cmpint(g_mkdir(sub, 0), ==, 0);
	if (access(secret, R_OK) == 0) {
		g_test_skip("mode 000 does not stop reads here");
		goto out_rmdir;
	}
	setenv("LOOM_PLUGIN_PATH", path, 1);
	g_assert_cmpint(loom_load_all(), ==, LOOM_OK);
	assert_record(f->dir, "good", LOOM_PLUGIN_LOADED, "");
	assert_record(f->dir, "secret", LOOM_PLUGIN_FAILED,
		      "permission denied");
	g_assert_cmpstr(find_record(sub).reason, ==,
			"plugin directory: permission denied");
out_rmdir:
	g_assert_cmpint(g_rmdir(sub), ==, 0);
out:
	g_free(sub);
	g_free(path);
	g_free(secret);
}
