// Fused 2-D cross entropy: the argument checks its kernels share (CPU: cross_entropy.cpp,
// CUDA: cross_entropy_cuda.cpp), so both drivers name bad input the same way.
#pragma once

#include <optional>

#include "fused_llm/fused_llm.h"

namespace torch_musa::fused_llm {

constexpr int64_t kNone = 0, kMean = 1, kSum = 2;  // aten's reduction enum

inline void check_ce(const at::Tensor& x, const at::Tensor& t, const std::optional<at::Tensor>& w, int64_t reduction,
                     const char* op) {
  check_float_input(x, op, "the logits");
  TORCH_CHECK_VALUE(x.dim() == 2, "musa_fused::", op, ": the logits must be 2-D (rows, classes), got ", x.sizes());
  TORCH_CHECK_VALUE(t.dim() == 1 && t.size(0) == x.size(0) && !t.is_floating_point(), "musa_fused::", op,
                    ": the target must be ", x.size(0), " class indices (1-D integer), got ", t.sizes(), " ",
                    t.scalar_type());
  TORCH_CHECK_VALUE(!w || !w->defined() || w->numel() == x.size(1), "musa_fused::", op,
                    ": weight must have one entry per class (", x.size(1), "), got ", w->sizes());
  TORCH_CHECK_VALUE(reduction == kNone || reduction == kMean || reduction == kSum, "musa_fused::", op,
                    ": reduction must be 0 (none), 1 (mean) or 2 (sum), got ", reduction);
}

// The backward reads one gradient per row (none) or one number (mean, sum).
inline void check_grad_loss(const at::Tensor& grad_loss, int64_t rows, int64_t reduction) {
  const int64_t want = reduction == kNone ? rows : 1;
  TORCH_CHECK_VALUE(grad_loss.numel() == want, "musa_fused::_fused_cross_entropy_2d_backward: grad_loss must have ",
                    want, " elements for reduction ", reduction, ", got ", grad_loss.sizes());
}

}  // namespace torch_musa::fused_llm
