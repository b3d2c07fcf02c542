// The fused LLM ops' autograd, in C++: each forward op's Autograd kernel saves what its
// backward op needs and calls it. (It was Python, torch.library.register_autograd: on the GPU
// these ops are host-bound, and that wrapper's Python per call and per backward node cost more
// than the kernels.) Every device takes it; the fake kernels and the Python API stay in
// torch_musa/nn/fused_ops.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

namespace torch_musa::fused_llm {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

template <class Signature>
c10::TypedOperatorHandle<Signature> op(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Signature>();
}

struct RoPE : torch::autograd::Function<RoPE> {
  static Tensor forward(AutogradContext* ctx, const Tensor& input, const Tensor& freq, bool interleaved,
                        bool batch_first, bool mla) {
    static auto fwd = op<Tensor(const Tensor&, const Tensor&, bool, bool, bool)>("musa_fused::_fused_rope_forward");
    ctx->save_for_backward({freq});
    ctx->saved_data["flags"] = (interleaved ? 1 : 0) | (batch_first ? 2 : 0) | (mla ? 4 : 0);
    at::AutoDispatchBelowADInplaceOrView below;
    return fwd.call(input, freq, interleaved, batch_first, mla);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto bwd = op<Tensor(const Tensor&, const Tensor&, bool, bool, bool)>("musa_fused::_fused_rope_backward");
    auto flags = ctx->saved_data["flags"].toInt();
    auto freq = ctx->get_saved_variables()[0];
    return {bwd.call(grads[0], freq, flags & 1, flags & 2, flags & 4), Tensor(), Tensor(), Tensor(), Tensor()};
  }
};

struct SwishGLU : torch::autograd::Function<SwishGLU> {
  static Tensor forward(AutogradContext* ctx, const Tensor& input) {
    static auto fwd = op<Tensor(const Tensor&)>("musa_fused::_fused_swiglu_forward");
    ctx->save_for_backward({input});
    at::AutoDispatchBelowADInplaceOrView below;
    return fwd.call(input);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto bwd = op<Tensor(const Tensor&, const Tensor&)>("musa_fused::_fused_swiglu_backward");
    return {bwd.call(grads[0], ctx->get_saved_variables()[0])};
  }
};

struct RMSNorm : torch::autograd::Function<RMSNorm> {
  static variable_list forward(AutogradContext* ctx, const Tensor& input, c10::SymIntArrayRef normalized_shape,
                               double eps, const std::optional<Tensor>& weight) {
    static auto fwd = op<std::tuple<Tensor, Tensor>(const Tensor&, c10::SymIntArrayRef, double,
                                                    const std::optional<Tensor>&)>(
        "musa_fused::_fused_rmsnorm_forward");
    at::AutoDispatchBelowADInplaceOrView below;
    auto [out, invvar] = fwd.call(input, normalized_shape, eps, weight);
    ctx->save_for_backward({input, invvar, weight.value_or(Tensor())});
    ctx->saved_data["eps"] = eps;
    ctx->mark_non_differentiable({invvar});
    ctx->set_materialize_grads(false);  // (no zeros made for invvar's gradient: backward ignores it)
    return {out, invvar};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto bwd = op<std::tuple<Tensor, Tensor>(const Tensor&, const Tensor&, const Tensor&, c10::SymIntArrayRef,
                                                    double, const std::optional<Tensor>&)>(
        "musa_fused::_fused_rmsnorm_backward");
    if (!grads[0].defined()) return {Tensor(), Tensor(), Tensor(), Tensor()};  // only invvar was used
    auto saved = ctx->get_saved_variables();
    const Tensor &input = saved[0], &invvar = saved[1], &weight = saved[2];
    // The normalized dimensions are the input's past the per-row statistics' (invvar holds one per row).
    auto normalized_shape = input.sym_sizes().slice(invvar.dim());
    std::optional<Tensor> w = weight.defined() ? std::optional<Tensor>(weight) : std::nullopt;
    auto [dx, dw] = bwd.call(grads[0], invvar, input, normalized_shape, ctx->saved_data["eps"].toDouble(), w);
    return {dx, Tensor(), Tensor(), weight.defined() ? dw : Tensor()};
  }
};

struct CrossEntropy2d : torch::autograd::Function<CrossEntropy2d> {
  static variable_list forward(AutogradContext* ctx, const Tensor& self, const Tensor& target,
                               const std::optional<Tensor>& weight, int64_t ignore_index, int64_t reduction,
                               std::optional<at::ScalarType> loss_dtype) {
    static auto fwd = op<std::tuple<Tensor, Tensor, Tensor>(const Tensor&, const Tensor&, const std::optional<Tensor>&,
                                                            int64_t, int64_t, std::optional<at::ScalarType>)>(
        "musa_fused::_fused_cross_entropy_2d_forward");
    at::AutoDispatchBelowADInplaceOrView below;
    auto [loss, lse, denom] = fwd.call(self, target, weight, ignore_index, reduction, loss_dtype);
    ctx->save_for_backward({self, target, lse, denom, weight.value_or(Tensor())});
    ctx->saved_data["ignore_index"] = ignore_index;
    ctx->saved_data["reduction"] = reduction;
    ctx->mark_non_differentiable({lse, denom});
    // No zeros made for lse's and denom's gradients, which backward ignores: on the GPU each was
    // an allocation and a fill kernel per step (about 80 µs of host time each on an H100).
    ctx->set_materialize_grads(false);
    return {loss, lse, denom};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    static auto bwd = op<Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                                const std::optional<Tensor>&, int64_t, int64_t)>(
        "musa_fused::_fused_cross_entropy_2d_backward");
    const variable_list none(6);
    if (!grads[0].defined()) return none;  // only lse or denom was used
    auto saved = ctx->get_saved_variables();
    std::optional<Tensor> w = saved[4].defined() ? std::optional<Tensor>(saved[4]) : std::nullopt;
    variable_list out = none;
    out[0] = bwd.call(grads[0], saved[0], saved[1], saved[2], saved[3], w, ctx->saved_data["ignore_index"].toInt(),
                      ctx->saved_data["reduction"].toInt());
    return out;
  }
};

Tensor rope_autograd(const Tensor& input, const Tensor& freq, bool interleaved, bool batch_first, bool mla) {
  return RoPE::apply(input, freq, interleaved, batch_first, mla);
}
Tensor swiglu_autograd(const Tensor& input) { return SwishGLU::apply(input); }
std::tuple<Tensor, Tensor> rmsnorm_autograd(const Tensor& input, c10::SymIntArrayRef normalized_shape, double eps,
                                            const std::optional<Tensor>& weight) {
  auto r = RMSNorm::apply(input, normalized_shape, eps, weight);
  return {r[0], r[1]};
}
std::tuple<Tensor, Tensor, Tensor> cross_entropy_autograd(const Tensor& self, const Tensor& target,
                                                          const std::optional<Tensor>& weight, int64_t ignore_index,
                                                          int64_t reduction, std::optional<at::ScalarType> loss_dtype) {
  auto r = CrossEntropy2d::apply(self, target, weight, ignore_index, reduction, loss_dtype);
  return {r[0], r[1], r[2]};
}

}  // namespace

TORCH_LIBRARY_IMPL(musa_fused, Autograd, m) {
  m.impl("_fused_rope_forward", &rope_autograd);
  m.impl("_fused_swiglu_forward", &swiglu_autograd);
  m.impl("_fused_rmsnorm_forward", &rmsnorm_autograd);
  m.impl("_fused_cross_entropy_2d_forward", &cross_entropy_autograd);
}

}  // namespace torch_musa::fused_llm
