// Sparse (COO and compressed), nested and quantized musa tensors. Each is made
// of strided musa tensors or a musa storage, so the op layer aliases it, part
// by part, as the same kind of tensor on the kernel device and adopts the
// kernel's results back the same way: one mechanism for every kind.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/Storage.h>
#include <c10/util/FunctionRef.h>

namespace torch_musa::tensor_kinds {

// The functionality keys of the kinds that are not plain strided tensors.
inline c10::DispatchKeySet kind_keys() {
  return c10::DispatchKeySet({c10::DispatchKey::Sparse, c10::DispatchKey::SparseCsr, c10::DispatchKey::Quantized,
                              c10::DispatchKey::NestedTensor});
}

inline bool is_kind(const at::Tensor& t) { return t.defined() && t.key_set().has_any(kind_keys()); }

// How the parts of a tensor move to the other side: strided tensors, storages,
// and the backend the rebuilt tensor belongs to.
struct PartMap {
  c10::function_ref<at::Tensor(const at::Tensor&)> tensor;
  c10::function_ref<c10::Storage(const c10::Storage&)> storage;
  c10::BackendComponent backend;
  c10::Device device;
};

// `t` rebuilt on the other side: same kind, layout, sizes and flags, parts mapped by `map`.
at::Tensor remake(const at::Tensor& t, const PartMap& map);

// Carries what an in-place op did to `changed` (a rebuilt tensor) into `target`, mapping parts by `map`.
void carry_into(const at::Tensor& target, const at::Tensor& changed, const PartMap& map);

}  // namespace torch_musa::tensor_kinds

namespace torch_musa::tensor_kinds {
// Registers the kind delegation directly for aten ops whose musa kind key would
// otherwise take a composite default meant for other layouts (is_coalesced's
// "expected sparse layout" default, say). Call once, after all aten ops are registered.
void delegate_kind_kernels();

// Runs an op of kind `functionality` whose device argument names another device
// (cpu) there, over cpu copies of its musa tensors; false if it names none.
bool run_leaving_musa(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey functionality);
}  // namespace torch_musa::tensor_kinds
