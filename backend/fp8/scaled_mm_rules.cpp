// torch._scaled_mm's rules on the host driver. ATen's CPU kernel accepts any
// layout, any size and any out dtype; cuBLASLt (the cuda driver, and musa
// GPUs) does not. Checking CUDA's rules here, with torch's wording, means a
// program tested on the host driver runs unchanged on a GPU. Then the op
// runs through the op layer as any other.
#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "core/device.h"
#include "fp8/fp8.h"
#include "ops/delegation.h"

namespace torch_musa::fp8 {
namespace {

using at::Tensor;

bool is_fp8(c10::ScalarType t) { return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2; }
bool row_major(const Tensor& t) { return t.stride(0) > t.stride(1) && t.stride(1) == 1; }
bool col_major(const Tensor& t) { return t.stride(0) == 1 && t.stride(1) > 1; }
bool has_zero_dim(const Tensor& t) { return t.size(0) == 0 || t.size(1) == 0; }

void check_scales(const Tensor& a, const Tensor& b, const Tensor& sa, const Tensor& sb, c10::ScalarType out) {
  const int64_t m = a.size(0), n = b.size(1);
  if (sa.numel() == 1 && sb.numel() == 1) {
    TORCH_CHECK(sa.scalar_type() == at::kFloat && sb.scalar_type() == at::kFloat,
                "For tensorwise scaling, both scale_a and scale_b must be float (fp32) tensors.");
    return;
  }
  TORCH_CHECK(sa.scalar_type() == at::kFloat && sb.scalar_type() == at::kFloat,
              "For rowwise scaling, both scale_a and scale_b must be float (fp32) tensors.");
  TORCH_CHECK(sa.dim() == 2 && sb.dim() == 2, "For non-tensorwise scaling, scale tensors must be 2D, but got ",
              "scale_a.dim()=", sa.dim(), " and scale_b.dim()=", sb.dim());
  TORCH_CHECK(sa.size(0) == m && sa.size(1) == 1 && sb.size(0) == 1 && sb.size(1) == n,
              "Invalid scaling configuration. For tensorwise scaling, both scales should be scalar. For rowwise "
              "scaling, scale_a should be (", m, ", 1), scale_b should be (1, ", n, "). Got scale_a.size()=(",
              sa.size(0), ", ", sa.size(1), ") and scale_b.size()=(", sb.size(0), ", ", sb.size(1),
              "). (The host driver runs tensorwise and rowwise scaling; blockwise scaling needs a GPU.)");
  TORCH_CHECK(sa.is_contiguous() && sb.is_contiguous(),
              "Both scale_a and scale_b must be contiguous for rowwise scaling.");
  TORCH_CHECK(out == at::kBFloat16, "Only bf16 high precision output types are supported for row-wise scaling.");
}

void check_bias(const std::optional<Tensor>& bias, int64_t n, c10::ScalarType out) {
  if (!bias || !bias->defined()) return;
  TORCH_CHECK(bias->numel() == n, "Bias must be size ", n, " but got ", bias->numel());
  const auto t = bias->scalar_type();
  TORCH_CHECK(t == at::kBFloat16 || t == at::kHalf, "Bias must be either Half or BFloat16, but got ", t);
  TORCH_CHECK((out != at::kFloat && out != at::kBFloat16) || t == at::kBFloat16, "Bias must be BFloat16 to compute ",
              out, " output, but got ", t);
  TORCH_CHECK(out != at::kHalf || t == at::kHalf, "Bias must be Float16 to compute ", out, " output, but got ", t);
}

void check(const Tensor& a, const Tensor& b, const Tensor& sa, const Tensor& sb, const std::optional<Tensor>& bias,
           std::optional<c10::ScalarType> out_dtype) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "Inputs must be 2D but got self.dim()=", a.dim(),
              " and mat2.dim()=", b.dim());
  TORCH_CHECK(is_fp8(a.scalar_type()) && is_fp8(b.scalar_type()),
              "Expected both inputs to be fp8 types but got self.dtype=", a.scalar_type(),
              " and mat2.dtype=", b.scalar_type());
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", b.size(0), "x", b.size(1), ")");
  TORCH_CHECK_VALUE(!(a.scalar_type() == at::kFloat8_e5m2 && b.scalar_type() == at::kFloat8_e5m2),  // (ValueError, as CUDA's)
              "Multiplication of two Float8_e5m2 matrices is not supported");
  // cuBLASLt's wording, with which operand is wrong and how to fix it.
  TORCH_CHECK(row_major(a) || has_zero_dim(a), "Only multiplication of row-major and column-major matrices is "
              "supported by cuBLASLt: self must be row_major, got stride ", a.strides(), " (use self.contiguous())");
  TORCH_CHECK(col_major(b) || has_zero_dim(b), "Only multiplication of row-major and column-major matrices is "
              "supported by cuBLASLt: mat2 must be col_major, got stride ", b.strides(),
              " (pass a transposed row-major matrix: w.t() for a weight w of shape (N, K))");
  TORCH_CHECK(a.size(1) % 16 == 0, "Expected self.size(1) to be divisible by 16, but got self.size(1)=", a.size(1));
  TORCH_CHECK(b.size(0) % 16 == 0 && b.size(1) % 16 == 0,
              "Expected both dimensions of mat2 to be divisible by 16 but got ", b.sizes());
  const auto out = out_dtype.value_or(a.scalar_type());
  TORCH_CHECK(out == at::kBFloat16 || out == at::kHalf || out == at::kFloat || is_fp8(out),
              "_scaled_mm: out_dtype must be bfloat16, float16, float32 or a float8 type, got ", out);
  check_scales(a, b, sa, sb, out);
  check_bias(bias, b.size(1), out);
}

// Boxed, so the op then continues through the op layer's generic path.
void scaled_mm_checked(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  auto arg = [&](size_t i) -> const c10::IValue& { return (*stack)[stack->size() - nargs + i]; };
  std::optional<Tensor> bias = arg(4).isNone() ? std::nullopt : std::optional<Tensor>(arg(4).toTensor());
  std::optional<c10::ScalarType> out_dtype;
  if (!arg(6).isNone()) out_dtype = arg(6).toScalarType();
  if (nargs > 8 && arg(8).isTensor()) {  // _scaled_mm.out
    const auto& out = arg(8).toTensor();
    TORCH_CHECK(!out_dtype || *out_dtype == out.scalar_type(), "out_dtype must match output matrix type");
    out_dtype = out.scalar_type();
  }
  check(arg(0).toTensor(), arg(1).toTensor(), arg(2).toTensor(), arg(3).toTensor(), bias, out_dtype);
  op_layer::boxed_delegate(op, ks, stack);
}

}  // namespace

void register_host_scaled_mm_rules() {
  if (!is_host_driver()) return;
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const char* name : {"_scaled_mm", "_scaled_mm.out"})
    lib->impl(name, torch::CppFunction::makeFromBoxedFunction<&scaled_mm_checked>());
}

}  // namespace torch_musa::fp8
