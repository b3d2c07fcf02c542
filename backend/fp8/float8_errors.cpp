// Most aten kernels have no float8 instantiation (on CPU and CUDA alike):
// float8 tensors hold data for scaled matmuls and communication. Pointwise ops
// (elementwise arithmetic, comparisons) compute in float32 through the op
// layer's widening (ops/dtype_widening.h); for the rest (reductions, scans,
// ...) the kernel's own error ("sum_cpu" not implemented for 'Float8_e4m3fn')
// does not say what to do; this one does.
#include "fp8/fp8.h"

#include <string>

#include "ops/dtype_widening.h"

namespace torch_musa::fp8 {

void rethrow_float8_without_kernel(const c10::OperatorHandle& op, const c10::Error& error) {
  const auto named = op_layer::dtype_without_kernel(error);
  if (!named || named->rfind("Float8_", 0) != 0) return;
  const std::string& dtype = *named;  // e.g. Float8_e4m3fn
  const std::string msg = error.what_without_backtrace();
  std::string py_dtype = dtype;
  py_dtype[0] = 'f';  // torch.float8_e4m3fn
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), " has no musa kernel for ", dtype, " (", msg,
                              "). float8 tensors hold data for scaled matmuls (torch._scaled_mm, torch_musa.fp8) "
                              "and for communication, and musa computes only their elementwise ops and comparisons (in float32); "
                              "for this op, upcast first, e.g. x.to(torch.bfloat16), "
                              "and cast back with .to(torch.", py_dtype, ").");
}

}  // namespace torch_musa::fp8
