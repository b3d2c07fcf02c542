// Time on the host driver's streams. Work runs inline at launch, so a stream is
// done as soon as its work is launched, except while a spin (musaStreamSpin,
// what torch.musa._sleep launches) holds it busy without blocking the caller.
// Then it shows what a GPU shows: queries answer not-ready, events recorded
// after the spin complete when it ends, and synchronizations and streams
// waiting on those events wait for it.
#pragma once

#include <mutex>
#include <vector>

#include "driver.h"

namespace musa_rt {
namespace host {

// Milliseconds on the steady clock (event times, ready times).
double nowMs();
// Blocks the caller until nowMs() >= t.
void sleepUntilMs(double t);

class StreamClock {
 public:
  explicit StreamClock(int devices) : device_ready_(devices, 0.0) {}
  // Holds `s` busy for `ms` after the work it already has.
  void hold(MUstream_st* s, double ms);
  // `s`'s later work completes no earlier than `t` (it waited on an event completing then).
  void waitFor(MUstream_st* s, double t);
  // When the work launched on `s` so far completes (in the past when it is idle).
  double readyAt(const MUstream_st* s);
  // When the work launched so far on every stream of device `dev` completes.
  double deviceReadyAt(int dev);

 private:
  void extend(MUstream_st* s, double t);  // with mu_ held
  std::mutex mu_;
  std::vector<double> device_ready_;  // guarded by mu_, as MUstream_st::ready_ms
};

}  // namespace host
}  // namespace musa_rt
