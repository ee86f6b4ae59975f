/* SPDX-License-Identifier: MIT */
/* ops-rope.hip - the CUDA plugin's ops-rope.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-rope.cu"
