// `kernel<<<grid, block, shared, stream>>>(args...)` in a .mu source compiled for the
// host driver is rewritten (torch_musa/utils/musa_extension/host_rewrite.py) into
//   ::musa_simt::launch(::musa_simt::config(grid, block, shared, stream), "kernel",
//                       [=](auto&&... a) { kernel(a...); }, args...);
// The arguments are evaluated and copied at the launch, as a GPU launch copies them;
// the grid runs as a task on the stream (the host driver runs it in stream order, or
// records it while the stream captures a graph).
#pragma once

#include <musa/runtime.h>

#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include "engine.h"

namespace musa_simt {

inline LaunchConfig config(dim3 grid, dim3 block, size_t shared = 0, musaStream_t stream = nullptr) {
  return LaunchConfig{grid, block, shared, stream};
}

template <typename Body, typename... Args>
inline void launch(const LaunchConfig& cfg, const char* name, Body body, Args&&... args) {
  if (!validate(cfg, name)) return;
  struct Job {
    Body body;
    std::tuple<std::decay_t<Args>...> args;
    static void call(void* p) {
      auto* j = static_cast<Job*>(p);
      std::apply([j](auto&... a) { j->body(a...); }, j->args);
    }
  };
  auto job = std::make_shared<Job>(Job{std::move(body), std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)});
  LaunchConfig c = cfg;
  // The task owns the arguments: a captured graph replays it with the same ones.
  musaLaunchTask(cfg.stream, [c, name, job] { run_grid(c, name, &Job::call, job.get()); }, name);
}

}  // namespace musa_simt
