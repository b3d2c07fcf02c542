// The edges of a compiled region that runs on the kernel device.
//
// Inductor compiles a musa graph as the kernel device's graph (a CPU graph on
// the host driver, a CUDA graph on the cuda driver), and these ops are where
// the graph crosses over: musa inputs are seen as kernel-device tensors over the
// same memory, kernel-device results become musa tensors without a copy, and
// results meant for musa inputs (optimizer steps, buffers) are written into
// them. None of them copies data except the last, which is the write itself.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "ops/delegate.h"
#include "ops/delegation.h"
#include "ops/kernel_device.h"
#include "compile/kernel_boundary.h"

namespace torch_musa {
namespace {
using op_layer::tensor_over;

constexpr auto kMusaKey = c10::DispatchKey::PrivateUse1;

}  // namespace

at::Tensor to_kernel_device(const at::Tensor& musa) {
  TORCH_CHECK(musa.device().type() == c10::DeviceType::PrivateUse1,
              "torch_musa::to_kernel_device expects a musa tensor, got one on ", musa.device());
  KernelDevice& kd = kernel_device();
  return tensor_over(owning_alias(musa.storage(), kd.device_for(musa.device().index())), musa,
                     kd.dispatch_key());
}

namespace {

// A musa tensor over a kernel-device tensor's memory that holds that memory: a (view of a)
// region input's own musa storage, else an alias owning the kernel-device storage, that
// may grow (resize_, out=) like any other.
at::Tensor musa_tensor_holding(const at::Tensor& t, c10::Device device) {
  if (const c10::Storage* musa = held_by_owning_alias(t.storage());
      musa != nullptr && musa->device().type() == c10::DeviceType::PrivateUse1)
    return tensor_over(*musa, t, kMusaKey);
  return tensor_over(owning_alias(t.storage(), device, c10::GetAllocator(c10::DeviceType::PrivateUse1)), t,
                     kMusaKey);
}

}  // namespace

at::Tensor from_kernel_device(const at::Tensor& t, c10::Device device) {
  TORCH_CHECK(device.type() == c10::DeviceType::PrivateUse1 && device.has_index(),
              "torch_musa::from_kernel_device needs a musa device with an index, got ", device);
  // Fresh memory the region lent from musa (cuda driver): the musa block itself, owned by the
  // result as any musa allocation is (so record_stream and the allocator's stream rules apply).
  // Only a storage nothing else holds; the kernel-device tensor keeps a non-owning view.
  if (held_by_owning_alias(t.storage()) == nullptr && t.storage().use_count() == 1) {
    c10::StorageImpl& impl = *t.storage().unsafeGetStorageImpl();
    if (c10::DataPtr block = take_lent_block(kernel_device(), impl, device.index()); block.get() != nullptr) {
      c10::Storage musa(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), impl.nbytes(),
                                                             std::move(block),
                                                             c10::GetAllocator(c10::DeviceType::PrivateUse1), true));
      return tensor_over(std::move(musa), t, kMusaKey);
    }
  }
  return musa_tensor_holding(t, device);
}

namespace {

// A musa tensor for a musa op inside the region, over a kernel-device value the region may
// read again: it holds that value's storage, block and all (from_kernel_device hands a lent
// block over to its result, which would leave the kernel-device tensor pointing at memory
// freed with the musa one). By index: AOTInductor's proxy executor calls it too.
at::Tensor borrow_from_kernel_device(const at::Tensor& t, int64_t index) {
  return musa_tensor_holding(t, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
}

// AOTInductor's proxy executor replaces every Device argument with the model's
// device (a kernel device there), so compiled packages name the musa device by index.
at::Tensor from_kernel_device_index(const at::Tensor& t, int64_t index) {
  return from_kernel_device(t, c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(index)));
}

}  // namespace

void copy_from_kernel_device_(const at::Tensor& self, const at::Tensor& src) {
  at::Tensor dst = alias_on_kernel_device(self);
  KernelScope scope(kernel_device(), self.device().index());  // on the current musa stream
  KernelDeviceCallGuard guard;
  dst.copy_(src);
}

TORCH_LIBRARY(torch_musa, m) {
  m.def("to_kernel_device(Tensor(a) self) -> Tensor(a)");
  m.def("from_kernel_device(Tensor(a) self, Device device) -> Tensor(a)");
  m.def("from_kernel_device.index(Tensor(a) self, int index) -> Tensor(a)");
  m.def("borrow_from_kernel_device(Tensor(a) self, int index) -> Tensor(a)");
  m.def("copy_from_kernel_device_(Tensor(a!) self, Tensor src) -> ()");
}

TORCH_LIBRARY_IMPL(torch_musa, PrivateUse1, m) {
  m.impl("to_kernel_device", &to_kernel_device);
  m.impl("copy_from_kernel_device_", &copy_from_kernel_device_);
}

TORCH_LIBRARY_IMPL(torch_musa, CPU, m) {
  m.impl("from_kernel_device", &from_kernel_device);
  m.impl("from_kernel_device.index", &from_kernel_device_index);
  m.impl("borrow_from_kernel_device", &borrow_from_kernel_device);
}

// The cuda driver's kernel device: compiled CUDA graphs and AOTInductor's CUDA models hand their
// results back to musa.
TORCH_LIBRARY_IMPL(torch_musa, CUDA, m) {
  m.impl("from_kernel_device", &from_kernel_device);
  m.impl("from_kernel_device.index", &from_kernel_device_index);
  m.impl("borrow_from_kernel_device", &borrow_from_kernel_device);
}

}  // namespace torch_musa
