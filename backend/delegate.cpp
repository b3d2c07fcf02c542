#include "delegate.h"

#include <ATen/Context.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/from_blob.h>
#include <ATen/core/enum_tag.h>
#include <ATen/core/op_registration/op_registration.h>
#include <c10/core/StorageImpl.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/library.h>

#include <atomic>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>
#include <mutex>
#include <typeinfo>
#include <unordered_map>
#include <vector>

#include "caching_allocator.h"
#include "device.h"
#include "generator.h"
#include "kernel_device.h"

namespace torch_musa {
namespace {

constexpr auto kMusa = c10::DeviceType::PrivateUse1;

std::mutex g_counts_mu;
std::unordered_map<std::string, int64_t> g_copy_counts;
std::atomic<int64_t> g_delegated{0};

void count_copy_path(const c10::OperatorHandle& op);

// What the fallback needs to know about an op, computed once per schema.
struct OpTraits {
  std::vector<size_t> written_args;  // arguments the op mutates (self in add_, out=)
  std::vector<size_t> generator_args;
  bool seeded_without_generator = false;  // random op that would use the default generator
  bool allows_cpu_indices = false;        // index ops accept cpu index tensors, as on CUDA
  bool cpu_only = false;                  // the kernel device has no kernel; only the CPU has
};

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
  const OpTraits& stored = cache.emplace(&schema, std::move(t)).first->second;
  local.emplace(&schema, &stored);
  return stored;
}

[[noreturn]] void device_mismatch(const c10::OperatorHandle& op, const c10::Device& a, const c10::Device& b,
                                  const std::string& arg) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", a,
              " and ", b, "! (argument '", arg, "' of ", op.schema().name(), " is on ", b,
              "; move it with .to('", a, "'). Only 0-dim cpu tensors may be mixed with musa tensors.)");
}

// Applies `fn` to every tensor in an argument or result: a tensor, a tensor
// list, or a list of optional tensors (index lists). Other values pass through.
c10::IValue map_tensors(const c10::IValue& v, c10::function_ref<at::Tensor(const at::Tensor&)> fn) {
  if (v.isTensor()) return fn(v.toTensor());
  if (v.isTensorList()) {
    auto list = v.toTensorList();
    c10::List<at::Tensor> out;
    out.reserve(list.size());
    for (const at::Tensor& t : list) out.push_back(fn(t));
    return out;
  }
  if (v.isList()) {
    auto list = v.toList();
    bool any = false;
    for (const c10::IValue& e : list) any |= e.isTensor();
    if (!any) return v;
    c10::impl::GenericList out(list.elementType());
    out.reserve(list.size());
    for (const c10::IValue& e : list) out.push_back(e.isTensor() ? c10::IValue(fn(e.toTensor())) : e);
    return out;
  }
  return v;
}

// A tensor of dispatch key `key` over `storage` with the layout (sizes,
// strides, offset, conj/neg bits) of `like`: how musa tensors are aliased.
at::Tensor tensor_over(c10::Storage storage, const at::Tensor& like, c10::DispatchKey key) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(key), like.dtype());
  impl->set_sizes_and_strides(like.sizes(), like.strides(), like.storage_offset());
  impl->_set_conj(like.is_conj());
  impl->_set_neg(like.is_neg());
  return at::Tensor(std::move(impl));
}

// Recently made kernel-device aliases, per thread. An alias depends only on
// the memory and layout it describes, so one whose memory, size, layout and
// dtype still equal those of the musa tensor being aliased is reused as is:
// making and destroying a TensorImpl and a StorageImpl per input is a large
// share of a small op's cost. Only aliases nothing else references are
// reused (a kernel may have kept one), and they never own memory.
class AliasCache {
 public:
  at::Tensor* find(const at::Tensor& musa, c10::DispatchKey key) {
    at::Tensor& a = slots_[slot_of(musa)];
    return a.defined() && reusable(a, musa, key) ? &a : nullptr;
  }
  void put(const at::Tensor& musa, const at::Tensor& alias) { slots_[slot_of(musa)] = alias; }

 private:
  static constexpr size_t kSlots = 16;
  static size_t slot_of(const at::Tensor& t) {
    auto p = reinterpret_cast<uintptr_t>(t.unsafeGetTensorImpl()->storage().data()) +
             static_cast<uintptr_t>(t.storage_offset());
    return (p >> 8 ^ p >> 4) % kSlots;
  }
  static bool reusable(const at::Tensor& a, const at::Tensor& t, c10::DispatchKey key) {
    const c10::TensorImpl* ai = a.unsafeGetTensorImpl();
    const c10::TensorImpl* ti = t.unsafeGetTensorImpl();
    const c10::Storage& as = ai->storage();
    const c10::Storage& ts = ti->storage();
    return a.use_count() == 1 && as.use_count() == 1 && ai->key_set().has(key) && as.data() == ts.data() &&
           as.nbytes() == ts.nbytes() && as.resizable() == ts.resizable() && is_non_owning_alias(as) &&
           ai->dtype() == ti->dtype() && ai->storage_offset() == ti->storage_offset() &&
           ai->sizes() == ti->sizes() && ai->strides() == ti->strides() && ai->is_conj() == ti->is_conj() &&
           ai->is_neg() == ti->is_neg();
  }
  at::Tensor slots_[kSlots];
};

thread_local AliasCache t_alias_cache;

// One delegated op call: the aliases it made and how to map results back.
class Delegation {
 public:
  Delegation(const c10::OperatorHandle& op, KernelDevice& kd) : op_(op), kd_(kd) {}

  c10::DeviceIndex device = -1;

  void note_device(const at::Tensor& t, const std::string& arg, bool cpu_ok) {
    if (!t.defined()) return;
    auto d = t.device();
    if (d.type() == kMusa) {
      if (device < 0) {
        device = d.index();
        first_ = d;
      } else if (d.index() != device) {
        device_mismatch(op_, first_, d, arg);
      }
    } else if (d.is_cpu()) {
      if (t.dim() != 0 && !cpu_ok) pending_cpu_.emplace_back(arg);
    } else {
      pending_other_.emplace_back(arg, d);
    }
  }

  void check_mixing() {
    if (device < 0) return;  // no musa tensor: nothing to mix with
    if (!pending_other_.empty()) device_mismatch(op_, first_, pending_other_[0].second, pending_other_[0].first);
    if (!pending_cpu_.empty()) device_mismatch(op_, first_, c10::Device(c10::DeviceType::CPU), pending_cpu_[0]);
  }

  bool storage_aliased(const c10::Storage& s) const {
    for (auto& e : storages_)
      if (e.musa.unsafeGetStorageImpl() == s.unsafeGetStorageImpl()) return true;
    return false;
  }

  c10::Storage alias_storage(const c10::Storage& s) {
    auto* impl = s.unsafeGetStorageImpl();
    for (auto& e : storages_)
      if (e.musa.unsafeGetStorageImpl() == impl) return e.alias;
    storages_.push_back({s, kd_.alias_storage(s), impl->data_ptr().get()});
    return storages_.back().alias;
  }

  at::Tensor alias(const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kMusa) {
      // cpu scalars (and cpu index tensors) go to the kernel device as they are;
      // the cuda kernel device needs index tensors on the GPU.
      if (t.defined() && t.dim() != 0 && kd_.type() != c10::DeviceType::CPU && t.device().is_cpu())
        return t.to(kd_.device_for(device));
      return t;
    }
    for (auto& e : tensors_)
      if (e.second.unsafeGetTensorImpl() == t.unsafeGetTensorImpl()) return e.first;
    at::Tensor* cached = storage_aliased(t.storage()) ? nullptr : t_alias_cache.find(t, kd_.dispatch_key());
    if (cached) {  // (one alias storage per musa storage within a call, so a view shares it)
      const c10::Storage& s = cached->storage();
      storages_.push_back({t.storage(), s, s.data()});
      tensors_.emplace_back(*cached, t);
      return *cached;
    }
    at::Tensor a = tensor_over(alias_storage(t.storage()), t, kd_.dispatch_key());
    tensors_.emplace_back(a, t);
    t_alias_cache.put(t, a);
    return a;
  }

  c10::IValue alias_value(const c10::IValue& v) {
    if (v.isStorage()) {
      auto s = v.toStorage();
      if (s.device_type() == kMusa) return alias_storage(s);
      return v;
    }
    if (v.isDevice() && v.toDevice().type() == kMusa) {
      if (device < 0) device = v.toDevice().has_index() ? v.toDevice().index() : current_device();
      return kd_.device_for(device);
    }
    return map_tensors(v, [this](const at::Tensor& t) { return alias(t); });
  }

  // After the kernel: carries what the op did to written arguments (resize_,
  // set_) back to their musa tensors.
  void sync_written(const OpTraits& traits, c10::ArrayRef<c10::IValue> originals) {
    for (size_t idx : traits.written_args) {
      const auto& v = originals[idx];
      if (v.isTensor()) sync_tensor(v.toTensor());
      else if (v.isTensorList())
        for (const at::Tensor& t : v.toTensorList()) sync_tensor(t);
    }
  }

  c10::IValue to_musa_value(const c10::IValue& v) {
    if (v.isStorage() && v.toStorage().device_type() == kd_.type()) {
      return to_musa_storage(v.toStorage());
    }
    return map_tensors(v, [this](const at::Tensor& t) { return to_musa(t); });
  }

 private:
  struct StorageAlias {
    c10::Storage musa;
    c10::Storage alias;
    const void* original_data;
  };

  // Maps a kernel-device storage back to musa: an alias of an input's
  // storage, memory the op allocated from musa (adopted), or a copy.
  c10::Storage to_musa_storage(const c10::Storage& s) {
    auto* impl = s.unsafeGetStorageImpl();
    for (auto& e : storages_) {
      if (e.alias.unsafeGetStorageImpl() != impl) continue;
      if (impl->data_ptr().get() != e.original_data) {  // the op grew it (resize_)
        adopt_into(*e.musa.unsafeGetStorageImpl(), *impl);
        e.original_data = impl->data_ptr().get();
      }
      return e.musa;
    }
    for (auto& e : fresh_)
      if (e.first.unsafeGetStorageImpl() == impl) return e.second;
    auto musa = c10::Storage(c10::make_intrusive<c10::StorageImpl>(
        c10::StorageImpl::use_byte_size_t(), impl->nbytes(), c10::DataPtr(), allocator::get(), true));
    adopt_into(*musa.unsafeGetStorageImpl(), *impl);
    fresh_.emplace_back(s, musa);
    return musa;
  }

  // Moves (or, when impossible, copies) the kernel-device memory of `from` into `to`.
  void adopt_into(c10::StorageImpl& to, c10::StorageImpl& from) {
    c10::DataPtr& dp = from.mutable_data_ptr();
    size_t n = from.nbytes();
    if (dp.get() == nullptr || n == 0) {
      to.set_data_ptr_noswap(allocator::get()->allocate(0));
      to.set_nbytes(0);
      return;
    }
    c10::DataPtr taken = std::move(dp);
    if (kd_.adopt(taken, device)) {
      // The kernel-device storage keeps a non-owning view for the rest of this call.
      from.set_data_ptr_noswap(c10::DataPtr(taken.get(), kd_.device_for(device)));
      to.set_data_ptr_noswap(std::move(taken));
      to.set_nbytes(n);
      return;
    }
    // Memory the musa allocator did not provide (e.g. a library's own
    // buffer): copy it into musa memory and count the op.
    from.set_data_ptr_noswap(std::move(taken));
    DeviceScope scope(device);
    c10::Storage fresh(c10::make_intrusive<c10::StorageImpl>(c10::StorageImpl::use_byte_size_t(), n,
                                                            allocator::get()->allocate(n), allocator::get(), true));
    auto bytes = at::TensorOptions().dtype(at::kByte);
    at::Tensor src = at::from_blob(from.mutable_data(), {static_cast<int64_t>(n)}, bytes.device(from.device()));
    at::Tensor dst = at::from_blob(fresh.mutable_data(), {static_cast<int64_t>(n)}, bytes.device(kd_.device_for(device)));
    dst.copy_(src);
    to.set_data_ptr_noswap(std::move(fresh.unsafeGetStorageImpl()->mutable_data_ptr()));
    to.set_nbytes(n);
    count_copy_path(op_);
  }

  at::Tensor musa_tensor_like(const at::Tensor& out, c10::Storage storage) {
    auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(storage), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                     out.dtype());
    impl->set_sizes_and_strides(out.sizes(), out.strides(), out.storage_offset());
    return at::Tensor(std::move(impl));
  }

  at::Tensor to_musa(const at::Tensor& out) {
    if (!out.defined() || out.device().type() != kd_.type()) return out;
    TORCH_CHECK_NOT_IMPLEMENTED(out.layout() == c10::kStrided, op_.schema().name(), " would return a ", out.layout(),
                                " tensor: musa stores strided tensors only; run it on the cpu "
                                "(x.cpu()) if you need that layout");
    for (auto& e : tensors_)
      if (e.first.unsafeGetTensorImpl() == out.unsafeGetTensorImpl()) return e.second;  // in-place: self
    if (device < 0) device = current_device();
    if (become_musa(out)) return out;
    return musa_tensor_like(out, to_musa_storage(out.storage()));
  }

  // A fresh output that nothing else references (the common case) is turned
  // into a musa tensor in place: its memory is already musa memory, so only
  // the storage's DataPtr/allocator and the tensor's device keys change. This
  // saves a TensorImpl and a StorageImpl per op. Returns false (nothing
  // changed) when the output is shared, an alias of an input, or not memory
  // the musa allocator provided.
  bool become_musa(const at::Tensor& out) {
    c10::TensorImpl* impl = out.unsafeGetTensorImpl();
    if (out.use_count() != 1 || out.weak_use_count() != 1 || !impl->has_storage() ||
        typeid(*impl) != typeid(c10::TensorImpl) || impl->key_set().has(c10::DispatchKey::Python))
      return false;
    const c10::Storage& storage = impl->storage();
    c10::StorageImpl* simpl = storage.unsafeGetStorageImpl();
    if (storage.use_count() != 1 || typeid(*simpl) != typeid(c10::StorageImpl) || !simpl->data_ptr().get())
      return false;
    for (auto& e : storages_)
      if (e.alias.unsafeGetStorageImpl() == simpl) return false;
    c10::DataPtr taken = std::move(simpl->mutable_data_ptr());
    if (!kd_.adopt(taken, device)) {
      simpl->set_data_ptr_noswap(std::move(taken));
      return false;
    }
    simpl->set_data_ptr_noswap(std::move(taken));
    simpl->set_allocator(allocator::get());
    impl->set_storage_keep_dtype(storage);  // device_opt_ follows the storage
    impl->_change_backend_component_keys(simpl->device());
    return true;
  }

  void sync_tensor(const at::Tensor& musa) {
    if (!musa.defined() || musa.device().type() != kMusa) return;
    for (auto& e : tensors_) {
      if (e.second.unsafeGetTensorImpl() != musa.unsafeGetTensorImpl()) continue;
      auto* a = e.first.unsafeGetTensorImpl();
      auto* m = e.second.unsafeGetTensorImpl();
      c10::Storage target = to_musa_storage(a->storage());
      if (target.unsafeGetStorageImpl() != m->storage().unsafeGetStorageImpl()) m->set_storage_keep_dtype(target);
      if (a->sizes() != m->sizes() || a->strides() != m->strides() || a->storage_offset() != m->storage_offset())
        m->set_sizes_and_strides(a->sizes(), a->strides(), a->storage_offset());
    }
  }

  const c10::OperatorHandle& op_;
  KernelDevice& kd_;
  c10::Device first_{kMusa, 0};
  // Small inline vectors: most ops touch a handful of tensors, and heap
  // allocations here are a measurable share of a small op's cost.
  c10::SmallVector<std::string, 1> pending_cpu_;
  c10::SmallVector<std::pair<std::string, c10::Device>, 1> pending_other_;
  c10::SmallVector<StorageAlias, 4> storages_;
  c10::SmallVector<std::pair<at::Tensor, at::Tensor>, 4> tensors_;  // alias -> musa
  c10::SmallVector<std::pair<c10::Storage, c10::Storage>, 2> fresh_;  // kernel-device -> musa
};

void count_copy_path(const c10::OperatorHandle& op) {
  const auto& schema = op.schema();
  std::lock_guard<std::mutex> g(g_counts_mu);
  g_copy_counts[schema.overload_name().empty() ? schema.name() : schema.name() + "." + schema.overload_name()]++;
}

// Ops the kernel device has no kernel for (e.g. histogram on CUDA) still
// work: inputs are copied to the CPU, the CPU kernel runs, results are
// copied back. This is the counted copying path.
void run_on_cpu_by_copy(const c10::OperatorHandle& op, const OpTraits& traits, torch::jit::Stack* stack,
                        c10::DeviceIndex device) {
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
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), stack);
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

void musa_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet, torch::jit::Stack* stack) {
  g_delegated.fetch_add(1, std::memory_order_relaxed);
  KernelDevice& kd = kernel_device();
  const OpTraits& traits = traits_of(op);
  const auto& args = op.schema().arguments();
  const size_t nargs = args.size();
  const size_t base = stack->size() - nargs;
  Delegation call(op, kd);

  for (size_t i = 0; i < nargs; ++i) {
    const c10::IValue& v = (*stack)[base + i];
    const std::string& name = args[i].name();
    if (v.isTensor()) {
      call.note_device(v.toTensor(), name, false);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) call.note_device(t, name, false);
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toList())
        if (e.isTensor()) call.note_device(e.toTensor(), name, traits.allows_cpu_indices);
    }
  }
  call.check_mixing();
  if (call.device < 0 && !traits.generator_args.empty()) {
    // Dispatched here only because a musa generator was passed for non-musa tensors.
    for (size_t idx : traits.generator_args) {
      const c10::IValue& v = (*stack)[base + idx];
      TORCH_CHECK(!v.isGenerator() || v.toGenerator().device().type() != kMusa,
                  "Expected a 'cpu' device type for generator but found 'musa' (", op.schema().name(),
                  "): use a generator of the tensors' device, or create the tensors on musa");
    }
  }

  if (traits.cpu_only) {
    run_on_cpu_by_copy(op, traits, stack, call.device < 0 ? current_device() : call.device);
    return;
  }

  // Keep the musa arguments alive and known while the stack holds aliases.
  c10::SmallVector<c10::IValue, 8> originals(stack->begin() + base, stack->end());
  for (size_t i = 0; i < nargs; ++i) (*stack)[base + i] = call.alias_value((*stack)[base + i]);
  if (call.device < 0) call.device = current_device();

  for (size_t idx : traits.generator_args) {
    c10::IValue& v = (*stack)[base + idx];
    at::Generator gen = v.isNone() ? default_generator(call.device) : v.toGenerator();
    TORCH_CHECK(gen.device().type() == kMusa, "Expected a 'musa' device type for generator but found '",
                gen.device().type(), "' (", op.schema().name(),
                "): pass a generator made with torch.Generator(device='musa')");
    v = kd.kernel_generator(gen);
  }

  {
    KernelScope scope(kd, call.device);
    // Random ops that take no generator draw from the kernel device's default
    // one: seed it from the musa counter for this op and restore it after,
    // so musa results depend only on torch.musa.manual_seed.
    std::optional<at::Generator> saved_default;
    at::Generator kernel_default;
    if (traits.seeded_without_generator) {
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
        call.device, [&] { op.redispatchBoxed(c10::DispatchKeySet(kd.dispatch_key()), stack); },
        op.schema().name().c_str());
    if (saved_default) {
      std::lock_guard<std::mutex> lock(kernel_default.mutex());
      kernel_default.set_state(saved_default->get_state());
    }
  }

  call.sync_written(traits, originals);
  const size_t nret = op.schema().returns().size();
  const size_t rbase = stack->size() - nret;
  for (size_t i = 0; i < nret; ++i) (*stack)[rbase + i] = call.to_musa_value((*stack)[rbase + i]);
}

}  // namespace

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
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const auto& name : dispatcher.getAllOpNames()) {
      if (name.name.rfind("aten::", 0) != 0) continue;
      auto op = dispatcher.findOp(name);
      if (!op || op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) continue;
      // Also ops with both a device kernel and a CompositeExplicitAutograd
      // one: PrivateUse1 would get the composite (e.g. layer norm built from
      // batch norm), a different algorithm from the kernel device's.
      bool structured = op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional);
      bool device_specific = op->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) &&
                             (op->hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
                              op->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
      if (!structured && !device_specific) continue;
      std::string qualified = name.name.substr(6) + (name.overload_name.empty() ? "" : "." + name.overload_name);
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
