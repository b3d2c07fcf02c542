// DDP's reducer times forward, backward compute and communication per device
// type; this is musa's timer (events on the current musa stream, read on the
// device's clock), so DDP's runtime statistics work as on CUDA.
#include <c10/core/Event.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace torch_musa::distributed {
namespace {

class MusaTimer : public c10d::Timer {
 public:
  explicit MusaTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    Timer::record(event);  // the host timestamp, as every timer keeps
    c10::impl::VirtualGuardImpl impl(device_.type());
    event_of(event).record(impl.getStream(device_));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    c10::Event& a = event_of(start);
    c10::Event& b = event_of(end);
    if (!a.was_marked_for_recording() || !b.was_marked_for_recording()) return std::nullopt;
    a.synchronize();
    b.synchronize();
    double ms = a.elapsedTime(b);
    if (ms < 0) return std::nullopt;  // recorded out of order (e.g. no backward yet this iteration)
    return static_cast<int64_t>(ms * 1e6);
  }

 private:
  c10::Event& event_of(Event event) { return events_[static_cast<size_t>(event)]; }

  c10::Device device_;
  c10::Event events_[5] = {
      c10::Event(c10::kPrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::kPrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::kPrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::kPrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
      c10::Event(c10::kPrivateUse1, c10::EventFlag::BACKEND_DEFAULT),
  };
};

}  // namespace
}  // namespace torch_musa::distributed

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, torch_musa::distributed::MusaTimer)
}  // namespace c10d
