// Fused 2-D cross entropy's CUDA kernels (cross_entropy_kernels.cu): raw pointers and a
// stream, no torch types, so nvcc compiles them without torch's headers.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "fused_llm/kernel_dtype.h"

namespace torch_musa::fused_llm::ce_kernels {

using Dtype = KernelDtype;

// Logits x (M, C) contiguous; t int64 (M,); w float (C,) or null. rows: each row's loss in
// rows_dt (the loss itself for reduction 0, float scratch otherwise); loss: the reduced loss
// in loss_dt (reductions 1 mean, 2 sum); lse float (M,); denom float ().
struct Forward {
  const void* x;
  Dtype x_dt;
  int64_t M, C;
  const int64_t* t;
  const float* w;
  int64_t ignore_index, reduction;
  void* rows;
  Dtype rows_dt;
  void* loss;
  Dtype loss_dt;
  float* lse;
  float* denom;
};

// g: the loss's gradient in g_dt, read at row * g_stride (stride 0: one number); dx like x.
struct Backward {
  const void* g;
  Dtype g_dt;
  int64_t g_stride;
  const float* denom;
  bool mean;
  const void* x;
  Dtype x_dt;
  int64_t M, C;
  const int64_t* t;
  const float* w;
  const float* lse;
  void* dx;
  int64_t ignore_index;
};

cudaError_t forward(const Forward& args, cudaStream_t stream);
cudaError_t backward(const Backward& args, cudaStream_t stream);

}  // namespace torch_musa::fused_llm::ce_kernels
