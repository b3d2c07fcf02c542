"""Inductor's Python wrapper for musa.

What differs from the wrapper Inductor uses for CUDA:

* the kernel-device boundary ops are called as bound C++ functions (``_DIRECT_BOUNDARY``), their
  results carry no size or alignment asserts (``_UNASSERTED``), and musa devices are prebuilt objects;

* on the cuda driver, Triton kernels are declared as kernels of the CUDA device
  under the musa device (see ``define_kernel``);
* C++ kernels of a musa device (a graph the kernel-device pass did not move to
  CPU) are called directly, as Inductor does only for ``cpu`` devices: on the host
  driver musa memory is what those kernels read and write.
"""
from __future__ import annotations

import re

import torch
from torch._inductor import config
from torch._inductor.codegen.wrapper import (ExitDeviceContextManagerLine, PythonWrapperCodegen,
                                             SubgraphPythonWrapperCodegen)
from torch._inductor.virtualized import V

from .. import _C
from .._core import device as _device
from .._version_gate import inductor_writes_size_asserts_as_text
from .devices import DEVICES

from .kernel_device_pass import marks_kernel_regions, musa_results

_ASSERTS_AS_TEXT = inductor_writes_size_asserts_as_text()

_MUSA_TRITON_DEVICE = re.compile(r"DeviceProperties\(type='musa', index=(\d+)")


def as_cuda_kernel(kernel_body: str) -> str:
    """A musa Triton kernel's source, declared a kernel of the CUDA device under the musa one
    (cuda driver); idempotent."""
    return _MUSA_TRITON_DEVICE.sub(
        lambda m: f"DeviceProperties(type='cuda', index={_C._driver_ordinal(int(m.group(1)))}",
        kernel_body)


#: The kernel-device boundary ops, called directly from generated code: the torch_musa:: op
#: through the dispatcher costs about 2 us of host time per tensor (every input and output of
#: a compiled region crosses once), the bound C++ function a fraction of that.
_DIRECT_BOUNDARY = {
    "torch.ops.torch_musa.to_kernel_device.default": "torch.musa._C._to_kernel_device",
    "torch.ops.torch_musa.from_kernel_device.default": "torch.musa._C._from_kernel_device",
    "torch.ops.torch_musa.copy_from_kernel_device_.default": "torch.musa._C._copy_from_kernel_device_",
}


#: Size (and alignment) asserts Inductor would write on the boundary ops' results. Those results have their
#: argument's layout by construction (a graph input asserted just before, or Inductor's own
#: buffer), and each assert is a C++ call that builds a std::stringstream: about 6k instructions
#: per tensor per graph call on the host, the largest part of the boundary's cost.
_UNASSERTED = ("torch.ops.torch_musa.to_kernel_device.default", "torch.ops.torch_musa.from_kernel_device.default",
               "torch.ops.torch_musa.from_kernel_device.index",
               "torch.ops.torch_musa.borrow_from_kernel_device.default")
_UNASSERTED_LINE_ENDS = tuple(f"{name!r})" for name in _UNASSERTED)
_BOUNDARY_OUT = _DIRECT_BOUNDARY["torch.ops.torch_musa.from_kernel_device.default"]
#: Generated code names musa devices through prebuilt objects (``torch.musa._inductor.DEVICES[i]``):
#: ``device(type='musa', index=i)`` builds one per use per call (about 3k instructions each).
_DEVICE_OBJECTS = "torch.musa._inductor.DEVICES"


class _MusaKernelCalls:
    def codegen_device_guard_enter(self, device_idx, *args, **kwargs) -> None:
        # In a graph the kernel-device pass made a CUDA graph, musa and CUDA nodes alternate
        # (each boundary op is a musa node with a CUDA result) and both devices' guard is the
        # same kernel region. Inductor closes and reopens it at each switch: hundreds of
        # regions per training step at ~2 us each, where CUDA's wrapper opens one. The
        # region just closed with nothing after it stays open instead.
        num_streams = args[0] if args else kwargs.get("num_streams", 1)
        if (num_streams == 1 and self.lines and type(self.lines[-1]) is ExitDeviceContextManagerLine
                and self.last_seen_device_guard_index == device_idx and not config.triton.autotune_at_compile_time
                and marks_kernel_regions(getattr(V.graph, "module", None))):
            self.lines.pop()
            return
        super().codegen_device_guard_enter(device_idx, *args, **kwargs)

    def write_assert_size_stride(self, name, size, stride, op_name, *rest, **kwargs) -> None:
        # (later torch passes more, e.g. the dtype: handed on as given)
        if op_name in _UNASSERTED:
            return
        super().write_assert_size_stride(name, size, stride, op_name, *rest, **kwargs)

    def writeline(self, line) -> None:
        # (alignment asserts are always text lines: a boundary result has its argument's memory,
        # so its alignment too)
        if (isinstance(line, str) and line.endswith(_UNASSERTED_LINE_ENDS)
                and (line.startswith("assert_alignment(") or (_ASSERTS_AS_TEXT and line.startswith("assert_size_stride(")))):
            return
        super().writeline(line)

    def val_to_arg_str(self, s, type_=None):
        if isinstance(s, torch.device) and s.type == "musa" and s.index is not None and s.index < len(DEVICES):
            return f"{_DEVICE_OBJECTS}[{s.index}]"
        return super().val_to_arg_str(s, type_)

    def generate_fallback_kernel(self, node) -> None:
        direct = _DIRECT_BOUNDARY.get(getattr(node, "python_kernel_name", None))
        if direct is not None and not V.graph.cpp_wrapper:
            node.python_kernel_name = direct
        super().generate_fallback_kernel(node)

    def define_kernel(self, kernel_name: str, kernel_body: str, *args, **kwargs):
        # On the cuda driver a musa kernel is a kernel of the CUDA device under it: saying so
        # in its Triton metadata builds it for the NVIDIA target and launches it with
        # Inductor's static CUDA launcher (a few microseconds less per launch than Triton's
        # own). It still launches on the stream the wrapper passes: the musa stream.
        if _device.get_driver_name() == "cuda":
            kernel_body = as_cuda_kernel(kernel_body)
        return super().define_kernel(kernel_name, kernel_body, *args, **kwargs)

    def _generate_kernel_call_helper(self, kernel_name: str, call_args, *, device=None, triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == "musa":
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


class MusaSubgraphPythonWrapperCodegen(_MusaKernelCalls, SubgraphPythonWrapperCodegen):
    """Wrapper of a subgraph (control flow, partitions) on musa."""


class MusaPythonWrapperCodegen(_MusaKernelCalls, PythonWrapperCodegen):
    def get_output_refs(self):
        # A graph the kernel-device pass ran on returns kernel-device values; the musa ones go
        # back as musa tensors over the same memory here, in the return statement.
        refs = list(super().get_output_refs())
        handed_over = musa_results(getattr(V.graph, "module", None))
        if handed_over and handed_over[-1][0] >= len(refs):  # (the pass counted the graph's own outputs)
            raise RuntimeError(
                f"torch_musa: this torch's Inductor returns {len(refs)} results from a musa graph, but the graph had "
                f"more ({handed_over[-1][0] + 1} or more): its Inductor is not one torch_musa supports "
                f"(torch 2.11-2.15). Use a supported torch, or compile with backend='aot_eager'.")
        for i, device_index in handed_over:
            refs[i] = f"{_BOUNDARY_OUT}({refs[i]}, {_DEVICE_OBJECTS}[{device_index}])"
        return refs

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            assert subgraph_name is not None and parent_wrapper is not None
            return MusaSubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return MusaPythonWrapperCodegen()
