#include "memory/pinned_allocator.h"

#include <ATen/Context.h>
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/CUDAHooksInterface.h>

#include <cstring>

#include <utility>

#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"

namespace torch_musa {
namespace {

// An event marking where a musa stream was when a pinned block was freed.
struct HostUseEvent {
  musaEvent_t event = nullptr;
  HostUseEvent() = default;
  explicit HostUseEvent(c10::Stream stream) {
    DeviceScope scope(stream.device_index());
    MUSA_CHECK(musaEventCreateWithFlags(&event, musaEventDisableTiming));
    MUSA_CHECK(musaEventRecord(event, native_stream(stream)));
  }
  HostUseEvent(HostUseEvent&& other) noexcept : event(std::exchange(other.event, nullptr)) {}
  HostUseEvent& operator=(HostUseEvent&& other) noexcept {
    std::swap(event, other.event);
    return *this;
  }
  ~HostUseEvent() {
    if (event) (void)musaEventDestroy(event);
  }
};

// ATen's caching host allocator with musa's runtime underneath.
struct MusaHostAllocatorImpl final : at::CachingHostAllocatorImpl<c10::Stream, HostUseEvent> {
 private:
  void allocate_host_memory(size_t size, void** ptr) override { MUSA_CHECK(musaHostAlloc(ptr, size)); }
  void free_block(at::HostBlock<c10::Stream>* block) override { (void)musaFreeHost(block->ptr_); }
  void record_stream(std::optional<std::vector<HostUseEvent>>& events, c10::Stream stream) override {
    events->emplace_back(stream);
  }
  bool query_event(HostUseEvent& e) override {
    musaError_t r = musaEventQuery(e.event);
    if (r == musaErrorNotReady) {
      (void)musaGetLastError();
      return false;
    }
    MUSA_CHECK(r);
    return true;
  }
  c10::Stream get_current_stream() const override { return current_stream(current_device()); }
  bool stream_is_capturing(c10::Stream stream) const override {
    musaStreamCaptureStatus status = musaStreamCaptureStatusNone;
    MUSA_CHECK(musaStreamIsCapturing(native_stream(stream), &status));
    return status != musaStreamCaptureStatusNone;
  }
};

void free_cached_pinned(void* ctx);

struct MusaHostAllocator final : at::CachingHostAllocatorInterface<MusaHostAllocatorImpl, free_cached_pinned> {};

// Never destroyed: pinned tensors may be freed during interpreter exit.
MusaHostAllocator& g_pinned = *new MusaHostAllocator();

void free_cached_pinned(void* ctx) { g_pinned.free(ctx); }

// The cache musa's pinned memory comes from. A CUDA build of torch pins with CUDA's host cache
// whenever CUDA is present (empty(pin_memory=True) asks CUDA first); on the cuda driver musa's own
// pins (pin_memory("musa"), DataLoader) come from that cache too, so one cache reuses the blocks
// and counts them, and CUDA's copies record their stream uses in it.
at::HostAllocator* serving_cache() {
  static at::HostAllocator* cache = []() -> at::HostAllocator* {
    if (std::strcmp(musaGetDriverName(), "cuda") != 0 || !at::globalContext().hasCUDA()) return &g_pinned;
    // torch's own way to CUDA's pinned cache (pin_memory=True), which readies CUDA for it first
    (void)at::detail::getCUDAHooks().getPinnedMemoryAllocator();
    return at::getHostAllocator(at::kCUDA);
  }();
  return cache;
}

// musa's host allocator as torch reaches it (at::getHostAllocator(kPrivateUse1):
// torch.accelerator.empty_host_cache, ...): the serving cache, whichever it is.
struct ServingHostAllocator final : at::HostAllocator {
  at::DataPtr allocate(size_t n) override { return serving_cache()->allocate(n); }
  void copy_data(void* dst, const void* src, std::size_t n) const override { serving_cache()->copy_data(dst, src, n); }
  bool record_event(void* ptr, void* ctx, c10::Stream stream) override {
    return serving_cache()->record_event(ptr, ctx, stream);
  }
  void empty_cache() override { serving_cache()->empty_cache(); }
  at::HostStats get_stats() override { return serving_cache()->get_stats(); }
  void reset_accumulated_stats() override { serving_cache()->reset_accumulated_stats(); }
  void reset_peak_stats() override { serving_cache()->reset_peak_stats(); }
};

ServingHostAllocator& g_serving = *new ServingHostAllocator();

}  // namespace

c10::Allocator* pinned_allocator() { return &g_serving; }

void note_pinned_use(const at::Tensor& cpu, c10::Stream stream) {
  if (!cpu.defined() || !cpu.has_storage()) return;
  const auto& ptr = cpu.storage().data_ptr();
  if (ptr.get_deleter() != &free_cached_pinned) return;  // not musa pinned memory
  g_pinned.record_event(ptr.get(), ptr.get_context(), stream);
}

at::HostStats pinned_stats() { return g_serving.get_stats(); }
void reset_pinned_accumulated_stats() { g_serving.reset_accumulated_stats(); }
void reset_pinned_peak_stats() { g_serving.reset_peak_stats(); }

}  // namespace torch_musa

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &torch_musa::g_serving)
