// What generated wrapper code calls directly (no dispatcher round trip per tensor): the
// kernel region it runs device code in, and the region's zero-copy boundary.
//
// The boundary functions are plain CPython functions, not pybind11 ones: they run once per
// tensor per compiled-graph call, and pybind11's argument and result casting cost more than
// the aliasing itself (about 2.3k against 1k instructions a call on the host).
#include <torch/csrc/Device.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include "compile/kernel_boundary.h"
#include "compile/kernel_region.h"

namespace py = pybind11;

namespace torch_musa::compile {
namespace {

const at::Tensor& tensor_arg(PyObject* o, const char* fn, const char* what) {
  TORCH_CHECK_TYPE(THPVariable_Check(o), "torch.musa._C.", fn, ": ", what, " must be a Tensor, got ",
                   Py_TYPE(o)->tp_name);
  return THPVariable_Unpack(o);
}

void check_count(Py_ssize_t n, Py_ssize_t want, const char* fn) {
  TORCH_CHECK_TYPE(n == want, "torch.musa._C.", fn, " takes ", want, " arguments, got ", n);
}

PyObject* py_to_kernel_device(PyObject*, PyObject* musa) {
  HANDLE_TH_ERRORS
  return THPVariable_Wrap(to_kernel_device(tensor_arg(musa, "_to_kernel_device", "the argument")));
  END_HANDLE_TH_ERRORS
}

PyObject* py_from_kernel_device(PyObject*, PyObject* const* args, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  check_count(n, 2, "_from_kernel_device");
  const at::Tensor& t = tensor_arg(args[0], "_from_kernel_device", "the first argument");
  TORCH_CHECK_TYPE(THPDevice_Check(args[1]), "torch.musa._C._from_kernel_device: the second argument must be a "
                   "torch.device, got ", Py_TYPE(args[1])->tp_name);
  return THPVariable_Wrap(from_kernel_device(t, reinterpret_cast<THPDevice*>(args[1])->device));
  END_HANDLE_TH_ERRORS
}

PyObject* py_copy_from_kernel_device_(PyObject*, PyObject* const* args, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  check_count(n, 2, "_copy_from_kernel_device_");
  copy_from_kernel_device_(tensor_arg(args[0], "_copy_from_kernel_device_", "self"),
                           tensor_arg(args[1], "_copy_from_kernel_device_", "src"));
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef boundary_methods[] = {
    {"_to_kernel_device", py_to_kernel_device, METH_O, "A kernel-device tensor over a musa tensor's memory."},
    {"_from_kernel_device", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_from_kernel_device)),
     METH_FASTCALL, "A musa tensor of the given device over a kernel-device tensor's memory."},
    {"_copy_from_kernel_device_",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(py_copy_from_kernel_device_)), METH_FASTCALL,
     "Writes a kernel-device tensor into a musa tensor, on the current musa stream."},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

void bind_python(py::module& m) {
  py::class_<KernelRegion>(m, "_KernelRegion")
    .def(py::init<c10::DeviceIndex>())
    .def("__enter__", [](KernelRegion& r) { r.enter(); })
    .def("__exit__", [](KernelRegion& r, const py::args&) {
      r.exit();
      return false;
    });
  if (PyModule_AddFunctions(m.ptr(), boundary_methods) != 0) throw py::error_already_set();
}

}  // namespace torch_musa::compile
