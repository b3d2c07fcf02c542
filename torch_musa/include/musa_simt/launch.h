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

// Everything here is private to each extension (no symbol is shared between two
// extensions, which may come from different torch_musa versions).
#pragma GCC visibility push(hidden)

namespace musa_simt {

inline LaunchConfig config(dim3 grid, dim3 block, size_t shared = 0, musaStream_t stream = nullptr) {
  return LaunchConfig{grid, block, shared, stream};
}

// Puts a grid on its stream; one instantiation for every kernel (the task owns the
// arguments: a captured graph replays it with the same ones).
inline void enqueue(const LaunchConfig& c, const char* name, void (*fn)(void*), std::shared_ptr<void> job) {
  musaLaunchTask(c.stream, [c, name, fn, job] { run_grid(c, name, fn, job.get()); }, name);
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
  enqueue(cfg, name, &Job::call,
          std::make_shared<Job>(Job{std::move(body), std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)}));
}

}  // namespace musa_simt

#pragma GCC visibility pop
