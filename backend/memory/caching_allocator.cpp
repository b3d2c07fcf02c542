// The c10::DeviceAllocator front end of the musa caching allocator, snapshots,
// and the functions caching_allocator.h declares. The per-device allocator
// itself is in device_caching_allocator.h.
#include "memory/caching_allocator.h"

#include <c10/util/CallOnce.h>

#include <cstdlib>
#include <string>

#include <unordered_set>

#include "memory/device_caching_allocator.h"

namespace torch_musa::allocator {
namespace detail {

void DeviceCachingAllocator::snapshot_into(Snapshot& out, const MempoolId_t* only) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  unpark_all();  // segments show their free blocks merged
  std::unordered_set<Block*> all;
  for (auto& [p, b] : active_) all.insert(b);
  for (auto& [ev, b] : pending_) all.insert(b);
  std::vector<BlockPool*> pools = {&small_, &large_};
  for (auto& [id, p] : pools_) pools.push_back(&p->small), pools.push_back(&p->large);
  for (BlockPool* p : pools) {
    all.insert(p->blocks.begin(), p->blocks.end());
    all.insert(p->unmapped.begin(), p->unmapped.end());
  }
  std::vector<Block*> heads;
  for (Block* b : all)
    if (!b->prev) heads.push_back(b);
  std::sort(heads.begin(), heads.end(), [](Block* a, Block* b) { return a->ptr < b->ptr; });
  for (Block* head : heads) {
    MempoolId_t owner = head->pool->owner ? head->pool->owner->id : MempoolId_t{0, 0};
    if (only && *only != MempoolId_t{0, 0} && owner != *only) continue;
    SegmentSnapshot* seg = nullptr;
    for (Block* b = head; b; b = b->next) {
      if (!b->mapped) {  // an unmapped gap ends a segment of an expandable range
        seg = nullptr;
        continue;
      }
      if (!seg) {
        out.segments.emplace_back();
        seg = &out.segments.back();
        seg->device = device_;
        seg->address = reinterpret_cast<size_t>(b->ptr);
        seg->stream = b->stream;
        seg->is_large = !b->pool->is_small;
        seg->is_expandable = b->expandable != nullptr;
        seg->pool_id = owner;
      }
      BlockSnapshot bs;
      bs.address = reinterpret_cast<size_t>(b->ptr);
      bs.size = b->size;
      seg->total_size += b->size;
      if (b->allocated) {
        bs.state = "active_allocated";
        bs.requested_size = b->requested;
        bs.context = b->context;
        seg->allocated_size += b->size;
        seg->active_size += b->size;
        seg->requested_size += b->requested;
      } else if (b->pending_events > 0) {
        bs.state = "active_pending_free";
        bs.requested_size = b->requested;
        seg->active_size += b->size;
      }
      seg->blocks.push_back(std::move(bs));
    }
  }
}

// PYTORCH_NO_MUSA_MEMORY_CACHING=1 (as CUDA's PYTORCH_NO_CUDA_MEMORY_CACHING) starts with caching off.
std::atomic<bool> g_caching_enabled{[] {
  const char* v = std::getenv("PYTORCH_NO_MUSA_MEMORY_CACHING");
  return v == nullptr || std::string(v) == "0" || std::string(v).empty();
}()};

namespace {

void delete_block(void* ctx);

class MusaCachingAllocator final : public c10::DeviceAllocator {
 public:
  DeviceCachingAllocator& device(c10::DeviceIndex d) {
    // Asked on every allocation and free: once made, a valid index needs no other check.
    if (C10_LIKELY(initialized_.load(std::memory_order_acquire) && d >= 0 &&
                   static_cast<size_t>(d) < devices_.size()))
      return *devices_[d];
    check_device_index(d);
    c10::call_once(init_, [this] {
      auto n = device_count();
      for (c10::DeviceIndex i = 0; i < n; ++i) devices_.emplace_back(new DeviceCachingAllocator(i));
      initialized_.store(true);
    });
    return *devices_[d];
  }

  Block* malloc(c10::DeviceIndex d, size_t nbytes, musaStream_t stream) {
    if (C10_UNLIKELY(in_bad_fork())) check_not_in_bad_fork();
    std::shared_ptr<c10::GatheredContext> ctx;
    // Gathered outside the allocator lock: gathering may take the GIL.
    if (g_record_enabled.load()) ctx = gather_context(1);
    Block* b = nullptr;
    try {
      b = device(d).malloc(nbytes, stream, std::move(ctx));
    } catch (const c10::OutOfMemoryError&) {
      report_oom_to_profiler(d, nbytes);
      throw;
    }
    report_to_profiler(b->ptr, d, static_cast<int64_t>(b->size));
    return b;
  }

  // An out-of-memory inside torch.profiler(profile_memory=True) is an
  // [OutOfMemory] event (the rounded request, the device's totals), as CUDA's
  // caching allocator reports it.
  void report_oom_to_profiler(c10::DeviceIndex d, size_t nbytes) {
    if (C10_LIKELY(!c10::memoryProfilingEnabled())) return;
    auto [allocated, reserved] = device(d).allocated_and_reserved();
    c10::reportOutOfMemoryToProfiler(static_cast<int64_t>(round_size(nbytes, allocator_config())), allocated,
                                     reserved, c10::Device(c10::DeviceType::PrivateUse1, d));
  }

  // torch.profiler(profile_memory=True) sees every block handed out and
  // given back, with the device's allocated and reserved totals after it.
  void report_to_profiler(void* ptr, c10::DeviceIndex d, int64_t delta) {
    if (C10_LIKELY(!c10::memoryProfilingEnabled())) return;
    auto [allocated, reserved] = device(d).allocated_and_reserved();
    c10::reportMemoryUsageToProfiler(ptr, delta, allocated, reserved, c10::Device(c10::DeviceType::PrivateUse1, d));
  }

  c10::DataPtr allocate(size_t nbytes) override {
    auto d = current_device();
    if (nbytes == 0) return c10::DataPtr(nullptr, nullptr, &delete_block, c10::Device(c10::DeviceType::PrivateUse1, d));
    Block* b = malloc(d, nbytes, current_native_stream(d));
    return c10::DataPtr(b->ptr, b, &delete_block, c10::Device(c10::DeviceType::PrivateUse1, d));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &raw_delete; }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    MUSA_CHECK(musaMemcpy(dest, src, count, musaMemcpyDeviceToDevice));
  }

  bool initialized() override { return initialized_.load(); }
  void emptyCache(c10::MempoolId_t) override {
    if (!initialized()) return;
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

  size_t num_devices() const { return devices_.size(); }
  bool owns(void* ptr) {
    if (!initialized()) return false;
    for (auto& d : devices_)
      if (d->find(ptr)) return true;
    return false;
  }

  std::mutex raw_mu;
  std::unordered_map<void*, Block*> raw_blocks;

 private:
  c10::once_flag init_;  // asked on every allocation and free (see core/stream.cpp's pools)
  std::atomic<bool> initialized_{false};
  std::vector<std::unique_ptr<DeviceCachingAllocator>> devices_;
};

// Never destroyed: tensors freed during interpreter shutdown, and drivers
// whose device context is already gone at exit, must not meet a destroyed
// allocator (torch's CUDA allocator lives forever for the same reason).
MusaCachingAllocator& g_allocator = *new MusaCachingAllocator();

void delete_block(void* ctx) {
  if (!ctx) return;
  auto* b = static_cast<Block*>(ctx);
  std::shared_ptr<c10::GatheredContext> fctx;
  if (g_record_enabled.load() >= 2) fctx = gather_context(3);
  void* ptr = b->ptr;
  auto size = static_cast<int64_t>(b->size);
  auto device = b->device;
  g_allocator.device(device).free(b, std::move(fctx));
  g_allocator.report_to_profiler(ptr, device, -size);
}

}  // namespace
}  // namespace detail

using detail::g_allocator;

c10::DeviceAllocator* get() { return &g_allocator; }

void record_stream(const c10::DataPtr& ptr, c10::Stream stream) { g_allocator.recordStream(ptr, stream); }

c10::CachingDeviceAllocator::DeviceStats device_stats(c10::DeviceIndex d) { return g_allocator.getDeviceStats(d); }
ExtraStats extra_stats(c10::DeviceIndex d) { return g_allocator.device(d).extra(); }
void reset_peak_stats(c10::DeviceIndex d) { g_allocator.resetPeakStats(d); }
void reset_accumulated_stats(c10::DeviceIndex d) { g_allocator.resetAccumulatedStats(d); }
void empty_cache() { g_allocator.emptyCache({0, 0}); }
void set_caching_enabled(bool enabled) {
  detail::g_caching_enabled.store(enabled);
  if (!enabled) empty_cache();  // what is cached now goes back too
}
bool caching_enabled() { return detail::g_caching_enabled.load(); }
void set_memory_fraction(double f, c10::DeviceIndex d) {
  TORCH_CHECK(f >= 0 && f <= 1, "invalid memory fraction ", f, ": it must be between 0 and 1");
  g_allocator.device(d).set_fraction(f);
}
double get_memory_fraction(c10::DeviceIndex d) { return g_allocator.device(d).fraction(); }

void* raw_alloc_with_stream(size_t nbytes, void* stream) {
  if (nbytes == 0) return nullptr;
  auto d = current_device();
  detail::Block* b = g_allocator.malloc(d, nbytes, static_cast<musaStream_t>(stream));
  std::lock_guard<std::mutex> g(g_allocator.raw_mu);
  g_allocator.raw_blocks[b->ptr] = b;
  return b->ptr;
}

bool is_allocated_block(void* ptr) { return ptr && g_allocator.owns(ptr); }

bool expandable_extents(const c10::DataPtr& ptr, std::vector<BlockExtent>* extents, size_t* offset_in_first) {
  if (ptr.get_deleter() != &detail::delete_block || !ptr.get_context()) return false;
  auto* b = static_cast<detail::Block*>(ptr.get_context());
  if (!b->expandable) return false;
  // The block is live, so its extents stay mapped while the caller reads them.
  size_t offset = static_cast<size_t>(b->ptr - b->expandable->base());
  auto found = b->expandable->extents(offset, b->size);
  if (found.empty()) return false;
  extents->clear();
  for (const auto& e : found) extents->push_back({e.size, e.handle});
  *offset_in_first = offset - found.front().offset;
  return true;
}

void* raw_alloc(size_t nbytes) {
  auto d = current_device();
  return raw_alloc_with_stream(nbytes, current_native_stream(d));
}

void raw_delete(void* ptr) {
  if (!ptr) return;
  detail::Block* b = nullptr;
  {
    std::lock_guard<std::mutex> g(g_allocator.raw_mu);
    auto it = g_allocator.raw_blocks.find(ptr);
    TORCH_CHECK(it != g_allocator.raw_blocks.end(), "raw_delete: pointer was not allocated by raw_alloc");
    b = it->second;
    g_allocator.raw_blocks.erase(it);
  }
  detail::delete_block(b);
}

bool owns_data_ptr(const c10::DataPtr& ptr) { return ptr.get_deleter() == &detail::delete_block; }

c10::DataPtr claim_pool_range(c10::DeviceIndex d, c10::MempoolId_t id, void* ptr, size_t nbytes) {
  detail::Block* b = g_allocator.device(d).claim(id, ptr, nbytes);
  if (!b) return c10::DataPtr(nullptr, c10::Device(c10::DeviceType::PrivateUse1, d));
  g_allocator.report_to_profiler(b->ptr, d, static_cast<int64_t>(b->size));
  return c10::DataPtr(b->ptr, b, &detail::delete_block, c10::Device(c10::DeviceType::PrivateUse1, d));
}

void free_and_disown(c10::DataPtr& ptr) {
  void* ctx = ptr.get_context();
  TORCH_CHECK(ptr.compare_exchange_deleter(&detail::delete_block, &c10::detail::deleteNothing),
              "musa graph trees: expected memory of the musa caching allocator");
  detail::delete_block(ctx);
}

c10::MempoolId_t create_pool(c10::DeviceIndex d, std::shared_ptr<SegmentAllocator> custom) {
  return g_allocator.device(d).create_pool(std::move(custom));
}
void begin_allocate_to_pool(c10::DeviceIndex d, c10::MempoolId_t id) { g_allocator.device(d).begin_pool(id); }
void end_allocate_to_pool(c10::DeviceIndex d, c10::MempoolId_t id) { g_allocator.device(d).end_pool(id); }
void begin_allocate_streams_to_pool(c10::DeviceIndex d, c10::MempoolId_t id, std::function<bool(void*)> on_stream) {
  g_allocator.device(d).begin_pool_for_streams(id, [f = std::move(on_stream)](musaStream_t s) { return f(s); });
}
c10::MempoolId_t new_pool_id() { return {0, detail::g_pool_uid++}; }
void create_or_retain_pool(c10::DeviceIndex d, c10::MempoolId_t id) { g_allocator.device(d).create_or_retain_pool(id); }
c10::DeviceIndex pool_device(c10::MempoolId_t id) {
  for (c10::DeviceIndex d = 0; d < device_count(); ++d)
    if (g_allocator.device(d).has_pool(id)) return d;
  return -1;
}
void note_capture_begin(c10::DeviceIndex d) { g_allocator.device(d).capture_begins(); }
void note_capture_end(c10::DeviceIndex d) { g_allocator.device(d).capture_ends(); }
void release_pool(c10::DeviceIndex d, c10::MempoolId_t id) { g_allocator.device(d).release_pool(id); }
void retain_pool(c10::DeviceIndex d, c10::MempoolId_t id) { g_allocator.device(d).retain_pool(id); }
int pool_use_count(c10::DeviceIndex d, c10::MempoolId_t id) { return g_allocator.device(d).use_count(id); }

const char* trace_action_name(TraceAction a) {
  switch (a) {
    case TraceAction::ALLOC: return "alloc";
    case TraceAction::FREE_REQUESTED: return "free_requested";
    case TraceAction::FREE_COMPLETED: return "free_completed";
    case TraceAction::SEGMENT_ALLOC: return "segment_alloc";
    case TraceAction::SEGMENT_FREE: return "segment_free";
    case TraceAction::SEGMENT_MAP: return "segment_map";
    case TraceAction::SEGMENT_UNMAP: return "segment_unmap";
    case TraceAction::SNAPSHOT: return "snapshot";
    case TraceAction::OOM: return "oom";
  }
  return "unknown";
}

Snapshot snapshot(const c10::MempoolId_t* pool, bool include_traces) {
  Snapshot s;
  if (!g_allocator.initialized()) {
    s.device_traces.resize(static_cast<size_t>(std::max<int>(0, device_count())));
    return s;
  }
  size_t n = g_allocator.num_devices();
  s.device_traces.resize(n);
  for (size_t i = 0; i < n; ++i) {
    auto& dev = g_allocator.device(static_cast<c10::DeviceIndex>(i));
    dev.note_snapshot();
    dev.snapshot_into(s, pool);
    if (include_traces) dev.traces_into(s.device_traces[i]);
  }
  return s;
}

void record_history(int enabled, int context, bool cpp_stacks, size_t max_entries, bool clear, ContextFn fn) {
  using namespace detail;
  if (fn) g_context_fn.store(fn);
  g_record_cpp.store(cpp_stacks);
  g_record_context.store(enabled ? context : 0);
  g_max_entries.store(enabled >= 2 ? max_entries : 0);
  g_record_enabled.store(enabled);
  if (clear && g_allocator.initialized())
    for (size_t i = 0; i < g_allocator.num_devices(); ++i)
      g_allocator.device(static_cast<c10::DeviceIndex>(i)).clear_traces();
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_musa::allocator
