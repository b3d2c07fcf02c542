"""``torch_musa.distributed.fsdp``: FSDP's gradient scaler for musa, as torch_musa programs import it."""
from .sharded_grad_scaler import ShardedGradScaler

__all__ = ["ShardedGradScaler"]
