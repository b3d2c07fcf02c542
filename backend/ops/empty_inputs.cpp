// Calls over inputs with no elements whose CUDA kernels fail where the CPU's (and torch_musa's) give
// the empty or identity result: they take the CPU kernel over copies of the (empty) musa tensors.
// - max/min(input, out=) with no dim: the CPU gives -inf/+inf (the dtype's bounds); CUDA's reduction
//   kernel asserts numel > 0 (an internal assert).
// - antialiased bilinear/bicubic upsampling of an empty batch, forward and backward: CUDA's kernel
//   launches a grid with no blocks in z (N * C == 0), which CUDA refuses as an invalid argument.
// Every call with elements is delegated as usual.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "ops/delegation.h"
#include "ops/dtype_widening.h"

namespace torch_musa {
namespace {

void cpu_when_empty(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t base = stack->size() - op.schema().arguments().size();
  const at::Tensor first = (*stack)[base].toTensor();  // the input (grad_output in a backward)
  if (first.numel() != 0 || first.device().type() != c10::DeviceType::PrivateUse1) {
    op_layer::boxed_delegate(op, ks, stack);
    return;
  }
  // The CPU has no half-precision antialiased kernels: those run widened, as with elements.
  op_layer::run_or_widen(op, stack, [&] { op_layer::run_by_cpu_copy(op, stack, first.device().index()); });
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"max.unary_out", "min.unary_out", "_upsample_bilinear2d_aa", "_upsample_bicubic2d_aa",
                           "_upsample_bilinear2d_aa_backward", "_upsample_bicubic2d_aa_backward"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&cpu_when_empty>());
}

}  // namespace torch_musa
