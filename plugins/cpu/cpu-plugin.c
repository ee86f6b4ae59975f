/* SPDX-License-Identifier: MIT */
/* cpu-plugin.c - the CPU plugin's descriptor, registry entry, entry
 * points by name, and the instruction-set checks behind the variants'
 * scores and the features list.
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-private.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define CPU_X86 1
/* The score runs before the loader knows the variant fits this CPU, so
 * its code must not use the variant's instructions. */
#define CPU_BASELINE __attribute__((target("arch=x86-64")))
#else
#define CPU_X86 0
#define CPU_BASELINE
#endif

#if defined(__aarch64__)
#include <sys/auxv.h>
#endif

enum {
	FEAT_SSE42,
	FEAT_AVX,
	FEAT_AVX2,
	FEAT_FMA,
	FEAT_F16C,
	FEAT_BMI2,
	FEAT_AVX512F,
	FEAT_AVX512BW,
	FEAT_AVX512DQ,
	FEAT_AVX512VL,
	FEAT_AVX512CD,
	FEAT_AVX512_VNNI,
	FEAT_AVX512_BF16,
	FEAT_AVX512_FP16,
	FEAT_AMX_BF16,
	FEAT_NEON,
	FEAT_SVE,
	FEAT_DOTPROD,
	FEAT_COUNT
};

static const char *const feat_names[FEAT_COUNT] = {
	[FEAT_SSE42] = "SSE4_2",
	[FEAT_AVX] = "AVX",
	[FEAT_AVX2] = "AVX2",
	[FEAT_FMA] = "FMA",
	[FEAT_F16C] = "F16C",
	[FEAT_BMI2] = "BMI2",
	[FEAT_AVX512F] = "AVX512F",
	[FEAT_AVX512BW] = "AVX512BW",
	[FEAT_AVX512DQ] = "AVX512DQ",
	[FEAT_AVX512VL] = "AVX512VL",
	[FEAT_AVX512CD] = "AVX512CD",
	[FEAT_AVX512_VNNI] = "AVX512_VNNI",
	[FEAT_AVX512_BF16] = "AVX512_BF16",
	[FEAT_AVX512_FP16] = "AVX512_FP16",
	[FEAT_AMX_BF16] = "AMX_BF16",
	[FEAT_NEON] = "NEON",
	[FEAT_SVE] = "SVE",
	[FEAT_DOTPROD] = "DOTPROD",
};

#if CPU_X86
CPU_BASELINE static uint64_t xgetbv0(void)
{
	uint32_t lo, hi;

	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	return ((uint64_t)hi << 32) | lo;
}
#endif

/* Fills have[] with what this CPU (and its OS) can run. */
CPU_BASELINE static void detect(bool *have)
{
	int i;

	for (i = 0; i < FEAT_COUNT; i++)
		have[i] = false;
#if CPU_X86
	{
		unsigned int a, b, c, d, max;
		unsigned int c1 = 0, b7 = 0, c7 = 0, d7 = 0, a71 = 0;
		bool ymm = false, zmm = false;

		max = __get_cpuid_max(0, NULL);
		if (max >= 1 && __get_cpuid(1, &a, &b, &c, &d))
			c1 = c;
		if (max >= 7) {
			__cpuid_count(7, 0, a, b, c, d);
			b7 = b;
			c7 = c;
			d7 = d;
			__cpuid_count(7, 1, a, b, c, d);
			a71 = a;
		}
		if (c1 & (1u << 27)) { /* OSXSAVE */
			uint64_t xcr0 = xgetbv0();

			ymm = (xcr0 & 0x6) == 0x6;
			zmm = ymm && (xcr0 & 0xe0) == 0xe0;
		}
		have[FEAT_SSE42] = c1 & (1u << 20);
		have[FEAT_AVX] = ymm && (c1 & (1u << 28));
		have[FEAT_FMA] = ymm && (c1 & (1u << 12));
		have[FEAT_F16C] = ymm && (c1 & (1u << 29));
		have[FEAT_AVX2] = ymm && (b7 & (1u << 5));
		have[FEAT_BMI2] = b7 & (1u << 8);
		have[FEAT_AVX512F] = zmm && (b7 & (1u << 16));
		have[FEAT_AVX512DQ] = zmm && (b7 & (1u << 17));
		have[FEAT_AVX512CD] = zmm && (b7 & (1u << 28));
		have[FEAT_AVX512BW] = zmm && (b7 & (1u << 30));
		have[FEAT_AVX512VL] = zmm && (b7 & (1u << 31));
		have[FEAT_AVX512_VNNI] = zmm && (c7 & (1u << 11));
		have[FEAT_AVX512_FP16] = zmm && (d7 & (1u << 23));
		have[FEAT_AMX_BF16] = d7 & (1u << 22);
		have[FEAT_AVX512_BF16] = zmm && (a71 & (1u << 5));
	}
#elif defined(__aarch64__)
	{
		unsigned long hw = getauxval(AT_HWCAP);

		have[FEAT_NEON] = true;
		have[FEAT_SVE] = hw & (1ul << 22);
		have[FEAT_DOTPROD] = hw & (1ul << 20);
	}
#elif defined(__ARM_NEON)
	have[FEAT_NEON] = true;
#endif
}

/* Each variant's score: 0 (with the reason) when this CPU lacks what the
 * variant was compiled for. */
CPU_BASELINE static int cpu_score(const char **why)
{
	bool have[FEAT_COUNT];
	const char *v = CPU_VARIANT;

	detect(have);
	if (!strcmp(v, "x86_64_v3")) {
		if (!(have[FEAT_AVX2] && have[FEAT_FMA] && have[FEAT_F16C] &&
		      have[FEAT_BMI2])) {
			*why = "needs AVX2, FMA, F16C and BMI2 (x86-64-v3)";
			return 0;
		}
		return 10;
	}
	if (!strcmp(v, "x86_64_v4")) {
		if (!(have[FEAT_AVX2] && have[FEAT_FMA] && have[FEAT_F16C] &&
		      have[FEAT_BMI2] && have[FEAT_AVX512F] &&
		      have[FEAT_AVX512BW] && have[FEAT_AVX512DQ] &&
		      have[FEAT_AVX512VL] && have[FEAT_AVX512CD])) {
			*why = "needs AVX-512 F, BW, CD, DQ and VL "
			       "(x86-64-v4)";
			return 0;
		}
		return 20;
	}
	return 1;
}

static struct loom_feature features[FEAT_COUNT + 3];
static pthread_once_t features_once = PTHREAD_ONCE_INIT;
static char partitions_str[16];

static void features_init(void)
{
	bool have[FEAT_COUNT];
	int i, n = 0;

	detect(have);
	features[n].name = "VARIANT";
	features[n++].value = CPU_VARIANT;
	for (i = 0; i < FEAT_COUNT; i++) {
#if CPU_X86
		if (i >= FEAT_NEON)
			continue;
#else
		if (i < FEAT_NEON)
			continue;
#endif
		features[n].name = feat_names[i];
		features[n++].value = have[i] ? "1" : "0";
	}
	features[n].name = "PARTITIONS";
	features[n++].value = partitions_str;
	features[n].name = NULL;
	features[n].value = NULL;
}

const struct loom_feature *cpu_get_features(loom_reg_t *reg)
{
	struct cpu_reg *cr = loom_reg_context(reg);

	snprintf(partitions_str, sizeof(partitions_str), "%d",
		 cr ? cr->n_devices : 0);
	pthread_once(&features_once, features_init);
	return features;
}

static const char *reg_get_name(loom_reg_t *reg)
{
	return "cpu";
}

static size_t reg_get_dev_count(loom_reg_t *reg)
{
	struct cpu_reg *cr = loom_reg_context(reg);

	return cr->n_devices;
}

static loom_dev_t *reg_get_dev(loom_reg_t *reg, size_t i)
{
	struct cpu_reg *cr = loom_reg_context(reg);

	return i < (size_t)cr->n_devices ? cr->devices[i].dev : NULL;
}

static void *reg_get_proc_address(loom_reg_t *reg, const char *name)
{
	if (!strcmp(name, LOOM_PROC_SET_TENSOR_2D))
		return (void *)cpu_set_tensor_2d;
	if (!strcmp(name, LOOM_PROC_GET_TENSOR_2D))
		return (void *)cpu_get_tensor_2d;
	if (!strcmp(name, LOOM_PROC_SET_TENSOR_2D_ASYNC))
		return (void *)cpu_set_tensor_2d_async;
	if (!strcmp(name, LOOM_PROC_GET_TENSOR_2D_ASYNC))
		return (void *)cpu_get_tensor_2d_async;
	if (!strcmp(name, LOOM_PROC_ALLREDUCE))
		return (void *)cpu_allreduce;
	if (!strcmp(name, LOOM_PROC_SET_N_THREADS))
		return (void *)cpu_backend_set_n_threads;
	if (!strcmp(name, LOOM_PROC_GET_FEATURES))
		return (void *)cpu_get_features;
	if (!strcmp(name, LOOM_PROC_WEIGHT_BUFFER_TYPE) && cpu_w_available())
		return (void *)cpu_weight_buffer_type;
	return NULL;
}

static void reg_free(loom_reg_t *reg)
{
	struct cpu_reg *cr = loom_reg_context(reg);

	cpu_devices_free(cr);
	pthread_mutex_destroy(&cr->post_lock);
	free(cr);
}

static const struct loom_reg_iface cpu_reg_iface = {
	.size = sizeof(struct loom_reg_iface),
	.get_name = reg_get_name,
	.get_dev_count = reg_get_dev_count,
	.get_dev = reg_get_dev,
	.get_proc_address = reg_get_proc_address,
	.free = reg_free,
};

static int cpu_init(loom_reg_t **out)
{
	struct cpu_reg *cr = calloc(1, sizeof(*cr));
	int err;

	if (!cr)
		return loom_error_set(LOOM_E_NOMEM, "cpu: out of memory");
	pthread_mutex_init(&cr->post_lock, NULL);
	err = loom_reg_new(&cpu_reg_iface, cr, &cr->reg);
	if (err) {
		pthread_mutex_destroy(&cr->post_lock);
		free(cr);
		return err;
	}
	/* From here the core owns cr through the reg and frees it with
	 * reg_free, also when init fails. */
	*out = cr->reg;
	return cpu_devices_init(cr);
}

LOOM_PLUGIN_DEFINE("cpu", PACKAGE_VERSION, cpu_init, cpu_score);
