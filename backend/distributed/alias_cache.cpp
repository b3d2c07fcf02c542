#include "distributed/alias_cache.h"

#include <c10/core/StorageImpl.h>
#include <c10/core/TensorImpl.h>

#include "ops/kernel_device.h"

namespace torch_musa::distributed {

at::Tensor kernel_alias(const at::Tensor& musa, at::ScalarType dtype, bool owning, bool flat) {
  // Built directly over the storage (for_blob's builder cost a per-call std::function and a
  // device lookup, on the path of every latency-bound collective).
  KernelDevice& kd = kernel_device();
  const c10::Storage& s = musa.storage();
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      owning ? owning_alias(s, kd.device_for(musa.device().index())) : kd.alias_storage(s),
      c10::DispatchKeySet(kd.dispatch_key()), c10::scalarTypeToTypeMeta(dtype));
  if (flat) {
    int64_t numel = musa.numel(), one = 1;
    impl->set_sizes_and_strides({&numel, 1}, {&one, 1}, musa.storage_offset());
  } else {
    impl->set_sizes_and_strides(musa.sizes(), musa.strides(), musa.storage_offset());
  }
  return at::Tensor(std::move(impl));
}

namespace {
bool describes(const at::Tensor& alias, const at::Tensor& musa, const c10::StorageImpl& storage,
               caffe2::TypeMeta dtype, bool flat) {
  const c10::TensorImpl* a = alias.unsafeGetTensorImpl();
  const c10::StorageImpl* as = a->storage().unsafeGetStorageImpl();
  // The memory may have moved (resize_, set_) while the StorageImpl stayed.
  if (as->data() != storage.data() || as->nbytes() != storage.nbytes() || a->dtype() != dtype ||
      a->storage_offset() != musa.storage_offset())
    return false;
  if (flat) return a->dim() == 1 && a->numel() == musa.numel() && a->strides()[0] == 1;  // `musa` is contiguous
  return a->sizes() == musa.sizes() && a->strides() == musa.strides();
}
}  // namespace

at::Tensor AliasCache::get(const at::Tensor& musa, at::ScalarType dtype, bool flat) {
  const c10::StorageImpl* storage = musa.storage().unsafeGetStorageImpl();
  caffe2::TypeMeta meta = c10::scalarTypeToTypeMeta(dtype);
  for (size_t k = 0; k < kEntries; ++k) {
    size_t i = (hint_ + k) % kEntries;
    Entry& e = entries_[i];
    // Same address and a weak reference held since: the same StorageImpl, alive (musa holds it).
    if (e.target == storage && describes(e.alias, musa, *storage, meta, flat)) return found(i);
  }
  Entry& e = entries_[next_];
  e.target = storage;
  e.storage.emplace(musa.storage().getWeakStorageImpl());
  e.alias = kernel_alias(musa, dtype, /*owning=*/false, flat);
  size_t i = next_;
  next_ = (next_ + 1) % kEntries;
  return found(i);
}

const at::Tensor& AliasCache::found(size_t i) {
  if (first_) start_ = i;
  first_ = false;
  hint_ = (i + 1) % kEntries;
  return entries_[i].alias;
}

}  // namespace torch_musa::distributed
