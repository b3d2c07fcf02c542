// The fused LLM ops' schemas, in torch_musa's namespace for them (musa_fused):
// the names and arguments are torch_musa's aten additions where it has them
// (_fused_rope_*, _fused_swiglu_*, _fused_rmsnorm_*); the 2-D cross entropy
// saves each row's log-sum-exp for its backward (one pass over the logits
// less than recomputing it). Autograd is beside this file (autograd.cpp); fake
// kernels and the Python API are in torch_musa/nn/fused_ops; the CPU kernels
// beside this file run on the host driver (the op layer delegates musa calls),
// Triton kernels on the cuda one.
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
  m.def("_fused_cross_entropy_2d_forward(Tensor self, Tensor target, Tensor? weight, int ignore_index) "
        "-> (Tensor row_loss, Tensor lse)");
  m.def("_fused_cross_entropy_2d_backward(Tensor grad_rows, Tensor self, Tensor target, Tensor lse, "
        "Tensor? weight, int ignore_index) -> Tensor");
}
