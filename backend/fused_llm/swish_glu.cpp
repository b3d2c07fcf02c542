// SwishGLU's CPU kernels (host driver): input (..., 2n) split in halves (a, b),
//   y = silu(a) * b,   da = g * b * sig(a) * (1 + a * (1 - sig(a))),   db = g * silu(a)
// in float, one pass over each row. gated_silu is the same function.
#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "fused_llm/fused_llm.h"

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;

int64_t check_glu(const Tensor& x, const char* op) {
  check_float_input(x, op, "the input");
  TORCH_CHECK_VALUE(x.dim() >= 1 && x.size(-1) % 2 == 0, "musa_fused::", op,
                    ": the input's last dimension must be even (two halves), got ", x.sizes());
  return x.size(-1) / 2;
}

Tensor swiglu_forward_cpu(const Tensor& x_in) {
  const int64_t n = check_glu(x_in, "_fused_swiglu_forward");
  const Tensor x = x_in.contiguous();
  auto sizes = x.sizes().vec();
  sizes.back() = n;
  Tensor y = at::empty(sizes, x.options());
  const int64_t rows = n ? x.numel() / (2 * n) : 0;
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* px = x.const_data_ptr<T>();
    T* py = y.mutable_data_ptr<T>();
    at::parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> a(n), v(n);
      for (int64_t r = b; r < e; ++r) {
        load_row(px + r * 2 * n, a.data(), n);
        load_row(px + r * 2 * n + n, v.data(), n);
        for (int64_t i = 0; i < n; ++i) a[i] = a[i] / (1.f + std::exp(-a[i])) * v[i];
        store_row(a.data(), py + r * n, n);
      }
    });
  });
  return y;
}

Tensor swiglu_backward_cpu(const Tensor& g_in, const Tensor& x_in) {
  const int64_t n = check_glu(x_in, "_fused_swiglu_backward");
  check_float_input(g_in, "_fused_swiglu_backward", "grad");
  TORCH_CHECK_VALUE(g_in.numel() * 2 == x_in.numel(), "musa_fused::_fused_swiglu_backward: grad ", g_in.sizes(),
                    " does not match the input ", x_in.sizes());
  const Tensor x = x_in.contiguous(), g = g_in.to(x.scalar_type()).contiguous();
  Tensor dx = at::empty(x.sizes(), x.options());
  const int64_t rows = n ? x.numel() / (2 * n) : 0;
  dispatch_float(x.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T *px = x.const_data_ptr<T>(), *pg = g.const_data_ptr<T>();
    T* pd = dx.mutable_data_ptr<T>();
    at::parallel_for(0, rows, std::max<int64_t>(1, 8192 / std::max<int64_t>(n, 1)), [&](int64_t b, int64_t e) {
      std::vector<float> a(n), v(n), gr(n);
      for (int64_t r = b; r < e; ++r) {
        load_row(px + r * 2 * n, a.data(), n);
        load_row(px + r * 2 * n + n, v.data(), n);
        load_row(pg + r * n, gr.data(), n);
        for (int64_t i = 0; i < n; ++i) {
          const float sg = 1.f / (1.f + std::exp(-a[i]));
          const float da = gr[i] * v[i] * sg * (1.f + a[i] * (1.f - sg));
          v[i] = gr[i] * a[i] * sg;
          a[i] = da;
        }
        store_row(a.data(), pd + r * 2 * n, n);
        store_row(v.data(), pd + r * 2 * n + n, n);
      }
    });
  });
  return dx;
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, CPU, m) {
  m.impl("_fused_swiglu_forward", TORCH_FN(swiglu_forward_cpu));
  m.impl("_fused_swiglu_backward", TORCH_FN(swiglu_backward_cpu));
}

}  // namespace torch_musa::fused_llm
