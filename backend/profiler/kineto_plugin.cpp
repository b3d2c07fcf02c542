// musa's device timeline in torch.profiler: a Kineto activity-profiler plugin.
// Kineto starts and stops its session with the trace, hands it the CPU op and
// record_function correlation ids as ops run, and asks it for the trace; the
// session answers with the device activities (device_activity.h) as kernel,
// memcpy and memset events linked to the CPU ops that launched them, one
// track per musa stream, and the device-side spans of record_function ranges;
// and with the musa runtime calls the CPU made (musaLaunchKernel,
// musaMemcpyAsync, ..., privateuse1_runtime events on the calling thread, as
// CUPTI's cuda_runtime ones), each linked to its CPU op and, by a flow arrow,
// to the device work it launched.
#include <ActivityType.h>
#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <ThreadUtil.h>
#include <libkineto.h>
#include <output_base.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>

#include "core/device.h"
#include "profiler/device_activity.h"
#include "version_gates.h"

#if TORCH_MUSA_HAS_PRIVATEUSE1_PROFILER_REGISTRY
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#endif

namespace torch_musa::profiler {
namespace {

using libkineto::ActivityType;

ActivityType kineto_type(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::Memcpy: return ActivityType::GPU_MEMCPY;
    case ActivityKind::Memset: return ActivityType::GPU_MEMSET;
    default: return ActivityType::CONCURRENT_KERNEL;
  }
}

// The activity types that mean "trace the device": Kineto passes them when
// the profile asks for ProfilerActivity.PrivateUse1 (or CUDA). (The
// PRIVATEUSE1_RUNTIME/DRIVER types come with every CPU profile.)
bool wants_device(const std::set<ActivityType>& types) {
  for (auto t : {ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::GPU_MEMSET})
    if (types.count(t)) return true;
  return false;
}

// Kineto's info records are aggregates on newer torches and have a
// (deviceId, id, sortIndex, name) constructor on older ones (2.11).
libkineto::ResourceInfo stream_info(int64_t device, int64_t stream, const std::string& name) {
  if constexpr (std::is_aggregate_v<libkineto::ResourceInfo>) {
    return libkineto::ResourceInfo{stream, stream, device, name};
  } else {
    return libkineto::ResourceInfo(device, stream, stream, name);
  }
}

class MusaSession final : public libkineto::IActivityProfilerSession {
 public:
  // On the cuda driver musa's kernels are CUDA kernels, which Kineto's CUPTI
  // profiler already traces on the GPU's clock with their kernel names (as
  // copies and memsets): the session adds only the MUSA Graph replays, so no
  // device time is counted twice. On the host driver it records everything.
  MusaSession(bool annotations, bool cupti_traces_kernels)
      : annotations_(annotations), cupti_traces_kernels_(cupti_traces_kernels) {}

  void start() override {
    start_recording(cupti_traces_kernels_);
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    auto rec = stop_recording();
    activities_ = std::move(rec.device);
    runtime_ = std::move(rec.runtime);
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }

  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked_of,
                    int64_t, int64_t) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->gpuOpCount = static_cast<int>(activities_.size());
    auto cpu_op = [&](uint64_t id) -> const libkineto::ITraceActivity* {
      return id && linked_of ? linked_of(static_cast<int32_t>(id)) : nullptr;
    };
    // The runtime calls, on the CPU threads that made them (Kineto's process and thread ids).
    int32_t pid = libkineto::processId();
    for (auto& r : runtime_) {
      buffer_->emplace_activity(buffer_->span, ActivityType::PRIVATEUSE1_RUNTIME, r.name);
      auto& act = *buffer_->activities.back();
      act.startTime = r.start_ns;
      act.endTime = r.end_ns;
      act.device = pid;
      act.resource = r.tid;
      act.threadId = r.tid;
      act.id = static_cast<int32_t>(r.correlation);
      act.linked = cpu_op(r.correlation);
      act.addMetadata("correlation", r.correlation);
      if (r.flow) {
        act.flow.id = r.flow;
        act.flow.type = libkineto::kLinkAsyncCpuGpu;
        act.flow.start = true;
      }
    }
    // record_function ranges on the device: from the first to the last
    // activity each range launched, per stream.
    std::map<std::tuple<uint64_t, int, int64_t>, std::pair<int64_t, int64_t>> ranges;
    for (auto& a : activities_) {
      std::string name = a.kind == ActivityKind::Collective ? "mccl:" + a.name : a.name;
      buffer_->emplace_activity(buffer_->span, kineto_type(a.kind), name);
      auto& act = *buffer_->activities.back();
      act.startTime = a.start_ns;
      act.endTime = a.end_ns;
      act.device = a.device;
      act.resource = static_cast<int32_t>(a.stream);
      act.id = static_cast<int32_t>(a.correlation);
      act.linked = cpu_op(a.correlation);
      act.addMetadata("device", a.device);
      act.addMetadata("stream", a.stream);
      act.addMetadata("correlation", a.correlation);
      act.addMetadataQuoted("kind", kind_name(a.kind));
      if (a.flow) {  // the arrow from the runtime call that launched it
        act.flow.id = a.flow;
        act.flow.type = libkineto::kLinkAsyncCpuGpu;
        act.flow.start = false;
      }
      streams_.insert({a.device, a.stream});
      if (annotations_ && a.user_correlation) {
        auto [it, fresh] = ranges.try_emplace({a.user_correlation, a.device, a.stream}, a.start_ns, a.end_ns);
        if (!fresh) {
          it->second.first = std::min(it->second.first, a.start_ns);
          it->second.second = std::max(it->second.second, a.end_ns);
        }
      }
    }
    for (auto& [key, span] : ranges) {
      auto [user, device, stream] = key;
      const auto* range = cpu_op(user);
      if (!range) continue;
      buffer_->emplace_activity(buffer_->span, ActivityType::GPU_USER_ANNOTATION, range->name());
      auto& act = *buffer_->activities.back();
      act.startTime = span.first;
      act.endTime = span.second;
      act.device = device;
      act.resource = static_cast<int32_t>(stream);
      act.id = static_cast<int32_t>(user);
      act.linked = range;
    }
    for (auto& act : buffer_->activities) logger.handleActivity(*act);
  }

  // The trace's device process is named for musa (Kineto takes one per session).
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    int64_t device = streams_.empty() ? 0 : streams_.begin()->first;
    std::string name = "musa " + std::to_string(device);
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{device, device + 0x1000000, name, name});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (auto [device, stream] : streams_) out.push_back(stream_info(device, stream, "musa stream " + std::to_string(stream)));
    return out;
  }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return std::move(buffer_); }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }
  void pushUserCorrelationId(uint64_t id) override { push_user_correlation(id); }
  void popUserCorrelationId() override { pop_user_correlation(); }

 private:
  bool annotations_;
  bool cupti_traces_kernels_;
  std::vector<DeviceActivity> activities_;
  std::vector<RuntimeActivity> runtime_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::set<std::pair<int64_t, int64_t>> streams_;
};

class MusaActivityProfiler final : public libkineto::IActivityProfiler {
  // TORCH_MUSA_PROFILER_DEVICE_ACTIVITY=0 (read at each profile's start) leaves musa's own device
  // events and runtime calls out, to measure what they cost (bench/profiler_breakdown.py); on the
  // cuda driver CUPTI's kernels stay.
  static bool enabled() {
    const char* v = std::getenv("TORCH_MUSA_PROFILER_DEVICE_ACTIVITY");
    return !v || std::strcmp(v, "0") != 0;
  }

 public:
  const std::string& name() const override { return name_; }
  const std::set<ActivityType>& availableActivities() const override { return types_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<ActivityType>& types,
                                                                 const libkineto::Config&) override {
    if (!wants_device(types) || !enabled()) return nullptr;
    return std::make_unique<MusaSession>(types.count(ActivityType::GPU_USER_ANNOTATION) > 0, !is_host_driver());
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_{"musa"};
  std::set<ActivityType> types_{ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
                                ActivityType::GPU_MEMSET, ActivityType::GPU_USER_ANNOTATION};
};

#if TORCH_MUSA_HAS_PRIVATEUSE1_PROFILER_REGISTRY
REGISTER_PRIVATEUSE1_PROFILER(MusaActivityProfiler);
#else
// Before torch's PrivateUse1 profiler registry, the plugin goes to Kineto directly.
struct Registrar {
  Registrar() {
    libkineto::api().registerProfilerFactory(
        []() -> std::unique_ptr<libkineto::IActivityProfiler> { return std::make_unique<MusaActivityProfiler>(); });
  }
} g_registrar;
#endif

}  // namespace
}  // namespace torch_musa::profiler
