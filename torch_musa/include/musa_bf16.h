// bfloat16 for extension code: CUDA's cuda_bf16.h on the cuda driver (__nv_bfloat16, also
// named __mt_bfloat16 here); c10::BFloat16 on the host driver.
#pragma once

#if defined(TORCH_MUSA_EXT_CUDA) || (defined(__CUDACC__) && !defined(TORCH_MUSA_EXT_HOST))
#include <cuda_bf16.h>
using __mt_bfloat16 = __nv_bfloat16;
#else
#include <c10/util/BFloat16.h>

using __mt_bfloat16 = c10::BFloat16;
using __nv_bfloat16 = c10::BFloat16;
inline __mt_bfloat16 __float2bfloat16(float f) { return __mt_bfloat16(f); }
inline float __bfloat162float(__mt_bfloat16 h) { return static_cast<float>(h); }
#endif
