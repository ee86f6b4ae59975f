/* SPDX-License-Identifier: MIT */
/* ops-moe.hip - the CUDA plugin's ops-moe.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-moe.cu"
