// The musa caching device allocator (c10::DeviceAllocator): per-device
// small/large pools of blocks carved from segments, per-stream reuse,
// record_stream safety, PYTORCH_MUSA_ALLOC_CONF (allocator_config.h),
// expandable segments over the runtime's VMM calls (expandable_segment.h),
// private pools (MemPool), allocation history and snapshots shaped like
// torch.cuda's, and OOM errors that name the figures a user needs.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>
#include <musa/runtime.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace torch_musa::allocator {

c10::DeviceAllocator* get();

// Marks a block as used on `stream`: it is not reused before the work queued
// on that stream up to now has finished.
void record_stream(const c10::DataPtr& ptr, c10::Stream stream);

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex device);
void reset_peak_stats(c10::DeviceIndex device);
void reset_accumulated_stats(c10::DeviceIndex device);
void empty_cache();
// Whether freed memory is kept for reuse (torch.musa.memory.caching_allocator_enable); turning it
// off also gives back what is cached.
void set_caching_enabled(bool enabled);
bool caching_enabled();
// Caps this process's reserved memory on `device` at fraction * capacity.
void set_memory_fraction(double fraction, c10::DeviceIndex device);
double get_memory_fraction(c10::DeviceIndex device);

// Allocates from the pool of the current device and stream; frees with raw_delete.
void* raw_alloc(size_t nbytes);
void* raw_alloc_with_stream(size_t nbytes, void* stream);
void raw_delete(void* ptr);
// Whether `ptr` starts a block the musa allocator has handed out and not yet had back.
bool is_allocated_block(void* ptr);

// The physical extents of an expandable segment under the block `ptr` holds, and the offset of
// the block's start in the first one; false when the block is not in an expandable segment.
struct BlockExtent {
  size_t size;
  musaMemGenericAllocationHandle_t handle;
};
bool expandable_extents(const c10::DataPtr& ptr, std::vector<BlockExtent>* extents, size_t* offset_in_first);

// Counters torch.cuda reports that c10's DeviceStats may not carry on every
// supported torch version.
struct ExtraStats {
  int64_t num_oom_rejections = 0;
  std::vector<std::pair<c10::MempoolId_t, c10::CachingAllocator::StatArray>> reserved_by_private_pools;
};
ExtraStats extra_stats(c10::DeviceIndex device);

// ---- private pools (torch.musa.MemPool) ----
struct SegmentAllocator;
// use_count 1; with `custom`, the pool's segments come from it (MemPool(allocator=...))
c10::MempoolId_t create_pool(c10::DeviceIndex device, std::shared_ptr<SegmentAllocator> custom = nullptr);
void begin_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t id);  // current thread
// Routes allocations made on the streams `on_stream` accepts, from any thread
// (a graph capture); end with end_allocate_to_pool on the same thread.
void begin_allocate_streams_to_pool(c10::DeviceIndex device, c10::MempoolId_t id,
                                    std::function<bool(void* stream)> on_stream);
void end_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t id);
// A graph capture begins / ends on `device`: meanwhile no event is recorded
// or queried for freed blocks (that would become part of, or break, the capture).
void note_capture_begin(c10::DeviceIndex device);
void note_capture_end(c10::DeviceIndex device);
// An id no pool has yet; create_or_retain_pool makes the pool on first use.
c10::MempoolId_t new_pool_id();
void create_or_retain_pool(c10::DeviceIndex device, c10::MempoolId_t id);
// The device whose allocator has pool `id`, or -1.
c10::DeviceIndex pool_device(c10::MempoolId_t id);
void release_pool(c10::DeviceIndex device, c10::MempoolId_t id);  // use_count - 1
void retain_pool(c10::DeviceIndex device, c10::MempoolId_t id);   // use_count + 1
int pool_use_count(c10::DeviceIndex device, c10::MempoolId_t id);

// ---- graph trees (torch.compile's reduce-overhead on musa) ----
// Whether `ptr` was handed out by this allocator (and is freed by it).
bool owns_data_ptr(const c10::DataPtr& ptr);
// The free range [ptr, ptr + nbytes) of pool `id` as an allocation again; an empty DataPtr
// (null) when that range is not free in the pool.
c10::DataPtr claim_pool_range(c10::DeviceIndex device, c10::MempoolId_t id, void* ptr, size_t nbytes);
// Frees the block `ptr` owns now and leaves `ptr` owning nothing (its deleter does nothing).
void free_and_disown(c10::DataPtr& ptr);

// ---- history and snapshots (the structure torch.cuda.memory._snapshot has) ----
enum class TraceAction { ALLOC, FREE_REQUESTED, FREE_COMPLETED, SEGMENT_ALLOC, SEGMENT_FREE, SEGMENT_MAP,
                         SEGMENT_UNMAP, SNAPSHOT, OOM };
const char* trace_action_name(TraceAction a);

struct BlockSnapshot {
  size_t address = 0, size = 0, requested_size = 0;
  const char* state = "inactive";  // active_allocated | active_pending_free | inactive
  std::shared_ptr<c10::GatheredContext> context;
};
struct SegmentSnapshot {
  c10::DeviceIndex device = 0;
  size_t address = 0, total_size = 0, allocated_size = 0, active_size = 0, requested_size = 0;
  void* stream = nullptr;
  bool is_large = false, is_expandable = false;
  c10::MempoolId_t pool_id{0, 0};
  std::vector<BlockSnapshot> blocks;
};
struct TraceSnapshot {
  TraceAction action;
  c10::DeviceIndex device;
  size_t addr, size;
  void* stream;
  c10::MempoolId_t pool_id;
  int64_t time_us;
  std::shared_ptr<c10::GatheredContext> context;
};
struct Snapshot {
  std::vector<SegmentSnapshot> segments;
  std::vector<std::vector<TraceSnapshot>> device_traces;
};
// Segments of every device (only `pool` when given), and the recorded traces.
Snapshot snapshot(const c10::MempoolId_t* pool, bool include_traces);

// Gathers the calling context (Python/C++ stack); set by the Python bindings.
using ContextFn = std::shared_ptr<c10::GatheredContext> (*)(bool cpp);
// enabled: 0 off, 1 state, 2 all (history); context: 0 none, 1 state, 2 alloc, 3 all.
void record_history(int enabled, int context, bool cpp_stacks, size_t max_entries, bool clear, ContextFn fn);


}  // namespace torch_musa::allocator
