// Internal to the musa caching allocator: the per-device allocator (pools,
// parked small blocks, expandable segments, private pools, history; its blocks
// are in allocator_block.h). caching_allocator.cpp adds the c10::DeviceAllocator
// front end.
#pragma once

#include "memory/caching_allocator.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <new>
#include <thread>
#include <unordered_map>
#include <utility>

#include <c10/util/flat_hash_map.h>
#include <vector>

#include "memory/allocator_block.h"
#include "memory/allocator_config.h"
#include "core/device.h"
#include "memory/expandable_segment.h"
#include "memory/pluggable_allocator.h"
#include "core/musa_check.h"
#include "core/stream.h"

namespace torch_musa::allocator {
namespace detail {

constexpr size_t kMinBlockSize = 512;          // all sizes are rounded to this
constexpr size_t kSmallSize = 1 << 20;         // small pool: requests <= 1 MiB
constexpr size_t kSmallBuffer = 2 << 20;       // small pool segments are 2 MiB
constexpr size_t kLargeBuffer = 20 << 20;      // mid-size requests get 20 MiB segments
constexpr size_t kMinLargeAlloc = 10 << 20;    // above this, round to 2 MiB
constexpr size_t kRoundLarge = 2 << 20;

inline std::string format_size(size_t bytes) {
  char buf[64];
  if (bytes < 1024) snprintf(buf, sizeof buf, "%zu bytes", bytes);
  else if (bytes < (1 << 20)) snprintf(buf, sizeof buf, "%.2f KiB", bytes / 1024.0);
  else if (bytes < (size_t(1) << 30)) snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  else snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

inline size_t round_size(size_t n, const AllocatorConfig& cfg) {
  if (n < kMinBlockSize) return kMinBlockSize;
  size_t div = cfg.divisions_for(n);
  if (div > 1 && n > kMinBlockSize * div) {
    size_t pow2 = size_t(1) << (63 - __builtin_clzll(n));  // floor power of two
    if (pow2 == n) return n;
    size_t step = pow2 / div;
    return (n + step - 1) / step * step;
  }
  return (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

inline size_t segment_size(size_t n) {
  if (n <= kSmallSize) return kSmallBuffer;
  if (n < kMinLargeAlloc) return kLargeBuffer;
  return (n + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

inline int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

inline std::atomic<uint64_t> g_pool_uid{1};

// torch.musa.memory.caching_allocator_enable(False) / PYTORCH_NO_MUSA_MEMORY_CACHING=1: a freed
// segment goes back to the device at once (caching_allocator.cpp reads the variable).
extern std::atomic<bool> g_caching_enabled;

// History settings, shared by all devices (torch.cuda's are process-wide too).
inline std::atomic<int> g_record_enabled{0};  // 0 off, 1 state, 2 all
inline std::atomic<int> g_record_context{0};  // 0 none, 1 state, 2 alloc, 3 all
inline std::atomic<bool> g_record_cpp{false};
inline std::atomic<ContextFn> g_context_fn{nullptr};
inline std::atomic<size_t> g_max_entries{0};

inline std::shared_ptr<c10::GatheredContext> gather_context(int min_level) {
  ContextFn fn = g_context_fn.load();
  if (!fn || g_record_context.load() < min_level) return nullptr;
  return fn(g_record_cpp.load());
}

class DeviceCachingAllocator {
 public:
  explicit DeviceCachingAllocator(c10::DeviceIndex device) : device_(device) {}

  Block* malloc(size_t requested, musaStream_t stream, std::shared_ptr<c10::GatheredContext> ctx) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    const AllocatorConfig& cfg = allocator_config();
    stats_.max_split_size = static_cast<int64_t>(cfg.max_split_size);
    process_events();
    size_t size = round_size(requested, cfg);
    BlockPool& pool = select_pool(size, stream);
    if (cfg.garbage_collection_threshold > 0) age_blocks(pool);
    bool parked_here = num_parked_ > 0 && &pool == &small_;  // all parked blocks are small_'s
    Block* block = parked_here ? take_parked(stream, size) : nullptr;
    if (!block) block = take_free_block(pool, stream, size, cfg);
    if (!block && parked_here) {  // merged, the parked blocks may serve it
      unpark_all();
      block = take_free_block(pool, stream, size, cfg);
    }
    if (!block && cfg.garbage_collection_threshold > 0) garbage_collect(cfg);
    std::string why;
    bool over_limit = false;
    if (!block) block = alloc_new(pool, stream, size, cfg, &why, &over_limit);
    if (!block) {
      // Free everything cached (all pools, all streams) and try once more.
      stats_.num_alloc_retries++;
      release_all_cached();
      block = alloc_new(pool, stream, size, cfg, &why, &over_limit);
    }
    if (!block) raise_oom(requested, stream, pool, cfg, why, over_limit);
    block = maybe_split(block, size, cfg);
    hand_out(block, pool, requested, std::move(ctx), cfg);
    return block;
  }

  // A free block of `pool` becomes the allocation of `requested` bytes: its books and stats.
  void hand_out(Block* block, BlockPool& pool, size_t requested, std::shared_ptr<c10::GatheredContext> ctx,
                const AllocatorConfig& cfg) {
    block->allocated = true;
    block->requested = requested;
    block->gc_count = 0;
    block->context = g_record_context.load() >= 1 ? std::move(ctx) : nullptr;
    active_.emplace(block->ptr, block);
    if (pool.owner) pool.owner->allocated++;
    bool small = pool.is_small;
    update(stats_.allocation, small, 1);
    update(stats_.allocated_bytes, small, static_cast<int64_t>(block->size));
    update(stats_.active, small, 1);
    update(stats_.active_bytes, small, static_cast<int64_t>(block->size));
    update(stats_.requested_bytes, small, static_cast<int64_t>(requested));
    if (block->size >= cfg.max_split_size) stats_.oversize_allocations.increase(1);
    trace(TraceAction::ALLOC, block->ptr, block->size, block->stream, pool, block->context, 2);
  }

  void free(Block* block, std::shared_ptr<c10::GatheredContext> ctx) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    const AllocatorConfig& cfg = allocator_config();
    active_.erase(block->ptr);
    block->allocated = false;
    bool small = block->pool->is_small;
    update(stats_.allocation, small, -1);
    update(stats_.allocated_bytes, small, -static_cast<int64_t>(block->size));
    update(stats_.requested_bytes, small, -static_cast<int64_t>(block->requested));
    if (block->size >= cfg.max_split_size) stats_.oversize_allocations.decrease(1);
    trace(TraceAction::FREE_REQUESTED, block->ptr, block->size, block->stream, *block->pool, ctx, 3);
    if (!block->stream_uses.empty()) {
      // During a capture an event recorded now would be part of the graph
      // and could never be queried: wait until no capture runs (as CUDA's
      // allocator does).
      if (captures_underway_ > 0) {
        deferred_.push_back(block);
        block->pending_events++;
      } else {
        insert_events(block);
      }
    } else if (can_park(block, cfg)) {
      park(block);
    } else {
      free_block(block);
    }
  }

  Block* find(void* ptr) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    auto it = active_.find(ptr);
    return it == active_.end() ? nullptr : it->second;
  }

  void record_stream(Block* block, c10::Stream stream) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (native_stream(stream) == block->stream) return;
    for (auto& s : block->stream_uses)
      if (s == stream) return;
    block->stream_uses.push_back(stream);
  }

  void empty_cache() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    release_all_cached();
  }

  c10::CachingDeviceAllocator::DeviceStats stats() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    unpark_all();  // inactive_split counts the free blocks as merged, as it always has
    stats_.max_split_size = static_cast<int64_t>(allocator_config().max_split_size);
    return stats_;
  }

  // Current allocated and reserved bytes (what the profiler's memory events carry).
  std::pair<int64_t, int64_t> allocated_and_reserved() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    constexpr auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    return {stats_.allocated_bytes[all].current, stats_.reserved_bytes[all].current};
  }

  ExtraStats extra() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    ExtraStats e;
    e.num_oom_rejections = num_oom_rejections_;
    for (auto& [id, arr] : pool_reserved_) e.reserved_by_private_pools.emplace_back(id, arr);
    return e;
  }

  void reset_peak() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    unpark_all();  // what stats() reads next starts from the merged layout
    for (StatArray* a : all_stat_arrays())
      for (auto& s : *a) s.reset_peak();
    stats_.oversize_allocations.reset_peak();
    stats_.oversize_segments.reset_peak();
  }

  void reset_accumulated() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    unpark_all();  // what stats() reads next starts from the merged layout
    for (StatArray* a : all_stat_arrays())
      for (auto& s : *a) s.reset_accumulated();
    stats_.oversize_allocations.reset_accumulated();
    stats_.oversize_segments.reset_accumulated();
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

  void set_fraction(double f) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    limit_ = static_cast<size_t>(f * static_cast<double>(total_memory()));
    fraction_ = f;
  }
  double fraction() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return fraction_;
  }

  // ---- private pools (private_pools.cpp) ----
  MempoolId_t create_pool(std::shared_ptr<SegmentAllocator> custom);
  // The pool `id` (made now, with use count 1, if it does not exist), or one more use of it.
  void create_or_retain_pool(MempoolId_t id);
  bool has_pool(MempoolId_t id);
  PrivatePool& pool_of(MempoolId_t id);
  void begin_pool(MempoolId_t id);
  // Routes allocations on the streams `filter` accepts, from any thread (a
  // graph capture: autograd's backward allocates on its own thread).
  void begin_pool_for_streams(MempoolId_t id, std::function<bool(musaStream_t)> filter);
  // While a capture runs, events are neither queried nor recorded for frees.
  void capture_begins();
  void capture_ends();
  void end_pool(MempoolId_t id);
  // Graph trees: the free range at `ptr` of pool `id` becomes an allocation again, as malloc
  // would have handed it out (a replayed graph's output, alive, whose memory the allocator
  // saw freed). The block is returned; null when that range is not free in the pool.
  Block* claim(MempoolId_t id, void* ptr, size_t nbytes);
  void retain_pool(MempoolId_t id);
  int use_count(MempoolId_t id);
  void release_pool(MempoolId_t id);

  void snapshot_into(Snapshot& out, const MempoolId_t* only);
  void traces_into(std::vector<TraceSnapshot>& out) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    out.insert(out.end(), traces_.begin() + static_cast<long>(trace_next_), traces_.end());
    out.insert(out.end(), traces_.begin(), traces_.begin() + static_cast<long>(trace_next_));
  }
  void clear_traces() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    traces_.clear();
    trace_next_ = 0;
  }
  void note_snapshot() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    trace(TraceAction::SNAPSHOT, nullptr, 0, nullptr, large_, nullptr, 99);
  }

 private:
  std::vector<StatArray*> all_stat_arrays() {
    return {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
            &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
            &stats_.inactive_split_bytes, &stats_.requested_bytes};
  }

  size_t total_memory() {
    DeviceScope scope(device_);
    size_t free = 0, total = 0;
    MUSA_CHECK(musaMemGetInfo(&free, &total));
    return total;
  }

  BlockPool& select_pool(size_t size, musaStream_t stream) {
    if (!routes_.empty()) {
      auto me = std::this_thread::get_id();
      for (auto it = routes_.rbegin(); it != routes_.rend(); ++it)
        if (it->filter ? it->filter(stream) : it->thread == me) {
          PrivatePool& p = pool_of(it->id);
          return size <= kSmallSize ? p.small : p.large;
        }
    }
    return size <= kSmallSize ? small_ : large_;
  }

  void trace(TraceAction a, void* addr, size_t size, musaStream_t stream, const BlockPool& pool,
             std::shared_ptr<c10::GatheredContext> ctx, int ctx_level) {
    if (g_record_enabled.load() < 2) return;
    size_t max = g_max_entries.load();
    if (max == 0) return;
    if (g_record_context.load() < ctx_level) ctx = nullptr;
    MempoolId_t id = pool.owner ? pool.owner->id : MempoolId_t{0, 0};
    TraceSnapshot t{a, device_, reinterpret_cast<size_t>(addr), size, stream, id, now_us(), std::move(ctx)};
    if (traces_.size() < max) {
      traces_.push_back(std::move(t));
    } else {
      traces_[trace_next_ % traces_.size()] = std::move(t);
      trace_next_ = (trace_next_ + 1) % traces_.size();
    }
  }

  // Best fit among the cached blocks of `stream`, with torch.cuda's
  // max_split_size rules: oversize blocks serve only near-exact requests.
  // A block that is not expandable comes back split to `size` (maybe_split then leaves it).
  Block* take_free_block(BlockPool& pool, musaStream_t stream, size_t size, const AllocatorConfig& cfg) {
    auto it = pool.blocks.lower_bound(BlockKey(stream, size, nullptr));
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    if (size < cfg.max_split_size && b->size >= cfg.max_split_size) return nullptr;
    if (size >= cfg.max_split_size && b->size >= size + cfg.max_non_split_rounding) return nullptr;
    note_free_removed(b);
    if (!b->expandable && wants_split(b, size, cfg)) {
      Block* rest = split_at(b, size);
      note_free_added(rest);
      if (!replace_in_place(pool.blocks, it, rest)) {
        pool.blocks.erase(it);
        pool.blocks.insert(rest);
      }
      return b;
    }
    pool.blocks.erase(it);
    return b;
  }

  // Puts `now` in the set where `it` is when that keeps the set's order, which is the usual case
  // for a small block (the segment's free tail split off, or merged back): no tree rebalancing.
  // The value at `it` may be a dropped block: only its neighbours are compared.
  static bool replace_in_place(BlockSet& set, BlockSet::iterator it, Block* now) {
    BlockLess less;
    if (it != set.begin() && !less(*std::prev(it), now)) return false;
    if (auto next = std::next(it); next != set.end() && !less(now, *next)) return false;
    const_cast<Block*&>(*it) = now;  // the node's value, not a const object; the order holds
    return true;
  }

  void note_free_removed(Block* b) {
    if (b->is_split()) {
      update(stats_.inactive_split, b->pool->is_small, -1);
      update(stats_.inactive_split_bytes, b->pool->is_small, -static_cast<int64_t>(b->size));
    }
  }
  void note_free_added(Block* b) {
    if (b->is_split()) {
      update(stats_.inactive_split, b->pool->is_small, 1);
      update(stats_.inactive_split_bytes, b->pool->is_small, static_cast<int64_t>(b->size));
    }
  }
  void insert_free(Block* b) {
    note_free_added(b);
    b->pool->blocks.insert(b);
  }

  void add_reserved(BlockPool& pool, int64_t delta) {
    update(stats_.reserved_bytes, pool.is_small, delta);
    if (pool.owner) update(pool_reserved_[pool.owner->id], pool.is_small, delta);
  }
  size_t reserved() const { return static_cast<size_t>(stats_.reserved_bytes[0].current); }

  Block* alloc_new(BlockPool& pool, musaStream_t stream, size_t size, const AllocatorConfig& cfg, std::string* why,
                   bool* over_limit) {
    if (cfg.expandable_segments && !pool.owner) return alloc_expandable(pool, stream, size, why, over_limit);
    size_t seg = segment_size(size);
    *over_limit = limit_ && reserved() + seg > limit_;
    if (*over_limit) {
      num_oom_rejections_++;
      return nullptr;
    }
    void* ptr = nullptr;
    DeviceScope scope(device_);
    if (const SegmentAllocator* custom = pool.owner ? pool.owner->custom.get() : nullptr) {
      ptr = custom->allocate(seg, device_, stream);
      if (!ptr) {
        *why = "the MemPool's allocator (" + custom->description + ") returned null";
        (void)musaGetLastError();  // handled (an OutOfMemoryError follows), as a failed musaMalloc is
        return nullptr;
      }
    } else if (musaMalloc(&ptr, seg) != musaSuccess) {
      *why = musaGetLastErrorMessage();
      (void)musaGetLastError();
      return nullptr;
    }
    stats_.num_device_alloc++;
    update(stats_.segment, pool.is_small, 1);
    add_reserved(pool, static_cast<int64_t>(seg));
    if (seg >= cfg.max_split_size) stats_.oversize_segments.increase(1);
    trace(TraceAction::SEGMENT_ALLOC, ptr, seg, stream, pool, nullptr, 99);
    return new_block(device_, stream, seg, &pool, ptr);
  }

  // ---- expandable segments ----
  // The expandable segment of (pool, stream). Its page is the device's
  // allocation granularity (the rounding unit); physical memory is mapped in
  // extents of several pages (expandable_segment.h says why).
  // (Defined in expandable_growth.cpp.)
  ExpandableSegment* segment_for(BlockPool& pool, musaStream_t stream);
  // Inserts an unmapped free range, merged with unmapped free neighbours.
  void insert_unmapped(Block* b);
  // Keeps the segment and reserved-bytes stats in step with a segment's mapped bytes.
  void segment_mapped_changed(ExpandableSegment* seg, BlockPool& pool, size_t before);

  // Unmaps the whole extents inside a free, mapped block (which must not be
  // in any set); the mapped remainders go back to the free set. Only the last
  // extents, as few as cover `max_bytes`, are unmapped, so the block's front
  // stays mapped for reuse. Returns the bytes unmapped.
  size_t unmap_free_block(Block* b, size_t max_bytes = SIZE_MAX, bool keep_spare = false);

  // Unmaps free extents of this stream's expandable segments in the pool
  // (largest free blocks first, only as much of each as still needed) until
  // `bytes` are released or none are left; `keep`/`keep2` are not touched.
  // Extents of `seg` stay as its spares for the map that follows
  // (alloc_expandable frees what that map did not use).
  void reclaim(ExpandableSegment* seg, BlockPool& pool, size_t bytes, Block* keep, Block* keep2 = nullptr);

  // A block of `size` from the expandable segment serving it (null when out of memory).
  Block* alloc_expandable(BlockPool& pool, musaStream_t stream, size_t size, std::string* why, bool* over_limit);
  Block* grow_expandable(ExpandableSegment* seg, BlockPool& pool, musaStream_t stream, size_t size,
                         std::string* why, bool* over_limit);

  // Block objects come and go with every split and merge (each small allocation and free);
  // the dropped ones are kept for the next split instead of going through malloc.
  template <class... Args>
  Block* new_block(Args&&... args) {
    void* mem = spare_blocks_.empty() ? ::operator new(sizeof(Block)) : spare_blocks_.back();
    if (!spare_blocks_.empty()) spare_blocks_.pop_back();
    return new (mem) Block(std::forward<Args>(args)...);
  }
  void drop_block(Block* b) {
    b->~Block();
    if (spare_blocks_.size() < kSpareBlocks) spare_blocks_.push_back(b);
    else ::operator delete(static_cast<void*>(b));
  }

  // `b` takes over its neighbour `nb` (which is dropped).
  void absorb(Block* b, Block* nb) {
    if (nb == b->prev) {
      b->ptr = nb->ptr;
      b->prev = nb->prev;
      if (b->prev) b->prev->next = b;
    } else {
      b->next = nb->next;
      if (b->next) b->next->prev = b;
    }
    b->size += nb->size;
    drop_block(nb);
  }

  // Splits `b` at `offset` bytes; the new right part is returned (not in any set).
  Block* split_at(Block* b, size_t offset) {
    Block* rest = new_block(device_, b->stream, b->size - offset, b->pool, b->ptr + offset);
    rest->mapped = b->mapped;
    rest->expandable = b->expandable;
    rest->prev = b;
    rest->next = b->next;
    if (rest->next) rest->next->prev = rest;
    b->next = rest;
    b->size = offset;
    return rest;
  }

  static bool wants_split(const Block* block, size_t size, const AllocatorConfig& cfg) {
    size_t remaining = block->size - size;
    // Expandable remainders are kept however small: they join the next growth of the segment.
    return block->pool->is_small || block->expandable ? remaining >= kMinBlockSize
                                                      : remaining > kSmallSize && block->size < cfg.max_split_size;
  }

  Block* maybe_split(Block* block, size_t size, const AllocatorConfig& cfg) {
    if (!wants_split(block, size, cfg)) return block;
    size_t remaining = block->size - size;
    if (block->expandable && block->mapped && remaining >= block->expandable->page_size()) {
      // Take the end of the block when that leaves more whole extents free
      // (an extent with a live byte cannot be unmapped).
      ExpandableSegment* seg = block->expandable;
      size_t off = static_cast<size_t>(block->ptr - seg->base());
      auto front = seg->whole_extents(off + size, remaining);
      auto back = seg->whole_extents(off, remaining);
      if (back.second - back.first > front.second - front.first) {
        Block* tail = split_at(block, remaining);
        insert_free(block);
        return tail;
      }
    }
    insert_free(split_at(block, size));
    return block;
  }

  void insert_events(Block* block) {
    DeviceScope scope(device_);
    auto uses = std::move(block->stream_uses);
    block->stream_uses.clear();
    for (auto& s : uses) {
      musaEvent_t ev = nullptr;
      MUSA_CHECK(musaEventCreateWithFlags(&ev, musaEventDisableTiming));
      MUSA_CHECK(musaEventRecord(ev, native_stream(s)));
      block->pending_events++;
      pending_.emplace_back(ev, block);
    }
  }

  void process_events() {
    if (captures_underway_ > 0) return;  // a query would invalidate the capture
    while (!pending_.empty()) {
      auto [ev, block] = pending_.front();
      musaError_t q = musaEventQuery(ev);
      if (q == musaErrorNotReady) {
        (void)musaGetLastError();
        break;
      }
      (void)musaEventDestroy(ev);
      pending_.pop_front();
      if (--block->pending_events == 0) free_block(block);
    }
  }

  void synchronize_and_free_events() {
    if (pending_.empty()) return;
    stats_.num_sync_all_streams++;
    for (auto& [ev, block] : pending_) {
      (void)musaEventSynchronize(ev);
      (void)musaEventDestroy(ev);
      if (--block->pending_events == 0) free_block(block);
    }
    pending_.clear();
  }

  // Returns a block to its pool, merging it with free mapped neighbours.
  void free_block(Block* block) {
    note_freed(block);
    merge_free(block);
  }

  // A block is free now (no longer active): its stats and history.
  void note_freed(Block* block) {
    BlockPool& pool = *block->pool;
    bool small = pool.is_small;
    update(stats_.active, small, -1);
    update(stats_.active_bytes, small, -static_cast<int64_t>(block->size));
    trace(TraceAction::FREE_COMPLETED, block->ptr, block->size, block->stream, pool, nullptr, 99);
    block->context.reset();
  }

  // Puts a free block (counted free, in no set) into its pool's free set, merged with its free
  // neighbours.
  void merge_free(Block* block) {
    BlockPool& pool = *block->pool;
    // The free neighbours are found before any merge changes the blocks the set compares; the
    // place of the larger (usually the segment's free tail) is kept for the merged block.
    auto keep = pool.blocks.end(), drop = pool.blocks.end();
    size_t kept_size = 0;
    for (Block* nb : {block->prev, block->next}) {
      if (!nb || !nb->mergeable()) continue;
      note_free_removed(nb);
      auto it = pool.blocks.find(nb);
      if (it == pool.blocks.end()) continue;
      if (nb->size > kept_size) drop = keep, keep = it, kept_size = nb->size;
      else drop = it;
    }
    if (drop != pool.blocks.end()) pool.blocks.erase(drop);
    for (Block* nb : {block->prev, block->next})
      if (nb && nb->mergeable()) absorb(block, nb);
    note_free_added(block);
    if (keep == pool.blocks.end() || !replace_in_place(pool.blocks, keep, block)) {
      if (keep != pool.blocks.end()) pool.blocks.erase(keep);
      pool.blocks.insert(block);
    }
    if (pool.owner && --pool.owner->allocated == 0 && pool.owner->use_count <= 0) maybe_drop_pool(*pool.owner);
    else if (!g_caching_enabled.load(std::memory_order_relaxed)) uncache(pool, block);
  }

  // ---- parked blocks ----
  // A freed small block is parked as it is, unmerged and in no free set, for the next request
  // of its exact size on its stream: the usual allocate/free of same-sized temporaries then
  // skips the free set and the split and merge. A parked block counts as free everywhere
  // (allocated, active; inactive_split as the separate block it is) and is merged into its pool
  // before anything reads the pool's layout (stats, snapshots), frees cached memory (empty_cache,
  // an allocation's retry, garbage collection), or when the free sets cannot serve a request.
  bool can_park(const Block* b, const AllocatorConfig& cfg) const {
    return b->pool == &small_ && !b->expandable && b->size < cfg.max_split_size &&
           cfg.garbage_collection_threshold <= 0 && g_caching_enabled.load(std::memory_order_relaxed);
  }
  void park(Block* block) {
    note_freed(block);
    note_free_added(block);
    block->parked = true;
    if (num_parked_ == kParked) unpark_at(0);  // the oldest
    parked_[num_parked_++] = block;
  }
  Block* take_parked(musaStream_t stream, size_t size) {
    for (int i = num_parked_ - 1; i >= 0; --i) {  // the newest first: warm in cache
      Block* b = parked_[i];
      if (b->size != size || b->stream != stream) continue;
      remove_parked(i);
      note_free_removed(b);
      return b;
    }
    return nullptr;
  }
  void remove_parked(int i) {
    parked_[i]->parked = false;
    std::copy(parked_ + i + 1, parked_ + num_parked_, parked_ + i);
    --num_parked_;
  }
  void unpark_at(int i) {
    Block* b = parked_[i];
    remove_parked(i);
    note_free_removed(b);
    merge_free(b);
  }
  void unpark_all() {
    while (num_parked_ > 0) unpark_at(num_parked_ - 1);
  }

  void release_cached(BlockPool& pool) {
    DeviceScope scope(device_);
    std::vector<Block*> expandable;
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      Block* b = *it;
      if (b->expandable) {
        expandable.push_back(b);
        it = pool.blocks.erase(it);
        note_free_removed(b);
        continue;
      }
      if (b->is_split()) {
        ++it;
        continue;
      }
      it = pool.blocks.erase(it);
      free_segment(pool, b);
    }
    for (Block* b : expandable) unmap_free_block(b);
  }

  // Gives a whole segment that is free and in no set back to the device.
  void free_segment(BlockPool& pool, Block* b) {
    if (pool.owner && pool.owner->custom) pool.owner->custom->release(b->ptr, b->size, device_, b->stream);
    else MUSA_CHECK(musaFree(b->ptr));
    stats_.num_device_free++;
    update(stats_.segment, pool.is_small, -1);
    add_reserved(pool, -static_cast<int64_t>(b->size));
    if (b->size >= allocator_config().max_split_size) stats_.oversize_segments.decrease(1);
    trace(TraceAction::SEGMENT_FREE, b->ptr, b->size, b->stream, pool, nullptr, 99);
    drop_block(b);
  }

  // With caching off, a block that is free again gives its memory back as soon as its segment
  // (or, expandable, its extents) holds nothing else. Private pools (MemPools, captures) keep
  // theirs, and nothing is freed while a capture runs (the driver would invalidate it).
  void uncache(BlockPool& pool, Block* b) {
    if (pool.owner || captures_underway_ > 0 || !pool.blocks.count(b)) return;
    DeviceScope scope(device_);
    if (b->expandable) {
      pool.blocks.erase(b);
      note_free_removed(b);
      unmap_free_block(b);
    } else if (!b->is_split()) {
      pool.blocks.erase(b);
      free_segment(pool, b);
    }
  }

  void release_all_cached() {
    unpark_all();
    synchronize_and_free_events();
    release_cached(small_);
    release_cached(large_);
    for (auto& [id, p] : pools_) {
      release_cached(p->small);
      release_cached(p->large);
    }
  }

  void maybe_drop_pool(PrivatePool& p) {
    release_cached(p.small);
    release_cached(p.large);
    if (p.allocated == 0 && p.small.blocks.empty() && p.large.blocks.empty()) {
      auto it = pool_reserved_.find(p.id);
      if (it != pool_reserved_.end()) {
        for (auto& s : it->second) TORCH_INTERNAL_ASSERT(s.current == 0);
      }
      pools_.erase(p.id);
    }
  }

  void age_blocks(BlockPool& pool) {
    for (Block* b : pool.blocks) b->gc_count++;
  }

  // garbage_collection_threshold: once reserved memory passes the threshold
  // of the allowed memory, free the cached whole segments (oldest first) that
  // have gone unused longer than average, until below the threshold.
  // (Defined in memory_pressure.cpp, as is raise_oom.)
  void garbage_collect(const AllocatorConfig& cfg);
  [[noreturn]] void raise_oom(size_t requested, musaStream_t stream, BlockPool& pool, const AllocatorConfig& cfg,
                              const std::string& detail, bool over_limit);

  c10::DeviceIndex device_;
  // Recursive: a MemPool's own allocator, called under the lock, may allocate musa memory again.
  std::recursive_mutex mu_;
  BlockPool small_{true, nullptr};
  BlockPool large_{false, nullptr};
  ska::flat_hash_map<void*, Block*> active_;  // flat: no node allocation per block
  std::deque<std::pair<musaEvent_t, Block*>> pending_;
  std::map<std::pair<void*, BlockPool*>, std::unique_ptr<ExpandableSegment>> expandable_;
  std::map<MempoolId_t, std::unique_ptr<PrivatePool>> pools_;
  std::map<MempoolId_t, StatArray> pool_reserved_;
  struct Route {
    MempoolId_t id;
    std::thread::id thread;
    std::function<bool(musaStream_t)> filter;  // null: the thread's allocations
  };
  std::vector<Route> routes_;
  int captures_underway_ = 0;
  std::vector<Block*> deferred_;  // freed with stream uses during a capture
  static constexpr size_t kSpareBlocks = 1024;
  static constexpr int kParked = 16;
  Block* parked_[kParked] = {};  // oldest first (park, take_parked)
  int num_parked_ = 0;
  std::vector<void*> spare_blocks_;  // memory of dropped Blocks (new_block/drop_block)
  std::vector<TraceSnapshot> traces_;
  size_t trace_next_ = 0;
  c10::CachingDeviceAllocator::DeviceStats stats_;
  int64_t num_oom_rejections_ = 0;
  size_t limit_ = 0;  // 0: no per-process limit
  double fraction_ = 1.0;
};

}  // namespace detail
}  // namespace torch_musa::allocator
