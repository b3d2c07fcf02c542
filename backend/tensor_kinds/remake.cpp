#include "tensor_kinds/tensor_kinds.h"

#include <ATen/NestedTensorImpl.h>
#include <ATen/SparseCsrTensorImpl.h>
#include <ATen/SparseCsrTensorUtils.h>
#include <ATen/SparseTensorImpl.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>

namespace torch_musa::tensor_kinds {
namespace {

// The key set of `t` with its backend swapped: the same functionality on the other side.
c10::DispatchKeySet keys_on(const at::Tensor& t, c10::BackendComponent backend) {
  c10::DispatchKeySet ks = t.key_set();
  auto old = ks.highestBackendKey();
  return ks.remove_backend(old) | c10::DispatchKeySet(backend);
}

at::Tensor remake_coo(const at::Tensor& t, const PartMap& map) {
  auto* src = at::sparse::get_sparse_impl(t);
  auto impl = c10::make_intrusive<at::SparseTensorImpl>(keys_on(t, map.backend), t.dtype());
  impl->raw_resize_(src->sparse_dim(), src->dense_dim(), t.sizes());
  impl->set_indices_and_values_unsafe(map.tensor(src->indices()), map.tensor(src->values()));
  impl->set_coalesced(src->coalesced());
  return at::Tensor(std::move(impl));
}

at::Tensor remake_compressed(const at::Tensor& t, const PartMap& map) {
  auto* src = at::sparse_csr::get_sparse_csr_impl(t);
  auto impl = c10::make_intrusive<at::SparseCsrTensorImpl>(keys_on(t, map.backend), map.device, t.layout(), t.dtype());
  impl->set_member_tensors(map.tensor(src->compressed_indices()), map.tensor(src->plain_indices()),
                           map.tensor(src->values()), t.sizes());
  return at::Tensor(std::move(impl));
}

// Nested tensors keep their metadata (sizes, strides, offsets) on the cpu on
// every device; only the buffer's storage moves.
at::Tensor remake_nested(const at::Tensor& t, const PartMap& map) {
  auto* src = at::native::get_nested_tensor_impl(t);
  auto impl = c10::make_intrusive<at::native::NestedTensorImpl>(
    map.storage(t.storage()), keys_on(t, map.backend), t.dtype(), src->get_nested_sizes(),
    src->get_nested_strides(), src->get_storage_offsets());
  return at::Tensor(std::move(impl));
}

// Per-channel parameters are tensors of the tensor's device; per-tensor ones are numbers.
at::QuantizerPtr quantizer_on(const at::QuantizerPtr& q, const PartMap& map) {
  switch (q->qscheme()) {
    case c10::kPerChannelAffine: {
      auto* pc = static_cast<at::PerChannelAffineQuantizer*>(q.get());
      return at::make_per_channel_affine_quantizer(map.tensor(pc->scales()), map.tensor(pc->zero_points()),
                                                   pc->axis(), q->scalar_type());
    }
    case c10::kPerChannelAffineFloatQParams: {
      auto* pc = static_cast<at::PerChannelAffineFloatQParamsQuantizer*>(q.get());
      return at::make_per_channel_affine_quantizer(map.tensor(pc->scales()), map.tensor(pc->zero_points()),
                                                   pc->axis(), q->scalar_type());
    }
    default:
      return q;  // per-tensor affine/symmetric: no tensors in it
  }
}

at::Tensor remake_quantized(const at::Tensor& t, const PartMap& map) {
  auto* src = static_cast<at::QTensorImpl*>(t.unsafeGetTensorImpl());
  auto impl = c10::make_intrusive<at::QTensorImpl>(map.storage(t.storage()), keys_on(t, map.backend), t.dtype(),
                                                   quantizer_on(src->quantizer(), map));
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

}  // namespace

at::Tensor remake(const at::Tensor& t, const PartMap& map) {
  if (t.is_sparse()) return remake_coo(t, map);
  if (t.is_sparse_csr() || at::sparse_csr::is_sparse_compressed(t)) return remake_compressed(t, map);
  if (t.is_nested()) return remake_nested(t, map);
  if (t.is_quantized()) return remake_quantized(t, map);
  TORCH_INTERNAL_ASSERT(false, "tensor_kinds::remake: not a sparse, nested or quantized tensor");
}

void carry_into(const at::Tensor& target, const at::Tensor& changed, const PartMap& map) {
  at::Tensor moved = remake(changed, map);
  if (target.is_sparse()) {
    auto* dst = at::sparse::get_sparse_impl(target);
    auto* src = at::sparse::get_sparse_impl(moved);
    dst->raw_resize_(src->sparse_dim(), src->dense_dim(), moved.sizes());
    dst->set_indices_and_values_unsafe(src->indices(), src->values());
    dst->set_coalesced(src->coalesced());
  } else if (at::sparse_csr::is_sparse_compressed(target)) {
    auto* src = at::sparse_csr::get_sparse_csr_impl(moved);
    at::sparse_csr::get_sparse_csr_impl(target)->set_member_tensors(
      src->compressed_indices(), src->plain_indices(), src->values(), moved.sizes());
  } else if (target.is_quantized()) {
    auto* dst = static_cast<at::QTensorImpl*>(target.unsafeGetTensorImpl());
    auto* src = static_cast<at::QTensorImpl*>(moved.unsafeGetTensorImpl());
    if (src->storage().unsafeGetStorageImpl() != dst->storage().unsafeGetStorageImpl())
      dst->set_storage_keep_dtype(src->storage());
    dst->set_sizes_and_strides(moved.sizes(), moved.strides(), moved.storage_offset());
    dst->set_quantizer_(src->quantizer());
  } else if (target.is_nested()) {
    // In-place nested ops write the buffer; none of torch's changes a nested tensor's structure.
    TORCH_CHECK(moved.storage().unsafeGetStorageImpl() == target.storage().unsafeGetStorageImpl(),
                "an in-place op replaced a nested musa tensor's buffer, which nested tensors do not support; "
                "use the op's out-of-place form");
  }
}

}  // namespace torch_musa::tensor_kinds
