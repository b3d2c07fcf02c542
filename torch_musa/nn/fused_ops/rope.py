"""torch.nn.RoPE / torch.nn.functional.rope / torch.rope: torch_musa's fused rotary position
embedding (Megatron's apply_rotary_pos_emb on the angles freq_cis).

input (seq, batch, heads, dim), or (batch, seq, heads, dim) with batch_first; freq_cis the angles,
(seq, rot_dim) or (seq, 1, 1, rot_dim), rot_dim <= dim and even: the first rot_dim features of each
head rotate by them, the rest pass through. rotary_interleaved rotates (even, odd) feature pairs
instead of the two halves; multi_latent_attention (DeepSeek's MLA) first reorders the rotated
features as evens then odds. Kernels: backend/fused_llm/rope.cpp (host), rope_kernels.cu (cuda).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.overrides import handle_torch_function, has_torch_function_variadic

from ._common import check_float, ops


def rope(input: Tensor, freq_cis: Tensor, rotary_interleaved: bool = False, batch_first: bool = False,
         multi_latent_attention: bool = False) -> Tensor:
    """Fused rotary position embedding (forward and backward), as torch_musa's F.rope."""
    if has_torch_function_variadic(input, freq_cis):
        return handle_torch_function(rope, (input, freq_cis), input, freq_cis, rotary_interleaved, batch_first,
                                     multi_latent_attention)
    return ops._fused_rope_forward(input, freq_cis, rotary_interleaved, batch_first, multi_latent_attention)


class RoPE(torch.nn.Module):
    """Rotary position embedding with its angles as a buffer: ``nn.RoPE(freq_cis)(x)`` is
    ``F.rope(x, freq_cis, ...)``."""

    def __init__(self, freq_cis: Tensor, rotary_interleaved: bool = False, batch_first: bool = False,
                 multi_latent_attention: bool = False) -> None:
        super().__init__()
        self.register_buffer("freq_cis", freq_cis)
        self.rotary_interleaved = rotary_interleaved
        self.batch_first = batch_first
        self.multi_latent_attention = multi_latent_attention

    def forward(self, input: Tensor) -> Tensor:
        return rope(input, self.freq_cis, self.rotary_interleaved, self.batch_first, self.multi_latent_attention)

    def extra_repr(self) -> str:
        return (f"rotary_interleaved={self.rotary_interleaved}, batch_first={self.batch_first}, "
                f"multi_latent_attention={self.multi_latent_attention}")


def check(x: Tensor, freq: Tensor, batch_first: bool, op: str) -> None:
    """The C++ kernels' checks (rope.h), for the fake kernels."""
    check_float(x, op, "the input")
    layout = "(batch, seq, heads, dim)" if batch_first else "(seq, batch, heads, dim)"
    if x.dim() != 4:
        raise ValueError(f"musa_fused::{op}: the input must be 4-D {layout}, got {tuple(x.shape)}")
    if not (freq.dim() == 2 or (freq.dim() == 4 and freq.shape[1] == 1 and freq.shape[2] == 1)):
        raise ValueError(f"musa_fused::{op}: freq_cis must be (seq, rot_dim) or (seq, 1, 1, rot_dim), "
                         f"got {tuple(freq.shape)}")
    seq = x.shape[1] if batch_first else x.shape[0]
    if freq.shape[0] != seq:
        raise ValueError(f"musa_fused::{op}: freq_cis has {freq.shape[0]} positions, the input's sequence "
                         f"dimension {seq}")
    if freq.shape[-1] % 2 or freq.shape[-1] > x.shape[3]:
        raise ValueError(f"musa_fused::{op}: freq_cis's last dimension ({freq.shape[-1]}) must be even and at "
                         f"most the head dimension ({x.shape[3]})")


@torch.library.register_fake("musa_fused::_fused_rope_forward")
def _fake_forward(input, freq_cis, rotary_interleaved, batch_first, multi_latent_attention=False):
    check(input, freq_cis, batch_first, "_fused_rope_forward")
    return torch.empty_like(input, memory_format=torch.contiguous_format)


@torch.library.register_fake("musa_fused::_fused_rope_backward")
def _fake_backward(grad, freq_cis, rotary_interleaved, batch_first, multi_latent_attention=False):
    check(grad, freq_cis, batch_first, "_fused_rope_backward")
    return torch.empty_like(grad, memory_format=torch.contiguous_format)


# Autograd: backend/fused_llm/autograd.cpp (C++, for the host cost of these host-bound ops on the GPU).


