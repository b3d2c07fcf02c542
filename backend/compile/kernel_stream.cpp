// The kernel device's stream under the current musa stream, for compiled code
// that launches work itself (AOTInductor's CUDA models on the cuda driver): it
// runs on the current musa stream, in order with the musa work around it, as
// torch.cuda's models run on the current CUDA stream. The host driver runs work
// inline and has no such stream (0).
#include <musa/runtime.h>
#include <torch/library.h>

#include <cstdint>

#include "core/stream.h"

namespace torch_musa {
namespace {

int64_t current_kernel_stream(int64_t device) {
  c10::Stream s = current_stream(static_cast<c10::DeviceIndex>(device));
  void* native = nullptr;
  TORCH_CHECK(musaStreamGetNativeHandle(native_stream(s), &native) == musaSuccess,
              "torch_musa::current_kernel_stream: musaStreamGetNativeHandle failed: ", musaGetLastErrorMessage());
  return static_cast<int64_t>(reinterpret_cast<intptr_t>(native));
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(torch_musa, m) {
  m.def("current_kernel_stream(int device) -> int", &current_kernel_stream);
}

}  // namespace torch_musa
