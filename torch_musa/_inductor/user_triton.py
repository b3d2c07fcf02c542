"""User Triton kernels (``@triton.jit``, ``triton.autotune``) called with musa tensors.

Triton launches a kernel on CUDA's current device and stream (its driver asks torch.cuda).
On the cuda driver musa memory is CUDA memory, so the kernel runs, but the musa stream's
work is on the musa stream's own CUDA stream: the launch must be ordered there, as an
eager musa op is (backend/ops/kernel_device_cuda.cpp makes the musa stream CUDA's current
stream for each op). Here a launch with a musa tensor argument runs with the musa device
and its current stream made CUDA's current device and stream, the launch's only change.
``torch.library.triton_op``/``wrap_triton`` in eager mode launch through the same call;
compiled graphs launch user kernels on the musa stream Inductor passes explicitly.

On the host driver there is no GPU for Triton's code: such a launch stops with an error
that names the cuda driver, instead of Triton's own "0 active drivers".
"""
from __future__ import annotations

import functools

import torch

from .. import _C

_TYPE = "musa"
_HOST_DRIVER_MESSAGE = (
    "a Triton kernel was called with musa tensors on torch_musa's host driver, where musa memory is host "
    "memory and Triton has no GPU to run on: Triton kernels need the cuda driver (TORCH_MUSA_DRIVER=cuda "
    "on a machine with an NVIDIA GPU). On the host driver run the computation with torch ops, or "
    "torch.compile it (Inductor compiles C++ kernels there)"
)


def _musa_index(args, kwargs) -> int | None:
    """The device index of the first musa tensor among a launch's arguments, if any."""
    for a in (*args, *kwargs.values()):
        t = a if isinstance(a, torch.Tensor) else getattr(a, "base", None)  # tensor descriptors keep a base
        if isinstance(t, torch.Tensor) and t.device.type == _TYPE:
            return t.device.index or 0
    return None


@functools.lru_cache(maxsize=64)
def _cuda_stream(raw: int, ordinal: int) -> "torch.cuda.Stream":
    # The same CUDA stream object each time for a musa stream's handle (a launch is hot).
    return torch.cuda.ExternalStream(raw, device=torch.device("cuda", ordinal))


def _on_musa_stream(run):
    """``run`` with CUDA's current device and stream those of the musa tensors' device."""

    @functools.wraps(run)
    def launch(self, *args, **kwargs):
        index = _musa_index(args, kwargs)
        if index is None:
            return run(self, *args, **kwargs)
        if _C._driver_name() != "cuda":
            raise RuntimeError(_HOST_DRIVER_MESSAGE)
        ordinal = _C._driver_ordinal(index)
        with torch.cuda.device(ordinal), torch.cuda.stream(_cuda_stream(_C._current_raw_stream(index), ordinal)):
            return run(self, *args, **kwargs)

    launch.__torch_musa_launch__ = True
    return launch


def _wrap_run(cls) -> None:
    if not getattr(cls.run, "__torch_musa_launch__", False):
        cls.run = _on_musa_stream(cls.run)


def register_jit(module) -> None:
    """On ``triton.runtime.jit``'s load: kernels launched through ``kernel[grid](...)``."""
    _wrap_run(module.JITFunction)


def register_autotuner(module) -> None:
    """On ``triton.runtime.autotuner``'s load: an autotuned kernel's benchmarks (which time on CUDA's
    current stream) and its launch, on the musa stream too."""
    _wrap_run(module.Autotuner)
