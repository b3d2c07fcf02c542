#include "ops/routed_blocks.h"

#include <c10/util/SmallVector.h>
#include <c10/util/flat_hash_map.h>

#include <mutex>
#include <utility>

namespace torch_musa::routed_blocks {
namespace {

// Never destroyed: blocks may be freed during process shutdown, after static
// destructors have begun.
std::mutex& g_mu = *new std::mutex();
ska::flat_hash_map<void*, c10::DataPtr>& g_shared = *new ska::flat_hash_map<void*, c10::DataPtr>();
// Lent blocks released by another thread while the lending op still ran.
ska::flat_hash_set<void*>& g_orphans = *new ska::flat_hash_set<void*>();

// Never destroyed either (a deleter may run after this thread's locals are gone).
using LentList = c10::SmallVector<c10::DataPtr, 4>;
thread_local LentList* t_lent = nullptr;

LentList& lent_list() {
  if (!t_lent) t_lent = new LentList();
  return *t_lent;
}

// Removes and returns the entry for `p` from this thread's list (null if absent).
c10::DataPtr take_local(void* p) {
  if (!t_lent) return c10::DataPtr();
  auto& lent = *t_lent;
  for (size_t i = lent.size(); i-- > 0;) {
    if (lent[i].get() != p) continue;
    c10::DataPtr d = std::move(lent[i]);
    if (i + 1 != lent.size()) lent[i] = std::move(lent.back());
    lent.pop_back();
    return d;
  }
  return c10::DataPtr();
}

// Removes and returns the shared table's entry for `p` (null if absent); g_mu held.
c10::DataPtr take_shared_locked(void* p) {
  auto it = g_shared.find(p);
  if (it == g_shared.end()) return c10::DataPtr();
  c10::DataPtr d = std::move(it->second);
  g_shared.erase(it);
  return d;
}

}  // namespace

void lend(c10::DataPtr musa) { lent_list().push_back(std::move(musa)); }

c10::DataPtr take(void* p) {
  c10::DataPtr d = take_local(p);
  if (d.get()) return d;
  std::lock_guard<std::mutex> g(g_mu);
  return take_shared_locked(p);
}

bool release(void* p, bool known_lent) {
  c10::DataPtr d = take_local(p);
  if (d.get()) return true;  // `d` going out of scope frees the block
  std::lock_guard<std::mutex> g(g_mu);
  d = take_shared_locked(p);
  if (d.get()) return true;  // freed on return, after the lock is released (d outlives g)
  if (!known_lent) return false;
  g_orphans.insert(p);  // the lending op still runs on another thread
  return true;
}

thread_local int t_holds = 0;

Hold::Hold() { ++t_holds; }
Hold::~Hold() {
  if (--t_holds == 0) end_op();
}

void end_op() {
  if (t_holds > 0 || !t_lent || t_lent->empty()) return;
  LentList freed;
  {
    std::lock_guard<std::mutex> g(g_mu);
    for (auto& d : *t_lent) {
      void* p = d.get();
      if (g_orphans.erase(p)) freed.push_back(std::move(d));
      else g_shared.emplace(p, std::move(d));
    }
  }
  t_lent->clear();
  // `freed` going out of scope returns orphaned blocks to the musa allocator.
}

}  // namespace torch_musa::routed_blocks
