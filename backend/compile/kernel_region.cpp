// A compiled region that runs as the kernel device's code (the cuda driver's
// CUDA graphs of musa graphs): while it is entered, the current musa stream is
// the kernel device's current stream, and the kernel device's allocations
// (Inductor's buffers, library workspaces) come from musa memory, exactly as
// for one delegated op (KernelScope), so compiled code launches and allocates
// as native compiled code does, on musa's stream and memory.
#include <torch/csrc/utils/pybind.h>

#include <memory>

#include "core/device.h"
#include "ops/kernel_device.h"

namespace py = pybind11;

namespace torch_musa::compile {
namespace {

class KernelRegion {
 public:
  explicit KernelRegion(c10::DeviceIndex index) : index_(index) { check_device_index(index); }
  void enter() {
    TORCH_CHECK(!scope_, "torch_musa kernel region for musa:", index_, " entered twice");
    scope_ = std::make_unique<KernelScope>(kernel_device(), index_);
  }
  void exit() { scope_.reset(); }

 private:
  c10::DeviceIndex index_;
  std::unique_ptr<KernelScope> scope_;
};

}  // namespace

void bind_python(py::module& m) {
  py::class_<KernelRegion>(m, "_KernelRegion")
    .def(py::init<c10::DeviceIndex>())
    .def("__enter__", [](KernelRegion& r) { r.enter(); })
    .def("__exit__", [](KernelRegion& r, const py::args&) {
      r.exit();
      return false;
    });
}

}  // namespace torch_musa::compile
