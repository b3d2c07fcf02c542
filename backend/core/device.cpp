#include "core/device.h"

#include <cstring>
#include <string>

#include "core/musa_check.h"

namespace torch_musa {

c10::DeviceIndex device_count() noexcept {
  // The set of visible devices is fixed for the life of the process; this
  // sits on every allocation and op, so ask the runtime once.
  static const c10::DeviceIndex count = [] {
    int n = 0;
    if (musaGetDeviceCount(&n) != musaSuccess) {
      (void)musaGetLastError();
      return c10::DeviceIndex(0);
    }
    return static_cast<c10::DeviceIndex>(n);
  }();
  return count;
}

void check_device_index(c10::DeviceIndex device) {
  auto n = device_count();
  TORCH_CHECK(n > 0, "no musa device is available: ", musaGetLastErrorMessage(),
              " (check TORCH_MUSA_DRIVER and MUSA_VISIBLE_DEVICES)");
  if (C10_LIKELY(device >= 0 && device < n)) return;
  // Built with to_string: formatting small integers through the stream
  // operators crashed here with one GCC/libstdc++ pairing (GPU machine).
  std::string msg = "invalid musa device index " + std::to_string(static_cast<int>(device)) + ": " +
                    std::to_string(static_cast<int>(n)) + " musa device(s) visible, valid indices are 0.." +
                    std::to_string(static_cast<int>(n) - 1) +
                    " (set MUSA_VISIBLE_DEVICES or TORCH_MUSA_HOST_DEVICES to change how many)";
  TORCH_CHECK(false, msg);
}

c10::DeviceIndex current_device() {
  int d = 0;
  MUSA_CHECK(musaGetDevice(&d));
  return static_cast<c10::DeviceIndex>(d);
}

void set_device(c10::DeviceIndex device) {
  check_device_index(device);
  MUSA_CHECK(musaSetDevice(device));
}

bool is_device_initialized(c10::DeviceIndex device) {
  int init = 0;
  if (musaDeviceIsInitialized(device, &init) != musaSuccess) {
    (void)musaGetLastError();
    return false;
  }
  return init != 0;
}

bool is_host_driver() {
  static const bool host = std::strcmp(musaGetDriverName(), "host") == 0;
  return host;
}

DeviceScope::DeviceScope(c10::DeviceIndex device) : prev_(current_device()), changed_(device != prev_) {
  if (changed_) set_device(device);
}

DeviceScope::~DeviceScope() {
  if (changed_) (void)musaSetDevice(prev_);
}

}  // namespace torch_musa
