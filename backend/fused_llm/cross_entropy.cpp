// Fused 2-D cross entropy's CPU kernels (host driver). Logits (M, C), class
// indices (M,); per row, in float:
//   lse = log sum exp(x),   row_loss = w[t] * (lse - x[t])   (0 where t == ignore_index)
// then the reduction: none (the rows), sum, or mean = sum / denom, where denom is
// the sum of w[t] over the non-ignored rows (their count without weights).
//   backward: dx[j] = g_r * w[t] * (exp(x[j] - lse) - [j == t]),
//   g_r = grad[r] (none), grad (sum), grad / denom (mean).
// One read of the logits forward, one read and one write backward (the saved lse
// spares recomputing it).
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <vector>

#include "fused_llm/fused_llm.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

void check_ce(const Tensor& x, const Tensor& t, const std::optional<Tensor>& w, const char* op) {
  check_float_input(x, op, "the logits");
  TORCH_CHECK_VALUE(x.dim() == 2, "musa_fused::", op, ": the logits must be 2-D (rows, classes), got ", x.sizes());
  TORCH_CHECK_VALUE(t.dim() == 1 && t.size(0) == x.size(0) && !t.is_floating_point(), "musa_fused::", op,
                    ": the target must be ", x.size(0), " class indices (1-D integer), got ", t.sizes(), " ",
                    t.scalar_type());
  TORCH_CHECK_VALUE(!w || !w->defined() || w->numel() == x.size(1), "musa_fused::", op,
                    ": weight must have one entry per class (", x.size(1), "), got ", w->sizes());
}

// Class index of row r, or -1 for an ignored row; out of range is an error, as nll_loss's.
int64_t class_of(const int64_t* pt, int64_t r, int64_t C, int64_t ignore_index) {
  const int64_t c = pt[r];
  if (c == ignore_index) return -1;
  TORCH_CHECK_INDEX(c >= 0 && c < C, "musa_fused::cross_entropy: target ", c, " is out of bounds for ", C,
                    " classes");
  return c;
}

constexpr int64_t kNone = 0, kMean = 1, kSum = 2;  // aten's reduction enum

void check_reduction(int64_t reduction, const char* op) {
  TORCH_CHECK_VALUE(reduction == kNone || reduction == kMean || reduction == kSum, "musa_fused::", op,
                    ": reduction must be 0 (none), 1 (mean) or 2 (sum), got ", reduction);
}

std::tuple<Tensor, Tensor, Tensor> ce_forward_cpu(const Tensor& x_in, const Tensor& t_in,
                                                  const std::optional<Tensor>& w_in, int64_t ignore_index,
                                                  int64_t reduction, std::optional<at::ScalarType> loss_dtype) {
  check_ce(x_in, t_in, w_in, "_fused_cross_entropy_2d_forward");
  check_reduction(reduction, "_fused_cross_entropy_2d_forward");
  const Tensor x = x_in.contiguous(), t = t_in.to(at::kLong).contiguous();
  const bool has_w = w_in && w_in->defined();
  const Tensor w = has_w ? w_in->to(at::kFloat).contiguous() : Tensor();
  const int64_t M = x.size(0), C = x.size(1);
  Tensor rows = at::empty({M}, x.options().dtype(at::kFloat)), lse = at::empty({M}, x.options().dtype(at::kFloat));
  std::vector<float> row_weight(M);  // w[t] of each non-ignored row, 0 for an ignored one
  float *pl = rows.mutable_data_ptr<float>(), *pe = lse.mutable_data_ptr<float>();
  const int64_t* pt = t.const_data_ptr<int64_t>();
  const float* pw = has_w ? w.const_data_ptr<float>() : nullptr;
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.const_data_ptr<T>();
    at::parallel_for(0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> row(C);
      for (int64_t r = b; r < e; ++r) {
        load_row(px + r * C, row.data(), C);
        float mx = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < C; ++j) mx = std::max(mx, row[j]);
        float s = 0.f;
        for (int64_t j = 0; j < C; ++j) s += std::exp(row[j] - mx);
        pe[r] = mx + std::log(s);
        const int64_t c = class_of(pt, r, C, ignore_index);
        row_weight[r] = c < 0 ? 0.f : (pw ? pw[c] : 1.f);
        pl[r] = c < 0 ? 0.f : row_weight[r] * (pe[r] - row[c]);
      }
    });
  });
  double total = 0, denom = 0;
  for (int64_t r = 0; r < M; ++r) total += pl[r], denom += row_weight[r];
  const auto out_dtype = loss_dtype.value_or(x.scalar_type());
  Tensor loss = reduction == kNone ? rows.to(out_dtype)
                                   : at::scalar_tensor(reduction == kMean ? total / denom : total,
                                                       x.options().dtype(out_dtype));
  return {loss, lse, at::scalar_tensor(denom, x.options().dtype(at::kFloat))};
}

Tensor ce_backward_cpu(const Tensor& grad_loss, const Tensor& x_in, const Tensor& t_in, const Tensor& lse_in,
                       const Tensor& denom, const std::optional<Tensor>& w_in, int64_t ignore_index,
                       int64_t reduction) {
  check_ce(x_in, t_in, w_in, "_fused_cross_entropy_2d_backward");
  check_reduction(reduction, "_fused_cross_entropy_2d_backward");
  const Tensor x = x_in.contiguous(), t = t_in.to(at::kLong).contiguous();
  const int64_t M = x.size(0), C = x.size(1);
  TORCH_CHECK_VALUE(reduction == kNone ? grad_loss.numel() == M : grad_loss.numel() == 1,
                    "musa_fused::_fused_cross_entropy_2d_backward: grad_loss must have ",
                    reduction == kNone ? M : 1, " elements for reduction ", reduction, ", got ", grad_loss.sizes());
  Tensor g = grad_loss.to(at::kFloat).reshape({-1}).contiguous();
  if (reduction == kMean) g = g / denom.to(at::kFloat);
  g = g.expand({M}).contiguous();
  const Tensor lse = lse_in.to(at::kFloat).contiguous();
  const bool has_w = w_in && w_in->defined();
  const Tensor w = has_w ? w_in->to(at::kFloat).contiguous() : Tensor();
  Tensor dx = at::empty(x.sizes(), x.options());
  const int64_t* pt = t.const_data_ptr<int64_t>();
  const float *pg = g.const_data_ptr<float>(), *pe = lse.const_data_ptr<float>();
  const float* pw = has_w ? w.const_data_ptr<float>() : nullptr;
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.const_data_ptr<T>();
    T* pd = dx.mutable_data_ptr<T>();
    at::parallel_for(0, M, std::max<int64_t>(1, 16384 / std::max<int64_t>(C, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> row(C);
      for (int64_t r = b; r < e; ++r) {
        const int64_t c = class_of(pt, r, C, ignore_index);
        const float scale = c < 0 ? 0.f : pg[r] * (pw ? pw[c] : 1.f);
        load_row(px + r * C, row.data(), C);
        for (int64_t j = 0; j < C; ++j) row[j] = scale * std::exp(row[j] - pe[r]);
        if (c >= 0) row[c] -= scale;
        store_row(row.data(), pd + r * C, C);
      }
    });
  });
  return dx;
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CPU, m) {
  m.impl("_fused_cross_entropy_2d_forward", TORCH_FN(ce_forward_cpu));
  m.impl("_fused_cross_entropy_2d_backward", TORCH_FN(ce_backward_cpu));
}

}  // namespace torch_musa::fused_llm
