// The host driver's graphs: a capture records the tasks launched on its streams, in launch
// order (work runs inline, so that order honours every dependency); replay runs them again.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "driver.h"

namespace musa_rt::host {

struct Task {
  std::function<void()> fn;
  std::string name;
};

struct HostGraph : MUgraph_st {
  std::vector<Task> tasks;
  size_t nodeCount() const override { return tasks.size(); }
  musaError_t debugDump(const char* path) const override;  // Graphviz, tasks in order
};

struct HostGraphExec : MUgraphExec_st {
  std::vector<Task> tasks;
};

// One capture: begun on `origin`, joined by the streams that waited on an
// event recorded in it. Work runs inline, so the graph's task order (launch
// order across all member streams) already honours every dependency.
struct Capture {
  HostGraph* graph;
  MUstream_st* origin;
  musaStreamCaptureMode mode;
  std::thread::id thread;
  bool invalidated = false;
  std::string why;  // what invalidated it
  struct Member {
    size_t tasks = 0;   // tasks launched on the stream in this capture
    size_t joined = 0;  // of those, how many the capture has waited for
  };
  std::map<MUstream_st*, Member> members;
  std::map<MUevent_st*, std::pair<MUstream_st*, size_t>> events;  // event -> (stream, tasks at record)
  unsigned long long id = 0;
};

}  // namespace musa_rt::host
