/* SPDX-License-Identifier: MIT */
/* ops-binary.hip - the CUDA plugin's ops-binary.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-binary.cu"
