// torch_musa._C._distributed: ProcessGroupMCCL as a c10d Backend that
// torch.distributed registers for the musa device (torch_musa/distributed).
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/mccl_backend.h"
#include "ops/kernel_device.h"

namespace py = pybind11;

namespace torch_musa::distributed {
namespace {
// The options of an mccl group over Gloo: Backend::Options that Python can copy.
struct MCCLOptions : c10d::Backend::Options {
  explicit MCCLOptions(const c10d::Backend::Options& o) : c10d::Backend::Options(o) {}
};

py::object& gloo_factory() {
  static py::object* f = new py::object();  // never destroyed: outlives the interpreter's teardown
  return *f;
}

c10::intrusive_ptr<c10d::Backend> python_gloo(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              std::chrono::milliseconds timeout) {
  py::gil_scoped_acquire gil;
  TORCH_CHECK(gloo_factory(), "mccl: no Gloo factory installed (torch_musa.distributed did not load)");
  return gloo_factory()(store, rank, size, timeout).cast<c10::intrusive_ptr<c10d::Backend>>();
}
}  // namespace

void bind_python(py::module& parent) {
  auto m = parent.def_submodule("_distributed", "mccl: the c10d backend for musa tensors");
  // The base class is torch's c10d Backend binding, so the object registers
  // with a ProcessGroup like ProcessGroupNCCL does.
  py::module::import("torch._C._distributed_c10d");
  auto pg = py::class_<MCCLBackend, c10d::Backend, c10::intrusive_ptr<MCCLBackend>>(m, "ProcessGroupMCCL", R"(
mccl: collectives on musa tensors, in place, through the driver's collective
library (NCCL on the cuda driver, Gloo on the host driver). Made by
torch.distributed.init_process_group("mccl"); `library` is that library's backend.)")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& library, const py::object& checker, int rank,
                       int size) {
             c10::intrusive_ptr<c10d::Backend> c;
             if (!checker.is_none()) c = checker.cast<c10::intrusive_ptr<c10d::Backend>>();
             py::gil_scoped_release no_gil;
             return c10::make_intrusive<MCCLBackend>(library, c, rank, size);
           }),
           py::arg("library"), py::arg("checker"), py::arg("rank"), py::arg("size"))
      .def_property_readonly("library", &MCCLBackend::library)
      .def_property_readonly("library_name", &MCCLBackend::library_name)
      .def_property_readonly("checks_collectives", &MCCLBackend::checks_collectives)
      .def("_set_store", &MCCLBackend::set_store)
      // split_group() deep-copies the parent's options: NCCL's own, or (Gloo's cannot be copied) the
      // generic part, which split() completes with the library's.
      .def_property_readonly("options", [](MCCLBackend& self) -> py::object {
        if (self.library_name() == "nccl") return py::cast(self.library()).attr("options");
        return py::cast(c10::make_intrusive<MCCLOptions>(*self.library()->getBackendOptions()));
      })
      // new_group() calls this on ranks outside the new group when the default group is bound to a
      // device: NCCL's split is collective over the parent communicator; Gloo groups are independent.
      .def("perform_nocolor_split", [](MCCLBackend& self, const at::Device& device) {
        if (self.library_name() != "nccl") return;
        py::cast(self.library()).attr("perform_nocolor_split")(kernel_device().device_for(device.index()));
      });
  py::class_<MCCLOptions, c10d::Backend::Options, c10::intrusive_ptr<MCCLOptions>>(pg, "Options")
      .def("__copy__", [](const MCCLOptions& o) { return c10::make_intrusive<MCCLOptions>(o); })
      .def("__deepcopy__", [](const MCCLOptions& o, py::dict) { return c10::make_intrusive<MCCLOptions>(o); });
  m.def("_set_gloo_factory", [](py::object f) {
    gloo_factory() = std::move(f);
    set_library_factory(&python_gloo);
  });
  m.def("_set_nccl_has_float8", &set_nccl_has_float8);
  m.def("_staged_counts", [] { return staged_counts(); });
  m.def("_reset_staged_counts", [] { reset_staged_counts(); });
  m.def("_sent_bytes", [] { return sent_bytes(); });
  m.def("_reset_sent_bytes", [] { reset_sent_bytes(); });
}

}  // namespace torch_musa::distributed
