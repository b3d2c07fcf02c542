// torch.musa.MUSAGraph: capture the work queued on a musa stream once,
// replay it with one launch. The graph owns a private memory pool for what
// the capture allocates, keeps the generators its random ops drew from (their
// state advances at every replay), and delegates the capture itself to the
// driver's engine: the runtime's graphs on the host driver, ATen's CUDA
// graphs over the musa stream on the cuda driver.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>
#include <musa/runtime.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace torch_musa::graphs {

// One driver's way to capture and launch a graph.
class CaptureEngine {
 public:
  virtual ~CaptureEngine() = default;
  // Begins capturing `stream` (the current musa stream); returns the capture id.
  virtual unsigned long long begin(c10::Stream stream, musaStreamCaptureMode mode) = 0;
  // Ends the capture. Throws, with the capture abandoned, when it is invalid.
  virtual void end(c10::Stream stream) = 0;
  virtual void instantiate() = 0;
  // Launches the graph on the current musa stream; `seed` feeds its random ops.
  virtual void launch(c10::Stream stream, std::optional<uint64_t> seed) = 0;
  virtual void reset() = 0;
  virtual void debug_dump(const std::string& path) = 0;
};

std::unique_ptr<CaptureEngine> make_host_engine();
// Installed by the cuda engine's translation unit when it is built.
void register_cuda_engine(std::unique_ptr<CaptureEngine> (*factory)());

class MusaGraph {
 public:
  explicit MusaGraph(bool keep_graph = false);
  ~MusaGraph();
  MusaGraph(const MusaGraph&) = delete;
  MusaGraph& operator=(const MusaGraph&) = delete;

  void capture_begin(c10::MempoolId_t pool = {0, 0}, musaStreamCaptureMode mode = musaStreamCaptureModeGlobal);
  void capture_end();  // capture_end_pre(), instantiate() unless keep_graph, capture_end_post()
  // The two halves of capture_end(), so the ended capture can be looked at (capture-end hooks)
  // before it is finalized; with keep_graph=False, instantiate() must come between them.
  void capture_end_pre();
  void capture_end_post();
  void instantiate();
  bool has_capture() const { return captured_; }
  bool has_graph_exec() const { return instantiated_; }
  void replay();
  void reset();
  c10::MempoolId_t pool() const;
  void enable_debug_mode();
  void debug_dump(const std::string& path);
  // Random ops of the capture that use `gen` draw fresh numbers per replay.
  void register_generator_state(const at::Generator& gen);
  // Called by the op layer when a random op runs during this graph's capture.
  void note_generator(const at::Generator& gen);

 private:
  void abandon_capture();  // undoes capture_begin's effects after a failure
  std::optional<uint64_t> replay_seed();

  bool keep_graph_;
  bool debug_ = false;
  bool capturing_ = false;
  bool captured_ = false;  // capture_end_pre succeeded
  bool finalizing_ = false;  // between capture_end_pre and capture_end_post
  bool instantiated_ = false;
  c10::DeviceIndex device_ = -1;
  std::optional<c10::Stream> stream_;
  c10::MempoolId_t pool_{0, 0};
  // Read by the allocator's stream filter on any thread (autograd's backward allocates on its own).
  std::atomic<unsigned long long> capture_id_{0};
  std::mutex gen_mu_;
  std::vector<at::Generator> generators_;
  std::unique_ptr<CaptureEngine> engine_;
};

// A fresh pool id for graphs to share (torch.musa.graph_pool_handle()); the
// pool itself is made by the first capture that uses it, on `device`.
c10::MempoolId_t graph_pool_handle(c10::DeviceIndex device);

}  // namespace torch_musa::graphs
