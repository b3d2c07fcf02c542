// Each collective: check and alias its musa tensors (collective_call.h), run
// the library's collective on the current musa stream and wrap the library's
// Work as an MCCLWork (a synchronous collective returns none).
#include "distributed/mccl_backend.h"

#include <ATen/Context.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <sstream>

#include "core/device.h"
#include "distributed/collective_call.h"
#include "distributed/mccl_work.h"
#include "graphs/capture_state.h"
#include "ops/kernel_device.h"

namespace torch_musa::distributed {

using c10d::OpType;
using c10d::ReduceOp;
using Works = c10::intrusive_ptr<c10d::Work>;

namespace {
LibraryFactory library_factory = nullptr;
}  // namespace

void set_library_factory(LibraryFactory factory) { library_factory = factory; }

c10::intrusive_ptr<c10d::Backend> new_library(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                              std::chrono::milliseconds timeout) {
  TORCH_CHECK(library_factory, "mccl: cannot make a Gloo group: torch_musa.distributed did not register its "
              "factory; import torch_musa before creating process groups");
  return library_factory(store, rank, size, timeout);
}

MCCLBackend::MCCLBackend(c10::intrusive_ptr<c10d::Backend> library, c10::intrusive_ptr<c10d::Backend> checker,
                         int rank, int size)
    : c10d::Backend(rank, size), library_(std::move(library)), checker_(std::move(checker)) {
  TORCH_CHECK(library_, "ProcessGroupMCCL needs the collective library's backend (ProcessGroupNCCL or Gloo)");
  gloo_ = library_->getBackendName() == "gloo";
  // ATen answers is_pinned() for the accelerator (musa) only once it counts it initialized. A CUDA
  // build pins memory with CUDA's allocator, which never initializes musa there, and DDP's reducer
  // asserts its pinned local-used map is pinned (find_unused_parameters, static_graph).
  at::globalContext().lazyInitDevice(c10::DeviceType::PrivateUse1);
}

namespace {

// Gloo has no AVG or PREMUL_SUM: the first is a SUM divided by the group size
// once the SUM is done, the second a SUM of the inputs scaled beforehand.
struct ReduceAdapter {
  ReduceOp op;
  double divide_by = 0;  // > 0: divide the outputs by this after the SUM
};

ReduceAdapter adapt_reduce(const ReduceOp& requested, bool gloo, int size, std::vector<at::Tensor>& inputs,
                           const char* op_name, bool bool_inputs) {
  ReduceAdapter a{requested};
  if (bool_inputs) {  // as NCCL: bool reduces as uint8, SUM is a logical or, PRODUCT a logical and
    TORCH_CHECK(requested.op_ == ReduceOp::SUM || requested.op_ == ReduceOp::PRODUCT ||
                    requested.op_ == ReduceOp::MIN || requested.op_ == ReduceOp::MAX,
                "mccl ", op_name, ": bool tensors reduce with SUM, PRODUCT, MIN or MAX only; "
                "convert to an integer or float dtype for other ops");
    if (requested.op_ == ReduceOp::SUM) a.op = ReduceOp(ReduceOp::MAX);
    if (requested.op_ == ReduceOp::PRODUCT) a.op = ReduceOp(ReduceOp::MIN);
    return a;
  }
  if (!gloo) return a;
  if (requested.op_ == ReduceOp::AVG) {
    for (auto& t : inputs)
      TORCH_CHECK(at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()), "mccl ", op_name,
                  ": ReduceOp.AVG needs floating-point tensors (got ", t.scalar_type(),
                  "); use SUM and divide, as NCCL requires too");
    a.op = ReduceOp(ReduceOp::SUM);
    a.divide_by = size;
  } else if (requested.op_ == ReduceOp::PREMUL_SUM) {
    auto* s = dynamic_cast<c10d::NCCLPreMulSumSupplement*>(requested.supplement_.get());
    TORCH_CHECK(s, "mccl ", op_name, ": PREMUL_SUM without a factor");
    for (auto& t : inputs) {
      if (s->tensor_factor.defined()) t.mul_(s->tensor_factor.to(t.device()));
      else t.mul_(s->double_factor);
    }
    a.op = ReduceOp(ReduceOp::SUM);
  }
  return a;
}

bool any_bool(const std::vector<at::Tensor>& ts) {
  for (auto& t : ts)
    if (t.scalar_type() == at::kBool) return true;
  return false;
}

constexpr int kSignatureLength = 7;

std::string describe(const int64_t* v) {
  std::ostringstream os;
  os << c10d::opTypeToString(static_cast<c10d::OpType>(v[0]));
  if (v[3] >= 0) os << " of " << v[4] << " " << c10::toString(static_cast<at::ScalarType>(v[3])) << " tensor(s)";
  if (v[3] == -2) os << " with a tensor that is not on musa";
  if (v[5] >= 0) os << " with " << v[5] << " elements";
  static const char* const kOps[] = {"SUM", "AVG", "PRODUCT", "MIN", "MAX", "BAND", "BOR", "BXOR", "PREMUL_SUM"};
  if (v[1] >= 0) os << ", ReduceOp." << (v[1] < 9 ? kOps[v[1]] : "UNUSED");
  if (v[2] >= 0) os << ", root " << v[2];
  return os.str();
}

}  // namespace

// (Before torch 2.8 NCCL ignored asyncOp=false; since then its synchronous collectives return
// no Work, which CollectiveCall::run hands on as torch does.)
template <class Opts>
Opts MCCLBackend::library_options(const Opts& opts) const {
  Opts o = opts;
  if (coalescing_ && gloo_) o.asyncOp = true;  // (the block's end waits for its members' Works)
  return o;
}

void MCCLBackend::prepare(CollectiveCall& call, bool async_op) {
  if (!async_op && !(coalescing_ && gloo_)) call.synchronous(&aliases_);
  else if (!graphs::any_capture_underway()) call.borrow_aliases(&aliases_);
  if (coalescing_ && !gloo_) call.in_block(&block_);
}

template <class Opts>
Opts MCCLBackend::reduction_options(const Opts& opts, CollectiveCall& call, std::vector<at::Tensor>& inputs,
                                    const char* op, bool bool_inputs, bool divides) {
  Opts o = library_options(opts);
  ReduceAdapter adapter = adapt_reduce(opts.reduceOp, gloo_, getSize(), inputs, op, bool_inputs);
  o.reduceOp = adapter.op;
  if (divides) call.divide_outputs_by(adapter.divide_by);
  return o;
}

namespace {
static_assert(static_cast<int>(at::ScalarType::NumOptions) <= 64, "dtype masks need a wider type");
constexpr uint64_t bit(at::ScalarType t) { return uint64_t{1} << static_cast<int>(t); }
// (One mask test per tensor: this runs on every reduction.)
bool any_of_dtypes(c10::ArrayRef<at::Tensor> ts, uint64_t dtypes) {
  for (auto& t : ts)
    if (t.defined() && (bit(t.scalar_type()) & dtypes) != 0) return true;
  return false;
}
// Whether the NCCL backend of this torch reduces float8 itself, per reduce op: kUnknown, kNo,
// kYes. NCCL has FP8 types from 2.24 (set_nccl_has_float8); torch hands them over for
// e4m3fn/e5m2 when built with them, and refuses float8 reductions before it enqueues anything
// where it does not. NCCL may take some ops and not others (seen on the H200, NCCL 2.28: one
// float8 reduction taken, a later one refused with "invalid argument"), so each op learns its own.
enum Float8Support : int { kUnknown = 0, kNo = 1, kYes = 2 };
constexpr size_t kReduceOps = 16;
std::atomic<int> nccl_reduces_float8[kReduceOps];  // static storage: zero, kUnknown
}  // namespace

void set_nccl_has_float8(bool has) {
  for (auto& s : nccl_reduces_float8) s.store(has ? kUnknown : kNo);
}

template <class Launch>
Works MCCLBackend::float8_aware(c10::ArrayRef<at::Tensor> tensors, const ReduceOp& reduce_op, Launch&& launch) {
  using at::ScalarType;
  constexpr uint64_t fnuz_types = bit(ScalarType::Float8_e4m3fnuz) | bit(ScalarType::Float8_e5m2fnuz);
  if (!any_of_dtypes(tensors, bit(ScalarType::Float8_e4m3fn) | bit(ScalarType::Float8_e5m2) | fnuz_types))
    return launch(false);
  // Gloo has no float8; NCCL has no "fnuz" formats (torch passes those as bytes).
  bool fnuz = any_of_dtypes(tensors, fnuz_types);
  if (gloo_ || fnuz) return launch(true);
  // Widening casts the result back when the Work completes; NCCL's coalesced block completes as one
  // Work, which does not run its members' casts.
  auto widened = [&] {
    TORCH_CHECK(!coalescing_, "mccl: float8 reductions inside a coalescing block need NCCL's own FP8 "
                "reductions (NCCL >= 2.24 under a torch that hands them over) for this reduce op, which this "
                "process lacks; run them outside the block, or upcast to bfloat16/float32");
    return launch(true);
  };
  auto& known = nccl_reduces_float8[static_cast<size_t>(reduce_op.op_) % kReduceOps];
  if (known.load() == kNo) return widened();
  if (known.load() == kYes) return launch(false);
  try {
    auto work = launch(false);
    known.store(kYes);
    return work;
  } catch (const c10::Error& e) {
    // torch refuses (its "Float8" check) or NCCL does (ncclInvalidArgument, checked before NCCL
    // enqueues anything): widen this op from now on.
    std::string what = e.what_without_backtrace();
    if (what.find("Float8") == std::string::npos && what.find("float8") == std::string::npos &&
        what.find("ncclInvalidArgument") == std::string::npos)
      throw;
    known.store(kNo);
  }
  return widened();
}

void MCCLBackend::agree(const char* op, OpType type, int64_t reduce_op, int64_t root,
                        c10::ArrayRef<at::Tensor> tensors, bool sizes_may_differ) {
  if (!checker_ || getSize() == 1) return;
  int64_t numel = 0, shape_hash = 0;
  for (const auto& t : tensors) {
    numel += t.numel();
    for (auto d : t.sizes()) shape_hash = shape_hash * 1000003 + d;
    shape_hash = shape_hash * 31 + static_cast<int64_t>(t.scalar_type());
  }
  int64_t dtype = tensors.empty() ? -1 : static_cast<int64_t>(tensors[0].scalar_type());
  // A rank with a tensor mccl cannot take still joins the exchange, with a
  // signature no other rank has: the others fail now instead of waiting for a
  // collective it will not run, and it reports its own error (CollectiveCall).
  bool unusable = false;
  for (const auto& t : tensors)
    if (!t.defined() || t.device().type() != c10::DeviceType::PrivateUse1) unusable = true;
  if (unusable) dtype = -2;
  std::vector<int64_t> mine{static_cast<int64_t>(type), reduce_op, root, dtype,
                            static_cast<int64_t>(tensors.size()), sizes_may_differ ? -1 : numel,
                            sizes_may_differ ? 0 : shape_hash};
  auto opts = at::TensorOptions().dtype(at::kLong);
  at::Tensor in = at::empty({kSignatureLength}, opts);
  std::copy(mine.begin(), mine.end(), in.data_ptr<int64_t>());
  std::vector<at::Tensor> inputs{in};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int r = 0; r < getSize(); ++r) outputs[0].push_back(at::empty({kSignatureLength}, opts));
  checker_->allgather(outputs, inputs)->wait();
  if (unusable) return;
  for (int r = 0; r < getSize(); ++r) {
    const int64_t* theirs = outputs[0][r].data_ptr<int64_t>();
    TORCH_CHECK(std::equal(mine.begin(), mine.end(), theirs), "mccl ", op, ": the ranks called different "
                "collectives: rank ", getRank(), " called ", describe(mine.data()), " but rank ", r, " called ",
                describe(theirs), ". Every rank of the group must call the same collectives in the same order, with "
                "the same dtypes and sizes. (Checked before the collective runs; TORCH_MCCL_CHECK_COLLECTIVES=0 turns "
                "the check off.)");
  }
}

Works MCCLBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  CollectiveCall call("broadcast", Movement::kData, getRank(), OpType::BROADCAST);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, opts.rootRank, tensors);
  auto a = call.inout(tensors);
  return track(call.run([&] { return library_->broadcast(a, library_options(opts)); }));
}

Works MCCLBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  agree("all_reduce", OpType::ALLREDUCE, opts.reduceOp.op_, -1, tensors);
  return float8_aware(tensors, opts.reduceOp, [&](bool widen) {
    CollectiveCall call("all_reduce", Movement::kReduce, getRank(), OpType::ALLREDUCE, widen);
    prepare(call, opts.asyncOp);
    auto a = call.inout(tensors);
    auto o = reduction_options(opts, call, a, "all_reduce", any_bool(tensors));
    return track(call.run([&] { return library_->allreduce(a, o); }));
  });
}

Works MCCLBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  agree("allreduce_coalesced", OpType::ALLREDUCE_COALESCED, opts.reduceOp.op_, -1, tensors);
  return float8_aware(tensors, opts.reduceOp, [&](bool widen) {
    CollectiveCall call("allreduce_coalesced", Movement::kReduce, getRank(), OpType::ALLREDUCE_COALESCED, widen);
    prepare(call, opts.asyncOp);
    auto a = call.inout(tensors);
    auto o = reduction_options(opts, call, a, "allreduce_coalesced", any_bool(tensors));
    return track(call.run([&] { return library_->allreduce_coalesced(a, o); }));
  });
}

Works MCCLBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  agree("reduce", OpType::REDUCE, opts.reduceOp.op_, opts.rootRank, tensors);
  bool root = getRank() == opts.rootRank;
  return float8_aware(tensors, opts.reduceOp, [&](bool widen) {
    CollectiveCall call("reduce", Movement::kReduce, getRank(), OpType::REDUCE, widen);
    prepare(call, opts.asyncOp);
    // Gloo's reduce leaves partial results in every rank's buffer (and its PREMUL_SUM scales the
    // inputs first): off the root the library gets a private copy, so the caller's input stays as
    // it was. NCCL writes the root's buffer only.
    auto a = gloo_ && !root ? call.in(tensors, /*writable=*/true) : call.inout(tensors);
    auto o = reduction_options(opts, call, a, "reduce", any_bool(tensors), /*divides=*/root);
    return track(call.run([&] { return library_->reduce(a, o); }));
  });
}

Works MCCLBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                             const c10d::AllgatherOptions& opts) {
  CollectiveCall call("all_gather", Movement::kData, getRank(), OpType::ALLGATHER);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, -1, inputs);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return track(call.run([&] { return library_->allgather(out, in, library_options(opts)); }));
}

Works MCCLBackend::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  CollectiveCall call("all_gather_into_tensor", Movement::kData, getRank(), OpType::_ALLGATHER_BASE);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, -1, input);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "mccl all_gather_into_tensor: the output has ",
              output.numel(), " elements; it needs input.numel() * world_size = ", input.numel() * getSize());
  // Ranks' shares are consecutive runs of the output's elements whatever its shape (NCCL's
  // contract; SyncBatchNorm gathers into a [1, n * world] buffer). Gloo splits the output along
  // dim 0, so it gets both buffers as 1-D aliases; NCCL takes them as they are.
  if (gloo_) call.flatten();
  auto in = call.in(input);
  auto out = call.out(output);
  return track(call.run([&] { return library_->_allgather_base(out, in, library_options(opts)); }));
}

Works MCCLBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                       std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  CollectiveCall call("allgather_coalesced", Movement::kData, getRank(), OpType::ALLGATHER_COALESCED);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, -1, inputs);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return track(call.run([&] { return library_->allgather_coalesced(out, in, library_options(opts)); }));
}

Works MCCLBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                   const c10d::AllgatherOptions& opts) {
  CollectiveCall call("allgather_into_tensor_coalesced", Movement::kData, getRank(), OpType::COALESCED);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, -1, inputs);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return track(call.run([&] { return library_->allgather_into_tensor_coalesced(out, in, library_options(opts)); }));
}

Works MCCLBackend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                          const c10d::GatherOptions& opts) {
  CollectiveCall call("gather", Movement::kData, getRank(), OpType::GATHER);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, opts.rootRank, inputs);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return track(call.run([&] { return library_->gather(out, in, library_options(opts)); }));
}

Works MCCLBackend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                           const c10d::ScatterOptions& opts) {
  CollectiveCall call("scatter", Movement::kData, getRank(), OpType::SCATTER);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, opts.rootRank, outputs);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return track(call.run([&] { return library_->scatter(out, in, library_options(opts)); }));
}

Works MCCLBackend::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ReduceScatterOptions& opts) {
  agree("reduce_scatter", OpType::REDUCE_SCATTER, opts.reduceOp.op_, -1, outputs);
  return float8_aware(outputs, opts.reduceOp, [&](bool widen) {
    CollectiveCall call("reduce_scatter", Movement::kReduce, getRank(), OpType::REDUCE_SCATTER, widen);
    prepare(call, opts.asyncOp);
    auto out = call.out(outputs);
    // Gloo's scaling for PREMUL_SUM must not touch the caller's inputs: they are staged.
    auto in = call.in(inputs, /*writable=*/gloo_ && opts.reduceOp.op_ == ReduceOp::PREMUL_SUM);
    std::vector<at::Tensor> flat;
    for (auto& l : in) flat.insert(flat.end(), l.begin(), l.end());
    auto o = reduction_options(opts, call, flat, "reduce_scatter", any_bool(outputs));
    return track(call.run([&] { return library_->reduce_scatter(out, in, o); }));
  });
}

Works MCCLBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  agree("reduce_scatter_tensor", OpType::_REDUCE_SCATTER_BASE, opts.reduceOp.op_, -1, output);
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "mccl reduce_scatter_tensor: the input has ",
              input.numel(), " elements; it needs output.numel() * world_size = ", output.numel() * getSize());
  return float8_aware(output, opts.reduceOp, [&](bool widen) {
    CollectiveCall call("reduce_scatter_tensor", Movement::kReduce, getRank(), OpType::_REDUCE_SCATTER_BASE, widen);
    prepare(call, opts.asyncOp);
    auto out = call.out(output);
    auto in = call.in(input, /*writable=*/gloo_ && opts.reduceOp.op_ == ReduceOp::PREMUL_SUM);
    std::vector<at::Tensor> flat{in};
    auto o = reduction_options(opts, call, flat, "reduce_scatter_tensor", output.scalar_type() == at::kBool);
    return track(call.run([&] { return library_->_reduce_scatter_base(out, in, o); }));
  });
}

Works MCCLBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                   const c10d::ReduceScatterOptions& opts) {
  agree("reduce_scatter_tensor_coalesced", OpType::COALESCED, opts.reduceOp.op_, -1, outputs);
  return float8_aware(outputs, opts.reduceOp, [&](bool widen) {
    CollectiveCall call("reduce_scatter_tensor_coalesced", Movement::kReduce, getRank(), OpType::COALESCED, widen);
    prepare(call, opts.asyncOp);
    auto out = call.out(outputs);
    auto in = call.in(inputs, /*writable=*/gloo_ && opts.reduceOp.op_ == ReduceOp::PREMUL_SUM);
    auto o = reduction_options(opts, call, in, "reduce_scatter_tensor_coalesced", any_bool(outputs));
    return track(call.run([&] { return library_->reduce_scatter_tensor_coalesced(out, in, o); }));
  });
}

Works MCCLBackend::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
                                 std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  CollectiveCall call("all_to_all_single", Movement::kData, getRank(), OpType::ALLTOALL_BASE);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, -1, input, /*sizes_may_differ=*/true);
  auto in = call.in(input);
  auto out = call.out(output);
  return track(call.run([&] { return library_->alltoall_base(out, in, output_split_sizes, input_split_sizes, library_options(opts)); }));
}

Works MCCLBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                            const c10d::AllToAllOptions& opts) {
  CollectiveCall call("all_to_all", Movement::kData, getRank(), OpType::ALLTOALL);
  prepare(call, opts.asyncOp);
  agree(call.op(), call.type(), -1, -1, inputs, /*sizes_may_differ=*/true);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return track(call.run([&] { return library_->alltoall(out, in, library_options(opts)); }));
}

Works MCCLBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  CollectiveCall call("send", Movement::kData, getRank(), OpType::SEND);
  auto in = call.in(tensors);
  return track(call.run([&] { return library_->send(in, dst_rank, tag); }));
}

Works MCCLBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  CollectiveCall call("recv", Movement::kData, getRank(), OpType::RECV);
  auto out = call.out(tensors);
  return track(call.run([&] { return library_->recv(out, src_rank, tag); }));
}

Works MCCLBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  CollectiveCall call("recv", Movement::kData, getRank(), OpType::RECVANYSOURCE);
  auto out = call.out(tensors);
  return track(call.run([&] { return library_->recvAnysource(out, tag); }));
}

Works MCCLBackend::barrier(const c10d::BarrierOptions& opts) {
  CollectiveCall call("barrier", Movement::kData, getRank(), OpType::BARRIER);
  agree(call.op(), call.type(), -1, -1, {});
  auto o = library_options(opts);
  o.asyncOp = true;  // NCCL's barrier synchronizes the device through its Work's wait()
  if (o.device && o.device->type() == c10::DeviceType::PrivateUse1) {
    call.use_device(o.device->index());
    o.device = kernel_device().device_for(o.device->index());
  } else if (!gloo_) {
    call.use_device(current_device());  // NCCL's barrier is an all_reduce on the current device
    o.device = kernel_device().device_for(current_device());
  }
  if (gloo_) o.device.reset();
  return track(call.run([&] { return library_->barrier(o); }));
}

// torch.distributed.monitored_barrier() on an mccl group (torch_musa/gates/c10d.py routes it
// here): as Gloo's, rank 0 waits for every other rank within the timeout and names the ones
// that did not come, then releases them. It runs on the group's store, mccl's CPU side channel,
// so it works on both drivers and makes no connections of its own.
void MCCLBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  TORCH_CHECK(store_, "mccl monitored_barrier: this group has no store; create it with "
              "torch.distributed.init_process_group / new_group");
  using namespace std::chrono;
  auto timeout = opts.timeout == c10d::kUnsetTimeout ? ::kBackendDefaultTimeout : opts.timeout;
  std::string base = "monitored_barrier/" + std::to_string(monitored_barriers_++) + "/";
  auto ms = std::to_string(timeout.count());
  if (getRank() != 0) {
    store_->set(base + std::to_string(getRank()), std::vector<uint8_t>{1});
    try {
      store_->wait({base + "done"}, timeout);
    } catch (const c10::Error&) {
      TORCH_CHECK(false, "mccl monitored_barrier: rank ", getRank(), " reached the barrier but rank 0 did not "
                  "release it within ", ms, " ms: another rank did not reach it (rank 0's error names it)");
    }
    return;
  }
  auto deadline = steady_clock::now() + timeout;
  std::vector<int> missing;
  for (int r = 1; r < getSize(); ++r) {
    std::string key = base + std::to_string(r);
    auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
    bool came = false;
    if (left.count() > 0) {
      try {
        store_->wait({key}, left);
        came = true;
      } catch (const c10::Error&) {
      }
    } else {
      came = store_->check({key});
    }
    if (!came) {
      missing.push_back(r);
      if (!wait_all_ranks) break;
    } else {
      store_->deleteKey(key);
    }
  }
  if (!missing.empty()) {
    std::ostringstream names;
    for (size_t i = 0; i < missing.size(); ++i) names << (i ? ", " : "") << missing[i];
    TORCH_CHECK(false, "mccl monitored_barrier: ", missing.size() == 1 ? "Rank " : "Ranks ", names.str(),
                " failed to pass monitoredBarrier in ", ms, " ms",
                wait_all_ranks ? "" : " (the first rank found missing; wait_all_ranks=True lists every one)");
  }
  store_->set(base + "done", std::vector<uint8_t>{1});
}

// NCCL groups coalesced collectives itself. Gloo has no coalescing: its
// collectives run as they come, and the Work of the block waits for them all.
void MCCLBackend::startCoalescing() {
  TORCH_CHECK(!coalescing_, "mccl: startCoalescing() called twice without endCoalescing()");
  coalescing_ = true;
  coalesced_.clear();
  block_ = BlockRest{};
  if (!gloo_) library_->startCoalescing();
}

Works MCCLBackend::endCoalescing() {
  TORCH_CHECK(coalescing_, "mccl: endCoalescing() without startCoalescing()");
  coalescing_ = false;
  if (!gloo_) {
    CollectiveCall call("coalesced", Movement::kData, getRank(), OpType::COALESCED);
    call.use_device(current_device());
    call.end_block(std::move(block_));
    block_ = BlockRest{};
    return call.run([&] { return library_->endCoalescing(); });
  }
  return c10::make_intrusive<CoalescedWork>(std::move(coalesced_), current_device(), getRank());
}

Works MCCLBackend::track(Works work) {
  if (coalescing_ && gloo_) coalesced_.push_back(work);
  return work;
}

c10::intrusive_ptr<c10d::Backend> MCCLBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  // Every rank of this group takes part in each split, members or not, so
  // the count names the split the same everywhere.
  std::string name = "mccl_split/" + std::to_string(splits_++) + "/";
  for (int r : ranks) name += std::to_string(r) + ",";
  auto at = std::find(ranks.begin(), ranks.end(), getRank());
  if (at == ranks.end()) {
    if (!gloo_) library_->split(store, ranks, opts);  // NCCL's split is collective over the parent
    return nullptr;                                  // this rank is not in the new group
  }
  int rank = static_cast<int>(at - ranks.begin());
  int size = static_cast<int>(ranks.size());
  // NCCL splits its communicator. Gloo's groups are independent: a new one
  // (made in Python, where ProcessGroupGloo is reachable), rendezvousing
  // through this group's own store under the split's name: the store torch
  // hands in is prefixed with a group name that need not agree across ranks.
  auto base = store_ ? store_ : store;
  auto keys = [&](const char* what) { return c10::make_intrusive<c10d::PrefixStore>(name + what, base); };
  auto sub = gloo_ ? new_library(keys("mccl"), rank, size, opts->timeout) : library_->split(store, ranks, opts);
  c10::intrusive_ptr<c10d::Backend> sub_checker;
  if (checker_ && size > 1) sub_checker = new_library(keys("check"), rank, size, opts->timeout);
  auto split = c10::make_intrusive<MCCLBackend>(sub, sub_checker, rank, size);
  split->store_ = keys("sub");
  return split;
}

void MCCLBackend::setGroupUid(const std::string& pg_uid) {
  c10d::Backend::setGroupUid(pg_uid);
  library_->setGroupUid(pg_uid);
}

void MCCLBackend::eagerConnectSingleDevice(at::Device device) {
  if (device.type() != c10::DeviceType::PrivateUse1) return library_->eagerConnectSingleDevice(device);
  KernelScope scope(kernel_device(), device.index());
  library_->eagerConnectSingleDevice(kernel_device().device_for(device.index()));
}

}  // namespace torch_musa::distributed
