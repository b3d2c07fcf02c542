// Fused LLM ops: helpers their CPU kernels share. A row of a half or float
// tensor is converted to float once, computed in float, and written back.
#pragma once

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <c10/util/Exception.h>

#include "fused_llm/kernel_dtype.h"

namespace torch_musa::fused_llm {

inline void check_float_input(const at::Tensor& t, const char* op, const char* what) {
  const auto d = t.scalar_type();
  TORCH_CHECK_VALUE(d == at::kFloat || d == at::kHalf || d == at::kBFloat16, "musa_fused::", op, ": ", what,
                    " must be float32, float16 or bfloat16, got ", d);
}

template <typename T>
inline void load_row(const T* src, float* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

template <typename T>
inline void store_row(const float* src, T* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<T>(src[i]);
}

// Calls fn with a value of the tensor's element type (float, Half or BFloat16).
template <typename Fn>
inline void dispatch_float(c10::ScalarType t, Fn&& fn) {
  if (t == at::kFloat) fn(float{});
  else if (t == at::kHalf) fn(c10::Half{});
  else fn(c10::BFloat16{});
}

// The CUDA kernels' name for a tensor's element type (float for anything not listed).
inline KernelDtype kernel_dtype(at::ScalarType t) {
  return t == at::kHalf       ? KernelDtype::kHalf
         : t == at::kBFloat16 ? KernelDtype::kBFloat16
         : t == at::kDouble   ? KernelDtype::kDouble
                              : KernelDtype::kFloat;
}

}  // namespace torch_musa::fused_llm
