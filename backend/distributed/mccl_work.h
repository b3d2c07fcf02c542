// The Work an mccl collective returns: the library's own Work (NCCL's or
// Gloo's, over kernel-device aliases of musa tensors), seen from musa.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <functional>
#include <mutex>
#include <vector>

namespace torch_musa::distributed {

// One musa tensor of a collective: the caller's tensor, and the library's own copy of it when
// the library could not take it as it is (a staged, widened or private copy; else undefined).
struct CallBuffer {
  at::Tensor musa;
  at::Tensor copy;
  bool output;  // the collective writes it: result() and the future hand it out
};
// Inline storage: no heap allocation per call up to a coalesced block of 8 tensors.
using CallBuffers = c10::SmallVector<CallBuffer, 8>;

// The caller's tensors a collective writes, in call order (result(), the future's value).
std::vector<at::Tensor> outputs_of(const CallBuffers& buffers);

class MCCLWork : public c10d::Work {
 public:
  // `buffers`: every musa tensor the collective reads or writes, held until the Work goes
  // (record_stream semantics); its outputs are result() and the future's value, built when
  // asked. `finish` (may be empty) runs once, after completion and before anyone sees the
  // outputs (copies staged outputs back into non-contiguous originals). `borrowed`: the
  // library's aliases do not keep the musa memory alive (the group's cached ones), these
  // buffers do: dropped before anyone saw the collective complete, the Work hands them to
  // the orphans (reap_orphans()) instead of letting them go.
  MCCLWork(c10::intrusive_ptr<c10d::Work> inner, c10::DeviceIndex device, CallBuffers buffers,
           std::function<void()> finish, int rank, c10d::OpType type, bool borrowed);
  ~MCCLWork() override;

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  void abort() override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
  float getDuration() const override;
  uint64_t getSequencenumber() const override;

 private:
  // Makes the current musa stream wait for the library's stream (the cuda
  // driver) or the host wait for the library's threads (the host driver).
  void order_current_stream(std::chrono::milliseconds timeout);
  void run_finish();

  c10::intrusive_ptr<c10d::Work> inner_;
  c10::DeviceIndex device_;
  CallBuffers buffers_;
  bool borrowed_;
  std::atomic<bool> settled_{false};  // wait(), synchronize() or a completion was seen
  std::function<void()> finish_;
  std::once_flag finished_;
  std::mutex future_mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Lets go of the buffers of Works dropped before their collective was seen to complete, once it
// has (the library's own Work says so). Every collective calls it first: one atomic load when
// there are none; not while a graph capture runs (no completion may be polled then).
void reap_orphans();

// The Work of a coalesced block whose library has no coalescing (Gloo): it
// completes when every collective of the block has.
class CoalescedWork : public c10d::Work {
 public:
  CoalescedWork(std::vector<c10::intrusive_ptr<c10d::Work>> works, c10::DeviceIndex device, int rank);
  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  std::vector<at::Tensor> result() override;
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

 private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works_;
  c10::DeviceIndex device_;
};

}  // namespace torch_musa::distributed
