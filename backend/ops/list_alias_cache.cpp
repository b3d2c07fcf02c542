#include "ops/list_alias_cache.h"

#include "ops/delegate.h"
#include "ops/delegation.h"
#include "ops/kernel_device.h"
#include "tensor_kinds/tensor_kinds.h"

namespace torch_musa::op_layer {
namespace {

bool dense_musa_on(const at::Tensor& t, c10::DeviceIndex device) {
  return t.defined() && t.device().type() == c10::DeviceType::PrivateUse1 && t.device().index() == device &&
         !tensor_kinds::is_kind(t) && t.unsafeGetTensorImpl()->has_storage();
}

}  // namespace

ListAliasCache::Entry* ListAliasCache::entry_of(const void* op, const c10::TensorImpl* first,
                                                 c10::ArrayRef<at::TensorList> lists) {
  auto same_sizes = [&](const Entry& e) {
    if (e.sizes.size() != lists.size()) return false;
    for (size_t k = 0; k < lists.size(); ++k)
      if (e.sizes[k] != lists[k].size()) return false;
    return true;
  };
  for (Entry& e : entries_)
    if (e.op == op && e.first == first && same_sizes(e)) return e.busy ? nullptr : &e;
  Entry* e = nullptr;
  if (entries_.size() < kEntries) {
    e = &entries_.emplace_back();
  } else {
    e = &entries_[next_];
    if (e->busy) return nullptr;
    next_ = (next_ + 1) % kEntries;
    *e = Entry();
  }
  e->op = op;
  e->first = first;
  e->sizes.clear();
  for (const at::TensorList list : lists) e->sizes.push_back(list.size());
  return e;
}

ListAliasCache::Entry* ListAliasCache::refresh(const void* op, c10::ArrayRef<at::TensorList> lists) {
  // The device: the first element's (every other element must be on it).
  const at::Tensor* first = nullptr;
  for (const at::TensorList list : lists)
    if (!list.empty()) {
      first = &list[0];
      break;
    }
  if (first == nullptr || !first->defined() || first->device().type() != c10::DeviceType::PrivateUse1) return nullptr;
  const c10::DeviceIndex device = first->device().index();
  Entry* e = entry_of(op, first->unsafeGetTensorImpl(), lists);
  if (e == nullptr) return nullptr;
  if (e->device != device || e->aliases.size() != lists.size()) {
    e->device = device;
    e->aliases.assign(lists.size(), {});
  }
  for (size_t k = 0; k < lists.size(); ++k) {
    const at::TensorList list = lists[k];
    auto& aliases = e->aliases[k];
    aliases.resize(list.size());
    for (size_t i = 0; i < list.size(); ++i) {
      const at::Tensor& t = list[i];
      if (!dense_musa_on(t, device)) return nullptr;
      if (!aliases[i].defined() || !alias_describes(aliases[i], t)) aliases[i] = alias_on_kernel_device(t);
    }
  }
  return e;
}

ListAliasCache& list_alias_cache() {
  thread_local ListAliasCache cache;
  return cache;
}

}  // namespace torch_musa::op_layer
