// Fused RMSNorm's CPU kernels (host driver), torch_musa's _fused_rmsnorm_forward/backward:
// over the last len(normalized_shape) dimensions (N features per row),
//   invvar = 1 / sqrt(mean(x^2) + eps)   (float32, one per row)
//   y = x * invvar * w
//   dx = invvar * (g w - xhat * mean(g w xhat)),   xhat = x * invvar
//   dw = sum over rows of g * xhat   (per-thread float partial sums, then added)
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "fused_llm/fused_llm.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

int64_t check_rms(const Tensor& x, c10::SymIntArrayRef shape, const std::optional<Tensor>& w, const char* op) {
  check_float_input(x, op, "the input");
  const int64_t k = static_cast<int64_t>(shape.size());
  TORCH_CHECK_VALUE(k >= 1 && k <= x.dim(), "musa_fused::", op, ": normalized_shape ", shape,
                    " must name 1 to input.dim() trailing dimensions of the input ", x.sizes());
  int64_t n = 1;
  for (int64_t i = 0; i < k; ++i) {
    TORCH_CHECK_VALUE(shape[i] == x.sym_size(x.dim() - k + i), "musa_fused::", op, ": normalized_shape ", shape,
                      " does not match the input's trailing dimensions ", x.sizes());
    n *= x.size(x.dim() - k + i);
  }
  if (w && w->defined()) {
    TORCH_CHECK_VALUE(w->numel() == n, "musa_fused::", op, ": weight ", w->sizes(), " must have normalized_shape ",
                      shape);
    TORCH_CHECK_VALUE(w->scalar_type() == x.scalar_type(), "musa_fused::", op, ": weight is ", w->scalar_type(),
                      ", the input ", x.scalar_type(), "; they must match (cast the weight or use autocast)");
  }
  return n;
}

std::vector<int64_t> row_shape(const Tensor& x, int64_t k) {
  return std::vector<int64_t>(x.sizes().begin(), x.sizes().end() - k);
}

std::tuple<Tensor, Tensor> rmsnorm_forward_cpu(const Tensor& x_in, c10::SymIntArrayRef shape, double eps,
                                               const std::optional<Tensor>& w_in) {
  const int64_t n = check_rms(x_in, shape, w_in, "_fused_rmsnorm_forward");
  const Tensor x = x_in.contiguous();
  const bool has_w = w_in && w_in->defined();
  const Tensor w = has_w ? w_in->to(at::kFloat).contiguous() : Tensor();
  Tensor y = at::empty(x.sizes(), x.options());
  Tensor invvar = at::empty(row_shape(x, shape.size()), x.options().dtype(at::kFloat));
  const int64_t rows = n ? x.numel() / n : 0;
  const float* pw = has_w ? w.const_data_ptr<float>() : nullptr;
  float* pv = invvar.mutable_data_ptr<float>();
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.const_data_ptr<T>();
    T* py = y.mutable_data_ptr<T>();
    at::parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> row(n);
      for (int64_t r = b; r < e; ++r) {
        load_row(px + r * n, row.data(), n);
        float ss = 0.f;
        for (int64_t i = 0; i < n; ++i) ss += row[i] * row[i];
        const float iv = 1.f / std::sqrt(ss / static_cast<float>(n) + static_cast<float>(eps));
        pv[r] = iv;
        if (pw) for (int64_t i = 0; i < n; ++i) row[i] = row[i] * iv * pw[i];
        else for (int64_t i = 0; i < n; ++i) row[i] *= iv;
        store_row(row.data(), py + r * n, n);
      }
    });
  });
  return {y, invvar};
}

std::tuple<Tensor, Tensor> rmsnorm_backward_cpu(const Tensor& g_in, const Tensor& invvar_in, const Tensor& x_in,
                                                c10::SymIntArrayRef shape, double eps,
                                                const std::optional<Tensor>& w_in) {
  const int64_t n = check_rms(x_in, shape, w_in, "_fused_rmsnorm_backward");
  const Tensor x = x_in.contiguous(), g = g_in.to(x.scalar_type()).contiguous();
  const Tensor invvar = invvar_in.to(at::kFloat).contiguous();
  const bool has_w = w_in && w_in->defined();
  const Tensor w = has_w ? w_in->to(at::kFloat).contiguous() : Tensor();
  const int64_t rows = n ? x.numel() / n : 0;
  TORCH_CHECK_VALUE(invvar.numel() == rows, "musa_fused::_fused_rmsnorm_backward: invvar has ", invvar.numel(),
                    " elements, the input ", rows, " rows");
  Tensor dx = at::empty(x.sizes(), x.options());
  const int nthreads = at::get_num_threads();
  std::vector<float> dw_parts(has_w ? static_cast<size_t>(nthreads) * n : 0, 0.f);
  const float* pw = has_w ? w.const_data_ptr<float>() : nullptr;
  const float* pv = invvar.const_data_ptr<float>();
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T *px = x.const_data_ptr<T>(), *pg = g.const_data_ptr<T>();
    T* pd = dx.mutable_data_ptr<T>();
    at::parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> xr(n), gr(n);
      float* dw = pw ? dw_parts.data() + static_cast<size_t>(at::get_thread_num()) * n : nullptr;
      for (int64_t r = b; r < e; ++r) {
        load_row(px + r * n, xr.data(), n);
        load_row(pg + r * n, gr.data(), n);
        const float iv = pv[r];
        float dot = 0.f;
        for (int64_t i = 0; i < n; ++i) {
          xr[i] *= iv;  // xhat
          if (dw) dw[i] += gr[i] * xr[i];
          if (pw) gr[i] *= pw[i];
          dot += gr[i] * xr[i];
        }
        const float m = dot / static_cast<float>(n);
        for (int64_t i = 0; i < n; ++i) gr[i] = iv * (gr[i] - xr[i] * m);
        store_row(gr.data(), pd + r * n, n);
      }
    });
  });
  Tensor dw;
  if (has_w) {
    Tensor acc = at::zeros({n}, x.options().dtype(at::kFloat));
    float* pa = acc.mutable_data_ptr<float>();
    for (int t = 0; t < nthreads; ++t)
      for (int64_t i = 0; i < n; ++i) pa[i] += dw_parts[static_cast<size_t>(t) * n + i];
    dw = acc.to(w_in->scalar_type()).reshape(w_in->sizes());
  } else {
    dw = at::empty({0}, x.options());
  }
  return {dx, dw};
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CPU, m) {
  m.impl("_fused_rmsnorm_forward", TORCH_FN(rmsnorm_forward_cpu));
  m.impl("_fused_rmsnorm_backward", TORCH_FN(rmsnorm_backward_cpu));
}

}  // namespace torch_musa::fused_llm
