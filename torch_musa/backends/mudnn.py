"""``torch.backends.mudnn``: the convolution-library flags torch_musa programs set, as
``torch.backends.cudnn`` has them (``enabled``, ``benchmark``, ``deterministic``, ``allow_tf32``,
``flags(...)``, ``set_flags``, ``version()``).

musa's convolutions are the kernel device's: ATen's CPU kernels on the host driver, ATen's
cuDNN convolutions on the cuda driver. The flags are the ATen settings those convolutions read,
so setting one here governs musa's convolutions on both drivers. ``allow_tf32`` defaults to
False, as torch_musa's: float32 convolutions keep float32 accuracy unless asked otherwise.
"""
import sys
import types
from contextlib import contextmanager

import torch

from .._core import device as _device

_FLAGS = {
    "enabled": (torch._C._get_cudnn_enabled, torch._C._set_cudnn_enabled),
    "benchmark": (torch._C._get_cudnn_benchmark, torch._C._set_cudnn_benchmark),
    "deterministic": (torch._C._get_cudnn_deterministic, torch._C._set_cudnn_deterministic),
    "allow_tf32": (torch._C._get_cudnn_allow_tf32, torch._C._set_cudnn_allow_tf32),
}


def is_available() -> bool:
    return _device.is_available()


# The muDNN level whose features musa's ops provide, on every driver: torch_musa's sources gate
# features on muDNN versions (2800, 3000: multi-latent-attention RoPE, 3100: fused-bias
# convolution and graph-captured dropout seeds, kernel choices with the same results), and
# programs do too (`mudnn.version() >= 3000` enables MLA RoPE tests). musa's RoPE implements
# MLA (torch_musa/nn/fused_ops/rope.py), so it reports 3000.
_FEATURE_LEVEL = 3000


def version():
    """The muDNN feature level musa provides (an int, as torch_musa's ``version()``), or None
    when no musa device is available (as torch.backends.cudnn.version() without cuDNN)."""
    return _FEATURE_LEVEL if is_available() else None


def set_flags(_enabled=None, _benchmark=None, _deterministic=None, _allow_tf32=None):
    """Sets the given flags; returns the previous values (in this order) for restoring."""
    orig = tuple(get() for get, _ in _FLAGS.values())
    for value, (_, setter) in zip((_enabled, _benchmark, _deterministic, _allow_tf32), _FLAGS.values()):
        if value is not None:
            setter(bool(value))
    return orig


@contextmanager
def flags(enabled=False, benchmark=False, deterministic=False, allow_tf32=False):
    orig = set_flags(enabled, benchmark, deterministic, allow_tf32)
    try:
        yield
    finally:
        set_flags(*orig)


class _MudnnModule(types.ModuleType):
    def __getattr__(self, name):
        if name in _FLAGS:
            return _FLAGS[name][0]()
        raise AttributeError(f"module 'torch.backends.mudnn' has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name in _FLAGS:
            if not isinstance(value, bool):
                raise TypeError(f"torch.backends.mudnn.{name} must be a bool, got {type(value).__name__}")
            _FLAGS[name][1](value)
            return
        super().__setattr__(name, value)


def _install():
    module = sys.modules[__name__]
    module.__class__ = _MudnnModule
    sys.modules["torch.backends.mudnn"] = module
    torch.backends.mudnn = module
    torch._C._set_cudnn_allow_tf32(False)  # torch_musa's default
