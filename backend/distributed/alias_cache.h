// The kernel-device aliases a group's collectives reuse from call to call.
//
// A collective that hands back no Work (a synchronous one) leaves nothing
// holding its aliases once it returns, so its alias need not keep the musa
// memory alive: a non-owning one, kept here and handed out again while it
// still describes the same memory, saves building a TensorImpl and a storage
// per buffer on the calls that latency-bound code repeats over the same
// buffers. An entry holds only a weak reference to the musa storage: the
// cache keeps no musa memory alive.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/intrusive_ptr.h>

#include <array>
#include <atomic>
#include <optional>

namespace torch_musa::distributed {

class AliasCache {
 public:
  // One call uses the cache at a time: a call that finds it taken builds its own aliases.
  bool try_acquire() {
    if (busy_.test_and_set(std::memory_order_acquire)) return false;
    hint_ = start_;  // a call's buffers are usually the last call's, in the same order
    first_ = true;
    return true;
  }
  void release() { busy_.clear(std::memory_order_release); }

  // (Acquired.) An alias of contiguous musa tensor `musa` as `dtype` (same width) on the kernel
  // device, 1-D if `flat`: the cached one while it describes the same storage, memory, offset,
  // sizes and strides, else a new non-owning one, remembered in place of the oldest entry.
  at::Tensor get(const at::Tensor& musa, at::ScalarType dtype, bool flat);

 private:
  struct Entry {
    const c10::StorageImpl* target = nullptr;
    // Held while `target` is: its address cannot go to another storage meanwhile.
    std::optional<c10::weak_intrusive_ptr<c10::StorageImpl>> storage;
    at::Tensor alias;
  };
  // A coalesced block of 8 all_reduces and its neighbours fit.
  static constexpr size_t kEntries = 16;
  const at::Tensor& found(size_t i);
  std::array<Entry, kEntries> entries_;
  size_t next_ = 0;  // the oldest entry
  // Where the next look-up starts: after the entry of the call's previous buffer, or where the
  // last call's first buffer was. Calls repeat their buffers in the same order.
  size_t hint_ = 0;
  size_t start_ = 0;
  bool first_ = false;
  std::atomic_flag busy_ = ATOMIC_FLAG_INIT;
};

// A kernel-device alias of contiguous `musa` as `dtype`, 1-D if `flat`: owning (it keeps the musa
// storage alive, for a library that may keep it past the call) or not.
at::Tensor kernel_alias(const at::Tensor& musa, at::ScalarType dtype, bool owning, bool flat = false);

}  // namespace torch_musa::distributed
