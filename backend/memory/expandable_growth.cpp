// Expandable segments inside the caching allocator: which segment serves a
// request, how a segment grows in place, and how cached extents are given
// back (unmapped) so reserved memory follows allocated memory.
#include "memory/device_caching_allocator.h"

namespace torch_musa::allocator {
namespace detail {

ExpandableSegment* DeviceCachingAllocator::segment_for(BlockPool& pool, musaStream_t stream) {
  auto key = std::make_pair(static_cast<void*>(stream), &pool);
  auto it = expandable_.find(key);
  if (it != expandable_.end()) return it->second.get();
  // Reserve the device's whole capacity: address space is cheap, and the
  // segment can then grow in place as far as physical memory allows.
  auto seg = std::make_unique<ExpandableSegment>(device_, stream, total_memory(), kSmallBuffer);
  Block* b = new_block(device_, stream, seg->virtual_size(), &pool, seg->base());
  b->mapped = false;
  b->expandable = seg.get();
  pool.unmapped.insert(b);
  return expandable_.emplace(key, std::move(seg)).first->second.get();
}

void DeviceCachingAllocator::insert_unmapped(Block* b) {
  // merge with unmapped free neighbours
  for (Block* nb : {b->prev, b->next}) {
    if (!nb || nb->mapped || !nb->is_free()) continue;
    b->pool->unmapped.erase(nb);
    absorb(b, nb);
  }
  b->pool->unmapped.insert(b);
}

void DeviceCachingAllocator::segment_mapped_changed(ExpandableSegment* seg, BlockPool& pool, size_t before) {
  size_t after = seg->mapped_bytes();
  if (before == 0 && after > 0) update(stats_.segment, pool.is_small, 1);
  if (before > 0 && after == 0) update(stats_.segment, pool.is_small, -1);
  add_reserved(pool, static_cast<int64_t>(after) - static_cast<int64_t>(before));
}

size_t DeviceCachingAllocator::unmap_free_block(Block* b, size_t max_bytes, bool keep_spare) {
  ExpandableSegment* seg = b->expandable;
  size_t off = static_cast<size_t>(b->ptr - seg->base());
  auto [start, end] = seg->whole_extents(off, b->size, max_bytes);
  if (end <= start) {
    insert_free(b);
    return 0;
  }
  BlockPool& pool = *b->pool;
  Block* mid = b;
  if (start > off) mid = split_at(b, start - off), insert_free(b);
  if (start + mid->size > end) insert_free(split_at(mid, end - start));
  size_t before = seg->mapped_bytes();
  // Kernels queued on the block's stream may still use these addresses: an
  // unmap does not wait for them (torch.cuda synchronizes here too).
  MUSA_CHECK(musaStreamSynchronize(mid->stream));
  size_t n = seg->unmap(start, end - start, keep_spare);
  stats_.num_device_free += static_cast<int64_t>(n);
  segment_mapped_changed(seg, pool, before);
  trace(TraceAction::SEGMENT_UNMAP, mid->ptr, mid->size, mid->stream, pool, nullptr, 99);
  mid->mapped = false;
  insert_unmapped(mid);
  return end - start;
}

void DeviceCachingAllocator::reclaim(ExpandableSegment* seg, BlockPool& pool, size_t bytes, Block* keep,
                                     Block* keep2) {
  std::vector<Block*> cands;
  for (auto it = pool.blocks.rbegin(); it != pool.blocks.rend(); ++it)
    if ((*it)->expandable && (*it)->stream == seg->stream() && *it != keep && *it != keep2) cands.push_back(*it);
  std::sort(cands.begin(), cands.end(), [](Block* a, Block* b) { return a->size > b->size; });
  size_t done = 0;
  for (Block* b : cands) {
    if (done >= bytes) break;
    pool.blocks.erase(b);
    note_free_removed(b);
    done += unmap_free_block(b, bytes - done, /*keep_spare=*/b->expandable == seg);
  }
}

Block* DeviceCachingAllocator::alloc_expandable(BlockPool& pool, musaStream_t stream, size_t size, std::string* why, bool* over_limit) {
  ExpandableSegment* seg = segment_for(pool, stream);
  Block* b = grow_expandable(seg, pool, stream, size, why, over_limit);
  seg->release_spares();  // extents moved by reclaim() and not mapped again
  return b;
}

Block* DeviceCachingAllocator::grow_expandable(ExpandableSegment* seg, BlockPool& pool, musaStream_t stream, size_t size, std::string* why, bool* over_limit) {
  const size_t page = seg->page_size();
  auto round_up = [page](size_t n) { return (n + page - 1) / page * page; };
  auto free_mapped = [&](Block* b) { return b && b->mapped && b->is_free() && b->expandable == seg; };
  // Where to grow: an unmapped range `u` of this segment together with the
  // cached (mapped, free) blocks on either side of it, choosing the place
  // that needs the fewest new pages. Forms:
  //   front: head + the front of u          tail: the end of u + tail
  //   span:  head + all of u + tail (tail's excess is split off later)
  struct Plan {
    Block* u = nullptr;
    Block* head = nullptr;
    Block* tail = nullptr;
    size_t map_len = 0;
    bool map_end = false;  // map the end of u rather than its front
  };
  auto pick = [&]() -> Plan {
    Plan best;
    size_t best_cost = SIZE_MAX;
    for (auto it = pool.unmapped.lower_bound(BlockKey(stream, 0, nullptr)); it != pool.unmapped.end() && (*it)->stream == stream; ++it) {
      Block* u = *it;
      if (u->expandable != seg) continue;
      Block* p = free_mapped(u->prev) ? u->prev : nullptr;
      Block* q = free_mapped(u->next) ? u->next : nullptr;
      size_t ps = p ? p->size : 0, qs = q ? q->size : 0;
      if (ps + u->size + qs < size) continue;
      Plan c;
      c.u = u;
      if (ps + u->size >= size && (ps >= qs || u->size + qs < size)) {
        c.head = p;
        c.map_len = round_up(size - std::min(size, ps));
      } else if (u->size + qs >= size) {
        c.tail = q;
        c.map_len = round_up(size - std::min(size, qs));
        c.map_end = true;
      } else {
        c.head = p;
        c.tail = q;
        c.map_len = u->size;
      }
      if (c.map_len < best_cost) best = c, best_cost = c.map_len;
      if (best_cost == 0) break;
    }
    return best;
  };
  Plan plan = pick();
  if (!plan.u) return nullptr;
  // Keep peak reserved at peak in use: when the new pages would raise the
  // reserved high-water mark, first give back that many bytes of cached
  // extents of this stream's segments. Below the mark, cached extents stay
  // mapped, which spares the map/unmap churn (each mapping costs driver
  // calls) on steady-state traces.
  size_t peak = static_cast<size_t>(stats_.reserved_bytes[0].peak);
  if (plan.map_len && reserved() + plan.map_len > peak) {
    reclaim(seg, pool, reserved() + plan.map_len - peak, plan.head, plan.tail);
    plan = pick();
    if (!plan.u) return nullptr;
    // Still above the mark although more than two extents' worth of this
    // segment's memory is mapped and free: it sits in extents that live
    // blocks keep mapped, so smaller extents from now on.
    if (reserved() + plan.map_len > peak) {
      size_t idle = 0;
      for (Block* b : pool.blocks)
        if (b->expandable == seg) idle += b->size;
      if (idle > 2 * seg->max_extent()) seg->shrink_extents();
    }
  }
  *over_limit = limit_ && reserved() + plan.map_len > limit_;
  if (*over_limit) {
    num_oom_rejections_++;
    return nullptr;
  }
  Block* u = plan.u;
  if (plan.map_len) {
    Block* target = u;  // the part of u to map
    if (plan.map_len < u->size) {
      pool.unmapped.erase(u);
      if (plan.map_end) {
        target = split_at(u, u->size - plan.map_len);
        pool.unmapped.insert(u);
      } else {
        pool.unmapped.insert(split_at(u, plan.map_len));
        pool.unmapped.insert(u);
      }
    }
    size_t off = static_cast<size_t>(target->ptr - seg->base());
    size_t before = seg->mapped_bytes(), count = 0;
    if (!seg->map(off, plan.map_len, &count, why)) {
      pool.unmapped.erase(target);  // the part split off for mapping rejoins its unmapped neighbours
      insert_unmapped(target);
      return nullptr;
    }
    stats_.num_device_alloc += static_cast<int64_t>(count);
    segment_mapped_changed(seg, pool, before);
    pool.unmapped.erase(target);
    trace(TraceAction::SEGMENT_MAP, target->ptr, plan.map_len, stream, pool, nullptr, 99);
    target->mapped = true;
    u = target;
  } else {
    u = nullptr;  // the cached neighbours alone suffice
  }
  Block* b = u;
  for (Block* n : {plan.head, plan.tail}) {
    if (!n) continue;
    pool.blocks.erase(n);
    note_free_removed(n);
    if (!b) {
      b = n;
    } else {
      TORCH_INTERNAL_ASSERT(n == b->prev || n == b->next, "expandable growth: block not adjacent");
      absorb(b, n);
    }
  }
  return b;
}

}  // namespace detail
}  // namespace torch_musa::allocator
