// Internals of the op layer shared by the boxed fallback (delegate.cpp) and
// the unboxed fast path (unboxed_delegate.cpp): per-op traits, kernel-device
// aliases of musa tensors, and the Delegation that maps one call's arguments
// to the kernel device and its results back to musa.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/from_blob.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <functional>
#include <memory>
#include <string>
#include <typeinfo>
#include <vector>

#include "memory/caching_allocator.h"
#include "core/device.h"
#include "ops/kernel_device.h"
#include "tensor_kinds/tensor_kinds.h"

namespace torch_musa::op_layer {

// Counts an op whose result had to be copied into musa memory.
// "aten::name.overload", the key the op layer's per-op counts use.
std::string counted_name(const c10::FunctionSchema& schema);
void count_copy_path(const c10::OperatorHandle& op);

constexpr auto kMusa = c10::DeviceType::PrivateUse1;

// What the fallback needs to know about an op, computed once per schema.
struct OpTraits {
  std::vector<size_t> written_args;  // arguments the op mutates (self in add_, out=)
  bool is_written(size_t i) const {
    for (size_t a : written_args)
      if (a == i) return true;
    return false;
  }
  std::vector<size_t> generator_args;
  bool seeded_without_generator = false;  // random op that would use the default generator
  int dropout_arg = -1;  // its `float dropout_p` (attention): at 0 the call draws no random numbers
  bool allows_cpu_indices = false;        // index ops accept cpu index tensors, as on CUDA
  // Tensors the kernel reads on the host, so they stay cpu tensors: the foreach ops' `scalars`
  // (a ScalarList passed as a tensor; CUDA's kernels require it on the cpu).
  std::vector<size_t> cpu_side_args;
  bool is_cpu_side(size_t i) const {
    for (size_t a : cpu_side_args)
      if (a == i) return true;
    return false;
  }
  bool cpu_only = false;                  // the kernel device has no kernel; only the CPU has
  bool double_castable = false;           // computes in its dtype: double casting applies (double_cast.h)
  // Whether a GPU kernel of the op makes the host wait (its output's size or value is read on the
  // host): never, always, or when an index is a boolean mask (indexing runs nonzero on it).
  enum class Sync : uint8_t { kNever, kAlways, kWithMaskIndex };
  Sync synchronizes = Sync::kNever;
};

// torch.musa.set_sync_debug_mode's report for an op about to run with `args` (the host driver's:
// a CUDA kernel device's kernels report through CUDA's own check).
void note_if_synchronizing(const c10::OperatorHandle& op, const OpTraits& traits, c10::ArrayRef<c10::IValue> args);

// The traits of `op` (computed once per schema; lock-free after the first call on a thread).
const OpTraits& traits_of(const c10::OperatorHandle& op);

[[noreturn]] void device_mismatch(const c10::OperatorHandle& op, const c10::Device& a, const c10::Device& b,
                                  const std::string& arg);

// The elements of a list IValue, borrowed. Iterating a c10::List copies each
// element, and copying a musa tensor that has a Python object reaches that
// object's reference count (taking the GIL): per element of a long list, that
// was a large share of a foreach or fused-optimizer call.
inline c10::ArrayRef<c10::IValue> elements(const c10::IValue& list) { return list.toListRef(); }

// Applies `fn` to every tensor in an argument or result: a tensor, a tensor
// list, or a list of optional tensors (index lists). Other values pass through.
c10::IValue map_tensors(const c10::IValue& v, c10::function_ref<at::Tensor(const at::Tensor&)> fn);

// A tensor of dispatch key `key` over `storage` with the layout (sizes,
// strides, offset, conj/neg bits) of `like`: how musa tensors are aliased.
at::Tensor tensor_over(c10::Storage storage, const at::Tensor& like, c10::DispatchKey key);

// Whether kernel-device alias `a` (made for some musa tensor) describes musa tensor `t` as it is
// now: a non-owning alias whose storage nothing else holds, over the same memory, with the same
// dtype and layout. An alias depends on nothing else, so such an alias can stand for `t`.
inline bool alias_describes(const at::Tensor& a, const at::Tensor& t) {
  const c10::TensorImpl* ai = a.unsafeGetTensorImpl();
  const c10::TensorImpl* ti = t.unsafeGetTensorImpl();
  const c10::Storage& as = ai->storage();
  const c10::Storage& ts = ti->storage();
  if (!(as.use_count() == 1 && as.data() == ts.data() && as.nbytes() == ts.nbytes() &&
        as.resizable() == ts.resizable() && is_non_owning_alias(as) && ai->dtype() == ti->dtype() &&
        ai->storage_offset() == ti->storage_offset() && ai->dim() == ti->dim() && ai->is_conj() == ti->is_conj() &&
        ai->is_neg() == ti->is_neg()))
    return false;
  // (compared in line: a few dims, where two memcmp calls per input cost more than the compare)
  const int64_t *asz = ai->sizes().data(), *tsz = ti->sizes().data();
  const int64_t *ast = ai->strides().data(), *tst = ti->strides().data();
  for (int64_t d = 0, n = ai->dim(); d < n; ++d)
    if (asz[d] != tsz[d] || ast[d] != tst[d]) return false;
  return true;
}

// Recently made kernel-device aliases, per thread. An alias depends only on
// the memory and layout it describes, so one whose memory, size, layout and
// dtype still equal those of the musa tensor being aliased is reused as is:
// making and destroying a TensorImpl and a StorageImpl per input is a large
// share of a small op's cost. Only aliases nothing else references are
// reused (a kernel may have kept one), and they never own memory.
// Direct-mapped, and large enough for an optimizer step: a fused AdamW over GPT-2 aliases 740
// tensors per call, the same ones (or the same memory) every step. A slot holds an alias of
// about 300 bytes, which never owns musa memory.
class AliasCache {
 public:
  AliasCache() : slots_(kSlots) {}
  at::Tensor* find(const at::Tensor& musa, c10::DispatchKey key) {
    at::Tensor& a = slots_[slot_of(musa)];
    return a.defined() && reusable(a, musa, key) ? &a : nullptr;
  }
  void put(const at::Tensor& musa, const at::Tensor& alias) { slots_[slot_of(musa)] = alias; }

 private:
  static constexpr int kSlotBits = 13;
  static constexpr size_t kSlots = size_t{1} << kSlotBits;
  static size_t slot_of(const at::Tensor& t) {
    auto p = reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl()->storage().data()) +
             static_cast<uintptr_t>(t.storage_offset());
    return static_cast<size_t>((static_cast<uint64_t>(p) * 0x9E3779B97F4A7C15ull) >> (64 - kSlotBits));
  }
  static bool reusable(const at::Tensor& a, const at::Tensor& t, c10::DispatchKey key) {
    return a.use_count() == 1 && a.unsafeGetTensorImpl()->key_set().has(key) && alias_describes(a, t);
  }
  std::vector<at::Tensor> slots_;
};

// This thread's alias cache.
AliasCache& alias_cache();

// The position of a pointer among a call's entries. Most calls have a handful, found by a scan;
// foreach and fused-optimizer calls take hundreds of tensors (AdamW over GPT-2: 740), where
// scanning for each of them is quadratic, so past kIndexFrom entries a hash map takes over.
class PointerIndex {
 public:
  static constexpr size_t kIndexFrom = 24;
  // Sizes the table for about `n` entries up front.
  void reserve(size_t n) {
    while (keys_.size() < 2 * n) grow();
  }
  // The first i < n with key_at(i) == key, or -1, for a handful of entries (no index needed).
  template <class KeyAt>
  static ptrdiff_t scan(const void* key, size_t n, KeyAt key_at) {
    for (size_t i = 0; i < n; ++i)
      if (key_at(i) == key) return static_cast<ptrdiff_t>(i);
    return -1;
  }
  // The same through the index, for kIndexFrom or more entries (fewer are scanned). Entries are
  // only ever appended.
  template <class KeyAt>
  ptrdiff_t find(const void* key, size_t n, KeyAt key_at) {
    for (; indexed_ < n; ++indexed_) insert(key_at(indexed_), indexed_);
    for (size_t h = hash(key);; h = (h + 1) & mask_) {
      if (keys_[h] == key) return static_cast<ptrdiff_t>(positions_[h]);
      if (keys_[h] == nullptr) return -1;
    }
  }

 private:
  // Open addressing with linear probing, at most half full: no allocation per entry.
  size_t hash(const void* k) const {
    return static_cast<size_t>((reinterpret_cast<uint64_t>(k) * 0x9E3779B97F4A7C15ull) >> 32) & mask_;
  }
  void insert(const void* k, size_t pos) {
    if (2 * (count_ + 1) > keys_.size()) grow();
    for (size_t h = hash(k);; h = (h + 1) & mask_) {
      if (keys_[h] == k) return;  // keeps the first position
      if (keys_[h] == nullptr) {
        keys_[h] = k;
        positions_[h] = pos;
        ++count_;
        return;
      }
    }
  }
  void grow() {
    std::vector<const void*> keys = std::move(keys_);
    std::vector<size_t> positions = std::move(positions_);
    size_t cap = keys.empty() ? 4 * kIndexFrom : 2 * keys.size();
    keys_.assign(cap, nullptr);
    positions_.assign(cap, 0);
    mask_ = cap - 1;
    count_ = 0;
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i]) insert(keys[i], positions[i]);
  }
  std::vector<const void*> keys_;
  std::vector<size_t> positions_;
  size_t mask_ = 0, count_ = 0, indexed_ = 0;
};

// One delegated op call: the aliases it made and how to map results back.
class Delegation {
 public:
  Delegation(const c10::OperatorHandle& op, KernelDevice& kd) : op_(op), kd_(kd) {}

  c10::DeviceIndex device = -1;

  // `written`: the op writes `t` (out=, self of an in-place op). A 0-dim cpu tensor may be an input
  // beside musa tensors (a scalar, as CUDA's kernels take it), never an output: CUDA refuses that too.
  void note_device(const at::Tensor& t, const std::string& arg, bool cpu_ok, bool written = false) {
    if (!t.defined()) return;
    auto d = t.device();
    if (d.type() == kMusa) {
      if (device < 0) {
        device = d.index();
        first_ = d;
      } else if (d.index() != device) {
        device_mismatch(op_, first_, d, arg);
      }
    } else if (d.is_cpu()) {
      if ((t.dim() != 0 || written) && !cpu_ok) pending_cpu_.emplace_back(arg);
    } else {
      pending_other_.emplace_back(arg, d);
    }
  }

  void check_mixing() {
    if (device < 0) return;  // no musa tensor: nothing to mix with
    if (!pending_other_.empty()) device_mismatch(op_, first_, pending_other_[0].second, pending_other_[0].first);
    if (!pending_cpu_.empty()) device_mismatch(op_, first_, c10::Device(c10::DeviceType::CPU), pending_cpu_[0]);
  }

  bool storage_aliased(const c10::Storage& s) { return storage_of_musa(s.unsafeGetStorageImpl()) >= 0; }

  c10::Storage alias_storage(const c10::Storage& s) { return storages_[alias_storage_index(s)].alias; }

  // Room for a call that aliases about `n` tensors (a foreach or fused-optimizer call).
  void expect(size_t n) {
    tensors_.reserve(n);
    storages_.reserve(n);
    if (n < PointerIndex::kIndexFrom) return;
    Indexes& ix = indexes();
    for (PointerIndex* index : {&ix.musa_tensor, &ix.alias_tensor, &ix.musa_storage, &ix.alias_storage})
      index->reserve(n);
  }

  at::Tensor alias(const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kMusa) {
      // cpu scalars (and cpu index tensors) go to the kernel device as they are;
      // the cuda kernel device needs index tensors on the GPU.
      // (Before any musa argument named the device, e.g. empty_quantized's cpu `qtensor`, the current one.)
      if (t.defined() && t.dim() != 0 && kd_.type() != c10::DeviceType::CPU && t.device().is_cpu())
        return t.to(kd_.device_for(device < 0 ? current_device() : device));
      return t;
    }
    if (C10_UNLIKELY(tensor_kinds::is_kind(t))) return alias_kind(t);
    // A storage only `t` references (use count 1) is in no entry of this call yet (an entry holds
    // a reference), and neither is `t`: the lookups are skipped, as for most parameters.
    const bool sole = t.storage().use_count() == 1;
    if (!sole)
      if (ptrdiff_t i = tensor_of_musa(t.unsafeGetTensorImpl()); i >= 0) return tensors_[i].alias;
    at::Tensor* cached = !sole && storage_aliased(t.storage()) ? nullptr : cache_.find(t, kd_.dispatch_key());
    if (cached) {  // (one alias storage per musa storage within a call, so a view shares it)
      const c10::Storage& s = cached->storage();
      storages_.push_back({t.storage(), s, s.data()});
      tensors_.push_back({*cached, t.unsafeGetTensorImpl(), storages_.size() - 1});
      return *cached;
    }
    size_t si = sole ? new_storage_alias(t.storage()) : alias_storage_index(t.storage());
    at::Tensor a = tensor_over(storages_[si].alias, t, kd_.dispatch_key());
    tensors_.push_back({a, t.unsafeGetTensorImpl(), si});
    cache_.put(t, a);
    return a;
  }

  c10::IValue alias_value(const c10::IValue& v) {
    if (v.isStorage()) {
      auto s = v.toStorage();
      if (s.device_type() == kMusa) return alias_storage(s);
      return v;
    }
    if (v.isDevice() && v.toDevice().type() == kMusa) {
      if (device < 0) device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
      return kd_.device_for(device);
    }
    return map_tensors(v, [this](const at::Tensor& t) { return alias(t); });
  }

  // After the kernel: carries what the op did to written arguments (resize_,
  // set_) back to their musa tensors.
  void sync_written(const OpTraits& traits, c10::ArrayRef<c10::IValue> originals) {
    for (size_t idx : traits.written_args) {
      const auto& v = originals[idx];
      if (v.isTensor()) sync_tensor(v.toTensor());
      else if (v.isTensorList())
        for (const c10::IValue& t : elements(v)) sync_tensor(t.toTensor());
    }
  }

  // The musa tensor for a kernel-device result (unboxed callers).
  at::Tensor result_to_musa(const at::Tensor& out) { return to_musa(out); }
  // Carries what an in-place op did to `self`'s alias back to `self`.
  void sync_in_place(const at::Tensor& self) { sync_tensor(self); }

  c10::IValue to_musa_value(const c10::IValue& v) {
    if (v.isStorage() && v.toStorage().device_type() == kd_.type()) {
      return to_musa_storage(v.toStorage());
    }
    return map_tensors(v, [this](const at::Tensor& t) { return to_musa(t); });
  }

 private:
  struct StorageAlias {
    c10::Storage musa;  // owned: an op may swap a musa tensor's storage (set_)
    c10::Storage alias;
    const void* original_data;
  };

  struct TensorAlias {
    at::Tensor alias;
    c10::TensorImpl* musa;  // borrowed: the caller's argument list keeps it alive
    size_t storage;         // its entry in storages_
  };

  size_t alias_storage_index(const c10::Storage& s) {
    ptrdiff_t i = storage_of_musa(s.unsafeGetStorageImpl());
    return i >= 0 ? static_cast<size_t>(i) : new_storage_alias(s);
  }
  size_t new_storage_alias(const c10::Storage& s) {
    storages_.push_back({s, kd_.alias_storage(s), s.unsafeGetStorageImpl()->data_ptr().get()});
    return storages_.size() - 1;
  }

  // The hash indexes of a call with many entries, made when first needed: most calls scan a
  // handful of entries, and building and tearing down four empty indexes in every call was a
  // measurable share of a small op's cost.
  struct Indexes {
    PointerIndex musa_tensor, alias_tensor, musa_storage, alias_storage;
  };
  Indexes& indexes() {
    if (!indexes_) indexes_ = std::make_unique<Indexes>();
    return *indexes_;
  }
  // The first of this call's `n` entries whose key is `key`, or -1 (see PointerIndex).
  template <class KeyAt>
  ptrdiff_t lookup(PointerIndex Indexes::*index, const void* key, size_t n, KeyAt key_at) {
    if (n < PointerIndex::kIndexFrom) return PointerIndex::scan(key, n, key_at);
    return (indexes().*index).find(key, n, key_at);
  }
  ptrdiff_t tensor_of_musa(const c10::TensorImpl* t) {
    return lookup(&Indexes::musa_tensor, t, tensors_.size(), [this](size_t i) { return tensors_[i].musa; });
  }
  ptrdiff_t tensor_of_alias(const c10::TensorImpl* t) {
    return lookup(&Indexes::alias_tensor, t, tensors_.size(),
                  [this](size_t i) { return tensors_[i].alias.unsafeGetTensorImpl(); });
  }
  ptrdiff_t storage_of_musa(const c10::StorageImpl* s) {
    return lookup(&Indexes::musa_storage, s, storages_.size(),
                  [this](size_t i) { return storages_[i].musa.unsafeGetStorageImpl(); });
  }
  ptrdiff_t storage_of_alias(const c10::StorageImpl* s) {
    return lookup(&Indexes::alias_storage, s, storages_.size(),
                  [this](size_t i) { return storages_[i].alias.unsafeGetStorageImpl(); });
  }

  static at::Tensor musa_ref(c10::TensorImpl* t) {
    return at::Tensor(c10::intrusive_ptr<c10::TensorImpl, c10::UndefinedTensorImpl>::reclaim_copy(t));
  }

  // Maps a kernel-device storage back to musa: an alias of an input's
  // storage, memory the op allocated from musa (adopted), or a copy.
  c10::Storage to_musa_storage(const c10::Storage& s) {
    auto* impl = s.unsafeGetStorageImpl();
    if (ptrdiff_t i = storage_of_alias(impl); i >= 0) return musa_storage_of(storages_[i]);
    for (auto& e : fresh_)
      if (e.first.unsafeGetStorageImpl() == impl) return e.second;
    auto musa = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), impl->nbytes(), c10::DataPtr(), allocator::get(), true));
    adopt_into(*musa.unsafeGetStorageImpl(), *impl);
    fresh_.emplace_back(s, musa);
    return musa;
  }

  // The musa storage of an alias storage of this call, after carrying over a growth (resize_).
  const c10::Storage& musa_storage_of(StorageAlias& e) {
    c10::StorageImpl* impl = e.alias.unsafeGetStorageImpl();
    if (impl->data_ptr().get() != e.original_data) {  // the op grew it
      adopt_into(*e.musa.unsafeGetStorageImpl(), *impl);
      e.original_data = impl->data_ptr().get();
    }
    return e.musa;
  }

  // Moves (or, when impossible, copies) the kernel-device memory of `from` into `to`.
  void adopt_into(c10::StorageImpl& to, c10::StorageImpl& from) {
    c10::DataPtr& dp = from.mutable_data_ptr();
    size_t n = from.nbytes();
    if (dp.get() == nullptr || n == 0) {
      to.set_data_ptr_noswap(allocator::get()->allocate(0));
      to.set_nbytes(0);
      return;
    }
    // (the kernel-device storage keeps a non-owning view for the rest of this call)
    if (c10::DataPtr musa = take_lent_block(kd_, from, device); musa.get() != nullptr) {
      to.set_data_ptr_noswap(std::move(musa));
      to.set_nbytes(n);
      return;
    }
    // Memory the musa allocator did not provide (e.g. a library's own
    // buffer): copy it into musa memory and count the op.
    DeviceScope scope(device);
    c10::Storage fresh(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), n,
                                                            allocator::get()->allocate(n), allocator::get(), true));
    auto bytes = at::TensorOptions().dtype(at::kByte);
    at::Tensor src = at::from_blob(from.mutable_data(), {static_cast<int64_t>(n)}, bytes.device(from.device()));
    at::Tensor dst = at::from_blob(fresh.mutable_data(), {static_cast<int64_t>(n)}, bytes.device(kd_.device_for(device)));
    dst.copy_(src);
    to.set_data_ptr_noswap(std::move(fresh.unsafeGetStorageImpl()->mutable_data_ptr()));
    to.set_nbytes(n);
    count_copy_path(op_);
  }

  at::Tensor musa_tensor_like(const at::Tensor& out, c10::Storage storage) {
    auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                     out.dtype());
    impl->set_sizes_and_strides(out.sizes(), out.strides(), out.storage_offset());
    return at::Tensor(std::move(impl));
  }

  at::Tensor to_musa(const at::Tensor& out) {
    if (!out.defined() || out.device().type() != kd_.type()) return out;
    if (C10_UNLIKELY(tensor_kinds::is_kind(out))) return kind_to_musa(out);
    if (ptrdiff_t i = tensor_of_alias(out.unsafeGetTensorImpl()); i >= 0) return musa_ref(tensors_[i].musa);  // in-place: self
    if (device < 0) device = current_device();
    if (become_musa(out)) return out;
    return musa_tensor_like(out, to_musa_storage(out.storage()));
  }

  struct KindAlias {
    at::Tensor musa, alias;
  };

  // A sparse, nested or quantized musa tensor, rebuilt on the kernel device over aliases of its parts.
  at::Tensor alias_kind(const at::Tensor& t) {
    for (auto& e : kinds_)
      if (e.musa.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return e.alias;
    if (device < 0) device = t.device().index();
    auto part = [this](const at::Tensor& p) { return alias(p); };
    auto storage = [this](const c10::Storage& s) { return alias_storage(s); };
    at::Tensor a = tensor_kinds::remake(
      t, {part, storage, c10::toBackendComponent(kd_.dispatch_key()), kd_.device_for(t.device().index())});
    kinds_.push_back({t, a});
    return a;
  }

  // Runs `fn` with how a kernel-device tensor's parts come back to musa.
  template <class Fn>
  auto on_musa_side(Fn fn) {
    if (device < 0) device = current_device();
    auto part = [this](const at::Tensor& p) { return to_musa(p); };
    auto storage = [this](const c10::Storage& s) { return to_musa_storage(s); };
    return fn(tensor_kinds::PartMap{part, storage, c10::BackendComponent::PrivateUse1Bit, c10::Device(kMusa, device)});
  }

  // A sparse, nested or quantized result: an aliased argument (in place) gets
  // what the op did to it; a new one is rebuilt over its parts in musa memory.
  at::Tensor kind_to_musa(const at::Tensor& out) {
    for (auto& e : kinds_)
      if (e.alias.unsafeGetTensorImpl() == out.unsafeGetTensorImpl()) {
        carry_kind(e);
        return e.musa;
      }
    return on_musa_side([&](const tensor_kinds::PartMap& m) { return tensor_kinds::remake(out, m); });
  }

  void carry_kind(const KindAlias& e);

  // A fresh output that nothing else references (the common case) is turned
  // into a musa tensor in place: its memory is already musa memory, so only
  // the storage's DataPtr/allocator and the tensor's device keys change. This
  // saves a TensorImpl and a StorageImpl per op. Returns false (nothing
  // changed) when the output is shared, an alias of an input, or not memory
  // the musa allocator provided.
  bool become_musa(const at::Tensor& out) {
    c10::TensorImpl* impl = out.unsafeGetTensorImpl();
    if (out.use_count() != 1 || out.weak_use_count() != 1 || !impl->has_storage() ||
        typeid(*impl) != typeid(c10::TensorImpl) || impl->key_set().has(c10::DispatchKey::Python))
      return false;
    const c10::Storage& storage = impl->storage();
    c10::StorageImpl* simpl = storage.unsafeGetStorageImpl();
    if (storage.use_count() != 1 || typeid(*simpl) != typeid(c10::StorageImpl) || !simpl->data_ptr().get())
      return false;
    if (storage_of_alias(simpl) >= 0) return false;
    c10::DataPtr taken = std::move(simpl->mutable_data_ptr());
    if (!kd_.adopt(taken, device)) {
      simpl->set_data_ptr_noswap(std::move(taken));
      return false;
    }
    simpl->set_data_ptr_noswap(std::move(taken));
    simpl->set_allocator(allocator::get());
    impl->set_storage_keep_dtype(storage);  // device_opt_ follows the storage
    impl->_change_backend_component_keys(simpl->device());
    return true;
  }

  void sync_tensor(const at::Tensor& musa) {
    if (!musa.defined() || musa.device().type() != kMusa) return;
    if (C10_UNLIKELY(tensor_kinds::is_kind(musa))) {
      for (auto& e : kinds_)
        if (e.musa.unsafeGetTensorImpl() == musa.unsafeGetTensorImpl()) carry_kind(e);
      return;
    }
    ptrdiff_t i = tensor_of_musa(musa.unsafeGetTensorImpl());  // (each musa tensor is aliased once per call)
    if (i < 0) return;
    TensorAlias& e = tensors_[i];
    auto* a = e.alias.unsafeGetTensorImpl();
    auto* m = e.musa;
    // Usually the alias still has the storage it was made with (no set_ swapped it).
    StorageAlias& own = storages_[e.storage];
    c10::Storage target = a->storage().unsafeGetStorageImpl() == own.alias.unsafeGetStorageImpl()
                              ? musa_storage_of(own)
                              : to_musa_storage(a->storage());
    if (target.unsafeGetStorageImpl() != m->storage().unsafeGetStorageImpl()) m->set_storage_keep_dtype(target);
    if (a->sizes() != m->sizes() || a->strides() != m->strides() || a->storage_offset() != m->storage_offset())
      m->set_sizes_and_strides(a->sizes(), a->strides(), a->storage_offset());
  }

  const c10::OperatorHandle& op_;
  KernelDevice& kd_;
  AliasCache& cache_ = alias_cache();  // (one thread-local lookup per call, not per tensor)
  c10::Device first_{kMusa, 0};
  // Small inline vectors: most ops touch a handful of tensors, and heap
  // allocations here are a measurable share of a small op's cost.
  c10::SmallVector<std::string, 1> pending_cpu_;
  c10::SmallVector<std::pair<std::string, c10::Device>, 1> pending_other_;
  c10::SmallVector<StorageAlias, 4> storages_;
  // The musa side is borrowed: the caller's argument list keeps it alive.
  // (Copying a musa tensor is not free: with a Python object attached, its
  // reference count changes reach the Python object too.)
  c10::SmallVector<TensorAlias, 4> tensors_;
  c10::SmallVector<std::pair<c10::Storage, c10::Storage>, 2> fresh_;  // kernel-device -> musa
  std::unique_ptr<Indexes> indexes_;
  c10::SmallVector<KindAlias, 1> kinds_;  // sparse, nested and quantized arguments
};

inline void Delegation::carry_kind(const KindAlias& e) {
  on_musa_side([&](const tensor_kinds::PartMap& m) {
    tensor_kinds::carry_into(e.musa, e.alias, m);
    return 0;
  });
}

// The boxed delegation of one call (the fallback itself).
void boxed_delegate(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack);
// The same for a call whose musa tensors include a sparse, nested or quantized
// one (`functionality` is that kind's key): the kernel device's kernel of that kind runs.
void boxed_delegate_kind(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey functionality);
// Runs one call by the CPU's kernel over CPU copies of its musa tensors (the counted copy path):
// results and written arguments come back to musa device `device`.
void run_by_cpu_copy(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DeviceIndex device);
// Counts one delegated op (torch.musa.ops.delegated_op_count()).
void note_delegated();
// Registers the unboxed fast path for `op` (qualified name without "aten::")
// when its shape is one the fast path covers; returns whether it did.
bool delegate_unboxed(torch::Library& lib, const c10::OperatorHandle& op, const std::string& qualified);

}  // namespace torch_musa::op_layer
