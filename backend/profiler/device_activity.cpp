#include "profiler/device_activity.h"

#include <ATen/record_function.h>
#include <ThreadUtil.h>
#include <c10/util/Exception.h>
#include <musa/runtime.h>

#include <chrono>
#include <cstring>
#include <mutex>

#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "graphs/capture_state.h"

namespace torch_musa::profiler {
namespace detail {
std::atomic<bool> g_recording{false};
}
namespace {
std::atomic<bool> g_cupti_traces_kernels{false};
// Flow ids of musa's runtime-call -> device-work links: a range of their own,
// apart from CUPTI's (which are its correlation ids, counted up from 1).
constexpr uint32_t kFlowBase = 0xC0000000u;
}

namespace {

int64_t host_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

struct Pending {
  const char* name;  // an operator's schema name or a literal: lives as long as the process
  ActivityKind kind;
  c10::DeviceIndex device;
  bool device_work;  // false: only the runtime call is recorded (CUPTI has the work, or a capture)
  int32_t tid;
  int64_t cpu_start_ns;  // the runtime call, on the host clock
  int64_t cpu_end_ns = 0;
  int64_t stream = 0;
  musaStream_t native = nullptr;
  musaEvent_t start = nullptr;  // timing events (work queued on a device)
  musaEvent_t end = nullptr;
  int64_t start_ns = 0;  // host clock readings (work run inline)
  int64_t end_ns = 0;
  uint64_t correlation;
  uint64_t user_correlation;
};

// A device's clock reference: a timing event recorded while the device was
// idle, and the host time it ran at.
struct ClockRef {
  musaEvent_t event = nullptr;
  int64_t host_ns = 0;
};

struct Session {
  std::mutex mu;
  uint64_t generation = 0;  // bumped per session: a range open across sessions is dropped
  // The host driver runs a stream's work inline, at launch: reading the host
  // clock as a range opens and closes is when the device ran it, without events.
  bool inline_work = false;
  std::vector<Pending> pending;
  std::vector<RuntimeActivity> calls;  // runtime calls that launch nothing
  std::vector<ClockRef> refs;
  // Timing events kept for the next records, per device (events belong to a device).
  std::vector<std::vector<musaEvent_t>> free_events;

  musaEvent_t take_event(c10::DeviceIndex d) {
    auto& pool = free_events[d];
    if (!pool.empty()) {
      auto e = pool.back();
      pool.pop_back();
      return e;
    }
    musaEvent_t e = nullptr;
    DeviceScope scope(d);
    MUSA_CHECK(musaEventCreateWithFlags(&e, musaEventDefault));
    return e;
  }
};

Session& session() {
  static Session* s = new Session();  // never destroyed: ops may run during interpreter exit
  return *s;
}

// ATen's fills are what a GPU runs as memsets.
bool is_fill(const char* op) { return !std::strcmp(op, "aten::zero_") || !std::strcmp(op, "aten::fill_"); }

thread_local std::vector<uint64_t> t_correlation;
thread_local std::vector<uint64_t> t_user_correlation;
thread_local int t_depth = 0;  // open DeviceRanges of this thread

}  // namespace

void DeviceRange::begin(c10::DeviceIndex device, const char* name, ActivityKind kind) {
  open_ = true;
  if (t_depth++ > 0) return;  // nested: the outer range times it
  int64_t cpu_start = host_now_ns();
  if (!name) name = "";
  if (kind == ActivityKind::Kernel && is_fill(name)) kind = ActivityKind::Memset;
  // Under CUPTI (cuda driver) the CUDA kernels, copies and memsets are CUPTI's events; musa
  // times its own graph replays and collective launches.
  bool device_work = !g_cupti_traces_kernels.load(std::memory_order_relaxed) || kind == ActivityKind::GraphReplay ||
                     kind == ActivityKind::Collective;
  c10::Stream stream(c10::Stream::DEFAULT, c10::Device(c10::DeviceType::PrivateUse1, device));
  musaStream_t native = nullptr;
  if (device_work) {
    stream = current_stream(device);
    native = native_stream(stream);
    // A capturing stream records graph nodes, not timed work: its replay is the activity. Only
    // asked while some capture runs (a runtime call per op is what the profiler must not add).
    musaStreamCaptureStatus status = musaStreamCaptureStatusNone;
    if (graphs::any_capture_underway() &&
        (musaStreamIsCapturing(native, &status) != musaSuccess || status != musaStreamCaptureStatusNone))
      device_work = false;
  }
  int32_t tid = libkineto::systemThreadId();
  auto& s = session();
  std::lock_guard<std::mutex> g(s.mu);
  if (!recording() || device >= static_cast<c10::DeviceIndex>(s.refs.size())) return;
  Pending p{name, kind, device, device_work, tid, cpu_start};
  p.stream = stream.id();
  p.native = native;
  p.correlation = t_correlation.empty() ? 0 : t_correlation.back();
  p.user_correlation = t_user_correlation.empty() ? 0 : t_user_correlation.back();
  if (device_work && s.inline_work) {
    p.start_ns = cpu_start;
  } else if (device_work) {
    p.start = s.take_event(device);
    MUSA_CHECK(musaEventRecord(p.start, native));
  }
  slot_ = static_cast<int64_t>(s.pending.size());
  generation_ = s.generation;
  s.pending.push_back(std::move(p));
  // The host driver's kernel-device ops under this launch are the launch itself (CUDA records
  // no op inside a CUDA op's kernel launch). A collective keeps its library's ranges. (Last, so
  // nothing after it can throw: end() turns it back on.)
  if (s.inline_work && kind != ActivityKind::Collective && at::isRecordFunctionEnabled()) {
    at::enableRecordFunction(false);
    hid_ops_ = true;
  }
}

void DeviceRange::end() {
  --t_depth;
  if (hid_ops_) at::enableRecordFunction(true);
  if (slot_ < 0) return;
  auto& s = session();
  std::lock_guard<std::mutex> g(s.mu);
  // A session that ended (or restarted) meanwhile dropped this record.
  if (!recording() || generation_ != s.generation) return;
  auto& p = s.pending[slot_];
  if (!p.device_work || s.inline_work) {
    p.cpu_end_ns = p.end_ns = host_now_ns();
    return;
  }
  if (p.end) return;
  p.end = s.take_event(p.device);
  MUSA_CHECK(musaEventRecord(p.end, p.native));
  p.cpu_end_ns = host_now_ns();
}

void RuntimeCall::begin(const char* name) {
  name_ = name;
  start_ns_ = host_now_ns();
}

void RuntimeCall::end() {
  int64_t end_ns = host_now_ns();
  RuntimeActivity r{name_, libkineto::systemThreadId(), start_ns_, end_ns,
                    t_correlation.empty() ? 0 : t_correlation.back(), 0};
  auto& s = session();
  std::lock_guard<std::mutex> g(s.mu);
  if (recording()) s.calls.push_back(r);
}

void start_recording(bool cupti_traces_kernels) {
  auto& s = session();
  std::lock_guard<std::mutex> g(s.mu);
  TORCH_CHECK(!recording(), "a musa profiling session is already recording; stop it before starting another");
  auto n = device_count();
  s.free_events.resize(n);
  s.refs.assign(n, ClockRef{});
  s.pending.clear();
  s.calls.clear();
  ++s.generation;
  s.inline_work = is_host_driver();
  for (c10::DeviceIndex d = 0; d < n; ++d) {
    DeviceScope scope(d);
    MUSA_CHECK(musaDeviceSynchronize());
    auto& ref = s.refs[d];
    ref.event = s.take_event(d);
    int64_t before = host_now_ns();
    MUSA_CHECK(musaEventRecord(ref.event, nullptr));
    MUSA_CHECK(musaEventSynchronize(ref.event));
    // The device was idle, so the event ran between the two host readings.
    ref.host_ns = (before + host_now_ns()) / 2;
  }
  g_cupti_traces_kernels.store(cupti_traces_kernels);
  detail::g_recording.store(true);
}

Recording stop_recording() {
  auto& s = session();
  std::lock_guard<std::mutex> g(s.mu);
  Recording rec;
  if (!recording()) return rec;
  detail::g_recording.store(false);
  auto& out = rec.device;
  out.reserve(s.pending.size());
  rec.runtime.reserve(s.pending.size() + s.calls.size());
  auto at_ns = [&](c10::DeviceIndex d, musaEvent_t e) {
    float ms = 0;
    MUSA_CHECK(musaEventElapsedTime(&ms, s.refs[d].event, e));
    return s.refs[d].host_ns + static_cast<int64_t>(static_cast<double>(ms) * 1e6);
  };
  uint32_t flows = 0;
  for (auto& p : s.pending) {
    uint32_t flow = 0;
    if (p.device_work && s.inline_work) {
      if (p.end_ns) {
        flow = kFlowBase + (flows++ & 0x3FFFFFFFu);
        out.push_back({p.name, p.kind, p.device, p.stream, p.start_ns, std::max(p.start_ns, p.end_ns),
                       p.correlation, p.user_correlation, flow});
      }
    } else if (p.device_work) {
      if (p.end) {
        MUSA_CHECK(musaEventSynchronize(p.end));
        int64_t a = at_ns(p.device, p.start), b = at_ns(p.device, p.end);
        flow = kFlowBase + (flows++ & 0x3FFFFFFFu);
        out.push_back({p.name, p.kind, p.device, p.stream, a, std::max(a, b), p.correlation,
                       p.user_correlation, flow});
        s.free_events[p.device].push_back(p.end);
      }
      s.free_events[p.device].push_back(p.start);
    }
    if (p.cpu_end_ns)
      rec.runtime.push_back({runtime_name(p.kind), p.tid, p.cpu_start_ns, std::max(p.cpu_start_ns, p.cpu_end_ns),
                             p.correlation, flow});
  }
  rec.runtime.insert(rec.runtime.end(), s.calls.begin(), s.calls.end());
  s.calls.clear();
  s.pending.clear();
  for (c10::DeviceIndex d = 0; d < static_cast<c10::DeviceIndex>(s.refs.size()); ++d)
    s.free_events[d].push_back(s.refs[d].event);
  s.refs.clear();
  return rec;
}

void push_correlation(uint64_t id) { t_correlation.push_back(id); }
void pop_correlation() {
  if (!t_correlation.empty()) t_correlation.pop_back();
}
void push_user_correlation(uint64_t id) { t_user_correlation.push_back(id); }
void pop_user_correlation() {
  if (!t_user_correlation.empty()) t_user_correlation.pop_back();
}

const char* runtime_name(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::Memcpy: return "musaMemcpyAsync";
    case ActivityKind::Memset: return "musaMemsetAsync";
    case ActivityKind::GraphReplay: return "musaGraphLaunch";
    default: return "musaLaunchKernel";
  }
}

const char* kind_name(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::Kernel: return "kernel";
    case ActivityKind::Memcpy: return "memcpy";
    case ActivityKind::Memset: return "memset";
    case ActivityKind::GraphReplay: return "graph";
    case ActivityKind::Collective: return "collective";
  }
  return "kernel";
}

}  // namespace torch_musa::profiler
