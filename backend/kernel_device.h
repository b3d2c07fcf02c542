// The kernel device is where musa ops actually run: ATen's CPU kernels for
// the host driver, ATen's CUDA kernels for the cuda driver. musa memory is
// aliased (never copied) as storage of the kernel device, and while an op runs
// the kernel device's allocations are routed to the musa allocator, so the
// outputs already live in musa memory.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/Storage.h>

#include <memory>

namespace torch_musa {

class KernelDevice {
 public:
  virtual ~KernelDevice() = default;
  virtual c10::DeviceType type() const = 0;
  virtual c10::DispatchKey dispatch_key() const = 0;
  // The kernel device standing for musa device `index`.
  virtual c10::Device device_for(c10::DeviceIndex index) const = 0;

  // A storage of the kernel device over the same memory as `musa`. It does
  // not own the memory; growing it (resize_) allocates musa memory.
  virtual c10::Storage alias_storage(const c10::Storage& musa) = 0;

  // If `ptr` was allocated as musa memory while an op ran, turns it into a
  // musa DataPtr (ownership moves; `ptr` is left empty) and returns true.
  virtual bool adopt(c10::DataPtr& ptr, c10::DeviceIndex index) = 0;

  // A generator of the kernel device seeded from the musa generator's counter.
  virtual at::Generator kernel_generator(const at::Generator& musa_gen) = 0;

  // While alive: allocations of the kernel device on this thread come from
  // musa memory of `index`, and kernels run on the current musa stream.
  class Scope {
   public:
    virtual ~Scope() = default;
  };
  virtual std::unique_ptr<Scope> enter(c10::DeviceIndex index) = 0;

  // Runs `fn` (which launches kernels) as work on the current musa stream.
  virtual void launch(c10::DeviceIndex index, const std::function<void()>& fn, const char* name) = 0;
};

// The kernel device of the active driver.
KernelDevice& kernel_device();

// Installed by the cuda kernel device's translation unit, when built.
void register_cuda_kernel_device(KernelDevice* (*factory)());

}  // namespace torch_musa
