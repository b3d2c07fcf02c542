// SwishGLU: the argument checks its kernels share (CPU: swish_glu.cpp, CUDA: swish_glu_cuda.cpp).
#pragma once

#include "fused_llm/fused_llm.h"

namespace torch_musa::fused_llm {

inline void check_glu(const at::Tensor& x, const char* op) {
  check_float_input(x, op, "the input");
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) % 2 == 0, "musa_fused::", op,
                    ": the input's last dimension must be even (two halves), got ", x.sizes());
}

inline void check_glu_grad(const at::Tensor& g, const at::Tensor& x) {
  check_glu(x, "_fused_swiglu_backward");
  check_float_input(g, "_fused_swiglu_backward", "grad");
  TORCH_CHECK_VALUE(g.numel() * 2 == x.numel(), "musa_fused::_fused_swiglu_backward: grad ", g.sizes(),
                    " does not match the input ", x.sizes());
}

}  // namespace torch_musa::fused_llm
