// The edges of a compiled region on the kernel device (kernel_boundary.cpp): the
// torch_musa:: ops' kernels, also called directly by generated wrapper code.
#pragma once

#include <ATen/core/Tensor.h>

namespace torch_musa {

// A kernel-device tensor over `musa`'s memory (it keeps `musa`'s storage alive).
at::Tensor to_kernel_device(const at::Tensor& musa);
// A musa tensor of `device` over kernel-device tensor `t`'s memory (an input's own storage when
// `t` views a region input).
at::Tensor from_kernel_device(const at::Tensor& t, c10::Device device);
// Writes kernel-device `src` into musa `self`, on the current musa stream.
void copy_from_kernel_device_(const at::Tensor& self, const at::Tensor& src);

}  // namespace torch_musa
