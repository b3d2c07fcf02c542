// What generated wrapper code calls directly (no dispatcher round trip per tensor): the
// kernel region it runs device code in, and the region's zero-copy boundary.
#include <torch/csrc/utils/pybind.h>

#include "compile/kernel_boundary.h"
#include "compile/kernel_region.h"

namespace py = pybind11;

namespace torch_musa::compile {

void bind_python(py::module& m) {
  py::class_<KernelRegion>(m, "_KernelRegion")
    .def(py::init<c10::DeviceIndex>())
    .def("__enter__", [](KernelRegion& r) { r.enter(); })
    .def("__exit__", [](KernelRegion& r, const py::args&) {
      r.exit();
      return false;
    });
  m.def("_to_kernel_device", &to_kernel_device);
  m.def("_from_kernel_device", &from_kernel_device);
  m.def("_copy_from_kernel_device_", &copy_from_kernel_device_);
}

}  // namespace torch_musa::compile
