// FP8 on musa: what the rest of the backend calls into.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

namespace torch_musa::fp8 {

// If `error` is a kernel's "not implemented for '<float8 dtype>'", throws a
// NotImplementedError naming the op and the dtype and saying to upcast.
void rethrow_float8_without_kernel(const c10::OperatorHandle& op, const c10::Error& error);

// torch._scaled_mm on the host driver: CUDA's layout, shape, scale and dtype
// rules before ATen's CPU kernel runs (which accepts more), so a program that
// runs here runs on a GPU. Registered at module init, before the op layer's
// per-op registrations.
void register_host_scaled_mm_rules();

}  // namespace torch_musa::fp8
