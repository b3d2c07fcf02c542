"""AOTInductor (and Inductor's C++ wrapper) for musa graphs on the cuda driver.

On the cuda driver musa memory is CUDA memory and musa graphs are compiled into
Triton kernels; AOTInductor's runtime knows only cpu/cuda/xpu/mps models. So the
model this wrapper writes is a CUDA model -- CUDA's headers, C shims, build, package
device key and runner -- whose edges are musa's:

* each musa input is seen as the CUDA tensor over the same memory
  (``torch_musa::to_kernel_device``, no copy) before any kernel uses it;
* each musa output is handed back as a musa tensor over the CUDA result's memory
  (``torch_musa::from_kernel_device.index``, no copy; a view of an input gets the
  input's own storage back);
* musa constants are packaged as the CUDA tensors over their memory.

Both edge ops are called through the dispatcher (``aoti_torch_call_dispatcher``):
torch_musa is loaded in any process that has musa tensors to pass.
"""
from __future__ import annotations

import torch
from torch._inductor.codegen.common import get_device_op_overrides
from torch._inductor.codegen.cpp_wrapper_gpu import CppWrapperGpu
from torch._inductor.virtualized import V

from .. import _C
from .aoti_wrapper import constants_on_kernel_device
from .wrapper import as_cuda_kernel

_MUSA = "musa"
_KERNEL_DEVICE = "cuda"

# Ownership: the edge helpers take (steal) the handle they are given and return one to own
# (the same one where there is nothing to do).
_EDGE_HELPERS = r"""
namespace {
// torch_musa's zero-copy edge ops between musa tensors and the CUDA tensors over them.
inline AtenTensorHandle torch_musa_edge_call(const char* overload, AtenTensorHandle t, int64_t index) {
  StableIValue stack[2];
  stack[0] = static_cast<StableIValue>(reinterpret_cast<uintptr_t>(t));
  stack[1] = static_cast<StableIValue>(index);
  const char* op = index < 0 ? "torch_musa::to_kernel_device" : "torch_musa::from_kernel_device";
  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_call_dispatcher(op, overload, stack));
  return reinterpret_cast<AtenTensorHandle>(static_cast<uintptr_t>(stack[0]));
}
inline AtenTensorHandle torch_musa_to_kernel_device(AtenTensorHandle t) {
  int32_t device_type = 0;
  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(t, &device_type));
  return device_type == aoti_torch_device_type_privateuse1() ? torch_musa_edge_call("", t, -1) : t;
}
inline AtenTensorHandle torch_musa_from_kernel_device(AtenTensorHandle t, int64_t musa_index) {
  return torch_musa_edge_call("index", t, musa_index);
}
// The CUDA stream under the current musa stream of `musa_index`.
inline void* torch_musa_current_stream(int64_t musa_index) {
  StableIValue stack[1] = {static_cast<StableIValue>(musa_index)};
  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_call_dispatcher("torch_musa::current_kernel_stream", "", stack));
  return reinterpret_cast<void*>(static_cast<uintptr_t>(stack[0]));
}
// A model's run stream: the caller's, unless that is only CUDA's current stream (what the
// CUDA runner passes when given none): then the current musa stream's.
template <typename Stream>
inline Stream torch_musa_run_stream(Stream given, int32_t cuda_index, int64_t musa_index) {
  void* cuda_current = nullptr;
  AOTI_TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(cuda_index, &cuda_current));
  if (reinterpret_cast<void*>(given) != cuda_current) return given;
  void* musa = torch_musa_current_stream(musa_index);
  return musa == nullptr ? given : reinterpret_cast<Stream>(musa);
}
}  // namespace
"""


def _kernel_device(device: str) -> str:
    return _KERNEL_DEVICE if device == _MUSA else device


def _is_musa(node) -> bool:
    get_device = getattr(node, "get_device", None)
    device = get_device() if get_device is not None else None
    return device is not None and device.type == _MUSA


class MusaCppWrapperGpu(CppWrapperGpu):
    """C++ wrapper of a cuda-driver musa graph: a CUDA model with musa edges."""

    def __init__(self):
        super().__init__()  # a CUDA wrapper already: Inductor's GPU type stays "cuda"
        self._use_kernel_device_codegen()
        # The C++ build, its headers and the package's device key (its runner) are CUDA's.
        V.graph.device_type = _kernel_device(V.graph.device_type)
        V.graph.device_ops = get_device_op_overrides(V.graph.device_type)
        constants_on_kernel_device()  # packaged (and checked) as CUDA tensors: the same memory

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        return MusaCppWrapperGpu()

    # -- device names: musa is the CUDA device under it ---------------------------------
    # (Instance methods taking *args: they override static and instance methods alike,
    # whatever the torch version's signature. Headers: every version includes through
    # add_device_include.)
    def add_device_include(self, device: str, *args) -> None:
        super().add_device_include(_kernel_device(device), *args)

    def get_c_shim_func_name(self, kernel: str, device: str, *args) -> str:
        return super().get_c_shim_func_name(kernel, _kernel_device(device), *args)

    def codegen_device(self, device, *args):
        return super().codegen_device(_as_kernel_device(device), *args)

    def codegen_device_idx(self, device, *args, **kwargs):
        return super().codegen_device_idx(_as_kernel_device(device), *args, **kwargs)

    # A Triton kernel is built for the CUDA device under the musa one (C++ kernels have no
    # such line). Both entry points, whichever a torch version routes kernels through; the
    # rewrite is idempotent.
    def define_kernel(self, kernel_name, kernel_body, *args, **kwargs):
        return super().define_kernel(kernel_name, as_cuda_kernel(kernel_body), *args, **kwargs)

    def _define_kernel_helper(self, kernel_name, kernel_body, *args, **kwargs):
        return super()._define_kernel_helper(kernel_name, as_cuda_kernel(kernel_body), *args, **kwargs)

    # -- the model's musa edges ---------------------------------------------------------
    def _use_kernel_device_codegen(self):
        # CUDA's code generation, whatever device this torch version's wrapper took from the
        # graph before the musa graph became a CUDA one (torch 2.11 took the CPU's, and its
        # header stopped on "kernel_driver"). CUDA's class itself: 2.11's table lookup skips
        # torch's own entries once a backend registered first (backend.py now fills it first).
        from torch._inductor.codegen.cuda.device_op_overrides import CUDADeviceOpOverrides

        self.device = _KERNEL_DEVICE
        self.device_codegen = CUDADeviceOpOverrides()

    def write_header(self):
        self._use_kernel_device_codegen()  # runs inside the base __init__, before ours resumes
        super().write_header()
        if not V.graph.is_const_graph:
            self.header.splice(_EDGE_HELPERS)

    def codegen_inputs(self):
        # Runs right after the inputs are unpacked into handles, before anything reads them.
        if V.graph.aot_mode and not V.graph.is_const_graph:
            # The run's stream (its kernels', and CUDA's current one for extern kernels under
            # the model's stream guard).
            self.prefix.writeline(
                f"stream = torch_musa_run_stream(stream, this->device_idx_, {_musa_index()});")
        elif not V.graph.aot_mode:
            # C++ wrapper mode: CUDA's current stream is the musa stream's for the whole call,
            # so Triton launches (which ask for it) and extern kernels follow it.
            musa = _musa_index()
            self.prefix.writeline(
                f"{self.device_codegen.cpp_aoti_stream_guard()} torch_musa_stream_guard("
                f"reinterpret_cast<{self.device_codegen.cpp_stream_type()}>(torch_musa_current_stream({musa})), "
                f"{_C._driver_ordinal(musa)});")
        if not V.graph.is_const_graph:
            names = [name for name, value in V.graph.graph_inputs.items() if _is_musa(value)]
            if not V.graph.aot_mode:  # the weights come as inputs too (musa tensors or not)
                names += list(V.graph.constants)
            for name in names:
                self.prefix.writeline(
                    f"{name} = RAIIAtenTensorHandle(torch_musa_to_kernel_device({name}.release()));")
        super().codegen_inputs()

    def generate_return(self, output_refs: list[str]):
        super().generate_return(output_refs)
        first_of: dict[str, int] = {}
        for idx, (ref, out) in enumerate(zip(output_refs, V.graph.graph_outputs)):
            if ref == "nullptr" or not _is_musa(out):
                continue
            if ref in first_of:  # the same result twice: the same musa tensor twice
                self.wrapper_call.writeline(f"output_handles[{idx}] = output_handles[{first_of[ref]}];")
                continue
            first_of[ref] = idx
            self.wrapper_call.writeline(
                f"output_handles[{idx}] = torch_musa_from_kernel_device(output_handles[{idx}], "
                f"{out.get_device().index or 0});")


def _musa_index() -> int:
    # The musa device the graph was compiled for (its inputs' device).
    return next(iter(V.graph.device_idxs), None) or 0


def _as_kernel_device(device):
    if isinstance(device, torch.device) and device.type == _MUSA:
        return torch.device(_KERNEL_DEVICE, device.index)
    return device
