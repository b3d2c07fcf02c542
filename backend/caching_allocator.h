// The musa caching device allocator (c10::DeviceAllocator): per-device
// small/large pools of blocks carved from runtime segments, per-stream reuse,
// record_stream safety, stats shaped like torch.cuda's, and OOM errors that
// name the figures a user needs.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

#include <string>

namespace torch_musa::allocator {

c10::DeviceAllocator* get();

// Marks a block as used on `stream`: it is not reused before the work queued
// on that stream up to now has finished.
void record_stream(const c10::DataPtr& ptr, c10::Stream stream);

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
void reset_peak_stats(c10::DeviceIndex device);
void reset_accumulated_stats(c10::DeviceIndex device);
void empty_cache();
// Caps this process's reserved memory on `device` at fraction * capacity.
void set_memory_fraction(double fraction, c10::DeviceIndex device);

// Allocates from the pool of the current device and stream; frees with raw_delete.
void* raw_alloc(size_t nbytes);
void raw_delete(void* ptr);

}  // namespace torch_musa::allocator
