/* SPDX-License-Identifier: MIT */
/* features.c - what the CUDA plugin reports through get_features:
 * versions, what was built in, and each device's memory bandwidth and
 * BF16 peak.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cuda-plugin.h"

static void add_feature(struct cuda_reg *reg, const char *name,
			const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Appends a name/value pair to the "get_features" list. */
static void add_feature(struct cuda_reg *reg, const char *name,
			const char *fmt, ...)
{
	int n = 0;
	va_list ap;

	while (reg->features[n].name)
		n++;
	if (n >= CUDA_MAX_FEATURES)
		return;
	snprintf(reg->feature_text[n][0], sizeof(reg->feature_text[n][0]),
		 "%s", name);
	va_start(ap, fmt);
	vsnprintf(reg->feature_text[n][1], sizeof(reg->feature_text[n][1]),
		  fmt, ap);
	va_end(ap);
	reg->features[n].name = reg->feature_text[n][0];
	reg->features[n].value = reg->feature_text[n][1];
}

static int dev_attr(int id, enum cudaDeviceAttr attr)
{
	int v = 0;

	if (cudaDeviceGetAttribute(&v, attr, id) != cudaSuccess) {
		(void)cudaGetLastError();
		v = 0;
	}
	return v;
}

/* Dense BF16 tensor-core FLOPs per SM per clock, for the peak figure. */
static int bf16_flops_per_clock(int cc)
{
#ifdef LOOM_HIP
	return 0;
#else
	switch (cc / 10) {
	case 8:
		return cc == 80 ? 2048 : 1024;
	case 9:
		return 4096;
	case 10:
		return 8192;
	default:
		return 0;
	}
#endif
}

/* What loom-info and loom-bench show: versions, what was built in, and
 * each device's memory bandwidth and BF16 peak (at the boost clock). */
void cuda_init_features(struct cuda_reg *reg)
{
	int v = 0;

	memset(reg->features, 0, sizeof(reg->features));
	if (cudaRuntimeGetVersion(&v) == cudaSuccess)
		add_feature(reg, "runtime", "%d", v);
	v = 0;
	if (cudaDriverGetVersion(&v) == cudaSuccess)
		add_feature(reg, "driver", "%d", v);
	(void)cudaGetLastError();
#ifdef LOOM_GPU_ARCHS
	add_feature(reg, "archs", "%s", LOOM_GPU_ARCHS);
#endif
#ifdef LOOM_HAVE_BLAS
	add_feature(reg, "blas", "%s", LOOM_GPU_BLAS);
#else
	add_feature(reg, "blas", "none (own GEMM kernel)");
#endif
#ifdef LOOM_HAVE_NCCL
	add_feature(reg, "allreduce", "%s %d.%d.%d", LOOM_GPU_CCL, NCCL_MAJOR,
		    NCCL_MINOR, NCCL_PATCH);
#else
	add_feature(reg, "allreduce", "none");
#endif
	for (int i = 0; i < reg->n_dev; i++) {
		struct cuda_dev *cd = &reg->devs[i];
		char name[48];
		double mem_khz = dev_attr(cd->id, cudaDevAttrMemoryClockRate);
		double bus = dev_attr(cd->id, cudaDevAttrGlobalMemoryBusWidth);
		double khz = dev_attr(cd->id, cudaDevAttrClockRate);
		double sms = dev_attr(cd->id, cudaDevAttrMultiProcessorCount);
		int per_clock = bf16_flops_per_clock(cd->cc);

		if (mem_khz > 0 && bus > 0) {
			snprintf(name, sizeof(name), "%s.mem_bandwidth_gbs",
				 cd->name);
			add_feature(reg, name, "%.0f",
				    2.0 * mem_khz * 1e3 * bus / 8 / 1e9);
		}
		if (khz > 0) {
			snprintf(name, sizeof(name), "%s.clock_mhz", cd->name);
			add_feature(reg, name, "%.0f", khz / 1e3);
		}
		if (per_clock && khz > 0 && sms > 0) {
			snprintf(name, sizeof(name), "%s.peak_bf16_tflops",
				 cd->name);
			add_feature(reg, name, "%.0f",
				    sms * khz * 1e3 * per_clock / 1e12);
		}
	}
}
