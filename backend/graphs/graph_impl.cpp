// torch.accelerator.Graph for musa: ATen's backend-neutral graph interface
// (torch 2.12 and later), implemented by MusaGraph.
#include "version_gates.h"

#if TORCH_MUSA_HAS_GRAPH_IMPL_INTERFACE
#include <ATen/core/GraphImplInterface.h>

#include "graphs/musa_graph.h"

namespace torch_musa::graphs {
namespace {

musaStreamCaptureMode musa_mode(at::GraphCaptureMode mode) {
  switch (mode) {
    case at::GraphCaptureMode::ThreadLocal: return musaStreamCaptureModeThreadLocal;
    case at::GraphCaptureMode::Relaxed: return musaStreamCaptureModeRelaxed;
    default: return musaStreamCaptureModeGlobal;  // Default and Global: torch.cuda.graph's default
  }
}

struct MusaGraphImpl final : at::GraphImplInterface {
  explicit MusaGraphImpl(const at::GraphImplArgs& args) : graph(args.keep_graph) {}
  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode mode) override {
    graph.capture_begin(pool, musa_mode(mode));
  }
  void capture_end() override { graph.capture_end(); }
  void instantiate() override { graph.instantiate(); }
  void replay() override { graph.replay(); }
  void reset() override { graph.reset(); }
  c10::MempoolId_t pool() const override { return graph.pool(); }
  void enable_debug_mode() override { graph.enable_debug_mode(); }
  void debug_dump(const std::string& path) override { graph.debug_dump(path); }
  MusaGraph graph;
};

}  // namespace
}  // namespace torch_musa::graphs

// The registry key is the backend's device type name as ATen spells it
// (upper case) once PrivateUse1 is renamed to musa.
namespace at {
REGISTER_GRAPH_IMPL(MUSA, torch_musa::graphs::MusaGraphImpl);
}
#endif
