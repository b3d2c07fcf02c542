// Each collective: check and alias its musa tensors (call.h), run the
// library's collective inside a KernelScope -- so on the cuda driver the
// library orders its internal stream after the current musa stream -- and
// wrap the library's Work as an MCCLWork.
#include "distributed/mccl_backend.h"

#include <ATen/ops/empty.h>

#include "core/device.h"
#include "distributed/collective_call.h"
#include "distributed/mccl_work.h"
#include "ops/kernel_device.h"

namespace torch_musa::distributed {

using c10d::OpType;
using c10d::ReduceOp;
using Works = c10::intrusive_ptr<c10d::Work>;

MCCLBackend::MCCLBackend(c10::intrusive_ptr<c10d::Backend> library, int rank, int size)
    : c10d::Backend(rank, size), library_(std::move(library)) {
  TORCH_CHECK(library_, "ProcessGroupMCCL needs the collective library's backend (ProcessGroupNCCL or Gloo)");
  gloo_ = library_->getBackendName() == "gloo";
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

}  // namespace

Works MCCLBackend::broadcast(std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) {
  CollectiveCall call("broadcast", Movement::kData, getRank(), OpType::BROADCAST);
  auto a = call.inout(tensors);
  return call.run([&] { return library_->broadcast(a, opts); });
}

Works MCCLBackend::allreduce(std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  CollectiveCall call("all_reduce", Movement::kReduce, getRank(), OpType::ALLREDUCE);
  auto a = call.inout(tensors);
  c10d::AllreduceOptions o = opts;
  auto adapter = adapt_reduce(opts.reduceOp, gloo_, getSize(), a, "all_reduce", any_bool(tensors));
  o.reduceOp = adapter.op;
  call.divide_outputs_by(adapter.divide_by);
  return call.run([&] { return library_->allreduce(a, o); });
}

Works MCCLBackend::allreduce_coalesced(std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  CollectiveCall call("allreduce_coalesced", Movement::kReduce, getRank(), OpType::ALLREDUCE_COALESCED);
  auto a = call.inout(tensors);
  c10d::AllreduceCoalescedOptions o = opts;
  auto adapter = adapt_reduce(opts.reduceOp, gloo_, getSize(), a, "allreduce_coalesced", any_bool(tensors));
  o.reduceOp = adapter.op;
  call.divide_outputs_by(adapter.divide_by);
  return call.run([&] { return library_->allreduce_coalesced(a, o); });
}

Works MCCLBackend::reduce(std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) {
  CollectiveCall call("reduce", Movement::kReduce, getRank(), OpType::REDUCE);
  auto a = call.inout(tensors);
  c10d::ReduceOptions o = opts;
  auto adapter = adapt_reduce(opts.reduceOp, gloo_, getSize(), a, "reduce", any_bool(tensors));
  o.reduceOp = adapter.op;
  if (getRank() == opts.rootRank) call.divide_outputs_by(adapter.divide_by);
  return call.run([&] { return library_->reduce(a, o); });
}

Works MCCLBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                             const c10d::AllgatherOptions& opts) {
  CollectiveCall call("all_gather", Movement::kData, getRank(), OpType::ALLGATHER);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return call.run([&] { return library_->allgather(out, in, opts); });
}

Works MCCLBackend::_allgather_base(at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  CollectiveCall call("all_gather_into_tensor", Movement::kData, getRank(), OpType::_ALLGATHER_BASE);
  TORCH_CHECK(output.numel() == input.numel() * getSize(), "mccl all_gather_into_tensor: the output has ",
              output.numel(), " elements; it needs input.numel() * world_size = ", input.numel() * getSize());
  auto in = call.in(input);
  auto out = call.out(output);
  return call.run([&] { return library_->_allgather_base(out, in, opts); });
}

Works MCCLBackend::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                       std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  CollectiveCall call("allgather_coalesced", Movement::kData, getRank(), OpType::ALLGATHER_COALESCED);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return call.run([&] { return library_->allgather_coalesced(out, in, opts); });
}

Works MCCLBackend::allgather_into_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                   const c10d::AllgatherOptions& opts) {
  CollectiveCall call("allgather_into_tensor_coalesced", Movement::kData, getRank(), OpType::COALESCED);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return call.run([&] { return library_->allgather_into_tensor_coalesced(out, in, opts); });
}

Works MCCLBackend::gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                          const c10d::GatherOptions& opts) {
  CollectiveCall call("gather", Movement::kData, getRank(), OpType::GATHER);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return call.run([&] { return library_->gather(out, in, opts); });
}

Works MCCLBackend::scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                           const c10d::ScatterOptions& opts) {
  CollectiveCall call("scatter", Movement::kData, getRank(), OpType::SCATTER);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return call.run([&] { return library_->scatter(out, in, opts); });
}

Works MCCLBackend::reduce_scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                  const c10d::ReduceScatterOptions& opts) {
  CollectiveCall call("reduce_scatter", Movement::kReduce, getRank(), OpType::REDUCE_SCATTER);
  auto out = call.out(outputs);
  // Gloo's scaling for PREMUL_SUM must not touch the caller's inputs: they are staged.
  auto in = call.in(inputs, /*writable=*/gloo_ && opts.reduceOp.op_ == ReduceOp::PREMUL_SUM);
  c10d::ReduceScatterOptions o = opts;
  std::vector<at::Tensor> flat;
  for (auto& l : in) flat.insert(flat.end(), l.begin(), l.end());
  auto adapter = adapt_reduce(opts.reduceOp, gloo_, getSize(), flat, "reduce_scatter", any_bool(outputs));
  o.reduceOp = adapter.op;
  call.divide_outputs_by(adapter.divide_by);
  return call.run([&] { return library_->reduce_scatter(out, in, o); });
}

Works MCCLBackend::_reduce_scatter_base(at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CollectiveCall call("reduce_scatter_tensor", Movement::kReduce, getRank(), OpType::_REDUCE_SCATTER_BASE);
  TORCH_CHECK(input.numel() == output.numel() * getSize(), "mccl reduce_scatter_tensor: the input has ",
              input.numel(), " elements; it needs output.numel() * world_size = ", output.numel() * getSize());
  auto out = call.out(output);
  auto in = call.in(input, /*writable=*/gloo_ && opts.reduceOp.op_ == ReduceOp::PREMUL_SUM);
  c10d::ReduceScatterOptions o = opts;
  std::vector<at::Tensor> flat{in};
  auto adapter = adapt_reduce(opts.reduceOp, gloo_, getSize(), flat, "reduce_scatter_tensor",
                              output.scalar_type() == at::kBool);
  o.reduceOp = adapter.op;
  call.divide_outputs_by(adapter.divide_by);
  return call.run([&] { return library_->_reduce_scatter_base(out, in, o); });
}

Works MCCLBackend::reduce_scatter_tensor_coalesced(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                                   const c10d::ReduceScatterOptions& opts) {
  CollectiveCall call("reduce_scatter_tensor_coalesced", Movement::kReduce, getRank(), OpType::COALESCED);
  auto out = call.out(outputs);
  auto in = call.in(inputs, /*writable=*/gloo_ && opts.reduceOp.op_ == ReduceOp::PREMUL_SUM);
  c10d::ReduceScatterOptions o = opts;
  auto adapter = adapt_reduce(opts.reduceOp, gloo_, getSize(), in, "reduce_scatter_tensor_coalesced", any_bool(outputs));
  o.reduceOp = adapter.op;
  call.divide_outputs_by(adapter.divide_by);
  return call.run([&] { return library_->reduce_scatter_tensor_coalesced(out, in, o); });
}

Works MCCLBackend::alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
                                 std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  CollectiveCall call("all_to_all_single", Movement::kData, getRank(), OpType::ALLTOALL_BASE);
  auto in = call.in(input);
  auto out = call.out(output);
  return call.run([&] { return library_->alltoall_base(out, in, output_split_sizes, input_split_sizes, opts); });
}

Works MCCLBackend::alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                            const c10d::AllToAllOptions& opts) {
  CollectiveCall call("all_to_all", Movement::kData, getRank(), OpType::ALLTOALL);
  auto in = call.in(inputs);
  auto out = call.out(outputs);
  return call.run([&] { return library_->alltoall(out, in, opts); });
}

Works MCCLBackend::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  CollectiveCall call("send", Movement::kData, getRank(), OpType::SEND);
  auto in = call.in(tensors);
  return call.run([&] { return library_->send(in, dst_rank, tag); });
}

Works MCCLBackend::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  CollectiveCall call("recv", Movement::kData, getRank(), OpType::RECV);
  auto out = call.out(tensors);
  return call.run([&] { return library_->recv(out, src_rank, tag); });
}

Works MCCLBackend::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  CollectiveCall call("recv", Movement::kData, getRank(), OpType::RECVANYSOURCE);
  auto out = call.out(tensors);
  return call.run([&] { return library_->recvAnysource(out, tag); });
}

Works MCCLBackend::barrier(const c10d::BarrierOptions& opts) {
  CollectiveCall call("barrier", Movement::kData, getRank(), OpType::BARRIER);
  c10d::BarrierOptions o = opts;
  if (o.device && o.device->type() == c10::DeviceType::PrivateUse1) {
    call.use_device(o.device->index());
    o.device = kernel_device().device_for(o.device->index());
  } else if (!gloo_) {
    call.use_device(current_device());  // NCCL's barrier is an all_reduce on the current device
    o.device = kernel_device().device_for(current_device());
  }
  if (gloo_) o.device.reset();
  return call.run([&] { return library_->barrier(o); });
}

void MCCLBackend::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  c10d::BarrierOptions o = opts;
  o.device.reset();
  library_->monitoredBarrier(o, wait_all_ranks);
}

void MCCLBackend::startCoalescing() { library_->startCoalescing(); }

Works MCCLBackend::endCoalescing() {
  CollectiveCall call("coalesced", Movement::kData, getRank(), OpType::COALESCED);
  call.use_device(current_device());
  return call.run([&] { return library_->endCoalescing(); });
}

c10::intrusive_ptr<c10d::Backend> MCCLBackend::split(const c10::intrusive_ptr<c10d::Store>& store,
                                                     const std::vector<int>& ranks,
                                                     const c10::intrusive_ptr<c10d::Backend::Options>& opts) {
  auto sub = library_->split(store, ranks, opts);
  if (!sub) return nullptr;  // this rank is not in the new group
  return c10::make_intrusive<MCCLBackend>(sub, sub->getRank(), sub->getSize());
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
