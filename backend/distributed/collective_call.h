// One mccl collective call: checks its musa tensors, aliases them as tensors
// of the driver's kernel device (CUDA for NCCL, CPU for Gloo) that keep the
// musa memory alive, stages the layouts the library cannot take, and runs the
// library's collective on the current musa stream.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <utility>
#include <vector>

namespace torch_musa::distributed {

// Data-movement collectives move bytes (any dtype goes, float8 included);
// reductions need a dtype the library can add.
enum class Movement { kData, kReduce };

class CollectiveCall {
 public:
  // `widen_float8`: a reduction's float8 tensors go to the library as float32 copies and the
  // results are cast back (libraries without FP8 reductions: Gloo, NCCL < 2.24).
  CollectiveCall(const char* op, Movement movement, int rank, c10d::OpType type, bool widen_float8 = false)
      : op_(op), movement_(movement), rank_(rank), type_(type), widen_float8_(widen_float8) {}

  const char* op() const { return op_; }
  c10d::OpType type() const { return type_; }

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

  // Runs `launch` (the library's collective over the aliases) and wraps its Work.
  c10::intrusive_ptr<c10d::Work> run(c10::function_ref<c10::intrusive_ptr<c10d::Work>()> launch);

 private:
  enum class Role { kIn, kInOut, kOut };
  at::Tensor alias(const at::Tensor& musa, Role role, bool writable);
  std::vector<at::Tensor> aliases(std::vector<at::Tensor>& tensors, Role role, bool writable);
  void check(const at::Tensor& t);
  at::ScalarType library_dtype(at::ScalarType dtype) const;

  const char* op_;
  Movement movement_;
  int rank_;
  c10d::OpType type_;
  bool widen_float8_;
  c10::DeviceIndex device_ = -1;
  double divide_by_ = 0;
  int64_t sent_bytes_ = 0;  // bytes of the tensors this rank contributes (inputs, in-out tensors)
  // Inline storage: most calls have one or two tensors, and these run on every latency-bound
  // collective (no heap allocation for them).
  c10::SmallVector<at::Tensor, 2> outputs_;     // the caller's musa tensors that receive results
  c10::SmallVector<at::Tensor, 2> written_;     // musa tensors the library writes (outputs or their staging)
  c10::SmallVector<at::Tensor, 4> keep_alive_;  // every musa tensor the call touches
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_back_;  // (original, staging): non-contiguous or widened outputs
};

}  // namespace torch_musa::distributed
