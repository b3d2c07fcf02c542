// One expandable segment: a large reserved virtual address range into which
// physical pages (the device's allocation granularity) are mapped on demand
// and unmapped again, through the runtime's VMM primitives. The caching
// allocator keeps one per (stream, pool) and carves blocks out of it, so a
// segment grows in place instead of a new segment being made.
#pragma once

#include <musa/runtime.h>

#include <c10/core/Device.h>

#include <cstddef>
#include <string>
#include <vector>

namespace torch_musa::allocator {

class ExpandableSegment {
 public:
  // Reserves `virtual_size` bytes (rounded up to the page size) on `device`.
  // A page is `min_page` bytes rounded up to the device's allocation
  // granularity. Throws c10::Error if the range cannot be reserved.
  ExpandableSegment(c10::DeviceIndex device, void* stream, size_t virtual_size, size_t min_page);
  ~ExpandableSegment();
  ExpandableSegment(const ExpandableSegment&) = delete;
  ExpandableSegment& operator=(const ExpandableSegment&) = delete;

  char* base() const { return base_; }
  size_t virtual_size() const { return pages_.size() * page_; }
  size_t page_size() const { return page_; }
  size_t mapped_bytes() const { return mapped_pages_ * page_; }
  void* stream() const { return stream_; }
  c10::DeviceIndex device() const { return device_; }
  bool contains(const void* p) const {
    return p >= base_ && static_cast<const char*>(p) < base_ + virtual_size();
  }

  // Maps every unmapped page in [offset, offset + len) (page-aligned), using
  // spare physical pages first. On failure (out of device memory) maps
  // nothing, returns false and leaves the runtime's message in *why. Returns
  // the number of pages newly mapped in *count.
  bool map(size_t offset, size_t len, size_t* count, std::string* why);
  // Unmaps every mapped page in [offset, offset + len) (page-aligned); returns
  // how many. With `keep_spare` the physical pages are kept for the next
  // map() instead of being freed: moving a page costs an unmap and a map,
  // not also a physical free and allocation.
  size_t unmap(size_t offset, size_t len, bool keep_spare = false);
  // Frees the spare physical pages; returns how many.
  size_t release_spares();
  bool page_mapped(size_t page_index) const { return pages_[page_index]; }

 private:
  c10::DeviceIndex device_;
  void* stream_;
  size_t page_;
  char* base_ = nullptr;
  std::vector<bool> pages_;
  std::vector<musaMemGenericAllocationHandle_t> handles_;  // physical page of each mapped page
  std::vector<musaMemGenericAllocationHandle_t> spares_;   // unmapped physical pages kept for reuse
  size_t mapped_pages_ = 0;
};

}  // namespace torch_musa::allocator
