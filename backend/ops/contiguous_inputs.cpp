// Ops whose CUDA kernels need contiguous inputs that torch's composites hand
// a PrivateUse1 device in channels-last: group_norm keeps a channels-last
// input as it is for PrivateUse1 (as for the CPU, whose kernel takes it),
// while CUDA's native_group_norm checks X.is_contiguous(). On the cuda driver
// these make those inputs contiguous, as torch does for CUDA tensors, then
// continue through the op layer.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include <initializer_list>

#include "core/device.h"
#include "ops/delegate.h"
#include "ops/delegation.h"

namespace torch_musa {
namespace {

// Arguments 0..n-1 of `op` that are tensors become contiguous.
template <size_t n>
void contiguous_first(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  for (size_t i = 0; i < n; ++i) {
    c10::IValue& v = (*stack)[base + i];
    if (v.isTensor() && !v.toTensor().is_contiguous()) v = v.toTensor().contiguous();
  }
  op_layer::boxed_delegate(op, ks, stack);
}

}  // namespace

void register_cuda_contiguous_inputs() {
  if (is_host_driver()) return;
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  lib->impl("native_group_norm", torch::CppFunction::makeFromBoxedFunction<&contiguous_first<1>>());
  lib->impl("native_group_norm_backward", torch::CppFunction::makeFromBoxedFunction<&contiguous_first<2>>());
}

}  // namespace torch_musa
