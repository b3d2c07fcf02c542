// The caching allocator's private pools: MemPools and graph captures allocate from pools of
// their own, routed per thread (or per stream, for a capture's other threads), claimed back by
// graph trees, and dropped when their last user lets go.
#include "memory/device_caching_allocator.h"

namespace torch_musa::allocator {
namespace detail {

MempoolId_t DeviceCachingAllocator::create_pool(std::shared_ptr<SegmentAllocator> custom) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  MempoolId_t id{0, g_pool_uid++};
  pools_.emplace(id, std::make_unique<PrivatePool>(id, std::move(custom)));
  return id;
}

void DeviceCachingAllocator::create_or_retain_pool(MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = pools_.find(id);
  if (it == pools_.end()) pools_.emplace(id, std::make_unique<PrivatePool>(id)).first->second->use_count = 1;
  else it->second->use_count++;
}

bool DeviceCachingAllocator::has_pool(MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return pools_.count(id) != 0;
}

PrivatePool& DeviceCachingAllocator::pool_of(MempoolId_t id) {
  auto it = pools_.find(id);
  TORCH_CHECK(it != pools_.end(), "musa: no memory pool with id (", id.first, ", ", id.second, ") on device ",
              static_cast<int>(device_), ": it was released, or belongs to another device; use a live "
              "torch.musa.MemPool of this device");
  return *it->second;
}

void DeviceCachingAllocator::begin_pool(MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  pool_of(id).use_count++;
  routes_.push_back({id, std::this_thread::get_id(), nullptr});
}

void DeviceCachingAllocator::begin_pool_for_streams(MempoolId_t id, std::function<bool(musaStream_t)> filter) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  pool_of(id).use_count++;
  routes_.push_back({id, std::this_thread::get_id(), std::move(filter)});
}

void DeviceCachingAllocator::capture_begins() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  captures_underway_++;
}

void DeviceCachingAllocator::capture_ends() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  if (--captures_underway_ > 0) return;
  auto deferred = std::move(deferred_);
  deferred_.clear();
  for (Block* b : deferred) {
    b->pending_events--;
    insert_events(b);
  }
}

void DeviceCachingAllocator::end_pool(MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto me = std::this_thread::get_id();
  for (auto it = routes_.rbegin(); it != routes_.rend(); ++it)
    if (it->id == id && it->thread == me) {
      routes_.erase(std::next(it).base());
      return;
    }
}

Block* DeviceCachingAllocator::claim(MempoolId_t id, void* ptr, size_t nbytes) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  PrivatePool& p = pool_of(id);
  char* want = static_cast<char*>(ptr);
  size_t size = round_size(nbytes, allocator_config());
  for (BlockPool* bp : {&p.small, &p.large}) {
    for (auto it = bp->blocks.begin(); it != bp->blocks.end(); ++it) {
      Block* b = *it;
      if (want < b->ptr || want + size > b->ptr + b->size) continue;
      bp->blocks.erase(it);
      note_free_removed(b);
      if (want > b->ptr) {
        Block* rest = split_at(b, static_cast<size_t>(want - b->ptr));
        insert_free(b);
        b = rest;
      }
      if (b->size - size >= kMinBlockSize) insert_free(split_at(b, size));
      hand_out(b, *bp, nbytes, nullptr, allocator_config());
      return b;
    }
  }
  return nullptr;
}

void DeviceCachingAllocator::retain_pool(MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  pool_of(id).use_count++;
}

int DeviceCachingAllocator::use_count(MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = pools_.find(id);
  return it == pools_.end() ? 0 : it->second->use_count;
}

void DeviceCachingAllocator::release_pool(MempoolId_t id) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  auto it = pools_.find(id);
  if (it == pools_.end()) return;
  if (--it->second->use_count <= 0) maybe_drop_pool(*it->second);
}

}  // namespace detail
}  // namespace torch_musa::allocator
