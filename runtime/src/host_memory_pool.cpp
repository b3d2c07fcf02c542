#include "host_memory_pool.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <pthread.h>

#include <atomic>
#include <iterator>

namespace musa_rt {
namespace {

std::atomic<int> g_fork_generation{0};

void onForkChild() { g_fork_generation.fetch_add(1); }

int forkGeneration() {
  static bool registered = (pthread_atfork(nullptr, nullptr, &onForkChild), true);
  (void)registered;
  return g_fork_generation.load();
}

}  // namespace

bool MemfdPool::forkedAway() {
  int now = forkGeneration();
  if (now == generation_) return false;
  generation_ = now;
  if (fd_ >= 0) close(fd_);
  fd_ = -1;
  free_.clear();
  return true;
}

MemfdPool::~MemfdPool() {
  if (fd_ >= 0) close(fd_);
}

bool MemfdPool::carve(size_t capacity, size_t size, int* fd, size_t* offset, int* generation) {
  (void)forkedAway();
  if (fd_ < 0) {
    int f = memfd_create("musa-physical-memory", MFD_CLOEXEC);
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
    *generation = generation_;
    size_t rest = it->second - size, at = it->first + size;
    free_.erase(it);
    if (rest) free_[at] = rest;
    return true;
  }
  return false;
}

void MemfdPool::giveBack(size_t offset, size_t size, int generation) {
  if (forkedAway() || generation != generation_) return;  // the range belongs to the parent's file
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
