/* SPDX-License-Identifier: MIT */
/* ops-unary.hip - the CUDA plugin's ops-unary.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-unary.cu"
