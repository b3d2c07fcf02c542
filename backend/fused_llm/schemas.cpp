// The fused LLM ops' schemas, in torch_musa's namespace for them (musa_fused):
// the names and arguments are torch_musa's aten additions where it has them
// (_fused_rope_*, _fused_swiglu_*, _fused_rmsnorm_*); the 2-D cross entropy
// reduces its rows itself (reduction 0 none, 1 mean, 2 sum, as aten's enum:
// on the GPU each separate reduction op costs more host time than its kernel)
// and saves each row's log-sum-exp and the mean's denominator (the weights of
// the non-ignored targets) for its backward. Autograd is beside this file (autograd.cpp); fake
// kernels and the Python API are in torch_musa/nn/fused_ops; the CPU kernels
// beside this file run on the host driver (the op layer delegates musa calls),
// Triton kernels (the cross entropy: CUDA, cross_entropy_kernels.cu) on the cuda one.
#include <torch/library.h>

TORCH_LIBRARY(musa_fused, m) {
  m.def("_fused_rope_forward(Tensor input, Tensor freq_cis, bool rotary_interleaved, bool batch_first, "
        "bool multi_latent_attention=False) -> Tensor");
  m.def("_fused_rope_backward(Tensor grad, Tensor freq_cis, bool rotary_interleaved, bool batch_first, "
        "bool multi_latent_attention=False) -> Tensor");
  m.def("_fused_swiglu_forward(Tensor input) -> Tensor");
  m.def("_fused_swiglu_backward(Tensor grad, Tensor input) -> Tensor");
  m.def("_fused_rmsnorm_forward(Tensor input, SymInt[] normalized_shape, float eps, Tensor? weight=None) "
        "-> (Tensor output, Tensor invvar)");
  m.def("_fused_rmsnorm_backward(Tensor grad_out, Tensor invvar, Tensor input, SymInt[] normalized_shape, "
        "float eps, Tensor? weight=None) -> (Tensor grad_input, Tensor grad_weight)");
  m.def("_fused_cross_entropy_2d_forward(Tensor self, Tensor target, Tensor? weight, int ignore_index, "
        "int reduction=0, ScalarType? loss_dtype=None) -> (Tensor loss, Tensor lse, Tensor denom)");
  m.def("_fused_cross_entropy_2d_backward(Tensor grad_loss, Tensor self, Tensor target, Tensor lse, Tensor denom, "
        "Tensor? weight, int ignore_index, int reduction=0) -> Tensor");
}
