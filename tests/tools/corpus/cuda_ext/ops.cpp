// Python binding of the CUDA extension (pybind11 and ATen; torch/extension.h would do,
// at twice the compile time).
#include <ATen/core/Tensor.h>
#include <torch/csrc/utils/pybind.h>

at::Tensor bias_relu_cuda(const at::Tensor& x, const at::Tensor& bias);

at::Tensor bias_relu(const at::Tensor& x, const at::Tensor& bias) {
  TORCH_CHECK(x.device().type() == at::kCUDA, "bias_relu: x must live on the CUDA device");
  return bias_relu_cuda(x, bias);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("bias_relu", &bias_relu, "x + bias, then ReLU (CUDA)"); }
