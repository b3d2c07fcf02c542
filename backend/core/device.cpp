#include "core/device.h"

#include <pthread.h>

#include <atomic>
#include <cstring>
#include <string>

#include "core/musa_check.h"

namespace torch_musa {

namespace {
std::atomic<bool> g_runtime_asked{false};  // the runtime has been asked for its devices
}

c10::DeviceIndex device_count() noexcept {
  // The set of visible devices is fixed for the life of the process; this
  // sits on every allocation and op, so ask the runtime once.
  static const c10::DeviceIndex count = [] {
    int n = 0;
    g_runtime_asked.store(true);
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

namespace {
// A process forked after musa started must not use it, as with CUDA: the
// cuda driver's context does not survive fork, and the host driver's device
// memory is a shared mapping the child would write into the parent's tensors.
std::atomic<bool> g_parent_started{false};
std::atomic<bool> g_bad_fork{false};
void before_fork() {  // in the parent, where asking the runtime is safe
  // A process that never asked for its devices has not started musa, and a
  // fork must not start the driver for it (a CUDA driver would then refuse the child).
  bool started = false;
  if (g_runtime_asked.load())
    for (c10::DeviceIndex d = 0; d < device_count() && !started; ++d) started = is_device_initialized(d);
  g_parent_started.store(started);
}
void in_child_after_fork() { g_bad_fork.store(g_parent_started.load()); }
const int g_fork_handlers = pthread_atfork(&before_fork, nullptr, &in_child_after_fork);
}  // namespace

bool in_bad_fork() { return g_bad_fork.load(std::memory_order_relaxed); }

void check_not_in_bad_fork() {
  (void)g_fork_handlers;
  TORCH_CHECK(!in_bad_fork(),
              "Cannot re-initialize MUSA in forked subprocess. To use MUSA with multiprocessing, you must use "
              "the 'spawn' start method (torch.multiprocessing.set_start_method('spawn'))");
}

void set_device(c10::DeviceIndex device) {
  check_not_in_bad_fork();
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
