// c10's device guard for the musa device: current device and stream,
// events, synchronization. torch.Stream / torch.Event / torch.accelerator
// all go through this.
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include "memory/caching_allocator.h"
#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "core/sync_debug.h"
#include "profiler/device_activity.h"

namespace torch_musa {
namespace {

using c10::DeviceType;

struct MusaGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr DeviceType kType = DeviceType::PrivateUse1;

  DeviceType type() const override { return kType; }

  c10::Device exchangeDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "Expected a musa device, but got: ", d);
    auto old = current_device();
    if (d.index() != old) set_device(d.index());
    return c10::Device(kType, old);
  }
  c10::Device getDevice() const override { return c10::Device(kType, current_device()); }
  // torch.accelerator.get_device_capability: every dtype a musa tensor can hold, the quantized
  // ones included (backend/tensor_kinds/; the op layer widens what a kernel device lacks).
  c10::DeviceCapability getDeviceCapability(c10::Device d) const override {
    check_device_index(d.index() < 0 ? current_device() : d.index());
    return c10::DeviceCapability();
  }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == kType, "Expected a musa device, but got: ", d);
    set_device(d.index());
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override { (void)musaSetDevice(d.index()); }

  c10::Stream getStream(c10::Device d) const override { return current_stream(d.index()); }
  c10::Stream getDefaultStream(c10::Device d) const override { return default_stream(d.index()); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool high) const override {
    return stream_from_pool(d.index(), high ? -1 : 0);
  }
  c10::Stream getNewStream(c10::Device d, int priority) const override {
    return stream_from_pool(d.index(), priority);
  }
  c10::Stream exchangeStream(c10::Stream s) const override { return exchange_stream(s); }
  void* getStreamNativeHandle(const c10::Stream s) const override { return native_stream(s); }

  c10::DeviceIndex deviceCount() const noexcept override { return device_count(); }

  void record(void** event, const c10::Stream& stream, const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override {
    TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
                "event device index ", static_cast<int>(device_index),
                " does not match the recording stream's device ", stream.device());
    DeviceScope scope(stream.device_index());
    auto ev = static_cast<musaEvent_t>(*event);
    if (!ev) {
      unsigned flags = flag == c10::EventFlag::BACKEND_DEFAULT ? musaEventDefault : musaEventDisableTiming;
      MUSA_CHECK(musaEventCreateWithFlags(&ev, flags));
      *event = ev;
    }
    profiler::RuntimeCall call("musaEventRecord");
    MUSA_CHECK(musaEventRecord(ev, native_stream(stream)));
  }
  void block(void* event, const c10::Stream& stream) const override {
    if (!event) return;
    DeviceScope scope(stream.device_index());
    profiler::RuntimeCall call("musaStreamWaitEvent");
    MUSA_CHECK(musaStreamWaitEvent(native_stream(stream), static_cast<musaEvent_t>(event), 0));
  }
  bool queryEvent(void* event) const override {
    if (!event) return true;
    auto err = musaEventQuery(static_cast<musaEvent_t>(event));
    if (err == musaErrorNotReady) return false;
    MUSA_CHECK(err);
    return true;
  }
  void destroyEvent(void* event, const c10::DeviceIndex) const noexcept override {
    if (event) (void)musaEventDestroy(static_cast<musaEvent_t>(event));
  }
  void synchronizeEvent(void* event) const override {
    if (!event) return;
    profiler::RuntimeCall call("musaEventSynchronize");
    MUSA_CHECK(musaEventSynchronize(static_cast<musaEvent_t>(event)));
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex device) const override {
    TORCH_CHECK(start && end, "both events must be recorded before asking for the elapsed time");
    DeviceScope scope(device);
    float ms = 0;
    MUSA_CHECK(musaEventElapsedTime(&ms, static_cast<musaEvent_t>(start), static_cast<musaEvent_t>(end)));
    return ms;
  }

  bool queryStream(const c10::Stream& stream) const override {
    DeviceScope scope(stream.device_index());
    auto err = musaStreamQuery(native_stream(stream));
    if (err == musaErrorNotReady) return false;
    MUSA_CHECK(err);
    return true;
  }
  void synchronizeStream(const c10::Stream& stream) const override {
    note_synchronizing("Stream.synchronize");  // as CUDA's stream_synchronize
    DeviceScope scope(stream.device_index());
    profiler::RuntimeCall call("musaStreamSynchronize");
    MUSA_CHECK(musaStreamSynchronize(native_stream(stream)));
  }
  void synchronizeDevice(const c10::DeviceIndex device) const override {
    DeviceScope scope(device);
    profiler::RuntimeCall call("musaDeviceSynchronize");
    MUSA_CHECK(musaDeviceSynchronize());
  }
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr, const c10::Stream& stream) const override {
    allocator::record_stream(data_ptr, stream);
  }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, MusaGuardImpl);

}  // namespace
}  // namespace torch_musa
