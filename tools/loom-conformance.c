/* SPDX-License-Identifier: MIT */
/* loom-conformance.c - the op-conformance suite (tests/ops-suite.c) run on
 * an installed Loom against any device, for plugin authors: a table per
 * device or TAP, how many ops the device claims, non-zero on a failure. */
#include "config.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops-suite.h"

/* The messages of the case running now, shown when it fails (or with
 * --verbose). */
struct case_log {
	char **v;
	size_t n;
	char *skip;
};

static struct case_log cur;
static bool verbose;

static void on_message(const char *msg, void *data)
{
	char **v = realloc(cur.v, (cur.n + 1) * sizeof(*v));
	char *s = strdup(msg);

	if (!v || !s) {
		free(s);
		if (v)
			cur.v = v;
		return;
	}
	cur.v = v;
	cur.v[cur.n++] = s;
}

static void on_skip(const char *why, void *data)
{
	free(cur.skip);
	cur.skip = strdup(why);
}

static void log_clear(void)
{
	for (size_t i = 0; i < cur.n; i++)
		free(cur.v[i]);
	free(cur.v);
	free(cur.skip);
	memset(&cur, 0, sizeof(cur));
}

static void log_print(FILE *f, const char *prefix)
{
	for (size_t i = 0; i < cur.n; i++)
		fprintf(f, "%s%s\n", prefix, cur.v[i]);
}

static const struct ops_report tool_report = {
	.message = on_message,
	.skip = on_skip,
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: loom-conformance [--device NAME[,NAME...]] "
		"[--ops LIST] [--tap]\n"
		"                        [--verbose] [--help] [--version]\n"
		"\n"
		"Runs every op of Loom, on seeded inputs of every type and "
		"layout, on\n"
		"each device, and compares the results with a double-precision "
		"reference.\n"
		"Says how many ops each device claims (its supports_op), and "
		"fails when\n"
		"a case differs or a device claims no op at all.\n"
		"\n"
		"  -d, --device LIST   devices by name, comma-separated "
		"(default: all)\n"
		"  -o, --ops LIST      ops by name (as loom_op_name gives "
		"them; \"graph\"\n"
		"                      for the composite cases), "
		"comma-separated\n"
		"  -t, --tap           TAP output instead of a table\n"
		"  -v, --verbose       every case's result and NMSE\n"
		"  -h, --help          print this help\n"
		"  -V, --version       print the version and exit\n"
		"\n"
		"Environment: LOOM_PLUGIN_PATH (your plugin's directory, "
		"searched first),\n"
		"LOOM_BACKENDS (\"yours\" loads only your plugin), "
		"LOOM_PLUGIN_SYSTEM_PATH,\n"
		"LOOM_LOG, and the plugins' own variables (see loom(7)).\n"
		"\n"
		"Exits with 0 when every case that ran passed, 1 when one "
		"failed or a\n"
		"device claims no op, 2 on a bad option or device name.\n");
}

/* Per op of one device: how its cases went. */
struct op_count {
	const char *op;
	int pass, fail, skip;
};

/* The distinct op names of the selected cases, in case order. */
static size_t list_ops(const char *ops, struct op_count *counts)
{
	size_t n = 0;

	for (size_t i = 0; i < ops_case_count(); i++) {
		const char *op = ops_case_op(ops_case_get(i));
		size_t j;

		if (!ops_list_has(ops, op))
			continue;
		for (j = 0; j < n && strcmp(counts[j].op, op); j++)
			;
		if (j == n)
			counts[n++] = (struct op_count){ .op = op };
	}
	return n;
}

/* Every name in ops must be an op of the suite. */
static bool check_ops(const char *ops, struct op_count *all, size_t n_all)
{
	char *copy, *save = NULL;
	bool ok = true;

	if (!ops || !*ops)
		return true;
	copy = strdup(ops);
	for (char *p = strtok_r(copy, ", ", &save); p;
	     p = strtok_r(NULL, ", ", &save)) {
		size_t j;

		for (j = 0; j < n_all && strcmp(all[j].op, p); j++)
			;
		if (j < n_all)
			continue;
		fprintf(stderr, "loom-conformance: no op '%s'; the ops are:",
			p);
		for (j = 0; j < n_all; j++)
			fprintf(stderr, "%s%s", j ? ", " : " ", all[j].op);
		fprintf(stderr, "\n");
		ok = false;
	}
	free(copy);
	return ok;
}

/* Runs the selected cases on one device.  Returns the number of cases
 * that failed, plus one when the device claims no op. */
static int run_device(loom_dev_t *dev, const char *ops, bool tap,
		      int *tap_n)
{
	struct op_count *counts = calloc(ops_case_count() + 1,
					 sizeof(*counts));
	struct ops_dev d = { .dev = dev, .name = loom_dev_name(dev) };
	int failed = 0, claimed = 0, cases = 0, ran = 0;
	size_t n_ops;

	if (!counts) {
		fprintf(stderr, "loom-conformance: out of memory\n");
		return 1;
	}
	n_ops = list_ops(ops, counts);
	if (!tap)
		printf("%s: %s\n", d.name, loom_dev_description(dev));
	for (size_t i = 0; i < ops_case_count(); i++) {
		const struct op_case *c = ops_case_get(i);
		const char *op = ops_case_op(c);
		struct op_count *oc = counts;
		enum ops_outcome r;

		if (!ops_list_has(ops, op))
			continue;
		while (strcmp(oc->op, op))
			oc++;
		r = ops_case_run(c, &d);
		cases++;
		if (tap) {
			++*tap_n;
			if (r == OPS_SKIP)
				printf("ok %d - %s %s/%s # SKIP %s\n", *tap_n,
				       d.name, op, ops_case_name(c),
				       cur.skip ? cur.skip : "");
			else
				printf("%s %d - %s %s/%s\n",
				       r == OPS_PASS ? "ok" : "not ok",
				       *tap_n, d.name, op, ops_case_name(c));
			if (r == OPS_FAIL || verbose)
				log_print(stdout, "# ");
		} else if (r == OPS_FAIL) {
			printf("  FAIL %s/%s\n", op, ops_case_name(c));
			log_print(stdout, "       ");
		} else if (verbose) {
			printf("  %s %s/%s%s%s\n",
			       r == OPS_PASS ? "ok  " : "skip", op,
			       ops_case_name(c), r == OPS_SKIP ? ": " : "",
			       r == OPS_SKIP && cur.skip ? cur.skip : "");
			log_print(stdout, "       ");
		}
		log_clear();
		oc->pass += r == OPS_PASS;
		oc->fail += r == OPS_FAIL;
		oc->skip += r == OPS_SKIP;
		failed += r == OPS_FAIL;
		ran += r != OPS_SKIP;
	}
	for (size_t j = 0; j < n_ops; j++)
		claimed += counts[j].pass + counts[j].fail > 0;

	if (!tap) {
		printf("  %-12s %6s %6s %6s %12s\n", "OP", "CASES", "PASS",
		       "FAIL", "UNSUPPORTED");
		for (size_t j = 0; j < n_ops; j++)
			printf("  %-12s %6d %6d %6d %12d\n", counts[j].op,
			       counts[j].pass + counts[j].fail + counts[j].skip,
			       counts[j].pass, counts[j].fail, counts[j].skip);
	}
	printf("%s%s claims %d of %zu ops (%d of %d cases); %d passed, "
	       "%d failed\n", tap ? "# " : "  ", d.name, claimed, n_ops, ran,
	       cases, ran - failed, failed);
	if (claimed == 0) {
		fflush(stdout);
		fprintf(stderr, "loom-conformance: %s claims none of the %zu "
				"ops: its supports_op refuses every case\n",
			d.name, n_ops);
		failed++;
	}
	if (!tap)
		printf("\n");
	ops_dev_clear(&d);
	free(counts);
	return failed;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, NULL, 'd' },
		{ "ops", required_argument, NULL, 'o' },
		{ "tap", no_argument, NULL, 't' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *devices = NULL, *ops = NULL;
	loom_dev_t **sel = NULL;
	struct op_count *all = NULL;
	size_t n_sel = 0, n_all;
	bool tap = false;
	int c, st, failed = 0, tap_n = 0, ret = 2;

	while ((c = getopt_long(argc, argv, "d:o:tvhV", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			devices = optarg;
			break;
		case 'o':
			ops = optarg;
			break;
		case 't':
			tap = true;
			break;
		case 'v':
			verbose = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("loom-conformance (Loom) %s\n", PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "loom-conformance: unexpected argument '%s'\n",
			argv[optind]);
		usage(stderr);
		return 2;
	}

	st = loom_load_all();
	if (st) {
		fprintf(stderr, "loom-conformance: %s\n", loom_error_message());
		goto out;
	}
	ops_set_report(&tool_report);
	ops_cases_make();
	all = calloc(ops_case_count() + 1, sizeof(*all));
	sel = calloc(loom_dev_count() + 1, sizeof(*sel));
	if (!all || !sel) {
		fprintf(stderr, "loom-conformance: out of memory\n");
		goto out;
	}
	n_all = list_ops(NULL, all);
	if (!check_ops(ops, all, n_all))
		goto out;

	/* Every name given must be a device, in the order given. */
	for (const char *p = devices; p && *p;) {
		size_t len = strcspn(p, ",");
		char name[LOOM_MAX_NAME];
		loom_dev_t *dev;

		if (len && len < sizeof(name)) {
			memcpy(name, p, len);
			name[len] = 0;
			dev = loom_dev_by_name(name);
			if (!dev) {
				fprintf(stderr, "loom-conformance: no device "
						"'%s'; the devices are:", name);
				for (size_t i = 0; i < loom_dev_count(); i++)
					fprintf(stderr, "%s%s", i ? ", " : " ",
						loom_dev_name(loom_dev_get(i)));
				fprintf(stderr, "%s\n",
					loom_dev_count() ? "" : " none "
					"(see loom-info)");
				goto out;
			}
			sel[n_sel++] = dev;
		}
		p += len + (p[len] == ',');
	}
	if (!devices)
		for (size_t i = 0; i < loom_dev_count(); i++)
			sel[n_sel++] = loom_dev_get(i);
	if (n_sel == 0) {
		fprintf(stderr, "loom-conformance: no device to test (see "
				"loom-info)\n");
		goto out;
	}

	if (tap) {
		size_t n = 0;

		for (size_t i = 0; i < ops_case_count(); i++)
			n += ops_list_has(ops, ops_case_op(ops_case_get(i)));
		printf("1..%zu\n", n * n_sel);
	}
	for (size_t i = 0; i < n_sel; i++)
		failed += run_device(sel[i], ops, tap, &tap_n);
	ret = failed ? 1 : 0;

out:
	free(all);
	free(sel);
	ops_cases_free();
	/* Refused while something made from a plugin is still alive: a
	 * leak in the suite or the plugin. */
	if (loom_unload_all()) {
		fprintf(stderr, "loom-conformance: %s\n", loom_error_message());
		if (!ret)
			ret = 1;
	}
	return ret;
}
