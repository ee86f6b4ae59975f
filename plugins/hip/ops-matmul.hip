/* SPDX-License-Identifier: MIT */
/* ops-matmul.hip - the CUDA plugin's ops-matmul.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-matmul.cu"
