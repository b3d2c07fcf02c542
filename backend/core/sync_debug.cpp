#include "core/sync_debug.h"

#include <c10/util/Exception.h>

namespace torch_musa {
namespace detail {

std::atomic<int> g_sync_debug_mode{0};

void report_sync(const char* what) {
  // torch.cuda's words ("called a synchronizing CUDA operation"), naming the operation too
  const int mode = g_sync_debug_mode.load(std::memory_order_relaxed);
  if (mode == static_cast<int>(SyncDebugMode::kError))
    TORCH_CHECK(false, "called a synchronizing MUSA operation (", what,
                "); torch.musa.set_sync_debug_mode(0) turns this check off");
  if (mode == static_cast<int>(SyncDebugMode::kWarn)) TORCH_WARN("called a synchronizing MUSA operation (", what, ")");
}

}  // namespace detail

void set_sync_debug_mode(int mode) {
  TORCH_CHECK(mode >= 0 && mode <= 2, "invalid sync debug mode ", mode,
              ": use 0 or \"default\", 1 or \"warn\", 2 or \"error\"");
  detail::g_sync_debug_mode.store(mode, std::memory_order_relaxed);
}

int sync_debug_mode() { return detail::g_sync_debug_mode.load(std::memory_order_relaxed); }

}  // namespace torch_musa
