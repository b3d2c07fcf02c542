"""``torch.backends.musa``: musa's matmul precision flags, as ``torch.backends.cuda.matmul``, and
attention's backend switches, as ``torch.backends.cuda``'s.

musa's matmuls are the kernel device's (cuBLAS on the cuda driver), so the flags are the ATen
settings those read: ``matmul.allow_tf32`` is the one ``torch.set_float32_matmul_precision``
sets ("highest" is False, the default; "high" is True), and the reduced-precision reduction
flags are cuBLAS's: ``matmul`` reads and writes them through ``torch.backends.cuda.matmul``, so
each answers as torch.cuda's does. On the host driver the CPU's matmuls have no TF32: the flags
are kept, and change nothing there.
"""
import sys
import types

import torch

#: The same ATen settings musa's matmuls read; torch's own object parses each flag as its version
#: defines it (the reduced-precision flags' (allow, allow_split_k) pairs, fp32_precision, ...).
_CUDA_MATMUL = torch.backends.cuda.matmul
_BOOL_FLAGS = ("allow_tf32", "allow_fp16_accumulation")


class _MatmulFlags:
    def __getattr__(self, name):
        try:
            return getattr(_CUDA_MATMUL, name)
        except AttributeError:
            raise AttributeError(f"torch.backends.musa.matmul has no attribute '{name}'") from None

    def __setattr__(self, name, value):
        self.__getattr__(name)  # an unknown flag raises, naming musa's module
        if name in _BOOL_FLAGS and not isinstance(value, bool):
            raise TypeError(f"torch.backends.musa.matmul.{name} must be a bool, got {type(value).__name__}")
        setattr(_CUDA_MATMUL, name, value)


matmul = _MatmulFlags()

# Scaled-dot-product attention's backend switches, as torch.backends.cuda's: they set ATen's
# global choice, which musa's attention reads (the kernel device's on the cuda driver).
_CUDA = torch.backends.cuda
enable_flash_sdp, flash_sdp_enabled = _CUDA.enable_flash_sdp, _CUDA.flash_sdp_enabled
enable_mem_efficient_sdp, mem_efficient_sdp_enabled = _CUDA.enable_mem_efficient_sdp, _CUDA.mem_efficient_sdp_enabled
enable_math_sdp, math_sdp_enabled = _CUDA.enable_math_sdp, _CUDA.math_sdp_enabled
enable_cudnn_sdp, cudnn_sdp_enabled = _CUDA.enable_cudnn_sdp, _CUDA.cudnn_sdp_enabled
allow_fp16_bf16_reduction_math_sdp = _CUDA.allow_fp16_bf16_reduction_math_sdp
fp16_bf16_reduction_math_sdp_allowed = _CUDA.fp16_bf16_reduction_math_sdp_allowed
sdp_kernel = _CUDA.sdp_kernel


def is_built() -> bool:
    return True


def _install():
    module = sys.modules[__name__]
    sys.modules["torch.backends.musa"] = module
    torch.backends.musa = module
