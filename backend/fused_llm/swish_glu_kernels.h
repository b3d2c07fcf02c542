// SwishGLU's CUDA kernels (swish_glu_kernels.cu): raw pointers and a stream, no torch types.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "fused_llm/kernel_dtype.h"

namespace torch_musa::fused_llm::glu_kernels {

// x: rows of 2n contiguous elements (halves a, b); y: rows of n. g like y, dx like x.
cudaError_t forward(const void* x, void* y, KernelDtype dt, int64_t rows, int64_t n, cudaStream_t stream);
cudaError_t backward(const void* g, const void* x, void* dx, KernelDtype dt, int64_t rows, int64_t n,
                     cudaStream_t stream);

}  // namespace torch_musa::fused_llm::glu_kernels
