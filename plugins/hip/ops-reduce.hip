/* SPDX-License-Identifier: MIT */
/* ops-reduce.hip - the CUDA plugin's ops-reduce.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-reduce.cu"
