#include "host_graph.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace musa_rt::host {

musaError_t HostGraph::debugDump(const char* path) const {
  FILE* f = std::fopen(path, "w");
  if (!f) return fail(musaErrorInvalidValue, std::string("musaGraphDebugDotPrint: cannot write ") + path + ": " + strerror(errno));
  std::fprintf(f, "digraph musa_graph {\n  rankdir=TB;\n");
  for (size_t i = 0; i < tasks.size(); ++i) {
    std::fprintf(f, "  n%zu [shape=box label=\"%zu: %s\"];\n", i, i, tasks[i].name.c_str());
    if (i) std::fprintf(f, "  n%zu -> n%zu;\n", i - 1, i);
  }
  std::fprintf(f, "}\n");
  std::fclose(f);
  return musaSuccess;
}

}  // namespace musa_rt::host
