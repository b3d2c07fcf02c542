// Kernel-device aliases of a list op's tensor lists, kept from one call to the next.
//
// An optimizer step passes the same memory every step (parameters, moments and step counts are
// the same tensors; gradients are new tensors, mostly in the same blocks of the caching
// allocator): AdamW over GPT-2 passes about 890 tensors a step, in a fused step and the foreach
// add of its step counts. An alias depends only on the memory, layout and dtype it describes, so
// each element whose alias from the previous call still fits is passed again as it is, and only
// the others are aliased anew. No alias is looked up, indexed or reference-counted per element,
// which was most of the op layer's cost for these calls. Only ops that return nothing and never
// resize their arguments use it (the fused optimizer steps and the foreach add).
#pragma once

#include <ATen/core/Tensor.h>

#include <vector>

namespace torch_musa::op_layer {

class ListAliasCache {
 public:
  struct Entry {
    const void* op = nullptr;  // the op's schema
    c10::DeviceIndex device = -1;
    std::vector<std::vector<at::Tensor>> aliases;  // per list argument, as the kernel takes them
  };

  // `op`'s entry, made to alias `lists` element for element (fitting aliases kept, the others
  // made anew), or null when an element is not a dense musa tensor of one device (the caller's
  // general path handles those, and reports what is wrong with them).
  const Entry* refresh(const void* op, c10::ArrayRef<at::TensorList> lists);

 private:
  static constexpr size_t kEntries = 8;  // list ops per thread (an optimizer uses two)
  Entry& entry_of(const void* op);
  std::vector<Entry> entries_;
  size_t next_ = 0;
};

// This thread's cache.
ListAliasCache& list_alias_cache();

}  // namespace torch_musa::op_layer
