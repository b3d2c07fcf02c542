// Internals of the host driver's direct path (host_direct/*.cpp; docs/zero_tax_host.md): musa
// memory is host memory, so ATen's CPU kernels run on musa tensors themselves, without the
// delegation's second dispatch, CPU aliases, routed allocations and adopted outputs.
//
// Two kinds of table rows use what is here:
// - Structured<Base, Allow>: a structured op (public at::native::structured_<op> class) runs its
//   meta() on the musa tensors, with outputs allocated in musa memory (NewOutput) or a given
//   tensor written (GivenOutput), then impl(); the DispatchStubs impl() calls with the PrivateUse1
//   device type point at the CPU's kernels (forward_to_cpu).
// - Native<fn>: an at::native function the CPU registers that works for any device whose stubs
//   have kernels (where, index_select, relu).
// A call whose tensors the CPU kernels could not take as they are (Gate, operands_ready) goes to
// the delegation (boxed), which handles it as before.
#pragma once

// The CPU function pointers of a DispatchStub are declared only under torch's build flags for the
// instruction sets it was built with (x86-64: AVX2, AVX512). (First: before any ATen header.)
#if defined(__x86_64__) && !defined(HAVE_AVX2_CPU_DEFINITION)
#define HAVE_AVX2_CPU_DEFINITION
#define HAVE_AVX512_CPU_DEFINITION
#endif
#include <ATen/native/DispatchStub.h>
#include <ATen/ScalarOps.h>
#include <ATen/TensorIterator.h>
#include <ATen/core/IListRef.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/Resize.h>
#include <c10/core/Scalar.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <type_traits>

#include "core/device.h"
#include "graphs/capture_state.h"
#include "memory/caching_allocator.h"
#include "ops/delegation.h"
#include "ops/double_cast.h"
#include "ops/kernel_device.h"
#include "tensor_kinds/tensor_kinds.h"
#include "version_gates.h"

namespace torch_musa::op_layer::direct {

// Registered ops take the direct path (torch_musa._C._set_host_direct).
bool on();
// The direct path is registered (host driver, TORCH_MUSA_HOST_DIRECT not 0).
bool registered();

// The concepts' rows (one registration function each; registration.cpp calls them).
void register_pointwise(torch::Library& lib);
void register_reductions(torch::Library& lib);
void register_indexing(torch::Library& lib);
void register_linear_algebra(torch::Library& lib);
void register_copy(torch::Library& lib);

// Dtypes every op here has a CPU kernel for (others may need widening: the delegation).
inline bool direct_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: case at::kDouble: case at::kHalf: case at::kBFloat16: case at::kLong: case at::kInt:
    case at::kShort: case at::kChar: case at::kByte: case at::kBool: case at::kComplexFloat: case at::kComplexDouble:
      return true;
    default:
      return false;
  }
}

// What a row allows besides dense musa tensors of one device whose dtypes the op computes in.
enum Allow : unsigned {
  kPlain = 0,
  // One 0-dim cpu input (a Python number, as CUDA's kernels take it), converted to the common
  // dtype after meta() as the CPU's TensorIterator converts it (ops that promote their inputs).
  kCpuScalar = 1,
  // A bool output besides outputs of the common dtype (comparisons).
  kBoolOutput = 2,
};

// Whether a call's tensors suit the CPU kernels as they are; `device` is the musa device they share.
struct Gate {
  c10::DeviceIndex device = -1;
  bool cpu_scalar = false;
  bool ok = on() && !graphs::any_capture_underway() && !double_cast_enabled();

  // A dense musa tensor of a direct dtype, on the device of the others.
  void musa(const at::Tensor& t) {
    if (!ok) return;
    if (!t.defined() || t.device().type() != kMusa || tensor_kinds::is_kind(t) || t._is_zerotensor() ||
        !direct_dtype(t.scalar_type()) || TORCH_MUSA_TENSOR_HAS_NAMES(t)) {
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
  void input(const at::Tensor& t, unsigned allow) {
    if (ok && (allow & kCpuScalar) && !cpu_scalar && t.defined() && t.device().is_cpu() && t.dim() == 0 &&
        !t._is_zerotensor() && direct_dtype(t.scalar_type())) {
      cpu_scalar = true;
      return;
    }
    musa(t);
  }
  // One argument of a call: tensors are checked, other values pass.
  template <class T>
  void arg(const T&, unsigned) {}
  void arg(const at::Tensor& t, unsigned allow) { input(t, allow); }
  void arg(const std::optional<at::Tensor>& t, unsigned allow) {
    if (t.has_value() && t->defined()) input(*t, allow);
  }
  void arg(const at::ITensorListRef& ts, unsigned) {
    for (const at::Tensor& t : ts) musa(t);
  }
  bool ready() const { return ok && device >= 0; }
};

// The value of a 0-dim cpu tensor, read without a dispatch for the dtypes of Python numbers.
inline c10::Scalar value_of(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kDouble: return *t.const_data_ptr<double>();
    case at::kLong: return *t.const_data_ptr<int64_t>();
    case at::kBool: return *t.const_data_ptr<bool>();
    case at::kComplexDouble: return *t.const_data_ptr<c10::complex<double>>();
    default: return t.item();
  }
}

// A new musa tensor (the CPU's empty_strided, in musa memory of `device`).
at::Tensor new_output(c10::IntArrayRef sizes, c10::IntArrayRef strides, const c10::TensorOptions& options,
                      c10::DeviceIndex device);

template <class Base>
constexpr bool kIterator = std::is_base_of_v<at::TensorIteratorBase, Base>;

// Structured op `Base` with what both output forms share.
template <class Base>
struct Direct : Base {
  // After meta(): makes a TensorIterator op's operands what the CPU kernels read: every input in
  // the common dtype (a cpu scalar converted, keeping the original as the CPU's TensorIterator
  // does: the CPU kernels read a reduced-float op's scalar from it), every output in it too (or
  // bool where allowed). False: the delegation's TensorIterator converts (mixed dtypes).
  bool operands_ready(unsigned allow) {
    if constexpr (kIterator<Base>) {
      const c10::ScalarType common = this->common_dtype_;
      if (common == c10::ScalarType::Undefined) return false;
      for (auto& op : this->operands_) {
        if (op.current_dtype == common) continue;
        if (op.is_output) {
          if ((allow & kBoolOutput) && op.current_dtype == at::kBool) continue;
          return false;
        }
        const at::Tensor& t = op.tensor();
        if (!(allow & kCpuScalar) || !t.is_cpu() || t.dim() != 0) return false;
        op.exchange_tensor(c10::MaybeOwned<at::TensorBase>::owned(
            at::detail::scalar_tensor_static(value_of(t), common, at::kCPU)));
        op.current_dtype = op.target_dtype = common;
        op.data = const_cast<void*>(op.tensor_base().const_data_ptr());
      }
    }
    return true;
  }
};

// Structured op `Base` with a new musa output (functional form).
template <class Base>
struct NewOutput final : Direct<Base> {
  explicit NewOutput(c10::DeviceIndex d) : device(d) {}
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options TORCH_MUSA_SET_OUTPUT_NAMES_PARAM) override {
    out = new_output(sizes, strides, options, device);
    if constexpr (kIterator<Base>) Base::set_output_raw_strided(i, sizes, strides, options TORCH_MUSA_SET_OUTPUT_NAMES_ARG);
  }
  const at::Tensor& maybe_get_output(int64_t) override { return out; }
  c10::DeviceIndex device;
  at::Tensor out;
  bool defer = false;  // (never set: a new output has the layout asked for; read as GivenOutput's)
};

// Structured op `Base` writing a given musa tensor: self of an in-place form (never resized), or
// out= (resized as the CPU's out= is: only when its size differs). The checks are the CPU's.
template <class Base>
struct GivenOutput final : Direct<Base> {
  GivenOutput(const at::Tensor& t, bool resizable) : target(t), resizable(resizable) {}
  void set_output_raw_strided(int64_t i, c10::IntArrayRef sizes, c10::IntArrayRef strides,
                              c10::TensorOptions options TORCH_MUSA_SET_OUTPUT_NAMES_PARAM) override {
    if (resizable) {
      TORCH_CHECK(options.dtype() == target.dtype(), "Expected out tensor to have dtype ", options.dtype(),
                  ", but got ", target.dtype(), " instead");
      if (at::native::resize_output(target, sizes)) {
        if (!strides.empty()) target.as_strided_(sizes, strides);
        else if (options.memory_format_opt().has_value())
          target.unsafeGetTensorImpl()->empty_tensor_restride(*options.memory_format_opt());
      }
    } else {
      TORCH_CHECK(options.dtype() == target.dtype(), "Bad in-place call: input tensor dtype ", target.dtype(),
                  " and output tensor dtype ", options.dtype(), " should match");
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
  bool defer = false;
};

// Whether this thread runs a direct op's kernels (launch() below).
inline thread_local bool t_launched = false;

// Runs `impl` as the delegation runs a kernel: work on the current musa stream (inline on the host
// driver; its raw-capture check included), one device activity named `name` while a profiler
// records. Ops that `impl` calls run inside it (the stream is checked, the activity is theirs), as
// the ops a delegated kernel calls run inside the delegation.
template <class Fn>
void launch(const char* name, c10::DeviceIndex device, Fn&& impl,
            profiler::ActivityKind kind = profiler::ActivityKind::Kernel) {
  if (t_launched) {
    impl();
    return;
  }
  struct Flag {
    Flag() { t_launched = true; }
    ~Flag() { t_launched = false; }
  } flag;
  kernel_device().launch(device, impl, name, kind);
}
template <class Fn>
void launch(const c10::OperatorHandle& op, c10::DeviceIndex device, Fn&& impl) {
  launch(op.schema().name().c_str(), device, impl);
}

// The tensor a call writes: its first non-const tensor argument (self in place, or out=).
template <class... A>
at::Tensor& written_arg(A&&... args) {
  at::Tensor* p = nullptr;
  auto pick = [&p](auto&& a) {
    if constexpr (std::is_same_v<decltype(a), at::Tensor&>)
      if (p == nullptr) p = &a;
  };
  (pick(args), ...);
  return *p;
}

// The delegation of one call, boxed (calls the direct path does not take).
template <class Ret, class... Args>
Ret delegated(const c10::OperatorHandle& op, c10::DispatchKeySet ks, Args&&... args) {
  torch::jit::Stack stack;
  stack.reserve(sizeof...(Args));
  (stack.emplace_back(args), ...);
  boxed_delegate(op, ks, &stack);
  if constexpr (std::is_same_v<Ret, at::Tensor>) return std::move(stack.back()).toTensor();
  else if constexpr (std::is_same_v<Ret, at::Tensor&>) return written_arg(args...);
}

// The handle of aten op `qualified` ("add.Tensor", "exp").
c10::OperatorHandle handle(const char* qualified);

// A kernel's argument type for a meta() argument type (what the dispatcher passes), and the
// conversion to the meta() type.
template <class T>
struct KernelArg {
  using type = T;
  static T meta(T v) { return v; }
};
template <>
struct KernelArg<at::OptionalScalarRef> {
  using type = const std::optional<at::Scalar>&;
  static at::OptionalScalarRef meta(type v) { return v.has_value() ? at::OptionalScalarRef(*v) : at::OptionalScalarRef(); }
};
template <>
struct KernelArg<at::OptionalTensorRef> {
  using type = const std::optional<at::Tensor>&;
  static at::OptionalTensorRef meta(type v) {
    return v.has_value() && v->defined() ? at::OptionalTensorRef(*v) : at::OptionalTensorRef();
  }
};
template <class T>
using KArg = typename KernelArg<T>::type;

// One structured op (class `Base`, whose meta() takes self first) on the direct path, its forms
// registered by add(): functional, in place and out= (a null name: the op has no such form).
template <class Base, unsigned Allow = kPlain, class Meta = decltype(&Base::meta)>
struct Structured;

template <class Base, unsigned Allow, class C, class... R>
struct Structured<Base, Allow, void (C::*)(const at::Tensor&, R...)> {
  static at::Tensor functional(const c10::OperatorHandle& op, c10::DispatchKeySet ks, const at::Tensor& self,
                               KArg<R>... rest) {
    Gate g;
    g.arg(self, Allow);
    (g.arg(rest, Allow), ...);
    if (g.ready()) {
      NewOutput<Base> s(g.device);
      s.meta(self, KernelArg<R>::meta(rest)...);
      if (s.operands_ready(Allow)) {
        launch(op, g.device, [&] { s.impl(self, KernelArg<R>::meta(rest)..., s.out); });
        return std::move(s.out);
      }
    }
    return delegated<at::Tensor>(op, ks, self, rest...);
  }

  // `target`: self (in place) or out (resizable).
  static at::Tensor& written(const c10::OperatorHandle& op, c10::DispatchKeySet ks, at::Tensor& target,
                             bool resizable, const at::Tensor& self, KArg<R>... rest) {
    Gate g;
    g.musa(target);
    g.arg(self, Allow);
    (g.arg(rest, Allow), ...);
    if (g.ready()) {
      GivenOutput<Base> s(target, resizable);
      s.meta(self, KernelArg<R>::meta(rest)...);
      if (!s.defer && s.operands_ready(Allow)) {
        launch(op, g.device, [&] { s.impl(self, KernelArg<R>::meta(rest)..., target); });
        return target;
      }
    }
    if (resizable) delegated<void>(op, ks, self, rest..., target);
    else delegated<void>(op, ks, target, rest...);
    return target;
  }

  static void add(torch::Library& lib, const char* fn, const char* inplace, const char* out) {
    if (fn != nullptr)
      lib.impl(fn, torch::CppFunction([h = handle(fn)](c10::DispatchKeySet ks, const at::Tensor& self,
                                                       KArg<R>... rest) { return functional(h, ks, self, rest...); }));
    if (inplace != nullptr)
      lib.impl(inplace, torch::CppFunction([h = handle(inplace)](c10::DispatchKeySet ks, at::Tensor& self,
                                                                 KArg<R>... rest) -> at::Tensor& {
        return written(h, ks, self, false, self, rest...);
      }));
    if (out != nullptr)
      lib.impl(out, torch::CppFunction([h = handle(out)](c10::DispatchKeySet ks, const at::Tensor& self,
                                                         KArg<R>... rest, at::Tensor& o) -> at::Tensor& {
        return written(h, ks, o, true, self, rest...);
      }));
  }
};

// An at::native function `Fn` the CPU registers for op `name`, run on musa tensors: it allocates
// with its operands' options and calls DispatchStubs with their device type (or other ops).
template <auto Fn, class Sig = decltype(Fn)>
struct Native;

template <auto Fn, class Ret, class... A>
struct Native<Fn, Ret (*)(A...)> {
  static void add(torch::Library& lib, const char* name) {
    lib.impl(name, torch::CppFunction([h = handle(name)](c10::DispatchKeySet ks, A... args) -> Ret {
      Gate g;
      (g.arg(args, kPlain), ...);
      if (!g.ready()) return delegated<Ret>(h, ks, args...);
      if constexpr (std::is_same_v<Ret, at::Tensor>) {
        at::Tensor r;
        launch(h, g.device, [&] { r = Fn(args...); });
        return r;
      } else {
        launch(h, g.device, [&] { Fn(args...); });
        return written_arg(args...);
      }
    }));
  }
};

// Points a stub's PrivateUse1 slot at the CPU kernel torch would pick on this CPU.
void check_cpu_kernel(bool found);
const std::string& cpu_capability();
template <class Stub>
void forward_stub(Stub& stub) {
  auto fn = Stub::DEFAULT;
#if defined(__x86_64__)
  // (at::get_cpu_capability names the level torch chose, ATEN_CPU_CAPABILITY included)
  const std::string& cap = cpu_capability();
  if (cap == "AVX512" && Stub::AVX512) fn = Stub::AVX512;
  else if ((cap == "AVX512" || cap == "AVX2") && Stub::AVX2) fn = Stub::AVX2;
#endif
  check_cpu_kernel(fn != nullptr);
  stub.set_privateuse1_dispatch_ptr(fn);
}
template <class... Stubs>
void forward_to_cpu(Stubs&... stubs) {
  (forward_stub(stubs), ...);
}

}  // namespace torch_musa::op_layer::direct
