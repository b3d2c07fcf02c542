// The direct path's pointwise ops: one row per structured TensorIterator op (its forms and the
// DispatchStubs its impl() calls), plus the CPU's own functions for where, relu (clamp_min) and fill_.
#include "ops/host_direct/direct.h"

#include <ATen/Dispatch.h>

#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Fill.h>
#include <ATen/native/Lerp.h>
#include <ATen/native/PointwiseOps.h>
#include <ATen/native/Pow.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/addcdiv_native.h>
#include <ATen/ops/addcmul_native.h>
#include <ATen/ops/clamp_max_native.h>
#include <ATen/ops/clamp_min_native.h>
#include <ATen/ops/clamp_native.h>
#include <ATen/ops/cos_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/eq_native.h>
#include <ATen/ops/erf_native.h>
#include <ATen/ops/exp2_native.h>
#include <ATen/ops/exp_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/ge_native.h>
#include <ATen/ops/gt_native.h>
#include <ATen/ops/le_native.h>
#include <ATen/ops/leaky_relu_backward_native.h>
#include <ATen/ops/leaky_relu_native.h>
#include <ATen/ops/lerp_native.h>
#include <ATen/ops/log2_native.h>
#include <ATen/ops/log_native.h>
#include <ATen/ops/lt_native.h>
#include <ATen/ops/maximum_native.h>
#include <ATen/ops/minimum_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/ne_native.h>
#include <ATen/ops/neg_native.h>
#include <ATen/ops/pow_native.h>
#include <ATen/ops/reciprocal_native.h>
#include <ATen/ops/relu_native.h>
#include <ATen/ops/rsqrt_native.h>
#include <ATen/ops/sigmoid_backward_native.h>
#include <ATen/ops/sigmoid_native.h>
#include <ATen/ops/sign_native.h>
#include <ATen/ops/silu_backward_native.h>
#include <ATen/ops/silu_native.h>
#include <ATen/ops/sin_native.h>
#include <ATen/ops/sqrt_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/tanh_backward_native.h>
#include <ATen/ops/tanh_native.h>
#include <ATen/ops/threshold_backward_native.h>
#include <ATen/ops/where_native.h>

namespace torch_musa::op_layer::direct {
namespace {

using namespace at::native;  // (the rows name structured classes and stubs)

// Binary ops and comparisons promote their inputs; a Python number is a 0-dim cpu input.
constexpr unsigned kBinary = kCpuScalar;
constexpr unsigned kCompare = kCpuScalar | kBoolOutput;

// fill_ with a scalar (also what the CPU's sum kernel starts its output with): TensorIterator
// over fill_stub.
void register_fill(torch::Library& lib) {
  lib.impl("fill_.Scalar", torch::CppFunction([h = handle("fill_.Scalar")](
                                                  c10::DispatchKeySet ks, at::Tensor& self,
                                                  const at::Scalar& value) -> at::Tensor& {
    Gate g;
    g.musa(self);
    if (!g.ready()) return delegated<at::Tensor&>(h, ks, self, value);
    launch(h, g.device, [&] {
      // (one element: written as the CPU's fill_ writes it, without a TensorIterator)
      if (self.numel() != 1) {
        at::native::fill_(self, value);
        return;
      }
      AT_DISPATCH_ALL_TYPES_AND_COMPLEX_AND3(at::kHalf, at::kBool, at::kBFloat16, self.scalar_type(), "fill_", [&] {
        *self.mutable_data_ptr<scalar_t>() = value.to<scalar_t>();
      });
    });
    return self;
  }));
}

using WhereFn = at::Tensor (*)(const at::Tensor&, const at::Tensor&, const at::Tensor&);

}  // namespace

void register_pointwise(torch::Library& lib) {
  forward_to_cpu(add_stub, mul_stub, div_true_stub, maximum_stub, minimum_stub, pow_tensor_tensor_stub,
                 pow_tensor_scalar_stub, lerp_kernel_scalar_weight, lerp_kernel_tensor_weight, addcmul_stub,
                 addcdiv_stub, eq_stub, ne_stub, lt_stub, le_stub, gt_stub, ge_stub, clamp_stub, clamp_scalar_stub,
                 clamp_min_scalar_stub, clamp_max_scalar_stub, where_kernel, fill_stub);
  forward_to_cpu(neg_stub, exp_stub, log_stub, sqrt_stub, rsqrt_stub, sigmoid_stub, tanh_stub, sin_stub, cos_stub,
                 reciprocal_stub, sign_stub, exp2_stub, log2_stub, erf_stub, silu_stub, silu_backward_stub,
                 sigmoid_backward_stub, tanh_backward_stub, threshold_stub, leaky_relu_stub,
                 leaky_relu_backward_stub);

  // op class, what it allows: functional, in-place and out= forms
  Structured<structured_ufunc_add_CPU, kBinary>::add(lib, "add.Tensor", "add_.Tensor", "add.out");
  Structured<structured_sub_out, kBinary>::add(lib, "sub.Tensor", "sub_.Tensor", "sub.out");
  Structured<structured_mul_out, kBinary>::add(lib, "mul.Tensor", "mul_.Tensor", "mul.out");
  Structured<structured_div_out, kBinary>::add(lib, "div.Tensor", "div_.Tensor", "div.out");
  Structured<structured_maximum_out, kBinary>::add(lib, "maximum", nullptr, "maximum.out");
  Structured<structured_minimum_out, kBinary>::add(lib, "minimum", nullptr, "minimum.out");
  Structured<structured_pow_Tensor_Tensor_out, kBinary>::add(lib, "pow.Tensor_Tensor", "pow_.Tensor",
                                                             "pow.Tensor_Tensor_out");
  Structured<structured_pow_Tensor_Scalar_out>::add(lib, "pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out");
  Structured<structured_lerp_Scalar>::add(lib, "lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out");
  Structured<structured_lerp_Tensor>::add(lib, "lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out");
  Structured<structured_addcmul_out>::add(lib, "addcmul", "addcmul_", "addcmul.out");
  Structured<structured_addcdiv_out>::add(lib, "addcdiv", "addcdiv_", "addcdiv.out");

  Structured<structured_eq_Tensor_out, kCompare>::add(lib, "eq.Tensor", "eq_.Tensor", "eq.Tensor_out");
  Structured<structured_ne_Tensor_out, kCompare>::add(lib, "ne.Tensor", "ne_.Tensor", "ne.Tensor_out");
  Structured<structured_lt_Tensor_out, kCompare>::add(lib, "lt.Tensor", "lt_.Tensor", "lt.Tensor_out");
  Structured<structured_le_Tensor_out, kCompare>::add(lib, "le.Tensor", "le_.Tensor", "le.Tensor_out");
  Structured<structured_gt_Tensor_out, kCompare>::add(lib, "gt.Tensor", "gt_.Tensor", "gt.Tensor_out");
  Structured<structured_ge_Tensor_out, kCompare>::add(lib, "ge.Tensor", "ge_.Tensor", "ge.Tensor_out");
  Structured<structured_eq_Scalar_out, kCompare>::add(lib, "eq.Scalar", "eq_.Scalar", "eq.Scalar_out");
  Structured<structured_ne_Scalar_out, kCompare>::add(lib, "ne.Scalar", "ne_.Scalar", "ne.Scalar_out");
  Structured<structured_lt_Scalar_out, kCompare>::add(lib, "lt.Scalar", "lt_.Scalar", "lt.Scalar_out");
  Structured<structured_le_Scalar_out, kCompare>::add(lib, "le.Scalar", "le_.Scalar", "le.Scalar_out");
  Structured<structured_gt_Scalar_out, kCompare>::add(lib, "gt.Scalar", "gt_.Scalar", "gt.Scalar_out");
  Structured<structured_ge_Scalar_out, kCompare>::add(lib, "ge.Scalar", "ge_.Scalar", "ge.Scalar_out");

  Structured<structured_clamp_out>::add(lib, "clamp", "clamp_", "clamp.out");
  Structured<structured_clamp_Tensor_out>::add(lib, "clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out");
  Structured<structured_clamp_min_out>::add(lib, "clamp_min", "clamp_min_", "clamp_min.out");
  Structured<structured_clamp_min_Tensor_out>::add(lib, "clamp_min.Tensor", "clamp_min_.Tensor", "clamp_min.Tensor_out");
  Structured<structured_clamp_max_out>::add(lib, "clamp_max", "clamp_max_", "clamp_max.out");
  Structured<structured_clamp_max_Tensor_out>::add(lib, "clamp_max.Tensor", "clamp_max_.Tensor", "clamp_max.Tensor_out");

  Structured<structured_neg_out>::add(lib, "neg", "neg_", "neg.out");
  Structured<structured_exp_out>::add(lib, "exp", "exp_", "exp.out");
  Structured<structured_log_out>::add(lib, "log", "log_", "log.out");
  Structured<structured_sqrt_out>::add(lib, "sqrt", "sqrt_", "sqrt.out");
  Structured<structured_rsqrt_out>::add(lib, "rsqrt", "rsqrt_", "rsqrt.out");
  Structured<structured_sigmoid_out>::add(lib, "sigmoid", "sigmoid_", "sigmoid.out");
  Structured<structured_tanh_out>::add(lib, "tanh", "tanh_", "tanh.out");
  Structured<structured_sin_out>::add(lib, "sin", "sin_", "sin.out");
  Structured<structured_cos_out>::add(lib, "cos", "cos_", "cos.out");
  Structured<structured_reciprocal_out>::add(lib, "reciprocal", "reciprocal_", "reciprocal.out");
  Structured<structured_sign_out>::add(lib, "sign", "sign_", "sign.out");
  Structured<structured_exp2_out>::add(lib, "exp2", "exp2_", "exp2.out");
  Structured<structured_log2_out>::add(lib, "log2", "log2_", "log2.out");
  Structured<structured_erf_out>::add(lib, "erf", "erf_", "erf.out");
  Structured<structured_silu_out>::add(lib, "silu", "silu_", "silu.out");
  Structured<structured_leaky_relu_out>::add(lib, "leaky_relu", "leaky_relu_", "leaky_relu.out");

  // autograd's backward formulas of the activations above
  Structured<structured_threshold_backward_out>::add(lib, "threshold_backward", nullptr,
                                                     "threshold_backward.grad_input");
  Structured<structured_sigmoid_backward_out>::add(lib, "sigmoid_backward", nullptr, "sigmoid_backward.grad_input");
  Structured<structured_tanh_backward_out>::add(lib, "tanh_backward", nullptr, "tanh_backward.grad_input");
  Structured<structured_silu_backward_out>::add(lib, "silu_backward", nullptr, "silu_backward.grad_input");
  Structured<structured_leaky_relu_backward_out>::add(lib, "leaky_relu_backward", nullptr,
                                                      "leaky_relu_backward.grad_input");

  // The CPU's relu is clamp_min(self, 0) (run direct above); where is device-generic over where_kernel.
  Native<&at::native::relu>::add(lib, "relu");
  Native<&at::native::relu_>::add(lib, "relu_");
  Native<static_cast<WhereFn>(&at::native::where)>::add(lib, "where.self");
  Native<&at::native::where_self_out>::add(lib, "where.self_out");
  register_fill(lib);
}

}  // namespace torch_musa::op_layer::direct
