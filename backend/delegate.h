// The generic op layer: every aten op without a musa kernel runs through a
// boxed fallback that aliases musa tensors as kernel-device tensors, runs
// the kernel device's kernel and hands back musa tensors — no copies.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>
#include <unordered_map>

namespace torch_musa {

// A kernel-device tensor over the same memory, sizes and strides as `musa`.
at::Tensor alias_on_kernel_device(const at::Tensor& musa);

// Ops that had to copy (outputs that could not be adopted), with counts.
std::unordered_map<std::string, int64_t> copy_path_counts();
void reset_copy_path_counts();
// How many ops went through the fallback (all paths), for benchmarks/tests.
int64_t delegated_op_count();

}  // namespace torch_musa
