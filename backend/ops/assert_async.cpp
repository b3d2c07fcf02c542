// torch._assert_async on musa checks its value at the call, as torch_musa's and the CPU's do, with the
// CPU kernel's message ("Expected Tensor with single nonzero value, but got zero", or the caller's).
// CUDA's kernel asserts on the device instead: the error surfaced only at a later synchronization and
// left the CUDA context unusable. While a graph captures, where nothing may be read back, the op is
// delegated (recorded on the host driver, captured as CUDA's device-side assert on the cuda driver).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "graphs/capture_state.h"
#include "ops/delegation.h"

namespace torch_musa {
namespace {

void musa_assert_async(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  if (graphs::any_capture_underway()) {
    op_layer::boxed_delegate(op, ks, stack);
    return;
  }
  (*stack)[base] = (*stack)[base].toTensor().cpu();  // the one element, read back (a synchronization)
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_assert_async", torch::CppFunction::makeFromBoxedFunction<&musa_assert_async>());
  m.impl("_assert_async.msg", torch::CppFunction::makeFromBoxedFunction<&musa_assert_async>());
}

}  // namespace torch_musa
