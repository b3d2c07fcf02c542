// Host driver's kernel device: musa memory is host memory, so ATen's CPU
// kernels work on it directly through CPU storages that alias it.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstring>
#include <mutex>

#include "caching_allocator.h"
#include "device.h"
#include "generator.h"
#include "kernel_device.h"
#include "musa_check.h"
#include "stream.h"

namespace torch_musa {
namespace {

// The musa device whose op is running on this thread, or -1.
thread_local c10::DeviceIndex t_delegating = -1;

void noop_delete(void*) {}

// Holds the musa DataPtr behind a CPU DataPtr handed to a CPU kernel.
void delete_musa_backed(void* ctx) { delete static_cast<c10::DataPtr*>(ctx); }

// Replaces torch's CPU allocator: while a musa op runs on this thread, CPU
// allocations (the kernel's outputs and scratch) come from musa memory;
// otherwise they go to the original CPU allocator untouched.
class RoutingCpuAllocator final : public c10::Allocator {
 public:
  explicit RoutingCpuAllocator(c10::Allocator* original) : original_(original) {}

  c10::DataPtr allocate(size_t n) override {
    if (t_delegating < 0) return original_->allocate(n);
    c10::DataPtr musa = allocator::get()->allocate(n);
    void* p = musa.get();
    auto* holder = new c10::DataPtr(std::move(musa));
    return c10::DataPtr(p, holder, &delete_musa_backed, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override {
    // raw_allocate() is only used outside musa ops; defer to the original.
    return original_->raw_deleter();
  }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }

  c10::Allocator* original() const { return original_; }

 private:
  c10::Allocator* original_;
};

RoutingCpuAllocator* routing_allocator() {
  static RoutingCpuAllocator* a = [] {
    auto* r = new RoutingCpuAllocator(c10::GetCPUAllocator());
    // Priority above the default CPU allocator's so it stays installed.
    c10::SetCPUAllocator(r, /*priority=*/10);
    return r;
  }();
  return a;
}

class HostKernelDevice final : public KernelDevice {
 public:
  HostKernelDevice() { routing_allocator(); }

  c10::DeviceType type() const override { return c10::DeviceType::CPU; }
  c10::DispatchKey dispatch_key() const override { return c10::DispatchKey::CPU; }
  c10::Device device_for(c10::DeviceIndex) const override { return c10::Device(c10::DeviceType::CPU); }

  c10::Storage alias_storage(const c10::Storage& musa) override {
    auto* impl = musa.unsafeGetStorageImpl();
    void* data = impl->data_ptr().get();
    return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
        c10::DataPtr(data, nullptr, &noop_delete, c10::Device(c10::DeviceType::CPU)), routing_allocator(),
        impl->resizable()));
  }

  bool adopt(c10::DataPtr& ptr, c10::DeviceIndex index) override {
    if (ptr.get_deleter() != &delete_musa_backed) return false;
    auto ctx = ptr.move_context();  // we now own the holder
    auto* holder = static_cast<c10::DataPtr*>(ctx.get());
    c10::DataPtr musa = std::move(*holder);
    TORCH_INTERNAL_ASSERT(musa.device().index() == index || index < 0);
    ptr = std::move(musa);
    return true;
  }

  at::Generator kernel_generator(const at::Generator& musa_gen) override {
    at::Generator gen = musa_gen;  // shares the impl; mutex() needs non-const
    auto* g = gen.get<MusaGeneratorImpl>();
    uint64_t seed, offset;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      seed = g->current_seed();
      offset = g->advance();
    }
    return at::make_generator<at::CPUGeneratorImpl>(philox_mix(seed, offset));
  }

  class HostScope final : public Scope {
   public:
    explicit HostScope(c10::DeviceIndex index) : prev_(t_delegating), device_(index) { t_delegating = index; }
    ~HostScope() override { t_delegating = prev_; }

   private:
    c10::DeviceIndex prev_;
    DeviceScope device_;
  };

  std::unique_ptr<Scope> enter(c10::DeviceIndex index) override { return std::make_unique<HostScope>(index); }

  void launch(c10::DeviceIndex index, const std::function<void()>& fn, const char* name) override {
    // The host driver runs tasks inline; going through the runtime keeps
    // every kernel a stream task (and refuses capture it cannot record).
    musaStream_t s = native_stream(current_stream(index));
    musaStreamCaptureStatus status = musaStreamCaptureStatusNone;
    MUSA_CHECK(musaStreamIsCapturing(s, &status));
    TORCH_CHECK(status == musaStreamCaptureStatusNone, "aten op ", name,
                " was launched on a capturing musa stream; graph capture of aten ops is not supported "
                "by the host driver — run it outside torch.musa.graph capture");
    fn();
  }
};

KernelDevice* (*g_cuda_factory)() = nullptr;

}  // namespace

void register_cuda_kernel_device(KernelDevice* (*factory)()) { g_cuda_factory = factory; }

KernelDevice& kernel_device() {
  static KernelDevice* kd = []() -> KernelDevice* {
    if (!is_host_driver()) {
      TORCH_CHECK(g_cuda_factory, "the musa runtime uses the '", musaGetDriverName(),
                  "' driver but this torch_musa build has no kernel device for it; "
                  "rebuild torch_musa with a CUDA-enabled torch, or set TORCH_MUSA_DRIVER=host");
      return g_cuda_factory();
    }
    return new HostKernelDevice();
  }();
  return *kd;
}

}  // namespace torch_musa
