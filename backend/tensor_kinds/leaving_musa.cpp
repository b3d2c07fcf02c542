// Ops on sparse, nested or quantized musa tensors that make a tensor of
// another device (`q.cpu()` asks empty_quantized for a cpu tensor like `q`;
// nested `.cpu()` is _to_copy to the cpu): their results are not musa
// tensors, so they run on the cpu, over cpu copies of the musa arguments, and
// their results stay where the op put them.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "core/device.h"
#include "ops/delegation.h"
#include "tensor_kinds/tensor_kinds.h"

namespace torch_musa::tensor_kinds {
namespace {

using op_layer::kMusa;

c10::Storage storage_to_cpu(const c10::Storage& musa) {
  const auto n = static_cast<int64_t>(musa.nbytes());
  at::Tensor cpu = at::empty({n}, at::TensorOptions().dtype(at::kByte));
  auto impl = c10::make_intrusive<c10::TensorImpl>(c10::Storage(musa), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                   caffe2::TypeMeta::Make<uint8_t>());
  impl->set_sizes_contiguous({n});
  cpu.copy_(at::Tensor(std::move(impl)));
  return cpu.storage();
}

at::Tensor tensor_to_cpu(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kMusa) return t;
  if (!is_kind(t)) return t.cpu();
  auto part = [](const at::Tensor& p) { return tensor_to_cpu(p); };
  auto storage = [](const c10::Storage& s) { return storage_to_cpu(s); };
  return remake(t, {part, storage, c10::BackendComponent::CPUBit, c10::Device(c10::DeviceType::CPU)});
}

bool makes_other_device(const c10::OperatorHandle& op, const torch::jit::Stack& stack) {
  const size_t nargs = op.schema().arguments().size();
  for (size_t i = stack.size() - nargs; i < stack.size(); ++i)
    if (stack[i].isDevice() && stack[i].toDevice().type() != kMusa) return true;
  return false;
}

}  // namespace

bool run_leaving_musa(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey functionality) {
  if (!makes_other_device(op, *stack)) return false;
  const size_t nargs = op.schema().arguments().size();
  for (size_t i = stack->size() - nargs; i < stack->size(); ++i)
    (*stack)[i] = op_layer::map_tensors((*stack)[i], [](const at::Tensor& t) { return tensor_to_cpu(t); });
  op.redispatchBoxed(
    c10::DispatchKeySet(c10::toRuntimePerBackendFunctionalityKey(functionality, c10::BackendComponent::CPUBit)), stack);
  return true;
}

}  // namespace torch_musa::tensor_kinds
