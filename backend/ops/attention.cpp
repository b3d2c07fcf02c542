// Scaled dot-product attention picks its kernel through a per-device-type
// dispatch stub, not through an op; without a PrivateUse1 entry musa would
// always take the slow math path. Ask the kernel device's own chooser.
#include <ATen/native/transformers/attention.h>
#include <ATen/ops/_fused_sdp_choice.h>

#include "ops/delegate.h"
#include "core/device.h"
#include "ops/delegation.h"
#include "ops/kernel_device.h"

namespace torch_musa {
namespace {

// Values of at::sdp::SDPBackend.
constexpr int64_t kFlashAttention = 1;
constexpr int64_t kEfficientAttention = 2;

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
  // variant; on CUDA kernels the memory-efficient kernel is the equivalent.
  if (choice == kFlashAttention && kd.type() == c10::DeviceType::CUDA) choice = kEfficientAttention;
  return choice;
}

}  // namespace
}  // namespace torch_musa

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_musa::musa_sdp_choice)
}
