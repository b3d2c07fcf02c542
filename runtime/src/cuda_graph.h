// The cuda driver's graphs: CUDA graphs captured on CUDA streams, with the host tasks launched
// into them (musaLaunchHostFunc's) owned by the graph and by every exec made from it.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdio>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "driver.h"

namespace musa_rt::cuda {

struct Task {
  std::function<void()> fn;
  std::string name;
};
using TaskList = std::vector<std::unique_ptr<Task>>;

inline void runTask(Task& t) noexcept {
  // An exception cannot cross the CUDA callback thread; report it instead.
  try {
    t.fn();
  } catch (const std::exception& e) {
    fprintf(stderr, "musa cuda driver: task '%s' threw: %s\n", t.name.c_str(), e.what());
  } catch (...) {
    fprintf(stderr, "musa cuda driver: task '%s' threw a non-standard exception\n", t.name.c_str());
  }
}
inline void CUDART_CB runTaskOnce(void* p) {
  std::unique_ptr<Task> t(static_cast<Task*>(p));
  runTask(*t);
}
inline void CUDART_CB runCapturedTask(void* p) { runTask(*static_cast<Task*>(p)); }

// Held in MUstream_st::capture while a capture begun through beginCapture runs.
struct Capture {
  unsigned long long id = 0;
  std::shared_ptr<TaskList> tasks = std::make_shared<TaskList>();
};

// Captured host tasks are owned by the graph and by every exec made from it
// (torch destroys the graph after instantiating it).
struct CudaGraph final : MUgraph_st {
  cudaGraph_t graph = nullptr;
  int device = 0;
  std::shared_ptr<TaskList> tasks;
  ~CudaGraph() override {
    if (graph && cudaGraphDestroy(graph) != cudaSuccess) (void)cudaGetLastError();
  }
  size_t nodeCount() const override {
    size_t n = 0;
    if (cudaGraphGetNodes(graph, nullptr, &n) == cudaSuccess) return n;
    (void)cudaGetLastError();
    return 0;
  }
  musaError_t debugDump(const char* path) const override {
    cudaError_t e = cudaGraphDebugDotPrint(graph, path, cudaGraphDebugDotFlagsVerbose);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      return fail(musaErrorInvalidValue, std::string("cudaGraphDebugDotPrint(") + path + "): " + cudaGetErrorString(e));
    }
    return musaSuccess;
  }
};

struct CudaGraphExec final : MUgraphExec_st {
  cudaGraphExec_t exec = nullptr;
  int device = 0;
  std::shared_ptr<TaskList> tasks;
  ~CudaGraphExec() override {
    if (exec && cudaGraphExecDestroy(exec) != cudaSuccess) (void)cudaGetLastError();
  }
};

}  // namespace musa_rt::cuda
