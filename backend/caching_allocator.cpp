#include "caching_allocator.h"

#include <algorithm>
#include <deque>
#include <mutex>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "device.h"
#include "musa_check.h"
#include "stream.h"

namespace torch_musa::allocator {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;

constexpr size_t kMinBlockSize = 512;          // all sizes are rounded to this
constexpr size_t kSmallSize = 1 << 20;         // small pool: requests <= 1 MiB
constexpr size_t kSmallBuffer = 2 << 20;       // small pool segments are 2 MiB
constexpr size_t kLargeBuffer = 20 << 20;      // mid-size requests get 20 MiB segments
constexpr size_t kMinLargeAlloc = 10 << 20;    // above this, round to 2 MiB
constexpr size_t kRoundLarge = 2 << 20;

size_t round_size(size_t n) {
  if (n < kMinBlockSize) return kMinBlockSize;
  return (n + kMinBlockSize - 1) / kMinBlockSize * kMinBlockSize;
}

size_t segment_size(size_t n) {
  if (n <= kSmallSize) return kSmallBuffer;
  if (n < kMinLargeAlloc) return kLargeBuffer;
  return (n + kRoundLarge - 1) / kRoundLarge * kRoundLarge;
}

std::string format_size(size_t bytes) {
  char buf[64];
  if (bytes < 1024) snprintf(buf, sizeof buf, "%zu bytes", bytes);
  else if (bytes < (1 << 20)) snprintf(buf, sizeof buf, "%.2f KiB", bytes / 1024.0);
  else if (bytes < (size_t(1) << 30)) snprintf(buf, sizeof buf, "%.2f MiB", bytes / 1048576.0);
  else snprintf(buf, sizeof buf, "%.2f GiB", bytes / 1073741824.0);
  return buf;
}

struct BlockPool;

struct Block {
  c10::DeviceIndex device;
  musaStream_t stream;
  size_t size;
  size_t requested = 0;
  void* ptr;
  BlockPool* pool;
  bool allocated = false;
  Block* prev = nullptr;  // neighbours within the same segment
  Block* next = nullptr;
  std::vector<c10::Stream> stream_uses;
  int pending_events = 0;
  Block(c10::DeviceIndex d, musaStream_t s, size_t sz, BlockPool* p, void* ptr_)
      : device(d), stream(s), size(sz), ptr(ptr_), pool(p) {}
  bool is_split() const { return prev || next; }
};

bool block_less(const Block* a, const Block* b) {
  if (a->stream != b->stream) return reinterpret_cast<uintptr_t>(a->stream) < reinterpret_cast<uintptr_t>(b->stream);
  if (a->size != b->size) return a->size < b->size;
  return reinterpret_cast<uintptr_t>(a->ptr) < reinterpret_cast<uintptr_t>(b->ptr);
}

struct BlockPool {
  std::set<Block*, bool (*)(const Block*, const Block*)> blocks{block_less};
  bool is_small;
  explicit BlockPool(bool small) : is_small(small) {}
};

void update(StatArray& arr, bool small, int64_t delta) {
  auto apply = [delta](Stat& s) {
    if (delta >= 0) s.increase(static_cast<size_t>(delta));
    else s.decrease(static_cast<size_t>(-delta));
  };
  apply(arr[static_cast<size_t>(StatType::AGGREGATE)]);
  apply(arr[static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL)]);
}

class DeviceCachingAllocator {
 public:
  explicit DeviceCachingAllocator(c10::DeviceIndex device) : device_(device) {}

  Block* malloc(size_t requested, musaStream_t stream) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    process_events();
    size_t size = round_size(requested);
    BlockPool& pool = size <= kSmallSize ? small_ : large_;
    Block* block = take_free_block(pool, stream, size);
    if (!block) block = alloc_segment(pool, stream, size, requested);
    block = maybe_split(block, size);
    block->allocated = true;
    block->requested = requested;
    active_.emplace(block->ptr, block);
    bool small = pool.is_small;
    update(stats_.allocation, small, 1);
    update(stats_.allocated_bytes, small, static_cast<int64_t>(block->size));
    update(stats_.active, small, 1);
    update(stats_.active_bytes, small, static_cast<int64_t>(block->size));
    update(stats_.requested_bytes, small, static_cast<int64_t>(requested));
    return block;
  }

  void free(Block* block) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    active_.erase(block->ptr);
    block->allocated = false;
    bool small = block->pool->is_small;
    update(stats_.allocation, small, -1);
    update(stats_.allocated_bytes, small, -static_cast<int64_t>(block->size));
    update(stats_.requested_bytes, small, -static_cast<int64_t>(block->requested));
    if (!block->stream_uses.empty()) {
      insert_events(block);
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
    synchronize_and_free_events();
    release_cached(small_);
    release_cached(large_);
  }

  c10::CachingDeviceAllocator::DeviceStats stats() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    for (StatArray* a : all_stat_arrays())
      for (auto& s : *a) s.reset_peak();
    stats_.oversize_allocations.reset_peak();
    stats_.oversize_segments.reset_peak();
  }

  void reset_accumulated() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    for (StatArray* a : all_stat_arrays())
      for (auto& s : *a) s.reset_accumulated();
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_sync_all_streams = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

  void set_fraction(double f) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    DeviceScope scope(device_);
    size_t free = 0, total = 0;
    MUSA_CHECK(musaMemGetInfo(&free, &total));
    limit_ = static_cast<size_t>(f * static_cast<double>(total));
  }

 private:
  std::vector<StatArray*> all_stat_arrays() {
    return {&stats_.allocation, &stats_.segment, &stats_.active, &stats_.inactive_split,
            &stats_.allocated_bytes, &stats_.reserved_bytes, &stats_.active_bytes,
            &stats_.inactive_split_bytes, &stats_.requested_bytes};
  }

  Block* take_free_block(BlockPool& pool, musaStream_t stream, size_t size) {
    Block key(device_, stream, size, &pool, nullptr);
    auto it = pool.blocks.lower_bound(&key);
    if (it == pool.blocks.end() || (*it)->stream != stream) return nullptr;
    Block* b = *it;
    pool.blocks.erase(it);
    if (b->is_split()) {
      update(stats_.inactive_split, pool.is_small, -1);
      update(stats_.inactive_split_bytes, pool.is_small, -static_cast<int64_t>(b->size));
    }
    return b;
  }

  Block* alloc_segment(BlockPool& pool, musaStream_t stream, size_t size, size_t requested) {
    size_t seg = segment_size(size);
    void* ptr = nullptr;
    DeviceScope scope(device_);
    bool over_limit = limit_ && reserved() + seg > limit_;
    musaError_t err = over_limit ? musaErrorMemoryAllocation : musaMalloc(&ptr, seg);
    if (err != musaSuccess) {
      (void)musaGetLastError();
      // Free everything cached and try once more before giving up.
      stats_.num_alloc_retries++;
      synchronize_and_free_events();
      release_cached(small_);
      release_cached(large_);
      over_limit = limit_ && reserved() + seg > limit_;
      err = over_limit ? musaErrorMemoryAllocation : musaMalloc(&ptr, seg);
    }
    if (err != musaSuccess) {
      std::string detail = musaGetLastErrorMessage();
      (void)musaGetLastError();
      stats_.num_ooms++;
      size_t free = 0, total = 0;
      (void)musaMemGetInfo(&free, &total);
      (void)musaGetLastError();
      auto allocated = stats_.allocated_bytes[0].current;
      TORCH_CHECK_WITH(
          OutOfMemoryError, false, "musa out of memory. Tried to allocate ", format_size(requested),
          ". musa device ", static_cast<int>(device_), " has a total capacity of ", format_size(total),
          " of which ", format_size(free), " is free. Of the allocated memory ", format_size(allocated),
          " is allocated by PyTorch, and ", format_size(reserved() - allocated),
          " is reserved by PyTorch but unallocated.",
          over_limit ? " The per-process memory fraction limit was reached." : "",
          " Free tensors you no longer need (then torch.musa.empty_cache()), reduce the batch size, "
          "or set PYTORCH_MUSA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
          detail.empty() ? "" : " [runtime: " + detail + "]");
    }
    stats_.num_device_alloc++;
    update(stats_.segment, pool.is_small, 1);
    update(stats_.reserved_bytes, pool.is_small, static_cast<int64_t>(seg));
    return new Block(device_, stream, seg, &pool, ptr);
  }

  size_t reserved() const {
    return static_cast<size_t>(stats_.reserved_bytes[0].current);
  }

  Block* maybe_split(Block* block, size_t size) {
    size_t remaining = block->size - size;
    bool split = block->pool->is_small ? remaining >= kMinBlockSize : remaining > kSmallSize;
    if (!split) return block;
    auto* rest = new Block(device_, block->stream, remaining, block->pool,
                           static_cast<char*>(block->ptr) + size);
    rest->prev = block;
    rest->next = block->next;
    if (rest->next) rest->next->prev = rest;
    block->next = rest;
    block->size = size;
    block->pool->blocks.insert(rest);
    update(stats_.inactive_split, block->pool->is_small, 1);
    update(stats_.inactive_split_bytes, block->pool->is_small, static_cast<int64_t>(remaining));
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

  // Returns a block to its pool, merging it with free neighbours.
  void free_block(Block* block) {
    BlockPool& pool = *block->pool;
    bool small = pool.is_small;
    int64_t original = static_cast<int64_t>(block->size);
    update(stats_.active, small, -1);
    update(stats_.active_bytes, small, -original);
    for (Block* nb : {block->prev, block->next}) {
      if (!nb || nb->allocated || nb->pending_events) continue;
      pool.blocks.erase(nb);
      update(stats_.inactive_split, small, -1);
      update(stats_.inactive_split_bytes, small, -static_cast<int64_t>(nb->size));
      if (nb == block->prev) {
        block->ptr = nb->ptr;
        block->prev = nb->prev;
        if (block->prev) block->prev->next = block;
      } else {
        block->next = nb->next;
        if (block->next) block->next->prev = block;
      }
      block->size += nb->size;
      delete nb;
    }
    if (block->is_split()) {
      update(stats_.inactive_split, small, 1);
      update(stats_.inactive_split_bytes, small, static_cast<int64_t>(block->size));
    }
    pool.blocks.insert(block);
  }

  void release_cached(BlockPool& pool) {
    DeviceScope scope(device_);
    for (auto it = pool.blocks.begin(); it != pool.blocks.end();) {
      Block* b = *it;
      if (b->is_split()) {
        ++it;
        continue;
      }
      MUSA_CHECK(musaFree(b->ptr));
      stats_.num_device_free++;
      update(stats_.segment, pool.is_small, -1);
      update(stats_.reserved_bytes, pool.is_small, -static_cast<int64_t>(b->size));
      it = pool.blocks.erase(it);
      delete b;
    }
  }

  c10::DeviceIndex device_;
  std::recursive_mutex mu_;
  BlockPool small_{true};
  BlockPool large_{false};
  std::unordered_map<void*, Block*> active_;
  std::deque<std::pair<musaEvent_t, Block*>> pending_;
  c10::CachingDeviceAllocator::DeviceStats stats_;
  size_t limit_ = 0;  // 0: no per-process limit
};

void delete_block(void* ctx);

class MusaCachingAllocator final : public c10::DeviceAllocator {
 public:
  DeviceCachingAllocator& device(c10::DeviceIndex d) {
    check_device_index(d);
    std::call_once(init_, [this] {
      auto n = device_count();
      for (c10::DeviceIndex i = 0; i < n; ++i) devices_.emplace_back(new DeviceCachingAllocator(i));
    });
    return *devices_[d];
  }

  c10::DataPtr allocate(size_t nbytes) override {
    auto d = current_device();
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_block, c10::Device(c10::DeviceType::PrivateUse1, d));
    Block* b = device(d).malloc(nbytes, native_stream(current_stream(d)));
    return c10::DataPtr(b->ptr, b, &delete_block, c10::Device(c10::DeviceType::PrivateUse1, d));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &raw_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    MUSA_CHECK(musaMemcpy(dest, src, count, musaMemcpyDeviceToDevice));
  }

  bool initialized() override { return !devices_.empty(); }
  void emptyCache(c10::MempoolId_t) override {
    for (auto& d : devices_) d->empty_cache();
  }
  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    auto* block = static_cast<Block*>(ptr.get_context());
    if (!block || ptr.get_deleter() != &delete_block) return;
    device(block->device).record_stream(block, stream);
  }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    return device(d).stats();
  }
  void resetAccumulatedStats(c10::DeviceIndex d) override { device(d).reset_accumulated(); }
  void resetPeakStats(c10::DeviceIndex d) override { device(d).reset_peak(); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex d) override {
    DeviceScope scope(d);
    size_t free = 0, total = 0;
    MUSA_CHECK(musaMemGetInfo(&free, &total));
    return {free, total};
  }

  std::mutex raw_mu;
  std::unordered_map<void*, Block*> raw_blocks;

 private:
  std::once_flag init_;
  std::vector<std::unique_ptr<DeviceCachingAllocator>> devices_;
};

MusaCachingAllocator g_allocator;

void delete_block(void* ctx) {
  if (!ctx) return;
  auto* b = static_cast<Block*>(ctx);
  g_allocator.device(b->device).free(b);
}

}  // namespace

c10::DeviceAllocator* get() { return &g_allocator; }

void record_stream(const c10::DataPtr& ptr, c10::Stream stream) { g_allocator.recordStream(ptr, stream); }

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex d) { return g_allocator.getDeviceStats(d); }
void reset_peak_stats(c10::DeviceIndex d) { g_allocator.resetPeakStats(d); }
void reset_accumulated_stats(c10::DeviceIndex d) { g_allocator.resetAccumulatedStats(d); }
void empty_cache() { g_allocator.emptyCache({0, 0}); }
void set_memory_fraction(double f, c10::DeviceIndex d) {
  TORCH_CHECK(f >= 0 && f <= 1, "invalid memory fraction ", f, ": it must be between 0 and 1");
  g_allocator.device(d).set_fraction(f);
}

void* raw_alloc(size_t nbytes) {
  if (nbytes == 0) return nullptr;
  auto d = current_device();
  Block* b = g_allocator.device(d).malloc(nbytes, native_stream(current_stream(d)));
  std::lock_guard<std::mutex> g(g_allocator.raw_mu);
  g_allocator.raw_blocks[b->ptr] = b;
  return b->ptr;
}

void raw_delete(void* ptr) {
  if (!ptr) return;
  Block* b = nullptr;
  {
    std::lock_guard<std::mutex> g(g_allocator.raw_mu);
    auto it = g_allocator.raw_blocks.find(ptr);
    TORCH_CHECK(it != g_allocator.raw_blocks.end(), "raw_delete: pointer was not allocated by raw_alloc");
    b = it->second;
    g_allocator.raw_blocks.erase(it);
  }
  delete_block(b);
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_musa::allocator
