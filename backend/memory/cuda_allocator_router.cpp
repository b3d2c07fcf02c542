#include "memory/cuda_allocator_router.h"

#include <c10/cuda/CUDACachingAllocator.h>

#include <mutex>

#include "memory/caching_allocator.h"
#include "ops/routed_blocks.h"
#include "version_gates.h"

namespace torch_musa::cuda_router {
namespace {

using c10::cuda::CUDACachingAllocator::CUDAAllocator;
namespace CCA = c10::cuda::CUDACachingAllocator;

thread_local c10::DeviceIndex t_delegating = -1;

// Only lent blocks carry this deleter (raw allocations go to torch's own allocator).
void route_delete(void* p) {
  if (p) (void)routed_blocks::release(p, /*known_lent=*/true);
}

// Forwards everything to torch's native CUDA allocator except allocate()
// during musa ops. Every virtual is forwarded so torch.cuda keeps its own
// behaviour (stats, graphs, pools, snapshots) in the same process.
class Router final : public CUDAAllocator {
 public:
  explicit Router(CUDAAllocator* native) : native_(native) {}
  CUDAAllocator* native() const { return native_; }

  c10::DataPtr allocate(size_t n) override {
    if (t_delegating < 0) return native_->allocate(n);
    c10::DataPtr musa = allocator::get()->allocate(n);
    void* p = musa.get();
    // The musa device of the running op is the current CUDA device.
    c10::Device dev(c10::DeviceType::CUDA, c10::cuda::current_device());
    if (!p) return c10::DataPtr(nullptr, nullptr, &route_delete, dev);
    routed_blocks::lend(std::move(musa));
    return c10::DataPtr(p, p, &route_delete, dev);
  }
  c10::DeleterFnPtr raw_deleter() const override { return native_->raw_deleter(); }
  void copy_data(void* dst, const void* src, std::size_t n) const override { native_->copy_data(dst, src, n); }

  // c10::DeviceAllocator
  bool initialized() override { return native_->initialized(); }
  void emptyCache(c10::MempoolId_t id) override { native_->emptyCache(id); }
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex d) override {
    return native_->getDeviceStats(d);
  }
  void resetAccumulatedStats(c10::DeviceIndex d) override { native_->resetAccumulatedStats(d); }
  void resetPeakStats(c10::DeviceIndex d) override { native_->resetPeakStats(d); }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex d) override { return native_->getMemoryInfo(d); }

  // CUDAAllocator
  void* raw_alloc(size_t n) override { return native_->raw_alloc(n); }
  void* raw_alloc_with_stream(size_t n, cudaStream_t s) override { return native_->raw_alloc_with_stream(n, s); }
  void raw_delete(void* p) override { native_->raw_delete(p); }
  void init(int count) override { native_->init(count); }
  double getMemoryFraction(c10::DeviceIndex d) override { return native_->getMemoryFraction(d); }
  void setMemoryFraction(double f, c10::DeviceIndex d) override { native_->setMemoryFraction(f, d); }
  std::vector<CCA::StreamSegmentSize> getExpandableSegmentSizes(c10::DeviceIndex d) override {
    return native_->getExpandableSegmentSizes(d);
  }
  void enable(bool v) override { native_->enable(v); }
  bool isEnabled() const override { return native_->isEnabled(); }
  void cacheInfo(c10::DeviceIndex d, size_t* largest) override { native_->cacheInfo(d, largest); }
  void* getBaseAllocation(void* p, size_t* size) override { return native_->getBaseAllocation(p, size); }
  void recordStream(const c10::DataPtr& ptr, c10::cuda::CUDAStream s) override {
    if (ptr.get_deleter() == &route_delete) return;  // musa blocks follow musa record_stream
    native_->recordStream(ptr, s);
  }
  CCA::SnapshotInfo snapshot(c10::MempoolId_t id, bool traces) override { return native_->snapshot(id, traces); }
  void beginAllocateToPool(c10::DeviceIndex d, c10::MempoolId_t id, std::function<bool(cudaStream_t)> f) override {
    native_->beginAllocateToPool(d, id, std::move(f));
  }
  void endAllocateToPool(c10::DeviceIndex d, c10::MempoolId_t id) override { native_->endAllocateToPool(d, id); }
  void releasePool(c10::DeviceIndex d, c10::MempoolId_t id) override { native_->releasePool(d, id); }
  int getPoolUseCount(c10::DeviceIndex d, c10::MempoolId_t id) override { return native_->getPoolUseCount(d, id); }
  void createOrIncrefPool(c10::DeviceIndex d, c10::MempoolId_t id, std::shared_ptr<CUDAAllocator> a) override {
    native_->createOrIncrefPool(d, id, std::move(a));
  }
  void setUseOnOOM(c10::DeviceIndex d, c10::MempoolId_t id, bool use) override { native_->setUseOnOOM(d, id, use); }
  bool checkPoolLiveAllocations(c10::DeviceIndex d, c10::MempoolId_t id,
                                const std::unordered_set<void*>& live) override {
    return native_->checkPoolLiveAllocations(d, id, live);
  }
  CCA::ShareableHandle shareIpcHandle(void* p) override { return native_->shareIpcHandle(p); }
  std::shared_ptr<void> getIpcDevPtr(std::string h) override { return native_->getIpcDevPtr(std::move(h)); }
  bool isHistoryEnabled() override { return native_->isHistoryEnabled(); }
  void recordHistory(bool enabled, CCA::CreateContextFn rec, size_t max_entries, CCA::RecordContext when,
                     bool clear, const std::vector<std::string>& skip) override {
    native_->recordHistory(enabled, rec, max_entries, when, clear, skip);
  }
  void attachOutOfMemoryObserver(CCA::OutOfMemoryObserver o) override { native_->attachOutOfMemoryObserver(std::move(o)); }
  void attachAllocatorTraceTracker(CCA::AllocatorTraceTracker t) override {
    native_->attachAllocatorTraceTracker(std::move(t));
  }
  void enablePeerAccess(c10::DeviceIndex a, c10::DeviceIndex b) override { native_->enablePeerAccess(a, b); }
  cudaError_t memcpyAsync(void* dst, int dd, const void* src, int sd, size_t n, cudaStream_t s, bool p2p) override {
    return native_->memcpyAsync(dst, dd, src, sd, n, s, p2p);
  }
  std::shared_ptr<CCA::AllocatorState> getCheckpointState(c10::DeviceIndex d, c10::MempoolId_t id) override {
    return native_->getCheckpointState(d, id);
  }
  CCA::CheckpointDelta setCheckpointPoolState(c10::DeviceIndex d, std::shared_ptr<CCA::AllocatorState> s) override {
    return native_->setCheckpointPoolState(d, std::move(s));
  }
  std::string name() override { return native_->name(); }
#if TORCH_MUSA_TORCH_AT_LEAST(2, 12)
  void attachOomRejectionObserver(CCA::OomRejectionObserver o) override {
    native_->attachOomRejectionObserver(std::move(o));
  }
  void markCaptureBegin(c10::DeviceIndex d) override { native_->markCaptureBegin(d); }
  void markCaptureEnd(c10::DeviceIndex d) override { native_->markCaptureEnd(d); }
#endif

 private:
  CUDAAllocator* native_;
};

Router* g_router = nullptr;

// Allocator of alias storages: growing one allocates musa memory.
struct AliasAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    c10::DeviceIndex prev = set_delegating(t_delegating < 0 ? 0 : t_delegating);
    c10::DataPtr d = g_router->allocate(n);
    set_delegating(prev);
    return d;
  }
  c10::DeleterFnPtr raw_deleter() const override { return &route_delete; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { g_router->copy_data(dst, src, n); }
};

}  // namespace

void install() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_router = new Router(CCA::get());
    CCA::allocator.store(g_router);
  });
}

c10::DeviceIndex set_delegating(c10::DeviceIndex musa_index) {
  auto prev = t_delegating;
  t_delegating = musa_index;
  return prev;
}

c10::Allocator* alias_allocator() {
  static AliasAllocator a;
  return &a;
}

bool adopt(c10::DataPtr& ptr) {
  if (ptr.get_deleter() != &route_delete || !ptr.get()) return false;
  c10::DataPtr musa = routed_blocks::take(ptr.get());
  if (!musa.get()) return false;
  (void)ptr.release_context();
  ptr = std::move(musa);
  return true;
}

}  // namespace torch_musa::cuda_router
