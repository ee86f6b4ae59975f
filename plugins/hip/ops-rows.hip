/* SPDX-License-Identifier: MIT */
/* ops-rows.hip - the CUDA plugin's ops-rows.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-rows.cu"
