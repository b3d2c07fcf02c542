#include "graphs/host_op_recorder.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Context.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/irange.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "core/device.h"
#include "core/generator.h"
#include "core/musa_check.h"
#include "core/stream.h"
#include "graphs/capture_state.h"
#include "ops/delegate.h"
#include "ops/delegation.h"

namespace torch_musa::graphs {
namespace {

using op_layer::map_tensors;
constexpr auto kMusa = c10::DeviceType::PrivateUse1;

bool is_tensor_like(const c10::TypePtr& t) {
  auto k = t->kind();
  if (k == c10::TypeKind::TensorType) return true;
  if (k == c10::TypeKind::OptionalType) return is_tensor_like(t->castRaw<c10::OptionalType>()->getElementType());
  if (k == c10::TypeKind::ListType) return is_tensor_like(t->castRaw<c10::ListType>()->getElementType());
  return false;
}

bool same_argument(const c10::Argument& a, const c10::Argument& b) {
  return a.name() == b.name() && a.type()->str() == b.type()->str();
}

// The out= overload of a functional op: the same arguments, then one written
// keyword-only tensor (list) per result. Found by schema, once per op.
std::optional<c10::OperatorHandle> out_variant(const c10::OperatorHandle& op, size_t nresults) {
  static std::mutex mu;
  static std::unordered_map<std::string, std::vector<c10::OperatorName>>* by_name = nullptr;
  static std::unordered_map<const void*, std::optional<c10::OperatorHandle>> cache;
  std::lock_guard<std::mutex> g(mu);
  auto key = static_cast<const void*>(&op.schema());
  auto hit = cache.find(key);
  if (hit != cache.end()) return hit->second;
  auto& dispatcher = c10::Dispatcher::singleton();
  if (!by_name) {
    by_name = new std::unordered_map<std::string, std::vector<c10::OperatorName>>();
    for (const auto& n : dispatcher.getAllOpNames()) (*by_name)[n.name].push_back(n);
  }
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  std::optional<c10::OperatorHandle> found;
  for (const auto& name : (*by_name)[schema.name()]) {
    auto cand = dispatcher.findOp(name);
    if (!cand || name.overload_name == schema.overload_name()) continue;
    const auto& cargs = cand->schema().arguments();
    if (cargs.size() != args.size() + nresults) continue;
    bool match = true;
    for (size_t i = 0; match && i < args.size(); ++i) match = same_argument(args[i], cargs[i]);
    for (size_t i = args.size(); match && i < cargs.size(); ++i)
      match = cargs[i].kwarg_only() && cargs[i].alias_info() && cargs[i].alias_info()->isWrite() &&
              is_tensor_like(cargs[i].type());
    if (match) {
      found = *cand;
      break;
    }
  }
  cache.emplace(key, found);
  return found;
}

at::Tensor meta_like(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kMusa) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

at::Tensor cpu_alias(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kMusa) return t;
  return alias_on_kernel_device(t);
}

c10::IValue to_device(const c10::IValue& v, c10::Device device) {
  if (v.isDevice() && v.toDevice().type() == kMusa) return device;
  return v;
}

// Refuses `op`: the capture is invalidated (its end fails, as in CUDA, where
// the refused call breaks the capture) and the op raises.
[[noreturn]] void cannot_capture(const c10::OperatorHandle& op, const std::string& why, const std::string& way_out) {
  std::string reason = op.schema().operator_name().name + ", which cannot be captured";
  (void)musaStreamInvalidateCapture(native_stream(current_stream(current_device())), reason.c_str());
  (void)musaGetLastError();
  MUSA_FAIL(musaErrorStreamCaptureUnsupported, op.schema().operator_name(),
            " cannot be captured into a MUSA graph on the host driver: ", why, ". ", way_out);
}

// Another kernel-device tensor over the memory and layout of `t`, with a
// storage of its own (resizing one does not move the other).
at::Tensor tensor_over_same(const at::Tensor& t) {
  return op_layer::tensor_over(non_owning_alias(t.storage(), t.device(), c10::GetCPUAllocator()), t,
                               c10::DispatchKey::CPU);
}

// A replayable kernel call: the CPU kernel of `op` over fixed arguments
// (kernel-device aliases of musa memory), with fresh generators per replay.
struct RecordedCall {
  c10::OperatorHandle op;
  std::vector<c10::IValue> args;
  std::vector<std::pair<size_t, at::Generator>> generators;  // argument index -> musa generator
  std::optional<at::Generator> seeds_default;                // seeds the cpu default generator per call
  std::vector<at::Tensor> copy_into;  // functional fallback: results are copied into these
  // Written tensors (index into args, and a second alias of the same memory
  // no kernel sees): a kernel that resizes its out= tensor on the way (some
  // reductions do) moves it off musa memory; its result is copied back.
  std::vector<std::pair<size_t, at::Tensor>> written;
  std::vector<c10::IValue> work;
  std::optional<c10::OperatorHandle> functional;  // set when `op` is the out= variant of it
  size_t functional_args = 0;                      // arguments before the out= ones

  void operator()() {
    KernelDeviceCallGuard below_musa;
    work = args;
    for (auto& [idx, gen] : generators) work[idx] = cpu_generator_from(gen);
    std::optional<at::Generator> saved;
    at::Generator cpu_default;
    if (seeds_default) {
      cpu_default = at::detail::getDefaultCPUGenerator();
      at::Generator seeded = cpu_generator_from(*seeds_default);
      std::lock_guard<std::mutex> lock(cpu_default.mutex());
      saved = cpu_default.clone();
      cpu_default.set_state(seeded.get_state());
    }
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &work);
    if (saved) {
      std::lock_guard<std::mutex> lock(cpu_default.mutex());
      cpu_default.set_state(saved->get_state());
    }
    bool out_moved = false;
    for (auto& [idx, pristine] : written) {
      const at::Tensor& used = args[idx].toTensor();
      if (used.data_ptr() == pristine.data_ptr() && used.sizes() == pristine.sizes()) continue;
      pristine.copy_(used);
      args[idx] = tensor_over_same(pristine);
      out_moved = out_moved || idx >= functional_args;
    }
    if (out_moved && functional) {
      // This out= kernel resizes its output: run the functional kernel from
      // now on and copy its results (the same numbers, without the detour).
      for (size_t i = functional_args; i < args.size(); ++i) copy_into.push_back(args[i].toTensor());
      args.resize(functional_args);
      written.erase(std::remove_if(written.begin(), written.end(),
                                   [&](const auto& w) { return w.first >= functional_args; }),
                    written.end());
      op = *functional;
      functional.reset();
    }
    if (!copy_into.empty()) {
      size_t k = 0;
      for (const auto& r : work)
        map_tensors(r, [&](const at::Tensor& t) {
          if (k < copy_into.size() && t.defined() && copy_into[k].defined()) copy_into[k].copy_(t);
          ++k;
          return t;
        });
    }
    work.clear();
  }
};

void launch_recorded(c10::DeviceIndex device, std::function<void()> task, const char* name) {
  MUSA_CHECK(musaLaunchTask(native_stream(current_stream(device)), std::move(task), name));
}

}  // namespace

bool host_recording(c10::DeviceIndex device) {
  return any_capture_underway() && is_host_driver() && !ViewOpScope::active() && current_stream_capturing(device);
}

bool is_view_op(const c10::OperatorHandle& op) {
  const auto& rets = op.schema().returns();
  if (rets.empty()) return false;
  for (const auto& r : rets)
    if (!r.alias_info() || r.alias_info()->isWrite()) return false;
  return true;
}

void record_op(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DeviceIndex device) {
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  const auto& rets = schema.returns();
  const size_t nargs = args.size();
  const size_t base = stack->size() - nargs;
  const auto& traits = op_layer::traits_of(op);
  for (const auto& r : rets)
    if (!is_tensor_like(r.type()))
      cannot_capture(op, "it returns a " + r.type()->str() + " computed from musa data, which the host would have "
                     "to read during capture (CUDA graphs refuse this too: it synchronizes)",
                     "Move it out of the captured region.");
  if (traits.cpu_only)
    cannot_capture(op, "it runs on the cpu through copies", "Move it out of the captured region.");

  // Output sizes and strides from the meta kernel, without touching data.
  torch::jit::Stack meta;
  meta.reserve(nargs);
  for (size_t i = 0; i < nargs; ++i) {
    const c10::IValue& v = (*stack)[base + i];
    if (v.isGenerator()) meta.emplace_back();
    else meta.push_back(to_device(map_tensors(v, meta_like), c10::Device(c10::kMeta)));
  }
  try {
    KernelDeviceCallGuard below_musa;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), &meta);
  } catch (const c10::Error& e) {
    cannot_capture(op, std::string("its output sizes are not known without running it (meta kernel: ") +
                           e.what_without_backtrace() + ")",
                   "Move it out of the captured region, or capture on the cuda driver.");
  }

  // Results: written arguments are returned as themselves; fresh tensors are
  // allocated now, from the graph's pool (the current stream is capturing).
  std::vector<c10::IValue> results;
  std::vector<at::Tensor> fresh;  // musa, in result order
  bool undefined_result = false;
  for (size_t r = 0; r < rets.size(); ++r) {
    const auto* alias = rets[r].alias_info();
    if (alias && alias->isWrite()) {
      size_t arg = nargs;
      for (size_t i = 0; i < nargs && arg == nargs; ++i)
        if (args[i].alias_info() && args[i].alias_info()->isWrite() &&
            args[i].alias_info()->beforeSets() == alias->beforeSets())
          arg = i;
      TORCH_INTERNAL_ASSERT(arg < nargs, "no written argument for result ", r, " of ", schema.name());
      const c10::IValue& musa_arg = (*stack)[base + arg];
      results.push_back(musa_arg);
      continue;
    }
    results.push_back(map_tensors(meta[r], [&](const at::Tensor& m) -> at::Tensor {
      if (!m.defined()) {
        undefined_result = true;
        return m;
      }
      at::Tensor t = at::empty_strided(m.sizes(), m.strides(), m.options().device(c10::Device(kMusa, device)));
      fresh.push_back(t);
      return t;
    }));
  }
  RecordedCall call{op};
  call.args.reserve(nargs + fresh.size());
  for (size_t i = 0; i < nargs; ++i)
    call.args.push_back(to_device(map_tensors((*stack)[base + i], cpu_alias), c10::Device(c10::DeviceType::CPU)));
  for (size_t idx : traits.generator_args) {
    const c10::IValue& v = (*stack)[base + idx];
    at::Generator gen = v.isNone() ? default_generator(device) : v.toGenerator();
    TORCH_CHECK(gen.device().type() == kMusa, "Expected a 'musa' device type for generator but found '",
                gen.device().type(), "' (", schema.name(), ")");
    call.generators.emplace_back(idx, gen);
  }
  if (traits.seeded_without_generator) call.seeds_default = default_generator(device);
  for (size_t i = 0; i < nargs; ++i)
    if (args[i].alias_info() && args[i].alias_info()->isWrite() && call.args[i].isTensor() &&
        call.args[i].toTensor().defined())
      call.written.emplace_back(i, tensor_over_same(call.args[i].toTensor()));
  if (!fresh.empty()) {
    bool all_fresh = true;
    for (const auto& r : rets) all_fresh = all_fresh && !(r.alias_info() && r.alias_info()->isWrite());
    std::optional<c10::OperatorHandle> out =
        undefined_result || !all_fresh ? std::nullopt : out_variant(op, rets.size());
    if (out) {
      call.op = *out;
      bool single_tensors = true;
      for (const auto& r : results) {
        call.args.push_back(map_tensors(r, cpu_alias));
        single_tensors = single_tensors && r.isTensor();
      }
      if (single_tensors) {
        call.functional = op;
        call.functional_args = nargs;
        for (size_t i = nargs; i < call.args.size(); ++i)
          call.written.emplace_back(i, tensor_over_same(call.args[i].toTensor()));
      }
    } else {
      // One slot per result tensor, in order; written and undefined results get none to fill.
      for (size_t r = 0; r < rets.size(); ++r) {
        bool written = rets[r].alias_info() && rets[r].alias_info()->isWrite();
        map_tensors(results[r], [&](const at::Tensor& t) {
          call.copy_into.push_back(written || !t.defined() ? at::Tensor() : cpu_alias(t));
          return t;
        });
      }
    }
  }
  launch_recorded(device, std::move(call), schema.name().c_str());

  stack->erase(stack->begin() + static_cast<long>(base), stack->end());
  for (auto& r : results) stack->push_back(std::move(r));
}

void record_copy(const at::Tensor& dst, const at::Tensor& src, bool non_blocking, c10::DeviceIndex device) {
  for (const at::Tensor* t : {&dst, &src}) {
    if (t->device().type() == kMusa) continue;
    bool pinned = t->is_pinned();
    if (!(pinned && non_blocking)) {
      (void)musaStreamInvalidateCapture(native_stream(current_stream(device)), "a synchronizing copy to or from the cpu");
      (void)musaGetLastError();
    }
    if (!(pinned && non_blocking))
      MUSA_FAIL(musaErrorStreamCaptureUnsupported, "a copy between musa and ", pinned ? "" : "pageable ",
                "cpu memory", non_blocking ? "" : " with non_blocking=False",
                " cannot be captured into a MUSA graph (it would synchronize; CUDA graphs refuse it too): copy "
                "from or to pinned memory (tensor.pin_memory()) with non_blocking=True, or copy outside the "
                "captured region");
  }
  launch_recorded(
      device,
      [d = cpu_alias(dst), s = cpu_alias(src)]() mutable {
        KernelDeviceCallGuard below_musa;
        d.copy_(s);
      },
      "aten::copy_");
}

}  // namespace torch_musa::graphs
