// Scaled dot-product attention picks its kernel through a per-device-type
// dispatch stub, not through an op; without a PrivateUse1 entry musa would
// always take the slow math path. Ask the kernel device's own chooser.
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>

#include "ops/delegate.h"
#include "ops/kernel_device.h"

namespace torch_musa {
namespace {

// Values of at::sdp::SDPBackend.
constexpr int64_t kFlashAttention = 1;
constexpr int64_t kEfficientAttention = 2;

int64_t musa_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                        std::optional<double> scale, bool enable_gqa) {
  auto& kd = kernel_device();
  std::optional<at::Tensor> m = mask;
  if (m && m->defined() && m->device().type() == c10::DeviceType::PrivateUse1) m = alias_on_kernel_device(*m);
  KernelScope scope(kd, q.device().index());
  KernelDeviceCallGuard below_musa;
  int64_t choice = at::_fused_sdp_choice(alias_on_kernel_device(q), alias_on_kernel_device(k),
                                         alias_on_kernel_device(v), m, dropout_p, is_causal, scale, enable_gqa);
  // For any device type but CUDA the SDPA composite runs "flash" as its CPU
  // variant; on CUDA kernels the memory-efficient kernel is the equivalent.
  if (choice == kFlashAttention && kd.type() == c10::DeviceType::CUDA) choice = kEfficientAttention;
  return choice;
}

}  // namespace
}  // namespace torch_musa

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_musa::musa_sdp_choice)
}
