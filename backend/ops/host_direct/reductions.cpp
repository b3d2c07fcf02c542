// The direct path's reductions: sum (structured, over sum_stub), mean, which the CPU computes as a
// sum then a division (its mean_stub serves other devices: another algorithm, other roundings), and
// the softmax family (structured; the CPU's impl() names its kernels' device itself).
#include "ops/host_direct/direct.h"

#include <ATen/native/Fill.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/cpu/SoftmaxKernel.h>
#include <ATen/ops/_log_softmax_backward_data_native.h>
#include <ATen/ops/_log_softmax_native.h>
#include <ATen/ops/_softmax_backward_data_native.h>
#include <ATen/ops/_softmax_native.h>
#include <ATen/ops/mean_native.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/sum_native.h>

namespace torch_musa::op_layer::direct {
namespace {

using Dims = at::OptionalIntArrayRef;
using Dtype = std::optional<at::ScalarType>;

// How many elements each output element of a reduction over `dim` averages (the CPU's count).
int64_t reduced_count(const at::Tensor& self, Dims dim) {
  if (!dim.has_value() || dim->empty() || self.dim() == 0) return self.numel();
  int64_t n = 1;
  for (int64_t d : *dim) n *= self.size(d);
  return n;
}

bool reduced_float(c10::ScalarType t) { return t == at::kHalf || t == at::kBFloat16; }

// The CPU's mean into `out` (its dtype given by meta()): half types sum in float, then convert.
// (Its ops run inside the mean's launch: one device activity, as for any op.)
at::Tensor mean_into(at::Tensor out, const at::Tensor& self, Dims dim, bool keepdim) {
  const c10::ScalarType dtype = out.scalar_type();
  const int64_t n = reduced_count(self, dim);
  if (!reduced_float(dtype)) {
    at::sum_out(out, self, dim, keepdim, dtype).div_(n);
    return out;
  }
  at::Tensor acc = out.to(at::kFloat);
  at::sum_out(acc, self, dim, keepdim, at::kFloat).div_(n);
  return acc.to(dtype);
}

void register_mean(torch::Library& lib) {
  using Base = at::native::structured_mean_out;
  lib.impl("mean.dim", torch::CppFunction([h = handle("mean.dim")](c10::DispatchKeySet ks, const at::Tensor& self,
                                                                   Dims dim, bool keepdim, Dtype dtype) {
    Gate g;
    g.musa(self);
    if (!g.ready()) return delegated<at::Tensor>(h, ks, self, dim, keepdim, dtype);
    NewOutput<Base> s(g.device);
    s.meta(self, dim, keepdim, dtype);
    at::Tensor r;
    launch(h, g.device, [&] { r = mean_into(std::move(s.out), self, dim, keepdim); });
    return r;
  }));
  // (out= of a half type stays delegated: the CPU's own code replaces the caller's tensor there)
  lib.impl("mean.out", torch::CppFunction([h = handle("mean.out")](c10::DispatchKeySet ks, const at::Tensor& self,
                                                                   Dims dim, bool keepdim, Dtype dtype,
                                                                   at::Tensor& out) -> at::Tensor& {
    Gate g;
    g.musa(out);
    g.musa(self);
    if (g.ready()) {
      GivenOutput<Base> s(out, true);
      s.meta(self, dim, keepdim, dtype);
      if (!s.defer && !reduced_float(out.scalar_type())) {
        launch(h, g.device, [&] { mean_into(out, self, dim, keepdim); });
        return out;
      }
    }
    return delegated<at::Tensor&>(h, ks, self, dim, keepdim, dtype, out);
  }));
}

}  // namespace

void register_reductions(torch::Library& lib) {
  // (the CPU's sum kernel starts with fill_: pointwise.cpp runs it direct)
  forward_to_cpu(at::native::sum_stub, at::native::fill_stub);
  Structured<at::native::structured_sum_out>::add(lib, "sum.dim_IntList", nullptr, "sum.IntList_out");
  register_mean(lib);
  using namespace at::native;
  Structured<structured_softmax_cpu_out>::add(lib, "_softmax", nullptr, "_softmax.out");
  Structured<structured_log_softmax_cpu_out>::add(lib, "_log_softmax", nullptr, "_log_softmax.out");
  Structured<structured_softmax_backward_cpu_out>::add(lib, "_softmax_backward_data", nullptr,
                                                       "_softmax_backward_data.out");
  Structured<structured_log_softmax_backward_cpu_out>::add(lib, "_log_softmax_backward_data", nullptr,
                                                           "_log_softmax_backward_data.out");
}

}  // namespace torch_musa::op_layer::direct
