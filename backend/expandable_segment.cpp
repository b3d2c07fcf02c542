#include "expandable_segment.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "device.h"

namespace torch_musa::allocator {
namespace {
constexpr const char* kWithout = "; set PYTORCH_MUSA_ALLOC_CONF=expandable_segments:False to allocate without them";
}  // namespace

ExpandableSegment::ExpandableSegment(c10::DeviceIndex device, void* stream, size_t virtual_size, size_t min_page)
    : device_(device), stream_(stream) {
  size_t g = 0;
  TORCH_CHECK(musaMemGetAllocationGranularity(&g, device) == musaSuccess && g > 0,
              "musa expandable segments: cannot query the allocation granularity: ", musaGetLastErrorMessage(),
              kWithout);
  g = (std::max(min_page, g) + g - 1) / g * g;
  page_ = g;
  size_t n = (virtual_size + g - 1) / g;
  void* p = nullptr;
  if (musaMemAddressReserve(&p, n * g, g) != musaSuccess) {
    std::string msg = musaGetLastErrorMessage();
    (void)musaGetLastError();
    TORCH_CHECK(false, "musa expandable segments: cannot reserve ", n * g, " bytes of address space: ", msg,
                kWithout);
  }
  base_ = static_cast<char*>(p);
  pages_.assign(n, false);
  handles_.assign(n, musaMemGenericAllocationHandle_t{});
}

ExpandableSegment::~ExpandableSegment() {
  try {
    unmap(0, virtual_size());
    release_spares();
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
  auto undo = [&]() {
    if (why) *why = musaGetLastErrorMessage();
    (void)musaGetLastError();
    for (size_t j : done) {
      (void)musaMemUnmap(base_ + j * page_, page_);
      spares_.push_back(handles_[j]);
      pages_[j] = false;
      --mapped_pages_;
    }
    (void)musaGetLastError();
    if (count) *count = 0;
    return false;
  };
  // One physical handle per page, so single pages can be unmapped later.
  for (size_t i = first; i < last; ++i) {
    if (pages_[i]) continue;
    musaMemGenericAllocationHandle_t h{};
    if (!spares_.empty()) {
      h = spares_.back();
      spares_.pop_back();
    } else if (musaMemCreate(&h, page_, device_) != musaSuccess) {
      return undo();
    }
    if (musaMemMap(base_ + i * page_, page_, 0, h) != musaSuccess) {
      spares_.push_back(h);
      return undo();
    }
    handles_[i] = h;
    pages_[i] = true;
    ++mapped_pages_;
    done.push_back(i);
  }
  // Access is granted once per run of newly mapped pages: on a GPU each
  // set-access call updates page tables and costs far more than a map.
  for (size_t k = 0; k < done.size();) {
    size_t run = 1;
    while (k + run < done.size() && done[k + run] == done[k] + run) ++run;
    if (musaMemSetAccess(base_ + done[k] * page_, run * page_, device_) != musaSuccess) return undo();
    k += run;
  }
  if (count) *count = done.size();
  return true;
}

size_t ExpandableSegment::unmap(size_t offset, size_t len, bool keep_spare) {
  TORCH_INTERNAL_ASSERT(offset % page_ == 0 && len % page_ == 0 && offset + len <= virtual_size());
  DeviceScope scope(device_);
  size_t n = 0;
  for (size_t i = offset / page_; i < (offset + len) / page_; ++i) {
    if (!pages_[i]) continue;
    TORCH_CHECK(musaMemUnmap(base_ + i * page_, page_) == musaSuccess,
                "musa expandable segments: unmap failed: ", musaGetLastErrorMessage());
    if (keep_spare) {
      spares_.push_back(handles_[i]);
    } else {
      (void)musaMemRelease(handles_[i]);
      (void)musaGetLastError();
    }
    pages_[i] = false;
    --mapped_pages_;
    ++n;
  }
  return n;
}

size_t ExpandableSegment::release_spares() {
  size_t n = spares_.size();
  for (auto h : spares_) (void)musaMemRelease(h);
  (void)musaGetLastError();
  spares_.clear();
  return n;
}

}  // namespace torch_musa::allocator
