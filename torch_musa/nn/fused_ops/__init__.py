"""torch_musa's fused LLM ops, added to torch's namespaces as torch_musa adds them:

    torch.nn.RoPE, torch.nn.functional.rope, torch.rope                 (rope.py)
    torch.nn.SwishGLU, torch.nn.functional.swish_glu, torch.swish_glu, torch.gated_silu  (swish_glu.py)
    F.rms_norm / nn.RMSNorm on musa -> musa_fused::_fused_rmsnorm_forward/backward      (rms_norm.py)
    F.cross_entropy on 2-D musa logits -> the fused 2-D cross entropy                   (cross_entropy.py)

Each is an op of the musa_fused library (schemas, host kernels and the cuda driver's CUDA
kernels in backend/fused_llm; RMSNorm's on the cuda driver are torch's own) with autograd and
fake kernels, so it traces under torch.compile and torch.export; the fused RMSNorm has DTensor sharding rules (sharding.py).
A name torch already has is never replaced. See docs/fused_ops.md.
"""

from __future__ import annotations

import torch

from . import cross_entropy, rms_norm, rope, sharding, swish_glu  # noqa: F401  (registrations)
from .cross_entropy import cross_entropy_loss_2d_choice, fused_cross_entropy
from .rms_norm import fused_rms_norm
from .rope import RoPE
from .rope import rope as rope_fn
from .swish_glu import SwishGLU, gated_silu, swish_glu as swish_glu_fn

_ADDED = {
    torch.nn: {"RoPE": RoPE, "SwishGLU": SwishGLU},
    torch.nn.functional: {"rope": rope_fn, "swish_glu": swish_glu_fn},
    torch: {"rope": rope_fn, "swish_glu": swish_glu_fn, "gated_silu": gated_silu},
}


def _add_names() -> None:
    for module, names in _ADDED.items():
        for name, obj in names.items():
            if not hasattr(module, name):  # added, never replacing a torch name
                setattr(module, name, obj)


_add_names()

__all__ = ["RoPE", "SwishGLU", "cross_entropy_loss_2d_choice", "fused_cross_entropy", "fused_rms_norm", "gated_silu",
           "rope_fn", "swish_glu_fn"]
