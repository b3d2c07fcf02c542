// Double casting (TORCH_USE_MUSA_DOUBLE_CAST=1|true|on|ON), torch_musa's mode for
// devices without float64 throughput: an op that computes on float64 musa tensors
// runs in float32 instead, and its float32 results (written arguments included)
// come back as float64. Ops that only move or make data (copies, views, indexing,
// factories, item()) keep float64, so no value loses precision without arithmetic.
// Off by default; the env var is read once, so the per-op cost when off is one
// relaxed load (torch.musa.ops.set_double_cast() switches it at run time).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <atomic>

namespace torch_musa::op_layer {

extern std::atomic<bool> g_double_cast;

inline bool double_cast_enabled() { return g_double_cast.load(std::memory_order_relaxed); }
void set_double_cast(bool on);

// Whether `op` computes in its tensors' dtype (not a copy, view, index or factory op);
// decided once per schema by the op layer's traits.
bool computes_in_dtype(const c10::FunctionSchema& schema);

// With double casting on: runs `op` (its arguments the last ones on `stack`) in
// float32 and returns true if it computes and some argument is a float64 tensor.
bool maybe_run_double_cast(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torch_musa::op_layer
