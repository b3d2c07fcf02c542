#include "distributed/mccl_work.h"

#include <ATen/core/ivalue.h>
#include <ATen/core/jit_type.h>

#include "core/device.h"
#include "graphs/capture_state.h"
#include "ops/kernel_device.h"

namespace torch_musa::distributed {

namespace {
// A dropped Work's library Work and the buffers it may still use (see MCCLWork's `borrowed`).
struct Orphan {
  c10::intrusive_ptr<c10d::Work> inner;
  CallBuffers buffers;
};
// Never destroyed: no library call at process exit, and a Work dropped late still finds them.
auto* orphans_mutex = new std::mutex();
auto* orphans = new std::vector<Orphan>();
std::atomic<bool> orphans_pending{false};
}  // namespace

void reap_orphans() {
  if (!orphans_pending.load(std::memory_order_acquire) || graphs::any_capture_underway()) return;
  std::vector<Orphan> done;  // let go outside the lock
  std::lock_guard<std::mutex> g(*orphans_mutex);
  for (size_t i = 0; i < orphans->size();) {
    if ((*orphans)[i].inner->isCompleted()) {
      done.push_back(std::move((*orphans)[i]));
      (*orphans)[i] = std::move(orphans->back());
      orphans->pop_back();
    } else {
      ++i;
    }
  }
  orphans_pending.store(!orphans->empty(), std::memory_order_release);
}

std::vector<at::Tensor> outputs_of(const CallBuffers& buffers) {
  std::vector<at::Tensor> outputs;
  for (const auto& b : buffers)
    if (b.output) outputs.push_back(b.musa);
  return outputs;
}

MCCLWork::MCCLWork(c10::intrusive_ptr<c10d::Work> inner, c10::DeviceIndex device, CallBuffers buffers,
                   std::function<void()> finish, int rank, c10d::OpType type, bool borrowed)
    : c10d::Work(rank, type),
      inner_(std::move(inner)),
      device_(device),
      buffers_(std::move(buffers)),
      borrowed_(borrowed && !buffers_.empty()),
      finish_(std::move(finish)) {}

MCCLWork::~MCCLWork() {
  if (!borrowed_ || settled_.load(std::memory_order_acquire)) return;
  // Nobody waited: the library may still be working on these buffers (NCCL keeps only aliases
  // that do not hold the memory). They go when its Work completes, as NCCL's own stash does.
  try {
    std::lock_guard<std::mutex> g(*orphans_mutex);
    orphans->push_back(Orphan{inner_, std::move(buffers_)});
    orphans_pending.store(true, std::memory_order_release);
  } catch (...) {  // out of memory: keep them for good rather than free memory in use
    (void)new CallBuffers(std::move(buffers_));
  }
}

void MCCLWork::order_current_stream(std::chrono::milliseconds timeout) {
  // In a KernelScope the library sees the current musa stream as its current
  // stream: NCCL makes it wait for its own stream (no host sync); Gloo's wait
  // blocks until its threads are done (the host driver runs streams inline).
  KernelScope scope(kernel_device(), device_);
  inner_->wait(timeout);
  settled_.store(true, std::memory_order_release);
}

void MCCLWork::run_finish() {
  if (!finish_) return;  // most calls: nothing to do, and no once_flag to pass
  std::call_once(finished_, [this] {
    DeviceScope scope(device_);
    finish_();
  });
}

bool MCCLWork::isCompleted() {
  if (!inner_->isCompleted()) return false;
  settled_.store(true, std::memory_order_release);
  if (finish_ && inner_->isSuccess()) {
    order_current_stream(kNoTimeout);
    run_finish();
  }
  return true;
}

bool MCCLWork::isSuccess() const { return inner_->isSuccess(); }
std::exception_ptr MCCLWork::exception() const { return inner_->exception(); }
int MCCLWork::sourceRank() const { return inner_->sourceRank(); }
std::vector<at::Tensor> MCCLWork::result() { return outputs_of(buffers_); }

void MCCLWork::synchronize() {
  order_current_stream(kNoTimeout);
  run_finish();
}

bool MCCLWork::wait(std::chrono::milliseconds timeout) {
  order_current_stream(timeout);
  run_finish();
  return true;
}

void MCCLWork::abort() { inner_->abort(); }
float MCCLWork::getDuration() const { return inner_->getDuration(); }
uint64_t MCCLWork::getSequencenumber() const { return inner_->getSequencenumber(); }

c10::intrusive_ptr<c10::ivalue::Future> MCCLWork::getFuture() {
  std::lock_guard<std::mutex> g(future_mutex_);
  if (future_) return future_;
  // A musa-device future: completing it records an event on the current musa
  // stream, and whoever waits on it has their current stream wait for that.
  future_ = c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()),
                                                     std::vector<c10::Device>{c10::Device(c10::kPrivateUse1, device_)});
  auto self = c10::intrusive_ptr<MCCLWork>::reclaim_copy(this);
  inner_->getFuture()->addCallback([self](c10::ivalue::Future& done) {
    if (done.hasError()) {
      self->future_->setError(done.exception_ptr());
      return;
    }
    try {
      DeviceScope scope(self->device_);
      {
        // Not the library Work's wait(): Gloo completes its Work only after
        // this callback returns. The done future's wait() makes the current
        // (musa) stream wait for the library's events (NCCL), or returns (Gloo).
        KernelScope kernel_scope(kernel_device(), self->device_);
        done.wait();
        self->settled_.store(true, std::memory_order_release);
      }
      self->run_finish();
      self->future_->markCompleted(c10::IValue(outputs_of(self->buffers_)));
    } catch (...) {
      self->future_->setError(std::current_exception());
    }
  });
  return future_;
}

CoalescedWork::CoalescedWork(std::vector<c10::intrusive_ptr<c10d::Work>> works, c10::DeviceIndex device, int rank)
    : c10d::Work(rank, c10d::OpType::COALESCED), works_(std::move(works)), device_(device) {}

bool CoalescedWork::isCompleted() {
  for (auto& w : works_)
    if (!w->isCompleted()) return false;
  return true;
}

bool CoalescedWork::isSuccess() const {
  for (auto& w : works_)
    if (!w->isSuccess()) return false;
  return true;
}

std::exception_ptr CoalescedWork::exception() const {
  for (auto& w : works_)
    if (auto e = w->exception()) return e;
  return nullptr;
}

std::vector<at::Tensor> CoalescedWork::result() {
  std::vector<at::Tensor> all;
  for (auto& w : works_)
    for (auto& t : w->result()) all.push_back(t);
  return all;
}

void CoalescedWork::synchronize() {
  for (auto& w : works_) w->synchronize();
}

bool CoalescedWork::wait(std::chrono::milliseconds timeout) {
  for (auto& w : works_) w->wait(timeout);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> CoalescedWork::getFuture() {
  c10::List<c10::intrusive_ptr<c10::ivalue::Future>> futures(c10::FutureType::create(c10::ListType::ofTensors()));
  for (auto& w : works_) futures.push_back(w->getFuture());
  auto results = std::make_shared<std::vector<at::Tensor>>(result());
  return c10::collectAll(futures)->then(
      [results](c10::ivalue::Future&) { return c10::IValue(*results); }, c10::ListType::ofTensors());
}

}  // namespace torch_musa::distributed
