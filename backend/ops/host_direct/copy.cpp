// The direct path's data movement within musa memory: copies between musa tensors of one device
// (the CPU's copy_stub over their memory; ops_native.cpp's copy asks here first), and resize_ (the
// CPU's, which grows a storage through the storage's own allocator: the musa one).
#include "ops/host_direct/direct.h"

#include <ATen/native/Copy.h>
#include <ATen/ops/resize_native.h>

#include "ops/host_direct.h"

namespace torch_musa::op_layer {
namespace {

// What the CPU's copy_ runs besides copy_stub, left to the delegation: FBGEMM's float <-> half
// conversion, the blocked transpose of large 2-D copies, the complex -> real warning.
bool cpu_copy_takes_another_path(const at::Tensor& dst, const at::Tensor& src) {
  const auto d = dst.scalar_type(), s = src.scalar_type();
  if ((d == at::kFloat && s == at::kHalf) || (d == at::kHalf && s == at::kFloat)) return true;
  if (src.is_complex() && !(dst.is_complex() || d == at::kBool)) return true;
  return d == s && dst.is_contiguous() && src.dim() == 2 && src.stride(0) == 1 && src.stride(1) == src.size(0) &&
         dst.sizes().equals(src.sizes()) && dst.numel() >= 60 * 60;
}

}  // namespace

bool host_direct_copy(const at::Tensor& dst, const at::Tensor& src) {
  if (!direct::registered()) return false;
  direct::Gate g;
  g.musa(dst);
  g.musa(src);
  if (!g.ready() || cpu_copy_takes_another_path(dst, src)) return false;
  // (views of the same data: nothing to copy, as the CPU's copy_ returns)
  if (dst.is_alias_of(src) && dst.storage_offset() == src.storage_offset() && dst.strides().equals(src.strides()) &&
      dst.sizes().equals(src.sizes()) && dst.scalar_type() == src.scalar_type() && dst.is_conj() == src.is_conj() &&
      dst.is_neg() == src.is_neg())
    return true;
  auto iter = at::TensorIteratorConfig()
                  .add_output(dst)
                  .add_const_input(src)
                  .resize_outputs(false)
                  .check_all_same_dtype(false)
                  .check_all_same_device(false)
                  .build();
  if (iter.numel() == 0) return true;
  direct::launch("Memcpy DtoD", g.device, [&] { at::native::copy_stub(kMusa, iter, false); },
                 profiler::ActivityKind::Memcpy);
  return true;
}

namespace direct {

void register_copy(torch::Library& lib) {
  forward_to_cpu(at::native::copy_stub);
  lib.impl("resize_", torch::CppFunction([h = handle("resize_")](c10::DispatchKeySet ks, const at::Tensor& self,
                                                                 c10::SymIntArrayRef size,
                                                                 std::optional<at::MemoryFormat> format)
                                             -> const at::Tensor& {
    Gate g;
    g.musa(self);
    if (g.ready()) {
      DeviceScope scope(g.device);  // (a grown storage comes from the musa allocator of self's device)
      return at::native::resize_(self, C10_AS_INTARRAYREF_SLOW(size), format);
    }
    delegated<void>(h, ks, self, size, format);
    return self;
  }));
}

}  // namespace direct

}  // namespace torch_musa::op_layer
