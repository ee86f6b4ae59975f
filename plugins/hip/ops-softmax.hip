/* SPDX-License-Identifier: MIT */
/* ops-softmax.hip - the CUDA plugin's ops-softmax.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-softmax.cu"
