"""torch.nn.SwishGLU / torch.nn.functional.swish_glu / torch.swish_glu / torch.gated_silu:
torch_musa's fused SwiGLU. The input's last dimension is split in halves (a, b):
``swish_glu(x) = silu(a) * b`` in one pass (float arithmetic), and its backward in one pass.
Kernels: backend/fused_llm/swish_glu.cpp (host), swish_glu_kernels.cu (cuda)."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.overrides import handle_torch_function, has_torch_function_unary

from ._common import check_float, ops


def swish_glu(input: Tensor) -> Tensor:
    """silu(first half) * second half of the last dimension, fused (as torch_musa's F.swish_glu)."""
    if has_torch_function_unary(input):
        return handle_torch_function(swish_glu, (input,), input)
    return ops._fused_swiglu_forward(input)


def gated_silu(input: Tensor) -> Tensor:
    """torch_musa's torch.gated_silu: the same function as swish_glu, on inputs of 2+ dimensions."""
    if has_torch_function_unary(input):
        return handle_torch_function(gated_silu, (input,), input)
    if input.dim() < 2:
        raise ValueError(f"gated_silu: the input must have at least 2 dimensions, got {tuple(input.shape)}")
    return ops._fused_swiglu_forward(input)


class SwishGLU(torch.nn.Module):
    """``SwishGLU()(x) = silu(x[..., :n]) * x[..., n:]`` with 2n = x.shape[-1]."""

    def forward(self, input: Tensor) -> Tensor:
        return swish_glu(input)


def _check(x: Tensor, op: str) -> None:
    check_float(x, op, "the input")
    if x.dim() < 1 or x.shape[-1] % 2:
        raise ValueError(f"musa_fused::{op}: the input's last dimension must be even (two halves), "
                         f"got {tuple(x.shape)}")


@torch.library.register_fake("musa_fused::_fused_swiglu_forward")
def _fake_forward(input):
    _check(input, "_fused_swiglu_forward")
    return input.new_empty((*input.shape[:-1], input.shape[-1] // 2))


@torch.library.register_fake("musa_fused::_fused_swiglu_backward")
def _fake_backward(grad, input):
    _check(input, "_fused_swiglu_backward")
    return torch.empty_like(input, memory_format=torch.contiguous_format)


# Autograd: backend/fused_llm/autograd.cpp (C++, for the host cost of these host-bound ops on the GPU).


