// The direct path's small matrix products: mm, addmm, bmm, baddbmm (structured; the CPU's impl()
// calls its BLAS through cpublas with pointers, no DispatchStub of the device).
#include "ops/host_direct/direct.h"

#include <ATen/ops/addmm_native.h>
#include <ATen/ops/baddbmm_native.h>
#include <ATen/ops/bmm_native.h>
#include <ATen/ops/mm_native.h>

namespace torch_musa::op_layer::direct {

void register_linear_algebra(torch::Library& lib) {
  using namespace at::native;
  Structured<structured_mm_out_cpu>::add(lib, "mm", nullptr, "mm.out");
  Structured<structured_addmm_out_cpu>::add(lib, "addmm", "addmm_", "addmm.out");
  Structured<structured_bmm_out_cpu>::add(lib, "bmm", nullptr, "bmm.out");
  Structured<structured_baddbmm_out_cpu>::add(lib, "baddbmm", "baddbmm_", "baddbmm.out");
}

}  // namespace torch_musa::op_layer::direct
