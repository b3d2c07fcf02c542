"""``torch_musa.core.amp``: torch.musa.amp under torch_musa's module path."""
from .autocast_mode import autocast, custom_bwd, custom_fwd  # noqa: F401
from .grad_scaler import GradScaler, OptState  # noqa: F401

__all__ = ["autocast", "custom_bwd", "custom_fwd", "GradScaler", "OptState"]
