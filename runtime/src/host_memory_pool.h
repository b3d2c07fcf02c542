// One sparse memfd per emulated device, carved first-fit into ranges: an
// allocation costs an mmap, not a memfd_create + ftruncate + close, and, being
// a file, the memory can be mapped by another process (host_ipc.h). Freed
// ranges have their pages punched out and are coalesced.
#pragma once

#include <cstddef>
#include <map>

namespace musa_rt {

class MemfdPool {
 public:
  MemfdPool() = default;
  MemfdPool(const MemfdPool&) = delete;
  MemfdPool& operator=(const MemfdPool&) = delete;
  ~MemfdPool();
  // Carves `size` bytes (the file is made `capacity` long on first use).
  // False when no free range is large enough, or the file cannot be made.
  bool carve(size_t capacity, size_t size, int* fd, size_t* offset);
  void giveBack(size_t offset, size_t size);

 private:
  int fd_ = -1;
  std::map<size_t, size_t> free_;  // offset -> length
};

}  // namespace musa_rt
