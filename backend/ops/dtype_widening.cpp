#include "ops/dtype_widening.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/enum_tag.h>

#include <mutex>
#include <unordered_set>

#include "ops/delegation.h"

namespace torch_musa::op_layer {
namespace {

std::mutex g_mu;
std::unordered_map<std::string, int64_t> g_counts;
thread_local bool t_widening = false;  // the widened call itself never widens again

// Ops whose CUDA kernels take integers where ATen's CPU kernels do not (torch's OpInfo
// database: integer dtypes in dtypesIfCUDA but not in dtypes). Any other op's integer error is
// CUDA's too (frac, lerp, ... on int64), and stays the user's answer.
bool has_gpu_integer_kernel(const c10::OperatorHandle& op) {
  const auto& name = op.schema().name();
  return name == "aten::histc";
}

std::optional<c10::ScalarType> wider(const c10::OperatorHandle& op, c10::ScalarType t, bool pointwise) {
  if (t == c10::kHalf || t == c10::kBFloat16) return c10::kFloat;
  if (c10::isIntegralType(t, /*includeBool=*/false))
    return has_gpu_integer_kernel(op) ? std::optional<c10::ScalarType>(c10::kDouble) : std::nullopt;
  // float8 holds data for scaled matmuls; its elementwise arithmetic and comparisons
  // compute in float32, as torch_musa's do. Reductions and the rest keep the error.
  if (pointwise && (t == c10::kFloat8_e4m3fn || t == c10::kFloat8_e5m2)) return c10::kFloat;
  return std::nullopt;
}

void for_each_tensor(const c10::IValue& v, c10::function_ref<void(const at::Tensor&)> fn) {
  if (v.isTensor()) {
    fn(v.toTensor());
  } else if (v.isTensorList()) {
    for (const c10::IValue& t : op_layer::elements(v)) fn(t.toTensor());
  } else if (v.isList()) {
    for (const c10::IValue& e : op_layer::elements(v))
      if (e.isTensor()) fn(e.toTensor());
  }
}

}  // namespace

std::optional<std::string> dtype_without_kernel(const c10::Error& error) {
  const std::string msg = error.what_without_backtrace();
  const std::string marker = "not implemented for '", fft_marker = "Unsupported dtype ";
  if (auto at = msg.find(marker); at != std::string::npos) {
    auto start = at + marker.size(), end = msg.find('\'', start);
    if (end == std::string::npos) return std::nullopt;
    return msg.substr(start, end - start);
  }
  if (auto at = msg.find(fft_marker); at != std::string::npos) {
    auto start = at + fft_marker.size(), end = msg.find_first_of(" \n.", start);
    return msg.substr(start, end == std::string::npos ? std::string::npos : end - start);
  }
  return std::nullopt;
}

std::optional<c10::ScalarType> missing_kernel_dtype(const c10::OperatorHandle& op, const c10::Error& error,
                                                    c10::ArrayRef<c10::IValue> args) {
  if (t_widening) return std::nullopt;
  const bool pointwise = op.hasTag(at::Tag::pointwise);
  const auto dtype = dtype_without_kernel(error);
  if (!dtype) return std::nullopt;
  const std::string& name = *dtype;
  std::optional<c10::ScalarType> found;
  for (const auto& v : args)
    for_each_tensor(v, [&](const at::Tensor& t) {
      if (!found && t.defined() && name == c10::toString(t.scalar_type()) && wider(op, t.scalar_type(), pointwise))
        found = t.scalar_type();
    });
  return found;
}

bool converting_now() { return t_widening; }

void run_widened(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::ScalarType narrow) {
  run_in_dtype(op, stack, narrow, *wider(op, narrow, op.hasTag(at::Tag::pointwise)));
}

void run_or_widen(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::function_ref<void()> run) {
  const size_t base = stack->size() - op.schema().arguments().size();
  const std::vector<c10::IValue> args(stack->begin() + base, stack->end());  // `run` may consume them
  try {
    run();
  } catch (const c10::Error& e) {
    const auto narrow = missing_kernel_dtype(op, e, args);
    if (!narrow) throw;
    stack->resize(base);
    stack->insert(stack->end(), args.begin(), args.end());
    run_widened(op, stack, *narrow);
  }
}

void run_in_dtype(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::ScalarType from,
                  c10::ScalarType compute) {
  const auto& schema = op.schema();
  const OpTraits& traits = traits_of(op);
  const size_t nargs = schema.arguments().size();
  const size_t base = stack->size() - nargs;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 4> widened;  // original -> converted copy
  auto widen = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.scalar_type() != from) return t;
    for (auto& e : widened)
      if (e.first.is_same(t)) return e.second;
    widened.emplace_back(t, t.to(compute));
    return widened.back().second;
  };
  std::unordered_set<const at::TensorImpl*> written;
  for (size_t idx : traits.written_args)
    for_each_tensor((*stack)[base + idx], [&](const at::Tensor& t) { written.insert(t.unsafeGetTensorImpl()); });
  for (size_t i = 0; i < nargs; ++i) (*stack)[base + i] = map_tensors((*stack)[base + i], widen);
  {
    std::lock_guard<std::mutex> g(g_mu);
    g_counts[counted_name(schema)]++;
  }
  t_widening = true;
  try {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), stack);
  } catch (...) {
    t_widening = false;
    throw;
  }
  t_widening = false;
  // Written arguments (in place, out=) get the results in their own dtype.
  for (auto& [original, copy] : widened)
    if (written.count(original.unsafeGetTensorImpl())) {
      if (original.sizes() != copy.sizes()) original.resize_(copy.sizes());
      original.copy_(copy);
    }
  const size_t nret = schema.returns().size();
  const size_t rbase = stack->size() - nret;
  for (size_t i = 0; i < nret; ++i)
    (*stack)[rbase + i] = map_tensors((*stack)[rbase + i], [&](const at::Tensor& t) -> at::Tensor {
      for (auto& [original, copy] : widened)
        if (copy.is_same(t)) return original;  // a written argument comes back as itself
      if (!t.defined()) return t;
      if (t.scalar_type() == compute) return t.to(from);
      // A half-precision FFT gives complex32 on GPUs; its widened run gives complex64.
      if (from == c10::kHalf && t.scalar_type() == c10::kComplexFloat) return t.to(c10::kComplexHalf);
      return t;
    });
}

std::unordered_map<std::string, int64_t> widened_op_counts() {
  std::lock_guard<std::mutex> g(g_mu);
  return g_counts;
}

void reset_widened_op_counts() {
  std::lock_guard<std::mutex> g(g_mu);
  g_counts.clear();
}

}  // namespace torch_musa::op_layer
