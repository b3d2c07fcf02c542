// One sparse memfd per emulated device, carved first-fit into ranges: an
// allocation costs an mmap, not a memfd_create + ftruncate + close, and, being
// a file, the memory can be mapped by another process (host_ipc.h). Freed
// ranges have their pages punched out and are coalesced. A forked child
// inherits the file: it gets a file of its own for new memory and never
// punches the parent's pages.
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
  // `generation` tags the range with the file it came from.
  bool carve(size_t capacity, size_t size, int* fd, size_t* offset, int* generation);
  void giveBack(size_t offset, size_t size, int generation);

 private:
  // Forgets a file inherited through fork (the parent still uses it).
  bool forkedAway();

  int fd_ = -1;
  int generation_ = 0;
  std::map<size_t, size_t> free_;  // offset -> length
};

}  // namespace musa_rt
