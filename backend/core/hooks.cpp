// PrivateUse1 hooks: what ATen asks a backend about (availability,
// generators, pinned memory, pointers, storage resizing).
#include <ATen/Context.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/StorageImpl.h>

#include "memory/caching_allocator.h"
#include "core/device.h"
#include "core/generator.h"
#include "core/musa_check.h"
#include "memory/pinned_allocator.h"

namespace torch_musa {
namespace {

struct MusaHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  void init() const override {}
  const at::Generator& getDefaultGenerator(c10::DeviceIndex device) const override {
    return default_generator(device);
  }
  at::Generator getNewGenerator(c10::DeviceIndex device) const override { return new_generator(device); }
  at::Device getDeviceFromPtr(void* data) const override {
    musaPointerAttributes attr{};
    MUSA_CHECK(musaPointerGetAttributes(&attr, data));
    TORCH_CHECK(attr.type == musaMemoryTypeDevice, "pointer ", data, " is not musa device memory");
    return at::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(attr.device));
  }
  bool isPinnedPtr(const void* data) const override {
    if (!data) return false;
    musaPointerAttributes attr{};
    if (musaPointerGetAttributes(&attr, data) != musaSuccess) {
      (void)musaGetLastError();
      return false;
    }
    if (attr.type == musaMemoryTypeHost) return true;
    // A CUDA build of torch pins host memory with CUDA's host allocator whenever CUDA is present
    // (ATen's empty(pin_memory=True) on torch 2.11) but asks the accelerator, musa, whether it is
    // pinned (DDP's local-used map asserts it): on the cuda driver that memory is as pinned for musa.
    return at::globalContext().hasCUDA() && at::detail::getCUDAHooks().isPinnedPtr(data);
  }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex device) const override { return is_device_initialized(device); }
  c10::DeviceIndex deviceCount() const override { return device_count(); }
  void setCurrentDevice(c10::DeviceIndex device) const override { set_device(device); }
  c10::DeviceIndex getCurrentDevice() const override { return current_device(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    auto old = current_device();
    set_device(device);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  // Grows or shrinks a storage in place of a new allocation + copy.
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override {
    auto* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    auto old_size = impl->nbytes();
    if (newsize == old_size) return;
    DeviceScope scope(impl->device().index());
    c10::DataPtr fresh = impl->allocator()->allocate(newsize);
    size_t n = std::min(old_size, newsize);
    if (n > 0 && impl->data() && fresh.get())
      MUSA_CHECK(musaMemcpy(fresh.get(), impl->data(), n, musaMemcpyDeviceToDevice));
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(newsize);
  }
};

// Registered at load so `import torch_musa` makes the hooks available.
struct Registrar {
  Registrar() { at::RegisterPrivateUse1HooksInterface(new MusaHooks()); }
} g_registrar;

}  // namespace
}  // namespace torch_musa
