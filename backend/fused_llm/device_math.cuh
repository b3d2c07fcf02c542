// What the fused ops' CUDA kernels share: float loads and stores of float, half and bfloat16,
// 16-byte packs, and the dtype tag the host side passes (no torch headers: nvcc compiles these
// files alone).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "fused_llm/kernel_dtype.h"

namespace torch_musa::fused_llm::device {

__device__ __forceinline__ float load(const float* p) { return *p; }
__device__ __forceinline__ float load(const __half* p) { return __half2float(*p); }
__device__ __forceinline__ float load(const __nv_bfloat16* p) { return __bfloat162float(*p); }
__device__ __forceinline__ void store(float* p, float v) { *p = v; }
__device__ __forceinline__ void store(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

// 16 bytes of T: one vector load or store.
template <typename T>
struct alignas(16) Pack {
  static constexpr int kN = 16 / sizeof(T);
  T v[kN];
};

inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls fn with a null pointer of the element type dt names (float, half or bfloat16).
template <typename Fn>
void with_type(KernelDtype dt, Fn&& fn) {
  switch (dt) {
    case KernelDtype::kHalf: fn(static_cast<__half*>(nullptr)); break;
    case KernelDtype::kBFloat16: fn(static_cast<__nv_bfloat16*>(nullptr)); break;
    default: fn(static_cast<float*>(nullptr));
  }
}

}  // namespace torch_musa::fused_llm::device
