// A compiled region that runs as the kernel device's code (kernel_region.cpp).
#pragma once

#include <c10/core/Device.h>

#include <memory>

namespace torch_musa {

class KernelScope;

// While entered: the current musa stream of `index` is the kernel device's current stream, and
// the kernel device's allocations come from musa memory (a KernelScope held across calls).
class KernelRegion {
 public:
  explicit KernelRegion(c10::DeviceIndex index);
  ~KernelRegion();
  void enter();
  void exit();

 private:
  c10::DeviceIndex index_;
  std::unique_ptr<KernelScope> scope_;
};

}  // namespace torch_musa
