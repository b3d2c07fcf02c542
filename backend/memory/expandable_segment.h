// One expandable segment: a large reserved virtual address range into which
// physical memory is mapped on demand and unmapped again, through the
// runtime's VMM primitives. The caching allocator keeps one per (stream, pool)
// and carves blocks out of it, so a segment grows in place instead of a new
// segment being made.
//
// Physical memory is mapped in extents: one physical allocation per run of
// pages mapped together. On the H200 each mapping costs about 25 us of
// page-table work (set-access) and each unmap about 15 us, whatever its size
// (`python3 bench/vmm_cost.py`), so fewer, larger mappings are what make
// growth cheap. An extent is unmapped whole, so a live block keeps the rest of
// its extent mapped. Extents start at 24 MiB; when cached memory stuck in
// partly used extents forces growth (shrink_extents()), they halve, down to
// 12 MiB. On bench/alloc_bench.py's traces this keeps peak reserved / peak
// allocated <= 1.05 with fewer mappings than any fixed size.
#pragma once

#include <musa/runtime.h>

#include <c10/core/Device.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace torch_musa::allocator {

class ExpandableSegment {
 public:
  static constexpr size_t kMaxExtent = size_t{24} << 20;
  static constexpr size_t kMinExtent = size_t{12} << 20;

  // Reserves `virtual_size` bytes (rounded up to the page size) on `device`.
  // A page is `min_page` bytes rounded up to the device's allocation
  // granularity; it is the unit of rounding, extents are whole pages.
  // Throws c10::Error if the range cannot be reserved.
  ExpandableSegment(c10::DeviceIndex device, void* stream, size_t virtual_size, size_t min_page);
  ~ExpandableSegment();
  ExpandableSegment(const ExpandableSegment&) = delete;
  ExpandableSegment& operator=(const ExpandableSegment&) = delete;

  char* base() const { return base_; }
  size_t virtual_size() const { return extent_of_.size() * page_; }
  size_t page_size() const { return page_; }
  size_t mapped_bytes() const { return mapped_pages_ * page_; }
  size_t max_extent() const { return max_extent_; }
  // Halves the size of the extents mapped from now on (not below kMinExtent).
  void shrink_extents() { max_extent_ = std::max(std::max(kMinExtent, page_), max_extent_ / 2 / page_ * page_); }
  void* stream() const { return stream_; }
  c10::DeviceIndex device() const { return device_; }
  bool contains(const void* p) const {
    return p >= base_ && static_cast<const char*>(p) < base_ + virtual_size();
  }

  // Maps every unmapped page in [offset, offset + len) (page-aligned), one
  // extent per run of up to max_extent() bytes. On failure (out of device
  // memory) maps nothing, returns false and leaves the runtime's message in
  // *why. Returns the number of extents newly mapped in *count.
  bool map(size_t offset, size_t len, size_t* count, std::string* why);
  // The part of [offset, offset + len) that unmap() can give back: the whole
  // extents inside it, and of those only the last ones, as few as cover
  // `max_bytes`. Returns {lo, hi} byte offsets (lo == hi: nothing).
  std::pair<size_t, size_t> whole_extents(size_t offset, size_t len, size_t max_bytes = SIZE_MAX) const;
  // Unmaps the extents lying wholly in [offset, offset + len) (page-aligned);
  // returns how many. With `keep_spare` their physical memory is kept for a
  // later map() of a run of the same length instead of being freed: moving an
  // extent then costs an unmap and a map, not also a free and an allocation.
  size_t unmap(size_t offset, size_t len, bool keep_spare = false);
  // Frees the spare physical extents; returns how many.
  size_t release_spares();

  // A mapped extent: where it starts in the segment, its length, its physical memory.
  struct Extent {
    size_t offset;
    size_t size;
    musaMemGenericAllocationHandle_t handle;
  };
  // The extents holding [offset, offset + len), in order (empty if a page there is unmapped):
  // what another process maps to share a block (backend/ipc).
  std::vector<Extent> extents(size_t offset, size_t len) const;

 private:
  static constexpr uint32_t kUnmapped = UINT32_MAX;
  c10::DeviceIndex device_;
  void* stream_;
  size_t page_;
  char* base_ = nullptr;
  // Per page: the first page of the extent it belongs to, or kUnmapped.
  std::vector<uint32_t> extent_of_;
  // Per extent, indexed by its first page: its length in pages and its handle.
  std::vector<uint32_t> extent_pages_;
  std::vector<musaMemGenericAllocationHandle_t> handles_;
  // Unmapped physical extents kept for reuse, by length in pages.
  std::multimap<uint32_t, musaMemGenericAllocationHandle_t> spares_;
  size_t mapped_pages_ = 0;
  size_t max_extent_ = kMaxExtent;

  void unmap_extent(size_t first, bool keep_spare);
  // Calls fn(first page, end page) for each mapped extent that overlaps pages
  // [first, last); fn may unmap that extent.
  template <class Fn>
  void for_each_extent(size_t first, size_t last, Fn fn) {
    for (size_t i = first; i < last;) {
      uint32_t e = extent_of_[i];
      if (e == kUnmapped) {
        ++i;
        continue;
      }
      size_t end = e + extent_pages_[e];
      fn(e, end);
      i = end;
    }
  }
};

}  // namespace torch_musa::allocator
