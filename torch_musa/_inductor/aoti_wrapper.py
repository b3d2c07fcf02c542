"""AOTInductor (and Inductor's C++ wrapper) for musa graphs on the host driver.

On the host driver the kernel-device pass has turned a musa graph into the CPU
graph over the same memory: its only musa parts are its inputs and the boundary
ops (``torch_musa::to_kernel_device`` / ``from_kernel_device`` /
``copy_from_kernel_device_``), which the generated C++ calls through the
dispatcher like any custom op (AOTInductor's proxy executor). Everything else is
Inductor's CPU C++ code. So the model Inductor builds is a CPU model -- what
AOTInductor can build and load: its runtime knows only cpu/cuda/xpu/mps devices --
that takes musa tensors and returns musa tensors. This wrapper says so: the graph's
device type becomes ``cpu`` for the C++ code, its build and its package (the
package's runner is torch's CPU runner), and musa's headers are CPU's.
"""
from __future__ import annotations

import torch
from torch._inductor.codegen.cpp_wrapper_cpu import CppWrapperCpu
from torch._inductor.virtualized import V

_MUSA = "musa"
_KERNEL_DEVICE = "cpu"


def _kernel_device(device: str) -> str:
    return _KERNEL_DEVICE if device == _MUSA else device


class MusaCppWrapperCpu(CppWrapperCpu):
    """C++ wrapper of a host-driver musa graph: a CPU model over musa inputs."""

    def __init__(self):
        super().__init__()
        # Read by the C++ build, the precompiled header and the package's device key;
        # all of them must be the kernel device's (the wrapper class is chosen already).
        V.graph.device_type = _kernel_device(V.graph.device_type)
        # Weights the pass did not see (buffers Inductor lifted itself, such as mutated ones)
        # are packaged as the CPU tensors over their memory too.
        constants_on_kernel_device()

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        return MusaCppWrapperCpu()

    def add_device_include(self, device: str, *args) -> None:
        # musa's headers are the kernel device's (every torch version includes through here).
        super().add_device_include(_kernel_device(device), *args)


def constants_on_kernel_device() -> None:
    """Makes the graph's musa weights, and the initial values Inductor kept of the ones the
    graph mutates, the kernel device's tensors over the same memory: what the model packages."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    try:
        from torch._inductor.utils import get_cloned_parameter_buffer_name
    except ImportError:  # a torch that keeps no separate initial values
        get_cloned_parameter_buffer_name = None
    graph = V.graph
    originals = getattr(getattr(graph, "module", None), "meta", None) or {}
    aliased = {}
    with unset_fake_temporarily():
        for name, value in list(graph.constants.items()):
            if _is_musa_tensor(value):
                aliased[name] = value.device
                graph.constants[name] = torch.ops.torch_musa.to_kernel_device(value)
            if get_cloned_parameter_buffer_name is None:
                continue
            orig = get_cloned_parameter_buffer_name(graph.allocated_constant_name.get(name, name))
            if _is_musa_tensor(originals.get(orig)):
                originals[orig] = torch.ops.torch_musa.to_kernel_device(originals[orig])
    if aliased:
        if "constant_name" not in vars(graph):  # (one wrapper per graph; later calls add to its names)
            graph._musa_aliased_constants = {}
            graph.constant_name = _musa_constant_name(graph.constant_name, graph._musa_aliased_constants)
        graph._musa_aliased_constants.update(aliased)


def _musa_constant_name(constant_name, aliased):
    """GraphLowering.constant_name for a graph whose musa constants became their kernel-device
    aliases: a kernel that reads one on musa (the cuda driver's Triton kernels are musa's) reads
    the alias, which is the same memory, instead of asking for a copy to musa (cuda to musa is
    no copy the op layer makes)."""

    def name_on(name, device_override):
        was = aliased.get(name)
        if (was is not None and device_override is not None and device_override.type == _MUSA
                and device_override.index in (None, was.index)):
            return name
        return constant_name(name, device_override)

    return name_on


def _is_musa_tensor(value) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == _MUSA
