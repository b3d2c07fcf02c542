// The host driver's direct path: its switches and the registration of every concept's rows
// (pointwise.cpp, reductions.cpp, indexing.cpp, linear_algebra.cpp, copy.cpp).
#include "ops/host_direct/direct.h"

#include <ATen/Version.h>
#include <ATen/ops/empty_strided.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "ops/host_direct.h"

namespace torch_musa::op_layer {
namespace direct {
namespace {

std::atomic<bool> g_enabled{true};
bool g_registered = false;

bool env_enabled() {
  const char* v = std::getenv("TORCH_MUSA_HOST_DIRECT");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0) return true;
  TORCH_CHECK(std::strcmp(v, "0") == 0, "TORCH_MUSA_HOST_DIRECT must be 0 or 1, got '", v, "'");
  return false;
}

}  // namespace

bool on() { return g_enabled.load(std::memory_order_relaxed); }
bool registered() { return g_registered; }

at::Tensor new_output(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options,
                      c10::DeviceIndex device) {
  DeviceScope scope(device);
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  const c10::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
  if (strides.empty()) return at::detail::empty_generic(sizes, allocator::get(), keys, dtype, options.memory_format_opt());
  return at::detail::empty_strided_generic(sizes, strides, allocator::get(), keys, dtype);
}

c10::OperatorHandle handle(const char* qualified) {
  const char* dot = std::strchr(qualified, '.');
  const std::string name = "aten::" + (dot ? std::string(qualified, dot) : std::string(qualified));
  return c10::Dispatcher::singleton().findSchemaOrThrow(name.c_str(), dot ? dot + 1 : "");
}

const std::string& cpu_capability() {
  static const std::string cap = at::get_cpu_capability();
  return cap;
}

void check_cpu_kernel(bool found) {
  TORCH_CHECK(found, "torch_musa: this torch has no CPU kernel behind a DispatchStub the host driver's direct path ",
              "uses; set TORCH_MUSA_HOST_DIRECT=0 to run every op through the delegation, or use a supported torch ",
              "(2.11-2.15)");
}

}  // namespace direct

bool register_host_direct(torch::Library& lib) {
  if (!is_host_driver() || !direct::env_enabled()) return false;
  direct::register_pointwise(lib);
  direct::register_reductions(lib);
  direct::register_indexing(lib);
  direct::register_linear_algebra(lib);
  direct::register_copy(lib);
  direct::g_registered = true;
  return true;
}

void set_host_direct(bool on) { direct::g_enabled.store(on, std::memory_order_relaxed); }
bool host_direct_enabled() { return direct::g_enabled.load(std::memory_order_relaxed); }

}  // namespace torch_musa::op_layer
