#include "memory/pinned_allocator.h"

#include <ATen/core/CachingHostAllocator.h>

#include <cstring>

#include "core/musa_check.h"

namespace torch_musa {
namespace {

void free_pinned(void* p) {
  if (p) (void)musaFreeHost(p);
}

// Pinned memory is allocated and freed directly (no cache): it is ATen's
// host allocator for musa, which torch.accelerator's host-cache calls reach.
struct PinnedAllocator final : public at::HostAllocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n) MUSA_CHECK(musaHostAlloc(&p, n));
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }
  // Nothing is reused, so nothing waits for the streams a block was used on
  // (freeing pinned memory waits for the device itself).
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};

PinnedAllocator g_pinned;

}  // namespace

c10::Allocator* pinned_allocator() { return &g_pinned; }

}  // namespace torch_musa

REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &torch_musa::g_pinned)
