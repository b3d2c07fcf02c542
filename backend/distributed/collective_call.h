// One mccl collective call: checks its musa tensors, aliases them as tensors
// of the driver's kernel device (CUDA for NCCL, CPU for Gloo), stages the
// layouts the library cannot take, runs the library's collective on the
// current musa stream, and keeps the musa memory alive while the library may
// still use it.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <functional>
#include <vector>

#include "distributed/mccl_work.h"

namespace torch_musa::distributed {

class AliasCache;

// What the members of NCCL's coalescing block leave to the block's end: their buffers, kept until
// the block's collectives are done, and what runs then (copies back into staged outputs).
struct BlockRest {
  CallBuffers buffers;
  std::function<void()> finish;
};

// Data-movement collectives move bytes (any dtype goes, float8 included);
// reductions need a dtype the library can add.
enum class Movement { kData, kReduce };

class CollectiveCall {
 public:
  // `widen_float8`: a reduction's float8 tensors go to the library as float32 copies and the
  // results are cast back (libraries without FP8 reductions: Gloo, NCCL < 2.24).
  CollectiveCall(const char* op, Movement movement, int rank, c10d::OpType type, bool widen_float8 = false)
      : op_(op), movement_(movement), rank_(rank), type_(type), widen_float8_(widen_float8) {}
  ~CollectiveCall() { release_cache(); }
  CollectiveCall(const CollectiveCall&) = delete;
  CollectiveCall& operator=(const CollectiveCall&) = delete;

  const char* op() const { return op_; }
  c10d::OpType type() const { return type_; }

  // How the call's plain aliases (contiguous, no copy) are had; call before aliasing. By
  // default each is built for the call and keeps the musa memory alive (the library may hold it
  // past the call). synchronous(): the call hands back no Work (NCCL runs it on the current
  // stream; Gloo's Work is waited for in run()), so nothing holds its aliases once run()
  // returns: they come from `cache` (the group's). borrow_aliases(): an asynchronous call whose
  // aliases come from `cache` too; its MCCLWork keeps the musa memory alive instead (see
  // MCCLWork's `borrowed`).
  void synchronous(AliasCache* cache) {
    sync_ = true;
    cache_ = cache;
  }
  void borrow_aliases(AliasCache* cache) { cache_ = cache; }
  // A member of NCCL's coalescing block, which runs at the block's end: the call leaves its
  // buffers and what runs once it is done to `block`, for the block's end to take (end_block()).
  void in_block(BlockRest* block) { block_ = block; }
  // The end of NCCL's coalescing block: the call (Work) keeps the members' buffers, results of
  // none, and finishes them.
  void end_block(BlockRest rest);

  // Tensors the collective reads and writes in place (all_reduce, broadcast).
  std::vector<at::Tensor> inout(std::vector<at::Tensor>& tensors);
  // Tensors it only reads; `writable` gives the library a private copy it may change.
  at::Tensor in(at::Tensor& tensor, bool writable = false);
  std::vector<at::Tensor> in(std::vector<at::Tensor>& tensors, bool writable = false);
  std::vector<std::vector<at::Tensor>> in(std::vector<std::vector<at::Tensor>>& lists, bool writable = false);
  // Tensors it only writes.
  at::Tensor out(at::Tensor& tensor);
  std::vector<at::Tensor> out(std::vector<at::Tensor>& tensors);
  std::vector<std::vector<at::Tensor>> out(std::vector<std::vector<at::Tensor>>& lists);

  // After completion, divide what the library wrote by `d` (an AVG done as a SUM); 0: nothing.
  void divide_outputs_by(double d) { divide_by_ = d; }
  // The musa device of a call without tensors (barrier).
  void use_device(c10::DeviceIndex device) { device_ = device; }
  // The library gets its tensors as 1-D (a view is a dispatcher call each, with autograd's view
  // bookkeeping, paid on every call of a latency-bound collective).
  void flatten() { flat_ = true; }

  // Runs `launch` (the library's collective over the aliases) and wraps its Work (none for a
  // synchronous call).
  c10::intrusive_ptr<c10d::Work> run(c10::function_ref<c10::intrusive_ptr<c10d::Work>()> launch);

 private:
  enum class Role { kIn, kInOut, kOut };
  at::Tensor alias(const at::Tensor& musa, Role role, bool writable);
  std::vector<at::Tensor> aliases(std::vector<at::Tensor>& tensors, Role role, bool writable);
  void check(const at::Tensor& t);
  at::ScalarType library_dtype(at::ScalarType dtype) const;
  // What runs once the library is done: an AVG's division, copies back from staged outputs.
  std::function<void()> finish() const;
  // The group's cache for this call's plain aliases, taken at the first one (null: none, or
  // another call has it) and given back once the call has its aliases.
  AliasCache* cache();
  void release_cache();

  const char* op_;
  Movement movement_;
  int rank_;
  c10d::OpType type_;
  bool widen_float8_;
  c10::DeviceIndex device_ = -1;
  double divide_by_ = 0;
  int64_t sent_bytes_ = 0;  // bytes of the tensors this rank contributes (inputs, in-out tensors)
  bool sync_ = false;
  AliasCache* cache_ = nullptr;
  bool cache_held_ = false;
  BlockRest* block_ = nullptr;
  bool copies_back_ = false;  // an output is a staged or widened copy
  bool flat_ = false;
  bool borrowed_ = false;  // end_block(): the buffers are members' whose aliases are borrowed
  std::function<void()> block_finish_;  // end_block(): the members' finishing steps
  CallBuffers buffers_;  // every musa tensor the call touches, in call order
};

}  // namespace torch_musa::distributed
