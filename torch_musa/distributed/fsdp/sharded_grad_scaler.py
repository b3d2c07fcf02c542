"""``ShardedGradScaler`` for musa: torch's FSDP gradient scaler (shard-aware unscaling, CPU-offloaded
gradients, the inf/NaN found on any rank skips the step on every rank) with musa as its device.

torch's own ``torch.distributed.fsdp.sharded_grad_scaler.ShardedGradScaler(device="musa")`` is the
same scaler; this name is the one torch_musa programs use, whose signature has no device. For FSDP2
(``fully_shard``) ``torch.amp.GradScaler("musa")`` works as well, as ``GradScaler("cuda")`` does.
"""
from __future__ import annotations

import torch.distributed as dist
from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler as _TorchShardedGradScaler


class ShardedGradScaler(_TorchShardedGradScaler):
    """Gradient scaling for sharded training on musa.

    Args: as ``torch.amp.GradScaler`` (``init_scale``, ``backoff_factor``, ``growth_factor``,
    ``growth_interval``, ``enabled``), and ``process_group`` (default: the default group), over which
    ranks agree on whether any gradient held an inf or NaN.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        backoff_factor: float = 0.5,
        growth_factor: float = 2.0,
        growth_interval: int = 2000,
        enabled: bool = True,
        process_group: dist.ProcessGroup | None = None,
    ) -> None:
        super().__init__(
            device="musa",
            init_scale=init_scale,
            backoff_factor=backoff_factor,
            growth_factor=growth_factor,
            growth_interval=growth_interval,
            enabled=enabled,
            process_group=process_group,
        )


__all__ = ["ShardedGradScaler"]
