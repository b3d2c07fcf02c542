"""torch_musa.optim: the fused optimizers torch_musa programs import (FusedAdam, FusedAdamW,
FusedLAMB)."""
from .fused_adam import FusedAdam, FusedAdamW
from .fused_lamb import FusedLAMB

__all__ = ["FusedAdam", "FusedAdamW", "FusedLAMB"]
