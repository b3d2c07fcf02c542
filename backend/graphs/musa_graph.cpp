#include "graphs/musa_graph.h"

#include <c10/util/Exception.h>

#include <map>

#include "core/device.h"
#include "core/generator.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "graphs/capture_state.h"
#include "memory/caching_allocator.h"
#include "profiler/device_activity.h"

namespace torch_musa::graphs {
namespace {

std::unique_ptr<CaptureEngine> (*g_cuda_engine)() = nullptr;

// Devices of the pool ids handed out by graph_pool_handle(), so a capture on
// another device is refused instead of silently making a second pool.
std::mutex g_handles_mu;
std::map<c10::MempoolId_t, c10::DeviceIndex>& handle_devices() {
  static auto* m = new std::map<c10::MempoolId_t, c10::DeviceIndex>();
  return *m;
}

std::string pool_text(c10::MempoolId_t id) {
  return "(" + std::to_string(id.first) + ", " + std::to_string(id.second) + ")";
}

// The host driver's engine: the runtime records every task launched on the
// stream (the op layer's recorded kernels, copies, event records) and replays
// them in order.
class HostEngine final : public CaptureEngine {
 public:
  ~HostEngine() override { reset(); }

  unsigned long long begin(c10::Stream stream, musaStreamCaptureMode mode) override {
    MUSA_CHECK(musaStreamBeginCaptureWithMode(native_stream(stream), mode));
    return capture_id(native_stream(stream));
  }
  void end(c10::Stream stream) override {
    musaGraph_t g = nullptr;
    musaError_t e = musaStreamEndCapture(native_stream(stream), &g);
    if (e != musaSuccess) {
      std::string why = musaGetLastErrorMessage();
      (void)musaGetLastError();
      MUSA_FAIL(e, "the MUSA graph capture failed: ", why);
    }
    graph_ = g;
  }
  void instantiate() override {
    TORCH_CHECK(graph_, "instantiate() needs a captured graph");
    if (exec_) MUSA_CHECK(musaGraphExecDestroy(exec_));
    exec_ = nullptr;
    MUSA_CHECK(musaGraphInstantiate(&exec_, graph_));
  }
  void launch(c10::Stream stream, std::optional<uint64_t>) override {
    MUSA_CHECK(musaGraphLaunch(exec_, native_stream(stream)));
  }
  void reset() override {
    if (exec_) (void)musaGraphExecDestroy(exec_);
    if (graph_) (void)musaGraphDestroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }
  void debug_dump(const std::string& path) override {
    TORCH_CHECK(graph_, "debug_dump() needs a captured graph");
    MUSA_CHECK(musaGraphDebugDotPrint(graph_, path.c_str()));
  }

 private:
  musaGraph_t graph_ = nullptr;
  musaGraphExec_t exec_ = nullptr;
};

}  // namespace

std::unique_ptr<CaptureEngine> make_host_engine() { return std::make_unique<HostEngine>(); }
void register_cuda_engine(std::unique_ptr<CaptureEngine> (*factory)()) { g_cuda_engine = factory; }

c10::MempoolId_t graph_pool_handle(c10::DeviceIndex device) {
  if (device < 0) device = current_device();
  check_device_index(device);
  auto id = allocator::new_pool_id();
  std::lock_guard<std::mutex> g(g_handles_mu);
  handle_devices()[id] = device;
  return id;
}

MusaGraph::MusaGraph(bool keep_graph) : keep_graph_(keep_graph) {}

MusaGraph::~MusaGraph() {
  try {
    reset();
  } catch (const std::exception& e) {
    TORCH_WARN("MUSAGraph: releasing the graph failed: ", e.what());
  }
}

void MusaGraph::capture_begin(c10::MempoolId_t pool, musaStreamCaptureMode mode) {
  TORCH_CHECK(!capturing_, "this MUSAGraph is already capturing; call capture_end() first");
  TORCH_CHECK(!captured_, "this MUSAGraph already holds a captured graph; call reset() before capturing again, "
              "or use a new MUSAGraph");
  c10::DeviceIndex device = current_device();
  c10::Stream stream = current_stream(device);
  TORCH_CHECK(stream != default_stream(device),
              "MUSA graphs must be captured on a non-default stream (replaying on the default stream is fine): "
              "use `with torch.musa.graph(g):`, which captures on a side stream, or enter "
              "`with torch.musa.stream(torch.musa.Stream()):` before capture_begin()");
  if (pool != c10::MempoolId_t{0, 0}) {
    c10::DeviceIndex owner = allocator::pool_device(pool);
    if (owner < 0) {
      std::lock_guard<std::mutex> g(g_handles_mu);
      auto it = handle_devices().find(pool);
      if (it != handle_devices().end()) owner = it->second;
    }
    TORCH_CHECK(owner < 0 || owner == device, "the memory pool ", pool_text(pool), " belongs to musa:",
                static_cast<int>(owner), " but this capture runs on musa:", static_cast<int>(device),
                "; share pools only between graphs of one device (graph_pool_handle() on that device)");
  } else {
    pool = allocator::new_pool_id();
  }

  engine_ = is_host_driver() ? make_host_engine() : nullptr;
  if (!engine_) {
    TORCH_CHECK(g_cuda_engine, "this torch_musa build has no MUSA graph engine for the '", musaGetDriverName(),
                "' driver; rebuild torch_musa with a CUDA-enabled torch, or use TORCH_MUSA_DRIVER=host");
    engine_ = g_cuda_engine();
  }
  allocator::create_or_retain_pool(device, pool);
  device_ = device;
  stream_ = stream;
  pool_ = pool;
  capture_id_ = 0;
  // Routed before the capture starts (a free racing the start must not
  // record an event into it); only streams of this capture are routed.
  allocator::begin_allocate_streams_to_pool(device, pool, [this](void* s) {
    unsigned long long id = capture_id_;
    return id != 0 && capture_id(static_cast<musaStream_t>(s)) == id;
  });
  allocator::note_capture_begin(device);
  capturing_ = true;
  try {
    capture_id_ = engine_->begin(stream, mode);
  } catch (...) {
    abandon_capture();
    throw;
  }
  register_capture(capture_id_, this);
}

void MusaGraph::abandon_capture() {
  if (capture_id_) unregister_capture(capture_id_);
  allocator::end_allocate_to_pool(device_, pool_);
  allocator::note_capture_end(device_);
  allocator::release_pool(device_, pool_);  // the routing's use
  allocator::release_pool(device_, pool_);  // the graph's own
  if (engine_) engine_->reset();
  capturing_ = false;
  capture_id_ = 0;
  std::lock_guard<std::mutex> g(gen_mu_);
  generators_.clear();
}

void MusaGraph::capture_end() {
  capture_end_pre();
  if (!keep_graph_) instantiate();
  capture_end_post();
}

void MusaGraph::capture_end_post() {
  TORCH_CHECK(finalizing_, "capture_end_post() finishes a capture_end_pre(); call capture_end_pre() first");
  TORCH_CHECK(keep_graph_ || instantiated_, "capture_end_post(): a MUSAGraph made with keep_graph=False must be "
              "instantiated before its capture is finalized; call instantiate() after capture_end_pre(), or use "
              "capture_end()");
  finalizing_ = false;
}

void MusaGraph::capture_end_pre() {
  TORCH_CHECK(capturing_, "capture_end() was called without capture_begin()");
  c10::Stream now = current_stream(device_);
  TORCH_CHECK(now == *stream_, "the capture must end on the stream it began on (", stream_->id(),
              "); the current stream is ", now.id(), ": switch back to it, then call capture_end()");
  try {
    engine_->end(*stream_);
  } catch (const c10::Error& e) {
    abandon_capture();
    TORCH_CHECK(false, e.what_without_backtrace(), " -- the capture was abandoned; the graph is empty and the next "
                "capture can begin");
  }
  unregister_capture(capture_id_);
  allocator::end_allocate_to_pool(device_, pool_);
  // Routing took a use of the pool (begin_allocate_streams_to_pool); the graph keeps its own.
  allocator::release_pool(device_, pool_);
  allocator::note_capture_end(device_);
  capturing_ = false;
  captured_ = true;
  finalizing_ = true;
}

void MusaGraph::instantiate() {
  TORCH_CHECK(captured_, "instantiate() needs a finished capture (capture_end())");
  DeviceScope scope(device_);
  engine_->instantiate();
  instantiated_ = true;
}

std::optional<uint64_t> MusaGraph::replay_seed() {
  std::lock_guard<std::mutex> g(gen_mu_);
  if (generators_.empty()) return std::nullopt;
  uint64_t seed = 0;
  for (size_t i = 0; i < generators_.size(); ++i) {
    uint64_t s = claim_kernel_seed(generators_[i]);
    seed = i == 0 ? s : philox_mix(seed ^ s, i);
  }
  return seed;
}

void MusaGraph::replay() {
  TORCH_CHECK(captured_, capturing_ ? "replay() was called before capture_end(): end the capture first"
                                    : "replay() needs a successful capture; this MUSAGraph has none (never "
                                      "captured, failed, or reset())");
  DeviceScope scope(device_);
  if (!instantiated_) instantiate();
  profiler::DeviceRange timed(device_, "MUSAGraph replay", profiler::ActivityKind::GraphReplay);
  engine_->launch(current_stream(device_), replay_seed());
}

void MusaGraph::reset() {
  if (capturing_) {
    // Ends the unfinished capture so the stream can run (and capture) again.
    try {
      engine_->end(*stream_);
    } catch (const std::exception&) {
    }
    abandon_capture();
  }
  if (captured_) {
    allocator::release_pool(device_, pool_);
    captured_ = false;
  }
  if (engine_) engine_->reset();
  engine_.reset();
  instantiated_ = false;
  finalizing_ = false;
  std::lock_guard<std::mutex> g(gen_mu_);
  generators_.clear();
}

c10::MempoolId_t MusaGraph::pool() const {
  TORCH_CHECK(captured_, "pool() needs a successful capture: capture_end() first");
  return pool_;
}

void MusaGraph::enable_debug_mode() { debug_ = true; }

void MusaGraph::debug_dump(const std::string& path) {
  if (!debug_ && !keep_graph_) {
    TORCH_WARN("MUSAGraph.debug_dump: debug mode is off; call enable_debug_mode() before capture_begin()");
    return;
  }
  TORCH_CHECK(captured_, "debug_dump() needs a successful capture");
  engine_->debug_dump(path);
}

void MusaGraph::register_generator_state(const at::Generator& gen) {
  TORCH_CHECK(gen.defined() && gen.device().type() == c10::DeviceType::PrivateUse1,
              "register_generator_state expects a musa generator (torch.Generator(device='musa'))");
  note_generator(gen);
}

void MusaGraph::note_generator(const at::Generator& gen) {
  std::lock_guard<std::mutex> g(gen_mu_);
  for (auto& known : generators_)
    if (known.unsafeGetGeneratorImpl() == gen.unsafeGetGeneratorImpl()) return;
  generators_.push_back(gen);
}

}  // namespace torch_musa::graphs
