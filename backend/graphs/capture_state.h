// What the rest of the backend asks about graph capture: whether one is
// running (a cheap check on every op), whether a stream is capturing, and
// which graph a capture belongs to (for generators used while capturing).
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <musa/runtime.h>

#include <atomic>

namespace torch_musa::graphs {

class MusaGraph;

namespace detail {
inline std::atomic<int> g_captures{0};
}

// Whether any MUSA graph capture is running in this process.
inline bool any_capture_underway() { return detail::g_captures.load(std::memory_order_relaxed) > 0; }

// The runtime's capture id of `stream` (0 when it is not capturing).
unsigned long long capture_id(musaStream_t stream);
// Whether the current musa stream of `device` is capturing.
bool current_stream_capturing(c10::DeviceIndex device);

// Graphs register their capture while it runs (MusaGraph does it).
void register_capture(unsigned long long id, MusaGraph* graph);
void unregister_capture(unsigned long long id);

// A random op is about to run on `device`'s current stream with `musa_gen`:
// if that stream is capturing, the graph notes the generator (its state
// advances at every replay). Returns whether the stream is capturing.
bool note_generator_if_capturing(c10::DeviceIndex device, const at::Generator& musa_gen);

// Set while an op that only builds a view runs during a host capture: it
// touches no memory, so it runs now instead of being recorded.
class ViewOpScope {
 public:
  ViewOpScope();
  ~ViewOpScope();
  static bool active();

 private:
  bool prev_;
};

}  // namespace torch_musa::graphs
