#include "distributed/collective_call.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

#include "core/device.h"
#include "distributed/mccl_backend.h"
#include "distributed/mccl_work.h"
#include "ops/kernel_device.h"
#include "profiler/device_activity.h"

namespace torch_musa::distributed {

namespace {
std::mutex staged_mutex;
std::map<std::string, int64_t> staged;
std::mutex sent_mutex;
// op -> (calls, bytes this rank contributed), keyed by the op's name literal: no string is built
// on the collective's path (names read back are merged by text).
std::unordered_map<const char*, std::pair<int64_t, int64_t>> sent;

bool is_float8(at::ScalarType t) {
  return t == at::kFloat8_e4m3fn || t == at::kFloat8_e5m2 || t == at::kFloat8_e4m3fnuz ||
         t == at::kFloat8_e5m2fnuz || t == at::kFloat8_e8m0fnu;
}
}  // namespace

std::map<std::string, int64_t> staged_counts() {
  std::lock_guard<std::mutex> g(staged_mutex);
  return staged;
}
void reset_staged_counts() {
  std::lock_guard<std::mutex> g(staged_mutex);
  staged.clear();
}

std::map<std::string, std::pair<int64_t, int64_t>> sent_bytes() {
  std::lock_guard<std::mutex> g(sent_mutex);
  std::map<std::string, std::pair<int64_t, int64_t>> by_name;
  for (const auto& [op, counts] : sent) {
    auto& s = by_name[op];
    s.first += counts.first;
    s.second += counts.second;
  }
  return by_name;
}
void reset_sent_bytes() {
  std::lock_guard<std::mutex> g(sent_mutex);
  sent.clear();
}

void CollectiveCall::check(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "mccl ", op_, ": got an undefined tensor");
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "mccl ", op_, ": got a tensor on ", t.device(),
              "; mccl runs collectives on musa tensors. Move it with .to('musa'), or create the group with "
              "init_process_group(backend='cpu:gloo,musa:mccl') so cpu tensors go through gloo");
  TORCH_CHECK(t.layout() == c10::kStrided, "mccl ", op_, ": ", t.layout(), " tensors are not supported; "
              "use dense (strided) tensors");
  if (device_ < 0) device_ = t.device().index();
  TORCH_CHECK(t.device().index() == device_, "mccl ", op_, ": tensors on musa:", device_, " and ", t.device(),
              "; one rank runs a collective on one musa device (torch.musa.set_device(local_rank))");
  if (movement_ == Movement::kReduce)
    TORCH_CHECK(t.scalar_type() != at::kFloat8_e8m0fnu, "mccl ", op_, ": ", t.scalar_type(), " (a scale format "
                "without sign or mantissa) cannot be reduced; it moves through the data-movement collectives. "
                "Upcast to float32 to reduce it");
}

// The dtype the library sees. Moving data only needs the bytes, so dtypes a
// library may lack (float8, bool) move as integers of the same width.
at::ScalarType CollectiveCall::library_dtype(at::ScalarType dtype) const {
  if (dtype == at::kBool) return at::kByte;  // reductions of bool were mapped to MAX/MIN already
  if (movement_ == Movement::kData && (is_float8(dtype) || dtype == at::kUInt16 || dtype == at::kUInt32 ||
                                       dtype == at::kUInt64)) {
    switch (c10::elementSize(dtype)) {
      case 1: return at::kByte;
      case 2: return at::kShort;
      case 4: return at::kInt;
      default: return at::kLong;
    }
  }
  return dtype;
}

at::Tensor CollectiveCall::alias(const at::Tensor& musa, Role role, bool writable) {
  check(musa);
  keep_alive_.push_back(musa);
  if (role != Role::kOut) sent_bytes_ += static_cast<int64_t>(musa.numel()) * musa.element_size();
  if (role != Role::kIn) outputs_.push_back(musa);
  at::Tensor t = musa;
  if (widen_float8_ && is_float8(musa.scalar_type())) {  // reduced as float32, cast back when done
    t = role == Role::kOut ? at::empty(musa.sizes(), musa.options().dtype(at::kFloat))
                           : musa.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true, at::MemoryFormat::Contiguous);
    if (role != Role::kIn) copy_back_.emplace_back(musa, t);
    keep_alive_.push_back(t);
  } else if (!t.is_contiguous()) {  // NCCL and Gloo take dense memory only
    t = role == Role::kOut ? at::empty_like(musa, at::MemoryFormat::Contiguous) : musa.contiguous();
    if (role != Role::kIn) copy_back_.emplace_back(musa, t);
    keep_alive_.push_back(t);
    std::lock_guard<std::mutex> g(staged_mutex);
    ++staged[op_];
  } else if (writable) {
    t = musa.clone(at::MemoryFormat::Contiguous);
    keep_alive_.push_back(t);
  }
  if (role != Role::kIn) written_.push_back(t);
  // The alias holds a reference to the musa storage: the library may keep it past this call (an
  // async collective the caller never waits for). Built directly over the storage, with the
  // library's dtype of the same width (for_blob's builder cost a per-call std::function and a
  // device lookup, on the path of every latency-bound collective).
  KernelDevice& kd = kernel_device();
  auto impl = c10::make_intrusive<c10::TensorImpl>(owning_alias(t.storage(), kd.device_for(t.device().index())),
                                                   c10::DispatchKeySet(kd.dispatch_key()),
                                                   c10::scalarTypeToTypeMeta(library_dtype(t.scalar_type())));
  impl->set_sizes_and_strides(t.sizes(), t.strides(), t.storage_offset());
  return at::Tensor(std::move(impl));
}

std::vector<at::Tensor> CollectiveCall::aliases(std::vector<at::Tensor>& tensors, Role role, bool writable) {
  std::vector<at::Tensor> r;
  r.reserve(tensors.size());
  for (auto& t : tensors) r.push_back(alias(t, role, writable));
  return r;
}

std::vector<at::Tensor> CollectiveCall::inout(std::vector<at::Tensor>& tensors) {
  return aliases(tensors, Role::kInOut, false);
}
at::Tensor CollectiveCall::in(at::Tensor& tensor, bool writable) { return alias(tensor, Role::kIn, writable); }
std::vector<at::Tensor> CollectiveCall::in(std::vector<at::Tensor>& tensors, bool writable) {
  return aliases(tensors, Role::kIn, writable);
}
std::vector<std::vector<at::Tensor>> CollectiveCall::in(std::vector<std::vector<at::Tensor>>& lists, bool writable) {
  std::vector<std::vector<at::Tensor>> r;
  for (auto& l : lists) r.push_back(in(l, writable));
  return r;
}
at::Tensor CollectiveCall::out(at::Tensor& tensor) { return alias(tensor, Role::kOut, false); }
std::vector<at::Tensor> CollectiveCall::out(std::vector<at::Tensor>& tensors) {
  return aliases(tensors, Role::kOut, false);
}
std::vector<std::vector<at::Tensor>> CollectiveCall::out(std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> r;
  for (auto& l : lists) r.push_back(out(l));
  return r;
}

c10::intrusive_ptr<c10d::Work> CollectiveCall::run(c10::function_ref<c10::intrusive_ptr<c10d::Work>()> launch) {
  if (device_ < 0) device_ = current_device();
  c10::intrusive_ptr<c10d::Work> work;
  {
    // The current CUDA stream is the current musa stream's (cuda driver): NCCL's synchronous
    // collectives run on it; asynchronous ones on NCCL's stream ordered after it.
    KernelScope scope(kernel_device(), device_);
    // The launch on the musa stream; the library's own stream work is not timed.
    profiler::DeviceRange timed(device_, op_, profiler::ActivityKind::Collective);
    work = launch();
  }
  {  // counted once launched (a float8 reduction the library refused is retried widened)
    std::lock_guard<std::mutex> g(sent_mutex);
    auto& s = sent[op_];
    ++s.first;
    s.second += sent_bytes_;
  }
  std::function<void()> finish;
  if (divide_by_ > 0 || !copy_back_.empty()) {
    finish = [written = written_, copy_back = copy_back_, d = divide_by_]() {
      if (d > 0)
        for (const auto& w : written) const_cast<at::Tensor&>(w).div_(d);
      for (const auto& [original, staging] : copy_back) const_cast<at::Tensor&>(original).copy_(staging);
    };
  }
  if (!work) {
    // A synchronous collective ran on the current musa stream (NCCL's asyncOp=false): what is
    // left to do follows it on that stream, and there is no Work, as for cuda tensors. The
    // tensors it used need no keeping: later work on them is ordered after it on the stream.
    if (finish) {
      DeviceScope scope(device_);
      finish();
    }
    return work;
  }
  // MCCLWork keeps them as std::vectors; only calls that return a Work pay for the move.
  auto moved = [](auto& small) {
    return std::vector<at::Tensor>(std::make_move_iterator(small.begin()), std::make_move_iterator(small.end()));
  };
  return c10::make_intrusive<MCCLWork>(std::move(work), device_, moved(outputs_), moved(keep_alive_),
                                       std::move(finish), rank_, type_);
}

}  // namespace torch_musa::distributed
