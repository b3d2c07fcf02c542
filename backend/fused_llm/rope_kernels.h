// RoPE's CUDA kernels (rope_kernels.cu): raw pointers and a stream, no torch types.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "fused_llm/kernel_dtype.h"

namespace torch_musa::fused_llm::rope_kernels {

// x, y: rows of D contiguous features; freq: float angles (S, R), contiguous; a row's position
// is (row / inner) % S. backward: the transpose (x is the gradient of y).
struct Rope {
  const void* x;
  void* y;
  KernelDtype dt;
  const float* freq;
  int64_t rows, D, R, S, inner;
  bool interleaved, mla, backward;
};

cudaError_t rope(const Rope& args, cudaStream_t stream);

}  // namespace torch_musa::fused_llm::rope_kernels
