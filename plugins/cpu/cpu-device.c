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
	return loom_buft_is_host(buft);
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
};

/* Device count asked for by LOOM_CPU_DEVICES: N >= 1, or 0 for numa. */
static int requested_devices(void)
{
	const char *s = loom_getenv("LOOM_CPU_DEVICES");
	char *end;
	long v;

	if (!s || !*s)
		return 1;
	if (!strcmp(s, "numa"))
		return 0;
	v = strtol(s, &end, 10);
	if (*end || v < 1 || v > 1024) {
		loom_log(LOOM_LOG_WARN,
			 "cpu: LOOM_CPU_DEVICES=%s is neither a count nor "
			 "'numa'; using 1 device", s);
		return 1;
	}
	return (int)v;
}

/* One partition per NUMA node that has allowed cores.  Returns the
 * count made, 0 when the machine shows no usable nodes. */
static int split_numa(struct cpu_reg *cr, const int *cpus, int n_cpus)
{
	int nodes[256];
	int n_nodes = numa_nodes(nodes, 256);
	int i, j, made = 0;

	if (n_nodes <= 0)
		return 0;
	cr->devices = calloc(n_nodes, sizeof(*cr->devices));
	if (!cr->devices)
		return -1;
	for (i = 0; i < n_nodes; i++) {
		struct cpu_device *cd = &cr->devices[made];
		cpu_set_t set;

		if (node_cpus(nodes[i], &set))
			continue;
		cd->cpus = malloc(sizeof(int) * n_cpus);
		if (!cd->cpus)
			return -1;
		for (j = 0; j < n_cpus; j++)
			if (CPU_ISSET(cpus[j], &set))
				cd->cpus[cd->n_cpus++] = cpus[j];
		if (!cd->n_cpus) {
			free(cd->cpus);
			cd->cpus = NULL;
			continue;
		}
		cd->numa_node = nodes[i];
		made++;
	}
	return made;
}

/* n partitions of contiguous groups; with more partitions than cores,
 * partitions share cores round-robin. */
static int split_even(struct cpu_reg *cr, const int *cpus, int n_cpus, int n)
{
	int i, j;

	cr->devices = calloc(n, sizeof(*cr->devices));
	if (!cr->devices)
		return -1;
	if (n > n_cpus)
		loom_log(LOOM_LOG_INFO,
			 "cpu: %d devices on %d cores: devices share cores",
			 n, n_cpus);
	for (i = 0; i < n; i++) {
		struct cpu_device *cd = &cr->devices[i];
		int lo, hi;

		if (n > n_cpus) {
			lo = i % n_cpus;
			hi = lo + 1;
		} else {
			lo = (int)((long)n_cpus * i / n);
			hi = (int)((long)n_cpus * (i + 1) / n);
		}
		cd->cpus = malloc(sizeof(int) * (hi - lo));
		if (!cd->cpus)
			return -1;
		for (j = lo; j < hi; j++)
			cd->cpus[cd->n_cpus++] = cpus[j];
		cd->numa_node = -1;
	}
	return n;
}

int cpu_devices_init(struct cpu_reg *cr)
{
	char model[128], list[96];
	int *cpus, n_cpus, want, n = 0, i, err;

	n_cpus = allowed_cpus(&cpus);
	if (n_cpus < 0)
		return loom_set_error(LOOM_E_NOMEM, "cpu: out of memory");
	cpu_set_core_count(n_cpus);
	want = requested_devices();
	if (want == 0) {
		n = split_numa(cr, cpus, n_cpus);
		if (n == 0) {
			loom_log(LOOM_LOG_INFO,
				 "cpu: no NUMA nodes found; one device");
			free(cr->devices);
			cr->devices = NULL;
			want = 1;
		}
	}
	if (want > 0)
		n = split_even(cr, cpus, n_cpus, want);
	free(cpus);
	if (n < 0) {
		cr->n_devices = want > 0 ? want : 0;
		return loom_set_error(LOOM_E_NOMEM, "cpu: out of memory");
	}
	cr->n_devices = n;

	cpu_model(model, sizeof(model));
	for (i = 0; i < n; i++) {
		struct cpu_device *cd = &cr->devices[i];

		cd->cr = cr;
		cd->index = i;
		cd->n_devices = n;
		snprintf(cd->name, sizeof(cd->name), "cpu%d", i);
		format_cpus(list, sizeof(list), cd->cpus, cd->n_cpus);
		if (cd->numa_node >= 0)
			snprintf(cd->description, sizeof(cd->description),
				 "%s, NUMA node %d, cores %s (%s)", model,
				 cd->numa_node, list, CPU_VARIANT);
		else
			snprintf(cd->description, sizeof(cd->description),
				 "%s, cores %s (%s)", model, list,
				 CPU_VARIANT);
		err = loom_dev_new(cr->reg, &cpu_dev_iface, cd, &cd->dev);
		if (err)
			return err;
		err = cpu_buft_create(cr, cd);
		if (err)
			return err;
		loom_log(LOOM_LOG_DEBUG, "cpu: %s: cores %s", cd->name, list);
	}
	return LOOM_OK;
}

void cpu_devices_free(struct cpu_reg *cr)
{
	int i;

	if (!cr->devices)
		return;
	for (i = 0; i < cr->n_devices; i++)
		free(cr->devices[i].cpus);
	free(cr->devices);
	cr->devices = NULL;
	cr->n_devices = 0;
}
