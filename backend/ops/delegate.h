// The generic op layer: every aten op without a musa kernel runs through a
// boxed fallback that aliases musa tensors as kernel-device tensors, runs
// the kernel device's kernel and hands back musa tensors — no copies.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <string>
#include <unordered_map>

namespace torch_musa {

// Hides kernel-device work from everything above the backend (autograd,
// tracer, autocast, Python dispatch modes): the musa op was already seen there.
class KernelDeviceCallGuard {
 public:
  KernelDeviceCallGuard();

 private:
  static c10::DispatchKeySet above_backend();
  c10::impl::ExcludeDispatchKeyGuard guard_;
};

// A kernel-device tensor over the same memory, sizes and strides as `musa`.
at::Tensor alias_on_kernel_device(const at::Tensor& musa);

// Registers the delegation directly for aten ops whose PrivateUse1 default
// is a composite wrapper (structured ops). Call once, after all aten ops are
// registered (the extension's module init).
void delegate_structured_ops();

// SyncBatchNorm's CUDA-only kernels, for the host driver (sync_batch_norm.cpp).
void register_host_sync_batch_norm();
// Contiguous inputs for CUDA kernels that need them (contiguous_inputs.cpp); cuda driver only.
// Call before delegate_structured_ops.
void register_cuda_contiguous_inputs();

// Ops that had to copy (outputs that could not be adopted), with counts.
std::unordered_map<std::string, int64_t> copy_path_counts();
void reset_copy_path_counts();
// How many ops went through the fallback (all paths), for benchmarks/tests.
int64_t delegated_op_count();

}  // namespace torch_musa
