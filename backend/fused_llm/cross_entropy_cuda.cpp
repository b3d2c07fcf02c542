// Fused 2-D cross entropy on the cuda driver: musa_fused's CUDA kernels. The op layer
// delegates a musa call here on CUDA aliases of the musa memory, with the current musa
// stream as CUDA's current stream; outputs allocated here land in musa memory (the router).
// The kernels are compiled ahead of time (cross_entropy_kernels.cu): F.cross_entropy on musa
// takes this path, and a Triton JIT kernel's first launch in a process loaded Triton's front
// end (0.5 s on an H100), inside a user's first training step.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "fused_llm/cross_entropy.h"
#include "fused_llm/cross_entropy_kernels.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;
namespace k = ce_kernels;

// The loss (and so its gradient) may be any floating dtype the kernels write, double included.
void check_loss_dtype(at::ScalarType t, const char* op, const char* what) {
  TORCH_CHECK_VALUE(t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble, "musa_fused::", op,
                    ": ", what, " must be float32, float16, bfloat16 or float64, got ", t);
}

std::optional<Tensor> float_weight(const std::optional<Tensor>& w) {
  if (!w || !w->defined()) return std::nullopt;
  return w->to(at::kFloat).contiguous();
}

std::tuple<Tensor, Tensor, Tensor> ce_forward_cuda(const Tensor& x_in, const Tensor& t_in,
                                                   const std::optional<Tensor>& w_in, int64_t ignore_index,
                                                   int64_t reduction, std::optional<at::ScalarType> loss_dtype) {
  check_ce(x_in, t_in, w_in, reduction, "_fused_cross_entropy_2d_forward");
  const auto out_dtype = loss_dtype.value_or(x_in.scalar_type());
  check_loss_dtype(out_dtype, "_fused_cross_entropy_2d_forward", "loss_dtype");
  const Tensor x = x_in.contiguous(), t = t_in.to(at::kLong).contiguous();
  const auto w = float_weight(w_in);
  const int64_t M = x.size(0);
  const auto f32 = x.options().dtype(at::kFloat);
  // reduction none writes each row's loss in the loss dtype; mean and sum reduce float rows
  const Tensor rows = at::empty({M}, reduction == kNone ? x.options().dtype(out_dtype) : f32);
  const Tensor loss = reduction == kNone ? rows : at::empty({}, x.options().dtype(out_dtype));
  const Tensor lse = at::empty({M}, f32), denom = at::empty({}, f32);
  const k::Forward args{x.const_data_ptr(), kernel_dtype(x.scalar_type()), M, x.size(1),
                        t.const_data_ptr<int64_t>(), w ? w->const_data_ptr<float>() : nullptr, ignore_index,
                        reduction, rows.mutable_data_ptr(), kernel_dtype(rows.scalar_type()),
                        loss.mutable_data_ptr(), kernel_dtype(out_dtype), lse.mutable_data_ptr<float>(),
                        denom.mutable_data_ptr<float>()};
  C10_CUDA_CHECK(k::forward(args, c10::cuda::getCurrentCUDAStream(x.device().index())));
  return {loss, lse, denom};
}

Tensor ce_backward_cuda(const Tensor& grad_loss, const Tensor& x_in, const Tensor& t_in, const Tensor& lse_in,
                        const Tensor& denom_in, const std::optional<Tensor>& w_in, int64_t ignore_index,
                        int64_t reduction) {
  check_ce(x_in, t_in, w_in, reduction, "_fused_cross_entropy_2d_backward");
  check_grad_loss(grad_loss, x_in.size(0), reduction);
  check_loss_dtype(grad_loss.scalar_type(), "_fused_cross_entropy_2d_backward", "grad_loss");
  const Tensor x = x_in.contiguous(), t = t_in.to(at::kLong).contiguous();
  const Tensor g = grad_loss.contiguous(), lse = lse_in.to(at::kFloat).contiguous();
  const Tensor denom = denom_in.to(at::kFloat);
  const auto w = float_weight(w_in);
  Tensor dx = at::empty_like(x, at::MemoryFormat::Contiguous);
  const k::Backward args{g.const_data_ptr(), kernel_dtype(g.scalar_type()), reduction == kNone ? 1 : 0,
                         denom.const_data_ptr<float>(), reduction == kMean, x.const_data_ptr(),
                         kernel_dtype(x.scalar_type()), x.size(0), x.size(1), t.const_data_ptr<int64_t>(),
                         w ? w->const_data_ptr<float>() : nullptr, lse.const_data_ptr<float>(),
                         dx.mutable_data_ptr(), ignore_index};
  C10_CUDA_CHECK(k::backward(args, c10::cuda::getCurrentCUDAStream(x.device().index())));
  return dx;
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CUDA, m) {
  m.impl("_fused_cross_entropy_2d_forward", TORCH_FN(ce_forward_cuda));
  m.impl("_fused_cross_entropy_2d_backward", TORCH_FN(ce_backward_cuda));
}

}  // namespace torch_musa::fused_llm
