// Copies of quantized tensors between musa and the cpu (or within musa):
// torch sends every copy that touches a PrivateUse1 tensor to _copy_from, and
// a quantized copy is the copy of its integer representation. The quantizer
// was already set on the destination by copy_; per-channel parameters follow
// the destination's device.
#include <ATen/core/Tensor.h>
#include <ATen/quantized/QTensorImpl.h>
#include <ATen/quantized/Quantizer.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

namespace torch_musa {
namespace {

// Bits per element of a sub-byte quantized dtype (several elements packed in a byte), else 0.
int sub_byte_bits(c10::ScalarType t) {
  return t == c10::ScalarType::QUInt4x2 ? 4 : t == c10::ScalarType::QUInt2x4 ? 2 : 0;
}

// A plain tensor of the integer dtype over the quantized tensor's memory. A sub-byte dtype's
// elements are packed: its view is the packed bytes (the CPU's int_repr of such a tensor), which
// its storage holds, not one byte per element (twice or four times the storage).
at::Tensor int_view(const at::Tensor& q) {
  auto key = q.device().is_cpu() ? c10::DispatchKey::CPU : c10::DispatchKey::PrivateUse1;
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(q.storage()), c10::DispatchKeySet(key),
                                                   c10::scalarTypeToTypeMeta(c10::toUnderlying(q.scalar_type())));
  if (const int bits = sub_byte_bits(q.scalar_type())) {
    // (the CPU's kernels address a sub-byte tensor's storage offset in bytes and read it packed)
    const int64_t nbytes = (q.numel() * bits + 7) / 8, one = 1;
    impl->set_sizes_and_strides(c10::IntArrayRef(&nbytes, 1), c10::IntArrayRef(&one, 1), q.storage_offset());
  } else {
    impl->set_sizes_and_strides(q.sizes(), q.strides(), q.storage_offset());
  }
  return at::Tensor(std::move(impl));
}

// Per-channel scales and zero points live on the tensor's own device.
void quantizer_to_device(const at::Tensor& q) {
  auto* impl = static_cast<at::QTensorImpl*>(q.unsafeGetTensorImpl());
  auto quantizer = impl->quantizer();
  auto qs = quantizer->qscheme();
  if (qs != c10::kPerChannelAffine && qs != c10::kPerChannelAffineFloatQParams) return;
  auto* pc = static_cast<at::PerChannelAffineQuantizer*>(quantizer.get());
  if (pc->scales().device() == q.device()) return;
  impl->set_quantizer_(at::make_per_channel_affine_quantizer(pc->scales().to(q.device()), pc->zero_points().to(q.device()),
                                                             pc->axis(), quantizer->scalar_type()));
}

at::Tensor quantized_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  TORCH_CHECK(self.is_quantized() && dst.is_quantized(),
              "copying between a quantized and a non-quantized tensor is not allowed: quantize with "
              "torch.quantize_per_tensor or dequantize with .dequantize() first");
  TORCH_CHECK(self.scalar_type() == dst.scalar_type(), "quantized copy from ", self.scalar_type(), " to ",
              dst.scalar_type(), ": quantized copies keep the dtype; dequantize and quantize again to change it");
  int_view(dst).copy_(int_view(self), non_blocking);
  quantizer_to_device(dst);
  return dst;
}

at::Tensor quantized_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return quantized_copy_from(self, dst, false);
}

TORCH_LIBRARY_IMPL(aten, QuantizedPrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(quantized_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(quantized_copy_from_and_resize));
}

}  // namespace
}  // namespace torch_musa
