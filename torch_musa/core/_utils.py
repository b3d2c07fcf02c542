"""``torch_musa.core._utils``: device-index helpers torch_musa programs and extensions call."""
from typing import Any, Union

import torch
from torch._utils import _get_device_index

DeviceUnion = Union[torch.device, int, str, None]


def _get_musa_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> int:
    """The musa device index of ``device`` (torch.cuda._utils._get_device_index's counterpart):
    an int as given; ``None``, ``"musa"`` or ``torch.device("musa")`` the current device; a
    ``torch.musa.device`` context its index; a cpu device -1 when ``allow_cpu``. Any other
    device type is a ValueError naming it."""
    import torch_musa

    if device is None:
        if not torch_musa.is_available():
            raise ValueError("no musa device is available (torch.musa.is_available() is False)")
        return torch_musa.current_device()
    if isinstance(device, int):
        return device
    if isinstance(device, torch_musa.device):
        return device.idx
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        allowed = ("musa", "cpu") if allow_cpu else ("musa",)
        if device.type not in allowed:
            raise ValueError(f"Expected a {' or '.join(allowed)} device, but got: {device}")
        if device.type == "musa" and device.index is None:
            return torch_musa.current_device()
    return _get_device_index(device, optional, allow_cpu)


def _dummy_type(name: str) -> type:
    """A placeholder class named ``name`` that cannot be instantiated (for names whose
    implementation is missing in this build)."""

    def _raise(obj, *args, **kwargs):
        raise RuntimeError(f"Tried to instantiate dummy base class {name}")

    return type(name, (object,), {"__init__": _raise, "__new__": _raise})


__all__ = ["DeviceUnion", "_get_musa_device_index", "_dummy_type"]
