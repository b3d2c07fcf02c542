// musa stores strided tensors only. Sparse, quantized and nested tensors on
// musa get an error that says so and what to do, instead of torch's generic
// "could not run ... with arguments from the 'Sparsemusa' backend".
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

namespace torch_musa {
namespace {

template <const char* Layout>
void unsupported(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(false, op.schema().name(), ": ", Layout,
                              " tensors are not supported: musa stores strided tensors only; keep them on the cpu, "
                              "or convert with .to_dense() (or .dequantize()) before moving to musa");
}

constexpr char kSparse[] = "sparse";
constexpr char kSparseCsr[] = "sparse compressed (CSR/CSC/BSR/BSC)";
constexpr char kQuantized[] = "quantized";
constexpr char kNested[] = "nested";

TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported<kSparse>>());
}
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported<kSparseCsr>>());
}
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported<kQuantized>>());
}
TORCH_LIBRARY_IMPL(_, NestedTensorPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&unsupported<kNested>>());
}

}  // namespace
}  // namespace torch_musa
