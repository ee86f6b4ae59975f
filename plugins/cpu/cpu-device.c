/* SPDX-License-Identifier: MIT */
/* cpu-device.c - the CPU devices: the process's cores split into
 * partitions (LOOM_CPU_DEVICES=N, or one per NUMA node), each a device
 * with its own memory share and buffer type.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cpu-private.h"

/* The cores this process may run on, in increasing order. */
static int allowed_cpus(int **out)
{
	cpu_set_t set;
	int i, n = 0, *cpus;

	if (sched_getaffinity(0, sizeof(set), &set)) {
		long c = sysconf(_SC_NPROCESSORS_ONLN);

		CPU_ZERO(&set);
		for (i = 0; i < c && i < CPU_SETSIZE; i++)
			CPU_SET(i, &set);
	}
	cpus = malloc(sizeof(*cpus) * CPU_SETSIZE);
	if (!cpus)
		return -1;
	for (i = 0; i < CPU_SETSIZE; i++)
		if (CPU_ISSET(i, &set))
			cpus[n++] = i;
	if (!n)
		cpus[n++] = 0;
	*out = cpus;
	return n;
}

/* Parses a sysfs cpulist ("0-3,8-11") into a set. */
static void parse_cpulist(const char *s, cpu_set_t *set)
{
	CPU_ZERO(set);
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b;

		if (end == s)
			break;
		b = a;
		s = end;
		if (*s == '-') {
			b = strtol(s + 1, &end, 10);
			s = end;
		}
		for (; a <= b && a < CPU_SETSIZE; a++)
			if (a >= 0)
				CPU_SET(a, set);
		while (*s == ',' || isspace((unsigned char)*s))
			s++;
	}
}

static int node_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

/* The NUMA nodes (by number) found in sysfs; 0 when there are none. */
static int numa_nodes(int *nodes, int max)
{
	DIR *d = opendir("/sys/devices/system/node");
	struct dirent *e;
	int n = 0;

	if (!d)
		return 0;
	while ((e = readdir(d)) && n < max) {
		char *end;
		long v;

		if (strncmp(e->d_name, "node", 4) ||
		    !isdigit((unsigned char)e->d_name[4]))
			continue;
		v = strtol(e->d_name + 4, &end, 10);
		if (!*end)
			nodes[n++] = (int)v;
	}
	closedir(d);
	qsort(nodes, n, sizeof(*nodes), node_cmp);
	return n;
}

static int node_cpus(int node, cpu_set_t *set)
{
	char path[96], line[4096];
	FILE *f;

	snprintf(path, sizeof(path),
		 "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	parse_cpulist(line, set);
	return 0;
}

static void cpu_model(char *buf, size_t size)
{
	char line[512];
	FILE *f = fopen("/proc/cpuinfo", "r");

	snprintf(buf, size, "CPU");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':');

		if (!colon || (strncmp(line, "model name", 10) &&
			       strncmp(line, "Model", 5)))
			continue;
		colon++;
		while (*colon == ' ' || *colon == '\t')
			colon++;
		colon[strcspn(colon, "\n")] = 0;
		snprintf(buf, size, "%s", colon);
		break;
	}
	fclose(f);
}

/* Writes cpus as ranges ("0-3,6"). */
static void format_cpus(char *buf, size_t size, const int *cpus, int n)
{
	size_t len = 0;
	int i = 0;

	buf[0] = 0;
	while (i < n && len < size) {
		int j = i;

		while (j + 1 < n && cpus[j + 1] == cpus[j] + 1)
			j++;
		if (j > i)
			len += snprintf(buf + len, size - len, "%s%d-%d",
					len ? "," : "", cpus[i], cpus[j]);
		else
			len += snprintf(buf + len, size - len, "%s%d",
					len ? "," : "", cpus[i]);
		i = j + 1;
	}
}

/* Reads one "Key: N kB" line of /proc/meminfo, in bytes; 0 if absent. */
static size_t meminfo(const char *key)
{
	char line[256];
	size_t klen = strlen(key), v = 0;
	FILE *f = fopen("/proc/meminfo", "r");

	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, key, klen) && line[klen] == ':') {
			v = (size_t)strtoull(line + klen + 1, NULL, 10) * 1024;
			break;
		}
	}
	fclose(f);
	return v;
}

static const char *dev_get_name(loom_dev_t *dev)
{
	struct cpu_device *cd = loom_dev_context(dev);

	return cd->name;
}

static const char *dev_get_description(loom_dev_t *dev)
{
	struct cpu_device *cd = loom_dev_context(dev);

	return cd->description;
}

/* A NUMA node's "Node N Key: M kB" line, in bytes; 0 if absent. */
static size_t node_meminfo(int node, const char *key)
{
	char path[96], line[256], prefix[64];
	size_t plen, v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/meminfo",
		 node);
	snprintf(prefix, sizeof(prefix), "Node %d %s:", node, key);
	plen = strlen(prefix);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f)) {
		if (!strncmp(line, prefix, plen)) {
			v = (size_t)strtoull(line + plen, NULL, 10) * 1024;
			break;
		}
	}
	fclose(f);
	return v;
}

/* A NUMA partition's node memory; otherwise the machine's memory shared
 * evenly by the partitions. */
static void dev_get_memory(loom_dev_t *dev, size_t *free, size_t *total)
{
	struct cpu_device *cd = loom_dev_context(dev);
	size_t t = meminfo("MemTotal");
	size_t a = meminfo("MemAvailable");

	if (cd->numa_node >= 0) {
		size_t nt = node_meminfo(cd->numa_node, "MemTotal");
		size_t nf = node_meminfo(cd->numa_node, "MemFree");

		if (nt) {
			*total = nt;
			*free = nf < nt ? nf : nt;
			return;
		}
	}

	if (!a)
		a = meminfo("MemFree");
	*total = t / cd->n_devices;
	*free = a / cd->n_devices;
}

static enum loom_dev_type dev_get_type(loom_dev_t *dev)
{
	return LOOM_DEV_TYPE_CPU;
}

/* Every op, every type: the device to fall back on. */
static enum loom_dev_rank dev_get_rank(loom_dev_t *dev)
{
	return LOOM_DEV_RANK_PRIMARY;
}

static uint32_t dev_get_caps(loom_dev_t *dev)
{
	return 0;
}

static int dev_init_backend(loom_dev_t *dev, const char *params,
			    loom_backend_t **out)
{
	return cpu_backend_init(loom_dev_context(dev), params, out);
}

static loom_buffer_type_t *dev_get_buffer_type(loom_dev_t *dev)
{
	struct cpu_device *cd = loom_dev_context(dev);

	return cd->buft;
}

static bool dev_supports_op(loom_dev_t *dev, const struct loom_tensor *op)
{
	return cpu_supports_op(op);
}

static bool dev_supports_buft(loom_dev_t *dev, loom_buffer_type_t *buft)
{
	struct cpu_device *cd = loom_dev_context(dev);

	return loom_buffer_type_is_host(buft) || (buft && buft == cd->wbuft);
}

static const struct loom_dev_iface cpu_dev_iface = {
	.size = sizeof(struct loom_dev_iface),
	.get_name = dev_get_name,
	.get_description = dev_get_description,
	.get_memory = dev_get_memory,
	.get_type = dev_get_type,
	.get_caps = dev_get_caps,
	.init_backend = dev_init_backend,
	.get_buffer_type = dev_get_buffer_type,
	.supports_op = dev_supports_op,
	.supports_buft = dev_supports_buft,
	.get_rank = dev_get_rank,
};

/* Device count asked for by LOOM_CPU_DEVICES: N >= 1, or 0 for numa. */
static int requested_devices(void)
{
	const char *s = loom_env_get("LOOM_CPU_DEVICES");
	char *end;
	long v;

	if (!s || !*s)
		return 1;
	if (!strcmp(s, "numa"))
		return 0;
	v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 1024) {
		loom_log(LOOM_LOG_WARN,
			 "cpu: LOOM_CPU_DEVICES=%s is neither a device count "
			 "(1 to 1024) nor 'numa'; using 1 device", s);
		return 1;
	}
	return (int)v;
}

/* A topology number of a CPU from sysfs, -1 when unknown. */
static long topology(int cpu, const char *what)
{
	char path[128], line[32];
	long v = -1;
	FILE *f;

	snprintf(path, sizeof(path),
		 "/sys/devices/system/cpu/cpu%d/topology/%s", cpu, what);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = strtol(line, NULL, 10);
	fclose(f);
	return v;
}

/* The physical core of each CPU: core_of[i] numbers the cores of cpus[]
 * densely, in order of first appearance, so SMT siblings share a number.
 * Returns the number of cores. */
static int physical_cores(const int *cpus, int n, int *core_of)
{
	long *pkg = malloc(sizeof(*pkg) * n);
	long *core = malloc(sizeof(*core) * n);
	int i, j, n_cores = 0;

	for (i = 0; i < n; i++) {
		core_of[i] = -1;
		if (pkg && core) {
			pkg[i] = topology(cpus[i], "physical_package_id");
			core[i] = topology(cpus[i], "core_id");
			for (j = 0; j < i && core[i] >= 0; j++)
				if (pkg[j] == pkg[i] && core[j] == core[i]) {
					core_of[i] = core_of[j];
					break;
				}
		}
		if (core_of[i] < 0)
			core_of[i] = n_cores++;
	}
	free(pkg);
	free(core);
	return n_cores;
}

/* Gives cd the CPUs cpus[sel[0..n_sel)], ordered so that the first of
 * each core's siblings come first: a pool's threads then land on distinct
 * cores before any shares one. */
static int fill_device(struct cpu_device *cd, const int *cpus,
		       const int *core_of, const int *sel, int n_sel)
{
	int *rank = calloc(n_sel, sizeof(*rank));
	int i, j, r, left = n_sel;

	cd->cpus = malloc(sizeof(int) * (n_sel ? n_sel : 1));
	if (!rank || !cd->cpus) {
		free(rank);
		return -1;
	}
	for (i = 0; i < n_sel; i++)
		for (j = 0; j < i; j++)
			if (core_of[sel[j]] == core_of[sel[i]])
				rank[i]++;
	for (r = 0; left > 0; r++)
		for (i = 0; i < n_sel; i++)
			if (rank[i] == r) {
				cd->cpus[cd->n_cpus++] = cpus[sel[i]];
				cd->n_cores += r == 0;
				left--;
			}
	free(rank);
	return 0;
}

/* One partition per NUMA node that has allowed CPUs.  Returns the count
 * made, 0 when the machine shows no usable nodes, -1 without memory. */
static int split_numa(struct cpu_reg *cr, const int *cpus,
		      const int *core_of, int n_cpus)
{
	int nodes[256];
	int n_nodes = numa_nodes(nodes, 256);
	int *sel = malloc(sizeof(*sel) * n_cpus);
	int i, j, n_sel, made = 0;

	if (n_nodes <= 0 || !sel) {
		free(sel);
		return n_nodes <= 0 ? 0 : -1;
	}
	cr->devices = calloc(n_nodes, sizeof(*cr->devices));
	if (!cr->devices)
		goto err_free_sel;
	cr->n_alloc = n_nodes;
	for (i = 0; i < n_nodes; i++) {
		struct cpu_device *cd = &cr->devices[made];
		cpu_set_t set;

		if (node_cpus(nodes[i], &set))
			continue;
		for (j = 0, n_sel = 0; j < n_cpus; j++)
			if (CPU_ISSET(cpus[j], &set))
				sel[n_sel++] = j;
		if (!n_sel)
			continue;
		if (fill_device(cd, cpus, core_of, sel, n_sel))
			goto err_free_sel;
		cd->numa_node = nodes[i];
		made++;
	}
	free(sel);
	return made;

err_free_sel:
	free(sel);
	return -1;
}

/* n partitions over whole physical cores, in contiguous groups.  With
 * more partitions than cores they split SMT siblings, and with more than
 * CPUs they share CPUs round-robin (allowed, and logged). */
static int split_even(struct cpu_reg *cr, const int *cpus,
		      const int *core_of, int n_cpus, int n_cores, int n)
{
	int *sel = malloc(sizeof(*sel) * n_cpus);
	int i, j, n_sel;

	cr->devices = calloc(n, sizeof(*cr->devices));
	if (!cr->devices || !sel) {
		free(sel);
		return -1;
	}
	cr->n_alloc = n;
	/* Allowed (tensor parallelism can then be tested on any machine),
	 * but never silent: such devices are slower than one. */
	if (n > n_cpus)
		loom_log(LOOM_LOG_WARN,
			 "cpu: LOOM_CPU_DEVICES=%d but only %d CPUs: devices "
			 "share CPUs and run slower than one device",
			 n, n_cpus);
	else if (n > n_cores)
		loom_log(LOOM_LOG_WARN,
			 "cpu: LOOM_CPU_DEVICES=%d but only %d cores: devices "
			 "share cores and run slower than one device",
			 n, n_cores);
	for (i = 0; i < n; i++) {
		struct cpu_device *cd = &cr->devices[i];

		n_sel = 0;
		if (n <= n_cores) {
			int lo = (int)((long)n_cores * i / n);
			int hi = (int)((long)n_cores * (i + 1) / n);

			for (j = 0; j < n_cpus; j++)
				if (core_of[j] >= lo && core_of[j] < hi)
					sel[n_sel++] = j;
		} else if (n <= n_cpus) {
			int lo = (int)((long)n_cpus * i / n);
			int hi = (int)((long)n_cpus * (i + 1) / n);

			for (j = lo; j < hi; j++)
				sel[n_sel++] = j;
		} else {
			sel[n_sel++] = i % n_cpus;
		}
		if (fill_device(cd, cpus, core_of, sel, n_sel)) {
			free(sel);
			return -1;
		}
		cd->numa_node = -1;
	}
	free(sel);
	return n;
}

static int int_cmp(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

int cpu_devices_init(struct cpu_reg *cr)
{
	char model[128], list[96];
	int *cpus, *core_of, *sorted;
	int n_cpus, n_cores, want, n = 0, i, err;

	n_cpus = allowed_cpus(&cpus);
	if (n_cpus < 0)
		return loom_error_set(LOOM_E_NOMEM, "cpu: out of memory");
	core_of = malloc(sizeof(*core_of) * n_cpus);
	sorted = malloc(sizeof(*sorted) * n_cpus);
	if (!core_of || !sorted) {
		n = -1;
		goto out_free;
	}
	n_cores = physical_cores(cpus, n_cpus, core_of);
	cpu_set_core_count(n_cpus);
	cr->env_threads = cpu_env_threads();
	want = requested_devices();
	if (want == 0) {
		n = split_numa(cr, cpus, core_of, n_cpus);
		if (n == 0) {
			loom_log(LOOM_LOG_INFO,
				 "cpu: no NUMA nodes found; one device");
			cpu_devices_free(cr);
			want = 1;
		}
	}
	if (want > 0)
		n = split_even(cr, cpus, core_of, n_cpus, n_cores, want);
out_free:
	free(cpus);
	free(core_of);
	if (n < 0) {
		free(sorted);
		return loom_error_set(LOOM_E_NOMEM, "cpu: out of memory");
	}
	cr->n_devices = n;

	cpu_model(model, sizeof(model));
	for (i = 0; i < n; i++) {
		struct cpu_device *cd = &cr->devices[i];

		cd->cr = cr;
		cd->index = i;
		cd->n_devices = n;
		snprintf(cd->name, sizeof(cd->name), "cpu%d", i);
		memcpy(sorted, cd->cpus, sizeof(int) * cd->n_cpus);
		qsort(sorted, cd->n_cpus, sizeof(int), int_cmp);
		format_cpus(list, sizeof(list), sorted, cd->n_cpus);
		if (cd->numa_node >= 0)
			snprintf(cd->description, sizeof(cd->description),
				 "%s, NUMA node %d, cores %s (%s)", model,
				 cd->numa_node, list, CPU_VARIANT);
		else
			snprintf(cd->description, sizeof(cd->description),
				 "%s, cores %s (%s)", model, list,
				 CPU_VARIANT);
		err = loom_dev_new(cr->reg, &cpu_dev_iface, cd, &cd->dev);
		if (!err)
			err = cpu_buft_create(cr, cd);
		if (!err)
			err = cpu_wbuft_create(cr, cd);
		if (err) {
			free(sorted);
			return err;
		}
		loom_log(LOOM_LOG_DEBUG, "cpu: %s: cores %s, %d physical",
			 cd->name, list, cd->n_cores);
	}
	free(sorted);
	return LOOM_OK;
}

void cpu_devices_free(struct cpu_reg *cr)
{
	int i;

	if (!cr->devices)
		return;
	for (i = 0; i < cr->n_alloc; i++)
		free(cr->devices[i].cpus);
	free(cr->devices);
	cr->devices = NULL;
	cr->n_devices = 0;
	cr->n_alloc = 0;
}
