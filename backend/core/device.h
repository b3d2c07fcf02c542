// Device-level helpers shared by the backend (count, current device, checks).
#pragma once

#include <c10/core/Device.h>
#include <musa/runtime.h>

namespace torch_musa {

c10::DeviceIndex device_count() noexcept;
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
// Throws a clear error for an index outside [0, device_count()).
void check_device_index(c10::DeviceIndex device);
// Marks that this process has used the device (for hasPrimaryContext).
bool is_device_initialized(c10::DeviceIndex device);
// True when kernels run on the CPU (host driver), false for the cuda driver.
bool is_host_driver();
// Whether this process was forked after musa started in its parent; such a
// child must not touch musa (check_not_in_bad_fork() raises CUDA's error).
bool in_bad_fork();
void check_not_in_bad_fork();

// Switches the current device for a scope (no-op when already current).
class DeviceScope {
 public:
  explicit DeviceScope(c10::DeviceIndex device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  c10::DeviceIndex prev_;
  bool changed_;
};

}  // namespace torch_musa
