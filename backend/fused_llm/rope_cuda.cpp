// RoPE on the cuda driver: musa_fused's CUDA kernels (rope_kernels.cu), run by the op layer on
// CUDA aliases of the musa memory with the current musa stream as CUDA's current one.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "fused_llm/rope.h"
#include "fused_llm/rope_kernels.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

// A row is staged in 48 KiB of shared memory as float.
constexpr int64_t kMaxHeadDim = 48 * 1024 / sizeof(float);

Tensor rope_cuda(const Tensor& x_in, const Tensor& freq_in, bool interleaved, bool batch_first, bool mla,
                 bool backward) {
  const char* op = backward ? "_fused_rope_backward" : "_fused_rope_forward";
  const RopeShape sh = check_rope(x_in, freq_in, batch_first, op);
  TORCH_CHECK_VALUE(sh.D <= kMaxHeadDim, "musa_fused::", op, ": a head dimension of ", sh.D,
                    " is more than the cuda driver's kernel takes (", kMaxHeadDim,
                    "); split the heads, or use the composition in torch ops");
  const Tensor x = x_in.contiguous();
  Tensor y = at::empty(x.sizes(), x.options());
  if (x.numel() == 0) return y;
  // the angles in float, as the kernels read them (a float32 (S, R) freq_cis is used as it is)
  const Tensor f = freq_in.reshape({sh.S, sh.R}).to(at::kFloat).contiguous();
  const rope_kernels::Rope args{x.const_data_ptr(), y.mutable_data_ptr(), kernel_dtype(x.scalar_type()),
                                f.const_data_ptr<float>(), sh.rows, sh.D, sh.R, sh.S, sh.inner, interleaved, mla,
                                backward};
  C10_CUDA_CHECK(rope_kernels::rope(args, c10::cuda::getCurrentCUDAStream(x.device().index())));
  return y;
}

Tensor rope_forward_cuda(const Tensor& x, const Tensor& freq, bool interleaved, bool batch_first, bool mla) {
  return rope_cuda(x, freq, interleaved, batch_first, mla, false);
}

Tensor rope_backward_cuda(const Tensor& g, const Tensor& freq, bool interleaved, bool batch_first, bool mla) {
  return rope_cuda(g, freq, interleaved, batch_first, mla, true);
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CUDA, m) {
  m.impl("_fused_rope_forward", TORCH_FN(rope_forward_cuda));
  m.impl("_fused_rope_backward", TORCH_FN(rope_backward_cuda));
}

}  // namespace torch_musa::fused_llm
