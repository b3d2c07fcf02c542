// The Work an mccl collective returns: the library's own Work (NCCL's or
// Gloo's, over kernel-device aliases of musa tensors), seen from musa.
#pragma once

#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <mutex>
#include <vector>

namespace torch_musa::distributed {

class MCCLWork : public c10d::Work {
 public:
  // `outputs`: the musa tensors the collective produces (result(), the
  // future's value). `keep_alive`: every musa tensor it reads or writes,
  // held until it completes (record_stream semantics). `finish` runs once,
  // after completion and before anyone sees the outputs (copies staged
  // outputs back into non-contiguous originals).
  MCCLWork(c10::intrusive_ptr<c10d::Work> inner, c10::DeviceIndex device, std::vector<at::Tensor> outputs,
           std::vector<at::Tensor> keep_alive, std::function<void()> finish, int rank, c10d::OpType type);

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
  std::vector<at::Tensor> outputs_;
  std::vector<at::Tensor> keep_alive_;
  std::function<void()> finish_;
  std::once_flag finished_;
  std::mutex future_mutex_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

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
