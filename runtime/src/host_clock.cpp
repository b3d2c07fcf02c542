#include "host_clock.h"

#include <algorithm>
#include <chrono>
#include <thread>

namespace musa_rt {
namespace host {

double nowMs() {
  using namespace std::chrono;
  return duration<double, std::milli>(steady_clock::now().time_since_epoch()).count();
}

void sleepUntilMs(double t) {
  for (double now = nowMs(); now < t; now = nowMs())
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(t - now));
}

void StreamClock::extend(MUstream_st* s, double t) {
  s->ready_ms = std::max(s->ready_ms, t);
  double& dev = device_ready_[s->device];
  dev = std::max(dev, t);
}

void StreamClock::hold(MUstream_st* s, double ms) {
  std::lock_guard<std::mutex> g(mu_);
  extend(s, std::max(s->ready_ms, nowMs()) + ms);
}

void StreamClock::waitFor(MUstream_st* s, double t) {
  std::lock_guard<std::mutex> g(mu_);
  extend(s, t);
}

double StreamClock::readyAt(const MUstream_st* s) {
  std::lock_guard<std::mutex> g(mu_);
  return s->ready_ms;
}

double StreamClock::deviceReadyAt(int dev) {
  std::lock_guard<std::mutex> g(mu_);
  return device_ready_[dev];
}

}  // namespace host
}  // namespace musa_rt
