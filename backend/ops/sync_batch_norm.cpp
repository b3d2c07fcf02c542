// SyncBatchNorm's kernels on the host driver. ATen has them for CUDA only
// (batch_norm_stats, _elemt, _gather_stats_with_counts, _backward_reduce,
// _backward_elemt), so the CPU kernel device has none; on the cuda driver the
// op layer delegates to ATen's CUDA kernels. Here each is the same per-channel
// math in ATen ops on musa tensors, with CUDA's dtypes: statistics in float32
// (the accumulation type) for half/bfloat16 inputs, elementwise results in
// the input's dtype.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <vector>

#include "core/device.h"

namespace torch_musa {
namespace {

// Every dimension but the channel one (dim 1).
std::vector<int64_t> reduce_dims(const at::Tensor& x) {
  std::vector<int64_t> dims{0};
  for (int64_t d = 2; d < x.dim(); ++d) dims.push_back(d);
  return dims;
}

// A per-channel vector shaped to broadcast over x.
at::Tensor per_channel(const at::Tensor& v, const at::Tensor& x) {
  std::vector<int64_t> shape(x.dim(), 1);
  shape[1] = x.size(1);
  return v.view(shape);
}

at::ScalarType acc_type(const at::Tensor& x) {
  auto t = x.scalar_type();
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

std::tuple<at::Tensor, at::Tensor> stats(const at::Tensor& input, double eps) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto x = input.to(acc_type(input));
  auto dims = reduce_dims(x);
  auto var_mean = at::var_mean(x, dims, /*correction=*/0, /*keepdim=*/false);
  return {std::get<1>(var_mean), (std::get<0>(var_mean) + eps).rsqrt()};
}

at::Tensor elemt(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                 const std::optional<at::Tensor>& bias, const at::Tensor& mean, const at::Tensor& invstd, double) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto x = input.to(acc_type(input));
  auto y = (x - per_channel(mean, x)) * per_channel(invstd, x);
  if (weight && weight->defined()) y = y * per_channel(weight->to(y.scalar_type()), x);
  if (bias && bias->defined()) y = y + per_channel(bias->to(y.scalar_type()), x);
  return y.to(input.scalar_type()).contiguous(input.suggest_memory_format());
}

std::tuple<at::Tensor, at::Tensor> gather_stats_with_counts(const at::Tensor&, const at::Tensor& mean,
                                                            const at::Tensor& invstd,
                                                            const std::optional<at::Tensor>& running_mean,
                                                            const std::optional<at::Tensor>& running_var,
                                                            double momentum, double eps, const at::Tensor& counts) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto n = counts.to(mean.scalar_type()).unsqueeze(1);  // [world, 1]
  auto total = n.sum();
  auto global_mean = (mean * n).sum(0) / total;
  auto local_var = invstd.pow(-2) - eps;
  auto global_var = ((local_var + (mean - global_mean).pow(2)) * n).sum(0) / total;
  if (running_mean && running_mean->defined()) {
    running_mean->mul_(1 - momentum).add_(global_mean.to(running_mean->scalar_type()), momentum);
  }
  if (running_var && running_var->defined()) {
    auto unbiased = global_var * total / (total - 1);
    running_var->mul_(1 - momentum).add_(unbiased.to(running_var->scalar_type()), momentum);
  }
  return {global_mean, (global_var + eps).rsqrt()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> backward_reduce(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& invstd,
    const std::optional<at::Tensor>& weight, bool input_g, bool weight_g, bool bias_g) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto acc = acc_type(input);
  auto dy = grad_out.to(acc), x = input.to(acc);
  auto dims = reduce_dims(x);
  auto sum_dy = dy.sum(dims);
  auto sum_dy_xmu = (dy * (x - per_channel(mean, x))).sum(dims);
  at::Tensor grad_weight, grad_bias;
  auto wtype = weight && weight->defined() ? weight->scalar_type() : acc;
  if (weight_g) grad_weight = (sum_dy_xmu * invstd).to(wtype);
  if (bias_g) grad_bias = sum_dy.to(wtype);
  if (!input_g) sum_dy = sum_dy_xmu = at::Tensor();
  return {sum_dy, sum_dy_xmu, grad_weight, grad_bias};
}

at::Tensor backward_elemt(const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean,
                          const at::Tensor& invstd, const std::optional<at::Tensor>& weight, const at::Tensor& sum_dy,
                          const at::Tensor& sum_dy_xmu, const at::Tensor& count) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  auto acc = acc_type(input);
  auto dy = grad_out.to(acc), x = input.to(acc);
  auto n = count.to(acc).sum();
  auto inv = per_channel(invstd, x);
  auto g = dy - per_channel(sum_dy, x) / n - (x - per_channel(mean, x)) * inv * inv * per_channel(sum_dy_xmu, x) / n;
  g = g * inv;
  if (weight && weight->defined()) g = g * per_channel(weight->to(acc), x);
  return g.to(input.scalar_type()).contiguous(input.suggest_memory_format());
}

}  // namespace

// Registered at module init, for the host driver only (the cuda driver has ATen's kernels).
void register_host_sync_batch_norm() {
  if (!is_host_driver()) return;
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  lib->impl("batch_norm_stats", TORCH_FN(stats));
  lib->impl("batch_norm_elemt", TORCH_FN(elemt));
  lib->impl("batch_norm_gather_stats_with_counts", TORCH_FN(gather_stats_with_counts));
  lib->impl("batch_norm_backward_reduce", TORCH_FN(backward_reduce));
  lib->impl("batch_norm_backward_elemt", TORCH_FN(backward_elemt));
}

}  // namespace torch_musa
