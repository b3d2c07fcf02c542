"""``torch_musa.core.amp.autocast_mode``: torch.musa.amp's autocast and custom_fwd/custom_bwd."""
from ...amp import autocast, custom_bwd, custom_fwd  # noqa: F401

__all__ = ["autocast", "custom_fwd", "custom_bwd"]
