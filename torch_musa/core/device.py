"""``torch_musa.core.device``: device management, torch.musa's own functions under
torch_musa's module path (``Device``/``DeviceOf`` are its names for ``torch.musa.device``/``device_of``)."""
from .._core.device import (  # noqa: F401
    _DeviceGuard, _exchange_device, _maybe_exchange_device, can_device_access_peer, current_device,
    device_count, get_device_capability, get_device_name, get_device_properties, is_available,
    is_bf16_supported, is_tf32_supported, set_device, synchronize,
)
from .._core.device import device as Device  # noqa: F401
from .._core.device import device_of as DeviceOf  # noqa: F401
from ._utils import _get_musa_device_index  # noqa: F401  (torch_musa.core.memory imports it from here)

__all__ = [
    "Device", "DeviceOf", "can_device_access_peer", "current_device", "device_count", "get_device_capability",
    "get_device_name", "get_device_properties", "is_available", "is_bf16_supported", "is_tf32_supported",
    "set_device", "synchronize",
]
