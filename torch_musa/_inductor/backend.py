"""Inductor's code generation for musa, registered through torch's PrivateUse1 hooks.

Inductor asks the device module for ``Scheduling`` and friends (``torch.musa.<name>``,
resolved lazily so importing torch_musa never imports Inductor); resolving it imports
this module, which registers musa's complete backend. What runs depends on the driver,
because generated kernels work directly on musa memory:

* both drivers: musa's per-device pass (:mod:`.kernel_device_pass`) turns each musa
  graph into the kernel device's graph over the same memory (CPU on the host driver,
  CUDA on the cuda driver), so Inductor's own code for that device runs on musa memory;
  on the cuda driver its device code runs inside kernel regions (the device guard below);
* cuda driver, graphs the pass leaves on musa (reduce-overhead, AOTInductor, collectives):
  musa memory is CUDA memory, so musa graphs become Triton kernels (TritonScheduling),
  launched on the current musa stream's CUDA stream; ``musa`` joins Inductor's GPU
  device types. On the host driver CppScheduling stays registered for musa for whatever
  is left on the device.

The wrapper is Inductor's Python wrapper (:mod:`.wrapper`); buffers it allocates on
musa are musa tensors, and ops without a lowering run as aten calls through the op
layer. The musa DeviceOpOverrides are the lines the wrapper emits for device guards
and raw streams.
"""
from __future__ import annotations

from torch._inductor.codegen.common import DeviceOpOverrides, get_device_op_overrides, register_device_op_overrides

from .kernel_device_pass import KernelDevicePass, marks_kernel_regions
from .kernel_device_pass import on_gpu as _on_gpu

_TYPE = "musa"


class MusaDeviceOpOverrides(DeviceOpOverrides):
    """Lines of the generated Python wrapper that talk to the device."""

    def import_get_raw_stream_as(self, name: str) -> str:
        # the C function itself: generated code asks once per kernel call site, each graph call
        return f"from torch_musa._C import _current_raw_stream as {name}"

    def set_device(self, device_idx: int) -> str:
        if _in_kernel_regions():
            return "pass  # (the kernel region sets the device)"
        return f"torch.musa.set_device({device_idx})"

    def synchronize(self) -> str:
        return "torch.musa.synchronize()"

    def device_guard(self, device_idx: int) -> str:
        if _in_kernel_regions():
            # A musa graph compiled as a CUDA graph: its CUDA kernels, extern calls and buffers
            # run on the current musa stream and musa memory (same index: the pass checks it).
            return f"torch.musa._C._KernelRegion({device_idx})"
        return f"torch.musa._DeviceGuard({device_idx})"

    def current_stream(self) -> str:
        return "torch.musa.current_stream()"


def _in_kernel_regions() -> bool:
    """Whether the graph being generated is a musa graph the pass made a CUDA graph."""
    from torch._inductor.virtualized import V

    return marks_kernel_regions(getattr(V.graph, "module", None))


def _scheduling():
    # A class, not a factory: Inductor tells Triton backends by subclass checks.
    if _on_gpu():
        from torch._inductor.codegen.triton import TritonScheduling

        return TritonScheduling
    from torch._inductor.codegen.cpp import CppScheduling

    return CppScheduling


def _python_wrapper():
    from . import wrapper

    return wrapper.MusaPythonWrapperCodegen


def _cpp_wrapper():
    if _on_gpu():
        from .aoti_wrapper_gpu import MusaCppWrapperGpu

        return MusaCppWrapperGpu
    from .aoti_wrapper import MusaCppWrapperCpu

    return MusaCppWrapperCpu


def _fx_wrapper():
    from torch._inductor.codegen.wrapper_fxir import WrapperFxCodegen

    return WrapperFxCodegen


def _register() -> None:
    from torch._inductor.codegen.common import register_backend_for_device

    # torch's own table first: torch 2.11 fills it (cuda's, cpu's) only while it is empty, so
    # an entry added before would leave "cuda" out of it.
    get_device_op_overrides("cpu")
    register_device_op_overrides(_TYPE, MusaDeviceOpOverrides())
    if _on_gpu():
        from torch._inductor import utils

        if _TYPE not in utils.GPU_TYPES:
            # Inductor's single-GPU-type query (which constructors to move to "the" GPU,
            # interconnect tables) must keep answering "cuda" once musa, which runs on the
            # same GPUs, is a GPU type too: it is cached, so ask it first.
            utils.get_gpu_type()
            utils.GPU_TYPES.append(_TYPE)
    device_pass = KernelDevicePass()
    register_backend_for_device(_TYPE, _scheduling(), _python_wrapper(), _cpp_wrapper(), _fx_wrapper(),
                                device_custom_pass=device_pass)


_register()

#: What ``torch.musa.<name>`` answers for Inductor's PrivateUse1 hook names. Inductor
#: registers a backend from all four of them, without a device pass; resolving
#: ``Scheduling`` imports this module, which has registered musa's complete backend
#: by then, so ``CppWrapperCodegen`` is left unanswered and Inductor keeps it.
DEVICE_MODULE_ATTRS = {"Scheduling": _scheduling, "PythonWrapperCodegen": _python_wrapper}
