#include "graphs/capture_state.h"

#include <mutex>
#include <unordered_map>

#include "core/musa_check.h"
#include "core/stream.h"
#include "graphs/musa_graph.h"

namespace torch_musa::graphs {
namespace {

std::mutex g_mu;
std::unordered_map<unsigned long long, MusaGraph*>& graphs_by_capture() {
  static auto* m = new std::unordered_map<unsigned long long, MusaGraph*>();
  return *m;
}
thread_local bool t_view_op = false;

}  // namespace

unsigned long long capture_id(musaStream_t stream) {
  musaStreamCaptureStatus status = musaStreamCaptureStatusNone;
  unsigned long long id = 0;
  MUSA_CHECK(musaStreamGetCaptureInfo(stream, &status, &id));
  return status == musaStreamCaptureStatusNone ? 0 : id;
}

bool current_stream_capturing(c10::DeviceIndex device) {
  return capture_id(native_stream(current_stream(device))) != 0;
}

void register_capture(unsigned long long id, MusaGraph* graph) {
  std::lock_guard<std::mutex> g(g_mu);
  graphs_by_capture()[id] = graph;
  detail::g_captures++;
}

void unregister_capture(unsigned long long id) {
  std::lock_guard<std::mutex> g(g_mu);
  if (graphs_by_capture().erase(id)) detail::g_captures--;
}

bool note_generator_if_capturing(c10::DeviceIndex device, const at::Generator& musa_gen) {
  if (!any_capture_underway()) return false;
  auto id = capture_id(native_stream(current_stream(device)));
  if (!id) return false;
  std::lock_guard<std::mutex> g(g_mu);
  auto it = graphs_by_capture().find(id);
  TORCH_CHECK(it != graphs_by_capture().end(), "a random op ran on a musa stream that is capturing outside a "
              "torch.musa.MUSAGraph (raw stream capture); its numbers would repeat at every replay: capture with "
              "torch.musa.graph / MUSAGraph.capture_begin instead");
  it->second->note_generator(musa_gen);
  return true;
}

ViewOpScope::ViewOpScope() : prev_(t_view_op) { t_view_op = true; }
ViewOpScope::~ViewOpScope() { t_view_op = prev_; }
bool ViewOpScope::active() { return t_view_op; }

}  // namespace torch_musa::graphs
