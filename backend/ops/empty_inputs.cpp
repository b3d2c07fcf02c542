// max(input, out=) and min(input, out=) with no dim, over an input with no elements, give the
// reduction's identity (-inf/+inf, or the dtype's bounds) as the CPU and torch_musa do; CUDA's
// kernel has no such case (gpu_reduce_kernel asserts numel > 0, an internal assert), so these
// calls take the CPU kernel, on empty copies. Every other call is delegated as usual.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "ops/delegation.h"

namespace torch_musa {
namespace {

void musa_full_reduction_out(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  const at::Tensor self = (*stack)[base].toTensor();
  if (self.numel() != 0 || self.device().type() != c10::DeviceType::PrivateUse1) {
    op_layer::boxed_delegate(op, ks, stack);
    return;
  }
  at::Tensor out = (*stack)[base + 1].toTensor();
  TORCH_CHECK(out.device() == self.device(), op.schema().name(), ": expected out on ", self.device(), ", got ",
              out.device());
  (*stack)[base] = self.cpu();  // no elements: nothing is copied
  (*stack)[base + 1] = at::empty({0}, out.options().device(c10::kCPU));
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
  const at::Tensor result = stack->back().toTensor();
  at::native::resize_output(out, result.sizes());
  out.copy_(result);
  stack->back() = out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max.unary_out", torch::CppFunction::makeFromBoxedFunction<&musa_full_reduction_out>());
  m.impl("min.unary_out", torch::CppFunction::makeFromBoxedFunction<&musa_full_reduction_out>());
}

}  // namespace torch_musa
