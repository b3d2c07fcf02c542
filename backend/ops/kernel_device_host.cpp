// Host driver's kernel device: musa memory is host memory, so ATen's CPU
// kernels work on it directly through CPU storages that alias it.
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/StorageImpl.h>

#include <cstring>

#include "memory/caching_allocator.h"
#include "core/device.h"
#include "core/generator.h"
#include "ops/kernel_device.h"
#include "core/musa_check.h"
#include "ops/routed_blocks.h"
#include "core/stream.h"
#include "graphs/capture_state.h"

namespace torch_musa {
namespace {

// The musa device whose op is running on this thread, or -1.
thread_local c10::DeviceIndex t_delegating = -1;

void noop_delete(void*) {}

// Replaces torch's CPU allocator: while a musa op runs on this thread, CPU
// allocations (the kernel's outputs and scratch) are musa blocks lent as CPU
// DataPtrs (see routed_blocks.h); otherwise they go to the original CPU
// allocator untouched.
class RoutingCpuAllocator final : public c10::Allocator {
 public:
  explicit RoutingCpuAllocator(c10::Allocator* original) : original_(original) {}

  c10::DataPtr allocate(size_t n) override {
    if (t_delegating < 0) return original_->allocate(n);
    c10::DataPtr musa = allocator::get()->allocate(n);
    void* p = musa.get();
    if (!p) return c10::DataPtr(nullptr, nullptr, &route_delete, c10::Device(c10::DeviceType::CPU));
    routed_blocks::lend(std::move(musa));
    return c10::DataPtr(p, p, &route_delete, c10::Device(c10::DeviceType::CPU));
  }
  c10::DeleterFnPtr raw_deleter() const override { return &route_delete; }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }

  // Frees a musa-backed block, or hands a raw pointer of the original allocator back to it.
  static void route_delete(void* p);

  c10::Allocator* original() const { return original_; }

 private:
  c10::Allocator* original_;
};

RoutingCpuAllocator* routing_allocator();

void RoutingCpuAllocator::route_delete(void* p) {
  if (!p || routed_blocks::release(p, /*known_lent=*/false)) return;
  // Not lent by this thread nor in the shared table: a block another thread's
  // running op lent (freed when that op ends), or a raw pointer of the
  // original allocator.
  if (allocator::is_allocated_block(p) && routed_blocks::release(p, /*known_lent=*/true)) return;
  routing_allocator()->original()->raw_deleter()(p);
}

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
    return non_owning_alias(musa, c10::Device(c10::DeviceType::CPU), routing_allocator());
  }

  bool adopt(c10::DataPtr& ptr, c10::DeviceIndex index) override {
    if (ptr.get_deleter() != &RoutingCpuAllocator::route_delete || !ptr.get()) return false;
    c10::DataPtr musa = routed_blocks::take(ptr.get());
    if (!musa.get()) return false;
    (void)ptr.release_context();  // ownership moved to `musa`
    ptr = std::move(musa);
    return true;
  }

  at::Generator kernel_generator(const at::Generator& musa_gen) override { return cpu_generator_from(musa_gen); }

  void begin(c10::DeviceIndex index, ScopeState& st) override {
    st.prev_device = current_device();
    if (st.prev_device != index) set_device(index);
    st.prev_delegating = t_delegating;
    t_delegating = index;
  }

  void end(const ScopeState& st) override {
    c10::DeviceIndex index = t_delegating;
    t_delegating = st.prev_delegating;
    if (st.prev_device != index) (void)musaSetDevice(st.prev_device);
  }

  void run(c10::DeviceIndex index, c10::function_ref<void()> fn, const char* name) override {
    // The host driver runs work inline, in stream order, so the kernel runs
    // right here. During a capture the op layer records ops instead
    // (graphs/host_op_recorder.h); reaching here on a capturing stream means
    // a capture the recorder does not know (a raw musaStreamBeginCapture).
    int any = 1;  // (no stream capturing, the usual case: nothing to look up)
    if (!graphs::ViewOpScope::active() && (musaStreamAnyCapturing(&any) != musaSuccess || any != 0)) {
      musaStream_t s = current_native_stream(index);
      musaStreamCaptureStatus status = musaStreamCaptureStatusNone;
      MUSA_CHECK(musaStreamIsCapturing(s, &status));
      TORCH_CHECK(status == musaStreamCaptureStatusNone, "aten op ", name,
                  " was launched on a musa stream captured outside torch.musa.MUSAGraph; capture tensor "
                  "operations with torch.musa.graph(...) / MUSAGraph.capture_begin()");
    }
    fn();
  }
};

KernelDevice* (*g_cuda_factory)() = nullptr;

}  // namespace

void register_cuda_kernel_device(KernelDevice* (*factory)()) { g_cuda_factory = factory; }

c10::Storage non_owning_alias(const c10::Storage& musa, c10::Device device, c10::Allocator* grow) {
  auto* impl = musa.unsafeGetStorageImpl();
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), impl->nbytes(),
      c10::DataPtr(impl->data_ptr().get(), nullptr, &noop_delete, device), grow, impl->resizable()));
}

bool is_non_owning_alias(const c10::Storage& s) { return s.data_ptr().get_deleter() == &noop_delete; }

namespace {
struct HeldStorage {
  c10::Storage storage;
};
void release_held(void* ctx) { delete static_cast<HeldStorage*>(ctx); }
}  // namespace

c10::Storage owning_alias(const c10::Storage& held, c10::Device device, c10::Allocator* grow) {
  void* data = const_cast<void*>(held.data());
  c10::DataPtr ptr(data, new HeldStorage{held}, &release_held, device);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), held.nbytes(),
                                                            std::move(ptr), grow, grow != nullptr));
}

const c10::Storage* held_by_owning_alias(const c10::Storage& s) {
  if (s.data_ptr().get_deleter() != &release_held) return nullptr;
  return &static_cast<HeldStorage*>(s.data_ptr().get_context())->storage;
}

c10::DataPtr take_lent_block(KernelDevice& kd, c10::StorageImpl& from, c10::DeviceIndex index) {
  c10::DataPtr taken = std::move(from.mutable_data_ptr());
  if (taken.get() != nullptr && kd.adopt(taken, index)) {
    from.set_data_ptr_noswap(c10::DataPtr(taken.get(), kd.device_for(index)));
    return taken;
  }
  from.set_data_ptr_noswap(std::move(taken));
  return c10::DataPtr();
}

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
