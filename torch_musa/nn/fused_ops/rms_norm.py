"""Fused RMSNorm: torch_musa's _fused_rmsnorm_forward/backward (in the musa_fused namespace), and
F.rms_norm / nn.RMSNorm on musa tensors taking them, as torch_musa's rms_norm does. torch's
aten::rms_norm is a composite op; its musa path is a kernel for the AutogradPrivateUse1 key
(torch's composite stays the kernel of every other device; a float64 input or a weight of
another dtype takes the composite on musa too). DTensors take the fused op with its sharding
rules (sharding.py). torch's own aten::_fused_rms_norm (and backward) take the fused op on musa
too. Kernels: backend/fused_llm/rms_norm.cpp (host); on the cuda driver torch's own CUDA kernels."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from ._common import FLOAT_DTYPES, check_float, cuda_impl, ops, route_musa

# torch's default eps for rms_norm: float32's machine epsilon (opmath of float/half/bfloat16).
_DEFAULT_EPS = torch.finfo(torch.float32).eps


def fused_rms_norm(input: Tensor, normalized_shape, weight: Tensor | None = None,
                   eps: float | None = None) -> Tensor:
    """RMSNorm in one pass forward and one backward (the fused op's output)."""
    eps = _DEFAULT_EPS if eps is None else eps
    return ops._fused_rmsnorm_forward(input, list(normalized_shape), eps, weight)[0]


def _check(x: Tensor, shape, w: Tensor | None, op: str) -> int:
    check_float(x, op, "the input")
    k = len(shape)
    if not 1 <= k <= x.dim() or list(x.shape[x.dim() - k:]) != list(shape):
        raise ValueError(f"musa_fused::{op}: normalized_shape {list(shape)} does not match the input's trailing "
                         f"dimensions {tuple(x.shape)}")
    n = math.prod(shape)
    if w is not None:
        if w.numel() != n:
            raise ValueError(f"musa_fused::{op}: weight {tuple(w.shape)} must have normalized_shape {list(shape)}")
        if w.dtype != x.dtype:
            raise ValueError(f"musa_fused::{op}: weight is {w.dtype}, the input {x.dtype}; they must match "
                             "(cast the weight or use autocast)")
    return n


@torch.library.register_fake("musa_fused::_fused_rmsnorm_forward")
def _fake_forward(input, normalized_shape, eps, weight=None):
    _check(input, normalized_shape, weight, "_fused_rmsnorm_forward")
    rows = input.shape[: input.dim() - len(normalized_shape)]
    return (torch.empty_like(input, memory_format=torch.contiguous_format),
            input.new_empty(rows, dtype=torch.float32))


@torch.library.register_fake("musa_fused::_fused_rmsnorm_backward")
def _fake_backward(grad_out, invvar, input, normalized_shape, eps, weight=None):
    _check(input, normalized_shape, weight, "_fused_rmsnorm_backward")
    dw = torch.empty_like(weight) if weight is not None else input.new_empty((0,))
    return torch.empty_like(input, memory_format=torch.contiguous_format), dw


# Autograd: backend/fused_llm/autograd.cpp (C++, for the host cost of these host-bound ops on the GPU).


# On the cuda driver the fused op runs torch's own fused RMSNorm CUDA kernels (what F.rms_norm runs
# on cuda tensors) over the CUDA aliases: 2.3x faster forward+backward than a Triton kernel of ours
# on an H100 (0.224 against 0.516 ms, Llama-7B shapes), and no JIT on the first call.
def _cuda_forward(input, normalized_shape, eps, weight=None):
    _check(input, normalized_shape, weight, "_fused_rmsnorm_forward")
    rows = input.shape[: input.dim() - len(normalized_shape)]
    if input.numel() == 0:
        out = torch.empty_like(input, memory_format=torch.contiguous_format)
        return out, input.new_empty(rows, dtype=torch.float32)
    out, rstd = torch.ops.aten._fused_rms_norm.default(input.contiguous(), list(normalized_shape), weight, eps)
    return out, rstd.reshape(rows).float()


def _cuda_backward(grad_out, invvar, input, normalized_shape, eps, weight=None):
    _check(input, normalized_shape, weight, "_fused_rmsnorm_backward")
    if input.numel() == 0:
        dw = torch.zeros_like(weight) if weight is not None else input.new_empty((0,))
        return torch.empty_like(input, memory_format=torch.contiguous_format), dw
    k = len(normalized_shape)
    rstd = invvar.reshape(*invvar.shape, *([1] * k))
    dx, dw = torch.ops.aten._fused_rms_norm_backward.default(
        grad_out.to(input.dtype).contiguous(), input.contiguous(), list(normalized_shape), rstd, weight,
        [True, weight is not None])
    return dx, (dw if weight is not None else input.new_empty((0,)))


cuda_impl("_fused_rmsnorm_forward", _cuda_forward)
cuda_impl("_fused_rmsnorm_backward", _cuda_backward)


def _musa_rms_norm(input, normalized_shape, weight=None, eps=None):
    """aten::rms_norm for musa tensors (AutogradPrivateUse1): the fused op where it applies."""
    if input.dtype in FLOAT_DTYPES and (weight is None or weight.dtype == input.dtype):
        return fused_rms_norm(input, normalized_shape, weight, eps)
    return torch.ops.aten.rms_norm.default.decompose(input, normalized_shape, weight, eps)


ROUTED = route_musa("rms_norm", _musa_rms_norm)


# torch's own fused op, aten::_fused_rms_norm (and its backward, which torch's autograd formula
# calls), has kernels for CUDA and MPS only: on musa it takes the fused op too, where this torch has
# them. Its rstd keeps the normalized dimensions as 1s; other dtypes take torch's decompositions.
def _aten_fused_rms_norm(input, normalized_shape, weight=None, eps=None):
    op = torch.ops.aten._fused_rms_norm.default
    if input.dtype not in FLOAT_DTYPES or (weight is not None and weight.dtype != input.dtype):
        return torch._decomp.decomposition_table[op](input, normalized_shape, weight, eps)
    eps = _DEFAULT_EPS if eps is None else eps
    out, invvar = ops._fused_rmsnorm_forward(input, list(normalized_shape), eps, weight)
    return out, invvar.reshape(*invvar.shape, *([1] * len(normalized_shape)))


def _aten_fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    op = torch.ops.aten._fused_rms_norm_backward.default
    if input.dtype not in FLOAT_DTYPES or (weight is not None and weight.dtype != input.dtype):
        dx, dw = torch._decomp.decomposition_table[op](grad_out, input, normalized_shape, rstd, weight, output_mask)
        return (dx if dx is not None else torch.zeros_like(input),
                dw if dw is not None else input.new_empty((0,)))
    rows = input.shape[: input.dim() - len(normalized_shape)]
    return ops._fused_rmsnorm_backward(grad_out, rstd.reshape(rows), input, list(normalized_shape), 0.0, weight)


def _register_aten_fused() -> bool:
    names = ("_fused_rms_norm", "_fused_rms_norm_backward")
    if not all(hasattr(torch.ops.aten, n) for n in names):  # a torch without them keeps the composite
        return False
    global _aten_fused_lib
    _aten_fused_lib = torch.library.Library("aten", "IMPL")
    _aten_fused_lib.impl("_fused_rms_norm", _aten_fused_rms_norm, "PrivateUse1")
    _aten_fused_lib.impl("_fused_rms_norm_backward", _aten_fused_rms_norm_backward, "PrivateUse1")
    return True


_aten_fused_lib = None
ATEN_FUSED = _register_aten_fused()
