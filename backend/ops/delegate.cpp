#include "ops/delegate.h"
#include "fp8/fp8.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <ATen/core/enum_tag.h>
#include <ATen/core/op_registration/op_registration.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <atomic>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "memory/caching_allocator.h"
#include "core/device.h"
#include "core/sync_debug.h"
#include "core/generator.h"
#include "ops/kernel_device.h"
#include "ops/delegation.h"
#include "ops/host_direct.h"
#include "ops/double_cast.h"
#include "ops/dtype_widening.h"
#include "ops/routed_blocks.h"
#include "graphs/capture_state.h"
#include "graphs/host_op_recorder.h"

namespace torch_musa {
namespace {

std::mutex g_counts_mu;
std::unordered_map<std::string, int64_t> g_copy_counts;
std::atomic<int64_t> g_delegated{0};

}  // namespace

namespace op_layer {

namespace {
bool is_nested_metadata(const std::string& op, const std::string& arg) {
  if (op == "aten::_nested_view_from_buffer" || op == "aten::_nested_view_from_buffer_copy")
    return arg == "nested_size" || arg == "nested_strides" || arg == "offsets";
  return op == "aten::_nested_from_padded" && arg == "cpu_nested_shape_example";
}

// Ops whose CUDA kernels wait for the device (CUDA's sync debug mode reports them): their
// output's size or value is read on the host.
OpTraits::Sync synchronizes_on_gpus(const std::string& name) {
  static const std::unordered_set<std::string> names = {
      "aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::_unique2", "aten::unique_dim",
      "aten::unique_consecutive", "aten::unique_dim_consecutive", "aten::repeat_interleave", "aten::bincount",
      "aten::equal"};
  if (names.count(name) != 0) return OpTraits::Sync::kAlways;
  if (name == "aten::index" || name == "aten::index_put_" || name == "aten::index_put" ||
      name == "aten::_index_put_impl_")
    return OpTraits::Sync::kWithMaskIndex;
  return OpTraits::Sync::kNever;
}

bool has_mask_index(c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& v : args) {
    if (!v.isList()) continue;
    for (const c10::IValue& e : elements(v))
      if (e.isTensor() && (e.toTensor().scalar_type() == at::kBool || e.toTensor().scalar_type() == at::kByte))
        return true;
  }
  return false;
}
}  // namespace

void note_if_synchronizing(const c10::OperatorHandle& op, const OpTraits& traits, c10::ArrayRef<c10::IValue> args) {
  // The host driver's CPU kernels never wait; the op waits on a GPU, so it is reported as there.
  if (sync_debug_mode() == 0 || kernel_device().dispatch_key() != c10::DispatchKey::CPU) return;
  if (traits.synchronizes == OpTraits::Sync::kAlways ||
      (traits.synchronizes == OpTraits::Sync::kWithMaskIndex && has_mask_index(args)))
    note_synchronizing(op.schema().name().c_str());
}

const OpTraits& traits_of(const c10::OperatorHandle& op) {
  static std::mutex mu;
  static std::unordered_map<const c10::FunctionSchema*, OpTraits> cache;  // entries are never erased
  thread_local std::unordered_map<const c10::FunctionSchema*, const OpTraits*> local;  // lock-free hits
  const auto& schema = op.schema();
  auto hit = local.find(&schema);
  if (hit != local.end()) return *hit->second;
  std::lock_guard<std::mutex> g(mu);
  auto it = cache.find(&schema);
  if (it != cache.end()) {
    local.emplace(&schema, &it->second);
    return it->second;
  }
  OpTraits t;
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].alias_info() && args[i].alias_info()->isWrite()) t.written_args.push_back(i);
    auto type = args[i].type();
    if (auto opt = type->cast<c10::OptionalType>()) type = opt->getElementType();
    if (type->kind() == c10::TypeKind::GeneratorType) t.generator_args.push_back(i);
    if (type->kind() == c10::TypeKind::FloatType && args[i].name() == "dropout_p") t.dropout_arg = static_cast<int>(i);
    if (type->kind() == c10::TypeKind::TensorType && args[i].name() == "scalars" &&
        schema.name().rfind("aten::_foreach_", 0) == 0)
      t.cpu_side_args.push_back(i);
    // Nested tensors keep their metadata (sizes, strides, offsets) on the cpu on every device.
    if (type->kind() == c10::TypeKind::TensorType && is_nested_metadata(schema.name(), args[i].name()))
      t.cpu_side_args.push_back(i);
  }
  t.seeded_without_generator = t.generator_args.empty() && op.hasTag(at::Tag::nondeterministic_seeded);
  const auto& name = schema.name();
  const auto kernel_key = kernel_device().dispatch_key();
  t.cpu_only = kernel_key != c10::DispatchKey::CPU && !op.hasKernelForDispatchKey(kernel_key) &&
               op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
               !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
               !op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
  t.allows_cpu_indices = name == "aten::index" || name == "aten::index_put_" || name == "aten::index_put" ||
                         name == "aten::_index_put_impl_" || name == "aten::_unsafe_index" ||
                         name == "aten::_unsafe_index_put";
  t.double_castable = computes_in_dtype(schema);
  t.synchronizes = synchronizes_on_gpus(name);
  const OpTraits& stored = cache.emplace(&schema, std::move(t)).first->second;
  local.emplace(&schema, &stored);
  return stored;
}

[[noreturn]] void device_mismatch(const c10::OperatorHandle& op, const c10::Device& a, const c10::Device& b,
                                  const std::string& arg) {
  // A convolution names its weight's and input's devices, in torch_musa's words (programs match on them).
  if (op.schema().name().find("convolution") != std::string::npos && (arg == "input" || arg == "weight")) {
    const c10::Device& weight = arg == "weight" ? b : a;
    const c10::Device& input = arg == "weight" ? a : b;
    TORCH_CHECK(false, "Expected weight tensor and input tensor to be on the same MUSA device, but got weight on ",
                weight, " and input on ", input, " (", op.schema().name(), "): move the ",
                weight.is_cpu() ? "module to musa with .to('" : "input to musa with .to('",
                weight.is_cpu() ? input : weight, "')");
  }
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a,
              " and ", b, "! (argument '", arg, "' of ", op.schema().name(), " is on ", b,
              "; move it with .to('", a,
              "'). Only 0-dim cpu tensors may be mixed with musa tensors, and only as inputs.)");
}

c10::IValue map_tensors(const c10::IValue& v, c10::function_ref<at::Tensor(const at::Tensor&)> fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    auto list = elements(v);
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (const c10::IValue& t : list) out.push_back(fn(t.toTensor()));
    return out;
  }
  if (v.isList()) {
    auto list = elements(v);
    bool any = false;
    for (const c10::IValue& e : list) any |= e.isTensor();
    if (!any) return v;
    c10::impl::GenericList out(v.toList().elementType());
    out.reserve(list.size());
    for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(fn(e.toTensor())) : e);
    return out;
  }
  return v;
}

at::Tensor tensor_over(c10::Storage storage, const at::Tensor& like, c10::DispatchKey key) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  impl->_set_conj(like.is_conj());
  impl->_set_neg(like.is_neg());
  return at::Tensor(std::move(impl));
}

AliasCache& alias_cache() {
  thread_local AliasCache cache;
  return cache;
}

void note_delegated() { g_delegated.fetch_add(1, std::memory_order_relaxed); }

std::string counted_name(const c10::FunctionSchema& schema) {
  return schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name();
}

void count_copy_path(const c10::OperatorHandle& op) {
  std::lock_guard<std::mutex> g(g_counts_mu);
  g_copy_counts[counted_name(op.schema())]++;
}

}  // namespace op_layer

namespace {

using namespace op_layer;

// Ops the kernel device has no kernel for (e.g. histogram on CUDA) still
// work: inputs are copied to the CPU, the CPU kernel runs, results are
// copied back. This is the counted copying path.
void run_on_cpu_by_copy(const c10::OperatorHandle& op, const OpTraits& traits, torch::jit::Stack* stack,
                        c10::DeviceIndex device, c10::DispatchKey cpu_key = c10::DispatchKey::CPU) {
  count_copy_path(op);
  const size_t nargs = op.schema().arguments().size();
  const size_t base = stack->size() - nargs;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 4> copies;  // musa original -> cpu copy
  auto to_cpu = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined() || t.device().type() != kMusa) return t;
    for (auto& e : copies)
      if (e.first.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return e.second;
    copies.emplace_back(t, t.to(c10::Device(c10::DeviceType::CPU)));
    return copies.back().second;
  };
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& v = (*stack)[base + i];
    if (v.isDevice() && v.toDevice().type() == kMusa) v = c10::Device(c10::DeviceType::CPU);
    else if (v.isGenerator() && v.toGenerator().device().type() == kMusa) v = cpu_generator_from(v.toGenerator());
    else v = map_tensors(v, to_cpu);
  }
  for (size_t idx : traits.generator_args)
    if ((*stack)[base + idx].isNone()) (*stack)[base + idx] = cpu_generator_from(default_generator(device));
  {
    KernelDeviceCallGuard below_musa;
    op.redispatchBoxed(c10::DispatchKeySet(cpu_key), stack);
  }
  // Results written into copies of musa arguments go back into those arguments.
  for (auto& [musa, cpu] : copies) {
    if (musa.sizes() != cpu.sizes()) musa.resize_(cpu.sizes());
    if (!musa.is_same(cpu)) musa.copy_(cpu);
  }
  const size_t nret = op.schema().returns().size();
  const size_t rbase = stack->size() - nret;
  for (size_t i = 0; i < nret; ++i) {
    (*stack)[rbase + i] = map_tensors((*stack)[rbase + i], [&](const at::Tensor& t) -> at::Tensor {
      if (!t.defined() || !t.device().is_cpu()) return t;
      for (auto& e : copies)
        if (e.second.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return e.first;
      return t.to(c10::Device(kMusa, device));
    });
  }
}

// Whether a kernel refused a sub-byte quantized dtype ("... not implemented for 'QUInt4x2'").
bool names_sub_byte_quantized(const c10::Error& e) {
  const auto dtype = dtype_without_kernel(e);
  return dtype && (*dtype == c10::toString(c10::ScalarType::QUInt4x2) ||
                   *dtype == c10::toString(c10::ScalarType::QUInt2x4));
}

// The key of `functionality` (Dense, Sparse, SparseCsr, Quantized, NestedTensor) on `backend`'s device.
c10::DispatchKey key_of(c10::DispatchKey functionality, c10::DispatchKey backend) {
  if (functionality == c10::DispatchKey::Dense) return backend;
  return c10::toRuntimePerBackendFunctionalityKey(functionality, c10::toBackendComponent(backend));
}

// Delegates one call whose highest musa tensor kind is `functionality`: the
// kernel device runs the kernel of the same kind (SparseCPU for a sparse musa
// tensor on the host driver, QuantizedCUDA for a quantized one on the cuda driver).
void musa_fallback_of(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DispatchKey functionality) {
  const bool dense = functionality == c10::DispatchKey::Dense;
  if (C10_UNLIKELY(double_cast_enabled()) && dense && maybe_run_double_cast(op, stack)) return;
  note_delegated();
  routed_blocks::Hold hold_lent;  // outputs are adopted below, from this thread's list
  KernelDevice& kd = kernel_device();
  const OpTraits& traits = traits_of(op);
  if (C10_UNLIKELY(traits.synchronizes != OpTraits::Sync::kNever))
    note_if_synchronizing(op, traits, c10::ArrayRef<c10::IValue>(*stack).slice(stack->size() - op.schema().arguments().size()));
  const c10::DispatchKey kernel_key = key_of(functionality, kd.dispatch_key());
  const c10::DispatchKey cpu_key = key_of(functionality, c10::DispatchKey::CPU);
  // (Kinds: copy_ takes a cpu source, as copies between devices do.)
  const bool cpu_source_ok = !dense && op.schema().name() == "aten::copy_";
  const auto& args = op.schema().arguments();
  const size_t nargs = args.size();
  const size_t base = stack->size() - nargs;
  Delegation call(op, kd);

  size_t listed = 0;  // tensors in tensor lists
  for (size_t i = 0; i < nargs; ++i) {
    const c10::IValue& v = (*stack)[base + i];
    const std::string& name = args[i].name();
    if (v.isTensor()) {
      call.note_device(v.toTensor(), name, traits.is_cpu_side(i) || (cpu_source_ok && name == "src"),
                       traits.is_written(i));
    } else if (v.isTensorList()) {
      for (const c10::IValue& t : elements(v)) call.note_device(t.toTensor(), name, false, traits.is_written(i));
      listed += elements(v).size();
    } else if (v.isList()) {
      for (const c10::IValue& e : elements(v))
        if (e.isTensor()) call.note_device(e.toTensor(), name, traits.allows_cpu_indices);
    }
  }
  call.check_mixing();
  if (listed > 0) call.expect(listed + nargs);
  if (call.device < 0 && !traits.generator_args.empty()) {
    // Dispatched here only because a musa generator was passed for non-musa tensors.
    for (size_t idx : traits.generator_args) {
      const c10::IValue& v = (*stack)[base + idx];
      TORCH_CHECK(!v.isGenerator() || v.toGenerator().device().type() != kMusa,
                  "Expected a 'cpu' device type for generator but found 'musa' (", op.schema().name(),
                  "): use a generator of the tensors' device, or create the tensors on musa");
    }
  }

  // A host-driver capture records the op instead of running it (ops that
  // only make views run now: they touch no memory).
  std::optional<graphs::ViewOpScope> view_during_capture;
  if (graphs::any_capture_underway()) {
    c10::DeviceIndex dev = call.device < 0 ? current_device() : call.device;
    if (graphs::host_recording(dev)) {
      if (!graphs::is_view_op(op)) {
        graphs::record_op(op, stack, dev);
        return;
      }
      view_during_capture.emplace();
    }
  }

  // (torch's quantized:: ops on CUDA are cuDNN's int8-only ones: musa takes the cpu's, which
  // cover every quantized dtype, as the counted copy path.)
  const bool cpu_only = dense ? traits.cpu_only
                              : kernel_key != cpu_key && op.hasKernelForDispatchKey(cpu_key) &&
                                  (!op.hasKernelForDispatchKey(kernel_key) ||
                                   (functionality == c10::DispatchKey::Quantized &&
                                    op.schema().name().rfind("quantized::", 0) == 0));
  if (cpu_only) {
    run_on_cpu_by_copy(op, traits, stack, call.device < 0 ? current_device() : call.device, cpu_key);
    return;
  }

  // Keep the musa arguments alive and known while the stack holds aliases.
  c10::SmallVector<c10::IValue, 8> originals;
  originals.reserve(nargs);
  try {
    for (size_t i = 0; i < nargs; ++i) {
      originals.push_back(std::move((*stack)[base + i]));
      const c10::IValue& v = originals.back();
      const bool keep_on_cpu = traits.is_cpu_side(i) && v.isTensor() && v.toTensor().device().is_cpu();
      (*stack)[base + i] = keep_on_cpu ? v : call.alias_value(v);
    }
  } catch (...) {  // give the caller its arguments back
    for (size_t i = 0; i < originals.size(); ++i) (*stack)[base + i] = std::move(originals[i]);
    throw;
  }
  if (call.device < 0) call.device = current_device();

  for (size_t idx : traits.generator_args) {
    c10::IValue& v = (*stack)[base + idx];
    at::Generator gen = v.isNone() ? default_generator(call.device) : v.toGenerator();
    TORCH_CHECK(gen.device().type() == kMusa, "Expected a 'musa' device type for generator but found '",
                gen.device().type(), "' (", op.schema().name(),
                "): pass a generator made with torch.Generator(device='musa')");
    v = kd.kernel_generator(gen);
  }

  try {
    KernelScope scope(kd, call.device);
    // Random ops that take no generator draw from the kernel device's default
    // one: seed it from the musa counter for this op and restore it after,
    // so musa results depend only on torch.musa.manual_seed.
    std::optional<at::Generator> saved_default;
    at::Generator kernel_default;
    // (While capturing on the cuda driver, the kernel device's default
    // generator is the graph-safe one the graph reseeds at every replay.)
    // Attention without dropout draws nothing: no seeding (on CUDA that is
    // a generator made and two state swaps, nine capture queries, per call).
    const bool draws = traits.seeded_without_generator &&
                       !(traits.dropout_arg >= 0 && (*stack)[base + traits.dropout_arg].toDouble() == 0.0);
    if (draws &&
        !graphs::note_generator_if_capturing(call.device, default_generator(call.device))) {
      kernel_default = at::globalContext().defaultGenerator(kd.device_for(call.device));
      at::Generator seeded = kd.kernel_generator(default_generator(call.device));
      std::lock_guard<std::mutex> lock(kernel_default.mutex());
      saved_default = kernel_default.clone();
      kernel_default.set_state(seeded.get_state());
    }
    // The kernel device's kernels must not be seen by anything above the
    // backend (autograd, tracer, autocast, Python dispatch modes): the musa
    // op was already seen there.
    KernelDeviceCallGuard below_musa;
    kd.launch(
        call.device, [&] { op.redispatchBoxed(c10::DispatchKeySet(kernel_key), stack); },
        op.schema().name().c_str());
    if (saved_default) {
      std::lock_guard<std::mutex> lock(kernel_default.mutex());
      kernel_default.set_state(saved_default->get_state());
    }
  } catch (const c10::Error& e) {
    // Sub-byte quantized dtypes (quint4x2, quint2x4) have CPU kernels only (CUDA's quantized
    // kernels take qint8/quint8/qint32): they run as the counted copy path, so every dtype musa
    // holds works on every driver.
    if (kernel_key != cpu_key && names_sub_byte_quantized(e) && op.hasKernelForDispatchKey(cpu_key)) {
      stack->resize(base);
      for (auto& v : originals) stack->push_back(std::move(v));
      run_on_cpu_by_copy(op, traits, stack, call.device, cpu_key);
      return;
    }
    // No kernel for a dtype GPUs have: run it widened, over the musa arguments.
    auto narrow = dense ? missing_kernel_dtype(op, e, originals) : std::nullopt;
    if (!narrow) {
      fp8::rethrow_float8_without_kernel(op, e);
      throw;
    }
    stack->resize(base);
    for (auto& v : originals) stack->push_back(std::move(v));
    run_widened(op, stack, *narrow);
    return;
  }

  call.sync_written(traits, originals);
  const size_t nret = op.schema().returns().size();
  const size_t rbase = stack->size() - nret;
  for (size_t i = 0; i < nret; ++i) (*stack)[rbase + i] = call.to_musa_value((*stack)[rbase + i]);
}

// torch's zero tensors have no memory. The ZeroTensor fallback materializes them for most ops but
// passes view ops on as they are (a view keeps the key on cpu/cuda); here such an argument becomes
// zeros (one, expanded) first, so no alias is made of memory that does not exist.
void materialize_zero_tensors(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  for (size_t i = stack->size() - n; i < stack->size(); ++i) {
    c10::IValue& v = (*stack)[i];
    if (v.isTensor() && v.toTensor()._is_zerotensor()) {
      const at::Tensor& t = v.toTensor();
      v = at::zeros({}, t.options()).expand(t.sizes());
    }
  }
}

void musa_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  materialize_zero_tensors(op, stack);
  musa_fallback_of(op, stack, c10::DispatchKey::Dense);
}

}  // namespace

void op_layer::boxed_delegate(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  musa_fallback(op, ks, stack);
}

void op_layer::boxed_delegate_kind(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                                   c10::DispatchKey functionality) {
  musa_fallback_of(op, stack, functionality);
}

void op_layer::run_by_cpu_copy(const c10::OperatorHandle& op, torch::jit::Stack* stack, c10::DeviceIndex device) {
  run_on_cpu_by_copy(op, traits_of(op), stack, device);
}

KernelDeviceCallGuard::KernelDeviceCallGuard() : guard_(above_backend()) {}

c10::DispatchKeySet KernelDeviceCallGuard::above_backend() {
  static const c10::DispatchKeySet kAboveBackend =
    c10::autograd_dispatch_keyset | c10::autocast_dispatch_keyset |
    c10::DispatchKeySet({c10::DispatchKey::ADInplaceOrView, c10::DispatchKey::Tracer, c10::DispatchKey::Python,
                         c10::DispatchKey::PythonTLSSnapshot, c10::DispatchKey::PreDispatch,
                         c10::DispatchKey::PythonDispatcher, c10::DispatchKey::Functionalize,
                         c10::DispatchKey::FuncTorchDynamicLayerBackMode, c10::DispatchKey::FuncTorchDynamicLayerFrontMode,
                         c10::DispatchKey::FuncTorchBatched, c10::DispatchKey::FuncTorchVmapMode,
                         c10::DispatchKey::Batched, c10::DispatchKey::VmapMode, c10::DispatchKey::FuncTorchGradWrapper});
  return kAboveBackend;
}

at::Tensor alias_on_kernel_device(const at::Tensor& musa) {
  TORCH_INTERNAL_ASSERT(musa.device().type() == kMusa);
  KernelDevice& kd = kernel_device();
  return tensor_over(kd.alias_storage(musa.storage()), musa, kd.dispatch_key());
}

namespace {

// An out= overload: one of its keyword-only arguments is written (mode.values, sort.values, sum.out).
bool is_out_overload(const c10::FunctionSchema& schema) {
  for (const auto& a : schema.arguments())
    if (a.kwarg_only() && a.alias_info() && a.alias_info()->isWrite()) return true;
  return false;
}

// Names of ops one of whose functional (not out=) overloads has a CPU or CUDA kernel.
std::unordered_set<std::string> ops_with_device_kernels() {
  std::unordered_set<std::string> names;
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    auto op = dispatcher.findOp(name);
    if (op && !is_out_overload(op->schema()) &&
        (op->hasKernelForDispatchKey(c10::DispatchKey::CPU) || op->hasKernelForDispatchKey(c10::DispatchKey::CUDA)))
      names.insert(name.name);
  }
  return names;
}

}  // namespace

void delegate_structured_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Structured ops give PrivateUse1 a CompositeExplicitAutogradNonFunctional
    // default (allocate an output, then call the .out variant). Delegating
    // the functional/in-place variant itself runs the kernel device's own
    // kernel once: no extra output allocation, no out= resizing, one
    // TensorIterator instead of two.
    static auto* lib = new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
                                          __FILE__, __LINE__);
    // (first: ops the host driver runs directly are taken by the loop below no more)
    op_layer::register_host_direct(*lib);
    auto& dispatcher = c10::Dispatcher::singleton();
    const std::unordered_set<std::string> with_device_kernels = ops_with_device_kernels();
    for (const auto& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
      // Also ops with both a device kernel and a CompositeExplicitAutograd
      // one: PrivateUse1 would get the composite (e.g. layer norm built from
      // batch norm), a different algorithm from the kernel device's.
      bool structured = op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
      bool device_kernel = op->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
                           op->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
      bool device_specific = op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) && device_kernel;
      std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
      // Ops of the common shapes (tensors and scalars; in place only when
      // pointwise) take the unboxed fast path (not composites: those
      // decompose above the backend, autograd included).
      // (Foreach ops have no CPU kernel: the CPU runs torch's per-tensor composite. Delegating the
      // whole call runs it on the aliases, one delegation instead of one per tensor.)
      const bool foreach_composite = name.name.rfind("aten::_foreach_", 0) == 0 &&
                                     op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd);
      if ((device_kernel || foreach_composite) &&
          !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
          op_layer::delegate_unboxed(*lib, *op, qualified))
        continue;
      // The out= form of an op with device kernels, where the out= form itself is one composite for
      // every device: some check the device type against CPU/CUDA/XPU or call a DispatchStub
      // (mode.values: "mode only supports CPU, CUDA and XPU device type"). Delegated, it runs as
      // on the kernel device, dtype checks of `out` included.
      const bool composite_out = !device_kernel &&
                                 op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
                                 !op->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
                                 is_out_overload(op->schema()) && with_device_kernels.count(name.name) != 0;
      if (!structured && !device_specific && !composite_out) continue;
      lib->impl(qualified.c_str(), torch::CppFunction::makeFromBoxedFunction<&musa_fallback>());
    }
  });
}

std::unordered_map<std::string, int64_t> copy_path_counts() {
  std::lock_guard<std::mutex> g(g_counts_mu);
  return g_copy_counts;
}

void reset_copy_path_counts() {
  std::lock_guard<std::mutex> g(g_counts_mu);
  g_copy_counts.clear();
}

int64_t delegated_op_count() { return g_delegated.load(); }

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&musa_fallback>()); }

// Composite ops that choose kernels by device type send PrivateUse1 to
// "overrideable" stubs; delegating the composite itself runs the kernel
// device's full implementation instead. (`convolution` itself stays
// composite so the JIT tracer records `_convolution` as it does on CUDA.)
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const char* name : {"convolution_backward", "_convolution", "_convolution.deprecated"})
    m.impl(name, torch::CppFunction::makeFromBoxedFunction<&musa_fallback>());
}

}  // namespace torch_musa
