// SwishGLU on the cuda driver: musa_fused's CUDA kernels (swish_glu_kernels.cu), run by the op
// layer on CUDA aliases of the musa memory with the current musa stream as CUDA's current one.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "fused_llm/swish_glu.h"
#include "fused_llm/swish_glu_kernels.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

Tensor swiglu_forward_cuda(const Tensor& x_in) {
  check_glu(x_in, "_fused_swiglu_forward");
  const Tensor x = x_in.contiguous();
  const int64_t n = x.size(-1) / 2;
  auto shape = x.sizes().vec();
  shape.back() = n;
  Tensor y = at::empty(shape, x.options());
  C10_CUDA_CHECK(glu_kernels::forward(x.const_data_ptr(), y.mutable_data_ptr(), kernel_dtype(x.scalar_type()),
                                      n ? x.numel() / (2 * n) : 0, n,
                                      c10::cuda::getCurrentCUDAStream(x.device().index())));
  return y;
}

Tensor swiglu_backward_cuda(const Tensor& g_in, const Tensor& x_in) {
  check_glu_grad(g_in, x_in);
  const Tensor x = x_in.contiguous(), g = g_in.to(x.scalar_type()).contiguous();
  const int64_t n = x.size(-1) / 2;
  Tensor dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  C10_CUDA_CHECK(glu_kernels::backward(g.const_data_ptr(), x.const_data_ptr(), dx.mutable_data_ptr(),
                                       kernel_dtype(x.scalar_type()), n ? x.numel() / (2 * n) : 0, n,
                                       c10::cuda::getCurrentCUDAStream(x.device().index())));
  return dx;
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CUDA, m) {
  m.impl("_fused_swiglu_forward", TORCH_FN(swiglu_forward_cuda));
  m.impl("_fused_swiglu_backward", TORCH_FN(swiglu_backward_cuda));
}

}  // namespace torch_musa::fused_llm
