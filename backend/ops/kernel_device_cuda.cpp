// The cuda driver's kernel device: musa memory is CUDA device memory, so
// ATen's CUDA kernels (cuBLAS, cuDNN, SDPA included) run on it directly,
// through CUDA storages that alias it, on the current musa stream.
#include <ATen/Context.h>

#include <c10/util/CallOnce.h>
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/core/StorageImpl.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <mutex>

#include "memory/cuda_allocator_router.h"
#include "core/device.h"
#include "core/generator.h"
#include "ops/kernel_device.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "graphs/capture_state.h"

namespace torch_musa {
namespace {

c10::DeviceIndex cuda_ordinal(c10::DeviceIndex musa_index) {
  static c10::once_flag once;  // asked several times per op (see core/stream.cpp's pools)
  static std::vector<c10::DeviceIndex> map;
  c10::call_once(once, [] {
    for (c10::DeviceIndex i = 0; i < device_count(); ++i) {
      int ord = 0;
      MUSA_CHECK(musaDeviceGetDriverOrdinal(i, &ord));
      map.push_back(static_cast<c10::DeviceIndex>(ord));
    }
  });
  check_device_index(musa_index);
  return map[musa_index];
}

class CudaKernelDevice final : public KernelDevice {
 public:
  CudaKernelDevice() { cuda_router::install(); }

  c10::DeviceType type() const override { return c10::DeviceType::CUDA; }
  c10::DispatchKey dispatch_key() const override { return c10::DispatchKey::CUDA; }
  c10::Device device_for(c10::DeviceIndex index) const override {
    return c10::Device(c10::DeviceType::CUDA, cuda_ordinal(index));
  }

  c10::Storage alias_storage(const c10::Storage& musa) override {
    return non_owning_alias(musa, device_for(musa.device().index()), cuda_router::alias_allocator());
  }

  bool adopt(c10::DataPtr& ptr, c10::DeviceIndex) override { return cuda_router::adopt(ptr); }

  at::Generator kernel_generator(const at::Generator& musa_gen) override {
    // While capturing, random kernels read their seed and offset from the
    // graph-safe state of CUDA's default generator, which MUSAGraph reseeds
    // from the musa generators at every replay.
    if (graphs::note_generator_if_capturing(musa_gen.device().index(), musa_gen))
      return at::cuda::detail::getDefaultCUDAGenerator(cuda_ordinal(musa_gen.device().index()));
    auto cuda_gen = at::make_generator<at::CUDAGeneratorImpl>(cuda_ordinal(musa_gen.device().index()));
    cuda_gen.set_current_seed(claim_kernel_seed(musa_gen));
    return cuda_gen;
  }

  // Current musa device (and so CUDA device), the musa stream as CUDA's
  // current stream, and CUDA allocations routed to musa memory. This runs
  // for every op: no CUDA API calls, and the CUDA stream object for a musa
  // stream is made once per thread.
  void begin(c10::DeviceIndex index, ScopeState& st) override {
    st.prev_device = current_device();
    if (st.prev_device != index) set_device(index);
    auto cuda_stream = cuda_stream_for(index);
    auto prev = c10::cuda::getCurrentCUDAStream(cuda_stream.device_index());
    if (prev != cuda_stream) {
      st.prev_stream = prev.unwrap();
      c10::cuda::setCurrentCUDAStream(cuda_stream);
    }
    st.prev_delegating = cuda_router::set_delegating(index);
  }

  void end(const ScopeState& st) override {
    c10::DeviceIndex index = cuda_router::set_delegating(st.prev_delegating);
    if (st.prev_stream) c10::cuda::setCurrentCUDAStream(c10::cuda::CUDAStream(c10::cuda::CUDAStream::UNCHECKED, *st.prev_stream));
    if (st.prev_device != index) (void)musaSetDevice(st.prev_device);
  }

  static c10::cuda::CUDAStream cuda_stream_for(c10::DeviceIndex index) {
    auto musa_stream = current_stream(index);
    thread_local std::vector<std::pair<c10::Stream, c10::cuda::CUDAStream>> cache;
    for (auto& e : cache)
      if (e.first == musa_stream) return e.second;
    void* native = nullptr;
    MUSA_CHECK(musaStreamGetNativeHandle(native_stream(musa_stream), &native));
    auto cuda_stream = c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(native), cuda_ordinal(index));
    cache.emplace_back(musa_stream, cuda_stream);
    return cuda_stream;
  }

  void run(c10::DeviceIndex, c10::function_ref<void()> fn, const char*) override {
    fn();  // CUDA kernels enqueue themselves on the current (musa) stream
  }
};

struct Registrar {
  Registrar() {
    register_cuda_kernel_device([]() -> KernelDevice* { return new CudaKernelDevice(); });
  }
} g_registrar;

}  // namespace
}  // namespace torch_musa
