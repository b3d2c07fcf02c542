// The cuda driver's graph engine: ATen's CUDA graphs (at::cuda::CUDAGraph)
// over the musa stream's CUDA stream. The delegated kernels already run on
// that stream, so CUDA's stream capture records them as they are; ATen's
// graph brings the graph-safe Philox state of its default generator, which
// the musa generators seed at every replay.
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "core/musa_check.h"
#include "core/stream.h"
#include "graphs/musa_graph.h"
#include "ops/kernel_device.h"
#include "version_gates.h"

namespace torch_musa::graphs {
namespace {

c10::cuda::CUDAStream cuda_stream_of(c10::Stream musa_stream) {
  void* native = nullptr;
  MUSA_CHECK(musaStreamGetNativeHandle(native_stream(musa_stream), &native));
  return c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(native), kernel_device().device_for(musa_stream.device_index()).index());
}

cudaStreamCaptureMode cuda_mode(musaStreamCaptureMode mode) {
  switch (mode) {
    case musaStreamCaptureModeThreadLocal: return cudaStreamCaptureModeThreadLocal;
    case musaStreamCaptureModeRelaxed: return cudaStreamCaptureModeRelaxed;
    default: return cudaStreamCaptureModeGlobal;
  }
}

// ATen's CUDAGraph marks CUDA's default generator as capturing when the
// capture begins and unmarks it only when cudaStreamEndCapture succeeds. A
// capture that fails (an invalidated capture, an error inside it, a graph
// dropped mid-capture) left the mark, and from then on every random op
// outside capture failed ("Offset increment outside graph capture
// encountered unexpectedly"), natively too. After such a capture the
// default generator gets a fresh state at the same seed and offset.
void release_generator_from_capture(c10::DeviceIndex cuda_index) {
  at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(cuda_index);
  std::lock_guard<std::mutex> lock(gen.mutex());
  at::Generator fresh = at::make_generator<at::CUDAGeneratorImpl>(cuda_index);
  fresh.set_current_seed(gen.current_seed());
  fresh.set_offset(gen.get_offset());
  gen.graphsafe_set_state(fresh);
}

class CudaEngine final : public CaptureEngine {
 public:
  ~CudaEngine() override {
    try {
      abandoned();
    } catch (...) {
    }
  }
  unsigned long long begin(c10::Stream stream, musaStreamCaptureMode mode) override {
    auto cs = cuda_stream_of(stream);
    c10::cuda::CUDAStreamGuard on_stream(cs);
    // Kept (not only instantiated) so debug_dump can print it.
    graph_ = std::make_unique<at::cuda::CUDAGraph>(/*keep_graph=*/true);
#if TORCH_MUSA_CUDA_GRAPH_REGISTERS_GENERATORS
    graph_->register_generator_state(at::cuda::detail::getDefaultCUDAGenerator(cs.device_index()));
#endif
    open_device_ = cs.device_index();
    try {
      graph_->capture_begin({0, 0}, cuda_mode(mode));
    } catch (...) {
      abandoned();
      throw;
    }
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    C10_CUDA_CHECK(cudaStreamGetCaptureInfo(cs.stream(), &status, &id));
    return id;
  }
  void end(c10::Stream stream) override {
    c10::cuda::CUDAStreamGuard on_stream(cuda_stream_of(stream));
    try {
      graph_->capture_end();
    } catch (const c10::Error& e) {
      graph_.reset();
      abandoned();
      TORCH_CHECK(false, "the MUSA graph capture failed: ", e.what_without_backtrace());
    }
    open_device_ = -1;
  }
  void instantiate() override { graph_->instantiate(); }
  void launch(c10::Stream stream, std::optional<uint64_t> seed) override {
    c10::cuda::CUDAStreamGuard on_stream(cuda_stream_of(stream));
    if (!seed) {
      graph_->replay();
      return;
    }
    // The graph's random kernels read the default generator's seed and
    // offset when the replay is queued; torch.cuda's own state is restored.
    at::Generator gen = at::cuda::detail::getDefaultCUDAGenerator(on_stream.current_stream().device_index());
    std::lock_guard<std::mutex> lock(gen.mutex());
    auto saved = gen.get_state();
    gen.set_current_seed(*seed);
    try {
      graph_->replay();
    } catch (...) {
      gen.set_state(saved);
      throw;
    }
    gen.set_state(saved);
  }
  void reset() override {
    graph_.reset();
    abandoned();
  }
  void debug_dump(const std::string& path) override {
    C10_CUDA_CHECK(cudaGraphDebugDotPrint(graph_->raw_cuda_graph(), path.c_str(), cudaGraphDebugDotFlagsVerbose));
  }

 private:
  // A capture that began and did not end: its generator mark is released.
  void abandoned() {
    if (open_device_ < 0) return;
    c10::DeviceIndex device = open_device_;
    open_device_ = -1;
    release_generator_from_capture(device);
  }

  std::unique_ptr<at::cuda::CUDAGraph> graph_;
  c10::DeviceIndex open_device_ = -1;  // the CUDA device of a capture underway
};

struct Registrar {
  Registrar() {
    register_cuda_engine([]() -> std::unique_ptr<CaptureEngine> { return std::make_unique<CudaEngine>(); });
  }
} g_registrar;

}  // namespace
}  // namespace torch_musa::graphs
