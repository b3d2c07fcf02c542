#include "routed_blocks.h"

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

thread_local c10::SmallVector<c10::DataPtr, 4> t_lent;

}  // namespace

void lend(c10::DataPtr musa) { t_lent.push_back(std::move(musa)); }

c10::DataPtr take(void* p) {
  auto& lent = t_lent;
  for (size_t i = lent.size(); i-- > 0;) {
    if (lent[i].get() != p) continue;
    c10::DataPtr d = std::move(lent[i]);
    if (i + 1 != lent.size()) lent[i] = std::move(lent.back());
    lent.pop_back();
    return d;
  }
  std::lock_guard<std::mutex> g(g_mu);
  auto it = g_shared.find(p);
  if (it == g_shared.end()) return c10::DataPtr();
  c10::DataPtr d = std::move(it->second);
  g_shared.erase(it);
  return d;
}

void end_op() {
  auto& lent = t_lent;
  if (lent.empty()) return;
  std::lock_guard<std::mutex> g(g_mu);
  for (auto& d : lent) {
    void* p = d.get();
    g_shared.emplace(p, std::move(d));
  }
  lent.clear();
}

}  // namespace torch_musa::routed_blocks
