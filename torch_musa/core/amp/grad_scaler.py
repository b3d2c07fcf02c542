"""``torch_musa.core.amp.grad_scaler``: torch.musa.amp.GradScaler and torch.amp's OptState."""
from torch.amp.grad_scaler import OptState, _MultiDeviceReplicator  # noqa: F401

from ...amp.grad_scaler import GradScaler  # noqa: F401

__all__ = ["GradScaler", "OptState"]
