// The host driver's direct path (host_direct/): ATen's CPU kernels run on musa tensors
// themselves for common ops, without the delegation.
#pragma once

#include <ATen/core/Tensor.h>
#include <torch/library.h>

namespace torch_musa::op_layer {

// Registers the direct path's kernels for PrivateUse1 in `lib` when the driver is host and
// TORCH_MUSA_HOST_DIRECT is not 0; returns whether it did. Call before the delegation registers.
bool register_host_direct(torch::Library& lib);
// Off: registered direct kernels hand every call to the delegation (tests compare the two).
void set_host_direct(bool on);
bool host_direct_enabled();
// Copies `src` into `dst` (musa tensors) directly when the path takes them; false: not done.
bool host_direct_copy(const at::Tensor& dst, const at::Tensor& src);

}  // namespace torch_musa::op_layer
