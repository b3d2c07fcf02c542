// ProcessGroupMCCL: the c10d backend torch.distributed uses for musa tensors.
//
// It runs every collective in place on musa memory through the collective
// library of the driver's kernel device -- NCCL (ProcessGroupNCCL) on the cuda
// driver, Gloo (ProcessGroupGloo) on the host driver -- over kernel-device
// aliases of the musa tensors, as the op layer runs kernels. The library's own
// backend is made in Python (torch_musa/distributed) and handed in here.
#pragma once

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <atomic>
#include <map>
#include <string>

#include "distributed/alias_cache.h"
#include "distributed/collective_call.h"

namespace torch_musa::distributed {

class MCCLBackend : public c10d::Backend {
 public:
  // `checker` (may be null): a CPU backend over which ranks compare each
  // collective's signature before running it (TORCH_MCCL_CHECK_COLLECTIVES).
  MCCLBackend(c10::intrusive_ptr<c10d::Backend> library, c10::intrusive_ptr<c10d::Backend> checker, int rank,
              int size);

  const std::string getBackendName() const override { return "mccl"; }
  const c10::intrusive_ptr<c10d::Backend>& library() const { return library_; }
  void set_store(c10::intrusive_ptr<c10d::Store> store) { store_ = std::move(store); }
  // "nccl" or "gloo": which library runs the collectives.
  std::string library_name() const { return library_->getBackendName(); }
  // Whether this group compares collectives' signatures across ranks (TORCH_MCCL_CHECK_COLLECTIVES).
  bool checks_collectives() const { return checker_ != nullptr; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                     const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs,
                                        std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs,
                                         std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs,
                                                                 std::vector<at::Tensor>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_split_sizes,
                                               std::vector<int64_t>& input_split_sizes,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  void monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) override;

  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;
  bool supportsCoalescing() const override { return true; }
  bool supportsSplitting() const override { return library_->supportsSplitting(); }
  c10::intrusive_ptr<c10d::Backend> split(const c10::intrusive_ptr<c10d::Store>& store,
                                          const std::vector<int>& ranks,
                                          const c10::intrusive_ptr<c10d::Backend::Options>& opts) override;
  void setTimeout(std::chrono::milliseconds timeout) override { library_->setTimeout(timeout); }
  void setSequenceNumberForGroup() override { library_->setSequenceNumberForGroup(); }
  uint64_t getSequenceNumberForGroup() override { return library_->getSequenceNumberForGroup(); }
  void setGroupUid(const std::string& pg_uid) override;
  void eagerConnectSingleDevice(at::Device device) override;
  void waitForPendingWorks() override { library_->waitForPendingWorks(); }
  void abort() override { library_->abort(); }
  void shutdown() override { library_->shutdown(); }
  c10::intrusive_ptr<c10d::Backend::Options> getBackendOptions() override { return library_->getBackendOptions(); }

 private:
  // What every rank must agree on before a collective runs: a mismatch would
  // make the library crash (Gloo), hang or silently mix data (NCCL).
  // `sizes_may_differ`: the op allows per-rank sizes (all_to_all).
  void agree(const char* op, c10d::OpType type, int64_t reduce_op, int64_t root, c10::ArrayRef<at::Tensor> tensors,
             bool sizes_may_differ = false);

  // Runs a reduction through `launch(widen)`. Float8 tensors reduce natively where the library
  // can (NCCL >= 2.24 under a torch that passes its FP8 types: tried once, remembered); otherwise
  // (Gloo, older NCCL or torch) `widen` makes the call reduce float32 copies and cast the result back.
  template <class Launch>
  c10::intrusive_ptr<c10d::Work> float8_aware(c10::ArrayRef<at::Tensor> tensors, const c10d::ReduceOp& reduce_op,
                                              Launch&& launch);

  // The library's options for a call: the caller's. NCCL (cuda driver) runs a synchronous
  // collective on the caller's current stream, the musa stream's CUDA stream, and hands back no
  // Work, as for cuda tensors: no internal stream, event or wait per call; in a coalescing block
  // too (NCCL's block then hands back none either). Gloo (host driver) runs a synchronous one its
  // own synchronous way, as for cpu tensors (forcing it asynchronous cost 8-10% at 1 MiB on 2
  // ranks); in a coalescing block (Gloo has none) its members run asynchronously and return their
  // Work, which the block's Work waits for.
  template <class Opts>
  Opts library_options(const Opts& opts) const;
  // How `call` gets its aliases (CollectiveCall::synchronous / borrow_aliases): from this group's
  // cache, except for an asynchronous call while a graph capture runs (its completion cannot be
  // polled then, so its aliases keep the musa memory alive themselves). In NCCL's coalescing
  // block it leaves its buffers and finishing steps to the block's end.
  void prepare(CollectiveCall& call, bool async_op);

  // The library's options for a reduction over `inputs`: the caller's, with a
  // reduce op the library has. `divides`: this rank's outputs hold the result
  // (for reduce, the root's only), so an AVG done as a SUM divides them.
  template <class Opts>
  Opts reduction_options(const Opts& opts, CollectiveCall& call, std::vector<at::Tensor>& inputs, const char* op,
                         bool bool_inputs, bool divides = true);

  c10::intrusive_ptr<c10d::Backend> library_;
  c10::intrusive_ptr<c10d::Backend> checker_;
  // This group's own store (set_store), where Gloo splits rendezvous.
  c10::intrusive_ptr<c10d::Store> store_;
  int64_t splits_ = 0;
  int64_t monitored_barriers_ = 0;  // names each monitored barrier's keys, alike on every rank
  bool gloo_;  // Gloo lacks AVG and PREMUL_SUM: they are done around a SUM
  // Between startCoalescing() and endCoalescing(); on Gloo, the Works the block's Work waits for.
  c10::intrusive_ptr<c10d::Work> track(c10::intrusive_ptr<c10d::Work> work);
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;
  // Aliases of the musa buffers this group's collectives run on, reused across calls.
  AliasCache aliases_;
  // NCCL: what a coalescing block's members leave to its end.
  BlockRest block_;
};

// A new Gloo backend over `store` (the factory torch_musa/distributed installs).
using LibraryFactory = c10::intrusive_ptr<c10d::Backend> (*)(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                             int size, std::chrono::milliseconds timeout);
void set_library_factory(LibraryFactory factory);
c10::intrusive_ptr<c10d::Backend> new_library(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              std::chrono::milliseconds timeout);

// Whether the NCCL torch runs has FP8 types (version >= 2.24): without them mccl reduces float8 as
// float32 (torch would pass float8 to an older NCCL as bytes).
void set_nccl_has_float8(bool has);

// Collectives whose tensors had to be staged (non-contiguous layouts the
// library cannot take), by op name.
std::map<std::string, int64_t> staged_counts();
void reset_staged_counts();
// Per collective: (calls, bytes of the tensors this rank contributed): what
// FP8 all-gather halves, counted where it happens.
std::map<std::string, std::pair<int64_t, int64_t>> sent_bytes();
void reset_sent_bytes();

}  // namespace torch_musa::distributed
