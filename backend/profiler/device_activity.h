// Device activity: the work each call enqueues on a musa stream, timed on the
// device's own clock (runtime timing events on a device that queues work; on
// the host driver, which runs a stream's work inline at launch, the host clock
// around it). The op layer, copies, MUSA
// Graph replays and collectives open a DeviceRange around their launch; while
// no profiler records, that costs one relaxed atomic load. Each range is also
// a CPU-side runtime call (musaLaunchKernel, musaMemcpyAsync, ...) on the
// launching thread, linked to its device work by a flow; RuntimeCall marks the
// runtime calls that launch nothing (synchronizes, event record/wait).
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

// The musa runtime call a launch of this kind is, as CUDA's runtime names its
// own (musaLaunchKernel for kernels and collectives, musaMemcpyAsync, ...).
const char* runtime_name(ActivityKind kind);

// Times the work enqueued on the current musa stream of `device` between
// construction and destruction (ATen's fills count as memsets). `name` must
// outlive the process's profiling (an operator's schema name, a literal). Only the outermost range of a thread records
// (an op that launches ops is one device activity). On the host driver the
// kernel device's ops inside a recorded launch (the CPU op over the musa op's
// memory, and the CPU kernel's own sub-ops) are not recorded as CPU ops: the
// musa op is the op, as a CUDA op is on CUDA, and the profiler records half the
// ops.
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
  bool hid_ops_ = false;  // begin() turned RecordFunction off on this thread: end() turns it back on
  int64_t slot_ = -1;   // this range's record, if it records
  uint64_t generation_ = 0;  // of the session it records in
};

// A musa runtime call that launches no device work (musaDeviceSynchronize,
// musaStreamSynchronize, musaEventRecord, musaStreamWaitEvent, ...): while a
// profiler records, one CPU-side runtime event named `name` (a literal) on the
// calling thread, linked to the CPU op it is made in.
class RuntimeCall {
 public:
  explicit RuntimeCall(const char* name) {
    if (C10_UNLIKELY(recording())) begin(name);
  }
  ~RuntimeCall() {
    if (C10_UNLIKELY(name_ != nullptr)) end();
  }
  RuntimeCall(const RuntimeCall&) = delete;
  RuntimeCall& operator=(const RuntimeCall&) = delete;

 private:
  void begin(const char* name);
  void end();
  const char* name_ = nullptr;
  int64_t start_ns_ = 0;
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
  uint32_t flow;              // the flow from its runtime call (RuntimeActivity::flow)
};

// One musa runtime call the CPU made, in host-clock nanoseconds.
struct RuntimeActivity {
  const char* name;  // musaLaunchKernel, musaMemcpyAsync, musaStreamSynchronize, ...
  int32_t tid;       // the calling thread (the system id Kineto's CPU events carry)
  int64_t start_ns;
  int64_t end_ns;
  uint64_t correlation;  // the CPU op it was made in (0: none)
  uint32_t flow;         // != 0: the flow to the device activity it launched
};

struct Recording {
  std::vector<DeviceActivity> device;
  std::vector<RuntimeActivity> runtime;
};

// A recording session. start() waits for every device to be idle and takes
// each device's clock reference; stop() ends recording, waits for the
// recorded work and returns its activities and runtime calls. One session at a
// time. With `cupti_traces_kernels` (the cuda driver: CUPTI already traces
// every CUDA kernel, copy and memset), the device work musa records itself is
// its MUSA Graph replays and collective launches; every launch is still a
// runtime call.
void start_recording(bool cupti_traces_kernels = false);
Recording stop_recording();

// The CPU op (and user range) the calling thread is in, as the profiler
// announces them; device activities started on this thread carry them.
void push_correlation(uint64_t id);
void pop_correlation();
void push_user_correlation(uint64_t id);
void pop_user_correlation();

const char* kind_name(ActivityKind kind);

}  // namespace torch_musa::profiler
