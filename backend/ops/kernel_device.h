// The kernel device is where musa ops actually run: ATen's CPU kernels for
// the host driver, ATen's CUDA kernels for the cuda driver. musa memory is
// aliased (never copied) as storage of the kernel device, and while an op runs
// the kernel device's allocations are routed to the musa allocator, so the
// outputs already live in musa memory.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/Storage.h>
#include <c10/core/Stream.h>
#include <c10/util/FunctionRef.h>

#include <optional>

#include <memory>

#include "ops/routed_blocks.h"
#include "profiler/device_activity.h"

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

  // Between begin() and end() on this thread: allocations of the kernel
  // device come from musa memory of `index`, and kernels run on the current
  // musa stream. Use KernelScope (below) rather than calling these directly.
  struct ScopeState {
    c10::DeviceIndex prev_delegating = -1;
    c10::DeviceIndex prev_device = -1;
    std::optional<c10::Stream> prev_stream;  // kernel device's current stream before, if changed
  };
  virtual void begin(c10::DeviceIndex index, ScopeState& state) = 0;
  virtual void end(const ScopeState& state) = 0;

  // Runs `fn` (which launches kernels) as work on the current musa stream;
  // while a profiler records, that work is one device activity named `name`.
  void launch(c10::DeviceIndex index, c10::function_ref<void()> fn, const char* name,
              profiler::ActivityKind kind = profiler::ActivityKind::Kernel) {
    profiler::DeviceRange timed(index, name, kind);
    run(index, fn, name);
  }

 protected:
  virtual void run(c10::DeviceIndex index, c10::function_ref<void()> fn, const char* name) = 0;
};

// RAII for KernelDevice::begin/end (no allocation: it runs for every op).
// Ending the scope also ends the op for the blocks lent to the kernel device
// (routed_blocks::end_op), whichever the kernel device.
class KernelScope {
 public:
  KernelScope(KernelDevice& kd, c10::DeviceIndex index) : kd_(kd) { kd_.begin(index, state_); }
  ~KernelScope() {
    kd_.end(state_);
    routed_blocks::end_op();
  }
  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  KernelDevice& kd_;
  KernelDevice::ScopeState state_;
};

// The kernel device of the active driver.
KernelDevice& kernel_device();

// A storage of `device` over the same memory as `musa`, not owning it;
// growing it (resize_) allocates through `grow`. Kernel devices build their
// aliases with it.
c10::Storage non_owning_alias(const c10::Storage& musa, c10::Device device, c10::Allocator* grow);
// Whether `s` is (still) such a non-owning alias.
bool is_non_owning_alias(const c10::Storage& s);

// A storage of `device` over the memory of `held` that keeps `held` alive (a reference in its
// DataPtr's context): for aliases that may outlive the call making them (a compiled region's
// inputs and results, the buffers of a collective nobody waits for). With an allocator it is
// resizable as any storage is: growing it moves it to memory from `grow` and lets `held` go.
c10::Storage owning_alias(const c10::Storage& held, c10::Device device, c10::Allocator* grow = nullptr);
// The storage an owning alias holds; null if `s` is not an owning alias.
const c10::Storage* held_by_owning_alias(const c10::Storage& s);

// The musa block behind kernel-device storage `from`, when the kernel device lent it from musa
// memory of `index` while an op (or a compiled region) ran: returns the owning musa DataPtr and
// leaves `from` a non-owning view of the same memory. Otherwise an empty DataPtr, `from` unchanged.
c10::DataPtr take_lent_block(KernelDevice& kd, c10::StorageImpl& from, c10::DeviceIndex index);

// Installed by the cuda kernel device's translation unit, when built.
void register_cuda_kernel_device(KernelDevice* (*factory)());

}  // namespace torch_musa
