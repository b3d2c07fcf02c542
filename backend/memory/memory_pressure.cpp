// What the musa caching allocator does when memory runs short: garbage collection of old cached
// segments above garbage_collection_threshold, and the out-of-memory error that names the figures
// a user needs.
#include "memory/device_caching_allocator.h"

namespace torch_musa::allocator {
namespace detail {

void DeviceCachingAllocator::garbage_collect(const AllocatorConfig& cfg) {
  unpark_all();
  size_t allowed = limit_ ? limit_ : total_memory();
  size_t target = static_cast<size_t>(cfg.garbage_collection_threshold * static_cast<double>(allowed));
  if (reserved() <= target) return;
  std::vector<Block*> cands;
  for (BlockPool* p : {&small_, &large_})
    for (Block* b : p->blocks)
      if (b->expandable || !b->is_split()) cands.push_back(b);
  if (cands.empty()) return;
  double avg = 0;
  for (Block* b : cands) avg += b->gc_count;
  avg /= static_cast<double>(cands.size());
  std::sort(cands.begin(), cands.end(), [](Block* a, Block* b) { return a->gc_count > b->gc_count; });
  DeviceScope scope(device_);
  for (Block* b : cands) {
    if (reserved() <= target || b->gc_count < avg) break;
    BlockPool& pool = *b->pool;
    pool.blocks.erase(b);
    note_free_removed(b);
    if (b->expandable) {
      unmap_free_block(b);
      continue;
    }
    MUSA_CHECK(musaFree(b->ptr));
    stats_.num_device_free++;
    update(stats_.segment, pool.is_small, -1);
    add_reserved(pool, -static_cast<int64_t>(b->size));
    trace(TraceAction::SEGMENT_FREE, b->ptr, b->size, b->stream, pool, nullptr, 99);
    drop_block(b);
  }
}

void DeviceCachingAllocator::raise_oom(size_t requested, musaStream_t stream, BlockPool& pool,
                                       const AllocatorConfig& cfg, const std::string& detail, bool over_limit) {
  stats_.num_ooms++;
  size_t free = 0, total = 0;
  {
    DeviceScope scope(device_);
    (void)musaMemGetInfo(&free, &total);
    (void)musaGetLastError();
  }
  trace(TraceAction::OOM, reinterpret_cast<void*>(free), requested, stream, pool, nullptr, 99);
  auto allocated = static_cast<size_t>(stats_.allocated_bytes[0].current);
  TORCH_CHECK_WITH(
      OutOfMemoryError, false, "musa out of memory. Tried to allocate ", format_size(requested),
      ". musa device ", static_cast<int>(device_), " has a total capacity of ", format_size(total), " of which ",
      format_size(free), " is free. Of the allocated memory ", format_size(allocated),
      " is allocated by PyTorch, and ", format_size(reserved() - allocated),
      " is reserved by PyTorch but unallocated.",
      over_limit ? " The per-process memory fraction limit was reached." : "",
      cfg.expandable_segments
          ? " Free tensors you no longer need or reduce the batch size."
          : " If reserved but unallocated memory is large try setting "
            "PYTORCH_MUSA_ALLOC_CONF=expandable_segments:True to avoid fragmentation; otherwise free tensors "
            "you no longer need or reduce the batch size.",
      detail.empty() ? "" : " [runtime: " + detail + "]");
}

}  // namespace detail
}  // namespace torch_musa::allocator
