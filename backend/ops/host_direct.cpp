// The host driver's direct path: musa memory is host memory, so ATen's CPU
// kernels can run on musa tensors themselves, without the delegation's second
// dispatch, CPU aliases, routed allocations and adopted outputs.
//
// Structured ops (public at::native::structured_<op> classes) run their meta()
// on the musa tensors, with outputs allocated in musa memory by the overrides
// below, then impl(); the DispatchStubs that impl() calls with the PrivateUse1
// device type are pointed at the CPU's kernels (the host driver only).
// Anything the CPU kernels could not take as it is (mixed dtypes past a CPU
// scalar, other devices, sparse/nested/quantized kinds, zero tensors, dtypes
// without a CPU kernel) and every call during a graph capture or double
// casting goes to the delegation (boxed), which handles them as before.
// TORCH_MUSA_HOST_DIRECT=0 registers nothing here (the delegation alone).

// The CPU function pointers of a DispatchStub are declared only under torch's
// build flags for the instruction sets it was built with (x86-64: AVX2, AVX512).
#if defined(__x86_64__) && !defined(HAVE_AVX2_CPU_DEFINITION)
#define HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
#include <ATen/native/BinaryOps.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/Fill.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/add_native.h>
#include <ATen/ops/div_native.h>
#include <ATen/ops/fill_native.h>
#include <ATen/ops/mul_native.h>
#include <ATen/ops/sub_native.h>
#include <ATen/ops/sum_native.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/Version.h>
#include <ATen/ops/result_type_native.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <type_traits>

#include "core/device.h"
#include "graphs/capture_state.h"
#include "memory/caching_allocator.h"
#include "ops/delegation.h"
#include "ops/double_cast.h"
#include "ops/host_direct.h"
#include "ops/kernel_device.h"
#include "version_gates.h"
#include "tensor_kinds/tensor_kinds.h"

namespace torch_musa::op_layer {
namespace {

std::atomic<bool> g_enabled{true};

// Dtypes every op here has a CPU kernel for (others may need widening: the delegation).
bool direct_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kLong: case at::kInt:
    case at::kShort: case at::kChar: case at::kByte: case at::kBool: case at::kComplexFloat: case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

// Whether a call's tensors suit the CPU kernels as they are; `device` is the musa device they share.
struct Gate {
  c10::DeviceIndex device = -1;
  bool ok = g_enabled.load(std::memory_order_relaxed) && !graphs::any_capture_underway() && !double_cast_enabled();

  // A dense musa tensor of a direct dtype, on the device of the others.
  void musa(const at::Tensor& t) {
    if (!ok) return;
    if (!t.defined() || t.device().type() != kMusa || tensor_kinds::is_kind(t) || t._is_zerotensor() ||
        !direct_dtype(t.scalar_type())) {
      ok = false;
      return;
    }
    // A storage torch has made inaccessible (graph trees' overwritten outputs) raises its own error
    // here, as the delegation's aliasing does; the CPU kernels would read its memory unchecked.
    (void)t.storage().data_ptr();
    const c10::DeviceIndex i = t.device().index();
    if (device < 0) device = i;
    else if (i != device) ok = false;
  }
  // An input may also be a 0-dim cpu tensor (a scalar, as CUDA's kernels take it).
  void input(const at::Tensor& t) {
    if (ok && t.defined() && t.device().is_cpu() && t.dim() == 0 && !t._is_zerotensor() &&
        direct_dtype(t.scalar_type()))
      return;
    musa(t);
  }
};

// The value of a 0-dim cpu tensor, read without a dispatch for the dtypes of Python numbers.
c10::Scalar value_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kDouble: return *t.const_data_ptr<double>();
    case at::kLong: return *t.const_data_ptr<int64_t>();
    case at::kBool: return *t.const_data_ptr<bool>();
    case at::kComplexDouble: return *t.const_data_ptr<c10::complex<double>>();
    default: return t.item();
  }
}

// A 0-dim cpu operand in the dtype the op computes in: TensorIterator converts cpu scalars only
// when it computes on the CPU (a musa kernel reads them in its own dtype), so it is done here, as
// the CPU's TensorIterator would. Returns false when the op computes in a dtype its musa operands
// do not have (the delegation's TensorIterator converts those).
bool scalar_in_common_dtype(const at::Tensor& self, const at::Tensor& other, at::Tensor& self_c, at::Tensor& other_c) {
  self_c = self;
  other_c = other;
  if (self.scalar_type() == other.scalar_type()) return true;
  const c10::ScalarType common = at::native::result_type(self, other);  // (not dispatched: no profiler event)
  for (at::Tensor* t : {&self_c, &other_c}) {
    if (t->scalar_type() == common) continue;
    if (!t->device().is_cpu()) return false;
    *t = at::detail::scalar_tensor_static(value_of(*t), common, at::kCPU);
  }
  return true;
}

// A new musa tensor (the CPU's empty_strided, in musa memory of `device`).
at::Tensor new_output(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options,
                      c10::DeviceIndex device) {
  DeviceScope scope(device);
  const c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  const c10::ScalarType dtype = c10::typeMetaToScalarType(options.dtype());
  if (strides.empty()) return at::detail::empty_generic(sizes, allocator::get(), keys, dtype, options.memory_format_opt());
  return at::detail::empty_strided_generic(sizes, strides, allocator::get(), keys, dtype);
}

template <class Base>
constexpr bool kIterator = std::is_base_of_v<at::TensorIteratorBase, Base>;

// After meta(): whether a TensorIterator op computes in its operands' own dtype (the CPU
// kernels read every operand in the common dtype; mixed ones run through the delegation).
template <class Base>
bool operands_in_common_dtype(Base& s) {
  if constexpr (kIterator<Base>) {
    const c10::ScalarType common = s.common_dtype();
    for (int i = 0; i < s.ntensors(); ++i)
      if (s.dtype(i) != common) return false;
  }
  return true;
}

// Structured op `Base` with a new musa output (functional form).
template <class Base>
struct NewOutput final : Base {
  explicit NewOutput(c10::DeviceIndex d) : device(d) {}
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options TORCH_MUSA_SET_OUTPUT_NAMES_PARAM) override {
    out = new_output(sizes, strides, options, device);
    if constexpr (kIterator<Base>) Base::set_output_raw_strided(i, sizes, strides, options TORCH_MUSA_SET_OUTPUT_NAMES_ARG);
  }
  const at::Tensor& maybe_get_output(int64_t) override { return out; }
  c10::DeviceIndex device;
  at::Tensor out;
  bool defer = false;
};

// Structured op `Base` writing a given musa tensor: self of an in-place form (never resized), or
// out= (resized as CUDA's and the CPU's out= are: only when its size differs).
template <class Base>
struct GivenOutput final : Base {
  GivenOutput(const at::Tensor& t, bool resizable, c10::DeviceIndex d) : target(t), resizable(resizable), device(d) {}
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options TORCH_MUSA_SET_OUTPUT_NAMES_PARAM) override {
    TORCH_CHECK(options.dtype() == target.dtype(), "Expected out tensor to have dtype ", options.dtype(),
                ", but got ", target.dtype(), " instead");
    if (resizable) {
      if (at::native::resize_output(target, sizes) && !strides.empty()) target.as_strided_(sizes, strides);
    } else {
      TORCH_CHECK(target.sizes() == sizes, "Bad in-place call: input tensor size ", target.sizes(),
                  " and output tensor size ", sizes, " should match");
    }
    // A layout the kernel needs that the given tensor lacks: the delegation's kernel copies back.
    if (!strides.empty() && target.strides() != strides) defer = true;
    if constexpr (kIterator<Base>) Base::set_output_raw_strided(i, sizes, strides, options TORCH_MUSA_SET_OUTPUT_NAMES_ARG);
  }
  const at::Tensor& maybe_get_output(int64_t) override { return target; }
  const at::Tensor& target;
  bool resizable;
  c10::DeviceIndex device;
  bool defer = false;
};

// Runs `impl` as the delegation runs a kernel: work on the current musa stream (inline on the host
// driver; its raw-capture check included), one device activity while a profiler records.
template <class Fn>
void launch(const c10::OperatorHandle& op, c10::DeviceIndex device, Fn&& impl) {
  kernel_device().launch(device, impl, op.schema().name().c_str());
}

// The delegation of one call, boxed (calls the direct path does not take).
template <class Ret, class... Args>
Ret delegated(const c10::OperatorHandle& op, c10::DispatchKeySet ks, Args&&... args) {
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args));
  (stack.emplace_back(args), ...);
  boxed_delegate(op, ks, &stack);
  if constexpr (std::is_same_v<Ret, at::Tensor>) return std::move(stack.back()).toTensor();
}

// One structured op's three forms on the direct path: `Base` the structured class, `Meta` its
// meta() arguments after self/other (alpha, or nothing).
template <class Base>
struct Binary {
  template <class... Extra>
  static at::Tensor functional(const c10::OperatorHandle& op, c10::DispatchKeySet ks, const at::Tensor& self,
                               const at::Tensor& other, const Extra&... extra) {
    Gate g;
    g.input(self);
    g.input(other);
    at::Tensor a, b;
    if (g.ok && g.device >= 0 && scalar_in_common_dtype(self, other, a, b)) {
      NewOutput<Base> s(g.device);
      s.meta(a, b, extra...);
      if (operands_in_common_dtype(s)) {
        launch(op, g.device, [&] { s.impl(a, b, extra..., s.out); });
        return std::move(s.out);
      }
    }
    return delegated<at::Tensor>(op, ks, self, other, extra...);
  }

  template <class... Extra>
  static at::Tensor& written(const c10::OperatorHandle& op, c10::DispatchKeySet ks, at::Tensor& target,
                             bool resizable, const at::Tensor& self, const at::Tensor& other, const Extra&... extra) {
    Gate g;
    g.musa(target);
    g.input(self);
    g.input(other);
    at::Tensor a, b;
    if (g.ok && scalar_in_common_dtype(self, other, a, b)) {
      GivenOutput<Base> s(target, resizable, g.device);
      s.meta(a, b, extra...);
      if (!s.defer && operands_in_common_dtype(s)) {
        launch(op, g.device, [&] { s.impl(a, b, extra..., target); });
        return target;
      }
    }
    if (resizable) delegated<void>(op, ks, self, other, extra..., target);
    else delegated<void>(op, ks, target, other, extra...);
    return target;
  }
};

// Registers the functional, in-place and out= forms of binary op `name` (structured class Base);
// `Extra`: the arguments after self/other (`const at::Scalar&` alpha, or none).
template <class Base, class... Extra>
void register_binary(torch::Library& lib, const char* name) {
  auto& d = c10::Dispatcher::singleton();
  auto fn = d.findSchemaOrThrow((std::string("aten::") + name).c_str(), "Tensor");
  auto in = d.findSchemaOrThrow((std::string("aten::") + name + "_").c_str(), "Tensor");
  auto out = d.findSchemaOrThrow((std::string("aten::") + name).c_str(), "out");
  const std::string n(name);
  using T = const at::Tensor&;
  lib.impl((n + ".Tensor").c_str(), torch::CppFunction([fn](c10::DispatchKeySet ks, T self, T other, Extra... extra) {
    return Binary<Base>::functional(fn, ks, self, other, extra...);
  }));
  lib.impl((n + "_.Tensor").c_str(), torch::CppFunction([in](c10::DispatchKeySet ks, at::Tensor& self, T other,
                                                              Extra... extra) -> at::Tensor& {
    return Binary<Base>::written(in, ks, self, false, self, other, extra...);
  }));
  lib.impl((n + ".out").c_str(), torch::CppFunction([out](c10::DispatchKeySet ks, T self, T other, Extra... extra,
                                                           at::Tensor& o) -> at::Tensor& {
    return Binary<Base>::written(out, ks, o, true, self, other, extra...);
  }));
}

// sum over dims: structured, its impl reduces through sum_stub.
void register_sum(torch::Library& lib) {
  auto& d = c10::Dispatcher::singleton();
  auto fn = d.findSchemaOrThrow("aten::sum", "dim_IntList");
  auto out = d.findSchemaOrThrow("aten::sum", "IntList_out");
  using Base = at::native::structured_sum_out;
  using Dims = at::OptionalIntArrayRef;
  using Dtype = std::optional<at::ScalarType>;
  lib.impl("sum.dim_IntList", torch::CppFunction([fn](c10::DispatchKeySet ks, const at::Tensor& self, Dims dim,
                                                       bool keepdim, Dtype dtype) {
    Gate g;
    g.musa(self);
    if (g.ok) {
      NewOutput<Base> s(g.device);
      s.meta(self, dim, keepdim, dtype);
      launch(fn, g.device, [&] { s.impl(self, dim, keepdim, dtype, s.out); });
      return std::move(s.out);
    }
    return delegated<at::Tensor>(fn, ks, self, dim, keepdim, dtype);
  }));
  lib.impl("sum.IntList_out", torch::CppFunction([out](c10::DispatchKeySet ks, const at::Tensor& self, Dims dim,
                                                        bool keepdim, Dtype dtype, at::Tensor& o) -> at::Tensor& {
    Gate g;
    g.musa(o);
    g.musa(self);
    if (g.ok) {
      GivenOutput<Base> s(o, true, g.device);
      s.meta(self, dim, keepdim, dtype);
      if (!s.defer) {
        launch(out, g.device, [&] { s.impl(self, dim, keepdim, dtype, o); });
        return o;
      }
    }
    delegated<void>(out, ks, self, dim, keepdim, dtype, o);
    return o;
  }));
}

// fill_ with a scalar (also what the CPU's sum kernel starts its output with): TensorIterator
// over fill_stub.
void register_fill(torch::Library& lib) {
  auto op = c10::Dispatcher::singleton().findSchemaOrThrow("aten::fill_", "Scalar");
  lib.impl("fill_.Scalar", torch::CppFunction([op](c10::DispatchKeySet ks, at::Tensor& self,
                                                    const at::Scalar& value) -> at::Tensor& {
    Gate g;
    g.musa(self);
    if (!g.ok) {
      delegated<void>(op, ks, self, value);
      return self;
    }
    launch(op, g.device, [&] { at::native::fill_(self, value); });
    return self;
  }));
}

// Points `stub`'s PrivateUse1 slot at the CPU kernel torch would pick on this CPU.
template <class Stub>
void forward_to_cpu(Stub& stub) {
  auto fn = Stub::DEFAULT;
#if defined(__x86_64__)
  // (at::get_cpu_capability names the level torch chose, ATEN_CPU_CAPABILITY included)
  static const std::string cap = at::get_cpu_capability();
  if (cap == "AVX512" && Stub::AVX512) fn = Stub::AVX512;
  else if ((cap == "AVX512" || cap == "AVX2") && Stub::AVX2) fn = Stub::AVX2;
#endif
  TORCH_CHECK(fn, "torch_musa: this torch has no CPU kernel behind a DispatchStub the host driver's direct path ",
              "uses; set TORCH_MUSA_HOST_DIRECT=0 to run every op through the delegation, or use a supported torch ",
              "(2.11-2.15)");
  stub.set_privateuse1_dispatch_ptr(fn);
}

bool env_enabled() {
  const char* v = std::getenv("TORCH_MUSA_HOST_DIRECT");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0) return true;
  TORCH_CHECK(std::strcmp(v, "0") == 0, "TORCH_MUSA_HOST_DIRECT must be 0 or 1, got '", v, "'");
  return false;
}

}  // namespace

bool register_host_direct(torch::Library& lib) {
  if (!is_host_driver() || !env_enabled()) return false;
  forward_to_cpu(at::native::add_stub);
  forward_to_cpu(at::native::mul_stub);
  forward_to_cpu(at::native::div_true_stub);
  forward_to_cpu(at::native::sum_stub);
  forward_to_cpu(at::native::fill_stub);
  register_binary<at::native::structured_ufunc_add_CPU, const at::Scalar&>(lib, "add");
  register_binary<at::native::structured_sub_out, const at::Scalar&>(lib, "sub");
  register_binary<at::native::structured_mul_out>(lib, "mul");
  register_binary<at::native::structured_div_out>(lib, "div");
  register_sum(lib);
  register_fill(lib);
  return true;
}

void set_host_direct(bool on) { g_enabled.store(on, std::memory_order_relaxed); }
bool host_direct_enabled() { return g_enabled.load(std::memory_order_relaxed); }

}  // namespace torch_musa::op_layer
