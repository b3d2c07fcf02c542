"""DTensor sharding rules of the fused RMSNorm, as torch_musa registers for its
_fused_rmsnorm_forward/backward: the rows may be sharded on any dimension before the normalized
ones (each rank normalizes its own rows), the weight is replicated, and the weight's gradient is
a partial sum over the ranks' rows. With them F.rms_norm on a DTensor runs the fused op on each
rank's shard. Through torch's public register_sharding (every supported torch has it), when
torch.distributed.tensor loads (importing it costs about a second; torch_musa does not)."""

from __future__ import annotations

import torch

from ..._import_hooks import after_import


def register(_module=None) -> bool:
    try:
        from torch.distributed.tensor import Partial, Replicate, Shard
        from torch.distributed.tensor.experimental import register_sharding
    except ImportError:  # torch without distributed
        return False
    ops = torch.ops.musa_fused

    @register_sharding(ops._fused_rmsnorm_forward.default)
    def _forward(input, normalized_shape, eps, weight=None):
        w = Replicate() if weight is not None else None
        rules = [([Replicate(), Replicate()], [Replicate(), None, None, w])]
        for d in range(input.ndim - len(normalized_shape)):
            rules.append(([Shard(d), Shard(d)], [Shard(d), None, None, w]))
        return rules

    @register_sharding(ops._fused_rmsnorm_backward.default)
    def _backward(grad_out, invvar, input, normalized_shape, eps, weight=None):
        w = Replicate() if weight is not None else None
        rules = [([Replicate(), Replicate()], [Replicate(), Replicate(), Replicate(), None, None, w])]
        for d in range(input.ndim - len(normalized_shape)):
            dw = Partial() if weight is not None else Replicate()
            rules.append(([Shard(d), dw], [Shard(d), Shard(d), Shard(d), None, None, w]))
        return rules

    return True


after_import("torch.distributed.tensor", register)
