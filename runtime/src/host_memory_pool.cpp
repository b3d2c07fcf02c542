#include "host_memory_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <iterator>

namespace musa_rt {

MemfdPool::~MemfdPool() {
  if (fd_ >= 0) close(fd_);
}

bool MemfdPool::carve(size_t capacity, size_t size, int* fd, size_t* offset) {
  if (fd_ < 0) {
    int f = memfd_create("musa-device-memory", MFD_CLOEXEC);
    if (f < 0) return false;
    if (ftruncate(f, static_cast<off_t>(capacity)) != 0) {
      close(f);
      return false;
    }
    fd_ = f;
    free_[0] = capacity;
  }
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    *fd = fd_;
    *offset = it->first;
    size_t rest = it->second - size, at = it->first + size;
    free_.erase(it);
    if (rest) free_[at] = rest;
    return true;
  }
  return false;
}

void MemfdPool::giveBack(size_t offset, size_t size) {
  // Give the pages back to the OS; the file keeps its (sparse) size.
  (void)fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(size));
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

}  // namespace musa_rt
