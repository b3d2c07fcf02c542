// Device activity: the work each call enqueues on a musa stream, timed on the
// device's own clock (runtime timing events on a device that queues work; on
// the host driver, which runs a stream's work inline at launch, the host clock
// around it). The op layer, copies, MUSA
// Graph replays and collectives open a DeviceRange around their launch; while
// no profiler records, that costs one relaxed atomic load.
#pragma once

#include <c10/core/Device.h>
#include <c10/macros/Macros.h>

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace torch_musa::profiler {

enum class ActivityKind : uint8_t { Kernel, Memcpy, Memset, GraphReplay, Collective };

namespace detail {
extern std::atomic<bool> g_recording;
}
inline bool recording() { return detail::g_recording.load(std::memory_order_relaxed); }

// Times the work enqueued on the current musa stream of `device` between
// construction and destruction (ATen's fills count as memsets). `name` must
// outlive the process's profiling (an operator's schema name, a literal). Only the outermost range of a thread records
// (an op that launches ops is one device activity).
class DeviceRange {
 public:
  DeviceRange(c10::DeviceIndex device, const char* name, ActivityKind kind) {
    if (C10_UNLIKELY(recording())) begin(device, name, kind);
  }
  ~DeviceRange() {
    if (C10_UNLIKELY(open_)) end();
  }
  DeviceRange(const DeviceRange&) = delete;
  DeviceRange& operator=(const DeviceRange&) = delete;

 private:
  void begin(c10::DeviceIndex device, const char* name, ActivityKind kind);
  void end();
  bool open_ = false;   // begin() ran: end() must run
  int64_t slot_ = -1;   // this range's record, if it records
  uint64_t generation_ = 0;  // of the session it records in
};

// One finished device activity, in host-clock nanoseconds since the epoch
// (the clock Kineto's CPU events use).
struct DeviceActivity {
  std::string name;
  ActivityKind kind;
  c10::DeviceIndex device;
  int64_t stream;  // the musa stream's id (c10::Stream::id), one trace track each
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;       // the CPU op that launched it (0: none)
  uint64_t user_correlation;  // the innermost record_function range around it (0: none)
};

// A recording session. start() waits for every device to be idle and takes
// each device's clock reference; stop() ends recording, waits for the
// recorded work and returns its activities. One session at a time. With
// `graph_replays_only`, only MUSA Graph replays are recorded (the cuda
// driver: CUPTI already traces every CUDA kernel, copy and memset).
void start_recording(bool graph_replays_only = false);
std::vector<DeviceActivity> stop_recording();

// The CPU op (and user range) the calling thread is in, as the profiler
// announces them; device activities started on this thread carry them.
void push_correlation(uint64_t id);
void pop_correlation();
void push_user_correlation(uint64_t id);
void pop_user_correlation();

const char* kind_name(ActivityKind kind);

}  // namespace torch_musa::profiler
