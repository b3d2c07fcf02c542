// Scaled dot-product attention picks its kernel through a per-device-type
// dispatch stub, not through an op; without a PrivateUse1 entry musa would
// always take the slow math path. Ask the kernel device's own chooser.
//
// Where CUDA's chooser says flash attention, torch's composite would call the
// CPU variant for any device type but CUDA; torch's hook for other devices is
// the "overrideable" backend, so musa answers that and runs the kernel
// device's flash attention for it (forward and backward, below).
#include <ATen/SDPBackend.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>
#include <ATen/ops/_scaled_dot_product_flash_attention.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_for_cpu_backward.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/stack.h>
#include <ATen/ops/zeros.h>
#include <torch/library.h>

#include <cmath>

#include "ops/delegate.h"
#include "core/device.h"
#include "ops/delegation.h"
#include "ops/kernel_device.h"

namespace torch_musa {
namespace {

constexpr auto kFlashAttention = static_cast<int64_t>(at::SDPBackend::flash_attention);
constexpr auto kEfficientAttention = static_cast<int64_t>(at::SDPBackend::efficient_attention);
constexpr auto kOverrideable = static_cast<int64_t>(at::SDPBackend::overrideable);

// The musa device a tensor is on. A fake tensor (torch.compile tracing) keeps
// its data on the meta device; it stands for the current musa device.
c10::DeviceIndex musa_index_of(const at::Tensor& t) {
  const c10::Device d = t.storage().device();
  return d.type() == c10::DeviceType::PrivateUse1 ? d.index() : current_device();
}

// A kernel-device view of `t` for the choice, which reads only layouts: a fake
// tensor's view is over its (dataless) storage, on its musa device's kernel device.
at::Tensor choice_view(const at::Tensor& t, KernelDevice& kd) {
  if (t.storage().device().type() == c10::DeviceType::PrivateUse1) return alias_on_kernel_device(t);
  c10::Storage dataless(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), 0,
      c10::DataPtr(nullptr, kd.device_for(musa_index_of(t))), nullptr, false));
  return op_layer::tensor_over(std::move(dataless), t, kd.dispatch_key());
}

int64_t musa_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                        std::optional<double> scale, bool enable_gqa) {
  auto& kd = kernel_device();
  std::optional<at::Tensor> m = mask;
  if (m && m->defined() && m->device().type() == c10::DeviceType::PrivateUse1) m = choice_view(*m, kd);
  KernelScope scope(kd, musa_index_of(q));
  KernelDeviceCallGuard below_musa;
  int64_t choice = at::_fused_sdp_choice(choice_view(q, kd), choice_view(k, kd), choice_view(v, kd), m, dropout_p,
                                         is_causal, scale, enable_gqa);
  // For any device type but CUDA the SDPA composite runs "flash" as its CPU
  // variant. On CUDA kernels: flash attention through the overrideable backend.
  if (choice == kFlashAttention && kd.type() == c10::DeviceType::CUDA) choice = kOverrideable;
  return choice;
}

using AttentionResult = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt,
                                   at::Tensor, at::Tensor, at::Tensor>;

bool kernel_device_is_cuda() { return kernel_device().type() == c10::DeviceType::CUDA; }

// The overrideable op's random state is a (seed, offset) pair of 0-d int64
// tensors (its fake kernel's, which compiled graphs check, alignment included:
// Inductor asserts 16-byte aligned results). CUDA's flash attention keeps both
// in one 2-element uint64 tensor: the pair is words 0 and 2 of a 4-word buffer,
// written from it only where dropout draws (otherwise the backward reads neither).
std::pair<at::Tensor, at::Tensor> split_rng_state(const at::Tensor& rng_state, double dropout_p) {
  at::Tensor words = at::empty({2, 2}, rng_state.options().dtype(at::kLong));
  if (dropout_p > 0 && rng_state.numel() == 2)
    words.select(1, 0).copy_(rng_state.view(at::kLong));
  else
    words.zero_();
  return {words.select(1, 0).select(0, 0), words.select(1, 0).select(0, 1)};
}

// The 2-word state flash's backward reads, from the pair split_rng_state made (or any pair).
at::Tensor join_rng_state(const at::Tensor& seed, const at::Tensor& offset, double dropout_p) {
  const bool split_pair = seed.dim() == 0 && offset.dim() == 0 && seed.scalar_type() == at::kLong &&
                          offset.scalar_type() == at::kLong && seed.is_alias_of(offset) &&
                          offset.storage_offset() == seed.storage_offset() + 2;
  if (split_pair && dropout_p == 0) return seed.as_strided({2}, {1}).view(at::kUInt64);  // (not read)
  if (split_pair) return seed.as_strided({2}, {2}).contiguous().view(at::kUInt64);
  return at::stack({seed.reshape({}).to(at::kLong), offset.reshape({}).to(at::kLong)}).view(at::kUInt64);
}

// `t` in `like`'s layout: the op's fake kernels give each result its input's layout
// (as CUDA's flash attention does); the CPU's kernels keep (batch, seq, heads) in memory.
at::Tensor in_layout_of(const at::Tensor& like, const at::Tensor& t) {
  if (!t.defined() || t.strides() == like.strides()) return t;
  return at::empty_like(like).copy_(t);
}

// CUDA's flash kernels take head sizes that are multiples of 8: others are
// padded with zeros, which change neither the scores nor the kept columns (as
// CUDA's own composite does), at the scale of the real head size.
at::Tensor padded_heads(const at::Tensor& t) {
  const int64_t extra = (8 - t.size(-1) % 8) % 8;
  return extra ? at::constant_pad_nd(t, {0, extra}) : t;
}

std::optional<double> real_scale(const at::Tensor& q, std::optional<double> scale) {
  return scale ? scale : std::optional<double>(1.0 / std::sqrt(static_cast<double>(q.size(-1))));
}

// `padded` cut back to `like`'s head size, in `like`'s layout.
at::Tensor unpadded_as(const at::Tensor& like, const at::Tensor& padded) {
  if (padded.size(-1) == like.size(-1)) return padded;
  return in_layout_of(like, padded.narrow(-1, 0, like.size(-1)));
}

AttentionResult fused_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                const std::optional<at::Tensor>& attn_bias, double dropout_p, bool is_causal,
                                bool return_debug_mask, std::optional<double> scale) {
  if (kernel_device_is_cuda()) {
    TORCH_CHECK(!attn_bias.has_value() || !attn_bias->defined(),
                "scaled_dot_product_attention on musa: the overrideable (flash) backend takes no attention mask; "
                "pass the mask to F.scaled_dot_product_attention, which chooses a kernel that takes it");
    auto [out, lse, cum_q, cum_k, max_q, max_k, rng_state, unused, debug] =
        at::_scaled_dot_product_flash_attention(padded_heads(q), padded_heads(k), padded_heads(v), dropout_p,
                                                is_causal, return_debug_mask, real_scale(q, scale));
    auto [seed, offset] = split_rng_state(rng_state, dropout_p);
    return {unpadded_as(q, out), lse, cum_q, cum_k, max_q, max_k, seed, offset, debug};
  }
  // The host: the CPU's flash attention (it takes a mask and no dropout).
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, dropout_p, is_causal, attn_bias, scale);
  auto none = at::empty({0}, q.options().dtype(at::kInt));
  auto zero = at::zeros({}, q.options().dtype(at::kLong));
  // (the CPU kernel's logsumexp is (batch, seq, heads) in memory; the op's fake kernel says contiguous)
  return {in_layout_of(q, out), lse.contiguous(), none, none, q.sym_size(-2), k.sym_size(-2), zero, zero,
          at::empty({0}, q.options())};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> fused_attention_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& attn_bias, std::array<bool, 4> grad_input_mask, const at::Tensor& out, const at::Tensor& lse,
    const at::Tensor& cum_q, const at::Tensor& cum_k, int64_t max_q, int64_t max_k, double dropout_p,
    bool is_causal, const at::Tensor& seed, const at::Tensor& offset, std::optional<double> scale) {
  at::Tensor gq, gk, gv;
  if (kernel_device_is_cuda()) {
    std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_backward(
        padded_heads(grad_out), padded_heads(q), padded_heads(k), padded_heads(v), padded_heads(out), lse, cum_q,
        cum_k, max_q, max_k, dropout_p, is_causal, join_rng_state(seed, offset, dropout_p), offset, real_scale(q, scale));
    gq = unpadded_as(q, gq);
    gk = unpadded_as(k, gk);
    gv = unpadded_as(v, gv);
  } else {
    std::optional<at::Tensor> mask;
    if (attn_bias.defined()) mask = attn_bias;
    std::tie(gq, gk, gv) = at::_scaled_dot_product_flash_attention_for_cpu_backward(grad_out, q, k, v, out, lse,
                                                                                     dropout_p, is_causal, mask, scale);
    gq = in_layout_of(q, gq);
    gk = in_layout_of(k, gk);
    gv = in_layout_of(v, gv);
  }
  // No gradient for the mask (as CUDA's kernels: masks are not trained through fused attention).
  return {gq, gk, gv, at::Tensor()};
}

}  // namespace
}  // namespace torch_musa

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_musa::musa_sdp_choice)
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_scaled_dot_product_fused_attention_overrideable", TORCH_FN(torch_musa::fused_attention));
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", TORCH_FN(torch_musa::fused_attention_backward));
}
