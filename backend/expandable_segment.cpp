#include "expandable_segment.h"

#include <c10/util/Exception.h>

#include "device.h"

namespace torch_musa::allocator {

ExpandableSegment::ExpandableSegment(c10::DeviceIndex device, void* stream, size_t virtual_size)
    : device_(device), stream_(stream) {
  size_t g = 0;
  TORCH_CHECK(musaMemGetAllocationGranularity(&g, device) == musaSuccess && g > 0,
              "musa expandable segments: cannot query the allocation granularity: ", musaGetLastErrorMessage());
  page_ = g;
  size_t n = (virtual_size + g - 1) / g;
  void* p = nullptr;
  if (musaMemAddressReserve(&p, n * g, g) != musaSuccess) {
    std::string msg = musaGetLastErrorMessage();
    (void)musaGetLastError();
    TORCH_CHECK(false, "musa expandable segments: cannot reserve ", n * g, " bytes of address space: ", msg);
  }
  base_ = static_cast<char*>(p);
  pages_.assign(n, false);
}

ExpandableSegment::~ExpandableSegment() {
  try {
    unmap(0, virtual_size());
  } catch (const std::exception&) {
    // A destructor must not throw; the address range is given back below anyway.
  }
  (void)musaMemAddressFree(base_, virtual_size());
  (void)musaGetLastError();
}

bool ExpandableSegment::map(size_t offset, size_t len, size_t* count, std::string* why) {
  TORCH_INTERNAL_ASSERT(offset % page_ == 0 && len % page_ == 0 && offset + len <= virtual_size());
  DeviceScope scope(device_);
  size_t first = offset / page_, last = (offset + len) / page_;
  std::vector<size_t> done;
  for (size_t i = first; i < last; ++i) {
    if (pages_[i]) continue;
    musaMemGenericAllocationHandle_t h{};
    musaError_t e = musaMemCreate(&h, page_, device_);
    if (e == musaSuccess) {
      e = musaMemMap(base_ + i * page_, page_, 0, h);
      // The mapping keeps the physical memory alive; unmapping frees it.
      (void)musaMemRelease(h);
    }
    if (e == musaSuccess) e = musaMemSetAccess(base_ + i * page_, page_, device_);
    if (e != musaSuccess) {
      if (why) *why = musaGetLastErrorMessage();
      (void)musaGetLastError();
      for (size_t j : done) {
        (void)musaMemUnmap(base_ + j * page_, page_);
        pages_[j] = false;
        --mapped_pages_;
      }
      (void)musaGetLastError();
      if (count) *count = 0;
      return false;
    }
    pages_[i] = true;
    ++mapped_pages_;
    done.push_back(i);
  }
  if (count) *count = done.size();
  return true;
}

size_t ExpandableSegment::unmap(size_t offset, size_t len) {
  TORCH_INTERNAL_ASSERT(offset % page_ == 0 && len % page_ == 0 && offset + len <= virtual_size());
  DeviceScope scope(device_);
  size_t n = 0;
  for (size_t i = offset / page_; i < (offset + len) / page_; ++i) {
    if (!pages_[i]) continue;
    TORCH_CHECK(musaMemUnmap(base_ + i * page_, page_) == musaSuccess,
                "musa expandable segments: unmap failed: ", musaGetLastErrorMessage());
    pages_[i] = false;
    --mapped_pages_;
    ++n;
  }
  return n;
}

}  // namespace torch_musa::allocator
