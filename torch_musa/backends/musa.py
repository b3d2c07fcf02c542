"""``torch.backends.musa``: musa's matmul precision flags, as ``torch.backends.cuda.matmul``.

musa's matmuls are the kernel device's (cuBLAS on the cuda driver), so the flags are the ATen
settings those read: ``matmul.allow_tf32`` is the one ``torch.set_float32_matmul_precision``
sets ("highest" is False, the default; "high" is True), and the reduced-precision reduction
flags are cuBLAS's. On the host driver the CPU's matmuls have no TF32: the flags are kept, and
change nothing there.
"""
import sys
import types

import torch

_MATMUL = {
    "allow_tf32": (torch._C._get_cublas_allow_tf32, torch._C._set_cublas_allow_tf32),
    "allow_fp16_reduced_precision_reduction": (torch._C._get_cublas_allow_fp16_reduced_precision_reduction,
                                               torch._C._set_cublas_allow_fp16_reduced_precision_reduction),
    "allow_bf16_reduced_precision_reduction": (torch._C._get_cublas_allow_bf16_reduced_precision_reduction,
                                               torch._C._set_cublas_allow_bf16_reduced_precision_reduction),
}


class _MatmulFlags:
    def __getattr__(self, name):
        if name in _MATMUL:
            return _MATMUL[name][0]()
        raise AttributeError(f"torch.backends.musa.matmul has no attribute '{name}'")

    def __setattr__(self, name, value):
        if name not in _MATMUL:
            raise AttributeError(f"torch.backends.musa.matmul has no attribute '{name}'")
        if not isinstance(value, bool):
            raise TypeError(f"torch.backends.musa.matmul.{name} must be a bool, got {type(value).__name__}")
        _MATMUL[name][1](value)


matmul = _MatmulFlags()


def is_built() -> bool:
    return True


def _install():
    module = sys.modules[__name__]
    sys.modules["torch.backends.musa"] = module
    torch.backends.musa = module
