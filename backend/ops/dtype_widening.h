// The op layer's answer to a kernel device without a kernel for a dtype that
// GPUs support (ATen's CPU ctc_loss in float16, histc on integers, ...): the
// op runs again with those arguments widened (float32 for half/bfloat16,
// float64 for integers where GPUs have the integer kernel: histc) and its results cast back, written arguments
// included. Counted per op, like the copy path (torch.musa.ops.widened_op_counts()).
// float8 is widened (to float32) for pointwise ops only: elementwise arithmetic and
// comparisons, as torch_musa allows; reductions and the rest keep float8's error.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/Exception.h>
#include <c10/util/FunctionRef.h>

#include <optional>
#include <string>
#include <unordered_map>

namespace torch_musa::op_layer {

// The dtype name a kernel's "no kernel for this dtype" error names ("Half", "Float8_e4m3fn"):
// ATen's dtype dispatch's "... not implemented for '<dtype>'", or the FFT kernels'
// "Unsupported dtype <dtype>".
std::optional<std::string> dtype_without_kernel(const c10::Error& error);

// The dtype `error` says the kernel has no kernel for, if it is one some
// tensor among `args` has and the op layer can widen for `op` (not while widening).
std::optional<c10::ScalarType> missing_kernel_dtype(const c10::OperatorHandle& op, const c10::Error& error,
                                                    c10::ArrayRef<c10::IValue> args);

// Runs `op` (its musa arguments on `stack`, as the dispatcher passes them)
// with every tensor of dtype `narrow` widened, then casts results back.
void run_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::ScalarType narrow);

// Runs `run` (one call of `op` over the musa arguments on `stack`, by a path
// other than the fallback's: the CPU copy of an empty call, ...) and, if the
// kernel it reaches has no kernel for a dtype the op layer widens, runs `op`
// widened instead.
void run_or_widen(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::function_ref<void()> run);

// Runs `op` with every tensor of dtype `from` converted to `compute`, and the
// results of dtype `compute` (written arguments included) converted back to
// `from`: the widening above, and double casting (double_cast.h) the other way.
void run_in_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::ScalarType from,
                  c10::ScalarType compute);

// Whether this thread is inside run_in_dtype's call (which never converts again).
bool converting_now();

std::unordered_map<std::string, int64_t> widened_op_counts();
void reset_widened_op_counts();

}  // namespace torch_musa::op_layer
