"""Registers the fused casts' CUDA kernels (Triton) for the cuda driver. The op layer delegates
a musa call of musa_fp8::cast_* to the kernel device's kernel: ATen's CPU kernel device has the
C++ kernels (backend/fp8), the CUDA kernel device these. Triton loads on the first call."""

from __future__ import annotations

import torch

_lib = None


def _checked(x, dtype, op):
    if dtype not in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise ValueError(f"musa_fp8::{op}: float8_dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")
    if x.dtype not in (torch.float32, torch.bfloat16, torch.float16):
        raise ValueError(f"musa_fp8::{op}: the input must be float32, bfloat16 or float16, got {x.dtype}")


def _cast_tensorwise(x, float8_dtype, transpose=False, power_of_2=False, scale=None):
    _checked(x, float8_dtype, "cast_tensorwise")
    if scale is not None and (scale.numel() != 1 or scale.dtype != torch.float32):
        raise ValueError("musa_fp8::cast_tensorwise: a given scale must be a float32 tensor of one element")
    from . import _triton_casts

    return _triton_casts.cast_tensorwise(x, float8_dtype, transpose, power_of_2, scale)


def _cast_rowwise(x, float8_dtype, power_of_2=False):
    _checked(x, float8_dtype, "cast_rowwise")
    if x.dim() != 2:
        raise ValueError(f"musa_fp8::cast_rowwise: the input must be 2-D, got {x.dim()} dimensions")
    from . import _triton_casts

    return _triton_casts.cast_rowwise(x, float8_dtype, power_of_2)


def register_cuda_kernels() -> None:
    """Once, where torch is a CUDA build (the cuda driver's kernel device). Registering touches no GPU."""
    global _lib
    if _lib is not None or torch.version.cuda is None:
        return
    _lib = torch.library.Library("musa_fp8", "IMPL")
    _lib.impl("cast_tensorwise", _cast_tensorwise, "CUDA")
    _lib.impl("cast_rowwise", _cast_rowwise, "CUDA")
