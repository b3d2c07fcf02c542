#include "memory/pinned_allocator.h"

#include <cstring>

#include "core/musa_check.h"

namespace torch_musa {
namespace {

void free_pinned(void* p) {
  if (p) (void)musaFreeHost(p);
}

struct PinnedAllocator final : public c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    void* p = nullptr;
    if (n) MUSA_CHECK(musaHostAlloc(&p, n));
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }
};

}  // namespace

c10::Allocator* pinned_allocator() {
  static PinnedAllocator a;
  return &a;
}

}  // namespace torch_musa
