// FP8 on musa: what the rest of the backend calls into.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <optional>

namespace torch_musa::fp8 {

// If `error` is a kernel's "not implemented for '<float8 dtype>'", throws a
// NotImplementedError naming the op and the dtype and saying to upcast.
void rethrow_float8_without_kernel(const c10::OperatorHandle& op, const c10::Error& error);

// torch._scaled_mm on musa, both drivers (the name predates the cuda driver's
// part): cuBLASLt's calls go to the kernel device's kernel, CUDA's size, scale
// and dtype rules checked first on the host driver; the calls cuBLASLt refuses
// and torch_musa accepts (e5m2 x e5m2, any layout, rowwise scales into any
// dtype, a per-row scale_result) run through scaled_mm_wide. Registered at
// module init, before the op layer's per-op registrations.
void register_host_scaled_mm_rules();

// The calls above that cuBLASLt refuses, computed from musa ops.
at::Tensor scaled_mm_wide(const at::Tensor& a, const at::Tensor& b, const at::Tensor& scale_a,
                          const at::Tensor& scale_b, const std::optional<at::Tensor>& bias,
                          const std::optional<at::Tensor>& scale_result, c10::ScalarType out, bool fast_accum);

}  // namespace torch_musa::fp8
