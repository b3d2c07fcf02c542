"""``torch_musa._export``: torch._export's loader for AOTInductor shared libraries, for musa.

``aot_load(so_path, "musa")`` runs a library ``torch._inductor.aot_compile`` built from a musa
graph. Such a library is a model of musa's kernel device (see torch_musa/_inductor/aoti_wrapper.py):
a CPU model over musa memory on the host driver, a CUDA model on the cuda driver. So the library
is loaded by torch's own loader for that device; it takes and returns musa tensors.
"""
from __future__ import annotations

from typing import Callable

import torch

from .. import _C
from .._core import device as _device

__all__ = ["aot_load", "kernel_device"]


def kernel_device(device: str | torch.device) -> str:
    """The device torch's AOTInductor runtime loads a model compiled for ``device`` on:
    ``cpu`` stays; ``musa[:i]`` is ``cpu`` (host driver) or ``cuda:<i's ordinal>`` (cuda driver)."""
    dev = torch.device(device)
    if dev.type == "cpu":
        return "cpu"
    if dev.type != "musa":
        raise RuntimeError(f"torch_musa loads AOTInductor models for 'musa' or 'cpu', not {str(device)!r}: "
                           f"use torch's own loader for {dev.type}")
    if _device.get_driver_name() != "cuda":
        return "cpu"
    index = dev.index if dev.index is not None else _device.current_device()
    return f"cuda:{_C._driver_ordinal(index)}"


def aot_load(so_path: str, device: str) -> Callable:
    """Loads a library built by ``torch._inductor.aot_compile`` (as ``torch._export.aot_load``)
    for ``device`` ("musa", "musa:i" or "cpu"); returns the callable model."""
    return torch._export.aot_load(so_path, kernel_device(device))
