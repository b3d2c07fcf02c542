// Kernel-device aliases of a list op's tensor lists, kept from one call to the next.
//
// An optimizer step passes the same memory every step (parameters, moments and step counts are
// the same tensors; gradients are new tensors, mostly in the same blocks of the caching
// allocator): AdamW over GPT-2 passes about 890 tensors a step, in a fused step and the foreach
// add of its step counts. An alias depends only on the memory, layout and dtype it describes, so
// each element whose alias from the previous call still fits is passed again as it is, and only
// the others are aliased anew. No alias is looked up, indexed or reference-counted per element,
// which was most of the op layer's cost for these calls. Only ops that return nothing and never
// resize their arguments use it: the fused optimizer steps and the in-place foreach ops (a
// foreach AdamW step makes about nine such calls per parameter group).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace torch_musa::op_layer {

class ListAliasCache {
 public:
  struct Entry {
    const void* op = nullptr;                      // the op's schema
    const c10::TensorImpl* first = nullptr;        // the first element of the first non-empty list
    std::vector<size_t> sizes;                     // the lists' lengths
    c10::DeviceIndex device = -1;
    std::vector<std::vector<at::Tensor>> aliases;  // per list argument, as the kernel takes them
    bool busy = false;                             // a call is passing these lists now
  };

  ListAliasCache() { entries_.reserve(kEntries); }  // (entries never move: callers hold pointers)

  // The entry for this call of `op` (one per op and set of lists: an optimizer's parameter
  // groups each have theirs), made to alias `lists` element for element (fitting aliases kept,
  // the others made anew); null when an element is not a dense musa tensor of one device (the
  // caller's general path handles those, and reports what is wrong with them), or when the
  // entry is in use by a call further up this thread.
  Entry* refresh(const void* op, c10::ArrayRef<at::TensorList> lists);

 private:
  static constexpr size_t kEntries = 64;  // list calls per thread and step (a few optimizers' groups)
  Entry* entry_of(const void* op, const c10::TensorImpl* first, c10::ArrayRef<at::TensorList> lists);
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

// Marks an entry in use while a call passes its lists (so nothing re-aliases them meanwhile).
class EntryInUse {
 public:
  explicit EntryInUse(ListAliasCache::Entry& e) : e_(e) { e_.busy = true; }
  ~EntryInUse() { e_.busy = false; }
  EntryInUse(const EntryInUse&) = delete;
  EntryInUse& operator=(const EntryInUse&) = delete;

 private:
  ListAliasCache::Entry& e_;
};

// This thread's cache.
ListAliasCache& list_alias_cache();

}  // namespace torch_musa::op_layer
