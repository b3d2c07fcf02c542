// A compiled region that runs as the kernel device's code (the cuda driver's
// CUDA graphs of musa graphs): while it is entered, the current musa stream is
// the kernel device's current stream, and the kernel device's allocations
// (Inductor's buffers, library workspaces) come from musa memory, exactly as
// for one delegated op (KernelScope), so compiled code launches and allocates
// as native compiled code does, on musa's stream and memory.
#include "compile/kernel_region.h"

#include "core/device.h"
#include "ops/kernel_device.h"

namespace torch_musa {

KernelRegion::KernelRegion(c10::DeviceIndex index) : index_(index) { check_device_index(index); }
KernelRegion::~KernelRegion() = default;

void KernelRegion::enter() {
  TORCH_CHECK(!scope_, "torch_musa kernel region for musa:", index_, " entered twice");
  scope_ = std::make_unique<KernelScope>(kernel_device(), index_);
}

void KernelRegion::exit() { scope_.reset(); }

}  // namespace torch_musa
