#include "ops/double_cast.h"

#include <ATen/core/Tensor.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "ops/delegation.h"
#include "ops/dtype_widening.h"

namespace torch_musa::op_layer {
namespace {

bool from_env() {
  const char* v = std::getenv("TORCH_USE_MUSA_DOUBLE_CAST");
  if (v == nullptr) return false;
  for (const char* on : {"1", "true", "on", "ON", "True", "TRUE"})
    if (std::strcmp(v, on) == 0) return true;
  return false;
}

// Name fragments of ops that move or make data rather than compute with it (torch_musa's
// list of ops it does not cast: factories, copies, views, indexing), plus item() and the
// other data-movement ops whose results would otherwise lose float64's bits.
constexpr std::array<std::string_view, 34> kDataOps = {
    "empty", "zero", "ones", "full", "rand", "arange", "linspace", "logspace", "eye", "scalar_tensor",
    "copy", "clone", "detach", "alias", "lift", "view", "as_strided", "expand", "narrow", "slice",
    "select", "transpose", "permute", "contiguous", "reshape", "index", "gather", "scatter", "masked_",
    "nonzero", "where", "fill", "_local_scalar_dense", "equal"};
constexpr std::array<std::string_view, 9> kMoreDataOps = {"cat", "stack", "resize", "set_", "flip", "roll",
                                                          "repeat", "pad", "unfold"};

bool is_double(const c10::IValue& v) { return v.isTensor() && v.toTensor().defined() && v.toTensor().scalar_type() == c10::kDouble; }

bool has_double(const c10::IValue& v) {
  if (v.isTensor()) return is_double(v);
  if (v.isTensorList() || v.isList())
    for (const c10::IValue& e : elements(v))
      if (is_double(e)) return true;
  return false;
}

}  // namespace

std::atomic<bool> g_double_cast{from_env()};

void set_double_cast(bool on) { g_double_cast.store(on, std::memory_order_relaxed); }

bool computes_in_dtype(const c10::FunctionSchema& schema) {
  const std::string& full = schema.name();
  if (full.rfind("aten::", 0) != 0) return false;
  // A view (a returned alias that is not a written argument) shares its input's memory.
  for (const auto& r : schema.returns())
    if (r.alias_info() && !r.alias_info()->isWrite()) return false;
  const std::string_view name = std::string_view(full).substr(6);
  for (auto frag : kDataOps)
    if (name.find(frag) != std::string_view::npos) return false;
  for (auto frag : kMoreDataOps)
    if (name.find(frag) != std::string_view::npos) return false;
  return true;
}

bool maybe_run_double_cast(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (converting_now() || !traits_of(op).double_castable) return false;
  const size_t nargs = op.schema().arguments().size();
  bool any = false;
  for (size_t i = stack->size() - nargs; i < stack->size() && !any; ++i) any = has_double((*stack)[i]);
  if (!any) return false;
  run_in_dtype(op, stack, c10::kDouble, c10::kFloat);
  return true;
}

}  // namespace torch_musa::op_layer
