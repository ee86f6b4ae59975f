/* SPDX-License-Identifier: MIT */
/* ops-norm.hip - the CUDA plugin's ops-norm.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-norm.cu"
