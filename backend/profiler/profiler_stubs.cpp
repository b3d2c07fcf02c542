// The legacy per-op device timer torch's profiler uses for PrivateUse1 when
// Kineto does not trace the device (ProfilerState.KINETO_PRIVATEUSE1_FALLBACK:
// torch.autograd.profiler.profile(use_device="musa", use_kineto=False)). torch
// records a timing event on the current musa stream at each op's start and
// end and reads the time between them into the tables' device columns.
#include <c10/util/ApproximateClock.h>
#include <musa/runtime.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"

namespace torch_musa::profiler {
namespace {

struct MusaProfilerStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device, torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    auto d = current_device();
    if (device) *device = d;
    musaEvent_t e = nullptr;
    MUSA_CHECK(musaEventCreateWithFlags(&e, musaEventDefault));
    *event = std::shared_ptr<void>(e, [](void* p) { (void)musaEventDestroy(static_cast<musaEvent_t>(p)); });
    if (cpu_ns) *cpu_ns = c10::getTime();
    MUSA_CHECK(musaEventRecord(e, native_stream(current_stream(d))));
  }

  float elapsed(const torch::profiler::impl::ProfilerVoidEventStub* a,
                const torch::profiler::impl::ProfilerVoidEventStub* b) const override {
    auto ea = static_cast<musaEvent_t>(a->get()), eb = static_cast<musaEvent_t>(b->get());
    MUSA_CHECK(musaEventSynchronize(ea));
    MUSA_CHECK(musaEventSynchronize(eb));
    float ms = 0;
    MUSA_CHECK(musaEventElapsedTime(&ms, ea, eb));
    return ms * 1000.0f;  // torch reads microseconds
  }

  // Markers and ranges go to a vendor tracer (NVTX for CUDA); musa has none to feed.
  void mark(const char*) const override {}
  void rangePush(const char*) const override {}
  void rangePop() const override {}
  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    for (c10::DeviceIndex d = 0; d < device_count(); ++d) {
      DeviceScope scope(d);
      op(d);
    }
  }
  void synchronize() const override { MUSA_CHECK(musaDeviceSynchronize()); }
};

struct Registrar {
  Registrar() {
    static MusaProfilerStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
} g_registrar;

}  // namespace
}  // namespace torch_musa::profiler
