// torch.musa.set_sync_debug_mode, as torch.cuda's: operations that make the host wait for a
// musa device (a blocking copy to the cpu, .item(), ops whose output size depends on the data,
// Stream.synchronize) warn (1) or raise (2). Off (0) by default.
#pragma once

#include <atomic>

namespace torch_musa {

enum class SyncDebugMode : int { kDisabled = 0, kWarn = 1, kError = 2 };

void set_sync_debug_mode(int mode);
int sync_debug_mode();

namespace detail {
extern std::atomic<int> g_sync_debug_mode;
void report_sync(const char* what);
}  // namespace detail

// Call where the host waits for device work; one relaxed load when the mode is off.
inline void note_synchronizing(const char* what) {
  if (detail::g_sync_debug_mode.load(std::memory_order_relaxed) != 0) detail::report_sync(what);
}

}  // namespace torch_musa
