/* SPDX-License-Identifier: MIT */
/* bench-device.c - the limits of a device that is not the CPU, for the
 * commands that set their figures against a limit: copy bandwidth
 * measured in the same run on the device itself, and the dense BF16 peak
 * (from the plugin's features at the boost clock, and the datasheet's).
 */
#include "bench-util.h"

#include <loom/loom-backend.h>

#include <stdlib.h>
#include <string.h>

/* Dense BF16 tensor-core TFLOP/s from the vendors' datasheets, by a part
 * of the device description; the first match wins. */
static const struct {
	const char *name;
	double tflops;
} datasheet[] = {
	{ "H200", 989 },
	{ "H100 PCIe", 756 },
	{ "H100 NVL", 835 },
	{ "H100", 989 },
	{ "A100", 312 },
	{ "L40S", 362 },
	{ "MI300X", 1307 },
	{ "MI250X", 383 },
};

bool bench_dev_is_cpu(loom_dev_t *dev)
{
	return loom_dev_type(dev) == LOOM_DEV_TYPE_CPU;
}

/* The value of the plugin feature "<dev>.<what>", or 0. */
static double feature(loom_dev_t *dev, const char *what)
{
	loom_reg_t *reg = loom_dev_reg(dev);
	loom_get_features_fn f = (loom_get_features_fn)
		loom_reg_proc_address(reg, LOOM_PROC_GET_FEATURES);
	size_t n = strlen(loom_dev_name(dev));

	for (const struct loom_feature *ft = f ? f(reg) : NULL;
	     ft && ft->name; ft++)
		if (!strncmp(ft->name, loom_dev_name(dev), n) &&
		    ft->name[n] == '.' && !strcmp(ft->name + n + 1, what))
			return strtod(ft->value, NULL);
	return 0;
}

int bench_device_limits(loom_dev_t *dev, const struct bench_opts *o,
			struct bench_device *out)
{
	const int64_t n = (int64_t)1 << 28; /* 1 GiB of F32 */
	const char *desc = loom_dev_description(dev);
	struct loom_tensor *x, *y;
	loom_buffer_t *buf = NULL;
	loom_ctx_t *ctx;
	double t;
	int ret;

	memset(out, 0, sizeof(*out));
	out->boost_tflops = feature(dev, "peak_bf16_tflops");
	out->hbm_gbps = feature(dev, "mem_bandwidth_gbs");
	for (size_t i = 0; i < sizeof(datasheet) / sizeof(datasheet[0]); i++)
		if (desc && strstr(desc, datasheet[i].name)) {
			out->datasheet_tflops = datasheet[i].tflops;
			break;
		}
	/* A device-to-device copy, counting bytes read and written. */
	ret = loom_ctx_new(0, &ctx);
	if (ret)
		return ret;
	x = loom_tensor_new_1d(ctx, LOOM_TYPE_F32, n);
	ret = loom_ctx_alloc_tensors(ctx, loom_dev_buffer_type(dev), &buf);
	if (!ret)
		ret = loom_tensor_memset(x, 0x3f, 0, loom_tensor_n_bytes(x));
	y = ret ? NULL : loom_cont(ctx, loom_reshape_2d(ctx, x, n / 2, 2));
	if (!ret && !y)
		ret = loom_error_set(LOOM_E_INVAL, "%s", loom_ctx_error(ctx));
	if (!ret)
		ret = bench_graph_time(dev, o, ctx, y, &t, NULL);
	if (!ret)
		out->copy_gbps = 2.0 * (double)loom_tensor_n_bytes(x) / t * 1e-9;
	loom_buffer_free(buf);
	loom_ctx_free(ctx);
	return ret;
}
