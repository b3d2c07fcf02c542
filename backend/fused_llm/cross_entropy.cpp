// Fused 2-D cross entropy's CPU kernels (host driver). Logits (M, C), class
// indices (M,); per row, in float:
//   lse = log sum exp(x),   row_loss = w[t] * (lse - x[t])   (0 where t == ignore_index)
// then the reduction: none (the rows), sum, or mean = sum / denom, where denom is
// the sum of w[t] over the non-ignored rows (their count without weights).
//   backward: dx[j] = g_r * w[t] * (exp(x[j] - lse) - [j == t]),
//   g_r = grad[r] (none), grad (sum), grad / denom (mean).
// The saved lse spares recomputing it backward.
#include <torch/library.h>

#include <ATen/Dispatch.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "fused_llm/cross_entropy.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

// Class index of row r, or -1 for an ignored row; out of range is an error, as nll_loss's.
int64_t class_of(const int64_t* pt, int64_t r, int64_t C, int64_t ignore_index) {
  const int64_t c = pt[r];
  if (c == ignore_index) return -1;
  TORCH_CHECK_INDEX(c >= 0 && c < C, "musa_fused::cross_entropy: target ", c, " is out of bounds for ", C,
                    " classes");
  return c;
}

// Each row's class (an ignored row's reads class 0; its loss and gradient are zeroed), whether
// it is ignored, and its weight: w[t], 1 without weights, 0 for an ignored row.
struct Rows {
  Tensor safe, ignored, weight;
};

Rows classes_and_weights(const Tensor& t, const std::optional<Tensor>& w_in, int64_t C, int64_t ignore_index) {
  const int64_t M = t.size(0);
  Rows rows{at::empty({M}, t.options()), at::empty({M}, t.options().dtype(at::kBool)),
            at::empty({M}, t.options().dtype(at::kFloat))};
  const int64_t* pt = t.const_data_ptr<int64_t>();
  int64_t* ps = rows.safe.mutable_data_ptr<int64_t>();
  bool* pi = rows.ignored.mutable_data_ptr<bool>();
  float* pw = rows.weight.mutable_data_ptr<float>();
  for (int64_t r = 0; r < M; ++r) {
    const int64_t c = class_of(pt, r, C, ignore_index);
    ps[r] = c < 0 ? 0 : c;
    pi[r] = c < 0;
    pw[r] = c < 0 ? 0.f : 1.f;
  }
  if (w_in && w_in->defined()) rows.weight.mul_(w_in->to(at::kFloat).index_select(0, rows.safe));
  return rows;
}

// Small inputs (the usual classifier's loss) take loops over the rows instead: the ATen path's
// dozen ops cost 1-2 µs of dispatch each and, on a busy machine, their thread pool's wake-ups far
// more (forward (64, 10): 40 µs, against 6 µs for the native CPU's whole F.cross_entropy). Past
// kDirectMax elements the arithmetic dominates.
constexpr int64_t kDirectMax = 1 << 14;

bool direct_applies(const Tensor& x, const Tensor& t, const std::optional<Tensor>& w) {
  return x.size(1) > 0 && x.numel() <= kDirectMax && x.is_contiguous() && t.scalar_type() == at::kLong &&
         t.is_contiguous() && (!w || !w->defined() || w->is_contiguous());
}

// Per-class weights as float (nullptr without weights).
Tensor float_weight(const std::optional<Tensor>& w) {
  return w && w->defined() ? w->to(at::kFloat).contiguous() : Tensor();
}

// The exps: a scalar std::exp per element for the smallest inputs, where one more ATen op costs
// more (forward (64, 10): 14 against 23 µs); past kScalarExpMax ATen's vectorized log_softmax /
// softmax, one op each (forward (8, 1000): 21 against 43 µs with the scalar loop).
constexpr int64_t kScalarExpMax = 2048;

Tensor log_softmax_rows(const Tensor& xf) {
  if (xf.numel() > kScalarExpMax) return at::_log_softmax(xf, 1, false);
  const int64_t M = xf.size(0), C = xf.size(1);
  Tensor out = at::empty_like(xf);
  const float* px = xf.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (int64_t r = 0; r < M; ++r) {
    const float* row = px + r * C;
    const float mx = *std::max_element(row, row + C);
    float s = 0.f;
    for (int64_t j = 0; j < C; ++j) s += std::exp(row[j] - mx);
    const float shift = mx + std::log(s);
    for (int64_t j = 0; j < C; ++j) po[r * C + j] = row[j] - shift;
  }
  return out;
}

Tensor softmax_rows(const Tensor& xf, const Tensor& lse_in) {
  if (xf.numel() > kScalarExpMax) return at::_softmax(xf, 1, false);
  const int64_t M = xf.size(0), C = xf.size(1);
  const Tensor lse = lse_in.to(at::kFloat).contiguous();
  Tensor out = at::empty_like(xf);
  const float *px = xf.const_data_ptr<float>(), *pl = lse.const_data_ptr<float>();
  float* po = out.mutable_data_ptr<float>();
  for (int64_t r = 0; r < M; ++r)
    for (int64_t j = 0; j < C; ++j) po[r * C + j] = std::exp(px[r * C + j] - pl[r]);
  return out;
}

std::tuple<Tensor, Tensor, Tensor> ce_forward_direct(const Tensor& x, const Tensor& t, const std::optional<Tensor>& w_in,
                                                     int64_t ignore_index, int64_t reduction,
                                                     at::ScalarType out_dtype) {
  const int64_t M = x.size(0), C = x.size(1);
  const Tensor w = float_weight(w_in), xf = x.to(at::kFloat), logp = log_softmax_rows(xf);
  const float* pw = w.defined() ? w.const_data_ptr<float>() : nullptr;
  const float* px = xf.const_data_ptr<float>();
  const float* pp = logp.const_data_ptr<float>();
  const int64_t* pt = t.const_data_ptr<int64_t>();
  const auto f32 = x.options().dtype(at::kFloat);
  Tensor lse = at::empty({M}, f32), denom = at::empty({}, f32);
  Tensor rows = at::empty({reduction == kNone ? M : 0}, f32);
  float* pl = lse.mutable_data_ptr<float>();
  float* pr = rows.mutable_data_ptr<float>();
  float sum = 0.f, den = 0.f;
  for (int64_t r = 0; r < M; ++r) {
    const float *row = px + r * C, *lrow = pp + r * C;
    // lse = x - log_softmax(x), read at the row's largest logit, where log_softmax is nearest 0
    int64_t top = 0;
    for (int64_t j = 1; j < C; ++j) top = row[j] > row[top] ? j : top;
    pl[r] = row[top] - lrow[top];
    const int64_t c = class_of(pt, r, C, ignore_index);
    const float wr = c < 0 ? 0.f : (pw ? pw[c] : 1.f);
    const float loss = c < 0 ? 0.f : -lrow[c] * wr;
    if (reduction == kNone) pr[r] = loss;
    sum += loss;
    den += wr;
  }
  *denom.mutable_data_ptr<float>() = den;
  Tensor loss = reduction == kNone ? rows
                                   : at::scalar_tensor(reduction == kSum ? sum : sum / den, f32);
  return {loss.to(out_dtype), lse, denom};
}

template <class T>
Tensor ce_backward_direct(const Tensor& grad_loss, const Tensor& x, const Tensor& t, const Tensor& lse,
                          const Tensor& denom, const std::optional<Tensor>& w_in, int64_t ignore_index,
                          int64_t reduction) {
  const int64_t M = x.size(0), C = x.size(1);
  const Tensor w = float_weight(w_in);
  const float* pw = w.defined() ? w.const_data_ptr<float>() : nullptr;
  const Tensor g = grad_loss.to(at::kFloat).reshape({-1}).contiguous();
  const float* pg = g.const_data_ptr<float>();
  const float g0 = reduction == kMean ? pg[0] / denom.to(at::kFloat).item<float>() : pg[0];
  const Tensor prob = softmax_rows(x.to(at::kFloat), lse);
  const float* pp = prob.const_data_ptr<float>();
  const int64_t* pt = t.const_data_ptr<int64_t>();
  Tensor dx = at::empty({M, C}, x.options());
  T* pd = dx.mutable_data_ptr<T>();
  for (int64_t r = 0; r < M; ++r) {
    const int64_t c = class_of(pt, r, C, ignore_index);
    // 0 for ignored rows, also where the mean's denominator is 0 (every row ignored)
    const float scale = c < 0 ? 0.f : (reduction == kNone ? pg[r] : g0) * (pw ? pw[c] : 1.f);
    const float* prow = pp + r * C;
    T* out = pd + r * C;
    for (int64_t j = 0; j < C; ++j) out[j] = static_cast<T>(j == c ? prow[j] * scale - scale : prow[j] * scale);
  }
  return dx;
}

// The kernels are ATen's vectorized CPU ones over the whole (M, C) block (logsumexp, exp,
// gather, scatter_add): a loop of scalar std::exp per element was 4x slower than the
// native CPU's log_softmax + nll_loss.
std::tuple<Tensor, Tensor, Tensor> ce_forward_cpu(const Tensor& x_in, const Tensor& t_in,
                                                  const std::optional<Tensor>& w_in, int64_t ignore_index,
                                                  int64_t reduction, std::optional<at::ScalarType> loss_dtype) {
  check_ce(x_in, t_in, w_in, reduction, "_fused_cross_entropy_2d_forward");
  if (direct_applies(x_in, t_in, w_in)) {
    return ce_forward_direct(x_in, t_in, w_in, ignore_index, reduction, loss_dtype.value_or(x_in.scalar_type()));
  }
  const Tensor x = x_in.to(at::kFloat), t = t_in.to(at::kLong).contiguous();
  const Rows r = classes_and_weights(t, w_in, x.size(1), ignore_index);
  Tensor lse = x.size(1) ? at::logsumexp(x, {1})
                         : at::full({x.size(0)}, -std::numeric_limits<double>::infinity(), x.options());
  Tensor rows = x.size(1) ? lse - x.gather(1, r.safe.unsqueeze(1)).squeeze(1) : at::zeros_like(lse);
  // (an ignored row's loss is 0, also where its logits are not finite)
  rows = at::where(r.ignored, at::zeros_like(rows), rows * r.weight);
  const auto out_dtype = loss_dtype.value_or(x_in.scalar_type());
  Tensor denom = r.weight.sum();
  Tensor loss = reduction == kNone ? rows.to(out_dtype)
                : reduction == kSum ? rows.sum().to(out_dtype)
                                    : (rows.sum() / denom).to(out_dtype);
  return {loss, lse, denom};
}

Tensor ce_backward_cpu(const Tensor& grad_loss, const Tensor& x_in, const Tensor& t_in, const Tensor& lse,
                       const Tensor& denom, const std::optional<Tensor>& w_in, int64_t ignore_index,
                       int64_t reduction) {
  check_ce(x_in, t_in, w_in, reduction, "_fused_cross_entropy_2d_backward");
  check_grad_loss(grad_loss, x_in.size(0), reduction);
  if (direct_applies(x_in, t_in, w_in)) {
    return AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, x_in.scalar_type(), "ce_backward_direct", [&] {
      return ce_backward_direct<scalar_t>(grad_loss, x_in, t_in, lse, denom, w_in, ignore_index, reduction);
    });
  }
  const Tensor t = t_in.to(at::kLong).contiguous();
  const Rows r = classes_and_weights(t, w_in, x_in.size(1), ignore_index);
  Tensor g = grad_loss.to(at::kFloat).reshape({-1});
  if (reduction == kMean) g = g / denom.to(at::kFloat);
  // (M, 1); 0 for ignored rows, also where the mean's denominator is 0 (every row ignored)
  const Tensor scale = at::where(r.ignored, at::zeros_like(r.weight), g * r.weight).unsqueeze(1);
  Tensor dx = at::exp(x_in.to(at::kFloat) - lse.to(at::kFloat).unsqueeze(1));
  dx.mul_(scale);
  if (x_in.size(1)) dx.scatter_add_(1, r.safe.unsqueeze(1), -scale);
  return dx.to(x_in.scalar_type()).contiguous();
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CPU, m) {
  m.impl("_fused_cross_entropy_2d_forward", TORCH_FN(ce_forward_cpu));
  m.impl("_fused_cross_entropy_2d_backward", TORCH_FN(ce_backward_cpu));
}

}  // namespace torch_musa::fused_llm
