// Unified memory (PYTORCH_MUSA_ALLOC_CONF=cpu:unified, torch_musa.use_unified_cpu_allocator()):
// while on, CPU tensors are allocated in pinned host memory mapped into the devices' address
// space (musaHostAlloc with musaHostAllocMapped: the host driver's device memory is host memory;
// the cuda driver pins and maps it). A musa storage over such memory is a view, not a copy:
// torch.load(map_location="musa") then allocates no device memory. Its bytes are reported as
// unified_* statistics, never as allocated_bytes (which counts device memory only).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

#include <cstdint>

namespace torch_musa::allocator {

// The CPU allocator of unified mode.
c10::Allocator* unified_allocator();
// Turns unified mode on (first enter) / off (last exit); nests.
void unified_enter();
void unified_exit();
int unified_depth();
// Whether the storage's memory came from the unified allocator.
bool is_unified(const c10::Storage& storage);
// A musa storage on `device` over the same bytes as the unified CPU storage `cpu` (kept alive
// by the view). Throws, naming the way out, when `cpu` is not unified memory.
c10::Storage unified_device_view(const c10::Storage& cpu, c10::DeviceIndex device);

struct UnifiedStats {
  int64_t host_current = 0, host_peak = 0, host_allocated = 0, host_freed = 0;  // all devices
  int64_t view_current = 0, view_peak = 0;  // bytes musa storages on this device see in place
};
UnifiedStats unified_stats(c10::DeviceIndex device);
void reset_unified_peak(c10::DeviceIndex device);

}  // namespace torch_musa::allocator
