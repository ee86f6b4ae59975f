/* SPDX-License-Identifier: MIT */
/* ops-copy.hip - the CUDA plugin's ops-copy.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-copy.cu"
