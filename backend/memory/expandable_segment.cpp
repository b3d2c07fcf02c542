#include "memory/expandable_segment.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "core/device.h"

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
  TORCH_CHECK(n < kUnmapped, "musa expandable segments: ", n, " pages are too many for one segment", kWithout);
  extent_of_.assign(n, kUnmapped);
  extent_pages_.assign(n, 0);
  handles_.assign(n, musaMemGenericAllocationHandle_t{});
}

ExpandableSegment::~ExpandableSegment() {
  // A destructor must not throw: one failed unmap must not keep the other
  // extents (or the spares) from being freed.
  for_each_extent(0, extent_of_.size(), [this](size_t first, size_t) {
    try {
      unmap_extent(first, /*keep_spare=*/false);
    } catch (const std::exception&) {
    }
  });
  release_spares();
  (void)musaMemAddressFree(base_, virtual_size());
  (void)musaGetLastError();
}

bool ExpandableSegment::map(size_t offset, size_t len, size_t* count, std::string* why) {
  TORCH_INTERNAL_ASSERT(offset % page_ == 0 && len % page_ == 0 && offset + len <= virtual_size());
  DeviceScope scope(device_);
  const size_t first = offset / page_, last = (offset + len) / page_;
  const size_t max_pages = std::max<size_t>(1, max_extent_ / page_);
  std::vector<size_t> done;  // first pages of the extents mapped here
  auto undo = [&]() {
    if (why) *why = musaGetLastErrorMessage();
    (void)musaGetLastError();
    for (size_t e : done) unmap_extent(e, /*keep_spare=*/true);
    (void)musaGetLastError();
    if (count) *count = 0;
    return false;
  };
  for (size_t i = first; i < last;) {
    if (extent_of_[i] != kUnmapped) {
      ++i;
      continue;
    }
    size_t run = 1;
    while (i + run < last && run < max_pages && extent_of_[i + run] == kUnmapped) ++run;
    musaMemGenericAllocationHandle_t h{};
    auto spare = spares_.find(static_cast<uint32_t>(run));
    if (spare != spares_.end()) {
      h = spare->second;
      spares_.erase(spare);
    } else if (musaMemCreate(&h, run * page_, device_) != musaSuccess) {
      // Spares of other lengths may hold the memory this run needs (near
      // the device's capacity): free them and try once more.
      if (spares_.empty()) return undo();
      release_spares();
      if (musaMemCreate(&h, run * page_, device_) != musaSuccess) return undo();
    }
    if (musaMemMap(base_ + i * page_, run * page_, 0, h) != musaSuccess) {
      spares_.emplace(static_cast<uint32_t>(run), h);
      return undo();
    }
    handles_[i] = h;
    extent_pages_[i] = static_cast<uint32_t>(run);
    std::fill(extent_of_.begin() + i, extent_of_.begin() + i + run, static_cast<uint32_t>(i));
    mapped_pages_ += run;
    done.push_back(i);
    // Access is granted per extent, right after its map: one call per mapping
    // is what a GPU charges for, batched or not.
    if (musaMemSetAccess(base_ + i * page_, run * page_, device_) != musaSuccess) return undo();
    i += run;
  }
  if (count) *count = done.size();
  return true;
}

std::vector<ExpandableSegment::Extent> ExpandableSegment::extents(size_t offset, size_t len) const {
  std::vector<Extent> out;
  size_t first = offset / page_, last = (offset + len + page_ - 1) / page_;
  for (size_t i = first; i < last && i < extent_of_.size();) {
    uint32_t e = extent_of_[i];
    if (e == kUnmapped) return {};
    out.push_back({e * page_, extent_pages_[e] * page_, handles_[e]});
    i = e + extent_pages_[e];
  }
  return out;
}

std::pair<size_t, size_t> ExpandableSegment::whole_extents(size_t offset, size_t len, size_t max_bytes) const {
  size_t lo = (offset + page_ - 1) / page_, hi = (offset + len) / page_;
  // Move lo forward and hi back to extent boundaries.
  if (lo < hi && extent_of_[lo] != kUnmapped && extent_of_[lo] != lo) lo = extent_of_[lo] + extent_pages_[extent_of_[lo]];
  if (lo < hi) {
    uint32_t e = extent_of_[hi - 1];
    if (e != kUnmapped && e + extent_pages_[e] > hi) hi = e;
  }
  if (lo >= hi) return {0, 0};
  if ((hi - lo) * page_ <= max_bytes) return {lo * page_, hi * page_};
  // Only the last extents, as few as cover max_bytes.
  size_t start = hi;
  while (start > lo && (hi - start) * page_ < max_bytes) {
    uint32_t e = extent_of_[start - 1];
    start = e == kUnmapped ? start - 1 : e;
  }
  return {start * page_, hi * page_};
}

void ExpandableSegment::unmap_extent(size_t first, bool keep_spare) {
  size_t run = extent_pages_[first];
  TORCH_CHECK(musaMemUnmap(base_ + first * page_, run * page_) == musaSuccess,
              "musa expandable segments: unmap failed: ", musaGetLastErrorMessage());
  if (keep_spare) {
    spares_.emplace(static_cast<uint32_t>(run), handles_[first]);
  } else {
    (void)musaMemRelease(handles_[first]);
    (void)musaGetLastError();
  }
  std::fill(extent_of_.begin() + first, extent_of_.begin() + first + run, kUnmapped);
  extent_pages_[first] = 0;
  handles_[first] = {};
  mapped_pages_ -= run;
}

size_t ExpandableSegment::unmap(size_t offset, size_t len, bool keep_spare) {
  TORCH_INTERNAL_ASSERT(offset % page_ == 0 && len % page_ == 0 && offset + len <= virtual_size());
  DeviceScope scope(device_);
  size_t n = 0;
  const size_t first = offset / page_, last = (offset + len) / page_;
  for_each_extent(first, last, [&](size_t e, size_t end) {
    if (e >= first && end <= last) unmap_extent(e, keep_spare), ++n;
  });
  return n;
}

size_t ExpandableSegment::release_spares() {
  size_t n = spares_.size();
  for (auto& [pages, h] : spares_) (void)musaMemRelease(h);
  (void)musaGetLastError();
  spares_.clear();
  return n;
}

}  // namespace torch_musa::allocator
