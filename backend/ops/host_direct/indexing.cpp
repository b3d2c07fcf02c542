// The direct path's indexing and joining: index_select (the CPU's own function: loops and
// copy_stub over its operands' memory), gather (structured, gather_stub) and cat (structured;
// cat_serial_stub or copy_stub per input).
#include "ops/host_direct/direct.h"

#include <ATen/native/Copy.h>
#include <ATen/native/TensorAdvancedIndexing.h>
#include <ATen/native/cpu/CatKernel.h>
#include <ATen/ops/cat_native.h>
#include <ATen/ops/gather_native.h>
#include <ATen/ops/index_select_native.h>

namespace torch_musa::op_layer::direct {
namespace {

using Base = at::native::structured_cat_out_cpu;

// Inputs of one dtype (`dtype`): the CPU converts mixed ones through TensorIterator temporaries.
bool all_of_dtype(const at::ITensorListRef& tensors, c10::ScalarType dtype) {
  for (const at::Tensor& t : tensors)
    if (t.scalar_type() != dtype) return false;
  return true;
}

// meta() then impl(); false when the given output needs a layout it lacks (meta() only resized it).
template <class Out>
bool run_cat(const c10::OperatorHandle& h, c10::DeviceIndex device, Out& s, const at::ITensorListRef& tensors,
             int64_t dim, const at::Tensor& out) {
  auto p = s.meta(tensors, dim);
  if (s.defer) return false;
  launch(h, device, [&] {
    s.impl(tensors, p.dim, p.valid, p.all_contiguous, p.all_same_dtype, p.all_same_sizes_and_stride, p.memory_format,
           out);
  });
  return true;
}

void register_cat(torch::Library& lib) {
  lib.impl("cat", torch::CppFunction([h = handle("cat")](c10::DispatchKeySet ks, const at::ITensorListRef& tensors,
                                                         int64_t dim) {
    Gate g;
    g.arg(tensors, kPlain);
    if (g.ready() && all_of_dtype(tensors, tensors.front().scalar_type())) {
      NewOutput<Base> s(g.device);
      run_cat(h, g.device, s, tensors, dim, s.out);
      return std::move(s.out);
    }
    return delegated<at::Tensor>(h, ks, tensors, dim);
  }));
  lib.impl("cat.out", torch::CppFunction([h = handle("cat.out")](c10::DispatchKeySet ks,
                                                                 const at::ITensorListRef& tensors, int64_t dim,
                                                                 at::Tensor& out) -> at::Tensor& {
    Gate g;
    g.musa(out);
    g.arg(tensors, kPlain);
    if (g.ready() && all_of_dtype(tensors, out.scalar_type())) {
      GivenOutput<Base> s(out, true);
      if (run_cat(h, g.device, s, tensors, dim, out)) return out;
    }
    return delegated<at::Tensor&>(h, ks, tensors, dim, out);
  }));
}

}  // namespace

void register_indexing(torch::Library& lib) {
  forward_to_cpu(at::native::copy_stub, at::native::cat_serial_stub, at::native::gather_stub,
                 at::native::gather_expanded_index_stub);
  Native<&at::native::index_select_cpu_>::add(lib, "index_select");
  Native<&at::native::index_select_out_cpu_>::add(lib, "index_select.out");
  Structured<at::native::structured_gather_out>::add(lib, "gather", nullptr, "gather.out");
  register_cat(lib);
}

}  // namespace torch_musa::op_layer::direct
