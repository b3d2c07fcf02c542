// torch_musa._C._graphs: MUSAGraph and the capture queries torch.musa.graphs wraps.
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "core/device.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "graphs/capture_state.h"
#include "graphs/musa_graph.h"

namespace torch_musa::graphs {
namespace {

musaStreamCaptureMode parse_mode(const std::string& mode) {
  if (mode == "global" || mode == "default") return musaStreamCaptureModeGlobal;
  if (mode == "thread_local") return musaStreamCaptureModeThreadLocal;
  if (mode == "relaxed") return musaStreamCaptureModeRelaxed;
  TORCH_CHECK_VALUE(false, "capture_error_mode must be 'global', 'thread_local' or 'relaxed'; got '", mode, "'");
}

c10::MempoolId_t parse_pool(const py::object& pool) {
  if (pool.is_none()) return {0, 0};
  auto t = pool.cast<py::tuple>();
  TORCH_CHECK_VALUE(t.size() == 2, "pool must be a (int, int) pool id from graph_pool_handle() or MUSAGraph.pool()");
  return {t[0].cast<uint64_t>(), t[1].cast<uint64_t>()};
}

py::tuple pool_tuple(c10::MempoolId_t id) { return py::make_tuple(id.first, id.second); }

// Runs fn without the GIL; its TORCH_WARNs (the cuda driver's "The CUDA Graph is empty", for
// one) become Python warnings when this call returns, where the caller's warnings filters apply
// (torch's graph trees capture an empty graph inside warnings.catch_warnings). Without a
// handler here an outer torch call buffered them and raised them after the filters were gone.
template <class Fn>
void with_python_warnings(Fn&& fn) {
  torch::PyWarningHandler handler;
  try {
    py::gil_scoped_release release;
    fn();
  } catch (...) {
    handler.set_in_exception();  // the error propagates; torch raises the warnings without losing it
    throw;
  }
}

}  // namespace

void bind_python(py::module& parent) {
  auto m = parent.def_submodule("_graphs", "MUSA graphs: capture and replay");
  using gil_release = py::call_guard<py::gil_scoped_release>;
  py::class_<MusaGraph>(m, "_MUSAGraph")
      .def(py::init<bool>(), py::arg("keep_graph") = false)
      .def(
          "capture_begin",
          [](MusaGraph& g, const py::object& pool, const std::string& mode) {
            auto id = parse_pool(pool);
            auto m = parse_mode(mode);
            py::gil_scoped_release release;
            g.capture_begin(id, m);
          },
          py::arg("pool") = py::none(), py::arg("capture_error_mode") = "global")
      .def("capture_end", [](MusaGraph& g) { with_python_warnings([&] { g.capture_end(); }); })
      .def("capture_end_pre", [](MusaGraph& g) { with_python_warnings([&] { g.capture_end_pre(); }); })
      .def("capture_end_post", &MusaGraph::capture_end_post)
      .def_property_readonly("_has_capture", &MusaGraph::has_capture)
      .def_property_readonly("_has_graph_exec", &MusaGraph::has_graph_exec)
      .def("instantiate", &MusaGraph::instantiate, gil_release())
      .def("replay", &MusaGraph::replay, gil_release())
      .def("reset", &MusaGraph::reset, gil_release())
      .def("pool", [](const MusaGraph& g) { return pool_tuple(g.pool()); })
      .def("enable_debug_mode", &MusaGraph::enable_debug_mode)
      .def("debug_dump", &MusaGraph::debug_dump, py::arg("debug_path"))
      .def("register_generator_state", [](MusaGraph& g, py::handle gen) {
        TORCH_CHECK_TYPE(THPGenerator_Check(gen.ptr()), "register_generator_state expects a torch.Generator");
        g.register_generator_state(reinterpret_cast<THPGenerator*>(gen.ptr())->cdata);
      });
  m.def("_graph_pool_handle", [](int device) { return pool_tuple(graph_pool_handle(static_cast<c10::DeviceIndex>(device))); },
        py::arg("device") = -1);
  // A Python callable as one task of the current musa stream: a host-driver capture records it
  // (it runs at every replay); otherwise it runs in stream order. Host driver only: the cuda driver
  // runs tasks on a callback thread that must not call into the runtime.
  m.def("_launch_host_call", [](py::function fn) {
    std::shared_ptr<py::object> held(new py::object(std::move(fn)), [](py::object* o) {
      if (!Py_IsInitialized()) return;  // interpreter gone: leak rather than crash
      py::gil_scoped_acquire gil;
      delete o;
    });
    auto device = current_device();
    MUSA_CHECK(musaLaunchTask(native_stream(current_stream(device)), [held] {
      py::gil_scoped_acquire gil;
      try {
        (*held)();
      } catch (py::error_already_set& e) {
        throw std::runtime_error(e.what());
      }
    }, "host_call"));
  });
  m.def("_is_current_stream_capturing", [] { return current_stream_capturing(current_device()); });
}

}  // namespace torch_musa::graphs
