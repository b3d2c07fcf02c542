"""Inductor's Python wrapper for musa.

Only one thing differs from the wrapper Inductor uses for CPU and CUDA: on the
host driver the kernels are C++ functions (no Triton, no stream argument), and
Inductor calls those directly only for ``cpu`` devices. musa's host memory is
what those kernels read and write, so they are called the same way.
"""
from __future__ import annotations

from torch._inductor.codegen.wrapper import PythonWrapperCodegen, SubgraphPythonWrapperCodegen
from torch._inductor.virtualized import V


class _HostKernelCalls:
    def _generate_kernel_call_helper(self, kernel_name: str, call_args, *, device=None, triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if not triton and device.type == "musa":
            self.writeline(self.wrap_kernel_call(kernel_name, call_args))
            return
        super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)


class MusaSubgraphPythonWrapperCodegen(_HostKernelCalls, SubgraphPythonWrapperCodegen):
    """Wrapper of a subgraph (control flow, partitions) on musa."""


class MusaPythonWrapperCodegen(_HostKernelCalls, PythonWrapperCodegen):
    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            assert subgraph_name is not None and parent_wrapper is not None
            return MusaSubgraphPythonWrapperCodegen(subgraph_name, parent_wrapper, partition_signatures)
        return MusaPythonWrapperCodegen()
