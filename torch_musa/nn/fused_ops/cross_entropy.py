"""Fused 2-D cross entropy: F.cross_entropy on 2-D musa logits with class-index targets and no
label smoothing takes a fused path, as torch_musa's (which asks cross_entropy_loss_2d_choice and
runs _fused_cross_entropy_loss_2d_forward there). The GPU kernel reads the logits once forward
(each row's loss and log-sum-exp) and once backward (writing the gradient). The op reduces the rows
itself (mean over the targets' weights, sum, none) and writes the loss in its final dtype: on the
GPU this op is host-bound, and the reduction as separate torch ops (sum, compare, count, divide,
cast, and their backward nodes) cost more host time than the kernels. The loss has the logits'
dtype, as torch_musa's; under autocast float32, as CUDA's. torch's aten::cross_entropy_loss is a composite op; its musa path is a
kernel for the AutogradPrivateUse1 key, other devices keep torch's.
Kernels: backend/fused_llm/cross_entropy.cpp (host), cross_entropy_kernels.cu (cuda; compiled ahead of time,
not Triton: a JIT kernel's first launch loads Triton's front end, 0.5 s inside a first training step)."""

from __future__ import annotations

import torch
from torch import Tensor

from ._common import FLOAT_DTYPES, check_float, is_dtensor, ops, route_musa

_REDUCTIONS = {"none": 0, "mean": 1, "sum": 2}


def cross_entropy_loss_2d_choice(self: Tensor, target: Tensor, weight: Tensor | None = None, reduction: int = 1,
                                 ignore_index: int = -100, label_smoothing: float = 0.0) -> int:
    """1 where torch_musa's fused path applies (2-D floating logits, 1-D class indices), else 0."""
    return int(self.dim() == 2 and target.dim() == 1 and self.dtype in FLOAT_DTYPES
               and not target.is_floating_point() and not target.is_complex())


def fused_cross_entropy(input: Tensor, target: Tensor, weight: Tensor | None = None, reduction: str | int = "mean",
                        ignore_index: int = -100, out_dtype: torch.dtype | None = None) -> Tensor:
    """Cross entropy of 2-D logits (rows, classes) against class indices, fused. The loss has
    out_dtype, by default the logits' dtype."""
    red = _REDUCTIONS[reduction] if isinstance(reduction, str) else int(reduction)
    return ops._fused_cross_entropy_2d_forward(input, target, weight, ignore_index, red, out_dtype)[0]


def _check(x: Tensor, t: Tensor, w: Tensor | None, op: str, reduction: int = 0) -> None:
    check_float(x, op, "the logits")
    if x.dim() != 2:
        raise ValueError(f"musa_fused::{op}: the logits must be 2-D (rows, classes), got {tuple(x.shape)}")
    if t.dim() != 1 or t.shape[0] != x.shape[0] or t.is_floating_point():
        raise ValueError(f"musa_fused::{op}: the target must be {x.shape[0]} class indices (1-D integer), got "
                         f"{tuple(t.shape)} {t.dtype}")
    if reduction not in (0, 1, 2):
        raise ValueError(f"musa_fused::{op}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction}")
    if w is not None and w.numel() != x.shape[1]:
        raise ValueError(f"musa_fused::{op}: weight must have one entry per class ({x.shape[1]}), got "
                         f"{tuple(w.shape)}")


@torch.library.register_fake("musa_fused::_fused_cross_entropy_2d_forward")
def _fake_forward(self, target, weight, ignore_index, reduction=0, loss_dtype=None):
    _check(self, target, weight, "_fused_cross_entropy_2d_forward", reduction)
    loss_shape = (self.shape[0],) if reduction == 0 else ()
    return (self.new_empty(loss_shape, dtype=loss_dtype or self.dtype),
            self.new_empty((self.shape[0],), dtype=torch.float32), self.new_empty((), dtype=torch.float32))


@torch.library.register_fake("musa_fused::_fused_cross_entropy_2d_backward")
def _fake_backward(grad_loss, self, target, lse, denom, weight, ignore_index, reduction=0):
    _check(self, target, weight, "_fused_cross_entropy_2d_backward", reduction)
    return torch.empty_like(self, memory_format=torch.contiguous_format)


# Autograd: backend/fused_llm/autograd.cpp (C++, for the host cost of these host-bound ops on the GPU).


# Looked up once: per call, torch.ops' attribute lookups and the OpOverload's Python frame were
# about 0.8 µs of the route's host time (the native CPU's whole F.cross_entropy is about 6 µs).
_fused_forward = ops._fused_cross_entropy_2d_forward.default._op
_composite = torch.ops.aten.cross_entropy_loss.default.decompose


def _musa_cross_entropy_loss(self, target, weight=None, reduction=1, ignore_index=-100, label_smoothing=0.0):
    """aten::cross_entropy_loss for musa tensors (AutogradPrivateUse1): the fused op where
    torch_musa's choice says so and torch would not take its label-smoothing path first."""
    if label_smoothing == 0.0 and cross_entropy_loss_2d_choice(self, target) and not is_dtensor(self, target, weight) \
            and target.device == self.device and (weight is None or weight.device == self.device):
        # under autocast the loss is float32, as CUDA's (log_softmax is on autocast's float32 list)
        out_dtype = torch.float32 if torch.is_autocast_enabled(self.device.type) else self.dtype
        return _fused_forward(self, target, weight, int(ignore_index), reduction, out_dtype)[0]
    return _composite(self, target, weight, reduction, ignore_index, label_smoothing)


ROUTED = route_musa("cross_entropy_loss", _musa_cross_entropy_loss)
