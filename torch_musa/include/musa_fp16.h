// Half precision for extension code: CUDA's cuda_fp16.h on the cuda driver; on the host
// driver __half is c10::Half (arithmetic in float, as the intrinsics below round once).
#pragma once

#if defined(TORCH_MUSA_EXT_CUDA) || (defined(__CUDACC__) && !defined(TORCH_MUSA_EXT_HOST))
#include <cuda_fp16.h>
#else
#include <c10/util/Half.h>

using __half = c10::Half;
using half = c10::Half;
struct alignas(4) __half2 {
  __half x, y;
};

inline __half __float2half(float f) { return __half(f); }
inline __half __float2half_rn(float f) { return __half(f); }
inline float __half2float(__half h) { return static_cast<float>(h); }
inline __half2 __floats2half2_rn(float a, float b) { return __half2{__half(a), __half(b)}; }
inline __half2 __float2half2_rn(float a) { return __half2{__half(a), __half(a)}; }
inline float __low2float(__half2 h) { return static_cast<float>(h.x); }
inline float __high2float(__half2 h) { return static_cast<float>(h.y); }
inline __half __hadd(__half a, __half b) { return __half(float(a) + float(b)); }
inline __half __hsub(__half a, __half b) { return __half(float(a) - float(b)); }
inline __half __hmul(__half a, __half b) { return __half(float(a) * float(b)); }
inline __half __hdiv(__half a, __half b) { return __half(float(a) / float(b)); }
inline __half __hfma(__half a, __half b, __half c) { return __half(float(a) * float(b) + float(c)); }
inline __half __hneg(__half a) { return __half(-float(a)); }
inline __half __hmax(__half a, __half b) { return float(a) < float(b) ? b : a; }
inline __half __hmin(__half a, __half b) { return float(b) < float(a) ? b : a; }
inline bool __hlt(__half a, __half b) { return float(a) < float(b); }
inline bool __hgt(__half a, __half b) { return float(a) > float(b); }
inline bool __heq(__half a, __half b) { return float(a) == float(b); }
inline __half2 __hadd2(__half2 a, __half2 b) { return __half2{__hadd(a.x, b.x), __hadd(a.y, b.y)}; }
inline __half2 __hmul2(__half2 a, __half2 b) { return __half2{__hmul(a.x, b.x), __hmul(a.y, b.y)}; }
inline __half hexp(__half a) { return __half(std::exp(float(a))); }
inline __half hsqrt(__half a) { return __half(std::sqrt(float(a))); }
#endif
