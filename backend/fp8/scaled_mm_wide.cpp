// torch._scaled_mm for the calls cuBLASLt has no kernel for (scaled_mm_rules.cpp
// picks them), on either driver, with the CPU kernel's arithmetic:
//   out = saturate_cast((self * scale_a) @ (mat2 * scale_b) + bias) / scale_result)
// where scale_result applies to float8 outputs only.
#include <ATen/ATen.h>

#include <limits>

#include "fp8/fp8.h"

namespace torch_musa::fp8 {
namespace {

using at::Tensor;

// A scale of one element per row (or column) as a column (or row) that broadcasts over (M, N).
Tensor as_column(const Tensor& s) { return s.numel() == 1 ? s.reshape({}) : s.reshape({-1, 1}); }
Tensor as_row(const Tensor& s) { return s.numel() == 1 ? s.reshape({}) : s.reshape({1, -1}); }

double float8_max(c10::ScalarType t) {
  return t == at::kFloat8_e4m3fn ? static_cast<double>(std::numeric_limits<c10::Float8_e4m3fn>::max())
                                 : static_cast<double>(std::numeric_limits<c10::Float8_e5m2>::max());
}

// self @ mat2 unscaled, in float32: cuBLASLt's float8 GEMM where it takes the pair (any layout
// made row-/column-major), else a float32 GEMM, which is exact per product (float8 values,
// and their products, are exact in float32 and TF32).
Tensor unscaled_product(const Tensor& a, const Tensor& b, bool fast_accum) {
  if (a.scalar_type() == at::kFloat8_e5m2 && b.scalar_type() == at::kFloat8_e5m2)
    return at::mm(a.to(at::kFloat), b.to(at::kFloat));
  const Tensor one = at::ones({}, a.options().dtype(at::kFloat));
  return at::_scaled_mm(a.contiguous(), b.t().contiguous().t(), one, one, std::nullopt, std::nullopt, at::kFloat,
                        fast_accum);
}

}  // namespace

Tensor scaled_mm_wide(const Tensor& a, const Tensor& b, const Tensor& sa, const Tensor& sb,
                      const std::optional<Tensor>& bias, const std::optional<Tensor>& scale_result,
                      c10::ScalarType out, bool fast_accum) {
  const bool both_e5m2 = a.scalar_type() == at::kFloat8_e5m2 && b.scalar_type() == at::kFloat8_e5m2;
  const bool rowwise = sa.numel() != 1 || sb.numel() != 1;
  const bool per_row_result = scale_result && scale_result->defined() && scale_result->numel() != 1;
  if (!both_e5m2 && (!rowwise || out == at::kBFloat16) && !per_row_result)  // only the layout is cuBLASLt's problem
    return at::_scaled_mm(a.contiguous(), b.t().contiguous().t(), sa, sb, bias, scale_result, out, fast_accum);
  Tensor acc = unscaled_product(a, b, fast_accum);
  acc.mul_(as_column(sa)).mul_(as_row(sb));
  if (bias && bias->defined()) acc.add_(bias->to(at::kFloat));
  if (!c10::isFloat8Type(out)) return acc.to(out);
  if (scale_result && scale_result->defined()) acc.div_(as_column(*scale_result));
  const double max = float8_max(out);
  return acc.clamp_(-max, max).to(out);
}

}  // namespace torch_musa::fp8
