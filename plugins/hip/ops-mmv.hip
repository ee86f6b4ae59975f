/* SPDX-License-Identifier: MIT */
/* ops-mmv.hip - the CUDA plugin's ops-mmv.cu built by hipcc for the HIP
 * plugin (names mapped by cuda-to-hip.h).
 */
#include "../cuda/ops-mmv.cu"
