// Autocast for musa: the same op lists and policies as CUDA, registered on
// the AutocastPrivateUse1 key with ATen's own wrappers.
#include <ATen/Operators.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "version_gates.h"

namespace {

using namespace at;  // the op-list macros name ATen types unqualified

// Same rule as CUDA: binary_cross_entropy is unsafe to autocast.
Tensor binary_cross_entropy_banned(const Tensor&, const Tensor&, const std::optional<Tensor>&, int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss. binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define MUSA_LOW_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(MUSA_LOW_PRECISION_FP)
#undef MUSA_LOW_PRECISION_FP
#define MUSA_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(MUSA_FP32)
  TORCH_MUSA_FORALL_EXTRA_AUTOCAST_FP32(MUSA_FP32)
#undef MUSA_FP32
#define MUSA_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(MUSA_FP32_SET_OPT_DTYPE)
#undef MUSA_FP32_SET_OPT_DTYPE
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)
#define MUSA_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(MUSA_PROMOTE)
#undef MUSA_PROMOTE
  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"),
         TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace
