// torch._scaled_mm's rules on musa. cuBLASLt refuses e5m2 x e5m2, layouts other
// than row-major self / column-major mat2, rowwise scales into anything but
// bf16, and a per-row scale_result; musa accepts them, as torch_musa does, and
// runs them through scaled_mm_wide.cpp. The rest of CUDA's rules (sizes, scale
// and bias dtypes) are checked on the host driver with torch's wording, so a
// program tested there runs unchanged on a GPU. On the cuda driver a call
// cuBLASLt takes goes straight to ATen's kernel, which checks its own rules.
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
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
bool rowwise(const Tensor& sa, const Tensor& sb) { return sa.numel() != 1 || sb.numel() != 1; }
bool per_row_result(const std::optional<Tensor>& sr) { return sr && sr->defined() && sr->numel() != 1; }

// A call cuBLASLt (and so ATen's CUDA kernel) has no kernel for, among 2D float8 ones.
bool needs_wide_path(const Tensor& a, const Tensor& b, const Tensor& sa, const Tensor& sb,
                     const std::optional<Tensor>& scale_result, c10::ScalarType out) {
  if (a.dim() != 2 || b.dim() != 2 || !is_fp8(a.scalar_type()) || !is_fp8(b.scalar_type())) return false;
  return (a.scalar_type() == at::kFloat8_e5m2 && b.scalar_type() == at::kFloat8_e5m2) ||
         !(row_major(a) || has_zero_dim(a)) || !(col_major(b) || has_zero_dim(b)) ||
         (rowwise(sa, sb) && out != at::kBFloat16) || per_row_result(scale_result);
}

void check_scales(const Tensor& a, const Tensor& b, const Tensor& sa, const Tensor& sb) {
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
}

void check_scale_result(const std::optional<Tensor>& sr, int64_t m) {
  if (!sr || !sr->defined()) return;
  TORCH_CHECK(sr->scalar_type() == at::kFloat && (sr->numel() == 1 || sr->numel() == m),
              "scale_result must be a float32 scalar or a float32 tensor of ", m, " elements (one per row of self), "
              "got ", sr->scalar_type(), " with ", sr->numel(), " elements");
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
           const std::optional<Tensor>& scale_result, c10::ScalarType out) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "Inputs must be 2D but got self.dim()=", a.dim(),
              " and mat2.dim()=", b.dim());
  TORCH_CHECK(is_fp8(a.scalar_type()) && is_fp8(b.scalar_type()),
              "Expected both inputs to be fp8 types but got self.dtype=", a.scalar_type(),
              " and mat2.dtype=", b.scalar_type());
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1),
              " and ", b.size(0), "x", b.size(1), ")");
  TORCH_CHECK(a.size(1) % 16 == 0, "Expected self.size(1) to be divisible by 16, but got self.size(1)=", a.size(1));
  TORCH_CHECK(b.size(0) % 16 == 0 && b.size(1) % 16 == 0,
              "Expected both dimensions of mat2 to be divisible by 16 but got ", b.sizes());
  TORCH_CHECK(out == at::kBFloat16 || out == at::kHalf || out == at::kFloat || is_fp8(out),
              "_scaled_mm: out_dtype must be bfloat16, float16, float32 or a float8 type, got ", out);
  check_scales(a, b, sa, sb);
  check_scale_result(scale_result, a.size(0));
  check_bias(bias, b.size(1), out);
}

// Boxed: a call cuBLASLt takes continues through the op layer's generic path.
void scaled_mm(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const size_t nargs = op.schema().arguments().size();
  auto arg = [&](size_t i) -> const c10::IValue& { return (*stack)[stack->size() - nargs + i]; };
  auto optional_tensor = [&](size_t i) { return arg(i).isNone() ? std::nullopt : std::optional<Tensor>(arg(i).toTensor()); };
  const Tensor a = arg(0).toTensor(), b = arg(1).toTensor(), sa = arg(2).toTensor(), sb = arg(3).toTensor();
  const auto bias = optional_tensor(4), scale_result = optional_tensor(5);
  std::optional<c10::ScalarType> out_dtype;
  if (!arg(6).isNone()) out_dtype = arg(6).toScalarType();
  std::optional<Tensor> out_arg;
  if (nargs > 8 && arg(8).isTensor()) {  // _scaled_mm.out
    out_arg = arg(8).toTensor();
    TORCH_CHECK(!out_dtype || *out_dtype == out_arg->scalar_type(), "out_dtype must match output matrix type");
    out_dtype = out_arg->scalar_type();
  }
  const auto out = out_dtype.value_or(a.scalar_type());
  const bool wide = needs_wide_path(a, b, sa, sb, scale_result, out);
  if (!wide && !is_host_driver()) return op_layer::boxed_delegate(op, ks, stack);  // CUDA's kernel and rules
  check(a, b, sa, sb, bias, scale_result, out);
  if (!wide) return op_layer::boxed_delegate(op, ks, stack);
  Tensor result = scaled_mm_wide(a, b, sa, sb, bias, scale_result, out, arg(7).toBool());
  if (out_arg) {
    at::native::resize_output(*out_arg, result.sizes());
    out_arg->copy_(result);
    result = *out_arg;
  }
  torch::jit::drop(*stack, nargs);
  torch::jit::push(*stack, std::move(result));
}

}  // namespace

void register_host_scaled_mm_rules() {
  static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1, __FILE__, __LINE__);
  for (const char* name : {"_scaled_mm", "_scaled_mm.out"})
    lib->impl(name, torch::CppFunction::makeFromBoxedFunction<&scaled_mm>());
}

}  // namespace torch_musa::fp8
