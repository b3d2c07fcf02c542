#include "distributed/collective_call.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "core/device.h"
#include "distributed/alias_cache.h"
#include "distributed/mccl_backend.h"
#include "distributed/mccl_work.h"
#include "ops/kernel_device.h"
#include "profiler/device_activity.h"

namespace torch_musa::distributed {

namespace {
std::mutex staged_mutex;
std::map<std::string, int64_t> staged;
// Per op name literal: calls and bytes this rank contributed, counted without a lock or a string
// on the collective's path (names read back are merged by text: a literal may have several copies).
struct SentSlot {
  std::atomic<const char*> op{nullptr};
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> bytes{0};
};
constexpr size_t kSentSlots = 64;  // mccl has about 25 op names
SentSlot sent[kSentSlots];

SentSlot& sent_slot(const char* op) {
  size_t start = (reinterpret_cast<uintptr_t>(op) >> 3) % kSentSlots;
  for (size_t i = 0; i < kSentSlots; ++i) {
    SentSlot& s = sent[(start + i) % kSentSlots];
    const char* held = s.op.load(std::memory_order_acquire);
    if (held == nullptr && s.op.compare_exchange_strong(held, op, std::memory_order_acq_rel)) return s;
    if (held == op) return s;
  }
  TORCH_INTERNAL_ASSERT(false, "mccl: more collective names than the byte counters hold (", kSentSlots, ")");
}

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
  std::map<std::string, std::pair<int64_t, int64_t>> by_name;
  for (const auto& s : sent) {
    const char* op = s.op.load(std::memory_order_acquire);
    int64_t calls = s.calls.load(std::memory_order_relaxed);
    if (op == nullptr || calls == 0) continue;
    auto& v = by_name[op];
    v.first += calls;
    v.second += s.bytes.load(std::memory_order_relaxed);
  }
  return by_name;
}
void reset_sent_bytes() {
  for (auto& s : sent) {
    s.calls.store(0, std::memory_order_relaxed);
    s.bytes.store(0, std::memory_order_relaxed);
  }
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
  if (role != Role::kOut) sent_bytes_ += static_cast<int64_t>(musa.numel()) * musa.element_size();
  at::Tensor copy;  // the library's own copy, when it cannot take `musa` as it is
  if (widen_float8_ && is_float8(musa.scalar_type())) {  // reduced as float32, cast back when done
    copy = role == Role::kOut ? at::empty(musa.sizes(), musa.options().dtype(at::kFloat))
                              : musa.to(at::kFloat, /*non_blocking=*/false, /*copy=*/true, at::MemoryFormat::Contiguous);
  } else if (!musa.is_contiguous()) {  // NCCL and Gloo take dense memory only
    copy = role == Role::kOut ? at::empty_like(musa, at::MemoryFormat::Contiguous) : musa.contiguous();
    std::lock_guard<std::mutex> g(staged_mutex);
    ++staged[op_];
  } else if (writable) {
    copy = musa.clone(at::MemoryFormat::Contiguous);
  }
  // Same-width library dtype. A built alias of an asynchronous call holds a reference to the musa
  // storage: the library may keep it past this call (a collective the caller never waits for).
  at::Tensor a;
  AliasCache* cache = copy.defined() || cache_ == nullptr ? nullptr : this->cache();
  if (cache != nullptr) {
    a = cache->get(musa, library_dtype(musa.scalar_type()), flat_);
  } else {
    const at::Tensor& t = copy.defined() ? copy : musa;
    // Borrowing (cache_ set) without the cache: a non-owning alias all the same.
    a = kernel_alias(t, library_dtype(t.scalar_type()), /*owning=*/!sync_ && (copy.defined() || cache_ == nullptr),
                     flat_);
  }
  copies_back_ |= role != Role::kIn && copy.defined();
  buffers_.push_back(CallBuffer{musa, std::move(copy), role != Role::kIn});
  return a;
}

AliasCache* CollectiveCall::cache() {
  if (!cache_held_) {
    cache_held_ = cache_->try_acquire();
    if (!cache_held_) return nullptr;
  }
  return cache_;
}

void CollectiveCall::release_cache() {
  if (cache_held_) cache_->release();
  cache_held_ = false;
}

void CollectiveCall::end_block(BlockRest rest) {
  for (auto& b : rest.buffers) buffers_.push_back(std::move(b));  // outputs of none already
  borrowed_ = !buffers_.empty();
  block_finish_ = std::move(rest.finish);
}

std::vector<at::Tensor> CollectiveCall::aliases(std::vector<at::Tensor>& tensors, Role role, bool writable) {
  std::vector<at::Tensor> r;
  r.reserve(tensors.size());
  buffers_.reserve(buffers_.size() + tensors.size());
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

namespace {
// Where the library runs. cuda driver: a KernelScope, so CUDA's current stream is the current
// musa stream's (NCCL's synchronous collectives run on it; asynchronous ones on NCCL's stream
// ordered after it) and what NCCL allocates is musa memory. Host driver: the device alone, so
// Gloo's scratch comes from its own CPU allocator, not from musa memory.
class LibraryScope {
 public:
  explicit LibraryScope(c10::DeviceIndex device) {
    KernelDevice& kd = kernel_device();
    if (kd.type() == c10::DeviceType::CPU) device_.emplace(device);
    else kernel_.emplace(kd, device);
  }

 private:
  std::optional<DeviceScope> device_;
  std::optional<KernelScope> kernel_;
};

std::function<void()> then(std::function<void()> first, std::function<void()> second) {
  if (!first) return second;
  if (!second) return first;
  return [first = std::move(first), second = std::move(second)] {
    first();
    second();
  };
}
}  // namespace

std::function<void()> CollectiveCall::finish() const {
  std::function<void()> own;
  if (divide_by_ > 0 || copies_back_) {
    own = [buffers = buffers_, d = divide_by_]() mutable {
      if (d > 0)
        for (auto& b : buffers)
          if (b.output) (b.copy.defined() ? b.copy : b.musa).div_(d);
      for (auto& b : buffers)
        if (b.output && b.copy.defined()) b.musa.copy_(b.copy);
    };
  }
  return then(block_finish_, std::move(own));
}

c10::intrusive_ptr<c10d::Work> CollectiveCall::run(c10::function_ref<c10::intrusive_ptr<c10d::Work>()> launch) {
  release_cache();  // the aliases are made
  reap_orphans();
  if (device_ < 0) device_ = current_device();
  c10::intrusive_ptr<c10d::Work> work;
  {
    LibraryScope scope(device_);
    {
      // The launch on the musa stream; the library's own stream work is not timed.
      profiler::DeviceRange timed(device_, op_, profiler::ActivityKind::Collective);
      work = launch();
    }
    // A synchronous call's library Work (Gloo's; NCCL hands back none) is waited for here, as
    // torch's caller would next: no Work to wrap, and its aliases are free once this returns.
    if (work && sync_) {
      work->wait();
      work.reset();
    }
  }
  // Counted once launched (a float8 reduction the library refused is retried widened).
  SentSlot& counted = sent_slot(op_);
  counted.calls.fetch_add(1, std::memory_order_relaxed);
  counted.bytes.fetch_add(sent_bytes_, std::memory_order_relaxed);
  std::function<void()> done = finish();
  if (block_ != nullptr) {  // the block's end keeps the buffers and finishes them, after NCCL ran the block
    for (const auto& b : buffers_) block_->buffers.push_back(CallBuffer{b.musa, b.copy, false});
    block_->finish = then(std::move(block_->finish), std::move(done));
    done = nullptr;
  }
  if (!work) {
    // A synchronous collective ran on the current musa stream (or was waited for): what is left
    // follows it there, and there is no Work, as for cuda tensors. The tensors it used need no
    // keeping: later work on them is ordered after it on the stream. (So do a coalescing block's
    // members when NCCL's block hands back none: NCCL joins a group's streams at its end.)
    if (done) {
      DeviceScope scope(device_);
      done();
    }
    return work;
  }
  // Borrowed aliases: the Work keeps the musa memory alive (a block member's, the block's end).
  bool borrowed = block_ == nullptr && (borrowed_ || (!sync_ && cache_ != nullptr));
  return c10::make_intrusive<MCCLWork>(std::move(work), device_, std::move(buffers_), std::move(done), rank_, type_,
                                       borrowed);
}

}  // namespace torch_musa::distributed
