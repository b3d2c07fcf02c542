// Every op on a sparse, sparse compressed, quantized or nested musa tensor is
// delegated like a dense op: its tensors are rebuilt on the kernel device over
// aliases of their parts, and the kernel of the same kind runs there.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <mutex>
#include <string>

#include "ops/delegation.h"
#include "tensor_kinds/tensor_kinds.h"

namespace torch_musa {
namespace {

const char* way_out(c10::DispatchKey kind) {
  switch (kind) {
    case c10::DispatchKey::Sparse:
    case c10::DispatchKey::SparseCsr:
      return "sparse tensors: convert with .to_dense() (or another sparse layout) first";
    case c10::DispatchKey::Quantized:
      return "quantized tensors: dequantize with .dequantize() first";
    default:
      return "nested tensors: convert with .to_padded_tensor(0) or unbind() first";
  }
}

template <c10::DispatchKey Kind>
void delegate_kind(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  if (tensor_kinds::run_leaving_musa(op, stack, Kind)) return;
  try {
    op_layer::boxed_delegate_kind(op, stack, Kind);
  } catch (const c10::NotImplementedError& e) {
    // torch's "could not run ... 'SparseCPU' backend" names the kernel device, not musa.
    if (std::string(e.what_without_backtrace()).find("Could not run") == std::string::npos) throw;
    TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), " has no kernel for ", way_out(Kind),
                                " (the cpu and cuda have none either)");
  }
}

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&delegate_kind<c10::DispatchKey::Sparse>>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&delegate_kind<c10::DispatchKey::SparseCsr>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&delegate_kind<c10::DispatchKey::Quantized>>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&delegate_kind<c10::DispatchKey::NestedTensor>>());
}

}  // namespace

void tensor_kinds::delegate_kind_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct Kind {
      c10::DispatchKey functionality, musa, cpu, cuda;
      torch::CppFunction (*kernel)();
    };
    using K = c10::DispatchKey;
    const Kind kinds[] = {
      {K::Sparse, K::SparsePrivateUse1, K::SparseCPU, K::SparseCUDA,
       [] { return torch::CppFunction::makeFromBoxedFunction<&delegate_kind<K::Sparse>>(); }},
      {K::SparseCsr, K::SparseCsrPrivateUse1, K::SparseCsrCPU, K::SparseCsrCUDA,
       [] { return torch::CppFunction::makeFromBoxedFunction<&delegate_kind<K::SparseCsr>>(); }},
      {K::Quantized, K::QuantizedPrivateUse1, K::QuantizedCPU, K::QuantizedCUDA,
       [] { return torch::CppFunction::makeFromBoxedFunction<&delegate_kind<K::Quantized>>(); }},
      {K::NestedTensor, K::NestedTensorPrivateUse1, K::NestedTensorCPU, K::NestedTensorCUDA,
       [] { return torch::CppFunction::makeFromBoxedFunction<&delegate_kind<K::NestedTensor>>(); }},
    };
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const Kind& kind : kinds) {
      auto* lib = new torch::Library(torch::Library::IMPL, "aten", kind.musa, __FILE__, __LINE__);  // lives for the process
      for (const auto& name : dispatcher.getAllOpNames()) {
        if (name.name.rfind("aten::", 0) != 0) continue;
        auto op = dispatcher.findOp(name);
        if (!op || op->hasKernelForDispatchKey(kind.musa)) continue;
        // Structured ops' musa default builds its output with a plain musa empty(): the kernel
        // device's own default (or its error) takes those too.
        const bool structured = op->hasKernelForDispatchKey(K::CompositeExplicitAutogradNonFunctional);
        if (!structured && !op->hasKernelForDispatchKey(kind.cpu) && !op->hasKernelForDispatchKey(kind.cuda))
          continue;
        // (Nested tensors also skip CompositeImplicitAutograd decompositions, which assume
        // sizes: their autograd key is their own, so dense musa autograd is untouched.)
        if (!op->hasKernelForDispatchKey(K::CompositeExplicitAutograd) &&
            !op->hasKernelForDispatchKey(K::CompositeExplicitAutogradNonFunctional) &&
            !(kind.functionality == K::NestedTensor && op->hasKernelForDispatchKey(K::CompositeImplicitAutograd)))
          continue;
        std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
        lib->impl(qualified.c_str(), kind.kernel());
      }
    }
  });
}

}  // namespace torch_musa
