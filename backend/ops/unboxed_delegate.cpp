// The op layer's fast path for the commonest op shapes: ops taking tensors
// and scalars (mul, add, where, addcmul, mm, addmm...), the in-place forms
// of the pointwise ones, and the fused optimizer steps with the foreach ops
// they run beside (hundreds of tensors a call, in lists), in place or not.
//
// The boxed fallback pays for boxing: the dispatcher copies every argument
// into a stack, and copying a musa tensor that has a Python object attaches
// a Python reference (taking the GIL) and drops it again afterwards. Here the
// same delegation runs unboxed: one stateful kernel per op, generated from a
// handful of C++ signatures, aliases the musa arguments as they come, calls
// the kernel device's kernel with a typed redispatch and maps the result
// back. Anything unusual (an op the kernel device has no kernel for) goes to
// the boxed path.
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/enum_tag.h>
#include <torch/library.h>

#include <array>
#include <optional>
#include <tuple>
#include <type_traits>

#include "core/sync_debug.h"
#include "fp8/fp8.h"
#include "ops/delegate.h"
#include "ops/delegation.h"
#include "ops/double_cast.h"
#include "ops/dtype_widening.h"
#include "ops/list_alias_cache.h"
#include "ops/routed_blocks.h"
#include "graphs/capture_state.h"

namespace torch_musa::op_layer {
namespace {

// What a parameter of type T becomes on its way to the kernel device: tensors
// are aliased (held by value), everything else is passed on as it came.
template <class T>
struct Forwarded {
  using type = T;
};
template <>
struct Forwarded<const at::Tensor&> {
  using type = at::Tensor;
};
template <>
struct Forwarded<at::Tensor&> {
  using type = at::Tensor;
};
template <>
struct Forwarded<at::TensorList> {
  using type = std::vector<at::Tensor>;
};
template <>
struct Forwarded<const std::optional<at::Tensor>&> {
  using type = std::optional<at::Tensor>;
};

template <class T>
constexpr bool is_tensor_v = std::is_same_v<std::decay_t<T>, at::Tensor>;
template <class T>
constexpr bool is_list_v = std::is_same_v<std::decay_t<T>, at::TensorList>;
template <class T>
constexpr bool is_optional_tensor_v = std::is_same_v<std::decay_t<T>, std::optional<at::Tensor>>;

// What a parameter becomes when the previous call's alias lists are passed again: the cached
// list itself (no copy); everything else as Forwarded.
template <class T>
struct Cached {
  using type = typename Forwarded<T>::type;
};
template <>
struct Cached<at::TensorList> {
  using type = at::TensorList;
};

template <class FuncType>
class UnboxedDelegate;

template <class Ret, class... Args>
class UnboxedDelegate<Ret(Args...)> {
  static constexpr bool kInPlace = std::is_same_v<Ret, at::Tensor&>;
  // Functional list ops (_foreach_sqrt, _foreach_add.List...): a new tensor per list element.
  static constexpr bool kList = std::is_same_v<Ret, std::vector<at::Tensor>>;
  // Ops returning nothing update their list arguments in place, without resizing them (the
  // foreach and fused-optimizer ops): their aliases and the musa tensors stay alike.
  static constexpr bool kVoid = std::is_void_v<Ret>;

 public:
  explicit UnboxedDelegate(const c10::OperatorHandle& op)
      : op_(op),
        typed_(op.typed<Ret(Args...)>()),
        // (the foreach ops: their CPU kernel is torch's per-tensor composite)
        per_tensor_composite_(op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
                              !op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) {}

  template <class T>
  static bool is_zero_tensor(const T& a) {
    if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) return a.defined() && a._is_zerotensor();
    return false;
  }

  Ret operator()(c10::DispatchKeySet ks, Args... args) const {
    const OpTraits& traits = traits_of(op_);
    // Captures take the boxed path: the host driver records ops there; so do double casting and
    // torch's zero tensors (no memory: the boxed path makes them zeros first).
    // So does an op that may wait for the device while torch.musa.set_sync_debug_mode is on: the
    // boxed path reports it, reading the arguments (a boolean mask among an index's).
    if (traits.cpu_only || graphs::any_capture_underway() || C10_UNLIKELY(double_cast_enabled()) ||
        C10_UNLIKELY((is_zero_tensor(args) || ...)) ||
        C10_UNLIKELY(traits.synchronizes != OpTraits::Sync::kNever && sync_debug_mode() != 0))
      return boxed(ks, args...);
    note_delegated();
    routed_blocks::Hold hold_lent;  // the output is adopted below, from this thread's list
    KernelDevice& kd = kernel_device();
    if constexpr (kListCached || kList) {
      std::array<at::TensorList, kLists> lists;
      size_t k = 0;
      (collect_list(args, lists, k), ...);
      // In-place list ops (optimizer steps): alias lists kept from the previous call
      // (list_alias_cache.h).
      if constexpr (kListCached) {
        if (((!is_optional_tensor_v<Args> || !optional_defined(args)) && ...)) {
          if (ListAliasCache::Entry* e = list_alias_cache().refresh(&op_.schema(), lists)) {
            EntryInUse in_use(*e);
            size_t li = 0;
            std::tuple<typename Cached<Args>::type...> cached{cached_arg<Args>(args, *e, li)...};
            try {
              launch(kd, e->device, cached);
            } catch (const c10::Error& err) {
              return widened_or_rethrown(err, ks, args...);  // as the general path
            }
            return;
          }
        }
      }
      // Lists spanning devices (a cpu tensor among musa ones) run torch's per-tensor composite,
      // as CUDA's foreach kernels fall back to it: each tensor's op runs on its own device.
      if (per_tensor_composite_ && spans_devices(lists))
        return typed_.redispatch(c10::DispatchKeySet(c10::DispatchKey::CPU), args...);
    }
    Delegation call(op_, kd);
    const auto& schema_args = op_.schema().arguments();
    size_t i = 0;
    (note(call, args, schema_args[i++]), ...);
    call.check_mixing();
    if (const size_t listed = (list_size(args) + ... + size_t{0})) call.expect(listed + sizeof...(Args));
    if (call.device < 0) call.device = current_device();
    std::tuple<typename Forwarded<Args>::type...> forwarded{forward_arg<Args>(call, args)...};

    using Result = std::conditional_t<kVoid, bool, std::conditional_t<kInPlace, at::Tensor*, std::decay_t<Ret>>>;
    std::optional<Result> result;
    try {
      if constexpr (kVoid) {
        launch(kd, call.device, forwarded);
      } else {
        KernelScope scope(kd, call.device);
        KernelDeviceCallGuard below_musa;
        kd.launch(
            call.device,
            [&] {
              auto redispatch = [&](auto&... a) -> Ret {
                return typed_.redispatch(c10::DispatchKeySet(kd.dispatch_key()), a...);
              };
              decltype(auto) r = std::apply(redispatch, forwarded);
              if constexpr (kInPlace) {
                result = &r;
              } else {
                result = std::move(r);
              }
            },
            op_.schema().name().c_str());
      }
    } catch (const c10::Error& e) {
      return widened_or_rethrown(e, ks, args...);
    }
    if constexpr (kVoid) {
      return;
    } else if constexpr (kInPlace) {
      at::Tensor& self = first_arg(args...);
      call.sync_in_place(self);
      return self;
    } else if constexpr (kList) {
      for (at::Tensor& t : *result) t = call.result_to_musa(t);
      return std::move(*result);
    } else {
      return call.result_to_musa(*result);
    }
  }

 private:
  static constexpr size_t kLists = (size_t{is_list_v<Args>} + ... + size_t{0});
  // Void ops with lists and no plain tensor argument keep their alias lists across calls.
  static constexpr bool kListCached = kVoid && kLists > 0 && !(is_tensor_v<Args> || ...);

  // Runs a void op's kernel over `forwarded` on the current musa stream of `device`.
  template <class Tuple>
  void launch(KernelDevice& kd, c10::DeviceIndex device, Tuple& forwarded) const {
    KernelScope scope(kd, device);
    KernelDeviceCallGuard below_musa;
    kd.launch(
        device,
        [&] {
          std::apply([&](auto&... a) { typed_.redispatch(c10::DispatchKeySet(kd.dispatch_key()), a...); },
                     forwarded);
        },
        op_.schema().name().c_str());
  }

  template <class T>
  static bool optional_defined(const T& v) {
    if constexpr (is_optional_tensor_v<T>) {
      return v.has_value() && v->defined();
    } else {
      return false;
    }
  }

  static bool spans_devices(const std::array<at::TensorList, kLists>& lists) {
    const at::Tensor* first = nullptr;
    for (const at::TensorList list : lists)
      for (const at::Tensor& t : list) {
        if (!t.defined()) continue;
        if (first == nullptr) first = &t;
        else if (t.device() != first->device()) return true;
      }
    return false;
  }

  template <class T>
  static void collect_list(const T& v, std::array<at::TensorList, kLists>& lists, size_t& k) {
    if constexpr (is_list_v<T>) lists[k++] = v;
  }

  template <class A>
  static typename Cached<A>::type cached_arg(std::remove_reference_t<A>& v, const ListAliasCache::Entry& e,
                                             size_t& li) {
    if constexpr (is_list_v<A>) {
      return at::TensorList(e.aliases[li++]);
    } else if constexpr (is_optional_tensor_v<A>) {
      return std::nullopt;  // (cached calls have none)
    } else {
      return v;
    }
  }

  template <class T>
  static void note(Delegation& call, const T& v, const c10::Argument& arg) {
    const bool written = arg.alias_info() && arg.alias_info()->isWrite();
    if constexpr (is_tensor_v<T>) {
      call.note_device(v, arg.name(), false, written);
    } else if constexpr (is_list_v<T>) {
      for (const at::Tensor& t : v) call.note_device(t, arg.name(), false, written);
    } else if constexpr (is_optional_tensor_v<T>) {
      if (v) call.note_device(*v, arg.name(), false, written);
    }
  }

  template <class T>
  static size_t list_size(const T& v) {
    if constexpr (is_list_v<T>) {
      return v.size();
    } else {
      return 0;
    }
  }

  // Parameter type A's argument as the kernel device takes it (Forwarded<A>).
  template <class A>
  static typename Forwarded<A>::type forward_arg(Delegation& call, std::remove_reference_t<A>& v) {
    if constexpr (is_tensor_v<A>) {
      return call.alias(v);
    } else if constexpr (is_list_v<A>) {
      std::vector<at::Tensor> aliases;
      aliases.reserve(v.size());
      for (const at::Tensor& t : v) aliases.push_back(call.alias(t));  // (borrowed: no musa tensor copied)
      return aliases;
    } else if constexpr (is_optional_tensor_v<A>) {
      return v ? std::optional<at::Tensor>(call.alias(*v)) : std::nullopt;
    } else {
      return v;
    }
  }

  template <class First, class... Rest>
  static First& first_arg(First& first, Rest&...) {
    return first;
  }

  // After the kernel raised `e`: no kernel for one of the arguments' dtypes runs widened through
  // the boxed path (dtype_widening.h); anything else is rethrown (called inside the catch).
  Ret widened_or_rethrown(const c10::Error& e, c10::DispatchKeySet ks, Args... args) const {
    std::vector<c10::IValue> boxed_args;
    (boxed_args.emplace_back(args), ...);
    if (!missing_kernel_dtype(op_, e, boxed_args)) {
      fp8::rethrow_float8_without_kernel(op_, e);
      throw;
    }
    return boxed(ks, args...);
  }

  Ret boxed(c10::DispatchKeySet ks, Args... args) const {
    torch::jit::Stack stack;
    stack.reserve(sizeof...(Args));
    (stack.emplace_back(args), ...);
    boxed_delegate(op_, ks, &stack);
    if constexpr (kVoid) {
      return;
    } else if constexpr (kInPlace) {
      return first_arg(args...);
    } else if constexpr (kList) {
      return std::move(stack.back()).toTensorVector();
    } else {
      return std::move(stack.back()).toTensor();
    }
  }

  c10::OperatorHandle op_;
  c10::TypedOperatorHandle<Ret(Args...)> typed_;
  bool per_tensor_composite_;
};

// One letter per argument: T tensor, W tensor written in place (self of an
// in-place op), S scalar; then ':' and the return (T or W).
std::string shape_of(const c10::FunctionSchema& schema) {
  std::string code;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const auto& a = args[i];
    auto kind = a.type()->kind();
    bool written = a.alias_info() && a.alias_info()->isWrite();
    if (kind == c10::TypeKind::TensorType) {
      if (written && i != 0) return "";
      if (!written && a.alias_info()) return "";
      code += written ? 'W' : 'T';
    } else if (kind == c10::TypeKind::NumberType) {
      code += 'S';
    } else {
      return "";
    }
  }
  const auto& rets = schema.returns();
  if (rets.size() != 1 || rets[0].type()->kind() != c10::TypeKind::TensorType) return "";
  bool ret_written = rets[0].alias_info() && rets[0].alias_info()->isWrite();
  if (ret_written != (!code.empty() && code[0] == 'W')) return "";
  return code + (ret_written ? ":W" : ":T");
}

bool returns_one_tensor_list(const c10::FunctionSchema& schema) {
  const auto& rets = schema.returns();
  if (rets.size() != 1 || rets[0].alias_info() || rets[0].type()->kind() != c10::TypeKind::ListType) return false;
  return rets[0].type()->castRaw<c10::ListType>()->getElementType()->kind() == c10::TypeKind::TensorType;
}

// One letter per argument of a list op: L tensor list, S scalar, Q scalar list; "" for any
// other op. In-place forms return nothing and write only their first list (out= forms may
// resize what they write, and other argument kinds go boxed); functional forms write nothing
// and return one new tensor list (returns_one_tensor_list).
std::string list_shape_of(const c10::FunctionSchema& schema) {
  const bool functional = returns_one_tensor_list(schema);
  if (!functional && !schema.returns().empty()) return "";
  std::string code;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::TypePtr& type = args[i].type();
    const bool written = args[i].alias_info() && args[i].alias_info()->isWrite();
    if (args[i].alias_info() && !written) return "";
    if (written != (i == 0 && !functional)) return "";
    if (type->kind() == c10::TypeKind::NumberType) {
      code += 'S';
    } else if (type->kind() == c10::TypeKind::ListType) {
      const c10::TypeKind element = type->castRaw<c10::ListType>()->getElementType()->kind();
      if (element == c10::TypeKind::TensorType) code += 'L';
      else if (element == c10::TypeKind::NumberType) code += 'Q';
      else return "";
    } else {
      return "";
    }
  }
  return code.empty() || code[0] != 'L' ? "" : code;
}

// Registers the fast path with the C++ signature FuncType; false (nothing
// registered) if the op's registered signature disagrees after all.
template <class FuncType>
bool register_as(torch::Library& lib, const c10::OperatorHandle& op, const std::string& qualified) {
  try {
    lib.impl(qualified.c_str(), torch::CppFunction(UnboxedDelegate<FuncType>(op)));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// A list op's fast path: in place (returning nothing) or functional (returning a new list).
template <class... A>
bool register_list(torch::Library& lib, const c10::OperatorHandle& op, const std::string& qualified,
                   bool functional) {
  return functional ? register_as<std::vector<at::Tensor>(A...)>(lib, op, qualified)
                    : register_as<void(A...)>(lib, op, qualified);
}

using T = const at::Tensor&;
using W = at::Tensor&;
using S = const c10::Scalar&;
using L = at::TensorList;
using OT = const std::optional<at::Tensor>&;
using Q = at::ArrayRef<at::Scalar>;

}  // namespace

bool delegate_unboxed(torch::Library& lib, const c10::OperatorHandle& op, const std::string& qualified) {
  // Random ops keep the boxed path, which seeds the kernel device's generator.
  if (op.hasTag(at::Tag::nondeterministic_seeded)) return false;
  // The fused optimizer steps (lr as a float), and the foreach add that bumps their step counts.
  const std::string& name = op.schema().name();
  const std::string& overload = op.schema().overload_name();
  if ((name == "aten::_fused_adamw_" || name == "aten::_fused_adam_") && overload.empty())
    return register_as<void(L, L, L, L, L, L, double, double, double, double, double, bool, bool, OT, OT)>(
        lib, op, qualified);
  // In-place foreach ops (an optimizer's other steps: lerp_, mul_, addcmul_, div_...), which the
  // list alias cache serves like the fused steps, and their functional forms (Adam's
  // _foreach_sqrt, clipping's _foreach_mul...).
  const std::string lists = list_shape_of(op.schema());
  const bool functional = returns_one_tensor_list(op.schema());
  if (lists == "L") return register_list<L>(lib, op, qualified, functional);
  if (lists == "LS") return register_list<L, S>(lib, op, qualified, functional);
  if (lists == "LQ") return register_list<L, Q>(lib, op, qualified, functional);
  if (lists == "LL") return register_list<L, L>(lib, op, qualified, functional);
  if (lists == "LLS") return register_list<L, L, S>(lib, op, qualified, functional);
  if (lists == "LLQ") return register_list<L, L, Q>(lib, op, qualified, functional);
  if (lists == "LLL") return register_list<L, L, L>(lib, op, qualified, functional);
  if (lists == "LLLS") return register_list<L, L, L, S>(lib, op, qualified, functional);
  if (lists == "LLLQ") return register_list<L, L, L, Q>(lib, op, qualified, functional);
  const std::string shape = shape_of(op.schema());
  if (shape.empty()) return false;
  // Functional ops never touch their arguments. In-place ones are taken only
  // when pointwise: those never resize or restride self, so its alias and
  // the musa tensor stay alike.
  if (shape.back() == 'W' && !op.hasTag(at::Tag::pointwise)) return false;
  if (shape == "T:T") return register_as<at::Tensor(T)>(lib, op, qualified);
  if (shape == "TT:T") return register_as<at::Tensor(T, T)>(lib, op, qualified);
  if (shape == "TS:T") return register_as<at::Tensor(T, S)>(lib, op, qualified);
  if (shape == "TTS:T") return register_as<at::Tensor(T, T, S)>(lib, op, qualified);
  if (shape == "TTT:T") return register_as<at::Tensor(T, T, T)>(lib, op, qualified);
  if (shape == "TTTS:T") return register_as<at::Tensor(T, T, T, S)>(lib, op, qualified);
  if (shape == "TTTSS:T") return register_as<at::Tensor(T, T, T, S, S)>(lib, op, qualified);
  if (shape == "W:W") return register_as<at::Tensor&(W)>(lib, op, qualified);
  if (shape == "WT:W") return register_as<at::Tensor&(W, T)>(lib, op, qualified);
  if (shape == "WS:W") return register_as<at::Tensor&(W, S)>(lib, op, qualified);
  if (shape == "WTS:W") return register_as<at::Tensor&(W, T, S)>(lib, op, qualified);
  if (shape == "WTTS:W") return register_as<at::Tensor&(W, T, T, S)>(lib, op, qualified);
  return false;
}

}  // namespace torch_musa::op_layer
