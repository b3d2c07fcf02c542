// Host-driver capture of aten ops. Work on the host driver runs inline, so
// capturing cannot just withhold kernels the way CUDA does: each op is
// recorded as a task instead. Its outputs are allocated now (in the graph's
// pool; sizes from the op's meta kernel) and the task, at replay, runs the
// CPU kernel over the same musa memory -- the out= variant for functional
// ops -- with no dispatcher above the kernel, no Python and no allocation.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace torch_musa::graphs {

// Whether ops on `device` must be recorded now: the host driver, and the
// device's current stream is capturing.
bool host_recording(c10::DeviceIndex device);

// Whether `op` only makes views of its inputs (it runs at once, even while capturing).
bool is_view_op(const c10::OperatorHandle& op);

// Records `op` with the musa arguments on `stack` into the capture of the
// current stream and leaves the op's (musa) results on the stack.
void record_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DeviceIndex device);

// Records dst.copy_(src) (musa tensors, or pinned cpu tensors with
// non_blocking) into the capture of `device`'s current stream.
void record_copy(const at::Tensor& dst, const at::Tensor& src, bool non_blocking, c10::DeviceIndex device);

}  // namespace torch_musa::graphs
