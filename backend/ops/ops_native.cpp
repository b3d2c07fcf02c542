// The few aten ops musa implements itself: factories (they allocate musa
// memory), metadata-only views, and copies. Everything else
// runs through the delegating fallback (delegate.cpp).
#include <ATen/EmptyTensor.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/copy_native.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "memory/caching_allocator.h"
#include "memory/pinned_allocator.h"
#include "ops/delegate.h"
#include "ops/host_direct.h"
#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "core/sync_debug.h"
#include "ops/kernel_device.h"
#include "graphs/capture_state.h"
#include "graphs/host_op_recorder.h"
#include "version_gates.h"

namespace torch_musa {
namespace {

constexpr auto kMusa = c10::DeviceType::PrivateUse1;

c10::DeviceIndex target_device(std::optional<c10::Device> device) {
  if (device && device->has_index()) return device->index();
  return current_device();
}

void check_factory(std::optional<c10::Layout> layout, std::optional<bool> pin_memory) {
  TORCH_CHECK(!layout || *layout == c10::kStrided, "musa supports only strided tensors in factories; got layout ",
              *layout);
  TORCH_CHECK(!pin_memory || !*pin_memory, "only cpu tensors can be pinned; pin_memory=True is invalid for musa");
}

// torch.use_deterministic_algorithms(True) with torch.utils.deterministic.fill_uninitialized_memory
// (its default): new memory reads NaN, or the integer type's maximum, as CUDA's and the CPU's
// factories make it.
at::Tensor filled_if_deterministic(at::Tensor t) {
  if (C10_UNLIKELY(at::globalContext().deterministicAlgorithms() &&
                   at::globalContext().deterministicFillUninitializedMemory()))
    at::native::fill_empty_deterministic_(t);
  return t;
}

at::Tensor musa_empty(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype, std::optional<c10::Layout> layout,
                      std::optional<c10::Device> device, std::optional<bool> pin_memory,
                      std::optional<c10::MemoryFormat> memory_format) {
  check_factory(layout, pin_memory);
  auto index = target_device(device);
  check_device_index(index);
  DeviceScope scope(index);
  return filled_if_deterministic(at::detail::empty_generic(
      size, allocator::get(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::dtype_or_default(dtype),
      memory_format));
}

at::Tensor musa_empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                              std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                              std::optional<bool> pin_memory) {
  check_factory(layout, pin_memory);
  auto index = target_device(device);
  check_device_index(index);
  DeviceScope scope(index);
  return filled_if_deterministic(at::detail::empty_strided_generic(
      size, stride, allocator::get(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
      c10::dtype_or_default(dtype)));
}

// The allocator of musa's zero tensors: no memory. Storages keep their allocator, so one
// per device lives as long as the process.
struct NoMemory final : c10::Allocator {
  c10::Device device;
  explicit NoMemory(c10::Device d) : device(d) {}
  c10::DataPtr allocate(size_t) override { return {nullptr, nullptr, &c10::detail::deleteNothing, device}; }
  c10::DeleterFnPtr raw_deleter() const override { return &c10::detail::deleteNothing; }
  void copy_data(void*, const void*, std::size_t) const override {}
};

// torch's "efficient zero tensor" (autograd's zeros that are never written): no memory, and
// the ZeroTensor key makes ops that read it see zeros, as for cpu/cuda.
at::Tensor musa_efficientzerotensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                    std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                                    std::optional<bool> pin_memory) {
  check_factory(layout, pin_memory);
  auto index = target_device(device);
  check_device_index(index);
  static std::vector<NoMemory>* allocators = [] {
    auto* v = new std::vector<NoMemory>();
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) v->emplace_back(c10::Device(kMusa, i));
    return v;
  }();
  auto keys = c10::DispatchKeySet(c10::DispatchKey::PrivateUse1) | c10::DispatchKeySet(c10::DispatchKey::ZeroTensor);
  return at::detail::empty_generic(size, &(*allocators)[index], keys, c10::dtype_or_default(dtype), std::nullopt);
}

// Copies between musa and cpu, or within musa, as a kernel-device copy over
// aliases: dtype conversion, strides and broadcasting come from ATen.
at::Tensor musa_copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  bool src_musa = self.device().type() == kMusa;
  bool dst_musa = dst.device().type() == kMusa;
  TORCH_CHECK(src_musa || self.device().is_cpu(), "copy from ", self.device(), " to ", dst.device(),
              " is not supported; copy through the cpu");
  TORCH_CHECK(dst_musa || dst.device().is_cpu(), "copy from ", self.device(), " to ", dst.device(),
              " is not supported; copy through the cpu");
  // What ATen's TensorIterator checks before a copy, which separate aliases of the two would hide:
  // a source that broadcasts to the destination (an empty one too), and no partial overlap.
  if (dst.numel() == 0) {
    (void)at::infer_size_dimvector(dst.sizes(), self.sizes());
    return dst;
  }
  if (src_musa && dst_musa) at::assert_no_partial_overlap(dst, self);
  // The musa device the copy runs on (the destination's, unless it goes to the cpu).
  const auto index = dst_musa ? dst.device().index() : self.device().index();
  if (graphs::any_capture_underway() && graphs::host_recording(index)) {
    graphs::record_copy(dst, self, non_blocking, index);
    return dst;
  }
  // (the host driver's direct path copies between musa tensors without aliases)
  if (src_musa && dst_musa && op_layer::host_direct_copy(dst, self)) return dst;
  auto& kd = kernel_device();
  // A blocking copy between the cpu and musa waits for the device, either way, as CUDA's does.
  // (A CUDA kernel device's copy reports it through CUDA's own check, which
  // torch.musa.set_sync_debug_mode sets too.)
  if (src_musa != dst_musa && !non_blocking && kd.dispatch_key() == c10::DispatchKey::CPU)
    note_synchronizing(src_musa ? "a copy to the cpu" : "a copy from the cpu");
  // A pinned block in an asynchronous copy is not reused until the copy is done.
  if (non_blocking && src_musa != dst_musa) note_pinned_use(src_musa ? dst : self, current_stream(index));
  at::Tensor s = src_musa ? alias_on_kernel_device(self) : self;
  at::Tensor d = dst_musa ? alias_on_kernel_device(dst) : dst;
  KernelScope scope(kd, index);
  KernelDeviceCallGuard below_musa;
  const char* name = !src_musa ? "Memcpy HtoD" : !dst_musa ? "Memcpy DtoH" : "Memcpy DtoD";
  kd.launch(index, [&] { d.copy_(s, non_blocking); }, name, profiler::ActivityKind::Memcpy);
  // The host runs the copy inline; it returns once the stream is past it, as CUDA's stream sync does
  // (a stream held by torch.musa._sleep is waited for).
  if (src_musa != dst_musa && !non_blocking && kd.dispatch_key() == c10::DispatchKey::CPU)
    MUSA_CHECK(musaStreamSynchronize(native_stream(current_stream(index))));
  return dst;
}

// Tensor.copy_ with a musa tensor on either side. ATen's composite copy_ knows no
// musa and re-dispatches to _copy_from; this goes there directly, saving a
// dispatcher trip (and a profiler event) on every copy. What the composite
// handles besides (names, zero tensors) still goes through it. (A meta tensor
// on either side never gets here: Meta outranks PrivateUse1 in dispatch.)
at::Tensor& musa_copy_(at::Tensor& self, const at::Tensor& src, bool non_blocking) {
  TORCH_CHECK(self.defined(), "copy_: self is undefined");
  TORCH_CHECK(src.defined(), "copy_: src is undefined");
  if (TORCH_MUSA_TENSOR_HAS_NAMES(self) || TORCH_MUSA_TENSOR_HAS_NAMES(src) || self._is_zerotensor() ||
      src._is_zerotensor())
    return at::native::copy_(self, src, non_blocking);
  if (!self.is_same(src)) musa_copy_from(src, self, non_blocking);
  return self;
}

at::Tensor musa_copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return musa_copy_from(self, dst, false);
}

// Tensor.record_stream: the block is not reused before `stream`'s queued work is done.
void musa_record_stream(at::Tensor& self, c10::Stream stream) {
  TORCH_CHECK(stream.device_type() == kMusa, "record_stream expects a musa stream, got a stream of ",
              stream.device());
  allocator::record_stream(self.storage().data_ptr(), stream);
}

// `param.data = t` between musa and another dense device (FSDP moves parameters
// so), as CUDA allows with the CPU: c10's rule lists the built-in dense
// backends only and leaves PrivateUse1 to this operator.
bool musa_has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    auto ks = t.key_set();
    return t.layout() == c10::kStrided && ks.has(c10::DispatchKey::Dense) &&
           (ks.has_backend(c10::BackendComponent::PrivateUse1Bit) || ks.has_backend(c10::BackendComponent::CPUBit) ||
            ks.has_backend(c10::BackendComponent::CUDABit));
  };
  if (self.key_set() == from.key_set()) return true;
  return dense(self) && dense(from);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", TORCH_FN(musa_has_compatible_shallow_copy_type));
  m.impl("record_stream", TORCH_FN(musa_record_stream));
  m.impl("empty.memory_format", TORCH_FN(musa_empty));
  m.impl("empty_strided", TORCH_FN(musa_empty_strided));
  m.impl("_efficientzerotensor", TORCH_FN(musa_efficientzerotensor));
  m.impl("as_strided", TORCH_FN(at::native::as_strided_tensorimpl));
  m.impl("view", TORCH_FN(at::native::view));
  m.impl("_reshape_alias", TORCH_FN(at::native::_reshape_alias));
  m.impl("copy_", TORCH_FN(musa_copy_));
  m.impl("_copy_from", TORCH_FN(musa_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(musa_copy_from_and_resize));
}

// Conjugate/negative views reach the musa copy as they are (the alias keeps
// the bits and the kernel device's copy resolves them); materializing them in
// the math-bit fallback would clone -> copy -> _copy_from -> ... forever.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace
}  // namespace torch_musa
