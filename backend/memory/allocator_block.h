// Internal to the musa caching allocator: a block (a range of a segment), the free sets a
// pool keeps its free blocks in, best fit first, and the stats arithmetic.
#pragma once

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/macros/Macros.h>

#include <cstdint>
#include <memory>
#include <new>
#include <set>
#include <utility>
#include <vector>

#include "memory/caching_allocator.h"
#include "memory/expandable_segment.h"
#include "memory/pluggable_allocator.h"

namespace torch_musa::allocator {
namespace detail {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::MempoolId_t;

struct BlockPool;

struct Block {
  c10::DeviceIndex device;
  musaStream_t stream;
  size_t size;
  size_t requested = 0;
  char* ptr;
  BlockPool* pool;
  bool allocated = false;
  bool mapped = true;     // false only for unmapped ranges of an expandable segment
  bool parked = false;    // free, held aside for its size (DeviceCachingAllocator::park)
  Block* prev = nullptr;  // neighbours within the same segment
  Block* next = nullptr;
  std::vector<c10::Stream> stream_uses;
  int pending_events = 0;
  int gc_count = 0;
  ExpandableSegment* expandable = nullptr;
  std::shared_ptr<c10::GatheredContext> context;
  Block(c10::DeviceIndex d, musaStream_t s, size_t sz, BlockPool* p, void* ptr_)
      : device(d), stream(s), size(sz), ptr(static_cast<char*>(ptr_)), pool(p) {}
  bool is_split() const { return prev || next; }
  bool is_free() const { return !allocated && pending_events == 0; }
  // Free and in its pool's free set, so a freed neighbour merges with it.
  bool mergeable() const { return is_free() && mapped && !parked; }
};

// Where a block sorts among a pool's free blocks; a search builds one instead of a whole Block.
struct BlockKey {
  musaStream_t stream;
  size_t size;
  const char* ptr;
  BlockKey(musaStream_t s, size_t z, const char* p) : stream(s), size(z), ptr(p) {}
  BlockKey(const Block* b) : stream(b->stream), size(b->size), ptr(b->ptr) {}  // NOLINT: implicit on purpose
};

// Best-fit order of free blocks: stream, then size, then address. A type (not a function
// pointer) so that the set's searches inline it.
struct BlockLess {
  using is_transparent = void;  // searches by BlockKey
  bool operator()(const BlockKey& a, const BlockKey& b) const {
    if (a.stream != b.stream) return reinterpret_cast<uintptr_t>(a.stream) < reinterpret_cast<uintptr_t>(b.stream);
    if (a.size != b.size) return a.size < b.size;
    return reinterpret_cast<uintptr_t>(a.ptr) < reinterpret_cast<uintptr_t>(b.ptr);
  }
};

// The tree nodes a pool's free sets gave back, kept for their next insert: a small block's
// allocation and free move blocks in and out of the set every time (split, merge), and
// malloc/free of a node cost more than the tree work itself. Only touched under the device's lock.
struct NodeCache {
  struct Spare {
    Spare* next;
  };
  Spare* head = nullptr;
  size_t node_bytes = 0;  // the one node size the sets use (fixed on first give-back)
  NodeCache() = default;
  NodeCache(const NodeCache&) = delete;
  NodeCache& operator=(const NodeCache&) = delete;
  ~NodeCache() {
    while (head) ::operator delete(std::exchange(head, head->next));
  }
  void* take(size_t bytes) {
    if (head && bytes == node_bytes) return std::exchange(head, head->next);
    return ::operator new(bytes);
  }
  void give(void* p, size_t bytes) {
    if (node_bytes == 0 && bytes >= sizeof(Spare)) node_bytes = bytes;
    if (bytes != node_bytes) return ::operator delete(p);
    head = new (p) Spare{head};
  }
};

template <class T>
struct NodeAllocator {
  using value_type = T;
  NodeCache* cache;
  explicit NodeAllocator(NodeCache* c) : cache(c) {}
  template <class U>
  NodeAllocator(const NodeAllocator<U>& o) : cache(o.cache) {}
  T* allocate(size_t n) { return static_cast<T*>(n == 1 ? cache->take(sizeof(T)) : ::operator new(n * sizeof(T))); }
  void deallocate(T* p, size_t n) {
    if (n == 1) cache->give(p, sizeof(T));
    else ::operator delete(p);
  }
  template <class U>
  bool operator==(const NodeAllocator<U>& o) const { return cache == o.cache; }
  template <class U>
  bool operator!=(const NodeAllocator<U>& o) const { return cache != o.cache; }
};

using BlockSet = std::set<Block*, BlockLess, NodeAllocator<Block*>>;

struct PrivatePool;

struct BlockPool {
  NodeCache nodes;  // before the sets: they give their nodes back to it when destroyed
  BlockSet blocks{BlockLess{}, NodeAllocator<Block*>(&nodes)};    // free, mapped blocks
  BlockSet unmapped{BlockLess{}, NodeAllocator<Block*>(&nodes)};  // free, unmapped ranges of expandable segments
  bool is_small;
  PrivatePool* owner;
  BlockPool(bool small, PrivatePool* o) : is_small(small), owner(o) {}
};

struct PrivatePool {
  MempoolId_t id;
  BlockPool small{true, this}, large{false, this};
  int use_count = 1;
  int allocated = 0;
  std::shared_ptr<SegmentAllocator> custom;  // where its segments come from, if not musaMalloc
  explicit PrivatePool(MempoolId_t i, std::shared_ptr<SegmentAllocator> c = nullptr) : id(i), custom(std::move(c)) {}
};

// Inlined: every allocation and free updates five arrays of these.
C10_ALWAYS_INLINE void update(StatArray& arr, bool small, int64_t delta) {
  Stat& all = arr[static_cast<size_t>(StatType::AGGREGATE)];
  Stat& one = arr[static_cast<size_t>(small ? StatType::SMALL_POOL : StatType::LARGE_POOL)];
  if (delta >= 0) {
    all.increase(static_cast<size_t>(delta));
    one.increase(static_cast<size_t>(delta));
  } else {
    all.decrease(static_cast<size_t>(-delta));
    one.decrease(static_cast<size_t>(-delta));
  }
}

}  // namespace detail
}  // namespace torch_musa::allocator
