// torch_musa._C._distributed: ProcessGroupMCCL as a c10d Backend that
// torch.distributed registers for the musa device (torch_musa/distributed).
#include <pybind11/chrono.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>

#include "distributed/mccl_backend.h"

namespace py = pybind11;

namespace torch_musa::distributed {

void bind_python(py::module& parent) {
  auto m = parent.def_submodule("_distributed", "mccl: the c10d backend for musa tensors");
  // The base class is torch's c10d Backend binding, so the object registers
  // with a ProcessGroup like ProcessGroupNCCL does.
  py::module::import("torch._C._distributed_c10d");
  py::class_<MCCLBackend, c10d::Backend, c10::intrusive_ptr<MCCLBackend>>(m, "ProcessGroupMCCL", R"(
mccl: collectives on musa tensors, in place, through the driver's collective
library (NCCL on the cuda driver, Gloo on the host driver). Made by
torch.distributed.init_process_group("mccl"); `library` is that library's backend.)")
      .def(py::init([](const c10::intrusive_ptr<c10d::Backend>& library, int rank, int size) {
             return c10::make_intrusive<MCCLBackend>(library, rank, size);
           }),
           py::arg("library"), py::arg("rank"), py::arg("size"), py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("library", &MCCLBackend::library)
      .def_property_readonly("library_name", &MCCLBackend::library_name);
  m.def("_staged_counts", [] { return staged_counts(); });
  m.def("_reset_staged_counts", [] { reset_staged_counts(); });
}

}  // namespace torch_musa::distributed
