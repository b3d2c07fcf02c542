// RoPE: the argument checks its kernels share (CPU: rope.cpp, CUDA: rope_cuda.cpp), and the
// shape they read: rows of D features, R of them rotating, a row's position (row / inner) % S.
#pragma once

#include <algorithm>

#include "fused_llm/fused_llm.h"

namespace torch_musa::fused_llm {

struct RopeShape {
  int64_t rows, D, R, S, inner;  // inner: rows per sequence position step
};

inline RopeShape check_rope(const at::Tensor& x, const at::Tensor& freq, bool batch_first, const char* op) {
  check_float_input(x, op, "the input");
  TORCH_CHECK_VALUE(freq.is_floating_point(), "musa_fused::", op, ": freq_cis must be a floating tensor, got ",
                    freq.scalar_type());
  TORCH_CHECK_VALUE(x.dim() == 4, "musa_fused::", op, ": the input must be 4-D ",
                    batch_first ? "(batch, seq, heads, dim)" : "(seq, batch, heads, dim)", ", got ", x.sizes());
  TORCH_CHECK_VALUE(freq.dim() == 2 || (freq.dim() == 4 && freq.size(1) == 1 && freq.size(2) == 1), "musa_fused::", op,
                    ": freq_cis must be (seq, rot_dim) or (seq, 1, 1, rot_dim), got ", freq.sizes());
  const int64_t S = batch_first ? x.size(1) : x.size(0);
  const int64_t R = freq.size(-1), D = x.size(3);
  TORCH_CHECK_VALUE(freq.size(0) == S, "musa_fused::", op, ": freq_cis has ", freq.size(0),
                    " positions, the input's sequence dimension ", S);
  TORCH_CHECK_VALUE(R % 2 == 0 && R <= D, "musa_fused::", op, ": freq_cis's last dimension (", R,
                    ") must be even and at most the head dimension (", D, ")");
  const int64_t inner = batch_first ? x.size(2) : x.size(1) * x.size(2);
  return {x.numel() / std::max<int64_t>(D, 1), D, R, S, inner};
}

}  // namespace torch_musa::fused_llm
