// The element types the fused ops' CUDA kernels take, as the host side names them to nvcc-only
// code (no torch types there).
#pragma once

namespace torch_musa::fused_llm {

// Inputs and their gradients: the first three; the cross entropy's loss may also be double.
enum class KernelDtype : int { kFloat, kHalf, kBFloat16, kDouble };

}  // namespace torch_musa::fused_llm
